"""The examples under the real `parity lockstep --external` (f64, 3 steps of
batch 32, mlp:784-32-10): each passes (exit 0, PASS) in one process, under
mpirun at world 3 and under torchrun at world 2, with and without
intermediates; each negative control fails it (exit 1, a first violation
named), the ones about ranks at world 2. A batchnorm CNN (f32) passes in one
process; at world 2 DDP's per-rank batch statistics fail it, named."""
import json
import unittest

import util
from util import DDP, HAVE_MPI4PY, HAVE_TORCH, MPI, SERIAL, need_parity, mnist_missing

RUN = ["lockstep", "--dataset", "mnist", "--model", "mlp:784-32-10", "--act", "tanh",
       "--dtype", "f64", "--steps", "3", "--lr", "0.1", "--batch", "32"]


@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class UnderParity(util.UnderParity):
    def lockstep(self, cmd, *extra):
        return self.run_parity(*RUN, "--external", cmd, *extra)

    def passes(self, cmd, *extra):
        rc, out = self.lockstep(cmd, *extra)
        self.assertEqual(rc, 0, out)
        self.assertIn("0 violations", out)
        self.assertIn(": PASS", out)

    def fails(self, cmd, *extra):
        rc, out = self.lockstep(cmd, *extra)
        self.assertEqual(rc, 1, out)
        self.assertIn(": FAIL", out)
        self.assertIn("first violation", out)

    def test_numpy_serial(self):
        self.passes(SERIAL)
        self.passes(SERIAL, "--intermediates")
        for bug in ("world", "lr", "stale", "drop"):
            with self.subTest(bug=bug):
                self.fails(f"{SERIAL} --bug {bug}")
        self.fails(f"{SERIAL} --bug tf32", "--intermediates")

    def test_times_reported(self):
        # --json: the trainer's own step seconds (parity_ext's loop sends them
        # with every answer) and parity's side by part, which add up to at
        # most its total.
        rc, out = self.lockstep(SERIAL, "--json")
        self.assertEqual(rc, 0, out)
        d = json.loads(out)
        self.assertEqual(d["steps_trainer_timed"], 3)
        self.assertGreater(d["seconds_trainer"], 0)
        parts = d["seconds_parity_parts"]
        self.assertEqual(sorted(parts), ["bound", "checks", "files", "step"])
        self.assertTrue(all(v >= 0 for v in parts.values()), parts)
        self.assertLessEqual(sum(parts.values()), d["seconds_parity"] * (1 + 1e-9) + 1e-6)

    @unittest.skipUnless(HAVE_MPI4PY, "python3-mpi4py is not installed")
    def test_mpi4py(self):
        self.passes(MPI.format(w=3), "--intermediates")
        self.fails(MPI.format(w=2) + " --bug unreduced")

    @unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
    def test_torch_ddp(self):
        self.passes(DDP.format(w=2), "--intermediates")
        self.fails(DDP.format(w=2) + " --bug unreduced")

    @unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
    def test_torch_batchnorm(self):
        bn = ["lockstep", "--dataset", "mnist", "--model", "cnn:1x28x28-c4k3p1-bn-r-m2-f-fc10",
              "--steps", "2", "--batch", "16", "--intermediates", "--external"]
        rc, out = self.run_parity(*bn, DDP.format(w=1))
        self.assertEqual(rc, 0, out)
        self.assertIn(": PASS", out)
        rc, out = self.run_parity(*bn, DDP.format(w=2))
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, r"first violation of its own ops: step 1, layer1\.out\[.*"
                              r"\[batchnorm forward, relu, from its own input\]")
        self.assertIn("batchnorm at world 2: each rank normalising its own samples", out)


if __name__ == "__main__":
    unittest.main()
