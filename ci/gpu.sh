#!/usr/bin/env bash
# The checks and figures that need a CUDA GPU, in one run (docs/gpu.md):
#   1. nvidia-smi, and the shared libraries parity lacks there;
#   2. the gpu label: test_cuda (cuda == reference bit for bit, every optimizer,
#      activation and dtype; tests/gpu/test_cuda.c), and the contraction check
#      of the compiled kernels with their SASS (ci/cuda_fma_check.py; cuobjdump),
#      with its negative control where nvcc and SCRIPTS/src are there;
#   3. `parity train --trainer cuda` against a CPU trainer end to end, f32 and
#      f64, sgd and adam, batch 64 chunk 8 and batch 50 chunk 7: every step's
#      log line (loss and weights digests) and weights_sha256, on
#      - the default MLP and Fashion-MNIST, STEPS steps, against
#        `--trainer reference` (the eight reference runs at once, one core each);
#        and a cuda run resumed from its checkpoint, on cuda and on serial,
#        against one straight run;
#      - the MNIST CNN on MNIST and the CIFAR CNN with batchnorm on CIFAR-format
#        data that `parity data make-cifar` writes (two epochs of it), CNN_STEPS
#        steps, against `--trainer omp --threads $(nproc)`: omp equals the
#        reference bit for bit (tests/unit/test_cnn.c, in CI), and the plain
#        reference is far too slow for these CNNs;
#   4. the harness on it: parity check (MPFR) of a cuda step, and with --fault
#      ulp (must fail); parity bisect cuda against serial (no divergence), and
#      with a fault (names its parameter); parity lockstep --mode fast;
#   5. --ranks on one GPU: test_mpi_cnn's CNN cases (cuda as 2 and 3 MPI ranks,
#      bitwise against the reference), and parity train --ranks 2 and 3 against
#      --trainer reference (the MLP with adam, the batchnorm CNN in f64);
#   6. per layer: PARITY_CUDA_PROFILE's table of each CNN's layers (200 steps)
#      beside PyTorch's on the same shapes (bench/gpu_layers.py), in layers.txt;
#   7. seconds per epoch (the 2nd of 2, data resident, median of 3) of
#      --trainer cuda and of PyTorch on the same GPU, default and deterministic
#      (bench/gpu_vs_pytorch.py): the MNIST CNN and the CIFAR BN CNN in f32, the
#      default MLP in f32 and f64; written with provenance to OUT/gpu.md by
#      ci/gpu_report.py (bench/results/gpu.md is a copy).
# A check that fails is counted and the run goes on (a cuda trainer that
# refuses the CNNs still gives the MLP's results). Every parity run is cut at
# RUN_LIMIT (60) seconds and every PyTorch process at 200; a timing run of
# parity that takes over 30 s is not repeated, and no timing starts after
# BUDGET (300) seconds of the script. Each section prints its seconds.
# BIN holds parity, test_cuda, libpar_cuda.a, cuda_kernels.ptx (a CUDA build's),
# COMMIT (the commit they were built from) and lib/ (shared libraries the GPU
# machine lacks): ci/gpu_bin.sh puts it together. PARITY_DATA holds the datasets
# fashion-mnist and mnist. Logs go to OUT (at most 7 files: gpu.log, gpu.md,
# test_cuda.log, times.txt, runs.tgz, layers.txt, base.txt). Exit 0 when every
# check passed.
# SECTIONS=test,ranks,... runs those sections alone (names below, at want()).
# Usage: ci/gpu.sh BIN OUT [SCRIPTS]   (SCRIPTS: where ci/, bench/, src/ are; default .)
# TRAINER=serial ci/gpu.sh ...: the same steps with serial for cuda (a dry run).
# BASE=DIR (another build's parity, lib/ and COMMIT, from ci/gpu_bin.sh): the
# layers and timings sections also profile and time it, after BIN, on the
# same machine, into OUT/base.txt: a before and after that one device gives.
set -uo pipefail
BIN=$(cd "$1" && pwd)
OUT=$2
S=${3:-.}
STEPS=${STEPS:-40}           # the MLP's rows
CNN_STEPS=${CNN_STEPS:-60}   # the CNNs' rows
RUN_LIMIT=${RUN_LIMIT:-60}   # seconds, any one parity run
BUDGET=${BUDGET:-300}        # seconds of the script after which no timing starts
TR=${TRAINER:-cuda}   # TRAINER=serial: a dry run of the script on a machine without a GPU
NP=$(nproc)
CNN=cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10
BN=cnn:3x32x32-c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-c128k3p1-bn-r-m2-f-fc256-r-fc10
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT"
LOG=$OUT/gpu.log
exec > >(tee "$LOG") 2>&1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# want NAME: whether SECTIONS (comma-separated; default all) has the section
# NAME: test, fma, mlp, cnn, harness, ranks, layers, timings.
SECTIONS=${SECTIONS:-test,fma,mlp,cnn,harness,ranks,layers,timings}
want() { [[ ",$SECTIONS," == *",$1,"* ]]; }
sec_start=
section() {   # section TITLE: the seconds of the section before, then TITLE
    [ -z "$sec_start" ] || echo "-- $((SECONDS - sec_start)) s (at $SECONDS s)"
    sec_start=$SECONDS
    echo "== $*"
}

