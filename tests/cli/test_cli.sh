#!/usr/bin/env bash
# CLI tests of `parity`: exit codes (0 ok, 2 usage, 3 runtime), one-line
# errors with a hint, files written whole or not at all, the --ranks
# launcher, and silence when stderr is not a terminal.
# Usage: test_cli.sh PATH/TO/parity   (needs fashion-mnist: data/fetch.sh)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
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
# --trainer cuda (docs/gpu.md): a fault inside the CPU's layer kernels is one
# line, before it looks for a device; a build without CUDA says how to get one.
if "$P" train --trainer nope 2>&1 | grep -q " cuda$"; then
    expect 2 "^parity train: --trainer cuda: --fault takes ulp and obeta \(the others are" \
        train --trainer cuda --fault skip:1:0:3
else
    "$P" train --trainer cuda >/dev/null 2>"$T/err" </dev/null
    check "--trainer cuda without CUDA: exit 2, a hint to build with nvcc" \
        test $? = 2 -a "$(grep -c '^hint: cuda needs a build with nvcc' "$T/err")" = 1
fi
expect 2 "--dtype 'f16'" train --dtype f16
expect 2 "--mode 'slow'" train --mode slow
# The same resolver serves every training command.
expect 2 "--dtype 'f16': expected f32 or f64" model --dtype f16
expect 2 "--trainer 'nope'" check --trainer nope
expect 2 "^parity check: --ranks 2: trainer serial is not an MPI trainer$" check --trainer serial --ranks 2
expect 2 "--trainer reference: the reference is what it is compared with" lockstep --trainer reference
expect 2 "--threads 2: trainer serial runs one thread" lockstep --trainer serial --threads 2
expect 2 "--threads 2: trainer serial runs one thread" train --threads 2

# --fault where it cannot take effect: faults live in the engine trainers, the
# reference never reads them (check's default trainer is the reference).
for c in check lockstep train; do
    expect 2 "^parity $c: --fault 'ulp:1:1000': trainer reference takes no faults \(only serial, omp, mpi, hybrid and root do\)$" \
        $c --trainer reference --fault ulp:1:1000
done
expect 2 "^parity check: --fault 'ulp:1:1000': trainer reference takes no faults" check --fault ulp:1:1000
check "... with the hint" grep -qx "hint: drop --fault, or give --trainer serial" "$T/err"

# --version and `parity version`: commit, compiler, flags, kernels, MPI, MPFR.
"$P" --version >"$T/v1" 2>"$T/err" </dev/null
check "--version exits 0, nothing on stderr" test $? = 0 -a ! -s "$T/err"
"$P" version >"$T/v2" 2>/dev/null </dev/null
check "parity version prints the same" cmp -s "$T/v1" "$T/v2"
want=$(git -C "$(dirname "$0")/../.." rev-parse HEAD 2>/dev/null)
check "--version: first line is the source tree's commit (${want:-no git})" \
    grep -Eq "^parity ${want:-unknown}( \(source tree has uncommitted changes\))?$" "$T/v1"
check "--version names compiler, build type, flags, kernels, MPI, mpirun, MPFR" test \
    "$(grep -Ec '^(compiler|build type|flags|kernels|MPI|mpirun|MPFR): +[^ ]' "$T/v1")" = 7
check "--version: CUDA built in (nvcc, architectures) or not built" \
    grep -Eqx 'CUDA: +(nvcc [0-9.]+, architectures [0-9,]+: --trainer cuda|not built, PARITY_CUDA=(AUTO|ON|OFF): docs/gpu.md)' "$T/v1"
check "--version: kernels avx512vl, avx2+fma, neon or portable" grep -Eqx 'kernels: +(avx512vl|avx2\+fma|neon|portable)' "$T/v1"
# PARITY_KERNELS forces a kernel set (the CLI's switch; every set gives the same bits).
PARITY_KERNELS=portable "$P" version >"$T/v3" 2>/dev/null </dev/null
check "PARITY_KERNELS=portable: --version names it" grep -Eq '^kernels: +portable( \(PARITY_KERNELS|$)' "$T/v3"
PARITY_KERNELS=portable expect 0 "" train --steps 3 --json --quiet
check "PARITY_KERNELS=portable: train --json reports the set" grep -q '"kernels": "portable"' "$T/out"
w_port=$(grep -o '"weights_sha256": "[0-9a-f]*"' "$T/out")
expect 0 "" train --steps 3 --json --quiet
check "PARITY_KERNELS=portable: the weights of the best set" test -n "$w_port" -a \
    "$w_port" = "$(grep -o '"weights_sha256": "[0-9a-f]*"' "$T/out")"
