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
#   4. seconds per epoch (the 2nd of 2, data resident, median of 3) of
#      --trainer cuda and of PyTorch on the same GPU, default and deterministic
#      (bench/gpu_vs_pytorch.py), on the default MLP, written with provenance to
#      OUT/gpu.md (bench/results/gpu.md is a copy).
# A check that fails is counted and the run goes on (a cuda trainer that
# refuses the CNNs still gives the MLP's results). Every parity run of the
# checks is cut at RUN_LIMIT (60) seconds. Each section prints its seconds.
# BIN holds parity, test_cuda, libpar_cuda.a, cuda_kernels.ptx (a CUDA build's),
# COMMIT (the commit they were built from) and lib/ (shared libraries the GPU
# machine lacks): ci/gpu_bin.sh puts it together. PARITY_DATA holds the datasets
# fashion-mnist and mnist. Logs go to OUT (at most 5 files: gpu.log, gpu.md,
# test_cuda.log, times.txt, runs.tgz). Exit 0 when every check passed.
# Usage: ci/gpu.sh BIN OUT [SCRIPTS]   (SCRIPTS: where ci/, bench/, src/ are; default .)
# TRAINER=serial ci/gpu.sh ...: the same steps with serial for cuda (a dry run).
set -uo pipefail
BIN=$(cd "$1" && pwd)
OUT=$2
S=${3:-.}
STEPS=${STEPS:-40}           # the MLP's rows
CNN_STEPS=${CNN_STEPS:-60}   # the CNNs' rows
RUN_LIMIT=${RUN_LIMIT:-60}   # seconds, any one parity run
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

section "gpu label: test_cuda"
"$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1
rc=$?
grep -E "FAIL|passed|SKIP|device:" "$OUT/test_cuda.log" | tail -20
[ $rc = 0 ] || fail "test_cuda exit $rc"
section "contraction check (PTX and SASS)"
python3 "$S/ci/cuda_fma_check.py" "$BIN/cuda_kernels.ptx" "$BIN/libpar_cuda.a" || fail "fma check"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ] && [ -d "$S/src/cuda" ]; then   # the check rejects -fmad=true, SASS included
    python3 "$S/ci/cuda_fma_check.py" --control "$NVCC" "$S/src/cuda/cuda_kernels.cu" \
        -I"$S/src/cuda" -I"$S/src/core" -I"$S/src/kernels" -I"$S/src/model" ||
        fail "fma check control"
fi

W=$(mktemp -d)
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
# bitwise LABEL STEPS JOBS DESC CPU... -- ARGS...: for f32 and f64, sgd and adam (lr
# 0.001), batch 64 chunk 8 and batch 50 chunk 7, STEPS steps of ARGS on $TR and on
# the CPU trainer (its flags CPU..., DESC in the log); compares every step's log
# line and weights_sha256. JOBS all: the CPU runs of all rows start at once, in
# the background; else each row's CPU run follows its $TR run, and is skipped
# when that failed (a trainer that refuses the model costs no CPU runs).
bitwise() {
    local label=$1 steps=$2 jobs=$3 desc=$4 dt opt bc B C n a b i
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
        a=$(field "$W/cpu-$n.json" weights_sha256)
        b=$(field "$W/dev-$n.json" weights_sha256)
        if [ "$a" = "$b" ] &&
            cmp -s <(steps_of "$W/cpu-$n.jsonl") <(steps_of "$W/dev-$n.jsonl"); then
            echo "ok   $TR == $desc, $n: every step's digests, weights_sha256 $b"
        else
            fail "$TR != $desc, $n: $b vs $a"
            diff <(steps_of "$W/cpu-$n.jsonl") <(steps_of "$W/dev-$n.jsonl") | head -4
        fi
    done
}

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

section "parity train: $TR against omp T=$NP, the CNNs, $CNN_STEPS steps"
OMP=("omp T=$NP (= reference bit for bit: test_cnn, in CI)" --trainer omp --threads "$NP")
bitwise mnist-cnn "$CNN_STEPS" one "${OMP[@]}" -- --dataset mnist --model "$CNN"
# 500 records a file: 2,250 training records, 36 steps of 64 (45 of 50) an epoch
"$BIN/parity" data make-cifar "$W/cifar-rows" --records 500 > /dev/null || fail "make-cifar"
bitwise cifar-bn "$CNN_STEPS" one "${OMP[@]}" -- --dataset "$W/cifar-rows" --model "$BN" \
    --epochs 2
