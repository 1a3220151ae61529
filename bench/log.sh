#!/usr/bin/env bash
# What `parity train --log FILE` costs: seconds per epoch of Fashion-MNIST
# (default MLP mlp:784-256-128-10, batch 64, f32, serial exact) without and
# with the JSONL step log (one line and one digest of all weights per step),
# in interleaved rounds (the order alternates each round, so drift in the
# machine's speed hits both alike); prints every round, the medians, ms per
# step and the overhead ratio. A benchmark, not a test.
# Usage: bench/log.sh [ROUNDS] [extra train flags]   (ROUNDS default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
shift || true
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
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
printf '%-6s %12s %12s\n' round "plain s" "--log s"
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
    printf '%-6s %12.3f %12.3f\n' "$r" "$p" "$l"
done
digest=$(head -n 1 "$T/l.jsonl" | python3 -c \
    "import json,sys; print(' '.join(k for k in json.load(sys.stdin) if k.startswith('weights_')))")
python3 - "$steps" "$digest" "${plain[*]}" "${logged[*]}" <<'PY'
import statistics, sys
steps, digest = int(sys.argv[1]), sys.argv[2]
p = statistics.median(map(float, sys.argv[3].split()))
l = statistics.median(map(float, sys.argv[4].split()))
print(f"median s/epoch: plain {p:.3f}, --log {l:.3f} ({steps} steps; step log digest: {digest})")
print(f"per step: plain {1e3 * p / steps:.3f} ms, --log {1e3 * l / steps:.3f} ms, "
      f"log adds {1e3 * (l - p) / steps:.3f} ms")
print(f"overhead ratio --log / plain: {l / p:.3f} ({100 * (l / p - 1):+.1f}%)")
PY
