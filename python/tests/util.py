"""Shared by the unit tests of parity_ext: where the repository, the parity
binary and the examples are, and skip conditions for what a machine lacks.
parity is $PARITY, else build/parity in the repository."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_DIR = os.path.join(ROOT, "python")
EXAMPLES = os.path.join(PYTHON_DIR, "examples")
PARITY = os.environ.get("PARITY") or os.path.join(ROOT, "build", "parity")
PYTHON = sys.executable
sys.path.insert(0, PYTHON_DIR)

# The examples' command lines under parity --external (MPI and DDP: .format(w=world)).
SERIAL = f"{PYTHON} {EXAMPLES}/numpy_serial.py"
MPI = f"mpirun --oversubscribe --bind-to none -n {{w}} {PYTHON} {EXAMPLES}/mpi4py_fullbatch.py"
# Debian's torchrun needs --redirects/--tee other than 0 (see test_examples_torch.py).
DDP = (f"torchrun --standalone --nproc_per_node {{w}} --redirects 1 --tee 1 "
       f"{EXAMPLES}/torch_ddp.py")

HAVE_PARITY = os.access(PARITY, os.X_OK)
HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None


def need_parity(f):
    return unittest.skipUnless(HAVE_PARITY, f"no parity binary at {PARITY} (build it)")(f)


def need_torch(f):
    return unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")(f)


def need_mpi4py(f):
    return unittest.skipUnless(HAVE_MPI4PY, "python3-mpi4py is not installed")(f)


def parity(*args):
    """Runs parity with args; its stdout, or AssertionError with its stderr."""
    r = subprocess.run([PARITY, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"parity {' '.join(map(str, args))}: exit {r.returncode}: "
                             f"{r.stderr.strip()}")
    return r.stdout


def mnist_missing():
    """A reason to skip when MNIST is not where parity finds it, else None."""
    from parity_ext import data
    try:
        data.dataset_dir("mnist")
    except data.DataError as e:
        return str(e)
    return None


class UnderParity(unittest.TestCase):
    """Runs the examples under the real parity: `env` for them (a private
    TMPDIR, `tmp`, for parity's folders and torchrun's logs; one BLAS and
    OpenMP thread; mpirun as root, without shared-memory single copy)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.env = dict(os.environ, TMPDIR=cls.tmp.name, OMP_NUM_THREADS="1",
                       OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                       OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_btl_vader_single_copy_mechanism="none")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_parity(self, *args):
        """parity with args in env: (exit code, stdout and stderr together)."""
        r = subprocess.run([PARITY, *args], capture_output=True, text=True, env=self.env,
                           timeout=600)
        return r.returncode, r.stdout + r.stderr
