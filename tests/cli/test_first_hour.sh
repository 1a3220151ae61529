#!/usr/bin/env bash
# What a new user meets in the first hour (issue 36), each through the exact
# command: the END-TO-END summary of `parity check` (weights apart from the
# optimizer state), the done line of `parity train` (threads, ranks, resumed
# runs, the busy machine's one-thread steps), a --resume that leaves nothing
# behind, help that names what the binary takes, errors that say what was
# meant, `parity bisect` of two learning rates, and the time `parity verify`
# says it needs. Not the arithmetic (test_cli, test_resume and the verify
# tests); help against docs/: test_help_docs.py.
# Usage: test_first_hour.sh PATH/TO/parity [summary|train|help|errors|bisect|estimate ...]
# (default: all). Needs fashion-mnist (data/fetch.sh). A few seconds a part.
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
shift
parts=${*:-summary train help errors bisect estimate}
test_tmp
unset OMP_NUM_THREADS
py=/usr/bin/python3

# parity check with adam: the END-TO-END weights line holds the worst of the
# E2E weight and bias rows, the state line the worst of m and v; the table's
# ratio column is headed err/bound.
part_summary() {
    "$P" check --optim adam --batch 16 >"$T/c.txt" 2>"$T/err" </dev/null
    check "parity check --optim adam: exit 0" test $? = 0
    "$P" check --optim adam --batch 16 --json >"$T/c.json" 2>/dev/null </dev/null
    $py - "$T/c.json" "$T/c.txt" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
txt = open(sys.argv[2]).read()
e2e = [t for t in j["tensors"] if t["view"] == "E2E" and t["tensor"].endswith(".new")]
w = [t for t in e2e if re.fullmatch(r"layer\d+\.(weight|bias)\.new", t["tensor"])]
s = [t for t in e2e if t not in w]
assert len(w) == 6 and len(s) == 12, (len(w), len(s))   # 3 layers; m and v of each
def g(x): return "%.3g" % x
want_w = "END-TO-END: new weights within %s ulp (max rel %s) of exact adam" % (
    g(max(t["max_ulp"] for t in w)), g(max(t["max_rel"] for t in w)))
want_s = "END-TO-END: new state (m, v) within %s ulp (max rel %s) of exact" % (
    g(max(t["max_ulp"] for t in s)), g(max(t["max_rel"] for t in s)))
assert want_w in txt, (want_w, txt[-600:])
assert want_s in txt, (want_s, txt[-600:])
# the state is the worse of the two here (v of a first step): the weights line must not carry it
assert max(t["max_ulp"] for t in s) > max(t["max_ulp"] for t in w)
PY
    check "... END-TO-END: weights and state (m, v) each with their own worst (from --json)" test $? = 0
    check "... the ratio column is headed err/bound" \
        grep -Eq '^view +tensor +n +max abs +max rel +max ulp +err/bound +verdict +worst$' "$T/c.txt"
    "$P" check --batch 16 >"$T/c.txt" 2>/dev/null </dev/null
    check "parity check (sgd): a weights line and no state line" test \
        "$(grep -c '^END-TO-END: new weights within' "$T/c.txt")" = 1 -a \
        "$(grep -c '^END-TO-END: new state' "$T/c.txt")" = 0
}

done_line() { grep '^parity train: done: ' "$T/err"; }

