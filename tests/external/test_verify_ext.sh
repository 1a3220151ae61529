#!/usr/bin/env bash
# parity verify with external rows (`external = NAME`, `command`, `world` in
# a suite): the NumPy example at world 1 and the mpi4py example at world 1
# and 2 pass lockstep, are timed (mpi4py: 2 rounds, world 2's speedup against
# its own world 1) and the table is signed; the mpi4py learning-rate control (1e-3
# relative) fails, its rows named, not timed, and nothing signed; the keys'
# mistakes are refused with their line; Ctrl-C during an external row
# leaves nothing behind. Usage: test_verify_ext.sh
# PATH/TO/parity. Needs Debian's python3 with numpy and mpi4py, and mpirun
# (skipped, 77, without).
P=$1
. "$(dirname "$0")/liar_env.sh"
$PY -c 'import mpi4py' 2>/dev/null || { echo "skip: no mpi4py for $PY"; exit 77; }
command -v mpirun >/dev/null || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
EX=$(cd "$HERE/../../python/examples" && pwd)
MPI="mpirun -n {world} --oversubscribe --bind-to none $PY $EX/mpi4py_fullbatch.py"
"$P" table keygen --key "$T/k.key" >/dev/null 2>&1

# A tiny MLP, 3 steps, window = 0 (the case's own steps), 2 timed rounds.
suite() {   # suite FILE MPI_EXTRA: the two external cases
    cat >"$1" <<EOF
[defaults]
dataset = fashion-mnist
model = mlp:784-16-10
act = tanh
dtype = f64
batch = 16
steps = 3
lr = 0.1
repeats = 2
warmup = 0
window = 0
check_steps = first

[case numpy]
external = numpy-serial
command = $PY $EX/numpy_serial.py

[case mpi]
external = mpi4py
command = $MPI $2
world = 1, 2
EOF
}

suite "$T/good" ""
"$P" verify "$T/good" --out "$T/g" --key "$T/k.key" --quiet >"$T/out" 2>"$T/err" </dev/null
rc=$?
check "correct examples: exit 0 ($(head -c 300 "$T/err"))" test $rc = 0
check "... signed" test -s "$T/g/results.json.minisig"
"$P" table verify "$T/g" --pub "$T/k.pub" >/dev/null 2>&1
check "... table verify accepts it" test $? = 0
# Per row: trainer, world, verdict, lockstep steps, intermediates, worst
# ratio within its bound, timed, runs; the mpi case's baseline and speedup.
$PY - "$T/g/results.json" >"$T/rows" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
for cs in res["cases"]:
    for cf in cs["configs"]:
        c, t = cf["correctness"], cf["timing"]
        l = c["lockstep"]
        print(cs["name"], cf["trainer"], cf["ranks"], cf["verdict"], l["steps"],
              l["intermediates"], 0 <= c["worst_ratio"] <= 1, t["timed"], t.get("runs"),
              t.get("seconds") and all(s > 0 for s in t["seconds"]), "speedup" in t)
    print(cs["name"], "baseline", cs["timing_baseline"])
EOF
# A baseline alone has nothing to be compared with: timed once, then closed.
check "numpy world 1: PASS in lockstep over 3 steps, timed once (a baseline alone)" \
    grep -qx "numpy numpy-serial 1 pass 3 True True True 1 True True" "$T/rows"
check "mpi4py world 1: PASS, timed twice (the baseline)" \
    grep -qx "mpi mpi4py 1 pass 3 True True True 2 True True" "$T/rows"
check "mpi4py world 2: PASS, timed twice, a speedup against world 1" \
    grep -qx "mpi mpi4py 2 pass 3 True True True 2 True True" "$T/rows"
check "the mpi case's timing baseline is its own world 1" \
    grep -qx "mpi baseline mpi4py world 1" "$T/rows"
check "table.md says whose baseline it is" \
    grep -q "Timing baseline: its own world 1 row" "$T/g/table.md"
check "table.csv: the trainer column holds the label, R the world" \
    grep -q '^"mpi",mpi4py,external,1,2,2,no,pass,external lockstep,' "$T/g/table.csv"
check "nothing left behind" test -z "$(ls -A "$TMPDIR")"

