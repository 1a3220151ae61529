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
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:   # the test is skipped without them
    print(f"skip: {e} (apt-get install python3-torch)")
    sys.exit(77)

# par_optim_default (src/train/par_trainers.c): momentum, beta1, beta2, eps.
DEFAULTS = {"momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
VAL_PCT = 10   # par_dataset_open(..., 10) in parity train and parity data order

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
CIFAR_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin",)
CIFAR_SUB = "cifar-10-batches-bin"
CIFAR_RECORD = 1 + 3 * 32 * 32


class Setup(Exception):
    """Not a disagreement: the check could not run (exit 2)."""


# ---------------------------------------------------------------- the data

def find_file(d, base):
    """d/base, else d/base.gz (raw preferred, as parity's find_file), else None."""
    for p in (os.path.join(d, base), os.path.join(d, base + ".gz")):
        if os.path.isfile(p):
            return p
    return None


def complete(d, files):
    return all(find_file(d, f) for f in files)


def dataset_dir(what):
    """(folder, 'idx' | 'cifar') as parity's par_dataset_open resolves it."""
    if "/" in what:
        if not os.path.isdir(what):
            raise Setup(f"{what}: no such folder")
        if complete(what, IDX_FILES):
            return what, "idx"
        if any(find_file(what, f) for f in CIFAR_FILES):
            return what, "cifar"
        sub = os.path.join(what, CIFAR_SUB)
        if os.path.isdir(sub):
            return sub, "cifar"
        raise Setup(f"{what}: neither the four IDX files nor the CIFAR-10 binary files")
    fmt, files = ("cifar", CIFAR_FILES) if what == "cifar10" else ("idx", IDX_FILES)
    places = []
    for base in (os.environ.get("PARITY_DATA"),
                 os.path.join(os.environ["HOME"], ".cache/parity/data") if os.environ.get("HOME")
                 else None):
        if base:
            places.append(os.path.join(base, what))
            if fmt == "cifar":
                places.append(os.path.join(base, what, CIFAR_SUB))
    if what == "fashion-mnist":
        places.append("/usr/share/datasets/fashion-mnist")
    for p in places:
        if os.path.isdir(p) and complete(p, files):
            return p, fmt
    raise Setup(f"dataset {what}: not found in {', '.join(places)} (run data/fetch.sh)")


def read_bytes(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return f.read()


def idx_array(path, magic, ndim):
    b = read_bytes(path)
    head = np.frombuffer(b, ">u4", count=1 + ndim)
    if head[0] != magic:
        raise Setup(f"{path}: IDX magic {head[0]:#x}, expected {magic:#x}")
    dims = [int(v) for v in head[1:]]
    data = np.frombuffer(b, np.uint8, offset=4 * (1 + ndim))
    if data.size != int(np.prod(dims)):
        raise Setup(f"{path}: {data.size} bytes of data, the header says {dims}")
    return data.reshape(dims)


def training_file(what):
    """The training file's pixels (n, features) as uint8, labels (n,), and the
    image shape (C, H, W); the features in (c, h, w) order."""
    d, fmt = dataset_dir(what)
    if fmt == "idx":
        x = idx_array(find_file(d, IDX_FILES[0]), 0x803, 3)
        y = idx_array(find_file(d, IDX_FILES[1]), 0x801, 1)
        if len(x) != len(y):
            raise Setup(f"{d}: {len(x)} training images but {len(y)} labels")
        return x.reshape(len(x), -1), y, (1,) + x.shape[1:], d
    recs = []
    for f in CIFAR_FILES[:5]:
        b = read_bytes(find_file(d, f))
        if len(b) % CIFAR_RECORD:
            raise Setup(f"{d}/{f}: {len(b)} bytes, not a multiple of {CIFAR_RECORD}")
        recs.append(np.frombuffer(b, np.uint8).reshape(-1, CIFAR_RECORD))
    r = np.concatenate(recs)
    return r[:, 1:], r[:, 0], (3, 32, 32), d


# ---------------------------------------------------------------- the model

def build(spec, act):
    """torch.nn.Sequential for a parity model spec (mlp:... or cnn:...), the
    modules with parameters by parity's layer number {i: module}, the input
    shape, and the layer numbers whose output feeds a batchnorm."""
    acts = {"relu": torch.nn.ReLU, "sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh,
            "r": torch.nn.ReLU, "sg": torch.nn.Sigmoid, "th": torch.nn.Tanh}
    layers, params, feeds_bn = [], {}, set()
    if spec.startswith("mlp:"):
        sizes = [int(v) for v in spec[4:].split("-")]
        for i in range(len(sizes) - 1):
            params[i] = torch.nn.Linear(sizes[i], sizes[i + 1])
            layers.append(params[i])
            if i + 2 < len(sizes):
                layers.append(acts[act]())
        return torch.nn.Sequential(*layers), params, (sizes[0],), feeds_bn
    if not spec.startswith("cnn:"):
        raise Setup(f"--model {spec}: expected mlp:... or cnn:...")
    toks = spec[4:].split("-")
    c, h, w = (int(v) for v in toks[0].split("x"))
    shape, n, last = (c, h, w), 0, None   # last: the latest conv/fc layer number
    for t in toks[1:]:
        if t in ("r", "sg", "th"):
            layers.append(acts[t]())
            last = None   # a bias before a nonlinearity is no longer removed by a batchnorm
        elif t == "f":
            layers.append(torch.nn.Flatten())
            c, h, w = c * h * w, 1, 1
        elif t == "bn":
            image = not isinstance(layers[-1], torch.nn.Linear)
            params[n] = torch.nn.BatchNorm2d(c) if image else torch.nn.BatchNorm1d(c)
            layers.append(params[n])
            if last is not None:   # directly, or through max-pool / flatten
                feeds_bn.add(last)
            last, n = None, n + 1
        elif re.fullmatch(r"fc\d+", t):
            params[n] = torch.nn.Linear(c, int(t[2:]))
            layers.append(params[n])
            c, last, n = int(t[2:]), n, n + 1
        elif re.fullmatch(r"m\d+", t):
            k = int(t[1:])
            layers.append(torch.nn.MaxPool2d(k))   # stride k, floor: parity drops the rest too
            h, w, n = h // k, w // k, n + 1
        elif re.fullmatch(r"c\d+(k\d+)?(p\d+)?(s\d+)?", t):
            m = re.fullmatch(r"c(\d+)(?:k(\d+))?(?:p(\d+))?(?:s(\d+))?", t)
            co, k, p, s = int(m[1]), int(m[2] or 3), int(m[3] or 0), int(m[4] or 1)
            params[n] = torch.nn.Conv2d(c, co, k, stride=s, padding=p)
            layers.append(params[n])
            c, h, w = co, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            last, n = n, n + 1
        else:
            raise Setup(f"--model {spec}: unknown token {t}")
    return torch.nn.Sequential(*layers), params, shape, feeds_bn


def state(params):
    """{'layer<i>.<name>': tensor} of the torch modules, as parity names its views."""
    return {f"layer{i}.{name}": t for i, mod in params.items() for name, t in mod.state_dict().items()}


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


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise Setup(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr.strip()}")
    return r.stdout


def crosscheck(o, tmp):
    torch.set_default_dtype(torch.float64)
    X, Y, img_shape, data_dir = training_file(o.dataset)
    n_train = len(X) - len(X) * VAL_PCT // 100
    _, _, shape, feeds_bn = build(o.model, o.act)
    if int(np.prod(shape)) != X.shape[1]:
        raise Setup(f"--model {o.model} takes {int(np.prod(shape))} inputs; {data_dir} has "
                    f"{X.shape[1]} features per image {img_shape}")
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
    batches = []
    for e in range(epochs):
        order = np.array(run([o.parity, "data", "order", "--dataset", o.dataset, "--seed",
                              str(o.seed), "--epoch", str(e)]).split(), dtype=np.int64)
        if len(order) != n_train or len(np.unique(order)) != n_train or order.max() >= n_train:
            raise Setup(f"parity data order --epoch {e}: {len(order)} records, expected a "
                        f"permutation of 0..{n_train - 1}")
        for pos in range(0, n_train, o.batch):
            batches.append((e, order[pos:pos + o.batch]))
    batches = batches[:o.steps]
    if [(s["epoch"], s["step"]) for s in steps] != [(e, k + 1) for k, (e, _) in enumerate(batches)]:
        raise Setup(f"{log}: step lines (epoch, step) do not match {o.steps} steps of "
                    f"{per_epoch} per epoch")

    # PyTorch from parity's initial weights, then against parity.
    w0 = np.load(init)
    losses, w = train_torch(o, X, Y, batches, w0, reverse=False)
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
        losses_r, w_r = train_torch(o, X, Y, batches, w0, reverse=True)
        compare(o, losses_r, losses, w_r, w, feeds_bn, verdict=False)
    return 0 if err <= o.tol else 1


def train_torch(o, X, Y, batches, w0, reverse):
    """PyTorch f64 from the weights w0 over the batches: (losses, {name: array})."""
    net, params, shape, _ = build(o.model, o.act)
    mine = state(params)
    if set(w0.files) != set(mine):
        raise Setup(f"init.npz holds {sorted(w0.files)}, the torch model {sorted(mine)}")
    with torch.no_grad():
        for k, t in mine.items():
            if w0[k].shape != tuple(t.shape) and not (w0[k].size == 1 and t.dim() == 0):
                raise Setup(f"{k}: parity's shape {w0[k].shape}, torch's {tuple(t.shape)}")
            t.copy_(torch.from_numpy(w0[k].astype(np.float64)).reshape(t.shape))
    ps = list(net.parameters())
    opt = {"sgd": lambda: torch.optim.SGD(ps, lr=o.lr),
           "momentum": lambda: torch.optim.SGD(ps, lr=o.lr, momentum=o.momentum),
           "nesterov": lambda: torch.optim.SGD(ps, lr=o.lr, momentum=o.momentum, nesterov=True),
           "adam": lambda: torch.optim.Adam(ps, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.eps)}[o.optim]()
    net.train()
    losses = []
    for _, idx in batches:
        idx = idx[::-1] if reverse else idx
        x = torch.from_numpy(X[idx].astype(np.float64) / 255.0).reshape((len(idx),) + shape)
        y = torch.from_numpy(Y[idx].astype(np.int64))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: t.detach().numpy().astype(np.float64) for k, t in state(params).items()}


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
    except Setup as e:
        print(f"torch_crosscheck: {e}", file=sys.stderr)
        print("ERROR: the cross-check could not run")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
