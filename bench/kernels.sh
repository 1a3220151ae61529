#!/usr/bin/env bash
# Kernel-level figures: the machine's FMA peak (bench_peak), parity's achieved
# GFLOP/s in training (6 x params x samples / time) on a layer-heavy model and
# on the default one, seconds per epoch against hidden width, what exact
# mode's chunked fold costs against fast mode for each chunk size, the peak
# memory of a Fashion-MNIST run, and the dense kernels against cblas_sgemm.
# Writes bench/results/kernels.md (bench/results_lib.sh); not a test.
# Usage: bench/kernels.sh [STEPS]   (300)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin kernels "Kernels: FMA peak, GFLOP/s in training, width, chunk, memory, BLAS" "$@"
STEPS=${1:-300}
cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" --target parity bench_peak >/dev/null
./build/bench_peak >"$T/peak"

train() { # train MODEL [FLAGS...]: one JSON line of `parity train` in $T/runs
    ./build/parity train --model "$1" --steps "$STEPS" --quiet --json "${@:2}" |
        python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))' >>"$T/runs"
}
: >"$T/runs"
train mlp:784-1024-1024-10
train mlp:784-1024-1024-10 --dtype f64
train mlp:784-1024-1024-10 --trainer omp --threads 2
train mlp:784-256-128-10
train mlp:784-256-128-10 --trainer omp --threads 2
for h in 128 256 512 1024 2048; do train "mlp:784-$h-$h-10"; done
for c in 4 8 16 32 64; do
    for mode in exact fast; do train mlp:784-256-128-10 --chunk "$c" --mode "$mode"; done
done
echo "training runs done" >&2

/usr/bin/time -f "%M" ./build/parity train --epochs 1 --quiet 2>"$T/rss" >/dev/null

# Would fast mode gain from a BLAS? (needs libblas-dev; OpenBLAS behind it if installed)
: >"$T/blas"
if cmake --build build --target bench_blas >/dev/null 2>&1; then
    blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
    OPENBLAS_NUM_THREADS=1 ./build/bench_blas >"$T/blas"
fi

report() {
    python3 - "$T" "$STEPS" "${blas:-}" <<'PY'
import json, re, sys
d, steps, blas = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [json.loads(l) for l in open(f"{d}/runs")]
EPOCH = 844   # steps of batch 64 in an epoch of Fashion-MNIST's 54,000 training records

def gflops(r):
    return 6 * r["n_params"] * r["samples_per_second"] / 1e9

print("## FMA peak (`bench_peak`)")
print()
peak = re.findall(r"peak (f\d+) (\d) threads?\s*: ([\d.]+)", open(f"{d}/peak").read())
if peak:
    print("| dtype | 1 thread GFLOP/s | 2 threads GFLOP/s |")
    print("|---|--:|--:|")
    for dt in ("f32", "f64"):
        v = {t: g for p, t, g in peak if p == dt}
        print(f"| {dt} | {v.get('1', '-')} | {v.get('2', '-')} |")
else:
    print(open(f"{d}/peak").read().strip())
print()
print(f"## Achieved in training ({steps} steps, batch 64)")
print()
print("GFLOP/s = 6 x parameters x samples per second; s/epoch = seconds per step x 844.")
print()
print("| model | trainer | mode | dtype | GFLOP/s | s/epoch |")
print("|---|---|---|---|--:|--:|")
for r in runs[:5]:
    t = r["trainer"] + (f" T={r['threads']}" if r["threads"] > 1 else "")
    print(f"| {r['model']} | {t} | {r['mode']} | {r['dtype']} | {gflops(r):.1f} "
          f"| {r['seconds'] / r['steps'] * EPOCH:.3f} |")
print()
print("## Seconds per epoch against hidden width")
print()
print("`mlp:784-H-H-10`, serial exact, f32; FLOP ratio: the next width's FLOPs per step over this one's.")
print()
print("| H | s/epoch | GFLOP/s | time ratio to the next H | FLOP ratio |")
print("|--:|--:|--:|--:|--:|")
wide = runs[5:10]
for k, r in enumerate(wide):
    s = r["seconds"] / r["steps"] * EPOCH
    nxt = wide[k + 1] if k + 1 < len(wide) else None
    ratio = (f"{nxt['seconds'] / nxt['steps'] / (r['seconds'] / r['steps']):.2f} "
             f"| {nxt['n_params'] / r['n_params']:.2f}" if nxt else "- | -")
    print(f"| {r['model'].split('-')[1]} | {s:.3f} | {gflops(r):.1f} | {ratio} |")
print()
print("## Exact mode's fold against the chunk")
print()
print("Default MLP, serial, f32; `--chunk C` is part of the contract (the bits depend on it). "
      "exact / fast: fast's time over exact's, of the weight-gradient phase and of the whole "
      "run (1.00: exact costs nothing more).")
print()
print("| C | exact weight_grads us/step | fast weight_grads us/step | exact / fast, weight_grads | exact / fast, run |")
print("|--:|--:|--:|--:|--:|")
for e, f in zip(runs[10::2], runs[11::2]):
    we, wf = (1e6 * r["phase_seconds"]["weight_grads"] / r["steps"] for r in (e, f))
    print(f"| {e['chunk']} | {we:.1f} | {wf:.1f} | {wf / we:.2f} | {f['seconds'] / e['seconds']:.2f} |")
print()
print("## Peak memory")
print()
rss = int(open(f"{d}/rss").read().split()[-1]) / 1024
data = (60000 + 10000) * (784 + 1) / 2**20           # uint8 pixels + labels
params = 235146 * 4 / 2**20
limit = data + 4 * params + 64
print(f"One epoch of Fashion-MNIST, default MLP, f32 (`/usr/bin/time -f %M parity train --epochs 1`): "
      f"max RSS {rss:.1f} MiB; budget = dataset {data:.1f} + 4 x parameters {4 * params:.1f} "
      f"+ 64 = {limit:.1f} MiB: {'within' if rss <= limit else 'OVER'}.")
print()
print("## Dense kernels against a BLAS (`bench_blas`)")
print()
rows = re.findall(r"(\d+) -> (\d+)\s+forward\s+([\d.]+) vs\s+([\d.]+)\s+input grad\s+([\d.]+) vs\s+([\d.]+)"
                  r"\s+weight grad\s+([\d.]+) vs\s+([\d.]+)", open(f"{d}/blas").read())
if rows:
    print(f"f32, batch 64, one thread, GFLOP/s, parity vs `cblas_sgemm` of `{blas}` "
          "(`OPENBLAS_NUM_THREADS=1`)" + ("" if "openblas" in blas else
          ": the reference BLAS, not OpenBLAS (`apt-get install libopenblas0-pthread`)") + ".")
    print()
    print("| layer | forward | input gradient | weight gradient |")
    print("|---|--:|--:|--:|")
    for a, b, *g in rows:
        print(f"| {a} -> {b} | {g[0]} vs {g[1]} | {g[2]} vs {g[3]} | {g[4]} vs {g[5]} |")
else:
    print("`bench_blas` not built: no BLAS with cblas.h "
          "(`apt-get install libblas-dev libopenblas0-pthread`).")
PY
}
bench_write report
