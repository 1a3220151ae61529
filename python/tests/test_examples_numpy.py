"""The NumPy examples under the step protocol (fake_parity.py as parity),
each step from parity's reference state: numpy_serial.py and
mpi4py_fullbatch.py at world 1, 2 and 3 (batch 17: uneven slices) answer
within 1e-12 of the reference in f64 (1e-5 in f32), their intermediates
agree, train mode follows the reference; and each --bug is caught: some
step lands further than 1e-9 from the reference."""
import os
import subprocess
import unittest

import numpy as np

from util import EXAMPLES, HAVE_MPI4PY, PARITY, PYTHON, need_parity, mnist_missing
from fake_parity import FakeParity, ReferenceCase, sgd, worst

SERIAL = [PYTHON, os.path.join(EXAMPLES, "numpy_serial.py")]
MODEL = "mlp:784-24-10"
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")


def mpi4py(world, *args):
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(world), PYTHON,
            os.path.join(EXAMPLES, "mpi4py_fullbatch.py"), *args]


@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class NumpyExamples(ReferenceCase):
    PARITY = PARITY

    def test_serial(self):
        for act in ("relu", "sigmoid", "tanh"):
            with self.subTest(act=act):
                loss, (w, where) = self.errors(self.steps(SERIAL, MODEL, act), MODEL, act)
                self.assertLess(loss, 1e-12)
                self.assertLess(w, 1e-12, where)
        got = self.steps(SERIAL, MODEL, "sigmoid", dtype="f32")
        loss, (w, where) = self.errors(got, MODEL, "sigmoid", dtype="f32")
        self.assertLess(max(loss, w), 1e-5, where)

    def test_serial_run(self):
        states, batches, losses = self.ref(MODEL, "sigmoid")
        with FakeParity(SERIAL) as p:
            p.hello(MODEL, act="sigmoid", batch=self.BATCH, optim=sgd(0.1))
            ans, log, saved = p.run(states[0], np.array([b["records"] for b in batches]),
                                    [self.STEPS])
            self.assertEqual(ans, {"op": "run", "steps": self.STEPS})
            self.assertEqual([s["step"] for s in log], list(range(1, self.STEPS + 1)))
            self.assertTrue(all(s["seconds"] > 0 for s in log), log)
            np.testing.assert_allclose([s["loss"] for s in log], losses, rtol=1e-12)
            self.assertLess(worst(saved[self.STEPS], states[self.STEPS])[0], 1e-12)
            self.assertEqual(p.quit(), 0)

    @unittest.skipUnless(HAVE_MPI4PY, "python3-mpi4py is not installed")
    def test_mpi4py_worlds(self):
        serial = self.steps(SERIAL, MODEL, "sigmoid", intermediates=True)
        for world in (1, 2, 3):
            with self.subTest(world=world):
                got = self.steps(mpi4py(world), MODEL, "sigmoid", env=MPI_ENV,
                                 intermediates=True)
                loss, (w, where) = self.errors(got, MODEL, "sigmoid")
                self.assertLess(max(loss, w), 1e-12, where)
                for (_, _, a), (_, _, b) in zip(got, serial):
                    self.assertEqual(sorted(a), sorted(b))
                    self.assertLess(worst(a, b)[0], 1e-12, worst(a, b))

    def caught(self, cmd, env=None):
        """The worst error over the steps of a buggy trainer's run."""
        loss, (w, _) = self.errors(self.steps(cmd, MODEL, "sigmoid", env=env), MODEL, "sigmoid")
        return max(loss, w)

    def test_serial_bugs(self):
        for bug in ("world", "lr", "stale", "tf32", "drop"):
            with self.subTest(bug=bug):
                self.assertGreater(self.caught(SERIAL + ["--bug", bug]), 1e-9)
        r = subprocess.run(SERIAL + ["--bug", "unreduced"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("one process reduces nothing", r.stderr)

    @unittest.skipUnless(HAVE_MPI4PY, "python3-mpi4py is not installed")
    def test_mpi4py_bugs(self):
        for bug in ("world", "unreduced", "lr", "stale", "tf32", "drop"):
            with self.subTest(bug=bug):
                self.assertGreater(self.caught(mpi4py(2, "--bug", bug), MPI_ENV), 1e-9)


if __name__ == "__main__":
    unittest.main()
