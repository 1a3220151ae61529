#!/usr/bin/env bash
# CLI tests of `parity`: exit codes (0 ok, 2 usage, 3 runtime), one-line
# errors with a hint, files written whole or not at all, the --ranks
# launcher, and silence when stderr is not a terminal.
# Usage: test_cli.sh PATH/TO/parity   (needs fashion-mnist: data/fetch.sh)
set -u
. "$(dirname "$0")/test_lib.sh"
P=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive

"$P" >/dev/null 2>"$T/err" </dev/null
check "parity with no command exits 2 with the usage" test $? = 2 -a "$(grep -c '^usage:' "$T/err")" = 1
expect 2 "unknown command 'bogus'" bogus
expect 2 "--batch 'abc': expected a non-negative integer" train --batch abc
expect 2 "unknown flag '--frobnicate'" train --frobnicate
expect 2 "--lr 'x': expected a finite number" train --lr x
expect 2 "--model 'mlp:784-'" train --model mlp:784-
expect 2 "--act 'swish'" train --act swish
expect 2 "--trainer 'nope'" train --trainer nope
expect 2 "--dtype 'f16'" train --dtype f16
expect 2 "--mode 'slow'" train --mode slow
# The same resolver serves every training command.
expect 2 "--dtype 'f16': expected f32 or f64" model --dtype f16
expect 2 "--trainer 'nope'" check --trainer nope
expect 2 "--trainer 'mpi': expected (one of )?reference,? serial" check --trainer mpi   # (without MPI: not a trainer at all)
expect 2 "--trainer reference: the reference is what it is compared with" lockstep --trainer reference
expect 2 "--threads 2: trainer serial runs one thread" lockstep --trainer serial --threads 2
expect 2 "--threads 2: trainer serial runs one thread" train --threads 2
expect 2 "--ranks 2: trainer omp is not an MPI trainer" train --trainer omp --ranks 2
expect 2 "takes 100 inputs but dataset fashion-mnist has 784" train --model mlp:100-10 --steps 1
expect 2 "needs a value" train --batch
expect 3 "$T/none" train --dataset "$T/none"
grep -q '^hint: run data/fetch.sh' "$T/err"; check "missing data gives the fetch hint" test $? = 0
expect 3 "nope.npz" train --init-load "$T/nope.npz" --steps 1

# Every output path is checked before the dataset is read: one line naming
# the flag and the path, exit 2, nothing written, in well under a second.
mkdir -p "$T/outs"
bad="$T/no/such/dir"
: >"$T/afile"
for a in "--save $bad/w.npz|--save $bad/w.npz: folder $bad does not exist" \
    "--log $bad/l.jsonl|--log $bad/l.jsonl: folder $bad does not exist" \
    "--init-save $bad/i.npz|--init-save $bad/i.npz: folder $bad does not exist" \
    "--checkpoint-dir $bad/ck|--checkpoint-dir $bad/ck: folder $bad does not exist" \
    "--checkpoint-dir $T/afile|--checkpoint-dir $T/afile: not a folder" \
    "--save $T/afile/w.npz|--save $T/afile/w.npz: $T/afile is not a folder" \
    "--save $T|--save $T: a folder, expected a file"; do
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    expect 2 "^parity train: ${a#*|}$" train --epochs 1 --init-save "$T/outs/i.npz" \
        --log "$T/outs/l.jsonl" ${a%%|*}
    ms=$((($(date +%s%N) - t0) / 1000000))
    check "${a%%|*}: refused before training (${ms} ms, nothing written)" \
        test "$ms" -lt 1000 -a -z "$(ls -A "$T/outs")"
done
check "the error says how to fix it" grep -q '^hint: give --save a file path in a folder that exists' \
    <("$P" train --save "$bad/w.npz" 2>&1 </dev/null)

# Each bad count names its flag and the value given.
for f in epochs batch chunk threads ranks; do
    expect 2 "^parity train: --$f 0: expected an integer >= 1$" train --$f 0
