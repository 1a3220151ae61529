"""Shared by the unit tests of parity_ext: where the repository, the parity
binary and the examples are, and skip conditions for what a machine lacks.
parity is $PARITY, else build/parity in the repository."""
import importlib.util
import os
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_DIR = os.path.join(ROOT, "python")
EXAMPLES = os.path.join(PYTHON_DIR, "examples")
PARITY = os.environ.get("PARITY") or os.path.join(ROOT, "build", "parity")
PYTHON = sys.executable
sys.path.insert(0, PYTHON_DIR)

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
