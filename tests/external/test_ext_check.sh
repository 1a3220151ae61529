#!/usr/bin/env bash
# parity check --external: one step of a trainer parity did not build against
# MPFR. The NumPy example passes at step 1 and a later step (text and JSON),
# its lr and tf32 controls fail LOCAL naming the tensor and the op, a trainer
# that declines intermediates gets END-TO-END only (and one that does not
# train fails it), torch_ddp passes at world 1 and 2 (MLP, the default
# suite's small CNN), at world 1 on a batchnorm CNN, and its tf32 control
# fails; protocol breaks and Ctrl-C exit 3 leaving nothing behind; parity's
# own trainer flags exit 2. Usage: test_ext_check.sh PATH/TO/parity. Skipped (77) without
# Debian's python3 and numpy, or MNIST.
P=$1
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
$PY -c 'import numpy' 2>/dev/null || { echo "skip: no numpy for $PY"; exit 77; }
[ -d "${HOME}/.cache/parity/data/mnist" ] || { echo "skip: no MNIST (run data/fetch.sh)"; exit 77; }
T=$(mktemp -d)
export TMPDIR=$T/tmp   # parity's private folders go here: the test sees what is left
mkdir -p "$TMPDIR"
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$HERE/../common/test_lib.sh"

MLP=(--dataset mnist --model mlp:784-32-10 --act tanh --batch 32 --lr 0.1 --mpfr-threads 2)
CNN=(--dataset mnist --model cnn:1x28x28-c8k3p1-r-m2-c16k3-r-m2-f-fc64-r-fc10 --batch 16
     --lr 0.05 --mpfr-threads 2)
NUMPY="$PY $ROOT/python/examples/numpy_serial.py"
DDP="torchrun --standalone --nproc_per_node %d --redirects 1 --tee 1 $ROOT/python/examples/torch_ddp.py"

# run NAME CODE CMD ARGS...: parity check --external CMD ARGS, its exit code
# CODE, stdout in $T/out.
run() {
    local name=$1 code=$2 cmd=$3
    shift 3
    timeout 300 "$P" check --external "$cmd" "$@" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    check "$name: exit $code (got $rc: $(tail -n 1 "$T/err"))" test "$rc" = "$code"
}
has() { grep -Eq "$1" "$T/out"; }
hasnt() { ! grep -Eq "$1" "$T/out"; }

for step in 1 3; do
    run "numpy, step $step" 0 "$NUMPY" "${MLP[@]}" --step $step
    check "numpy, step $step: heading names the trainer, world and step" \
        has "^parity check --external 'numpy-serial' \(world 1\): step $step of mnist, 32 records;"
    check "numpy, step $step: its ops checked LOCAL" has "^LOCAL +layer0\.out +1024 .* PASS"
    check "numpy, step $step: new weights END-TO-END with a bound" \
        has "^E2E +layer0\.weight\.new +25088 .* PASS"
    check "numpy, step $step: verdict" has "^verdict: PASS \(0 of "
done

# rows NAME VIEW:TENSOR...: the JSON in $T/out passes, every row named is
# there with a bound it keeps, and no CONTRACT row (there is no reference run).
rows() {
    local name=$1
    shift
    check "$name: the rows a passing step must have" $PY - "$T/out" "$@" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rows = {(t["view"], t["tensor"]): t for t in j["tensors"]}
need = [tuple(a.split(":")) for a in sys.argv[2:]]
ok = (j["verdict"] == "PASS" and j["n_fail"] == 0 and j["layers_checked"]
      and j["local_skipped"] is None
      and all(k in rows and rows[k]["verdict"] == "PASS" and rows[k]["bound_ratio"] <= 1
              for k in need)
      and not any(t["view"] == "CONTRACT" for t in j["tensors"]))
sys.exit(0 if ok else 1)
PY
}
run "numpy, --json" 0 "$NUMPY" "${MLP[@]}" --step 2 --json
rows "numpy, --json" LOCAL:layer0.out LOCAL:layer1.dz LOCAL:loss LOCAL:grad.layer0.weight \
    LOCAL:layer0.weight.new E2E:loss E2E:layer0.weight.new E2E:layer1.bias.new
check "numpy, --json: trainer, world, step" $PY -c "import json, sys; j = json.load(open('$T/out'))
sys.exit(0 if (j['external']['name'], j['external']['world'], j['step']) == ('numpy-serial', 1, 2) else 1)"

run "numpy --bug lr" 1 "$NUMPY --bug lr" "${MLP[@]}" --step 2
check "numpy --bug lr: its update fails LOCAL" has "^FAIL LOCAL layer0\.weight\.new\["
check "numpy --bug lr: the op named" \
    has "^first op outside its bound: layer0\.weight\[[0-9,]+\] .*\[the update, from its own gradient\]$"
