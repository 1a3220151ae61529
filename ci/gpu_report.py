#!/usr/bin/env python3
"""Writes ci/gpu.sh's report (gpu.md, to stdout) from the timings of its times.txt.

Usage: ci/gpu_report.py TIMES COMMIT FAILS [--note TEXT] [--date TEXT] [--machine GPU_MD]

TIMES: the lines `parity-MODEL-DTYPE SECONDS` (one run each) and
`torch-MODEL-DTYPE[-MODE] JSON` (bench/gpu_vs_pytorch.py's line; MODE is the
JSON's "mode" when the name lacks it). COMMIT: the file holding parity's commit
(the binaries' COMMIT) or the commit itself. FAILS: how many of ci/gpu.sh's
checks failed. The provenance's date is --date TEXT, else TIMES's modification
time (UTC): in ci/gpu.sh, when its last timing was written. The GPU, driver,
CUDA and CPU rows are the machine's (nvidia-smi, /proc/cpuinfo) unless
--machine names a gpu.md that ci/gpu.sh wrote on the GPU machine: then they are
copied from it, to rewrite a report elsewhere. --note adds one provenance row
"| note | TEXT |". A missing figure reads n/a; a median of fewer than 3 runs
says so. Not a test; ci/gpu.sh's dry run (TRAINER=serial) runs it.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess

MODELS = [("mlp", "MLP", "the default MLP (784-256-128-10, ReLU, SGD lr 0.01) on Fashion-MNIST",
           844),
          ("cnn", "MNIST CNN", "the MNIST CNN (`cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10`: conv "
           "1->32 3x3 padding 1, ReLU, fc 128, ReLU, fc 10; Adam lr 0.001) on MNIST", 844),
          ("cifar", "CIFAR BN CNN", "the CIFAR CNN with batchnorm (`cnn:3x32x32-c32k3p1-bn-r-m2-"
           "c64k3p1-bn-r-m2-c128k3p1-bn-r-m2-f-fc256-r-fc10`: three blocks conv 3x3 -> bn -> "
           "ReLU -> max-pool 2, fc 256, ReLU, fc 10; SGD lr 0.01) on CIFAR-format data that "
           "`parity data make-cifar --records 10000` writes (speed does not depend on the "
           "pixels)", 704)]
ROWS = [("mlp", "f32"), ("mlp", "f64"), ("cnn", "f32"), ("cifar", "f32")]
MACHINE_ROWS = ("GPU, driver", "CUDA", "CPU")


def q(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def this_machine():
    """The GPU, driver, CUDA and CPU rows of the machine the script runs on."""
    gpu = q("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")
    smi = q("nvidia-smi")
    cuda = smi.split("CUDA Version:")[-1].split()[0] if "CUDA Version:" in smi else "?"
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
           if l.startswith("model name")][0]
    return {"GPU, driver": gpu,
            "CUDA": f"the driver's {cuda}; parity built with nvcc 13.0, sm_90, -fmad=false, "
                    "on Debian 12 with gcc 12",
            "CPU": cpu}


def machine_of(gpu_md):
    """The GPU, driver, CUDA and CPU rows of an earlier gpu.md."""
    text = open(gpu_md, encoding="utf-8").read()
    rows = {}
    for key in MACHINE_ROWS:
        m = re.search(r"^\| %s \| (.*) \|$" % re.escape(key), text, re.M)
        if not m:
            raise SystemExit(f"gpu_report.py: {gpu_md}: no provenance row '{key}'")
        rows[key] = m.group(1)
    return rows


def read_times(path):
    """parity {KEY: [seconds]}, torch {(KEY, MODE): [seconds]}, steps {KEY: n}, the last JSON."""
    parity, torch, steps, meta = {}, {}, {}, {}
    for line in open(path):
        if not line.strip():
            continue
        name, rest = line.split(" ", 1)
        if name.startswith("parity-"):   # parity-MODEL-DTYPE SECONDS
            parity.setdefault(name[len("parity-"):], []).append(float(rest.split()[0]))
        else:                            # torch-MODEL-DTYPE[-MODE] JSON
            d = meta = json.loads(rest)
            key = name[len("torch-"):]
            if key.endswith("-" + d["mode"]):
                key = key[:-len(d["mode"]) - 1]
            torch[(key, d["mode"])] = [ep[-1] for ep in d["seconds"]]
            steps[key] = d.get("steps_per_epoch")
    return parity, torch, steps, meta


def main():
    ap = argparse.ArgumentParser(description="ci/gpu.sh's report from its times.txt")
    ap.add_argument("times")
    ap.add_argument("commit")
    ap.add_argument("fails", type=int)
    ap.add_argument("--note")
    ap.add_argument("--date")
    ap.add_argument("--machine")
    a = ap.parse_args()
    commit = open(a.commit).read().strip() if os.path.isfile(a.commit) else a.commit
    date = a.date or datetime.datetime.fromtimestamp(
        os.path.getmtime(a.times), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    machine = machine_of(a.machine) if a.machine else this_machine()
    parity, torch, steps, meta = read_times(a.times)
    med = statistics.median

    def cell(v, n):
        if not v:
            return "n/a"
        return f"{med(v):.3f}" + ("" if len(v) == n else f" ({len(v)} of {n} runs)")

    def ratio(x, y):
        return f"{med(x) / med(y):.2f}x" if x and y else "n/a"

    print("# --trainer cuda against PyTorch on the same GPU\n")
    if a.machine:
        print("Written by `ci/gpu_report.py` from a times.txt of the GPU machine; not typed by "
              "hand.\n")
    else:
        print("Written by `ci/gpu.sh` on the GPU machine; not typed by hand.\n")
    print("| provenance | |\n|---|---|")
    print(f"| date (UTC) | {date} |")
    print(f"| GPU, driver | {machine['GPU, driver']} |")
    print(f"| CUDA | {machine['CUDA']} |")
    print(f"| PyTorch | {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}), TF32 off |")
    print(f"| CPU | {machine['CPU']} |")
    print(f"| parity commit | {commit} |")
    print(f"| checks of ci/gpu.sh | {'all passed' if a.fails == 0 else f'{a.fails} FAILED'} |")
    if a.note:
        print(f"| note | {a.note} |")
    print()
    print("Batch 64, the last 10% of each training file held out; data resident on the GPU:\n")
    for key, short, what, per in MODELS:
        note = ""
        if any(steps.get(f"{key}-{dt}") not in (None, per) for dt in ("f32", "f64")):
            note = " (PyTorch's epoch had another length: see times.txt)"
        print(f"- {short}: {what}; {per} steps an epoch{note}.")
    print("\nSeconds of the 2nd of 2 epochs, median of 3 runs (parity: `--epochs 2 --warmup-steps "
          "STEPS --no-eval`, exact mode, one loss read back per step; PyTorch: one process, 3 "
          "models, no synchronisation inside the epoch).\n")
    print("| model | dtype | parity cuda (exact) | PyTorch default | PyTorch deterministic | "
          "default / cuda | deterministic / cuda |")
    print("|---|---|--:|--:|--:|--:|--:|")
    short = {k: s for k, s, _, _ in MODELS}
    for model, dt in ROWS:
        key = f"{model}-{dt}"
        p, d, t = parity.get(key), torch.get((key, "default")), torch.get((key, "deterministic"))
        print(f"| {short[model]} | {dt} | {cell(p, 3)} | {cell(d, 3)} | {cell(t, 3)} | "
              f"{ratio(d, p)} | {ratio(t, p)} |")


if __name__ == "__main__":
    main()
