#!/usr/bin/env bash
# PyTorch on a CUDA GPU under `parity lockstep --external --intermediates`
# (docs/external.md, "On a GPU"): python/examples/torch_ddp.py --device cuda
# in torch's deterministic mode, its default mode (--nondeterministic), and
# its default mode with TF32 allowed (--tf32: must fail), on the default MLP
# (SGD) and the MNIST CNN (Adam), 2 steps each. The log goes to
# OUT/external_gpu.log (bench/results/external_gpu.log is a copy). Run on
# the GPU machine beside ci/gpu.sh, with PARITY_DATA set.
# Usage: ci/gpu_external.sh PARITY OUT [PYTHON_DIR]   (default ./python)
set -uo pipefail
P=$1
OUT=$2
EX=${3:-$PWD/python}/examples/torch_ddp.py
L=$OUT/external_gpu.log
mkdir -p "$OUT"
: >"$L"
MLP="--model mlp:784-256-128-10"
CNN="--model cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 --optim adam --lr 0.001"
run() {
    echo "== $*" >>"$L"
    timeout 60 "$P" lockstep --intermediates --steps 2 --timeout 50 "$@" >>"$L" 2>&1
    echo "exit $?" >>"$L"
}
for m in MLP CNN; do
    # shellcheck disable=SC2086
    run --external "python3 $EX --device cuda" ${!m}
    # shellcheck disable=SC2086
    run --external "python3 $EX --device cuda --nondeterministic" ${!m}
    # shellcheck disable=SC2086
    run --external "python3 $EX --device cuda --nondeterministic --tf32" ${!m}
done
cat "$L"
