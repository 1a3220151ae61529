#!/usr/bin/env bash
# The main job: installs what is missing (ci/setup.sh, which also fetches the
# datasets), builds, makes a signing key if there is none, runs the verify
# suite (`parity verify verify/suites/default`, about 25 minutes on 2 cores)
# and prints its table. Exits with parity verify's code: 0 passed and signed,
# 1 a verdict failed (table printed, not signed), 2 suite error, 3 runtime.
# Usage: ci/verify.sh [SUITE]   (default, quick, full, studies, studies-quick
# or a suite file). A suite that trains on results/cifar10-made (the studies)
# gets that generated CIFAR-format data made first if it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
# OMP_WAIT_POLICY stays the default: parity verify sets passive itself for
# oversubscribed runs only (spinning threads then starve other ranks), and
# passive everywhere would slow every OpenMP region it times.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_MPI=ON >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

suite=${1:-verify/suites/default}
key=${PARITY_KEY:-$HOME/.config/parity/parity.key}
pub=${key%.key}.pub
if [ ! -e "$key" ]; then
    ./build/parity table keygen --key "$key"
fi
echo "signing key: $key; public key (to check tables): $pub"

file=$suite
[ -e "$file" ] || file=verify/suites/$suite
if grep -q '^dataset *= *results/cifar10-made' "$file" 2>/dev/null &&
   [ ! -e results/cifar10-made/data_batch_1.bin ]; then
    ./build/parity data make-cifar results/cifar10-made --records 1000
fi

out=results/$(date -u +%Y%m%d-%H%M%S)-$(basename "$suite")
set +e
./build/parity verify "$suite" --out "$out" --key "$key"
rc=$?
set -e
if [ -s "$out/table.md" ]; then
    echo
    cat "$out/table.md"
    echo
    echo "results: $out (check the signature with: ./build/parity table verify $out --pub $pub)"
fi
exit $rc