# So does every SIMD set this CPU runs, through a whole run.
for k in avx512vl avx2; do
    if ! PARITY_KERNELS=$k "$P" version >/dev/null 2>&1 </dev/null; then
        echo "note: kernel set $k: this CPU does not run it"
        continue
    fi
    PARITY_KERNELS=$k expect 0 "" train --steps 3 --json --quiet
    check "PARITY_KERNELS=$k: the weights of the portable set" test -n "$w_port" -a \
        "$w_port" = "$(grep -o '"weights_sha256": "[0-9a-f]*"' "$T/out")"
done
PARITY_KERNELS=nosuchset expect 2 "^parity: PARITY_KERNELS=nosuchset: no such kernel set on this CPU \(it runs: .*portable\)$" version
check "--version: MPFR x.y.z" grep -Eqx 'MPFR: +[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9]+)?' "$T/v1"
check "--version: flags as built (-ffp-contract=off)" grep -Eq '^flags: .*-ffp-contract=off' "$T/v1"
expect 2 "^parity version: unexpected argument 'x'$" version x

# -h is --help for every command.
for c in train check bisect verify lockstep model data "data order" table "table keygen" "table sign" "table verify"; do
    "$P" $c -h >"$T/h1" 2>"$T/err" </dev/null
    rc=$?
    "$P" $c --help >"$T/h2" 2>/dev/null </dev/null
    check "parity $c -h: exit 0, the --help text" test $rc = 0 -a ! -s "$T/err" -a -s "$T/h1" -a \
        "$(md5sum <"$T/h1")" = "$(md5sum <"$T/h2")"
done
# --fault SPEC: its format in the help of every command that takes it, and
# every example given there parses.
for c in train check lockstep bisect; do
    "$P" $c --help >"$T/h1" 2>/dev/null </dev/null
    check "parity $c --help gives the --fault format" test \
        "$(grep -Ec '^  (ulp:STEP:INDEX|skip:STEP:LAYER:SAMPLE|half:STEP:LAYER|swap:STEP:LAYER) ' "$T/h1")" = 4
done
for f in $(grep '^e.g. --fault' "$T/h1" | grep -o '[a-z]*:[0-9:]*[0-9]'); do
    expect 0 "" train --steps 1 --quiet --fault "$f"
done
check "the help gives 4 examples" test "$(grep '^e.g. --fault' "$T/h1" | grep -o '[a-z]*:[0-9:]*[0-9]' | wc -l)" = 4
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
check "off a terminal stderr holds only the final summary (a 3-step run is under 5 s)" \
    grep -Eqx 'parity train: done: 3 steps, loss [0-9.]+, val acc [0-9.]+, test acc [0-9.]+, [0-9.]+ s' "$T/err"
check "off a terminal: one line in all" test "$(wc -l <"$T/err")" = 1
check "--json: stdout is one JSON object" /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out"
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

# Off a terminal: a plain progress line every PARITY_PROGRESS_SECONDS (5), then
# the summary; --quiet: nothing.
PARITY_PROGRESS_SECONDS=0 "$P" train --steps 3 >"$T/out" 2>"$T/err" </dev/null
check "progress lines off a terminal: step N/3 epoch 1 loss L T s, then the summary" \
    test "$(grep -Ec '^step [123]/3 epoch 1 loss [0-9]+\.[0-9]{4} [0-9]+\.[0-9] s$' "$T/err")" = 3 -a \
    "$(sed -n 4p "$T/err" | cut -c1-31)" = "parity train: done: 3 steps, lo" -a "$(wc -l <"$T/err")" = 4 -a ! -s "$T/out"
PARITY_PROGRESS_SECONDS=0 "$P" train --steps 3 --quiet >"$T/out" 2>"$T/err" </dev/null
check "--quiet: nothing on stderr off a terminal" test $? = 0 -a ! -s "$T/err"

# --init-load of the saved initial weights reproduces the run bit for bit.
"$P" train --steps 3 --init-load "$T/init.npz" --seed 42 --json >"$T/b.json" 2>/dev/null </dev/null
check "--init-load of --init-save reproduces the run" test "$(sha "$T/a.json")" = "$(sha "$T/b.json")"

