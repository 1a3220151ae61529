"""The negative controls of the examples (`--bug NAME`): deliberate mistakes
that parity must catch and name. Each example puts each one in its own code
path as a one-line change; this module holds their names and the one piece
of arithmetic they share, rounding to a short mantissa (TF32 emulated on CPU).

Not for real training. Tested in python/tests/test_faults.py; the examples
with each bug in python/tests/test_examples.py.
"""
import argparse

import numpy as np

BUGS = {
    "world": "gradients averaged over world + 1 processes instead of world",
    "unreduced": "one parameter's gradient is not reduced across the ranks",
    "lr": "learning rate off by 1e-3 relative",
    "stale": "one rank keeps its old weights after a step",
    "tf32": "one layer's output rounded to a 10-bit mantissa (TF32, emulated)",
    "drop": "one sample of the batch left out",
}
TF32_BITS = 10   # explicit mantissa bits of TF32 (f32 has 23, f64 52)


def round_mantissa(a, bits=TF32_BITS):
    """a (f32 or f64) rounded to `bits` explicit mantissa bits, to nearest with
    ties to even, as a GPU's TF32 mode rounds f32 inputs (Inf and NaN pass)."""
    a = np.asarray(a)
    uint, total = {np.dtype("float32"): (np.uint32, 23), np.dtype("float64"): (np.uint64, 52)}[
        a.dtype.newbyteorder("=")]
    drop = total - bits
    i = np.ascontiguousarray(a).view(uint)
    one = uint(1)
    half = (one << uint(drop - 1)) - one
    odd = (i >> uint(drop)) & one
    r = ((i + half + odd) >> uint(drop)) << uint(drop)
    finite = np.isfinite(a)
    return np.where(finite, r.view(a.dtype), a)


def parser(doc):
    """An example trainer's argparse parser: its docstring as the help, and
    --bug NAME with the list of names."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bug", choices=sorted(BUGS), metavar="NAME",
                    help="negative control (tests only): " +
                    "; ".join(f"{k}: {v}" for k, v in BUGS.items()))
    return ap
