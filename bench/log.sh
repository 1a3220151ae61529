#!/usr/bin/env bash
# What `parity train --log FILE` costs: seconds per epoch of Fashion-MNIST
# (default MLP mlp:784-256-128-10, batch 64, f32, serial exact) without and
# with the JSONL step log (one line and one digest of all weights per step),
# in interleaved rounds (the order alternates each round, so drift in the
# machine's speed hits both alike): every round, the medians, ms per step and
# the overhead ratio. Writes bench/results/log.md (bench/results_lib.sh); a
# benchmark, not a test.
# Usage: bench/log.sh [ROUNDS] [extra train flags]   (ROUNDS default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin log "The step log: what \`parity train --log\` costs" "$@"
ROUNDS=${1:-7}
shift || true
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

# One run; prints its training seconds (the "seconds" of --json: the loop,
# log lines included, dataset loading not).
run() {
    if [ "$1" = log ]; then
        "$P" train --epochs 1 --json --quiet --log "$T/l.jsonl" "${@:2}" >"$T/r.json"
    else
        "$P" train --epochs 1 --json --quiet "${@:2}" >"$T/r.json"
    fi
    field "$T/r.json" seconds
}

run plain "$@" >/dev/null   # warm-up: page cache, CPU frequency
steps=$(field "$T/r.json" steps)
plain=()
logged=()
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        p=$(run plain "$@")
        l=$(run log "$@")
    else
        l=$(run log "$@")
        p=$(run plain "$@")
    fi
    plain+=("$p")
    logged+=("$l")
    echo "round $r of $ROUNDS: plain $p s, --log $l s" >&2
done
digest=$(head -n 1 "$T/l.jsonl" | python3 -c \
    "import json,sys; print(' '.join(k for k in json.load(sys.stdin) if k.startswith('weights_')))")

report() {
    python3 - "$steps" "$digest" "${plain[*]}" "${logged[*]}" "$*" <<'PY'
import statistics, sys
steps, digest, extra = int(sys.argv[1]), sys.argv[2], sys.argv[5]
pv = [float(x) for x in sys.argv[3].split()]
lv = [float(x) for x in sys.argv[4].split()]
p, l = statistics.median(pv), statistics.median(lv)
print(f"`parity train --epochs 1{' ' + extra if extra else ''}` (default MLP, batch 64, f32, "
      f"serial exact; {steps} steps) without and with `--log FILE`, whose step lines carry "
      f"`{digest}`; {len(pv)} interleaved rounds after one warm-up run, the order "
      "alternating each round; training seconds (the loop, log lines included, loading not).")
print()
print("| | s/epoch, median | fastest | ms/step |")
print("|---|--:|--:|--:|")
print(f"| plain | {p:.3f} | {min(pv):.3f} | {1e3 * p / steps:.3f} |")
print(f"| `--log` | {l:.3f} | {min(lv):.3f} | {1e3 * l / steps:.3f} |")
print()
print(f"The log adds {1e3 * (l - p) / steps:.3f} ms a step: --log / plain = {l / p:.3f} "
      f"({100 * (l / p - 1):+.1f}%).")
print()
print("| round | plain s | --log s |")
print("|--:|--:|--:|")
for r, (a, b) in enumerate(zip(pv, lv), 1):
    print(f"| {r} | {a:.3f} | {b:.3f} |")
PY
}
bench_write report "$@"