# The done line: the thread and rank counts a run took without being told,
# the steps the governor ran on one thread, a resumed run's own part.
part_train() {
    local M=(--model mlp:784-32-10 --no-eval)
    "$P" train --trainer omp --steps 2 "${M[@]}" >/dev/null 2>"$T/err" </dev/null
    check "train --trainer omp: done line says 1 thread, and why" test \
        "$(done_line | grep -c '; omp: 1 thread (neither --threads nor OMP_NUM_THREADS given)$')" = 1
    OMP_NUM_THREADS=2 "$P" train --trainer omp --steps 2 "${M[@]}" >/dev/null 2>"$T/err" </dev/null
    check "OMP_NUM_THREADS=2 train --trainer omp: 2 threads (from OMP_NUM_THREADS)" test \
        "$(done_line | grep -c '; omp: 2 threads (from OMP_NUM_THREADS)$')" = 1
    "$P" train --trainer omp --threads 2 --fixed-threads --steps 2 "${M[@]}" >/dev/null 2>"$T/err" </dev/null
    check "train --trainer omp --threads 2: no note" grep -Eqx \
        'parity train: done: 2 steps, loss [0-9.]+, not evaluated, [0-9.]+ s' "$T/err"
    if "$P" train --trainer mpi --steps 2 "${M[@]}" >/dev/null 2>"$T/err" </dev/null; then
        check "train --trainer mpi: done line says 1 rank (no --ranks given)" test \
            "$(done_line | grep -c '; mpi: 1 rank (no --ranks given)$')" = 1
    else
        echo "note: no MPI trainers in this build"
    fi
    # Two threads on one CPU: the governor runs most steps on one; the line says how many.
    taskset -c 0 "$P" train --trainer omp --threads 2 --steps 60 "${M[@]}" --json \
        >"$T/g.json" 2>"$T/err" </dev/null
    local n
    n=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['steps_one_thread'])" "$T/g.json")
    check "taskset -c 0 train --threads 2: $n of 60 steps on one thread, in the done line" test \
        "$n" -gt 0 -a "$(done_line | grep -c "; $n of 60 steps on one thread (busy machine; --fixed-threads to pin)$")" = 1

    # --resume: the resumed part's steps and seconds, the run's final loss.
    "$P" train --steps 6 --seed 3 "${M[@]}" --json --quiet >"$T/full.json" 2>/dev/null </dev/null
    "$P" train --steps 3 --seed 3 "${M[@]}" --checkpoint-dir "$T/ck" --quiet 2>/dev/null </dev/null
    "$P" train --resume "$T/ck" --steps 6 --no-eval >/dev/null 2>"$T/err" </dev/null
    local loss
    loss=$($py -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['final_loss'])" "$T/full.json")
    check "train --resume at step 3 of 6: 'resumed at step 3: 3 steps in T s; final loss $loss (the run's)'" \
        grep -Eqx "parity train: done: resumed at step 3: 3 steps in [0-9.]+ s; final loss $loss \(the run's\), not evaluated" "$T/err"
    "$P" train --resume "$T/ck" --no-eval >/dev/null 2>"$T/err" </dev/null
    check "train --resume of a finished run: '0 steps (the run had finished)', no loss 0" \
        grep -qx "parity train: done: resumed at step 6: 0 steps (the run had finished), not evaluated" "$T/err"
    mkdir "$T/empty"
    expect 3 "^parity train: no checkpoint in $T/empty" train --resume "$T/empty"
    check "... and leaves the empty folder empty (no .lock)" test -z "$(ls -A "$T/empty")"
    # A used folder: the hint names --resume DIR.
    expect 2 "^parity train: checkpoint folder $T/ck already holds checkpoints \(newest: step 6\)$" \
        train --steps 2 --checkpoint-dir "$T/ck"
    check "... hint: continue that run with --resume DIR" \
        grep -qx "hint: continue that run with --resume $T/ck, or give --checkpoint-dir an empty or new folder" "$T/err"
    check "... and the folder keeps its lock file" test -e "$T/ck/.lock"
}

