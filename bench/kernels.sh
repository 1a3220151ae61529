#!/usr/bin/env bash
# Kernel-level figures: the machine's FMA peak (bench_peak), parity's achieved
# GFLOP/s in training (6 x params x samples / time) on a layer-heavy model and
# on the default one, seconds per epoch against hidden width, and the peak
# memory of a Fashion-MNIST run, and the dense kernels against cblas_sgemm.
# Prints figures; not a test.
# Usage: bench/kernels.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-300}
cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" --target parity bench_peak >/dev/null
./build/bench_peak
gflops() { # model, extra flags
    local m=$1
    shift
    ./build/parity train --model "$m" --steps "$STEPS" --quiet --json "$@" | python3 -c "
import json, sys
d = json.load(sys.stdin)
n = d['n_params']; s = d['samples_per_second']
print(f\"{d['model']:<24} {d['trainer']:>6} {d['mode']:>5} {d['dtype']}: {6 * n * s / 1e9:6.1f} GFLOP/s, {d['seconds'] / d['steps'] * 844:6.3f} s/epoch\")"
}
echo
echo "achieved in training ($STEPS steps, batch 64, 6 x params x samples / time):"
gflops mlp:784-1024-1024-10
gflops mlp:784-1024-1024-10 --dtype f64
gflops mlp:784-1024-1024-10 --trainer omp --threads 2
gflops mlp:784-256-128-10
gflops mlp:784-256-128-10 --trainer omp --threads 2
echo
echo "seconds per epoch against hidden width (mlp:784-H-H-10, serial exact, f32):"
for h in 128 256 512 1024 2048; do gflops "mlp:784-$h-$h-10"; done
echo
echo "peak memory of one epoch of Fashion-MNIST (default MLP, f32):"
/usr/bin/time -f "%M" ./build/parity train --epochs 1 --quiet 2>"/tmp/parity_rss.$$" >/dev/null
rss_kib=$(tail -n 1 "/tmp/parity_rss.$$")
rm -f "/tmp/parity_rss.$$"
python3 - "$rss_kib" <<'PY'
import sys
rss = int(sys.argv[1]) / 1024
data = (60000 + 10000) * (784 + 1) / 2**20           # uint8 pixels + labels
params = 235146 * 4 / 2**20
limit = data + 4 * params + 64
print(f"max RSS {rss:.1f} MiB; budget = dataset {data:.1f} + 4 x params {4 * params:.1f} + 64 = {limit:.1f} MiB: {'OK' if rss <= limit else 'OVER'}")
PY

# Would fast mode gain from a BLAS? (needs libblas-dev; OpenBLAS behind it if installed)
echo
if cmake --build build --target bench_blas >/dev/null 2>&1; then
    echo "BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)"
    OPENBLAS_NUM_THREADS=1 ./build/bench_blas
else
    echo "bench_blas not built: no BLAS with cblas.h (apt-get install libblas-dev libopenblas0-pthread)"
fi
