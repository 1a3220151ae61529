#!/usr/bin/env bash
# Trainers parity did not build, under `parity lockstep --external
# --intermediates` (docs/external.md): the examples of python/examples at
# world 1, 2 and 3 (NumPy; mpi4py; PyTorch DDP with the MLP and the MNIST
# CNN; DDP with a batchnorm CNN at world 1 and 2, where its per-rank batch
# statistics must fail), each row its verdict, the largest |trainer - centre| / bound of the
# step's bound and of its own ops, its rounding against parity's, and the
# seconds a step spent waiting for the trainer and in parity's own work
# (bound, parity's step, files); then every negative control of each
# example, which must fail. Writes bench/results/external.md
# (bench/results_lib.sh). Needs Debian's python3 with numpy, mpi4py, torch.
# Usage: bench/external.sh [STEPS]   (5)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-5}
. bench/results_lib.sh
bench_begin external "Trainers parity did not build: \`parity lockstep --external\`" "$@"
bench_parity
PY=/usr/bin/python3
EX=$(pwd)/python/examples
MLP=(--dataset mnist --model mlp:784-64-10 --act sigmoid --dtype f32)
CNN=(--dataset mnist --model cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 --optim adam --lr 0.001)
BN=(--dataset mnist --model cnn:1x28x28-c8k3p1-bn-r-m2-f-fc10)
cmd_of() {   # cmd_of EXAMPLE WORLD: the trainer's command line
    case $1 in
    numpy) echo "$PY $EX/numpy_serial.py" ;;
    mpi4py) echo "mpirun --oversubscribe --bind-to none -n $2 $PY $EX/mpi4py_fullbatch.py" ;;
    torch) echo "$PY -m torch.distributed.run --standalone --nproc_per_node $2 --redirects 1 --tee 1 $EX/torch_ddp.py" ;;
    esac
}

# run NAME EXAMPLE WORLD BUG MODEL-FLAGS...: one JSON line of the check into $T/NAME.json
run() {
    local name=$1 ex=$2 world=$3 bug=$4
    shift 4
    local c
    c="$(cmd_of "$ex" "$world")${bug:+ --bug $bug}"
    "$P" lockstep --external "$c" --steps "$STEPS" --intermediates --timeout 600 --json "$@" \
        >"$T/$name.json" 2>"$T/$name.err" || true
}

ROWS=()
for w in 1; do run "numpy-$w" numpy $w "" "${MLP[@]}"; ROWS+=("numpy-$w"); done
for w in 1 2 3; do run "mpi4py-$w" mpi4py $w "" "${MLP[@]}"; ROWS+=("mpi4py-$w"); done
for w in 1 2 3; do run "ddp-mlp-$w" torch $w "" "${MLP[@]}"; ROWS+=("ddp-mlp-$w"); done
for w in 1 2 3; do run "ddp-cnn-$w" torch $w "" "${CNN[@]}"; ROWS+=("ddp-cnn-$w"); done
for w in 1 2; do run "ddp-bn-$w" torch $w "" "${BN[@]}"; ROWS+=("ddp-bn-$w"); done
BUGS=(world unreduced lr stale tf32 drop)
for b in "${BUGS[@]}"; do run "bug-ddp-$b" torch 2 "$b" "${MLP[@]}"; done
for b in "${BUGS[@]}"; do run "bug-mpi4py-$b" mpi4py 2 "$b" "${MLP[@]}"; done

report() {
    echo "\`parity lockstep --external CMD --steps $STEPS --intermediates\`; MLP: \`${MLP[*]}\`"
    echo "(SGD); CNN: \`${CNN[*]}\`; BN CNN: \`${BN[*]}\` (SGD; at world 2 DDP normalises"
    echo "each rank's samples by that rank's statistics, which must fail). Ratios are"
    echo "|trainer - centre| / bound, the largest over"
    echo "every element of every step (<= 1 passes); rounding: the trainer's median deviation"
    echo "over parity's on the same op (> 64 fails). Seconds per step: the trainer's own step"
    echo "(its step call, rank 0's clock, files excluded); waiting for the trainer after"
    echo "parity's own work; that work, and its parts: the protocol's files (state and batch"
    echo "written, the answer read), the step's bound, parity's own step, the comparisons and"
    echo "op-by-op checks."
    echo
    echo "| run | trainer | model | world | verdict | step's bound, worst | own ops, worst | rounding | trainer s | waiting s | parity s | files | bound | step | checks |"
    echo "|---|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    for r in "${ROWS[@]}"; do
        $PY - "$T/$r.json" "$T/$r.err" "$r" "$STEPS" <<'PY'
import json, sys
name, steps = sys.argv[3], int(sys.argv[4])
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    err = open(sys.argv[2]).read().strip().splitlines()
    print('| %s | | | | ERROR: %s |%s' % (name, err[0] if err else 'no output', ' |' * 10))
    sys.exit(0)
w = d.get('worst') or {}
l = d.get('local_worst') or {}
model = 'CNN' if '-cnn-' in name else 'BN CNN' if '-bn-' in name else 'MLP'
own = d.get('seconds_trainer')
own = '%.3f' % (own / d['steps_trainer_timed']) if own is not None else '-'
parts = d['seconds_parity_parts']
print('| %s | %s | %s | %d | %s | %.3g | %.3g | %.2f | %s | %.3f | %.3f | %s |' % (
    name, d['trainer'], model, d['world'], d['verdict'].upper(), w.get('ratio', 0),
    l.get('ratio', 0), d['signature'], own, d['seconds_waiting'] / steps,
    d['seconds_parity'] / steps,
    ' | '.join('%.3f' % (parts[k] / steps) for k in ('files', 'bound', 'step', 'checks'))))
PY
    done
    echo
    echo "The negative controls (\`--bug NAME\`, world 2): each must fail; the first violation"
    echo "parity names."
    echo
    echo "| trainer | bug | verdict | first violation |"
    echo "|---|---|---|---|"
    for ex in ddp mpi4py; do
        for b in "${BUGS[@]}"; do
            $PY - "$T/bug-$ex-$b.json" "$T/bug-$ex-$b.err" "$ex" "$b" <<'PY'
import json, sys
ex, bug = sys.argv[3], sys.argv[4]
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    err = open(sys.argv[2]).read().strip().splitlines()
    print('| %s | %s | ERROR (exit 3) | %s |' % (ex, bug, (err[0] if err else '').replace('|', '/')))
    sys.exit(0)
f = d.get('local_first_violation') or d.get('first_violation')
what = ('step %d, %s%s, %.3g times the bound%s' % (f['step'], f['tensor'], f['index'], f['ratio'],
        ' [%s]' % f['op'] if f.get('op') else '')) if f else \
       ('rounding %.3g times parity\'s (%s)' % (d['signature'], d['signature_tensor'])
        if d.get('signature_flagged') else 'none')
print('| %s | %s | %s | %s |' % (ex, bug, d['verdict'].upper(), what))
PY
        done
    done
}
bench_write report
