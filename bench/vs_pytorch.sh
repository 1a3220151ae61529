#!/usr/bin/env bash
# parity against PyTorch (Debian python3-torch, installed here if missing),
# side by side in one run, f32, batch 64, one epoch: seconds per epoch and
# ratios, for
#   mlp (default): MLP 784-256-128-10, SGD lr 0.01, Fashion-MNIST;
#   cnn: the MNIST CNN (conv 1->32 3x3 padding 1, ReLU, fc 128, ReLU, fc 10),
#        Adam lr 0.001, MNIST;
#   cifar: the CIFAR-10 CNN with batchnorm (three blocks conv 3x3 -> bn ->
#        ReLU -> max-pool 2, 3->32->64->128, fc 256, fc 10), SGD lr 0.01, on
#        CIFAR-format data of CIFAR-10's size that `parity data make-cifar`
#        generates (speed does not depend on the pixels); the first
#        CIFAR_STEPS (100) steps of the epoch, timed and scaled to the epoch.
# PyTorch on 2 cores three ways: torch 1 thread + OPENBLAS_NUM_THREADS=2,
# torch 2 threads with OMP_WAIT_POLICY=passive, and its default 2 threads;
# the fastest of the three is its best 2-core setup. Writes
# bench/results/vs_pytorch.md (mlp) or vs_pytorch_cnn.md, vs_pytorch_cifar.md
# (bench/results_lib.sh); not a test.
# Usage: bench/vs_pytorch.sh [REPEATS] [mlp|cnn|cifar]   (3 mlp)
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-3}
WHAT=${2:-mlp}
case $WHAT in
mlp) P_ARGS=(--dataset fashion-mnist) ;;
cnn) P_ARGS=(--dataset mnist --model cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 --optim adam --lr 0.001) ;;
cifar) ;;   # below, once parity is built
*) echo "usage: bench/vs_pytorch.sh [REPEATS] [mlp|cnn|cifar]" >&2; exit 2 ;;
esac
. bench/results_lib.sh
bench_begin "vs_pytorch$([ "$WHAT" = mlp ] || echo "_$WHAT")" "parity against PyTorch: $WHAT" "$@"
# python3-torch depends on "libblas.so.3", which apt satisfies with the
# reference BLAS (10x slower here); OpenBLAS (pthread build) must be asked for.
# BENCH_NO_INSTALL=1 runs with what is installed (the results name the BLAS).
if [ "${BENCH_NO_INSTALL:-0}" != 1 ] && { ! /usr/bin/python3 -c 'import torch' 2>/dev/null ||
   ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q "install ok installed"; }; then
    echo "installing python3-torch and OpenBLAS (libopenblas0-pthread)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null
fi
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
torch=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
# always built: a stale binary would time other code than the commit recorded
cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" --target parity >/dev/null
T_ARGS=("$WHAT")
if [ "$WHAT" = cifar ]; then
    steps=${CIFAR_STEPS:-100}
    data=$T/cifar
    ./build/parity data make-cifar "$data" --records 10000 >/dev/null
    P_ARGS=(--dataset "$data" --steps "$steps" --lr 0.01
            --model cnn:3x32x32-c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-c128k3p1-bn-r-m2-f-fc256-r-fc10)
    T_ARGS=(cifar "$data" "$steps")
    PER_EPOCH=704   # ceil(45,000 / 64)
fi

