#!/usr/bin/env bash
# parity bisect --external: a free run's failures (a short log, a NaN in it,
# a snapshot not written, a wrong step count), each one line, exit 3 and
# nothing left behind (tests/external/ext_liar.py breaks the run one way a
# run); a trainer that does not train leaves the spread at step 1 and its
# lockstep names the violation; flags that do not go with --external.
# Usage: test_free.sh PATH/TO/parity. Needs Debian's python3 with numpy
# (skipped, 77, without).
P=$1
. "$(dirname "$0")/liar_env.sh"
ARGS=(--steps 3 --model mlp:784-16-10 --batch 16 --timeout 20)
run() { expect 3 "$2" bisect --external "$(liar "$1")" "${ARGS[@]}"; }
run shortlog "^parity bisect: the trainer's log.jsonl has 2 lines for 3 steps, one a step$"
run nanlog "^parity bisect: the trainer's log.jsonl: line 2 is not a JSON object \(invalid token near 'NaN'; a loss that is not a finite number is answered with an error, not logged\)$"
run nosnap "^parity bisect: step 1: the trainer wrote no weights-1.npz, the snapshot parity asked for$"
run runsteps "^parity bisect: the trainer answered run with 4 steps, not 3$"
run error "^parity bisect: the trainer reported an error at 'run': CUDA not available$"
check "nothing left behind: no private folder, no trainer process" \
    test -z "$(ls -A "$TMPDIR")" -a -z "$(liars_left)"

# A trainer that hands its starting state back as every snapshot has not
# trained: its loss leaves the band at step 1 (it logs 2.3 against the
# reference's 2.1411 +- the step's bound), so do its weights after step 1,
# and the lockstep over step 1 names the violation.
"$P" bisect --external "$(liar still)" "${ARGS[@]}" >"$T/out" 2>"$T/err"
rc=$?
check "a trainer that does not train: exit 1, left the spread ($(head -c 300 "$T/err"))" \
    test $rc = 1 -a "$(grep -c ": LEFT the rounding spread$" "$T/out")" = 1
check "... its first step outside named: step 1" \
    test "$(grep -c "^first step outside: step 1, loss 2.3 where" "$T/out")" = 1
check "... its weights after step 1 named" \
    test "$(grep -c "^first weights outside: after step 1, " "$T/out")" = 1
check "... narrowed to step 1 in lockstep, which names the violation" \
    test "$(grep -c "^narrowing in lockstep, steps 1..1:$" "$T/out")" = 1 -a \
         "$(grep -c "^first violation of the step's bound: step 1, " "$T/out")" = 1
"$P" bisect --external "$(liar still)" "${ARGS[@]}" --json >"$T/json" 2>"$T/err"
rc=$?
check "--json: one object, verdict left, first step 1, the lockstep's verdict fail" \
    test $rc = 1 -a "$($PY -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(j["verdict"], j["first_step"], j["tensor_step"], j["lockstep"]["verdict"],
      j["lockstep"]["steps"], len(j["spread"]) >= 3)' "$T/json")" = "left 1 1 fail 1 True"
check "nothing left behind after the lockstep" test -z "$(ls -A "$TMPDIR")"

expect 2 "^parity bisect: --trainer: not with --external \(the command is the trainer\)$" \
    bisect --external "$(liar still)" --trainer omp --steps 1
expect 2 "^parity bisect: --external needs --steps N >= 1" bisect --external "$(liar still)"
expect 2 "^parity bisect: --intermediates, --ulps and --timeout go with --external$" \
    bisect "" "--trainer omp" --timeout 5
"$P" bisect --help >"$T/out" 2>&1
check "bisect --help lists --external" test "$(grep -c '^  --external  *CMD' "$T/out")" = 1
finish
