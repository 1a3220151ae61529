""".npz files as parity writes and reads them: one array per view, C order,
'<f4' or '<f8' for weights (parity's reader takes nothing else), saved
atomically (NAME.part, then renamed) so a reader never sees half a file.

Not a format of its own: numpy's np.savez / np.load underneath. Tested by
round trips and against parity's own files (python/tests/test_npz.py).
"""
import os

import numpy as np

from . import spec as spec_mod

DTYPES = {"f32": np.dtype("<f4"), "f64": np.dtype("<f8")}


class NpzError(ValueError):
    """A file that is not what parity and the trainer agreed on; the message
    names the file and the array."""


def dtype_of(name):
    """numpy dtype of parity's dtype name 'f32' or 'f64'."""
    if name not in DTYPES:
        raise NpzError(f"dtype '{name}': expected f32 or f64")
    return DTYPES[name]


def save(path, arrays):
    """Writes {name: array} to path as an uncompressed .npz: first path.part,
    then renamed onto path (atomic on one file system). Arrays are written in C
    order (parity refuses fortran_order True); only numbers, never pickles."""
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    for k, a in arrays.items():
        if a.dtype.kind not in "fiub":
            raise NpzError(f"{path}: array '{k}' has dtype {a.dtype}, not a number type")
    part = path + ".part"
    try:
        with open(part, "wb") as f:
            np.savez(f, **arrays)
        os.replace(part, path)
    except BaseException:
        if os.path.exists(part):
            os.unlink(part)
        raise


def load(path):
    """{name: array} of the .npz at path, in the file's order; NpzError if it
    cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise NpzError(f"{path}: cannot read as .npz: {e}") from e


def check(arrays, expected, what, exact=True):
    """Raises NpzError unless `arrays` holds every name of `expected`
    {name: (shape, dtype)} with that shape and dtype; with exact, also no other
    name. `what` names the file in the message."""
    missing = [n for n in expected if n not in arrays]
    if missing:
        raise NpzError(f"{what}: array '{missing[0]}' missing"
                       + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    extra = [n for n in arrays if n not in expected]
    if exact and extra:
        raise NpzError(f"{what}: array '{extra[0]}' is not expected here")
    for n, (shape, dtype) in expected.items():
        a = np.asarray(arrays[n])
        if tuple(a.shape) != tuple(shape):
            raise NpzError(f"{what}: array '{n}' has shape {tuple(a.shape)}, expected "
                           f"{tuple(shape)}")
        if dtype is not None and a.dtype != np.dtype(dtype):
            raise NpzError(f"{what}: array '{n}' has dtype {a.dtype.str}, expected "
                           f"{np.dtype(dtype).str}")


def expected_state(model, dtype, optim):
    """{name: (shape, dtype)} of a full state (views, then optimizer state) of
    `model` (spec.Model) in dtype 'f32'/'f64' for optimizer `optim`."""
    dt = dtype_of(dtype)
    return {n: (shape, dt) for n, shape in spec_mod.state_names(model, optim)}


def expected_intermediates(model, dtype, batch):
    """{name: (shape, dtype)} of every array an intermediates .npz may hold for
    a batch of `batch` samples: layer<l>.out and .dz (batch, n_out),
    loss.samples (batch,), grad.<parameter> (the parameter's shape)."""
    dt = dtype_of(dtype)
    out = {}
    for L in model.layers:
        out[f"layer{L.index}.out"] = ((batch, L.n_out), dt)
        out[f"layer{L.index}.dz"] = ((batch, L.n_out), dt)
    out["loss.samples"] = ((batch,), dt)
    shapes = dict(model.views())
    for n in model.parameters():
        out[f"grad.{n}"] = (shapes[n], dt)
    return out
