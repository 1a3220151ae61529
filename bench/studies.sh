#!/usr/bin/env bash
# The four studies' signed table: `parity verify studies` (about 25 minutes
# on 2 cores) or its miniature `studies-quick` (a few minutes; its timings
# are one run of a few steps and only show the machinery works), run in a
# folder of its own with the generated CIFAR-format data the suite trains on.
# Writes the table (verdicts, MPFR checks, timings, predictions; its own
# provenance in its header) to bench/results/studies.md
# (bench/results_lib.sh); a failed verdict writes nothing and exits 1.
# docs/studies.md reads it. Usage: bench/studies.sh [studies|studies-quick]
set -euo pipefail
cd "$(dirname "$0")/.."
SUITE=${1:-studies}
case $SUITE in
studies | studies-quick) ;;
*) echo "usage: bench/studies.sh [studies|studies-quick]" >&2; exit 2 ;;
esac
. bench/results_lib.sh
bench_begin studies "The studies, verified: \`parity verify $SUITE\`" "$@"
bench_parity
bench_key
suite=$(pwd)/verify/suites/$SUITE
(
    cd "$T"
    "$P" data make-cifar results/cifar10-made --records 1000 >/dev/null
    "$P" verify "$suite" --out "$T/out" --key "$key" >&2
)
"$P" table verify "$T/out" --pub "${key%.key}.pub" >&2

report() {
    echo "\`parity verify $SUITE\`, signed (\`parity table verify\` passed on the run's folder);"
    echo "its table.md follows, headings one level down, without the loss plots."
    echo
    grep -v '^!\[' "$T/out/table.md" | sed 's/^#/##/'
}
bench_write report