# Help that matches the binary.
part_help() {
    expect 0 "" version -h
    check "parity version -h: the usage on stdout" grep -q '^usage: parity version' "$T/out"
    expect 2 "^parity version: unexpected argument 'x'$" version x
    "$P" check --help >"$T/h" 2>/dev/null </dev/null
    check "check --help: --trainer names every trainer" \
        grep -Eq '^  --trainer +NAME +reference, serial, omp, mpi, hybrid, root or cuda \(with nvcc\) \(reference\)$' "$T/h"
    "$P" verify --help >"$T/h" 2>/dev/null </dev/null
    local want
    want=$(cd "$(dirname "$0")/../../verify/suites" && ls | grep -v '\.' | sort | tr '\n' ' ')
    local got
    got=$(sed -n 4p "$T/h" | tr -d ',' | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
    check "verify --help lists every suite of verify/suites/ ($want)" test "$got" = "$want"
    expect 0 "" table keygen --key "$T/k.key"
    check "table keygen --key k.key writes k.pub, as its help says" test -s "$T/k.pub" -a ! -e "$T/k.key.pub"
    "$P" table keygen --help >"$T/h" 2>/dev/null </dev/null
    check "... keygen --help: public key FILE's stem + .pub" grep -q "public key: FILE's stem + .pub" "$T/h"
}

# Errors that say what was meant.
part_errors() {
    expect 2 "^parity train: unknown flag '--step'; did you mean --steps\?$" train --step 5
    expect 2 "^parity check: unknown flag '--steps'; did you mean --step\?$" check --steps 5
    expect 2 "^parity verify: unknown flag '--time-out'; did you mean --timeout\?$" verify quick --time-out 5
    expect 2 "^parity table sign: unknown flag '--kye'; did you mean --key\?$" table sign "$T" --kye k
    expect 2 "^parity lockstep: unknown flag '--treads'; did you mean --threads\?$" lockstep --treads 2
    expect 2 "^parity train: unknown flag '--frobnicate'$" train --frobnicate
    expect 2 "^parity bisect: configuration B is missing: '--steps' after A is a flag of both runs$" \
        bisect "--trainer serial" --steps 5
    check "... hint: A and B first, each quoted" grep -q '^hint: give A and B first, each one quoted string' "$T/err"
    expect 2 "^parity data: unknown subcommand 'foo': expected order or make-cifar$" data foo
    check "... then the usage on stdout" grep -q '^usage: parity data order' "$T/out"
    expect 2 "^parity data: unknown subcommand 'ordr'; did you mean order\?$" data ordr
    expect 2 "^parity data: expected a subcommand: order or make-cifar$" data
    expect 2 "^parity train: --model cnn:3x32x32-c4k3-m2-f-fc10 takes 3072 inputs but dataset fashion-mnist has 784" \
        train --model cnn:3x32x32-c4k3-m2-f-fc10 --steps 1
    check "... hint in the CNN grammar: cnn:1x28x28-..." grep -qx \
        "hint: begin the CNN with the image shape of fashion-mnist, channels x height x width: cnn:1x28x28-..." "$T/err"
    expect 2 "^parity check: --model cnn:3x32x32" check --model cnn:3x32x32-c4k3-m2-f-fc10
    check "... check gives the same hint" grep -q "^hint: begin the CNN with the image shape of fashion-mnist" "$T/err"
    expect 2 "takes 100 inputs" train --model mlp:100-10 --steps 1
    check "... an MLP's hint in the MLP grammar: mlp:784-..." grep -q "the input size: mlp:784-...$" "$T/err"
}

# bisect of two learning rates: different mathematics, said so.
part_bisect() {
    "$P" bisect "--lr 0.01" "--lr 0.02" --steps 1 >"$T/out" 2>"$T/err" </dev/null
    check "bisect \"--lr 0.01\" \"--lr 0.02\": exit 1 (they differ)" test $? = 1
    check "... says the runs compute different mathematics, MPFR's verdict for a's setting" grep -qx \
        "note: --lr 0.01 (a) and 0.02 (b) compute different mathematics, not the same sums in another order; MPFR's verdict applies to a's setting only" "$T/out"
    check "... and at the verdict" grep -qx \
        "  closer to exact: a (exact for a's --lr: b computes other mathematics)" "$T/out"
    "$P" bisect "--lr 0.01" "--lr 0.02" --steps 1 --json >"$T/out" 2>/dev/null </dev/null
    check "... --json: same_mathematics false" grep -q '"same_mathematics": false' "$T/out"
    "$P" bisect "--trainer serial" "--trainer omp --threads 2" --steps 1 >"$T/out" 2>/dev/null </dev/null
    check "bisect serial vs omp: the same mathematics, no note" test $? = 0 -a \
        "$(grep -c '^note:' "$T/out")" = 0
}

# parity verify's time: at the start what the suite itself says (its window-timed
# runs, 1.1 x the window each), then an estimate that never promises less than
# the cases not yet started take. Two cases of 6 timed runs of 0.3 s windows.
part_estimate() {
    "$P" table keygen --key "$T/k.key" >/dev/null 2>&1 </dev/null
    local c
    c=$(printf 'steps = 2\nmodel = mlp:784-16-10\ntrainers = serial, omp\nthreads = 1, 2\nrepeats = 2\nwarmup = 0\nwindow = 0.3\ncheck_steps = none')
    printf '[case a]\n%s\n\n[case b]\n%s\n' "$c" "$c" >"$T/suite"
    "$P" verify "$T/suite" --out "$T/v" --key "$T/k.key" --every 1 >/dev/null 2>"$T/err" </dev/null
    check "parity verify (2 cases of 0.3 s windows): exit 0" test $? = 0
    # omp T=2 is timed where there are 2 cores: 3 or 2 configs a case, 2 rounds each
    local per=3
    [ "$(nproc)" -ge 2 ] || per=2
    local runs=$((2 * per * 2))
    check "... its first line: $runs timed runs of about 0:0$(( (runs * 33 + 50) / 100 ))" grep -qx \
        "parity verify: suite suite: 2 cases, $((2 * per)) configs; its $runs timed runs take about 0:0$(( (runs * 33 + 50) / 100 )) (their windows); the rest is estimated from the first runs of each kind" \
        <(head -n 1 "$T/err")
    # Case a's lines promise at least case b's windows (per x 2 runs of 0.33 s).
    local floor=$(( (per * 2 * 33 + 50) / 100 ))
    check "... while case 1 runs, never less than case 2's windows (0:0$floor)" test -z "$($py - "$T/err" "$floor" <<'PY'
import re, sys
floor = int(sys.argv[2])
for line in open(sys.argv[1]):
    m = re.match(r"parity verify: case 1/2 .*about (\d+):(\d+) left", line)
    if m and int(m.group(1)) * 60 + int(m.group(2)) < floor:
        print(line)
PY
)" -a "$(grep -c '^parity verify: case 1/2 .*about [0-9:]* left' "$T/err")" -ge 5
}

for p in $parts; do "part_$p"; done
finish
