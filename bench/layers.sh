#!/usr/bin/env bash
# Where a CNN's training step goes, layer by layer: bench_layers times each
# layer's forward, input-gradient and weight-gradient kernels (one thread,
# exact, f32, batch 64, medians of 15 calls), and bench_peak measures the
# one-thread f32 FMA peak in the same run; the table sets each op's GFLOP/s
# against that peak. Models: the studies' CIFAR-10 CNN with batchnorm and the
# MNIST CNN. Writes bench/results/layers.md (bench/results_lib.sh); not a test.
# Usage: bench/layers.sh [REPEATS]   (15)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin layers "Layers: each kernel's time and share of the FMA peak" "$@"
R=${1:-15}
cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" --target bench_layers bench_peak >/dev/null
CIFAR=cnn:3x32x32-c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-c128k3p1-bn-r-m2-f-fc256-r-fc10
MNIST=cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10
./build/bench_peak >"$T/peak"
./build/bench_layers "$CIFAR" 64 "$R" >"$T/cifar"
./build/bench_layers "$MNIST" 64 "$R" >"$T/mnist"

report() {
    /usr/bin/python3 - "$T" <<'PY'
import re, sys
d = sys.argv[1]
peak = float(re.search(r"peak f32 1 thread\s*: ([\d.]+)", open(f"{d}/peak").read()).group(1))
print("One thread, exact mode, f32, batch 64; each op the median of its timed calls")
print("(`bench_layers MODEL 64 R`). %% peak: its GFLOP/s (2 flops a multiply-add of a dense or"
      " conv tap) over the one-thread f32 FMA peak `bench_peak` measured in the same run,"
      " **%.1f GFLOP/s**. Pooling and batchnorm count no flops: their time is the figure." % peak)
for name, label in (("cifar", "CIFAR-10 CNN with batchnorm"), ("mnist", "MNIST CNN")):
    lines = open(f"{d}/{name}").read().splitlines()
    print()
    print("## %s: `%s`" % (label, lines[0].split("model ")[1].split(",")[0]))
    print()
    print("| layer | kind | op | ms | GFLOP/s | % peak |")
    print("|--:|---|---|--:|--:|--:|")
    for l in lines[2:]:
        layer, kind, op, ms, gf = l.split("\t")
        pct = "-" if gf == "-" else "%.0f%%" % (100 * float(gf) / peak)
        if layer == "all":
            print("| all | | the step's kernels | **%s** | %s | %s |" % (ms, gf, pct))
        else:
            print("| %s | %s | %s | %s | %s | %s |" % (layer, kind, op, ms, gf, pct))
PY
}
bench_write report
