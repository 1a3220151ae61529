#!/usr/bin/env python3
"""Rewrites README.md's table of current figures from bench/results/.

Each figure is read from the results file a bench script wrote (its
provenance in the file's header); the table lists each with the script that
prints it, and one line under it says where and when they were measured.
The table sits between the README's `<!-- figures -->` and
`<!-- /figures -->` lines; nothing else of README.md changes. A figure whose
file or row is missing reads "not measured". bench/run-all.sh runs this at
its end. Usage: bench/readme_figures.py [RESULTS_DIR] [README]
"""
import os
import re
import sys

RESULTS = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
README = sys.argv[2] if len(sys.argv) > 2 else "README.md"
BEGIN, END = "<!-- figures -->", "<!-- /figures -->"
MISSING = "not measured"


def read(name):
    path = os.path.join(RESULTS, name + ".md")
    return open(path, encoding="utf-8").read() if os.path.exists(path) else ""


def provenance(text, key):
    m = re.search(r"^\| %s \| (.*?) \|$" % re.escape(key), text, re.M)
    return m.group(1) if m else ""


def row(text, first):
    """The cells of the first table row whose first cell is `first`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0] == first:
            return cells
    return None


def cell(text, first, col, fmt=lambda v: v):
    r = row(text, first)
    return fmt(r[col]) if r and len(r) > col and r[col] else MISSING


def seconds(v):   # "1.176 (1.176)" -> "1.18 s"
    return "%.2f s" % float(v.split()[0])


def verify_figure(text):
    t = re.search(r"\*\*(\d+ min \d+ s)\*\* from start to end", text)
    n = re.search(r"^(\d+) of (\d+) two-core rows carry a speedup", text, re.M)
    if not t or not n:
        return MISSING
    return "%s; %s of %s" % (t.group(1), n.group(1), n.group(2))


def external_figure(text):
    r = row(text, "ddp-cnn-2")
    if not r or len(r) < 15:
        return MISSING
    return "%s; %s s; %s s (files %s s)" % (r[4], r[8], r[10], r[11])


def layers_figure(text):
    r = row(text, "all")   # the first "all" row: the CIFAR-10 CNN's
    if not r or len(r) < 7:
        return MISSING
    return "%.1f ms; %s; best %s" % (float(r[3].strip("*")), r[5], r[6])


def cnn_ratios_figure(mnist, cifar):
    one = "PyTorch 1 thread / parity serial exact"
    two = "PyTorch's best 2-core setup / parity omp T=2 exact"
    return "%s; %s; %s" % (cell(mnist, one, 1), cell(cifar, one, 1), cell(cifar, two, 1))


def gpu_figure(text):
    r = row(text, "MLP")   # its first row is f32; a file of the MLP alone has no model column
    r = r[1:] if r and len(r) > 1 and r[1] == "f32" else row(text, "f32")
    if not r or len(r) < 5:
        return MISSING
    return "%s s; PyTorch %s s (deterministic %s s)" % (r[1], r[2], r[3])


def gpu_cnn_figure(text):
    rs = [row(text, m) for m in ("MNIST CNN", "CIFAR BN CNN")]   # model, dtype, cuda, PyTorch
    if not all(r and len(r) > 4 for r in rs):
        return MISSING

    def col(i):
        return " and ".join(r[i] if r[i] == "n/a" else "%s s" % r[i] for r in rs)
    return "%s; PyTorch %s (deterministic %s)" % (col(2), col(3), col(4))


def main():
    trainers, vs, ver, ext, lay = (read(n) for n in ("trainers", "vs_pytorch", "verify",
                                                     "external", "layers"))
    gpu, vs_cnn, vs_cifar = read("gpu"), read("vs_pytorch_cnn"), read("vs_pytorch_cifar")
    rows = [
        ("`ci/verify.sh`'s default suite: wall time; two-core rows whose speedup has a 95% "
         "interval within +-10%", verify_figure(ver), "bench/verify.sh"),
        ("default MLP, one epoch of Fashion-MNIST, serial exact",
         cell(trainers, "serial", 1, seconds), "bench/trainers.sh"),
        ("the same, `omp --threads 2` exact: speedup over serial exact",
         cell(trainers, "omp --threads 2", 3), "bench/trainers.sh"),
        ("the same, `mpi --ranks 2` exact: speedup over serial exact",
         cell(trainers, "mpi --ranks 2", 3), "bench/trainers.sh"),
        ("PyTorch one thread / parity serial exact, the same epoch (above 1: parity is faster)",
         cell(vs, "PyTorch 1 thread / parity serial exact", 1), "bench/vs_pytorch.sh"),
        ("CIFAR-10 CNN with batchnorm, batch 64, one thread, f32 exact: the step's kernels; "
         "their share of the FMA peak (medians; best rounds)", layers_figure(lay),
         "bench/layers.sh"),
        ("PyTorch / parity exact, one epoch, f32 (above 1: parity is faster): MNIST CNN, one "
         "thread; CIFAR-10 CNN, one thread; CIFAR-10 CNN, two cores (PyTorch's best setup)",
         cnn_ratios_figure(vs_cnn, vs_cifar),
         "bench/vs_pytorch.sh 3 cnn` and `bench/vs_pytorch.sh 3 cifar"),
        ("PyTorch DDP, 2 processes, MNIST CNN with Adam under `parity lockstep --external "
         "--intermediates`: verdict; the trainer's own step; parity's side of it (the "
         "protocol's files)", external_figure(ext),
         "bench/external.sh"),
        ("default MLP, one epoch, f32, on %s: `--trainer cuda` exact; PyTorch on the same GPU"
         % (provenance(gpu, "GPU, driver").split(",")[0] or "a GPU"), gpu_figure(gpu),
         "ci/gpu.sh"),
        ("the MNIST CNN and the CIFAR CNN with batchnorm, one epoch each, f32, on the same "
         "GPU: `--trainer cuda` exact; PyTorch", gpu_cnn_figure(gpu), "ci/gpu.sh"),
    ]
    cpu_files = (trainers, vs, ver, ext, lay, vs_cnn, vs_cifar)
    out = ["| figure | value | printed by |", "|---|--:|---|"]
    out += ["| %s | %s | `%s` |" % r for r in rows]
    dates = sorted(d.split(",")[0] for d in
                   (provenance(t, "date (UTC)") for t in cpu_files) if d)
    commits = sorted({provenance(t, "commit").split()[0] for t in cpu_files
                      if provenance(t, "commit")})
    cpu = provenance(trainers, "CPU") or provenance(ver, "CPU") or "unknown"
    # The CPUs behind one name may differ (a shared machine's host changes):
    # the kernel set each run chose says which vector units it had.
    ksets = sorted({m.group(1) for m in (re.search(r"kernels (\S+)", provenance(t, "compiler"))
                                         for t in cpu_files) if m})
    if len(ksets) == 1:
        cpu += ", kernel set %s" % ksets[0]
    elif ksets:
        cpu += ", kernel sets %s (each results file names its run's)" % " and ".join(ksets)
    when = "%s to %s" % (dates[0][:16], dates[-1][:16]) if dates else "never"
    gpu_when = provenance(gpu, "date (UTC)")[:16] or "never"
    out += ["", "Measured on %s, commit %s, %s UTC, by the commands named (`bench/run-all.sh "
            "--verify` runs all but the CNN runs of `vs_pytorch.sh`, and rewrites this table; the "
            "GPU rows: `ci/gpu.sh` on the GPU machine, %s UTC, commit "
            "%s); each file in [bench/results/](bench/results/) holds its provenance (load, "
            "compiler, MPI)." % (cpu, ", ".join(commits) or "unknown", when, gpu_when,
                                 provenance(gpu, "parity commit") or "unknown")]
    text = open(README, encoding="utf-8").read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.exit("%s: no %s ... %s block" % (README, BEGIN, END))
    new = text[:a + len(BEGIN)] + "\n" + "\n".join(out) + "\n" + text[b:]
    tmp = README + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, README)


if __name__ == "__main__":
    main()
