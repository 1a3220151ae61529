#!/usr/bin/env bash
# Seconds per epoch of Fashion-MNIST (mlp:784-256-128-10, batch 64, f32) for
# serial, omp T=2, mpi R=2, hybrid 1x2 and 2x1, root R=2, exact and fast;
# speedup over serial exact, exact/fast speed ratio, and the bytes one rank
# sends per step against 2 N sizeof(f32) of a ring allreduce.
# Prints figures; it is a benchmark, not a test. Usage: bench/trainers.sh [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-1}
# No config here has more threads than cores, so OpenMP keeps parity's own
# wait policy, a bounded spin (passive would add a futex wake to every
# parallel region; docs/performance.md, "Threads on a busy machine"; on a
# busy machine see bench/contention.sh).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
N=235146
get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('$1', 0))"; }

declare -A secs
printf '%-22s %-6s %12s %9s %14s %12s\n' config mode s/epoch speedup bytes/step "vs 2N*4"
for cfg in "serial" "omp --threads 2" "mpi --ranks 2" "hybrid --ranks 1 --threads 2" \
           "hybrid --ranks 2 --threads 1" "root --ranks 2"; do
    for mode in exact fast; do
        # shellcheck disable=SC2086
        js=$($P train --trainer $cfg --mode $mode --epochs "$EPOCHS" --json --quiet)
        s=$(echo "$js" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['seconds'] / $EPOCHS)")
        b=$(echo "$js" | get bytes_sent_per_step)
        secs["$cfg/$mode"]=$s
        base=${secs["serial/exact"]}
        printf '%-22s %-6s %12.3f %8.2fx %14.0f %11.3fx\n' "$cfg" "$mode" "$s" \
            "$(python3 -c "print($base / $s)")" "$b" "$(python3 -c "print($b / (2 * $N * 4))")"
    done
    python3 -c "print('%-22s exact/fast speed ratio %.2f' % ('$cfg', ${secs["$cfg/fast"]} / ${secs["$cfg/exact"]}))"
done
