#!/usr/bin/env bash
# Installs what is missing (ci/setup.sh --ci: with PyTorch for the torch
# label), builds parity with coverage and -Werror, runs the ctest suite
# (every label; slow only with --all), then builds it again without
# MPI (build-nompi, -Werror) and runs its unit tests there (the MPI tests are
# registered DISABLED), then with clang (build-clang, -Werror, all targets:
# its unit tests; that clang's runs give gcc's bits is ctest's cross label,
# tests/tools/test_cross.sh, with -O3, aarch64 and the portable kernels too),
# prints a gcovr coverage summary of src/ and
# reference/, then fuzzes every parser for a bounded time (ci/fuzz.sh,
# PARITY_FUZZ_SECONDS each, default 10; 0 skips; any crash fails).
# The tests labelled slow (the quick and studies suites end to end, a
# deliberately broken suite, NOISY rows, git bisect: minutes each) are left
# out unless --all is given; ci/verify.sh runs the default suite itself.
# Usage: ci/test.sh [--all | extra ctest args, e.g. -L unit: then no fuzzing]
set -euo pipefail
cd "$(dirname "$0")/.."
select=(-LE slow)
if [ "${1:-}" = --all ]; then
    select=()
    shift
fi
ci/setup.sh --ci

build=build-ci
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_COVERAGE=ON \
      -DPARITY_WERROR=ON -DPARITY_MPI=ON >/dev/null
find "$build" -name '*.gcda' -delete
cmake --build "$build" -j"$(nproc)"
if [ $# -gt 0 ]; then select=("$@"); fi
ctest --test-dir "$build" --output-on-failure -j1 "${select[@]}"

echo
echo "== without MPI (build-nompi: -DPARITY_MPI=OFF, unit tests) =="
cmake -S . -B build-nompi -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_WERROR=ON \
      -DPARITY_MPI=OFF -DPARITY_CUDA=OFF >/dev/null
cmake --build build-nompi -j"$(nproc)" >/dev/null
ctest --test-dir build-nompi --output-on-failure -j"$(nproc)" -L unit

echo
echo "== clang (build-clang: -Werror, unit tests; its bits: ctest -L cross) =="
CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_WERROR=ON \
      -DPARITY_MPI=ON -DPARITY_CUDA=OFF >/dev/null
cmake --build build-clang -j"$(nproc)" >/dev/null
ctest --test-dir build-clang --output-on-failure -j"$(nproc)" -L unit

echo
echo "== coverage (src/, reference/) =="
# (--gcov-ignore-parse-errors: counters updated without atomics, as the
# coverage build does, can make gcov print a negative branch count.)
gcovr -r . --object-directory "$build" --gcov-ignore-parse-errors --filter 'src/' --filter 'reference/' \
      --exclude-unreachable-branches --print-summary -o "$build/coverage.txt" >/dev/null
sed -n '/^---/,$p' "$build/coverage.txt" | tail -n +1 | grep -E '^(src|reference|TOTAL|---)' || true
gcovr -r . --object-directory "$build" --gcov-ignore-parse-errors --filter 'src/' --filter 'reference/' --print-summary \
      -o "$build/coverage-summary.txt" | grep -E '^(lines|branches|functions)'

fuzz_s=${PARITY_FUZZ_SECONDS:-10}
if [ $# -eq 0 ] && [ "$fuzz_s" -gt 0 ]; then
    echo
    echo "== fuzzing (${fuzz_s} s per parser; ci/fuzz.sh) =="
    FUZZ_SECONDS=$fuzz_s ci/fuzz.sh
fi