# --warmup-steps K: the same run (weights, log); "seconds" times the steps after the first K.
"$P" train --steps 3 --warmup-steps 1 --log "$T/wlog.jsonl" --json >"$T/w1.json" 2>/dev/null </dev/null
check "--warmup-steps 1: the same weights as without" test "$(sha "$T/a.json")" = "$(sha "$T/w1.json")"
check "... and the same step log" cmp -s <(grep '"step"' "$T/log.jsonl") <(grep '"step"' "$T/wlog.jsonl")
/usr/bin/python3 - "$T/w1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['steps'] == 3 and d['warmup_steps'] == 1 and d['timed_steps'] == 2, d
# the timed window holds steps 2 and 3: 2 x 64 samples
assert d['seconds'] > 0 and abs(d['samples_per_second'] * d['seconds'] - 128) < 1e-6, d
PY
check "... its JSON: 3 steps, 1 of warm-up, 2 timed (128 samples in \"seconds\")" test $? = 0
check "without --warmup-steps: no warmup_steps in the JSON" test "$(grep -c warmup_steps "$T/a.json")" = 0
expect 2 "^parity train: --warmup-steps 3: expected 0 to 2, fewer than the 3 steps this run trains$" \
    train --steps 3 --warmup-steps 3
expect 2 "^parity train: --warmup-steps '-1': expected a non-negative integer$" train --warmup-steps -1

# OMP_NUM_THREADS: a threaded trainer without --threads takes it, as OpenMP
# programs do; --threads wins; serial ignores it; a bad value is refused.
threads_of() { python3 -c "import json,sys; print(json.load(sys.stdin)['threads'])"; }
check "OMP_NUM_THREADS=2: --trainer omp runs 2 threads" test "$(OMP_NUM_THREADS=2 "$P" train \
    --trainer omp --steps 1 --json --quiet </dev/null | threads_of)" = 2
check "OMP_NUM_THREADS=3,1: the first number" test "$(OMP_NUM_THREADS=3,1 "$P" train \
    --trainer omp --steps 1 --json --quiet </dev/null | threads_of)" = 3
check "... --threads 1 wins over it" test "$(OMP_NUM_THREADS=2 "$P" train --trainer omp \
    --threads 1 --steps 1 --json --quiet </dev/null | threads_of)" = 1
check "... serial runs one thread" test "$(OMP_NUM_THREADS=2 "$P" train --steps 1 --json \
    --quiet </dev/null | threads_of)" = 1
# (libgomp warns about the value first, on its own lines)
OMP_NUM_THREADS=two "$P" train --trainer omp --steps 1 >/dev/null 2>"$T/err" </dev/null
check "OMP_NUM_THREADS=two: refused, one line, exit 2" test $? = 2 -a "$(grep -c \
    "^parity train: OMP_NUM_THREADS 'two': expected a thread count >= 1 (or give --threads T)$" "$T/err")" = 1

# --json's phase_seconds: every phase named, none negative, the phases and
# "other" adding up to "seconds", and the phases each trainer runs measured.
phases_ok() { # FILE PHASE...: those phases > 0
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p = j["phase_seconds"]
names = ["batch", "forward", "backward", "weight_grads", "communication", "update", "log", "other"]
ok = sorted(p) == sorted(names) and all(v >= 0 for v in p.values())
ok = ok and abs(sum(p.values()) - j["seconds"]) <= 1e-9 * max(1.0, j["seconds"])
ok = ok and all(p[k] > 0 for k in sys.argv[2:])
sys.exit(0 if ok else 1)
PY
}
for tr in reference serial "omp --threads 2 --fixed-threads"; do
    "$P" train --trainer $tr --steps 5 --json --quiet >"$T/ph.json" </dev/null
    check "--json phase_seconds of $tr: add up to seconds; forward, backward, weight_grads, update, batch measured" \
        phases_ok "$T/ph.json" forward backward weight_grads update batch
done
"$P" train --steps 6 --warmup-steps 3 --json --quiet >"$T/ph.json" </dev/null
check "--json phase_seconds with --warmup-steps: the timed steps' phases add up to their seconds" \
    phases_ok "$T/ph.json" forward backward weight_grads update batch

# The --ranks launcher: mpi with 2 ranks equals serial (builds with MPI).
if ! "$P" train --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null; then
    echo "--ranks: skipped (no MPI build or no mpirun)"
