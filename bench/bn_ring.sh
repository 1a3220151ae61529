#!/usr/bin/env bash
# What batchnorm's ordered statistics ring costs under MPI: the same CNN with
# and without its batchnorm layers, trainer mpi exact at R ranks, in one run:
# the communication seconds per step of each (the gradient ring, plus the
# statistics ring where there is batchnorm: parity's comm_seconds_per_step,
# waiting included) and the difference per batchnorm layer per step. Writes
# bench/results/bn_ring.md (bench/results_lib.sh); a benchmark, not a test.
# Usage: bench/bn_ring.sh [STEPS] [RANKS] [REPEATS]   (300 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin bn_ring "Batchnorm's statistics ring under MPI" "$@"
STEPS=${1:-300}
R=${2:-2}
REPEATS=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
with=cnn:1x28x28-c16k3p1-bn-r-m2-c32k3p1-bn-r-m2-f-fc64-bn-r-fc10
without=${with//-bn/}
n_bn=$(grep -o -- '-bn' <<<"$with" | wc -l)

# Median over REPEATS of a field of `parity train --json`.
median() { # field model
    for _ in $(seq "$REPEATS"); do
        $P train --trainer mpi --ranks "$R" --dataset mnist --model "$2" --steps "$STEPS" \
            --batch 64 --json --quiet | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
    done | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

cw=$(median comm_seconds_per_step "$with")
co=$(median comm_seconds_per_step "$without")
bw=$(median bytes_sent_per_step "$with")
bo=$(median bytes_sent_per_step "$without")

report() {
    python3 - "$R" "$STEPS" "$REPEATS" "$with" "$without" "$cw" "$co" "$bw" "$bo" "$n_bn" <<'PY'
import sys
R, steps, repeats = sys.argv[1:4]
with_, without = sys.argv[4:6]
cw, co, bw, bo = map(float, sys.argv[6:10])
n_bn = int(sys.argv[10])
print(f"`parity train --trainer mpi --ranks {R} --dataset mnist --steps {steps} --batch 64`, "
      f"exact, the median of {repeats} runs of each model: `comm_seconds_per_step` "
      "(the gradient ring, and the statistics ring where there is batchnorm, waiting "
      "included) and `bytes_sent_per_step`.")
print()
print("| model | comm ms/step | bytes/step |")
print("|---|--:|--:|")
print(f"| `{with_}` | {cw * 1e3:.3f} | {bw:,.0f} |")
print(f"| `{without}` | {co * 1e3:.3f} | {bo:,.0f} |")
print()
print(f"The statistics ring: {(cw - co) * 1e6 / n_bn:.1f} us per batchnorm layer per step "
      f"({n_bn} layers, 3 exchanges each), {(bw - bo) / n_bn:,.0f} bytes.")
PY
}
bench_write report
