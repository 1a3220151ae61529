"""The examples under the real `parity bisect --external` (a free run of 6
steps of batch 32, mlp:784-32-10, on MNIST): each is within the rounding
spread (exit 0) in one process and at world 2 (mpi4py under mpirun, DDP
under torchrun at world 1 and 2); the learning-rate control (1e-3 relative)
leaves it in f64 at step 1, the step named, and the lockstep over step 1
names the violation (exit 1)."""
import os
import re
import unittest

import util
from util import DDP, HAVE_MPI4PY, HAVE_TORCH, MPI, SERIAL, need_parity, mnist_missing

RUN = ["bisect", "--dataset", "mnist", "--model", "mlp:784-32-10", "--act", "tanh",
       "--steps", "6", "--lr", "0.1", "--batch", "32"]


@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class FreeRunning(util.UnderParity):
    def bisect(self, cmd, *extra):
        rc, out = self.run_parity(*RUN, "--external", cmd, *extra)
        left = [f for f in os.listdir(self.tmp.name) if f.startswith("parity-ext")]
        self.assertEqual(left, [], "parity's private folder was left behind")
        return rc, out

    def within(self, cmd, dtype):
        rc, out = self.bisect(cmd, "--dtype", dtype)
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"against parity's reference and 5 runs under other orders "
                              r"\(serial exact chunk 1, serial exact chunk 16, serial fast, "
                              r"omp fast T=2, omp fast T=3\)")
        self.assertTrue(out.rstrip().endswith(": within rounding spread"), out)
        # Its weights differ from the reference's by more than parity's own
        # reorderings do (it reorders its forward sums too), well within
        # the spread and the step's bound.
        ratio = float(re.search(r"weights worst (\S+) of their spread and bound", out).group(1))
        self.assertLess(ratio, 0.1, out)

    def test_numpy_serial(self):
        for dtype in ("f32", "f64"):
            with self.subTest(dtype=dtype):
                self.within(SERIAL, dtype)

    @unittest.skipUnless(HAVE_MPI4PY, "python3-mpi4py is not installed")
    def test_mpi4py(self):
        self.within(MPI.format(w=2), "f32")

    @unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
    def test_torch_ddp(self):
        for world in (1, 2):
            with self.subTest(world=world):
                self.within(DDP.format(w=world), "f32")

    def test_lr_control(self):
        rc, out = self.bisect(f"{SERIAL} --bug lr", "--dtype", "f64")
        self.assertEqual(rc, 1, out)
        self.assertIn(": LEFT the rounding spread\n", out)
        # 1e-3 of a step's update is far past f64 rounding: the weights leave
        # after step 1 (the loss, a mean over the batch, at step 2).
        self.assertRegex(out, r"\nfirst step outside: step 2, loss ")
        self.assertRegex(out, r"\nfirst weights outside: after step 1, layer\d\.(weight|bias), ")
        self.assertIn("\nnarrowing in lockstep, steps 1..1:\n", out)
        self.assertRegex(out, r"\nfirst violation of the step's bound: step 1, layer")


if __name__ == "__main__":
    unittest.main()
