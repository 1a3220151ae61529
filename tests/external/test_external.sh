#!/usr/bin/env bash
# parity lockstep --external: the step protocol's failures, each one line
# naming what went wrong, exit 3 and nothing left behind (tests/external/ext_liar.py
# breaks it one way a run); and flags that do not go with --external.
# Usage: test_external.sh PATH/TO/parity. Needs Debian's python3 with numpy
# (skipped, 77, without).
P=$1
. "$(dirname "$0")/liar_env.sh"
run() { expect 3 "$2" lockstep --external "$(liar "$1")" --steps 2 --model mlp:784-16-10 \
               --timeout 4; }
EXPECT_TIMEOUT=60
run noproto "^parity lockstep: the trainer did not open .*/to-trainer within 4 s \(--timeout\): does it speak the step protocol \(PARITY_EXTERNAL\)\?$"
run crash0 "^parity lockstep: the trainer exited with status 7 while parity waited for it to open its end of the protocol's FIFOs; it last printed: Traceback: boom at import$"
run crash "^parity lockstep: the trainer exited with status 1 while parity waited for its answer to 'step'; it last printed: RuntimeError: out of memory in step$"
run hang "^parity lockstep: the trainer gave no answer to 'step' within 4 s \(--timeout\)$"
run shape "^parity lockstep: step 1: the trainer's out.npz: array 'layer0.weight' has shape \(16, 10\), expected \(16, 784\)$"
run nan "^parity lockstep: step 1: the trainer's out.npz: array 'layer1.bias' holds nan at element 3$"
run missing "^parity lockstep: step 1: the trainer's out.npz has no array 'layer1.bias'$"
run dtype "^parity lockstep: step 1: the trainer's out.npz: array 'layer0.bias' is f64, the run is f32$"
run garbage "^parity lockstep: the trainer's answer to 'step' is not a JSON object"
run error "^parity lockstep: the trainer reported an error at 'step': CUDA not available$"
run stepno "^parity lockstep: the trainer answered step 1 as step 2$"
check "nothing left behind: no private folder, no trainer process" \
    test -z "$(ls -A "$TMPDIR")" -a -z "$(liars_left)"
# Without TMPDIR the folder is made in /dev/shm (memory), and goes as well:
# the trainer prints its PARITY_EXTERNAL and exits, parity's error quotes it.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    env -u TMPDIR "$P" lockstep --external "sh -c 'echo \$PARITY_EXTERNAL; exit 7'" --steps 1 \
        --model mlp:784-16-10 --timeout 10 >/dev/null 2>"$T/shm.err"
    rc=$?
    d=$(sed -n 's/.*it last printed: \(\/dev\/shm\/parity-ext\.[A-Za-z0-9]*\)$/\1/p' "$T/shm.err")
    check "no TMPDIR: the private folder was ${d:-not in /dev/shm}, and is gone (exit $rc)" \
        test "$rc" = 3 -a -n "$d" -a ! -e "${d:-/nonexistent}"
fi
# A trainer that hands parity's state back unchanged has not trained: its
# weights lie outside the step's bound (exit 1, the first violation named).
"$P" lockstep --external "$(liar still)" --steps 1 --model mlp:784-16-10 >"$T/out" 2>"$T/err"
rc=$?
check "a trainer that does not train: exit 1, a violation named ($(tail -n 1 "$T/out"))" \
    test $rc = 1 -a "$(grep -c "^first violation of the step's bound: step 1, " "$T/out")" = 1
expect 2 "^parity lockstep: --trainer: not with --external \(the command is the trainer\)$" \
    lockstep --external "$(liar still)" --trainer omp --steps 1
expect 2 "^parity lockstep: --external needs --steps K >= 1" lockstep --external "$(liar still)"
expect 2 "^parity lockstep: --ulps cos=1: expected FUNC=U, FUNC one of exp, log, tanh, sigmoid$" \
    lockstep --external "$(liar still)" --steps 1 --ulps cos=1
expect 2 "^parity lockstep: --external 'python3 \"x': a double quote is not closed$" \
    lockstep --external 'python3 "x' --steps 1
finish
