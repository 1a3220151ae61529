"""The PyTorch DDP example under the step protocol (fake_parity.py as
parity), each step from parity's reference state, f64, batch 17 (uneven
parts): one plain process and torchrun at world 1, 2 and 3 with an MLP, a
narrow MNIST CNN and a batchnorm CNN answer within 1e-10 of the reference; the
intermediates gathered from two ranks equal numpy_serial's; with batchnorm
at world 2 the answer moves away (each rank normalises with its own part of
the batch: what parity must report)."""
import os
import tempfile
import unittest

from util import EXAMPLES, HAVE_TORCH, PARITY, PYTHON, need_parity, mnist_missing
from fake_parity import ReferenceCase, feeds_bn_names, optim, worst
from parity_ext import spec

DDP = os.path.join(EXAMPLES, "torch_ddp.py")
PLAIN = [PYTHON, DDP]
# The MNIST CNN's layers at a quarter of its width (parity lockstep runs the
# full one; here the reference's f64 checkpoints of 3.2M weights cost most).
MLP, CNN = "mlp:784-24-10", "cnn:1x28x28-c8k3p1-r-f-fc32-r-fc10"
BN = "cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10"


def torchrun(world, *args):
    """torchrun of the example. --redirects 1 --tee 1: Debian's torchrun
    (torch 1.13, Python 3.11) fails at its default of 0 (its Std enum lookup
    misses the zero flag on Python 3.11); --standalone picks a free port."""
    return ["torchrun", "--standalone", "--nproc_per_node", str(world), "--redirects", "1",
            "--tee", "1", DDP, *args]


class TorchCase(ReferenceCase):
    """Runs trainers with their temporary files (torchrun's log folders) in a
    folder of the test, one thread per process."""
    PARITY = PARITY

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env = dict(os.environ, TMPDIR=tempfile.mkdtemp(dir=cls.tmp.name),
                       OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

    def run_torch(self, cmd, model, opt=None, intermediates=False):
        return self.steps(cmd, model, opt=opt, env=self.env, intermediates=intermediates)


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class TorchExample(TorchCase):
    def test_cnn_adam_one_process(self):
        o = optim("adam", 0.001)
        loss, (w, where) = self.errors(self.run_torch(PLAIN, CNN, o), CNN, opt=o)
        self.assertLess(loss, 1e-12)
        self.assertLess(w, 1e-10, where)

    def test_mlp_world2_intermediates(self):
        got = self.run_torch(torchrun(2), MLP, intermediates=True)
        loss, (w, where) = self.errors(got, MLP)
        self.assertLess(max(loss, w), 1e-12, where)
        serial = self.steps([PYTHON, os.path.join(EXAMPLES, "numpy_serial.py")], MLP,
                            intermediates=True)
        for (_, _, a), (_, _, b) in zip(got, serial):
            self.assertEqual(sorted(a), sorted(b))
            self.assertLess(worst(a, b)[0], 1e-12, worst(a, b))

    def test_cnn_momentum_world3(self):
        o = optim("momentum", 0.05)
        loss, (w, where) = self.errors(self.run_torch(torchrun(3), CNN, o), CNN, opt=o)
        self.assertLess(max(loss, w), 1e-10, where)

    def test_batchnorm(self):
        skip = feeds_bn_names(spec.parse(BN))
        loss, (w, where) = self.errors(self.run_torch(torchrun(1), BN), BN, skip=skip)
        self.assertLess(max(loss, w), 1e-10, where)
        loss, (w, where) = self.errors(self.run_torch(torchrun(2), BN), BN, skip=skip)
        self.assertGreater(loss, 1e-6)   # the forward pass itself differs
        self.assertGreater(w, 1e-6, where)


if __name__ == "__main__":
    unittest.main()
