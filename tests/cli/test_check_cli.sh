#!/usr/bin/env bash
# `parity check` and `parity lockstep` beyond SGD on one process (issue 18):
#   mpi     check of an MPI trainer's own step (mpi, hybrid, root under
#           mpirun, rank 0's view): passes, CONTRACT bitwise against the
#           reference; a chunk fold out of order fails CONTRACT on exactly
#           the tensors it touches, SGD and adam.
#   optim   lockstep --optim: momentum, nesterov, adam within their bounds;
#           a wrong beta (obeta) and a weight step from the old state
#           (oswap) fail from the step they start at.
#   upscale check, lockstep and model --upscale, --batch full on resampled
#           images.
# Usage: test_check_cli.sh PATH/TO/parity [mpi|optim|upscale ...] (needs
# fashion-mnist: data/fetch.sh).
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
shift
parts=${*:-mpi optim upscale}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMPI_MCA_btl_vader_single_copy_mechanism=none
PY=/usr/bin/python3

# failing NAME.json: the failing tensors as "VIEW:name" lines, sorted.
failing() {
    $PY -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('\n'.join(sorted(t['view'] + ':' + t['tensor'] for t in d['tensors'] if t['verdict'] == 'FAIL')))
" "$1"
}
# model_rows_ok FILE: True when parity model --validate 2's rows are whole:
# mpi exact and fast on 2 ranks, the error recomputed from the measured and
# predicted step (the JSON prints 6 significant digits of each), the probe's
# alpha, beta and allreduce, the cores' distance before and after the runs (null: not
# measured) and whether they moved (one over twice the other); the probe's
# launches: 3 at the cores' nearest placement, or all 9 when 3 were not found;
# the compute scale and contention re-measured before the runs.
model_rows_ok() {
    $PY -c "
import json, sys
rows = json.load(open(sys.argv[1]))['validation']
ok = sorted(r['design'] for r in rows) == ['mpi exact', 'mpi fast']
for r in rows:
    m, p, rt = r['measured_step_s'], r['predicted_step_s'], r['core_round_trip_ns']
    ok &= r['ranks'] == 2 and m > 0 and p > 0 and abs(r['error'] - (p - m) / m) < 1e-4
    ok &= r['alpha'] > 0 and r['beta'] > 0 and r['allreduce_s'] >= 0 and (rt is None or 0 < rt < 1e5)
    ok &= r['compute_scale'] > 0 and r['contention'] > 0
    pb = r['probe']
    if pb['cores_near']:
        ok &= pb['used'] == 3 and 3 <= pb['launches'] <= 9
    else:
        ok &= pb['used'] == pb['launches'] == 9
    ra = r['core_round_trip_after_ns']
    ok &= ra is None or 0 < ra < 1e5
    if rt is not None and ra is not None:
        ok &= r['cores_moved'] == (max(rt, ra) > 2 * min(rt, ra))
print(ok)
" "$1"
}
# field FILE KEY
field() { $PY -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

for part in $parts; do
case $part in
mpi)
    for spec in "mpi 2 1" "hybrid 2 2" "root 3 1"; do
        read -r tr R th <<<"$spec"
        "$P" check --trainer "$tr" --ranks "$R" --threads "$th" --step 3 --json >"$T/c.json" 2>"$T/err"
        rc=$?
        check "check --trainer $tr --ranks $R --threads $th --step 3: pass, CONTRACT bitwise, R=$R" \
            test $rc = 0 -a "$(field "$T/c.json" verdict)" = PASS -a \
            "$(field "$T/c.json" ranks)" = "$R" -a "$(field "$T/c.json" contract)" = True
    done
    # Layer 1 folds its chunk gradients out of order at step 1: every bound
    # still holds (LOCAL cannot see an order), the reference's bits do not.
    "$P" check --trainer mpi --ranks 2 --fault swap:1:1 --json >"$T/c.json" 2>"$T/err"
    rc=$?
    check "check mpi R=2, fold of layer 1 out of order: exit 1, CONTRACT of layer 1's gradient and update" \
        test $rc = 1 -a "$(failing "$T/c.json" | tr '\n' ' ')" = \
        "CONTRACT:layer1.bias.grad CONTRACT:layer1.bias.new CONTRACT:layer1.weight.grad CONTRACT:layer1.weight.new "
    "$P" check --trainer hybrid --ranks 2 --threads 2 --optim adam --fault swap:1:1 --json >"$T/c.json" 2>"$T/err"
    rc=$?
    check "check hybrid 2x2 adam, the same fault: also adam's m and v of layer 1" \
        test $rc = 1 -a "$(failing "$T/c.json" | tr '\n' ' ')" = \
        "CONTRACT:layer1.bias.grad CONTRACT:layer1.bias.m.new CONTRACT:layer1.bias.new CONTRACT:layer1.bias.v.new CONTRACT:layer1.weight.grad CONTRACT:layer1.weight.m.new CONTRACT:layer1.weight.new CONTRACT:layer1.weight.v.new "
    "$P" check --trainer root --ranks 2 --step 2 >"$T/out" 2>"$T/err"
    check "check root R=2 text: says it checked rank 0's view of 2 ranks" \
        grep -q "^run: trainer root, mode exact, 1 thread per rank, 2 ranks (rank 0's view)" "$T/out"
    expect 2 "^parity check: --ranks 2: trainer omp is not an MPI trainer$" check --trainer omp --ranks 2
    # The network probe runs on the ranks asked for (it once ran on 2 whatever
    # --ranks said, and the model's R=3 rows used a 2-rank allreduce).
    "$P" model --probe-comm --ranks 3 >"$T/probe.json" 2>"$T/err"
    rc=$?
    probe_ok=$($PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["ranks"] == 3 and d["alpha"] > 0 and d["beta"] >= 0 and d["allreduce"] > 0)' "$T/probe.json")
    check "model --probe-comm --ranks 3: exit 0, run on 3 ranks, alpha, beta, allreduce > 0" \
        test $rc = 0 -a "$probe_ok" = True
    expect 2 "^parity model: --ranks 1: the probe needs at least 2 ranks$" \
        model --probe-comm --ranks 1
    # parity model's validation rows: measured on 2 ranks, the error recomputed
    # from them, the probe's alpha and beta and the cores' distance recorded.
    "$P" model --validate 2 --steps 30 --json >"$T/m.json" 2>"$T/err"
    rc=$?
    rows_ok=$(model_rows_ok "$T/m.json" 2>&1)
    check "model --validate 2: exit 0, mpi exact and fast rows, error = (pred - meas) / meas, alpha, beta, cores' distance" \
        test $rc = 0 -a "$rows_ok" = True
    ;;