section "device"
nvidia-smi || fail "nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ldd "$BIN/parity" | grep "not found" && fail "parity lacks shared libraries"

if want test; then
section "gpu label: test_cuda"
"$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1
rc=$?
grep -E "FAIL|passed|SKIP|device:" "$OUT/test_cuda.log" | tail -20
[ $rc = 0 ] || fail "test_cuda exit $rc"
fi

if want fma; then
section "contraction check (PTX and SASS)"
python3 "$S/ci/cuda_fma_check.py" "$BIN/cuda_kernels.ptx" "$BIN/libpar_cuda.a" || fail "fma check"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ] && [ -d "$S/src/cuda" ]; then   # the check rejects -fmad=true, SASS included
    python3 "$S/ci/cuda_fma_check.py" --control "$NVCC" "$S/src/cuda/cuda_kernels.cu" \
        -I"$S/src/cuda" -I"$S/src/core" -I"$S/src/kernels" -I"$S/src/model" ||
        fail "fma check control"
fi
fi

W=$(mktemp -d)
SMALL=(--dataset mnist --model cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10)
run_train() {   # run_train NAME ARGS...: --json into $W/NAME.json, the log into $W/NAME.jsonl
    local name=$1
    shift
    timeout "$RUN_LIMIT" "$BIN/parity" train --no-eval --quiet --json --log "$W/$name.jsonl" \
        "$@" > "$W/$name.json"
}
exit_of() {   # exit_of STATUS: the status, and what 124 means
    [ "$1" = 124 ] && echo "exit 124 (over $RUN_LIMIT s)" || echo "exit $1"
}
train() {   # train NAME ARGS...: run_train, a failure counted
    run_train "$@" || { fail "parity train $1: $(exit_of $?)"; return 1; }
}
field() {   # field FILE KEY: a key of a JSON file
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"
}
steps_of() { grep '"type":"step"' "$1"; }
# same_run A B WHAT: runs A and B ($W/NAME.json, .jsonl) end with the same
# weights_sha256 and log every step alike: "ok   WHAT", else a failure.
same_run() {
    local a b
    a=$(field "$W/$1.json" weights_sha256)
    b=$(field "$W/$2.json" weights_sha256)
    if [ "$a" = "$b" ] && cmp -s <(steps_of "$W/$1.jsonl") <(steps_of "$W/$2.jsonl"); then
        echo "ok   $3: every step's digests, weights_sha256 $b"
    else
        fail "not $3: weights_sha256 $b, $a"
        diff <(steps_of "$W/$1.jsonl") <(steps_of "$W/$2.jsonl") | head -4
    fi
}
# bitwise LABEL STEPS JOBS DESC CPU... -- ARGS...: for f32 and f64, sgd and adam (lr
# 0.001), batch 64 chunk 8 and batch 50 chunk 7, STEPS steps of ARGS on $TR and on
# the CPU trainer (its flags CPU..., DESC in the log); compares every step's log
# line and weights_sha256. JOBS all: the CPU runs of all rows start at once, in
# the background; else each row's CPU run follows its $TR run, and is skipped
# when that failed (a trainer that refuses the model costs no CPU runs).
bitwise() {
    local label=$1 steps=$2 jobs=$3 desc=$4 dt opt bc B C n i
    shift 4
    local cpu=() pids=() rows=()
    while [ "$1" != -- ]; do cpu+=("$1"); shift; done
    shift
    for dt in f32 f64; do
        for opt in sgd adam; do
            for bc in 64:8 50:7; do rows+=("$dt $opt ${bc%:*} ${bc#*:}"); done
        done
    done
    row() {   # row I ARGS...: sets n and args of row I
        read -r dt opt B C <<< "${rows[$1]}"
        shift
        n="$label-$dt-$opt-b$B-c$C"
        args=(--dtype "$dt" --optim "$opt" --batch "$B" --chunk "$C" --steps "$steps" "$@")
        [ "$opt" = adam ] && args+=(--lr 0.001)
    }
    local args=()
    if [ "$jobs" = all ]; then
        for i in "${!rows[@]}"; do
            row "$i" "$@"
            { run_train "cpu-$n" "${cpu[@]}" "${args[@]}"; echo $? > "$W/cpu-$n.rc"; } &
            pids+=($!)
        done
    fi
    for i in "${!rows[@]}"; do
        row "$i" "$@"
        train "dev-$n" --trainer "$TR" "${args[@]}"
        local dev=$?
        if [ "$jobs" = all ]; then
            wait "${pids[$i]}"
        elif [ $dev = 0 ]; then
            run_train "cpu-$n" "${cpu[@]}" "${args[@]}"
            echo $? > "$W/cpu-$n.rc"
        fi
        [ $dev = 0 ] || continue
        [ "$(cat "$W/cpu-$n.rc")" = 0 ] ||
            { fail "parity train cpu-$n ($desc): $(exit_of "$(cat "$W/cpu-$n.rc")")"; continue; }
        same_run "cpu-$n" "dev-$n" "$TR == $desc, $n"
    done
}

