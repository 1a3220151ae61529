#!/usr/bin/env bash
# parity's reference against PyTorch in f64 (tests/torch_crosscheck.py): the
# same network from parity's initial weights, parity's batches in its order,
# the same optimizer; every step's loss and the final weights agree to 1e-10
# relative. The default MLP (sgd), a conv + max-pool CNN (sgd), the MNIST CNN
# (adam) and a CNN with batchnorm (sgd), 20 steps of MNIST each.
# Skipped (exit 77) without Debian's python3-torch; needs MNIST (data/fetch.sh).
# Usage: test_torch.sh PATH/TO/parity
set -u
. "$(dirname "$0")/test_lib.sh"
P=$1
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    echo "skip: python3-torch is not installed (apt-get install python3-torch)"
    exit 77
fi
X=$(dirname "$0")/torch_crosscheck.py
cases=(
    "mlp:784-256-128-10 sgd 0.01"
    "cnn:1x28x28-c4k3p1-r-m2-c8k3-r-m2-f-fc10 sgd 0.05"
    "cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 adam 0.001"
    "cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10 sgd 0.05"
)
for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    out=$($PY "$X" "$P" $c 20 2>&1)
    rc=$?
    echo "$out"
    check "PyTorch f64 agrees with parity's reference to 1e-10: $c ($(echo "$out" | tail -n 1))" \
        test $rc = 0
done
finish
