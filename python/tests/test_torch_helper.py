"""parity_ext.torch_helper against parity's reference in f64: the module of a
spec names its tensors as parity's views; one step from parity's initial
weights gives parity's loss and weights (tests/tools/torch_crosscheck.py, 1e-12);
parity's optimizer state after a step of momentum, nesterov or Adam, loaded
into torch, gives parity's next step; the captured intermediates of an MLP
equal an independent NumPy computation (python/examples/mlp.py)."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import numpy as np

from util import EXAMPLES, HAVE_TORCH, PARITY, ROOT, need_parity, mnist_missing
from fake_parity import optim, reference_run, worst
from parity_ext import spec

if HAVE_TORCH:
    import torch
    from parity_ext import torch_helper as th
    sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
    sys.path.insert(0, EXAMPLES)
    import torch_crosscheck
    import mlp

SPECS = ["mlp:784-32-10", "cnn:1x28x28-c4k3p1-r-m2-c8k3-r-m2-f-fc10",
         "cnn:1x28x28-c4k3p1-bn-r-m2-f-fc16-bn-r-fc10", "cnn:1x28x28-c3k5p2s2-th-f-fc16-sg-fc10"]


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
class Module(unittest.TestCase):
    def test_names_are_parity_views(self):
        for s in SPECS:
            with self.subTest(spec=s):
                net = th.model_from_spec(s)
                views = spec.parse(s).views()
                self.assertEqual(list(net.state_dict()), [n for n, _ in views])
                w = th.weights(net, "f64")
                self.assertEqual([(n, a.shape) for n, a in w.items()], views)

    def test_weights_round_trip(self):
        s = SPECS[2]
        rng = np.random.default_rng(2)
        state = {n: rng.standard_normal(shape) for n, shape in spec.parse(s).views()}
        state["layer1.num_batches_tracked"] = np.array([7.0])
        state["layer4.num_batches_tracked"] = np.array([0.0])
        net = th.model_from_spec(s)
        th.load_weights(net, state)
        self.assertEqual(int(net.layer1.num_batches_tracked), 7)
        back = th.weights(net, "f64")
        self.assertTrue(all(back[k].tobytes() == state[k].tobytes() for k in state))


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class AgainstParity(unittest.TestCase):
    def test_one_step_crosscheck(self):
        """torch_crosscheck.py for one step: loss and weights within 1e-12."""
        for s, opt in zip(SPECS, ("sgd", "sgd", "sgd", "adam")):
            with self.subTest(spec=s):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    rc = torch_crosscheck.main([PARITY, "--model", s, "--optim", opt,
                                                "--lr", "0.01", "--steps", "1", "--batch", "16",
                                                "--dataset", "mnist", "--tol", "1e-12"])
                self.assertEqual(rc, 0, out.getvalue())
                self.assertIn("PASS", out.getvalue())

    def test_optimizer_state_carried(self):
        """parity's state after step 1 (velocity, or m, v and t = 1) into torch,
        then torch's step 2 against parity's step 2."""
        torch.set_default_dtype(torch.float64)
        for name, lr in (("momentum", 0.05), ("nesterov", 0.05), ("adam", 0.01)):
            with self.subTest(optim=name), tempfile.TemporaryDirectory() as tmp:
                o = optim(name, lr)
                states, batches, losses = reference_run(PARITY, tmp, SPECS[0], opt=o, steps=2)
                net = th.model_from_spec(SPECS[0])
                opt = th.make_optimizer(net, o, "f64")
                th.load_state(net, opt, name, states[1], optim_t=1)
                x = torch.from_numpy(batches[1]["x"])
                y = torch.from_numpy(batches[1]["labels"].astype(np.int64))
                loss = th.sample_losses(net(x), y).mean()
                loss.backward()
                opt.step()
                self.assertAlmostEqual(loss.item(), losses[1], delta=1e-13 * losses[1])
                err, where = worst(th.full_state(net, opt, name, "f64", states[1]), states[2])
                self.assertLess(err, 1e-12, where)


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
class Intermediates(unittest.TestCase):
    def test_capture_equals_numpy(self):
        model = spec.parse("mlp:12-7-5-3", "tanh")
        rng = np.random.default_rng(4)
        state = {n: rng.standard_normal(s) * 0.5 for n, s in model.views()}
        x, y = rng.random((6, 12)), rng.integers(0, 3, 6)
        net = th.ParityNet(model)
        th.load_weights(net, state)
        net.capture = th.Capture()
        losses = th.sample_losses(net(torch.from_numpy(x)), torch.from_numpy(y))
        losses.mean().backward()
        got = {**net.capture.arrays(), **th.gradients(net), "loss.samples": losses.detach().numpy()}

        ps = mlp.params(state, model)
        outs = mlp.forward(ps, x, model)
        ls, p = mlp.softmax_xent(outs[-1], y)
        grads, dzs = mlp.backward(ps, outs, mlp.dlogits(p, y, 6), model)
        want = {**mlp.rows(outs, dzs, ls), **mlp.grad_arrays(grads)}
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-15, err_msg=k)


if __name__ == "__main__":
    unittest.main()