if want mlp; then
section "parity train: $TR against reference, the default MLP, $STEPS steps"
bitwise mlp "$STEPS" all reference --trainer reference -- --dataset fashion-mnist
# Resume: STEPS/2 steps on cuda with a checkpoint, then on to STEPS on cuda and on serial.
half=$((STEPS / 2))
FM=(--dataset fashion-mnist --optim adam --lr 0.001)
train full --trainer "$TR" --steps "$STEPS" "${FM[@]}" &&
train first --trainer "$TR" --steps "$half" "${FM[@]}" --checkpoint-dir "$W/ck" \
    --checkpoint-every "$half" &&
for tr in "$TR" serial; do
    cp -r "$W/ck" "$W/ck-$tr"
    train "resumed-$tr" --resume "$W/ck-$tr" --trainer "$tr" --steps "$STEPS" || continue
    a=$(field "$W/full.json" weights_sha256)
    b=$(field "$W/resumed-$tr.json" weights_sha256)
    [ "$a" = "$b" ] && echo "ok   $TR $half steps, resumed on $tr to $STEPS == one $TR run: $a" ||
        fail "resumed on $tr: $b, one run: $a"
done
fi

if want cnn; then
section "parity train: $TR against omp T=$NP, the CNNs, $CNN_STEPS steps"
OMP=("omp T=$NP (= reference bit for bit: test_cnn, in CI)" --trainer omp --threads "$NP")
bitwise mnist-cnn "$CNN_STEPS" one "${OMP[@]}" -- --dataset mnist --model "$CNN"
# 500 records a file: 2,250 training records, 36 steps of 64 (45 of 50) an epoch
"$BIN/parity" data make-cifar "$W/cifar-rows" --records 500 > /dev/null || fail "make-cifar"
bitwise cifar-bn "$CNN_STEPS" one "${OMP[@]}" -- --dataset "$W/cifar-rows" --model "$BN" \
    --epochs 2
tar -C "$W" -czf "$OUT/runs.tgz" --exclude='ck*' --exclude='cifar-*' . 2>/dev/null   # JSON, logs
fi

if want harness; then
section "the harness on $TR: check (MPFR), a fault, bisect, lockstep in fast mode"
# expect WANT LABEL CMD...: runs CMD (cut at RUN_LIMIT), its output into the log;
# WANT 0: must exit 0; WANT fail: must exit non-zero but not 124 (a verdict, not a cut).
expect() {
    local want=$1 label=$2 rc
    shift 2
    timeout "$RUN_LIMIT" "$@" > "$W/h.txt" 2>&1
    rc=$?
    grep -E "verdict|FAIL|PASS|first differing|no divergence|lockstep" "$W/h.txt" | head -4
    if { [ "$want" = 0 ] && [ $rc = 0 ]; } || { [ "$want" = fail ] && [ $rc != 0 ] &&
        [ $rc != 124 ]; }; then
        echo "ok   $label (exit $rc)"
    else
        fail "$label: exit $rc"
        tail -5 "$W/h.txt"
    fi
}
expect 0 "parity check of a $TR step passes (MPFR)" \
    "$BIN/parity" check --trainer "$TR" "${SMALL[@]}" --step 3
