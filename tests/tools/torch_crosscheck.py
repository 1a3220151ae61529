#!/usr/bin/env python3
"""Cross-check of parity's reference trainer against an independent
implementation: PyTorch in f64.

parity trains N steps (`parity train --trainer reference --dtype f64`) and
saves its initial weights, its final weights and a JSONL log. PyTorch then
builds the same network from the model spec, starts from parity's initial
weights, reads the training images itself (IDX or CIFAR-10 binary files, found
where parity finds them, pixels scaled p / 255.0 in double as parity does),
takes the batches in parity's order (`parity data order`, one call per epoch,
over the first 90% of the training file: the last 10% is validation; batches
of B in that order, the last one of an epoch shorter) and runs the same
optimizer with the same hyperparameters (passed explicitly to both sides).

Compared: every step's loss (from parity's log), relative error
|torch - parity| / |parity|; and every tensor of the final weights, relative
to the tensor's largest value: max_i |torch_i - parity_i| / max_i |parity_i|
(absolute if the tensor is all zeros). A conv or fc bias that feeds a
batchnorm has a zero gradient in exact arithmetic (the batch mean removes
it): both sides hold rounding noise there, so it is compared in absolute
terms. All must be <= --tol (1e-10).

--floor also trains PyTorch a second time with every batch's samples in
reverse order (the same mathematics, other roundings) and prints how far
that drifts from the first run: the size of a difference that rounding alone
makes in this problem, to set the result against (not checked).

Exit 0 agree, 1 disagree, 77 skip (numpy or PyTorch missing), 2 usage or
setup error (no data, parity failed).

Example:
  torch_crosscheck.py build/parity --model cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 \\
      --optim adam --lr 0.001 --batch 64 --steps 20 --seed 1 --dataset mnist
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import numpy as np
    import torch
    from parity_ext import data, torch_helper
    from parity_ext.spec import SpecError
except ImportError as e:   # the test is skipped without them
    print(f"skip: {e} (apt-get install python3-torch)")
    sys.exit(77)

# par_optim_default (src/train/par_trainers.c): momentum, beta1, beta2, eps.
DEFAULTS = {"momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


class Setup(Exception):
    """Not a disagreement: the check could not run (exit 2)."""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise Setup(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr.strip()}")
    return r.stdout


# ---------------------------------------------------------------- the run

def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parity", help="the parity binary")
    ap.add_argument("--model", default="mlp:784-256-128-10", help="model spec (%(default)s)")
    ap.add_argument("--act", default="relu", choices=("relu", "sigmoid", "tanh"),
                    help="mlp: hidden activation (relu)")
    ap.add_argument("--optim", default="sgd", choices=("sgd", "momentum", "nesterov", "adam"))
    ap.add_argument("--lr", type=float, default=0.01, help="learning rate (%(default)s)")
    ap.add_argument("--momentum", type=float, default=DEFAULTS["momentum"], help="momentum, nesterov (0.9)")
    ap.add_argument("--beta1", type=float, default=DEFAULTS["beta1"], help="adam (0.9)")
    ap.add_argument("--beta2", type=float, default=DEFAULTS["beta2"], help="adam (0.999)")
    ap.add_argument("--eps", type=float, default=DEFAULTS["eps"], help="adam (1e-8)")
    ap.add_argument("--batch", type=int, default=64, help="samples per step (%(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="steps in all, across epochs (%(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of init and order (%(default)s)")
    ap.add_argument("--dataset", default="mnist", help="name or folder, as parity takes it (%(default)s)")
    ap.add_argument("--tol", type=float, default=1e-10, help="tolerance, relative (%(default)g)")
    ap.add_argument("--floor", action="store_true",
                    help="also print the rounding floor (above; not checked)")
    ap.add_argument("--keep", metavar="DIR", help="write parity's init.npz, final.npz, log.jsonl "
                    "there and keep them (default: a temporary folder, removed)")
    o = ap.parse_args(argv)
    if o.batch < 1 or o.steps < 1:
        ap.error("--batch and --steps must be >= 1")
    return o


def crosscheck(o, tmp):
    torch.set_default_dtype(torch.float64)
    ds = data.Dataset(o.dataset, "f64")
    n_train = ds.n_train
    model = torch_helper.model_from_spec(o.model, o.act).model
    feeds_bn = model.feeds_bn()
    if model.n_inputs != ds.pixels.shape[1]:
        raise Setup(f"--model {o.model} takes {model.n_inputs} inputs; {ds.dir} has "
                    f"{ds.pixels.shape[1]} features per image {ds.shape}")
    per_epoch = -(-n_train // o.batch)
    epochs = -(-o.steps // per_epoch)

    # parity's run.
    init, final, log = (os.path.join(tmp, f) for f in ("init.npz", "final.npz", "log.jsonl"))
    hyper = {"sgd": [], "momentum": ["--momentum", repr(o.momentum)],
             "nesterov": ["--momentum", repr(o.momentum)],
             "adam": ["--beta1", repr(o.beta1), "--beta2", repr(o.beta2), "--eps", repr(o.eps)]}
    cmd = [o.parity, "train", "--trainer", "reference", "--dtype", "f64", "--dataset", o.dataset,
           "--model", o.model, "--optim", o.optim, "--lr", repr(o.lr), *hyper[o.optim],
           "--batch", str(o.batch), "--epochs", str(epochs), "--steps", str(o.steps),
           "--seed", str(o.seed), "--init-save", init, "--save", final, "--log", log,
           "--no-digest", "--quiet"]
    if o.model.startswith("mlp:"):
        cmd[cmd.index("--model"):cmd.index("--model")] = ["--act", o.act]
    print("parity:", " ".join(cmd[1:]).replace(tmp + "/", ""))
    run(cmd)
    with open(log) as f:
        steps = [s for s in map(json.loads, f) if s.get("type") == "step"]

    # The batches, in parity's order.
    batches = data.batches(o.parity, o.dataset, o.seed, o.batch, o.steps, n_train)
    if [(s["epoch"], s["step"]) for s in steps] != [(e, k + 1) for k, (e, _) in enumerate(batches)]:
        raise Setup(f"{log}: step lines (epoch, step) do not match {o.steps} steps of "
                    f"{per_epoch} per epoch")

    # PyTorch from parity's initial weights, then against parity.
    w0 = np.load(init)
    losses, w = train_torch(o, ds, batches, w0, reverse=False)
    print(f"{o.model} {o.optim} lr {o.lr:g}, batch {o.batch}, {o.steps} steps "
          f"({epochs} epoch{'s' if epochs > 1 else ''} of {per_epoch}), {o.dataset} "
          f"({n_train} training records), seed {o.seed}, f64; tolerance {o.tol:g}")
    print("torch against parity:")
    err = compare(o, losses, [s["loss"] for s in steps], w, dict(np.load(final)), feeds_bn)
    if o.floor:
        # The same training with every batch's samples in reverse order: the
        # same mathematics, other roundings (the sums over the batch run the
        # other way). How far two correct f64 runs drift apart here.
        print("torch against torch with each batch reversed (the rounding floor):")
        losses_r, w_r = train_torch(o, ds, batches, w0, reverse=True)
        compare(o, losses_r, losses, w_r, w, feeds_bn, verdict=False)
    return 0 if err <= o.tol else 1


def train_torch(o, ds, batches, w0, reverse):
    """PyTorch f64 from the weights w0 over the batches: (losses, {name: array})."""
    net = torch_helper.model_from_spec(o.model, o.act)
    mine = net.state_dict()
    if set(w0.files) != set(mine):
        raise Setup(f"init.npz holds {sorted(w0.files)}, the torch model {sorted(mine)}")
    try:
        torch_helper.load_weights(net, w0)
    except ValueError as e:
        raise Setup(str(e)) from e
    opt = torch_helper.make_optimizer(net, {"name": o.optim, "lr": o.lr, "momentum": o.momentum,
                                            "beta1": o.beta1, "beta2": o.beta2, "eps": o.eps},
                                      "f64")
    net.train()
    losses = []
    for _, idx in batches:
        b = ds.batch(idx[::-1] if reverse else idx)
        x = torch.from_numpy(b["x"])
        y = torch.from_numpy(b["labels"].astype(np.int64))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, torch_helper.weights(net, "f64")


def compare(o, losses, ref_losses, w, ref_w, feeds_bn, verdict=True):
    """Prints the per-step loss and per-tensor differences of (losses, w)
    against (ref_losses, ref_w); returns the worst (inf if tensors differ)."""
    loss_err = [(abs(a - b) / abs(b), k + 1, a, b)
                for k, (a, b) in enumerate(zip(losses, ref_losses))]
    worst_loss = max(loss_err)
    print(f"  loss, {len(loss_err)} steps: max |a - b| / |b| = {worst_loss[0]:.3g} "
          f"(step {worst_loss[1]})")
    bad = [e for e in loss_err if e[0] > o.tol]
    if bad:
        print(f"  first step over the tolerance: step {bad[0][1]}: {bad[0][2]!r} against "
              f"{bad[0][3]!r}")
    missing = sorted(set(w) ^ set(ref_w))
    for k in missing:
        print(f"  {k}: only in {'parity' + chr(39) + 's final.npz' if k in ref_w else 'torch'}")
    worst = (0.0, None)
    for k in w:
        if k not in ref_w:
            continue
        a, b = w[k].ravel(), ref_w[k].astype(np.float64).ravel()
        d = np.abs(a - b)
        i = int(np.argmax(d))
        scale = float(np.max(np.abs(b)))
        absolute = scale == 0 or (int(k.split(".")[0][5:]) in feeds_bn and k.endswith(".bias"))
        err = float(d[i]) if absolute else float(d[i]) / scale
        how = ("max |a - b|" + (" (feeds a batchnorm: rounding noise)" if scale else
                                " (all zeros)")) if absolute else "max |a - b| / max |b|"
        print(f"  {k:28s} {a.size:9d} values: {how} = {err:.3g}")
        if err >= worst[0]:
            at = list(np.unravel_index(i, ref_w[k].shape)) if ref_w[k].ndim else []
            worst = (err, f"{k}{at}: {a[i]!r} against {b[i]!r}, |a - b| {d[i]:.3g}, "
                          f"max |b| {scale:.3g}")
    if worst[1]:
        print(f"  largest weight difference: {worst[1]}")
    total = float("inf") if missing else max(worst[0], worst_loss[0])
    if verdict:
        print(f"{'PASS' if total <= o.tol else 'FAIL'}: worst {total:.3g} (loss "
              f"{worst_loss[0]:.3g}, weights {worst[0]:.3g}; a = torch, b = parity; "
              f"tolerance {o.tol:g})")
    return total


def main(argv):
    o = parse(argv)
    try:
        if o.keep:
            os.makedirs(o.keep, exist_ok=True)
            return crosscheck(o, os.path.abspath(o.keep))
        with tempfile.TemporaryDirectory(prefix="torch_crosscheck.") as tmp:
            return crosscheck(o, tmp)
    except (Setup, data.DataError, SpecError) as e:
        print(f"torch_crosscheck: {e}", file=sys.stderr)
        print("ERROR: the cross-check could not run")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
