#!/usr/bin/env bash
# Serial against omp T=2 on a quiet machine and beside busy processes that
# this script starts itself (shell loops, one per LOAD; killed on exit):
# `parity train` exact, default model mlp:784-256-128-10, batch 64, STEPS
# steps of Fashion-MNIST. Rounds interleave the four cells (quiet and loaded,
# serial and omp, the order alternating) so that drift from other work on
# the machine falls on every cell alike; each cell's median training
# seconds (min and max beside it) and the ratios serial / omp. Writes
# bench/results/contention.md (bench/results_lib.sh); figures, not a test
# (docs/performance.md, "Threads on a busy machine").
# Usage: bench/contention.sh [ROUNDS (7)] [STEPS (400)] [LOAD (1)]
# The wait policy is parity's own unless GOMP_SPINCOUNT or OMP_WAIT_POLICY is
# set in the environment (then that one, for every run here).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin contention "Threads on a busy machine: serial against omp T=2, quiet and loaded" "$@"
ROUNDS=${1:-7}
STEPS=${2:-400}
LOAD=${3:-1}
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }

loaders=()
stop_load() {
    local pid
    for pid in "${loaders[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${loaders[@]}"; do wait "$pid" 2>/dev/null || true; done
    loaders=()
}
start_load() {
    for _ in $(seq "$LOAD"); do
        sh -c 'while :; do :; done' &
        loaders+=($!)
    done
    sleep 0.2   # let the scheduler see them
}
BENCH_ON_EXIT=stop_load

declare -A t
run() {   # run CELL TRAINER-FLAGS...: appends the run's training seconds to t[CELL]
    local cell=$1
    shift
    t[$cell]+=" $("$P" train "$@" --steps "$STEPS" --json --quiet |
        python3 -c "import json,sys; print(json.load(sys.stdin)['seconds'])")"
}
cells() {   # cells PREFIX: serial and omp, in the order of this round
    if [ $((r % 2)) = 0 ]; then
        run "$1/serial" --trainer serial
        run "$1/omp" --trainer omp --threads 2
    else
        run "$1/omp" --trainer omp --threads 2
        run "$1/serial" --trainer serial
    fi
}

policy="parity's bounded spin (GOMP_SPINCOUNT from src/cli/cli.h)"
[ -n "${GOMP_SPINCOUNT:-}" ] && policy="GOMP_SPINCOUNT=$GOMP_SPINCOUNT (environment)"
[ -n "${OMP_WAIT_POLICY:-}" ] && policy="OMP_WAIT_POLICY=$OMP_WAIT_POLICY (environment)${GOMP_SPINCOUNT:+, GOMP_SPINCOUNT=$GOMP_SPINCOUNT}"
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 0 ]; then
        cells quiet
        start_load
        cells loaded
        stop_load
    else
        start_load
        cells loaded
        stop_load
        cells quiet
    fi
    echo "round $r of $ROUNDS done" >&2
done

report() {
    python3 - "$STEPS" "$ROUNDS" "$LOAD" "$(nproc)" "$policy" \
        "${t[quiet/serial]}" "${t[quiet/omp]}" "${t[loaded/serial]}" "${t[loaded/omp]}" <<'PY'
import statistics, sys
steps, rounds, load, cores, policy = sys.argv[1:6]
cells = {k: [float(x) for x in v.split()] for k, v in
         zip(("quiet/serial", "quiet/omp", "loaded/serial", "loaded/omp"), sys.argv[6:])}
med = {k: statistics.median(v) for k, v in cells.items()}
print(f"`parity train --steps {steps}`, exact, mlp:784-256-128-10, batch 64, Fashion-MNIST; "
      f"{rounds} rounds, each running the four cells (the order alternating); {cores} CPUs; "
      f"loaded: beside {load} busy shell loop(s) that the script starts; wait policy: {policy}. "
      "Training seconds: the median of the rounds, min and max beside it.")
print()
print("| machine | trainer | median | min | max |")
print("|---|---|--:|--:|--:|")
for k, v in cells.items():
    m, tr = k.split("/")
    print("| %s | %s | %.3f s | %.3f s | %.3f s |" % (m, tr + (" T=2" if tr == "omp" else ""),
                                                    med[k], min(v), max(v)))
qs, qo, ls, lo = (med[k] for k in cells)
print()
print("| ratio | |")
print("|---|--:|")
print("| quiet: serial / omp T=2 (above 1: the threads help) | %.2fx |" % (qs / qo))
print("| loaded: serial / omp T=2 (at least 1: the threads cost nothing) | %.2fx |" % (ls / lo))
print("| what the load costs serial: loaded / quiet | %.2fx |" % (ls / qs))
print("| what the load costs omp T=2: loaded / quiet | %.2fx |" % (lo / qo))
PY
}
bench_write report