elif "$P" train --trainer mpi --ranks 2 --steps 3 --json >"$T/c.json" 2>"$T/err" </dev/null; then
    check "--ranks 2 (mpirun launched by parity) equals serial" test "$(sha "$T/a.json")" = "$(sha "$T/c.json")"
    check "--json phase_seconds of mpi: add up; communication measured besides the compute" \
        phases_ok "$T/c.json" forward weight_grads update communication
    expect 2 "^parity train: --save $T/no/w.npz: folder $T/no does not exist$" \
        train --trainer mpi --ranks 2 --save "$T/no/w.npz"
    expect 2 "^parity train: --ranks 0: expected an integer >= 1$" train --trainer mpi --ranks 0
else
    check "--ranks 2 runs ($(head -n 2 "$T/err"))" false
fi

# Under your own mpirun: the real world size, --ranks that disagrees refused,
# a single-process trainer refused (once, by rank 0).
if "$P" train --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null; then
    M=(mpirun -n 2 --oversubscribe --bind-to none)
    [ "$(id -u)" = 0 ] && M+=(--allow-run-as-root)
    "${M[@]}" "$P" train --trainer mpi --steps 2 --json >"$T/m.json" 2>"$T/err" </dev/null
    check "mpirun -n 2: --json reports \"ranks\": 2" grep -q '"ranks": 2,' "$T/m.json"
    "${M[@]}" "$P" train --trainer mpi --ranks 3 --steps 2 >/dev/null 2>"$T/err" </dev/null
    rc=$?
    check "mpirun -n 2 --ranks 3: exit 2, said once ($(head -n 1 "$T/err"))" test $rc = 2 -a \
        "$(grep -c '^parity train: --ranks 3: this MPI job has 2 ranks$' "$T/err")" = 1
    for t in serial omp reference; do
        "${M[@]}" "$P" train --trainer $t --steps 2 >/dev/null 2>"$T/err" </dev/null
        rc=$?
        check "mpirun -n 2 --trainer $t: exit 2, said once ($(head -n 1 "$T/err"))" test $rc = 2 -a \
            "$(grep -c "^parity train: --trainer $t runs in one process, but it was launched as 2 MPI ranks$" "$T/err")" = 1
    done
fi

# A folder without a slash is a folder; a name that is neither says so.
PA=$(cd "$(dirname "$P")" && pwd)/$(basename "$P")
(cd "$T" && "$PA" data make-cifar cif >/dev/null &&
    "$PA" train --dataset cif --steps 2 --json >"$T/cif.json" 2>"$T/err" </dev/null)
check "--dataset cif (a folder here) trains ($(head -n 1 "$T/err"))" grep -q '"dataset": "cif"' "$T/cif.json"
expect 3 "^parity train: dataset 'cifx' not found; searched: " train --dataset cifx
check "an unknown name: the hint says to give a folder" grep -q \
    '^hint: no folder of that name here: give a dataset folder.s path, or mnist, fashion-mnist or cifar10' "$T/err"

# Silent caps refused: a batch larger than the training split, step 0 of check.
expect 2 "^parity train: --batch 100000: expected at most 54000, the training split of fashion-mnist$" \
    train --batch 100000
expect 0 "" train --batch full --steps 1 --quiet
expect 2 "^parity check: --step 0: expected an integer >= 1 \(steps count from 1\)$" check --step 0

# --no-eval: the same training, no evaluation (accuracies null, "not evaluated").
"$P" train --steps 3 --json --no-eval >"$T/ne.json" 2>"$T/ne.err" </dev/null
"$P" train --steps 3 --json >"$T/ev.json" 2>/dev/null </dev/null
/usr/bin/python3 - "$T/ne.json" "$T/ev.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert [a[k] for k in ('val_loss', 'val_accuracy', 'test_loss', 'test_accuracy')] == [None] * 4, a
assert b['test_accuracy'] is not None and a['weights_sha256'] == b['weights_sha256'], (a, b)
PY
check "--no-eval: accuracies null, the same weights" test $? = 0
check "--no-eval: the done line says 'not evaluated'" grep -q '^parity train: done: 3 steps, loss [0-9.]*, not evaluated, ' "$T/ne.err"
expect 2 "^parity train: --select best-val: not with --no-eval" train --no-eval --select best-val

# data order: a permutation of the 54000 training records, reproducible.
"$P" data order --seed 5 --epoch 2 >"$T/o1" </dev/null
"$P" data order --seed 5 --epoch 2 >"$T/o2" </dev/null
check "data order is a permutation of 0..53999" \
    test "$(sort -n "$T/o1" | uniq | wc -l)" = 54000 -a "$(sort -n "$T/o1" | head -n 1)" = 0 -a "$(sort -n "$T/o1" | tail -n 1)" = 53999
check "data order is reproducible" cmp -s "$T/o1" "$T/o2"

finish
