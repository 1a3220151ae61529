#!/usr/bin/env python3
"""Batchnorm under data parallelism: parity's ranks against PyTorch DDP.

A CNN with batchnorm trains N steps in f64 from parity's initial weights on
parity's batches (tests/tools/torch_crosscheck.py reads them the same way):

  parity    --trainer reference, then --trainer mpi at --ranks 2 and 3;
  PyTorch   one process, then DistributedDataParallel (gloo, CPU) at world
            size 2 and 3, each rank holding a contiguous part of every batch,
            with torch.nn.BatchNorm2d/1d as DDP users have them.

Printed: whether parity's mpi weights are bit for bit the reference's, and
how far each DDP run ends from the one-process PyTorch run (per tensor,
max |a - b| / max |b|). Under DDP each replica normalises with the
statistics of its own part of the batch, so the model it trains depends on
the world size. SyncBatchNorm would share the statistics, but PyTorch
refuses it on CPU tensors ("SyncBatchNorm expected input tensor to be on
GPU"), so it cannot run here; what it does across ranks is an all-reduce of
per-rank sums, and the last part shows, with gloo at world sizes 1, 2 and 3,
that such a sum of per-rank partials changes its bits with the world size.

Exit 0 when parity's ranks equal the reference bit for bit and DDP at world
size 2 moves away from one process by more than --tol (so the comparison
shows what it claims), 1 otherwise, 77 skip (no PyTorch), 2 setup error.

Example:
  torch_ddp_bn.py build/parity --steps 20
"""
import argparse
import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_crosscheck as tc   # exits 77 without numpy/PyTorch
from parity_ext import data, torch_helper

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MODEL = "cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10"


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parity", help="the parity binary")
    ap.add_argument("--model", default=MODEL, help="a cnn: spec with bn (%(default)s)")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (%(default)s)")
    ap.add_argument("--batch", type=int, default=60, help="samples per step (%(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="steps (%(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of init and order (%(default)s)")
    ap.add_argument("--dataset", default="mnist", help="as parity takes it (%(default)s)")
    ap.add_argument("--tol", type=float, default=1e-10,
                    help="DDP must differ from one process by more than this (%(default)g)")
    return ap.parse_args(argv)


def parity_runs(o, tmp):
    """parity's reference, mpi R=2 and R=3: {name: {tensor: array}} and the init file."""
    init = os.path.join(tmp, "init.npz")
    base = [o.parity, "train", "--dtype", "f64", "--dataset", o.dataset, "--model", o.model,
            "--optim", "sgd", "--lr", repr(o.lr), "--batch", str(o.batch), "--steps",
            str(o.steps), "--seed", str(o.seed), "--no-digest", "--quiet"]
    out = {}
    for name, extra in (("reference", ["--trainer", "reference", "--init-save", init]),
                        ("mpi R=2", ["--trainer", "mpi", "--ranks", "2"]),
                        ("mpi R=3", ["--trainer", "mpi", "--ranks", "3"])):
        path = os.path.join(tmp, name.replace(" ", "_").replace("=", "") + ".npz")
        tc.run(base + extra + ["--save", path])
        out[name] = dict(np.load(path))
    return out, init


def batches(o):
    """parity's batches in its order (one epoch is enough for --steps here)."""
    ds = data.Dataset(o.dataset, "f64")
    if o.steps * o.batch > ds.n_train:
        raise tc.Setup(f"--steps {o.steps} x --batch {o.batch} is more than one epoch")
    return ds, [r for _, r in data.batches(o.parity, o.dataset, o.seed, o.batch, o.steps,
                                           ds.n_train)]


def torch_run(o, init, rank=0, world=1):
    """SGD in f64 from parity's init; under DDP when world > 1, rank taking
    the rank-th contiguous part of each batch. Returns {tensor: array}."""
    torch.set_default_dtype(torch.float64)
    ds, bs = batches(o)
    net = torch_helper.model_from_spec(o.model, "relu")
    torch_helper.load_weights(net, np.load(init))
    model = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net
    opt = torch.optim.SGD(model.parameters(), lr=o.lr)
    model.train()
    for idx in bs:
        b = ds.batch(np.array_split(idx, world)[rank])
        x = torch.from_numpy(b["x"])
        y = torch.from_numpy(b["labels"].astype(np.int64))
        opt.zero_grad()
        # The batch mean of the loss: DDP averages the per-rank gradients, so
        # each rank's mean over its equal part gives the whole batch's mean.
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return torch_helper.weights(net, "f64")


def ddp_worker(rank, world, port, o, init, out):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        w = torch_run(o, init, rank, world)
        if rank == 0:
            np.savez(out, **w)
    finally:
        dist.destroy_process_group()


def sum_worker(rank, world, port, x, out):
    """Per-feature sums of x over its rows the way SyncBatchNorm shares
    statistics: each rank sums its contiguous rows, then all_reduce(SUM)."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        s = torch.from_numpy(np.array_split(x, world)[rank]).sum(dim=0)
        dist.all_reduce(s, op=dist.ReduceOp.SUM)
        if rank == 0:
            np.save(out, s.numpy())
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, world, *args):
    mp.spawn(fn, args=(world, free_port()) + args, nprocs=world, join=True)


def worst(a, b, feeds_bn):
    """max over tensors of max |a - b| / max |b|; absolute where b is all
    zeros, and for a bias that feeds a batchnorm (its exact gradient is 0:
    both sides hold rounding noise there, as in torch_crosscheck.py)."""
    err = (0.0, "")
    for k in b:
        d = float(np.max(np.abs(a[k] - b[k])))
        s = float(np.max(np.abs(b[k])))
        noise = k.endswith(".bias") and int(k.split(".")[0][5:]) in feeds_bn
        err = max(err, (d / s if s and not noise else d, k))
    return err


def weights_only(w):
    """The trained parameters, without the running statistics."""
    return {k: v for k, v in w.items() if not k.split(".")[1].startswith(("running", "num_"))}


def bits_equal(a, b):
    return set(a) == set(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)


def study(o, tmp):
    print(f"{o.model}, SGD lr {o.lr:g}, batch {o.batch}, {o.steps} steps, {o.dataset}, "
          f"seed {o.seed}, f64")
    par, init = parity_runs(o, tmp)
    feeds_bn = torch_helper.model_from_spec(o.model, "relu").model.feeds_bn()
    ok = True
    for name in ("mpi R=2", "mpi R=3"):
        same = bits_equal(par[name], par["reference"])
        ok &= same
        print(f"  parity {name:9s} against parity's reference: "
              f"{'bit for bit equal' if same else 'DIFFERENT: ' + '{:.3g} in {}'.format(*worst(par[name], par['reference'], feeds_bn))}")
    one = torch_run(o, init)
    d, k = worst(one, par['reference'], feeds_bn)
    print(f"  torch, one process      against parity's reference: max rel {d:.3g} ({k})")
    for world in (2, 3):
        out = os.path.join(tmp, f"ddp{world}.npz")
        spawn(ddp_worker, world, o, init, out)
        ddp = dict(np.load(out))
        d, k = worst(ddp, one, feeds_bn)
        dw, kw = worst(weights_only(ddp), weights_only(one), feeds_bn)
        print(f"  torch DDP world size {world} against torch, one process: max rel {d:.3g} "
              f"({k}); trained weights alone {dw:.3g} ({kw})")
        if world == 2 and not d > o.tol:
            print(f"  FAIL: DDP at world size 2 within {o.tol:g} of one process: the study "
                  "shows nothing")
            ok = False

    # The all-reduce of per-rank partial sums (what SyncBatchNorm shares).
    ds, bs = batches(o)
    x = ds.batch(bs[0])["x"]
    sums = {}
    for world in (1, 2, 3):
        out = os.path.join(tmp, f"sum{world}.npy")
        spawn(sum_worker, world, x, out)
        sums[world] = np.load(out)
    n = x.shape[1]
    for world in (2, 3):
        diff = int(np.sum(sums[world].view(np.uint64) != sums[1].view(np.uint64)))
        print(f"  gloo all_reduce of per-rank sums, world size {world} against 1: {diff} of {n} "
              f"per-pixel batch sums differ in their bits")
    d23 = int(np.sum(sums[2].view(np.uint64) != sums[3].view(np.uint64)))
    print(f"  ... world size 2 against 3: {d23} of {n}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv):
    o = parse(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="torch_ddp_bn.") as tmp:
            return study(o, tmp)
    except (tc.Setup, data.DataError) as e:
        print(f"torch_ddp_bn: {e}", file=sys.stderr)
        print("ERROR: the study could not run")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