optim)
    for opt in momentum nesterov adam; do
        "$P" lockstep --optim "$opt" --trainer omp --threads 2 --steps 8 --json >"$T/l.json" 2>"$T/err"
        rc=$?
        check "lockstep --optim $opt, omp fast T=2, 8 steps: within the bound" \
            test $rc = 0 -a "$(field "$T/l.json" violations)" = 0 -a "$(field "$T/l.json" steps)" = 8
    done
    # mu + 2^-10 from step 3, and a weight step from the old state from step
    # 2: both must be caught at the step they start.
    "$P" lockstep --optim momentum --steps 5 --fault obeta:3 --json >"$T/l.json" 2>"$T/err"
    rc=$?
    check "lockstep momentum, mu + 2^-10 at step 3: exit 1, first violation at step 3" \
        test $rc = 1 -a "$(field "$T/l.json" first_violation_step)" = 3
    "$P" lockstep --optim adam --steps 5 --fault oswap:2 --json >"$T/l.json" 2>"$T/err"
    rc=$?
    check "lockstep adam, weight step from the old state at step 2: exit 1, first violation at step 2" \
        test $rc = 1 -a "$(field "$T/l.json" first_violation_step)" = 2
    expect 2 "^parity lockstep: --eps does not apply to --optim momentum$" lockstep --optim momentum --eps 1e-6
    expect 2 "^parity lockstep: --beta2 1.5: expected a number in \[0, 1\)$" lockstep --optim adam --beta2 1.5
    expect 2 "^parity lockstep: --optim 'rmsprop': expected sgd, momentum, nesterov or adam$" lockstep --optim rmsprop
    ;;
