#!/usr/bin/env bash
# Where a CNN's training step goes, layer by layer: bench_layers times each
# layer's forward, input-gradient and weight-gradient kernels (one thread,
# exact, f32, batch 64) and the one-thread f32 FMA peak in interleaved
# rounds (medians of 15), and sets each op's GFLOP/s against its round's
# peak, and its best round against the peak's best; bench_peak measures the kernel set's register-tile ceiling. Models:
# the studies' CIFAR-10 CNN with batchnorm and the MNIST CNN. Writes
# bench/results/layers.md (bench/results_lib.sh); not a test.
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
head = open(f"{d}/cifar").readline()
kset = re.search(r"kernels (\S+),", head).group(1)
peak = float(re.search(r"peak f32 1 thread ([\d.]+)", head).group(1))
best = float(re.search(r"\(best ([\d.]+)\)", head).group(1))
pk = open(f"{d}/peak").read()
tile = re.search(r"tile f32 1 thread, (\d+) x 2 \(%s\): ([\d.]+)" % re.escape(kset), pk)
tpeak = float(re.search(r"peak f32 1 thread\s*: ([\d.]+)", pk).group(1))
print("One thread, exact mode, f32, batch 64, kernels %s (`bench_layers MODEL 64 R`): R rounds,"
      " each timing the FMA peak loop once and every op once, warm (after an untimed call);"
      " each figure the median over the rounds. %% peak: the op's GFLOP/s (2 flops a"
      " multiply-add of a dense or conv tap) over the same round's one-thread f32 FMA peak"
      " (median **%.1f GFLOP/s**). Best %% peak: the op's fastest round over the peak loop's"
      " fastest (%.1f GFLOP/s); load only adds time, so this is the kernel undisturbed."
      " Pooling and batchnorm count no flops: their time is the figure." % (kset, peak, best))
if tile:
    mr, tg = int(tile.group(1)), float(tile.group(2))
    print()
    print("The ceiling of this kernel set's register tile (`bench_peak`, best of 5): its"
          " %d broadcasts and 2 vector loads from L1 for every %d independent fmas run at"
          " **%.1f GFLOP/s, %.0f%% of the peak it measured (%.1f)**. The conv and dense ops' inner"
          " loops are that tile." % (mr, 2 * mr, tg, 100 * tg / tpeak, tpeak))
for name, label in (("cifar", "CIFAR-10 CNN with batchnorm"), ("mnist", "MNIST CNN")):
    lines = open(f"{d}/{name}").read().splitlines()
    print()
    print("## %s: `%s`" % (label, lines[0].split("model ")[1].split(",")[0]))
    print()
    print("| layer | kind | op | ms | GFLOP/s | % peak | best % peak |")
    print("|--:|---|---|--:|--:|--:|--:|")
    for l in lines[2:]:
        layer, kind, op, ms, gf, pct, bpct = l.split("\t")
        if layer == "all":
            print("| all | | the step's kernels | **%s** | %s | %s | %s |" % (ms, gf, pct, bpct))
        else:
            print("| %s | %s | %s | %s | %s | %s | %s |" % (layer, kind, op, ms, gf, pct, bpct))
PY
}
bench_write report