suite "$T/bad" "--bug lr"
"$P" verify "$T/bad" --out "$T/b" --key "$T/k.key" --quiet >"$T/out" 2>"$T/err" </dev/null
rc=$?
check "the lr control: exit 1" test $rc = 1
check "... not signed" test ! -e "$T/b/results.json.minisig"
check "... its rows named under Failures, with the first violation" \
    test "$(grep -c '^- \*\*mpi4py world [12]\*\*: lockstep: [0-9]* violations; first: step 1, ' \
        "$T/b/table.md")" = 2
check "... FAIL rows, not timed; the NumPy row still passes" test "$($PY -c '
import json, sys
res = json.load(open(sys.argv[1]))
print(" ".join(cf["verdict"] + ":" + str(cf["timing"]["timed"]) for cs in res["cases"]
               for cf in cs["configs"]), res["verdict"])' "$T/b/results.json")" \
    = "pass:True fail:False fail:False fail"

# A trainer that breaks the protocol (the wrong shape) is a FAIL row with its one line.
cat >"$T/liar" <<EOF
[case l]
steps = 1
model = mlp:784-16-10
batch = 16
repeats = 0
check_steps = none
external = liar
command = $(liar shape)
EOF
"$P" verify "$T/liar" --out "$T/l" --key "$T/k.key" --quiet >"$T/out" 2>"$T/err" </dev/null
rc=$?
check "a trainer that breaks the protocol: exit 1, its row FAIL with the reason" \
    test $rc = 1 -a "$(grep -c "^- \*\*liar world 1\*\*: step 1: the trainer's out.npz: array 'layer0.weight' has shape (16, 10), expected (16, 784)" \
        "$T/l/table.md")" = 1
check "... nothing left behind" test -z "$(ls -A "$TMPDIR")" -a -z "$(liars_left)"

# Ctrl-C while an external row's trainer computes: parity verify dies of the
# signal after the protocol has ended the trainer and removed its folder.
sed "s|^command = .*|command = $(liar hang)|" "$T/liar" >"$T/hang"
"$P" verify "$T/hang" --out "$T/h" --key "$T/k.key" --quiet >"$T/out" 2>"$T/err" </dev/null &
pid=$!
for _ in $(seq 100); do liars_left >/dev/null && break; sleep 0.2; done
sleep 1
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C during an external row: dies of SIGINT (got $rc: $(head -c 200 "$T/err"))" \
    test $rc = 130
check "... no trainer, no private folder left, nothing signed" \
    test -z "$(ls -A "$TMPDIR")" -a -z "$(liars_left)" -a ! -e "$T/h/results.json.minisig"

# The keys' mistakes, each at its line, exit 2.
bad() {   # bad NAME PATTERN BODY: the suite BODY is refused with PATTERN
    printf '%b' "$3" >"$T/$1"
    "$P" verify "$T/$1" --out "$T/o-$1" --key "$T/k.key" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    local first
    first=$(head -n 1 "$T/err")
    check "suite $1 -> 2: $first" test $rc = 2 -a "${first#*"$T/$1:$2"}" != "$first"
}
C='[case a]\nsteps = 2\n'
bad mixed "4: key 'trainers': not with external = x (line 3): an external case runs its command at each world, not parity's trainers" \
    "${C}external = x\ntrainers = serial\ncommand = true\n"
bad nocmd "1: key 'command': missing in [case a]: external = x needs the trainer's command line ({world} for its process count)" \
    "${C}external = x\n"
bad cmdonly "3: key 'command': goes with external = NAME (the label of the trainer it runs)" \
    "${C}command = true\ntrainers = serial\n"
bad world0 "5: key 'world': '0': expected an integer from 1 to 1024" \
    "${C}external = x\ncommand = t {world}\nworld = 1, 0\n"
bad noworld "4: key 'command': has no {world}, so each of the 2 world counts would run the same command" \
    "${C}external = x\ncommand = t\nworld = 1, 2\n"
bad label "3: key 'external': 'my ddp': expected a label of letters, digits, '-', '_', '.' (at most 63; e.g. my-ddp)" \
    "${C}external = my ddp\n"
bad indefaults "2: key 'external': belongs to a case, not to [defaults]" \
    "[defaults]\nexternal = x\n${C}trainers = serial\n"
finish
