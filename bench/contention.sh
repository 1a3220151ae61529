#!/usr/bin/env bash
# Serial against omp T=2 on a quiet machine and beside busy processes that
# this script starts itself (shell loops, one per LOAD; killed on exit):
# `parity train` exact, default model mlp:784-256-128-10, batch 64, STEPS
# steps of Fashion-MNIST. Rounds interleave the four cells (quiet and loaded,
# serial and omp, the order alternating) so that drift from other work on
# the machine falls on every cell alike; prints each cell's median training
# seconds (min and max beside it) and the ratios serial / omp.
# Figures, not a test (docs/performance.md, "Threads on a busy machine").
# Usage: bench/contention.sh [ROUNDS (7)] [STEPS (400)] [LOAD (1)]
# The wait policy is parity's own unless GOMP_SPINCOUNT or OMP_WAIT_POLICY is
# set in the environment (then that one, for every run here).
set -euo pipefail
cd "$(dirname "$0")/.."
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
trap stop_load EXIT
trap 'exit 130' INT TERM

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
echo "parity train --steps $STEPS, exact, mlp:784-256-128-10, batch 64; $ROUNDS rounds;" \
     "$(nproc) cores; load: $LOAD busy shell loop(s); wait policy: $policy"
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
done

printf '%-8s %-8s %10s %10s %10s\n' machine trainer median min max
for cell in quiet/serial quiet/omp loaded/serial loaded/omp; do
    python3 - "$cell" ${t[$cell]} <<'EOF'
import statistics, sys
v = [float(x) for x in sys.argv[2:]]
m, tr = sys.argv[1].split('/')
print('%-8s %-8s %9.3fs %9.3fs %9.3fs' % (m, tr + (' T=2' if tr == 'omp' else ''), statistics.median(v), min(v), max(v)))
EOF
done
python3 - "${t[quiet/serial]}" "${t[quiet/omp]}" "${t[loaded/serial]}" "${t[loaded/omp]}" <<'EOF'
import statistics, sys
qs, qo, ls, lo = (statistics.median(float(x) for x in a.split()) for a in sys.argv[1:])
print('quiet:  serial / omp T=2 = %.2fx   (above 1: the threads help)' % (qs / qo))
print('loaded: serial / omp T=2 = %.2fx   (target: at least 1.00)' % (ls / lo))
print('load costs serial %.2fx, omp T=2 %.2fx of its quiet time' % (ls / qs, lo / qo))
EOF