run "numpy --bug tf32" 1 "$NUMPY --bug tf32" "${MLP[@]}" --step 2
check "numpy --bug tf32: its layer fails LOCAL" has "^FAIL LOCAL layer0\.out\["
check "numpy --bug tf32: the op named" \
    has "^first op outside its bound: layer0\.out\[[0-9,]+\] .*\[dense forward, tanh, from its own input\]$"

run "a trainer that declines intermediates" 0 "$PY $HERE/ext_declines.py" "${MLP[@]}" --step 3
check "declined: LOCAL skipped, and why" \
    has "^LOCAL skipped: the trainer declined intermediates: END-TO-END only$"
check "declined: no LOCAL rows" hasnt "^LOCAL {3}"
check "declined: END-TO-END rows" has "^E2E +layer1\.bias\.new +10 .* PASS"
run "a trainer that does not train" 1 "$PY $HERE/ext_liar.py still" "${MLP[@]}"
check "one that does not train fails END-TO-END" has "^FAIL E2E layer0\.weight\.new\["

EXPECT_TIMEOUT=60
expect 3 "^parity check: the trainer answered step 2 as step 3$" \
    check --external "$PY $HERE/ext_liar.py stepno" --step 2 --model mlp:784-16-10
expect 3 "^parity check: step 1: the trainer's out.npz has no array 'layer1.bias'$" \
    check --external "$PY $HERE/ext_liar.py missing" --model mlp:784-16-10
expect 2 "^parity check: --trainer: not with --external \(the command is the trainer; the step starts from parity's state\)$" \
    check --external "$PY $HERE/ext_liar.py still" --trainer omp
expect 2 "^parity check: --weights: not with --external" \
    check --external "$PY $HERE/ext_liar.py still" --weights w.npz
expect 2 "^parity check: --timeout 0: expected seconds > 0$" \
    check --external "$PY $HERE/ext_liar.py still" --timeout 0
expect 2 "^parity check: --ulps cos=1: expected FUNC=U, FUNC one of exp, log, tanh, sigmoid$" \
    check --external "$PY $HERE/ext_liar.py still" --ulps cos=1

# Ctrl-C while the trainer computes: one line, exit 3, and (below) nothing left.
"$P" check --external "$PY $HERE/ext_liar.py hang" --model mlp:784-16-10 >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 50); do pgrep -f "$HERE/ext_liar.py hang" >/dev/null && break; sleep 0.2; done
sleep 1
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C: exit 3, 'interrupted' (got $rc: $(head -n 1 "$T/err"))" \
    test $rc = 3 -a "$(head -n 1 "$T/err")" = "parity check: interrupted"

if $PY -c 'import torch' 2>/dev/null; then
    # shellcheck disable=SC2059
    run "torch_ddp world 1, MLP, step 1" 0 "$(printf "$DDP" 1)" "${MLP[@]}" --step 1
    check "torch_ddp world 1: heading" has "^parity check --external '[^']+' \(world 1\): step 1 "
    # shellcheck disable=SC2059
    run "torch_ddp world 2, CNN, step 2" 0 "$(printf "$DDP" 2)" "${CNN[@]}" --step 2
    check "torch_ddp world 2: heading" has "^parity check --external '[^']+' \(world 2\): step 2 "
    check "torch_ddp world 2: its conv ops LOCAL" has "^LOCAL +layer2\.out +36864 .* PASS"
    # shellcheck disable=SC2059
    run "torch_ddp world 2, adam, step 3" 0 "$(printf "$DDP" 2)" "${MLP[@]}" --step 3 \
        --optim adam --lr 0.001 --json
    rows "torch_ddp world 2, adam" LOCAL:layer0.weight.m.new LOCAL:layer1.bias.v.new \
        E2E:layer0.weight.m.new E2E:layer1.bias.v.new E2E:layer0.weight.new
    check "torch_ddp world 2, adam: update 3" $PY -c "import json, sys
sys.exit(0 if json.load(open('$T/out'))['optim_update'] == 3 else 1)"
    # shellcheck disable=SC2059
    run "torch_ddp world 1, batchnorm CNN, step 2" 0 "$(printf "$DDP" 1)" --dataset mnist \
        --model cnn:1x28x28-c4k3p1-bn-r-m2-f-fc10 --batch 16 --lr 0.05 --mpfr-threads 2 --step 2
    check "batchnorm: its layer's ops LOCAL" has "^LOCAL +layer1\.out +50176 .* PASS"
    check "batchnorm: its running statistics END-TO-END" has "^E2E +layer1\.running_var\.new +4 "
    # shellcheck disable=SC2059
    run "torch_ddp world 2 --bug tf32" 1 "$(printf "$DDP" 2) --bug tf32" "${MLP[@]}" --step 2
    check "torch_ddp --bug tf32: its layer fails LOCAL" has "^FAIL LOCAL layer0\.out\["
else
    echo "torch_ddp: skipped, python3-torch is not installed"
fi
check "nothing left behind: no private folder, no trainer process" \
    test -z "$(ls -A "$TMPDIR")" -a -z "$(pgrep -f "$HERE/ext_liar.py")"
finish
