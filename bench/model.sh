#!/usr/bin/env bash
# The scaling model against runs on this machine's shared memory: `parity
# model --validate 2,3` measures the costs, predicts, and times mpi exact and
# fast at R = 2 and 3 against the prediction (docs/scaling.md). Writes the
# model's output to bench/results/model.md (bench/results_lib.sh); a
# benchmark, not a test. Over TCP between hosts: bench/model_hosts.sh.
# Usage: bench/model.sh [extra parity model flags]   (e.g. --steps 100)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin model "The scaling model against runs on shared memory" "$@"
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$P" model --validate 2,3 "$@" >"$T/model"

report() {
    echo "\`parity model --validate 2,3${*:+ $*}\`: measured costs, the validation rows (measured"
    echo "against predicted seconds per step; negative error: the model predicted less time"
    echo "than the runs took) and the predicted strong scaling."
    echo
    echo '```'
    cat "$T/model"
    echo '```'
}
bench_write report "$@"
