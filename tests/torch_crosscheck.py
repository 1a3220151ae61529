#!/usr/bin/env python3
"""Cross-check of parity's reference trainer against an independent
implementation: PyTorch in f64. parity trains N steps (--trainer reference
--dtype f64) and saves its initial and final weights; PyTorch builds the same
network from the model spec, starts from parity's initial weights, reads the
same IDX files, takes the batches in parity's order (`parity data order`) and
runs the same optimizer. Every step's loss and the final weights must agree to
within TOL relative (per tensor: max |a - b| / max |b|).

Usage: torch_crosscheck.py PARITY SPEC OPTIM LR [STEPS] [BATCH] [DATASET]
Exit 0 agree, 1 disagree, 77 PyTorch missing (skip), 2 usage."""
import json, os, re, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
except ImportError as e:   # the test is skipped without them
    print(f"skip: {e} (install python3-torch)")
    sys.exit(77)

TOL = 1e-10


def build(spec):
    """torch modules for a parity model spec (mlp:... or cnn:...), in parity's
    layer numbering: {index: module} for the layers with parameters."""
    layers, params = [], {}
    if spec.startswith("mlp:"):
        sizes = [int(v) for v in spec[4:].split("-")]
        for i in range(len(sizes) - 1):
            lin = torch.nn.Linear(sizes[i], sizes[i + 1])
            params[i] = lin
            layers.append(lin)
            if i + 2 < len(sizes):
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers), params, (sizes[0],)
    toks = spec[4:].split("-")
    c, h, w = (int(v) for v in toks[0].split("x"))
    shape, n = (c, h, w), 0
    for t in toks[1:]:
        if t in ("r", "sg", "th"):
            layers.append({"r": torch.nn.ReLU(), "sg": torch.nn.Sigmoid(), "th": torch.nn.Tanh()}[t])
        elif t == "f":
            layers.append(torch.nn.Flatten())
            c, h, w = c * h * w, 1, 1
        elif t == "bn":
            mod = torch.nn.BatchNorm2d(c) if h * w > 1 or not isinstance(layers[-1], torch.nn.Linear) else torch.nn.BatchNorm1d(c)
            params[n] = mod
            layers.append(mod)
            n += 1
        elif t.startswith("fc"):
            lin = torch.nn.Linear(c, int(t[2:]))
            params[n] = lin
            layers.append(lin)
            c, n = int(t[2:]), n + 1
        elif t.startswith("m"):
            k = int(t[1:])
            layers.append(torch.nn.MaxPool2d(k))
            h, w, n = h // k, w // k, n + 1
        elif t.startswith("c"):
            m = re.fullmatch(r"c(\d+)(?:k(\d+))?(?:p(\d+))?(?:s(\d+))?", t)
            co, k, p, s = int(m[1]), int(m[2] or 3), int(m[3] or 0), int(m[4] or 1)
            conv = torch.nn.Conv2d(c, co, k, stride=s, padding=p)
            params[n] = conv
            layers.append(conv)
            c, h, w, n = co, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1, n + 1
        else:
            raise SystemExit(f"unknown token {t}")
    return torch.nn.Sequential(*layers), params, shape


def idx_file(root, name):
    for path in (os.path.join(root, name), os.path.join(root, name + ".gz")):
        if os.path.exists(path):
            import gzip
            with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
                return f.read()
    raise SystemExit(f"{name} not found under {root} (run data/fetch.sh)")


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    parity, spec, optim, lr = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    B = int(sys.argv[6]) if len(sys.argv) > 6 else 64
    dataset = sys.argv[7] if len(sys.argv) > 7 else "mnist"
    torch.set_default_dtype(torch.float64)
    tmp = tempfile.mkdtemp()
    init, final, log = (os.path.join(tmp, f) for f in ("init.npz", "final.npz", "log.jsonl"))
    subprocess.run([parity, "train", "--trainer", "reference", "--dtype", "f64", "--dataset", dataset,
                    "--model", spec, "--optim", optim, "--lr", str(lr), "--batch", str(B),
                    "--steps", str(steps), "--seed", "1", "--init-save", init, "--save", final,
                    "--log", log, "--quiet"], check=True)
    order = [int(v) for v in subprocess.run(
        [parity, "data", "order", "--dataset", dataset, "--seed", "1", "--epoch", "0"],
        check=True, capture_output=True, text=True).stdout.split()]
    losses = [json.loads(l)["loss"] for l in open(log) if '"type":"step"' in l]

    root = os.path.join(os.environ.get("PARITY_DATA", os.path.expanduser("~/.cache/parity/data")),
                        dataset)
    X = np.frombuffer(idx_file(root, "train-images-idx3-ubyte"), np.uint8, offset=16)
    Y = np.frombuffer(idx_file(root, "train-labels-idx1-ubyte"), np.uint8, offset=8)
    net, params, shape = build(spec)
    X = X.reshape(-1, int(np.prod(shape)))
    w0 = np.load(init)
    with torch.no_grad():
        for i, mod in params.items():
            for name, t in mod.state_dict().items():
                if name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
                    t.copy_(torch.tensor(w0[f"layer{i}.{name}"].astype(np.float64)).reshape(t.shape))
    opt = (torch.optim.Adam(net.parameters(), lr=lr) if optim == "adam"
           else torch.optim.SGD(net.parameters(), lr=lr))
    net.train()
    worst_loss = 0.0
    for k in range(steps):
        idx = order[k * B:(k + 1) * B]
        x = torch.tensor(X[idx] / 255.0).reshape((B,) + shape)
        y = torch.tensor(Y[idx].astype(np.int64))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        worst_loss = max(worst_loss, abs(loss.item() - losses[k]) / abs(losses[k]))
    w1 = np.load(final)
    # A bias right before a batchnorm has a zero gradient in exact arithmetic
    # (the batch mean takes it out): both sides hold rounding noise there,
    # compared in absolute terms.
    before_bn = {i for i, mod in params.items()
                 if isinstance(params.get(i + 1), (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d))}
    worst = 0.0
    print(f"{spec} {optim} lr {lr}, batch {B}, {steps} steps of {dataset}, f64:")
    print(f"  loss, every step: max relative difference {worst_loss:.3g}")
    for i, mod in params.items():
        for name, t in mod.state_dict().items():
            key = f"layer{i}.{name}"
            if key not in w1:
                continue
            a, b = t.detach().numpy().astype(np.float64).ravel(), w1[key].astype(np.float64).ravel()
            if i in before_bn and name == "bias":
                rel = float(np.max(np.abs(a - b)))
                print(f"  {key:28s} {a.size:9d} values: max |torch - parity| = {rel:.3g} "
                      f"(feeds a batchnorm: rounding noise on both sides)")
            else:
                rel = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
                print(f"  {key:28s} {a.size:9d} values: max |torch - parity| / max |parity| = {rel:.3g}")
            worst = max(worst, rel)
    ok = worst <= TOL and worst_loss <= TOL
    print(f"{'PASS' if ok else 'FAIL'}: worst {max(worst, worst_loss):.3g} (tolerance {TOL:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
