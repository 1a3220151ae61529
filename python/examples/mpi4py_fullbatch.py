#!/usr/bin/env python3
"""Data-parallel gradient descent with mpi4py, in the style of the first study
parity reproduces: rank 0 holds the weights and broadcasts them, scatters the
step's batch (uneven slices when the world does not divide it), every rank
computes the gradient of its slice, the gradients are summed onto rank 0,
which updates. An MLP (sigmoid in the study; any of parity's activations).

    parity lockstep --external 'mpirun -n 3 python3 python/examples/mpi4py_fullbatch.py' \\
        --model mlp:784-64-10 --act sigmoid --dtype f64 --steps 20

Each rank's gradient is a sum over its slice divided by the GLOBAL batch size,
so the sum over ranks is the batch mean at any world size and any split.
--bug NAME makes it one of the negative controls parity must catch.
"""
import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parity_ext import Session, faults, npz, serve   # noqa: E402
import mlp   # noqa: E402


class FullBatchTrainer:
    """Scatter, local gradients, reduce to rank 0, update there; for parity_ext.serve."""

    def __init__(self, hello, comm, bug):
        mlp.check_model(hello, "mpi4py_fullbatch")
        self.model, self.comm, self.bug = hello.model, comm, bug
        self.rank, self.world = comm.Get_rank(), comm.Get_size()
        dt = npz.dtype_of(hello.dtype).type
        self.lr = dt(hello.optim["lr"] * (1 + 1e-3 if bug == "lr" else 1))
        self.w = None        # rank 0: the state
        self.local = None    # every rank: its copy of the weights

    def load(self, get_state, optim_t):
        if self.rank == 0:
            self.w = {k: v.copy() for k, v in get_state().items()}

    def step(self, get_batch, t, want):
        comm, rank, world = self.comm, self.rank, self.world
        new = comm.bcast([(W.copy(), b.copy()) for W, b in mlp.params(self.w, self.model)]
                         if rank == 0 else None)
        if not (self.bug == "stale" and rank == world - 1 and self.local is not None):
            self.local = new   # --bug stale: the last rank keeps its old weights
        parts, B = None, None
        if rank == 0:
            b = get_batch()
            x, labels = b["x"], b["labels"].astype(np.int64)
            if self.bug == "drop":
                x, labels = x[1:], labels[1:]   # one sample left out
            B = len(labels)
            parts = list(zip(np.array_split(x, world), np.array_split(labels, world)))
        x, labels = comm.scatter(parts)
        B = comm.bcast(B)
        outs = mlp.forward(self.local, x, self.model, tf32=self.bug == "tf32")
        losses, p = mlp.softmax_xent(outs[-1], labels)
        # Divided by the global batch size: the ranks' sums add up to the batch mean.
        # --bug world: the mean taken as if over world + 1 processes.
        denom = B * (world + 1) / world if self.bug == "world" else B
        grads, dzs = mlp.backward(self.local, outs, mlp.dlogits(p, labels, denom), self.model)
        if self.bug == "unreduced" and rank == world - 1:
            grads[-1][0][...] = 0   # the last rank's part of one gradient never reduced
        total = self.reduce(grads)
        loss = comm.reduce(float(losses.sum(dtype=np.float64)), op=MPI.SUM, root=0)
        rows = comm.gather(mlp.rows(outs, dzs, losses) if want else None)
        if rank != 0:
            return None, None
        for (W, bias), (dW, db) in zip(mlp.params(self.w, self.model), total):
            W -= self.lr * dW
            bias -= self.lr * db
        inter = None
        if want:   # the ranks' rows in rank order: the batch's order
            inter = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
            inter.update(mlp.grad_arrays(total))
        return loss / B, inter

    def reduce(self, grads):
        """The sum over ranks of every rank's [(dW, db)], on rank 0 (one MPI_Reduce)."""
        flat = np.concatenate([g.ravel() for pair in grads for g in pair])
        total = np.empty_like(flat) if self.rank == 0 else None
        self.comm.Reduce(flat, total, op=MPI.SUM, root=0)
        if self.rank != 0:
            return None
        out, at = [], 0
        for dW, db in grads:
            out.append((total[at:at + dW.size].reshape(dW.shape),
                        total[at + dW.size:at + dW.size + db.size]))
            at += dW.size + db.size
        return out

    def state(self):
        return self.w


def main(argv):
    o = faults.parser(__doc__).parse_args(argv)
    comm = MPI.COMM_WORLD
    with Session(name="mpi4py-fullbatch", rank=comm.Get_rank(), world=comm.Get_size(),
                 broadcast=comm.bcast, intermediates=True) as s:
        serve(s, FullBatchTrainer(s.hello, comm, o.bug))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