tar -C "$W" -czf "$OUT/runs.tgz" --exclude='ck*' --exclude='cifar-*' . 2>/dev/null   # JSON, logs

section "seconds per epoch: $TR against PyTorch"
PER_EPOCH=844   # ceil(54,000 / 64): Fashion-MNIST's training split
times=$OUT/times.txt
: > "$times"
for dt in f32 f64; do
    for r in 1 2 3; do
        "$BIN/parity" train --trainer "$TR" --dataset fashion-mnist --dtype "$dt" --epochs 2 \
            --warmup-steps $PER_EPOCH --no-eval --quiet --json > "$W/t.json" &&
            echo "parity-cuda-$dt $(field "$W/t.json" seconds)" >> "$times"
    done
done
for mode in default deterministic; do
    for dt in f32 f64; do
        python3 "$S/bench/gpu_vs_pytorch.py" "$mode" "$dt" 2 3 > "$W/torch.json" &&
            echo "torch-$mode-$dt $(cat "$W/torch.json")" >> "$times" || fail "pytorch $mode $dt"
    done
done
cat "$times"
section "report"
python3 - "$times" "$BIN/COMMIT" "$fails" > "$OUT/gpu.md" <<'PY' || fail "report"
import json, statistics, subprocess, sys
times, commit_file, fails = sys.argv[1], sys.argv[2], int(sys.argv[3])
def q(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
gpu = q("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")
smi = q("nvidia-smi")
cuda = smi.split("CUDA Version:")[-1].split()[0] if "CUDA Version:" in smi else "?"
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
commit = open(commit_file).read().strip()
parity, torch = {}, {}
meta = {}
for line in open(times):
    name, rest = line.split(" ", 1)
    if name.startswith("parity"):
        s = rest.split()[0]
        parity.setdefault(name.rsplit("-", 1)[1], []).append(float(s))
    else:
        d = json.loads(rest)
        meta = d
        torch[(d["mode"], name.rsplit("-", 1)[1])] = [ep[-1] for ep in d["seconds"]]
med = statistics.median
print("# --trainer cuda against PyTorch on the same GPU\n")
print("Written by `ci/gpu.sh` on the GPU machine; not typed by hand.\n")
print("| provenance | |\n|---|---|")
print(f"| date (UTC) | {q('date', '-u', '+%Y-%m-%dT%H:%M:%SZ')} |")
print(f"| GPU, driver | {gpu} |")
print(f"| CUDA | the driver's {cuda}; parity built with nvcc 13.0, sm_90, -fmad=false, "
      "on Debian 12 with gcc 12 |")
print(f"| PyTorch | {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}), TF32 off |")
print(f"| CPU | {cpu} |")
print(f"| parity commit | {commit} |")
print(f"| checks of ci/gpu.sh | {'all passed' if fails == 0 else f'{fails} FAILED'} |")
print()
print("The default MLP (784-256-128-10, ReLU, SGD lr 0.01, batch 64) on Fashion-MNIST's "
      "training split (54,000 records, 844 steps), data resident on the GPU. Seconds of the "
      "2nd of 2 epochs, median of 3 runs (parity: `--epochs 2 --warmup-steps 844 --no-eval`, "
      "exact mode, one loss read back per step; PyTorch: one process, 3 models, no "
      "synchronisation inside the epoch).\n")
print("| dtype | parity cuda (exact) | PyTorch default | PyTorch deterministic | "
      "default / cuda | deterministic / cuda |")
print("|---|--:|--:|--:|--:|--:|")
for dt in ("f32", "f64"):
    p = med(parity[dt]) if dt in parity else float("nan")
    d = med(torch[("default", dt)]) if ("default", dt) in torch else float("nan")
    t = med(torch[("deterministic", dt)]) if ("deterministic", dt) in torch else float("nan")
    print(f"| {dt} | {p:.3f} | {d:.3f} | {t:.3f} | {d / p:.2f}x | {t / p:.2f}x |")
PY
cat "$OUT/gpu.md"
rm -rf "$W"
section "end: $fails failure(s), $SECONDS s in all"
[ "$fails" = 0 ]