expect fail "parity check of a $TR step with --fault ulp:1:100 fails" \
    "$BIN/parity" check --trainer "$TR" "${SMALL[@]}" --fault ulp:1:100
expect 0 "parity bisect $TR against serial: no divergence in 20 steps" \
    "$BIN/parity" bisect "--trainer $TR" "--trainer serial" "${SMALL[@]}" --steps 20
grep -q "no divergence" "$W/h.txt" || fail "bisect $TR against serial found a divergence"
expect fail "parity bisect $TR --fault ulp:3:100 against serial names parameter 100" \
    "$BIN/parity" bisect "--trainer $TR --fault ulp:3:100" "--trainer serial" "${SMALL[@]}" \
    --steps 5
grep -q "parameter 100" "$W/h.txt" || fail "bisect did not name parameter 100"
expect 0 "parity lockstep --trainer $TR --mode fast: within the bound, 30 steps" \
    "$BIN/parity" lockstep --trainer "$TR" --mode fast "${SMALL[@]}" --steps 30
fi

if want ranks; then
section "--ranks on one GPU: $TR as MPI ranks against the reference"
MPIRUN=(mpirun --oversubscribe --bind-to none)
if [ -x "$BIN/test_mpi_cnn" ] && [ "$TR" = cuda ]; then   # the CNN cases of test_mpi_cnn
    for R in 2 3; do
        timeout 200 "${MPIRUN[@]}" -n "$R" "$BIN/test_mpi_cnn" cuda 1 > "$W/mpi$R.txt" 2>&1 &&
            echo "ok   test_mpi_cnn cuda R=$R: $(tail -1 "$W/mpi$R.txt")" ||
            { fail "test_mpi_cnn cuda R=$R"; grep FAIL "$W/mpi$R.txt" | head -3
              tail -2 "$W/mpi$R.txt"; }
    done
fi
for R in 2 3; do   # parity train --ranks R: every step's digests and weights_sha256
    for row in "mlp-adam --dataset fashion-mnist --optim adam --lr 0.001 --batch 50 --chunk 7" \
        "bn-sgd --dataset mnist --model ${SMALL[3]} --dtype f64"; do
        read -r n args <<< "$row"
        # shellcheck disable=SC2086
        train "ref-r$R-$n" --trainer reference --steps 20 $args &&
            train "dev-r$R-$n" --trainer "$TR" --ranks "$R" --steps 20 $args || continue
        same_run "ref-r$R-$n" "dev-r$R-$n" "$TR --ranks $R == reference, $n"
    done
done
fi

if want layers; then
section "per layer: $TR (PARITY_CUDA_PROFILE) and PyTorch (cuBLAS, cuDNN), TFLOP/s"
"$BIN/parity" data make-cifar "$W/cifar-layers" --records 2000 > /dev/null || fail "make-cifar"
for row in "mnist-cnn --dataset mnist --model $CNN --optim adam --lr 0.001" \
    "cifar-bn --dataset $W/cifar-layers --model $BN --lr 0.01 --epochs 2"; do
    read -r n args <<< "$row"
    echo "# $n: parity --trainer $TR, 200 steps, batch 64, f32" >> "$OUT/layers.txt"
    # shellcheck disable=SC2086
    PARITY_CUDA_PROFILE=1 timeout "$RUN_LIMIT" "$BIN/parity" train --trainer "$TR" $args \
        --steps 200 --no-eval --quiet 2>> "$OUT/layers.txt" > /dev/null || fail "profile $n"
    [ -n "${BASE:-}" ] || continue
    echo "# $n: BASE $(cat "$BASE/COMMIT"), the same" >> "$OUT/base.txt"
    # shellcheck disable=SC2086
    PARITY_CUDA_PROFILE=1 timeout "$RUN_LIMIT" "$BASE/parity" train --trainer "$TR" $args \
        --steps 200 --no-eval --quiet 2>> "$OUT/base.txt" > /dev/null || fail "BASE profile $n"
