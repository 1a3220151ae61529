#!/usr/bin/env bash
# The main job's signed table: `parity verify default` (the suite
# ci/verify.sh runs), timed from start to end, with how many of its two-core
# rows carry a speedup whose 95% interval is within +-10% (the rest NOISY,
# docs/table.md). Writes the summary and the table (without the loss plots)
# to bench/results/verify.md (bench/results_lib.sh); a failed verdict writes
# nothing and exits 1. README.md's figures read it. The run's results.json
# (the raw runs) is left in ${TMPDIR:-/tmp}/parity-bench-verify-SUITE.json.
# Usage: bench/verify.sh [SUITE]   (default: default; quick for a smoke run)
set -euo pipefail
cd "$(dirname "$0")/.."
SUITE=${1:-default}
. bench/results_lib.sh
bench_begin verify "The main job: \`parity verify $SUITE\`" "$@"
bench_parity
bench_key
t0=$(date +%s)
"$P" verify "$SUITE" --out "$T/out" --key "$key" >&2
secs=$(($(date +%s) - t0))
"$P" table verify "$T/out" --pub "${key%.key}.pub" >&2
# The run's raw runs (results.json, 2 MB) are not a results file: kept
# outside the tree for whoever wants to recompute its statistics.
raw="${TMPDIR:-/tmp}/parity-bench-verify-$SUITE.json"
cp "$T/out/results.json" "$raw" && echo "bench/verify.sh: the run's results.json: $raw" >&2

summary() {   # the two-core rows: how many carry a number (interval within +-10%)
    /usr/bin/python3 - "$T/out/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = []
for c in d['cases']:
    for x in c['configs']:
        t = x.get('timing', {})
        if t.get('timed') and x['cores'] == 2 and t.get('speedup_ci95'):
            rows.append((c['name'], x, t))
ok = [r for r in rows if not r[2].get('noisy')]
print('%d of %d two-core rows carry a speedup with an interval within +-10%%.' % (len(ok), len(rows)))
print()
print('| case | config | speedup [95% CI] | rounds |')
print('|---|---|--:|--:|')
for name, x, t in rows:
    lo, hi = t['speedup_ci95']
    cell = ('**NOISY** [%.2f, %.2f]' % (lo, hi) if t.get('noisy')
            else '%.2f [%.2f, %.2f]' % (t['speedup'], lo, hi))
    if t.get('speedup_placement') in ('near', 'far'):
        cell += ' %s %d/%d' % (t['speedup_placement'], t['speedup_rounds'], t['runs'])
    print('| %s | %s %s T=%d R=%d | %s | %d |' % (name, x['trainer'], x['mode'], x['threads'],
                                              x['ranks'], cell, t['runs']))
PY
}

report() {
    echo "\`parity verify $SUITE\`: PASS, signed (\`parity table verify\` passed on the run's"
    echo "folder), **$((secs / 60)) min $((secs % 60)) s** from start to end."
    echo
    summary
    echo
    echo "The run's table.md follows, headings one level down, without the loss plots."
    echo
    grep -v '^!\[' "$T/out/table.md" | sed 's/^#/##/'
}
bench_write report
