#!/usr/bin/env python3
"""A plain NumPy MLP trainer (SGD; relu, sigmoid or tanh) under parity's step
protocol: one process, the whole batch at once.

    parity lockstep --external 'python3 python/examples/numpy_serial.py' \\
        --model mlp:784-64-10 --act sigmoid --dtype f64 --steps 20

Exits 0 after parity's quit; an error goes to parity as its message.
--bug NAME makes it one of the negative controls parity must catch
(`unreduced` has nothing to reduce in one process: refused).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parity_ext import Session, faults, npz, serve   # noqa: E402
import mlp   # noqa: E402


class SerialTrainer:
    """The step of an MLP on the whole batch, for parity_ext.serve."""

    def __init__(self, hello, bug):
        mlp.check_model(hello, "numpy_serial")
        self.model, self.bug = hello.model, bug
        dt = npz.dtype_of(hello.dtype).type
        self.lr = dt(hello.optim["lr"] * (1 + 1e-3 if bug == "lr" else 1))
        self.w = None

    def load(self, get_state, optim_t):
        self.w = {k: v.copy() for k, v in get_state().items()}

    def step(self, get_batch, t, want):
        b = get_batch()
        x, labels = b["x"], b["labels"].astype(np.int64)
        if self.bug == "drop":
            x, labels = x[1:], labels[1:]   # one sample left out
        ps = mlp.params(self.w, self.model)
        outs = mlp.forward(ps, x, self.model, tf32=self.bug == "tf32")
        losses, p = mlp.softmax_xent(outs[-1], labels)
        B = len(labels)
        # The batch mean; --bug world: averaged as if over world + 1 = 2 processes.
        grads, dzs = mlp.backward(ps, outs, mlp.dlogits(p, labels, 2 * B if self.bug == "world"
                                                         else B), self.model)
        for l, ((W, bias), (dW, db)) in enumerate(zip(ps, grads)):
            if self.bug == "stale" and l == 0:
                continue   # this layer keeps its old weights
            W -= self.lr * dW
            bias -= self.lr * db
        loss = losses.sum() / losses.dtype.type(B)
        return loss, {**mlp.rows(outs, dzs, losses), **mlp.grad_arrays(grads)} if want else None

    def state(self):
        return self.w


def main(argv):
    ap = faults.parser(__doc__)
    o = ap.parse_args(argv)
    if o.bug == "unreduced":
        ap.error("--bug unreduced: one process reduces nothing")
    with Session(name="numpy-serial", intermediates=True) as s:
        serve(s, SerialTrainer(s.hello, o.bug))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