done
echo "# PyTorch on the same shapes (bench/gpu_layers.py): model layer pass seconds TFLOP/s" \
    >> "$OUT/layers.txt"
timeout 200 python3 "$S/bench/gpu_layers.py" 200 >> "$OUT/layers.txt" || fail "gpu_layers.py"
cat "$OUT/layers.txt"
fi

if ! want timings; then
    rm -rf "$W"
    section "end ($SECTIONS): $fails failure(s), $SECONDS s in all"
    [ "$fails" = 0 ]
    exit
fi
section "seconds per epoch: $TR against PyTorch"
times=$OUT/times.txt
: > "$times"
in_budget() {   # in_budget WHAT: false, a failure counted, once BUDGET seconds are spent
    [ "$SECONDS" -lt "$BUDGET" ] && return 0
    fail "$1: not timed, the script's $BUDGET s are spent"
    return 1
}
# TIMED: the keys to time (default all: mlp-f32 cnn-f32 cifar-f32 mlp-f64).
timed() { [[ " ${TIMED:-mlp-f32 cnn-f32 cifar-f32 mlp-f64} " == *" $1 "* ]]; }
# time_parity KEY PER_EPOCH ARGS...: seconds of the 2nd of 2 epochs, 3 runs;
# with BASE, BASE's three after them, into OUT/base.txt.
time_parity() {
    time_runs "$BIN/parity" "$times" "$@"
    [ -z "${BASE:-}" ] || time_runs "$BASE/parity" "$OUT/base.txt" "$@"
}
time_runs() {   # time_runs PARITY TO KEY PER_EPOCH ARGS...
    local bin=$1 to=$2 key=$3 per=$4 t0 _
    shift 4
    timed "$key" || return 0
    for _ in 1 2 3; do
        in_budget "parity $key" || return
        t0=$SECONDS
        if timeout "$RUN_LIMIT" "$bin" train --trainer "$TR" --epochs 2 \
            --warmup-steps "$per" --no-eval --quiet --json "$@" > "$W/t.json"; then
            echo "parity-$key $(field "$W/t.json" seconds)" >> "$to"
        else
            fail "timing parity $key: $(exit_of $?)"
            return
        fi
        [ $((SECONDS - t0)) -le 30 ] ||
            { echo "parity $key: $((SECONDS - t0)) s a run, not repeated"; return; }
    done
}
time_torch() {   # time_torch KEY DTYPE MODEL...: bench/gpu_vs_pytorch.py, both modes
    local key=$1 dt=$2 mode
    shift 2
    timed "$key" || return 0
    for mode in default deterministic; do
        in_budget "pytorch $key $mode" || continue
        timeout 200 python3 "$S/bench/gpu_vs_pytorch.py" "$mode" "$dt" 2 3 "$@" > "$W/torch.json" &&
            echo "torch-$key-$mode $(cat "$W/torch.json")" >> "$times" || fail "pytorch $key $mode"
    done
}
# In the order of what a cut by BUDGET should keep: the MLP in f32 (README's
# figure), the CNNs, then the MLP in f64.
time_parity mlp-f32 844 --dataset fashion-mnist   # ceil(54,000 / 64)
time_torch mlp-f32 f32 mlp
time_parity cnn-f32 844 --dataset mnist --model "$CNN" --optim adam --lr 0.001
time_torch cnn-f32 f32 cnn
# 10,000 records a file: 45,000 training records, 704 steps an epoch
"$BIN/parity" data make-cifar "$W/cifar-time" --records 10000 > /dev/null || fail "make-cifar"
time_parity cifar-f32 704 --dataset "$W/cifar-time" --model "$BN" --lr 0.01
time_torch cifar-f32 f32 cifar "$W/cifar-time"
time_parity mlp-f64 844 --dataset fashion-mnist --dtype f64
time_torch mlp-f64 f64 mlp
cat "$times"
[ -z "${BASE:-}" ] || cat "$OUT/base.txt"
section "report"
python3 "$S/ci/gpu_report.py" "$times" "$BIN/COMMIT" "$fails" > "$OUT/gpu.md" || fail "report"
cat "$OUT/gpu.md"
rm -rf "$W"
section "end: $fails failure(s), $SECONDS s in all"
[ "$fails" = 0 ]