median() { python3 -c "import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
# seconds per epoch: a run's seconds, scaled by PER_EPOCH / steps when set
parity_run() { ./build/parity train --epochs 1 --quiet --json "${P_ARGS[@]}" "$@" | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(d['seconds'] * ${PER_EPOCH:-0} / d['steps'] if ${PER_EPOCH:-0} else d['seconds'])"; }
torch_run() { env "$@" | python3 -c "import json,sys; print(json.load(sys.stdin)['seconds'])"; }

declare -A t
for i in $(seq "$R"); do
    t[p_serial_exact]+=" $(parity_run --trainer serial)"
    t[p_serial_fast]+=" $(parity_run --trainer serial --mode fast)"
    t[p_omp2_exact]+=" $(parity_run --trainer omp --threads 2)"
    t[torch1]+=" $(torch_run OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/vs_pytorch.py 1 f32 "${T_ARGS[@]}")"
    t[torch1_blas2]+=" $(torch_run OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/vs_pytorch.py 1 f32 "${T_ARGS[@]}")"
    t[torch2_passive]+=" $(torch_run OMP_WAIT_POLICY=passive /usr/bin/python3 bench/vs_pytorch.py 2 f32 "${T_ARGS[@]}")"
    t[torch2_default]+=" $(torch_run /usr/bin/python3 bench/vs_pytorch.py 2 f32 "${T_ARGS[@]}")"
done
declare -A m
for k in "${!t[@]}"; do m[$k]=$(median ${t[$k]}); done

report() {
    python3 - "$WHAT" "$R" "$torch" "${blas:-unknown}" "${steps:-}" \
        "${m[p_serial_exact]}" "${m[p_serial_fast]}" "${m[p_omp2_exact]}" "${m[torch1]}" \
        "${m[torch1_blas2]}" "${m[torch2_passive]}" "${m[torch2_default]}" \
        "${t[p_serial_exact]}" "${t[p_serial_fast]}" <<'PY'
import statistics, sys
what, R, torch, blas, steps = sys.argv[1:6]
ps, pf, p2, t1, t1b2, t2p, t2d = map(float, sys.argv[6:13])
# exact against fast also by round (the two run back to back): where the two
# figures part, the machine's noise is larger than the difference
paired = [f / e for e, f in zip(map(float, sys.argv[13].split()), map(float, sys.argv[14].split()))]
setting = {"mlp": "Fashion-MNIST, MLP 784-256-128-10, SGD lr 0.01",
           "cnn": "MNIST, CNN conv 1->32 3x3 padding 1, ReLU, fc 128, ReLU, fc 10, Adam lr 0.001",
           "cifar": "CIFAR-format data of CIFAR-10's size made by `parity data make-cifar` "
                    "(45,000 training records after the validation split), CNN of three blocks "
                    "conv 3x3 -> bn -> ReLU -> max-pool 2 (3->32->64->128), fc 256, fc 10, "
                    f"SGD lr 0.01; the first {steps} steps timed and scaled to the epoch's 704"}[what]
print(f"One epoch, f32, batch 64: {setting}. Seconds per epoch of the training loop, the "
      f"median of {R} runs each; PyTorch {torch} on the BLAS `{blas}`" +
      ("." if "openblas" in blas else ": the reference BLAS, on which PyTorch runs about 10x "
       "slower than on OpenBLAS, so the ratios below do not compare parity with PyTorch as "
       "it is meant to run (`apt-get install libopenblas0-pthread`)."))
print()
print("| configuration | s/epoch |")
print("|---|--:|")
for name, v in (("parity serial exact", ps), ("parity serial fast", pf),
                ("parity omp T=2 exact", p2), ("PyTorch 1 thread", t1),
                ("PyTorch 1 thread + OPENBLAS_NUM_THREADS=2", t1b2),
                ("PyTorch 2 threads, OMP_WAIT_POLICY=passive", t2p),
                ("PyTorch 2 threads, default", t2d)):
    print(f"| {name} | {v:.3f} |")
print()
print("| ratio (above 1: parity is the faster) | |")
print("|---|--:|")
print(f"| PyTorch 1 thread / parity serial exact | {t1 / ps:.2f}x |")
print(f"| PyTorch's best 2-core setup / parity omp T=2 exact | {min(t1b2, t2p, t2d) / p2:.2f}x |")
print(f"| parity serial fast / serial exact (exact's speed against fast's): the medians; each "
      f"round's pair, median (range) | {pf / ps:.2f}x; {statistics.median(paired):.2f}x "
      f"({min(paired):.2f}-{max(paired):.2f}) |")
PY
}
bench_write report