done
expect 2 "^parity train: --lr 0: expected a number > 0$" train --lr 0
expect 2 "^parity train: --lr -0.5: expected a number > 0$" train --lr -0.5
# --steps beyond what --epochs holds: refused (844 steps of 64 in an epoch), not cut short.
expect 2 "^parity train: --steps 900: expected at most 844, the steps of --epochs 1 \(54000 training records, batch 64\)$" \
    train --steps 900
grep -q '^hint: give --epochs 2, or leave out --steps$' "$T/err"
check "--steps 900: the hint gives the epochs needed" test $? = 0
expect 2 "^parity train: --steps 1689: expected at most 1688" train --steps 1689 --epochs 2

# Library errors carry no source location, unless PARITY_DEBUG=1.
expect 3 "^parity train: $T/none: no such folder$" train --dataset "$T/none"
PARITY_DEBUG=1 expect 3 "^parity train: [a-z_]+\.c:[0-9]+: $T/none: no such folder$" \
    train --dataset "$T/none"

# A good run: files whole, stdout one JSON object, stderr silent off a terminal.
"$P" train --steps 3 --save "$T/w.npz" --log "$T/log.jsonl" --init-save "$T/init.npz" --json \
    >"$T/out" 2>"$T/err" </dev/null
check "good run exits 0" test $? = 0
check "nothing on stderr when not a terminal" test ! -s "$T/err"
check "weights and log written" test -s "$T/w.npz" -a -s "$T/log.jsonl"
check "no temp files left" test -z "$(ls "$T" | grep tmp)"
check "log has 3 step lines and 1 epoch line" \
    test "$(grep -c '"type": *"step"' "$T/log.jsonl")" = 3 -a "$(grep -c '"type": *"epoch"' "$T/log.jsonl")" = 1
sha() { /usr/bin/python3 -c "import json,sys; print(json.load(open('$1'))['weights_sha256'])"; }
cp "$T/out" "$T/a.json"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    /usr/bin/python3 - "$T/w.npz" <<'PY'
import sys, numpy as np
z = np.load(sys.argv[1])
assert list(z.keys()) == ['layer0.weight', 'layer0.bias', 'layer1.weight', 'layer1.bias',
                          'layer2.weight', 'layer2.bias'], list(z.keys())
assert z['layer0.weight'].shape == (256, 784) and z['layer0.weight'].dtype == np.float32
assert z['layer2.bias'].shape == (10,)
PY
    check "numpy reads the saved weights (names, shapes, dtype)" test $? = 0
fi

# --init-load of the saved initial weights reproduces the run bit for bit.
"$P" train --steps 3 --init-load "$T/init.npz" --seed 42 --json >"$T/b.json" 2>/dev/null </dev/null
check "--init-load of --init-save reproduces the run" test "$(sha "$T/a.json")" = "$(sha "$T/b.json")"

# The --ranks launcher: mpi with 2 ranks equals serial (builds with MPI).
if ! "$P" train --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null; then
    echo "--ranks: skipped (no MPI build or no mpirun)"
elif "$P" train --trainer mpi --ranks 2 --steps 3 --json >"$T/c.json" 2>"$T/err" </dev/null; then
    check "--ranks 2 (mpirun launched by parity) equals serial" test "$(sha "$T/a.json")" = "$(sha "$T/c.json")"
    expect 2 "^parity train: --save $T/no/w.npz: folder $T/no does not exist$" \
        train --trainer mpi --ranks 2 --save "$T/no/w.npz"
    expect 2 "^parity train: --ranks 0: expected an integer >= 1$" train --trainer mpi --ranks 0
else
    check "--ranks 2 runs ($(head -n 2 "$T/err"))" false
fi

# data order: a permutation of the 54000 training records, reproducible.
"$P" data order --seed 5 --epoch 2 >"$T/o1" </dev/null
"$P" data order --seed 5 --epoch 2 >"$T/o2" </dev/null
check "data order is a permutation of 0..53999" \
    test "$(sort -n "$T/o1" | uniq | wc -l)" = 54000 -a "$(sort -n "$T/o1" | head -n 1)" = 0 -a "$(sort -n "$T/o1" | tail -n 1)" = 53999
check "data order is reproducible" cmp -s "$T/o1" "$T/o2"

finish