upscale)
    # 14 x 14 images (196 inputs): check recomputes the step on the
    # resampled values; a model of 784 inputs no longer fits them.
    "$P" check --upscale 14 --model mlp:196-32-10 --trainer omp --threads 2 --step 2 --json >"$T/c.json" 2>"$T/err"
    rc=$?
    check "check --upscale 14, omp T=2, step 2: pass, CONTRACT bitwise" \
        test $rc = 0 -a "$(field "$T/c.json" verdict)" = PASS -a "$(field "$T/c.json" contract)" = True
    "$P" check --upscale 14 --model mlp:196-32-10 --trainer omp --fault half:1:0 --json >"$T/c.json" 2>"$T/err"
    check "check --upscale 14, layer 0 rounded to 11 bits: fails LOCAL layer0.out" \
        test $? = 1 -a "$(failing "$T/c.json" | grep -c '^LOCAL:layer0.out$')" = 1
    expect 2 "^parity check: --model mlp:784-256-128-10 takes 784 inputs and 10 classes, dataset fashion-mnist has 196 and 10$" \
        check --upscale 14
    expect 2 "^parity check: --upscale 2000: expected 1 to 1024 \(0: off\)$" check --upscale 2000
    "$P" lockstep --upscale 14 --model mlp:196-32-10 --batch full --epochs 2 --steps 2 --json >"$T/l.json" 2>"$T/err"
    rc=$?
    check "lockstep --upscale 14 --batch full, 2 steps of the whole split: within the bound" \
        test $rc = 0 -a "$(field "$T/l.json" violations)" = 0 -a "$(field "$T/l.json" steps)" = 2
    expect 2 "^parity lockstep: --model mlp:784-256-128-10 takes 784 inputs but dataset fashion-mnist has 196 features per sample after --upscale$" \
        lockstep --upscale 14
    # parity model times the step on the resampled images, with adam's update.
    "$P" model --upscale 14 --model mlp:196-32-10 --optim adam --validate '' --json >"$T/m.json" 2>"$T/err"
    rc=$?
    check "model --upscale 14 --optim adam: exit 0, a per-sample cost > 0" \
        test $rc = 0 -a "$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['t_sample_s'] > 0)" "$T/m.json" 2>&1)" = True
    # The compute points the model reads off: b = 8 .. 256, each step timed.
    pts_ok=$($PY -c "
import json, sys
p = json.load(open(sys.argv[1]))['compute_points']
print([q['batch'] for q in p] == [8, 16, 32, 64, 128, 256] and all(q['step_s'] > 0 for q in p))" "$T/m.json" 2>&1)
    check "model --json: compute_points at b = 8, 16, 32, 64, 128, 256, every step > 0" test "$pts_ok" = True
    expect 2 "^parity model: --model mlp:784-256-128-10 takes 784 inputs but dataset fashion-mnist has 196 features per sample after --upscale$" \
        model --upscale 14 --validate ''
    expect 2 "^parity lockstep: --steps 2: expected at most 1, the steps of --epochs 1 \(54000 training records, batch 54000\); give --epochs 2$" \
        lockstep --batch full --steps 2
    ;;
*)
    echo "unknown part '$part': expected mpi, optim or upscale"
    exit 2
    ;;
esac
done
finish
