#!/usr/bin/env bash
# The checks and figures that need a CUDA GPU, in one run (docs/gpu.md):
#   1. nvidia-smi, and the shared libraries parity lacks there;
#   2. the gpu label: test_cuda (cuda == reference bit for bit, every optimizer,
#      activation and dtype; tests/gpu/test_cuda.c), and the contraction check
#      of the compiled kernels with their SASS (ci/cuda_fma_check.py; cuobjdump),
#      with its negative control where nvcc and SCRIPTS/src are there;
#   3. `parity train --trainer cuda` against `--trainer reference` end to end
#      on the default MLP and Fashion-MNIST, f32 and f64, sgd and adam, batch 64
#      chunk 8 and batch 50 chunk 7, STEPS steps: every step's log line (loss
#      and weights digests) and weights_sha256; a cuda run resumed from its
#      checkpoint, on cuda and on serial, against one straight run;
#   4. seconds per epoch (the 2nd of 2, data resident, median of 3) of
#      --trainer cuda and of PyTorch on the same GPU, default and deterministic
#      (bench/gpu_vs_pytorch.py), written with provenance to OUT/gpu.md
#      (bench/results/gpu.md is a copy).
# BIN holds parity, test_cuda, libpar_cuda.a, cuda_kernels.ptx (a CUDA build's)
# and COMMIT (the commit they were built from); PARITY_DATA the datasets. Logs go
# to OUT (at most 5 files: gpu.log, gpu.md, test_cuda.log, times.txt, runs.tgz).
# Exit 0 when every check passed.
# Usage: ci/gpu.sh BIN OUT [SCRIPTS]   (SCRIPTS: where ci/, bench/, src/ are; default .)
# TRAINER=serial ci/gpu.sh ...: the same steps with serial for cuda (a dry run).
set -uo pipefail
BIN=$(cd "$1" && pwd)
OUT=$2
S=${3:-.}
STEPS=${STEPS:-40}
TR=${TRAINER:-cuda}   # TRAINER=serial: a dry run of the script on a machine without a GPU
mkdir -p "$OUT"
LOG=$OUT/gpu.log
exec > >(tee "$LOG") 2>&1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

echo "== device"
nvidia-smi || fail "nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ldd "$BIN/parity" | grep "not found" && fail "parity lacks shared libraries"

echo "== gpu label: test_cuda"
"$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1
rc=$?
grep -E "FAIL|passed|SKIP|device:" "$OUT/test_cuda.log" | tail -20
[ $rc = 0 ] || fail "test_cuda exit $rc"
echo "== contraction check (PTX and SASS)"
python3 "$S/ci/cuda_fma_check.py" "$BIN/cuda_kernels.ptx" "$BIN/libpar_cuda.a" || fail "fma check"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ] && [ -d "$S/src/cuda" ]; then   # the check rejects -fmad=true, SASS included
    python3 "$S/ci/cuda_fma_check.py" --control "$NVCC" "$S/src/cuda/cuda_kernels.cu" \
        -I"$S/src/cuda" -I"$S/src/core" -I"$S/src/kernels" -I"$S/src/model" ||
        fail "fma check control"
fi

echo "== parity train: cuda against reference, $STEPS steps"
W=$(mktemp -d)
train() {   # train NAME ARGS...: --json into $W/NAME.json, the log into $W/NAME.jsonl
    local name=$1
    shift
    "$BIN/parity" train --dataset fashion-mnist --no-eval --quiet --json --log "$W/$name.jsonl" \
        "$@" > "$W/$name.json" || { fail "parity train $name: exit $?"; return 1; }
}
field() {   # field FILE KEY: a key of a JSON file
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"
}
steps_of() { grep '"type":"step"' "$1"; }
for dt in f32 f64; do
    for opt in sgd adam; do
        for bc in 64:8 50:7; do
            B=${bc%:*} C=${bc#*:}
            args=(--dtype "$dt" --optim "$opt" --batch "$B" --chunk "$C" --steps "$STEPS")
            [ "$opt" = adam ] && args+=(--lr 0.001)
            n="$dt-$opt-b$B-c$C"
            train "ref-$n" --trainer reference "${args[@]}" || continue
            train "cuda-$n" --trainer "$TR" "${args[@]}" || continue
            a=$(field "$W/ref-$n.json" weights_sha256)
            b=$(field "$W/cuda-$n.json" weights_sha256)
            if [ "$a" = "$b" ] &&
                cmp -s <(steps_of "$W/ref-$n.jsonl") <(steps_of "$W/cuda-$n.jsonl"); then
                echo "ok   cuda == reference, $n: every step's digests, weights_sha256 $b"
            else
                fail "cuda != reference, $n: $b vs $a"
                diff <(steps_of "$W/ref-$n.jsonl") <(steps_of "$W/cuda-$n.jsonl") | head -4
            fi
        done
    done
done
# Resume: 20 steps on cuda with a checkpoint, then on to 40 on cuda and on serial.
half=$((STEPS / 2))
train full --trainer "$TR" --steps "$STEPS" --optim adam --lr 0.001 &&
train first --trainer "$TR" --steps "$half" --optim adam --lr 0.001 --checkpoint-dir "$W/ck" \
    --checkpoint-every "$half" &&
for tr in "$TR" serial; do
    cp -r "$W/ck" "$W/ck-$tr"
    train "resumed-$tr" --resume "$W/ck-$tr" --trainer "$tr" --steps "$STEPS" || continue
    a=$(field "$W/full.json" weights_sha256)
    b=$(field "$W/resumed-$tr.json" weights_sha256)
    [ "$a" = "$b" ] && echo "ok   cuda $half steps, resumed on $tr to $STEPS == one cuda run: $a" ||
        fail "resumed on $tr: $b, one run: $a"
done
tar -C "$W" -czf "$OUT/runs.tgz" --exclude='ck*' . 2>/dev/null   # the runs' JSON and logs

echo "== seconds per epoch: cuda against PyTorch"
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
echo "== $fails failure(s)"
[ "$fails" = 0 ]
