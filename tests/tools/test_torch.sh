#!/usr/bin/env bash
# parity's reference against PyTorch in f64 (tests/tools/torch_crosscheck.py): the
# same network from parity's initial weights, parity's batches in its order,
# the same optimizer; every step's loss and the final weights agree to 1e-10
# relative (per tensor: max |torch - parity| / max |parity|). 20 steps of
# batch 64, seed 1, each: on MNIST the default MLP (sgd), a conv + max-pool
# CNN (sgd), the MNIST CNN (adam) and a CNN with batchnorm (sgd); on a small
# synthetic CIFAR-10 (parity data make-cifar: 135 training records, 3 steps
# an epoch, the last of 7 samples) a conv + max-pool CNN with momentum over 7
# epochs; then the batchnorm CNN against PyTorch DDP at world sizes 2 and 3
# (tests/tools/torch_ddp_bn.py). About 70 s. Skipped (exit 77) without Debian's python3-torch;
# needs MNIST (data/fetch.sh).
# Usage: test_torch.sh PATH/TO/parity
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    echo "skip: python3-torch is not installed (apt-get install python3-torch)"
    exit 77
fi
X=$(dirname "$0")/torch_crosscheck.py
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$P" data make-cifar "$T/cifar" --records 30 --seed 5 >/dev/null
check "parity data make-cifar" test -f "$T/cifar/test_batch.bin"
cases=(
    "--model mlp:784-256-128-10 --optim sgd --lr 0.01"
    "--model cnn:1x28x28-c4k3p1-r-m2-c8k3-r-m2-f-fc10 --optim sgd --lr 0.05"
    "--model cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 --optim adam --lr 0.001"
    "--model cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10 --optim sgd --lr 0.05"
    "--dataset $T/cifar --model cnn:3x32x32-c8k3p1-r-m2-c16k3p1-r-m2-f-fc32-r-fc10 --optim momentum --lr 0.02"
)
for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    out=$($PY "$X" "$P" $c --batch 64 --steps 20 --seed 1 2>&1)
    rc=$?
    echo "$out"
    check "PyTorch f64 agrees with parity's reference to 1e-10: ${c/$T\//} ($(echo "$out" | tail -n 1))" \
        test $rc = 0
done

# Batchnorm under data parallelism (tests/tools/torch_ddp_bn.py): parity's mpi at
# 2 and 3 ranks give the reference's bits; PyTorch DDP (gloo) with
# BatchNorm2d trains another model at each world size.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
out=$($PY "$(dirname "$0")/torch_ddp_bn.py" "$P" --steps 20 2>&1)
rc=$?
echo "$out"
check "parity mpi R=2,3 equal the reference bit for bit; DDP's BatchNorm depends on the world size" \
    test $rc = 0 -a "$(echo "$out" | grep -c 'bit for bit equal')" = 2
finish
