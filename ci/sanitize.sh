#!/usr/bin/env bash
# Runs parity under the sanitizers and valgrind (not part of ci/test.sh: it
# takes a while). Each part fails the script on any report.
#   asan      gcc, -DPARITY_SANITIZE=ON (ASan+UBSan, no recovery): the whole
#             ctest suite except the `slow` label (test_git_bisect builds its
#             own trees) in build-asan. Leak checking stays on; only Open
#             MPI's own allocations are suppressed (see lsan.supp below).
#   tsan      clang, -DPARITY_TSAN=ON, LLVM's libomp with the Archer tool
#             (OMP_TOOL_LIBRARIES=libarcher.so) so that TSan sees OpenMP's
#             barriers and tasks (libgomp is not instrumented: under gcc every
#             barrier is a false race). Runs the omp tests (test_trainers, the
#             omp resume test, and `parity train --trainer omp --threads 2`).
#   valgrind  memcheck on short `parity train` runs (serial, omp, a checkpoint
#             and a resume): no invalid access, no definite or indirect leak.
# Usage: ci/sanitize.sh [asan] [tsan] [valgrind]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(asan tsan valgrind)
ci/setup.sh
need=()
for p in clang libomp-14-dev libclang-rt-14-dev valgrind; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "ci/sanitize.sh: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bad=0

for part in "${parts[@]}"; do
case $part in
asan)
    B=build-asan
    cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_SANITIZE=ON -DPARITY_MPI=ON \
        -DPARITY_WERROR=ON >/dev/null
    cmake --build "$B" -j"$(nproc)" >/dev/null
    # Leak suppressions, each with its reason. All are allocations made inside
    # Open MPI and the libraries it loads, freed by no one before exit (they
    # live until MPI_Finalize or process end by design); our own code is
    # still leak-checked in every MPI test.
    cat >"$B/lsan.supp" <<'EOF'
# Open MPI 4.1: MPI_Init/MPI_Finalize keep component state, hwloc topology,
# PMIx and libevent objects alive past exit (not freed by design).
leak:libmpi.so
leak:libopen-pal.so
leak:libopen-rte.so
leak:libpmix.so
leak:libevent
leak:libhwloc.so
leak:mca_
# ORTE's launcher (mpirun itself, not a parity process) when it runs under
# an instrumented parent: strdup'd argv and environment of the job.
leak:orterun
EOF
    # ASan aborts on the first error (no recovery): a report fails its test.
    # detect_odr_violation=0: Open MPI's plugins define the same symbols in
    # several .so (not our code). fast_unwind_on_malloc=0 and Open MPI's
    # disable_dlclose: full stacks through Open MPI's plugins (else they are
    # "<unknown module>" after MPI_Finalize unloads them, and no suppression
    # by library name can match). Under mpirun every rank inherits these.
    export OMPI_MCA_mca_base_component_disable_dlclose=1
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_odr_violation=0:fast_unwind_on_malloc=0"
    export LSAN_OPTIONS="suppressions=$PWD/$B/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    if ! ctest --test-dir "$B" --output-on-failure -j1 -LE slow; then
        echo "ci/sanitize.sh: asan: failures above" >&2
        bad=1
    fi
    unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose
    ;;
tsan)
    B=build-tsan
    CC=clang cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_TSAN=ON -DPARITY_MPI=OFF \
        >/dev/null
    cmake --build "$B" -j"$(nproc)" --target parity test_trainers >/dev/null
    archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | tail -n 1)
    export OMP_TOOL_LIBRARIES=$archer OMP_TOOL=enabled
    # halt_on_error: the first race fails the run. ignore_noninstrumented_modules:
    # races inside uninstrumented libraries (libc, zlib) are not ours to report.
    export TSAN_OPTIONS="halt_on_error=1:exitcode=66:ignore_noninstrumented_modules=1"
    export OMP_NUM_THREADS=2
    echo "== tsan: test_trainers (omp against the reference, 1..4 threads), archer=$archer"
    if ! "$B/tests/unit/test_trainers" >"$B/tsan-trainers.log" 2>&1; then
        tail -n 40 "$B/tsan-trainers.log" >&2
        bad=1
    else
        tail -n 1 "$B/tsan-trainers.log"
    fi
    T=$(mktemp -d)
    for t in 2 3; do
        echo "== tsan: parity train --trainer omp --threads $t (with checkpoints and a resume)"
        if ! "$B/parity" train --trainer omp --threads $t --steps 40 --checkpoint-dir "$T/ck$t" \
                --checkpoint-every 20 --log "$T/l$t.jsonl" --quiet 2>"$T/e$t" ||
           ! "$B/parity" train --trainer omp --threads $t --steps 60 --resume "$T/ck$t" \
                --log "$T/l$t.jsonl" --quiet 2>>"$T/e$t"; then
            tail -n 40 "$T/e$t" >&2
            bad=1
        fi
    done
    echo "== tsan: test_resume.sh omp"
    bash tests/cli/test_resume.sh "$B/parity" omp | tail -n 1 || bad=1
    rm -rf "$T"
    unset OMP_TOOL_LIBRARIES OMP_TOOL TSAN_OPTIONS OMP_NUM_THREADS
    ;;
valgrind)
    B=build-rel
    # CPU trainers only: without the CUDA runtime, whose start-up valgrind need not see
    cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_MPI=ON -DPARITY_CUDA=OFF >/dev/null
    cmake --build "$B" -j"$(nproc)" --target parity >/dev/null
    T=$(mktemp -d)
    # definite and indirect leaks and every invalid access are errors;
    # "possibly lost" / "still reachable" are libgomp's thread pool.
    VG=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
        --show-leak-kinds=definite,indirect --track-origins=yes --quiet)
    M=(--model mlp:784-32-10 --quiet)
    run() { # expected exit code, name, args...
        local want=$1 name=$2
        shift 2
        echo "== valgrind: parity $name"
        "${VG[@]}" "$B/parity" "$@" >"$T/out" 2>"$T/err"
        local rc=$?
        if [ $rc != "$want" ]; then
            echo "valgrind: parity $name: exit $rc (expected $want; 99: memcheck errors)" >&2
            cat "$T/err" >&2
            bad=1
        fi
    }
    set +e
    run 0 "train serial + checkpoints + log + save" train "${M[@]}" --steps 6 --checkpoint-dir "$T/ck" \
        --checkpoint-every 3 --log "$T/l.jsonl" --save "$T/w.npz" --json
    run 0 "train --resume" train "${M[@]}" --steps 9 --resume "$T/ck" --log "$T/l.jsonl" --json
    run 0 "train omp --threads 2" train "${M[@]}" --trainer omp --threads 2 --steps 4
    run 3 "train stopped by NaN" train "${M[@]}" --steps 4 --lr 1e20
    run 3 "train with a damaged weights file" train "${M[@]}" --steps 1 --init-load /dev/null
    set -e
    rm -rf "$T"
    ;;
*)
    echo "ci/sanitize.sh: unknown part '$part' (asan, tsan, valgrind)" >&2
    exit 2
    ;;
esac
done
[ $bad = 0 ] && echo "ci/sanitize.sh: ${parts[*]}: clean" || { echo "ci/sanitize.sh: FAILED" >&2; exit 1; }
