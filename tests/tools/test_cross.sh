#!/usr/bin/env bash
# The same bits on every build (docs/contract.md, "Same bits everywhere" in the
# README): builds the `parity` binary several ways into BUILD/cross-<name>,
# runs one short training matrix on each, and holds every run to the x86-64
# reference (`--trainer reference` of the binary under test, PATH/TO/parity):
# every step's XXH3-128 weight and loss digests (`--log`, compared by `parity
# bisect --logs`) and the summary's final loss, validation and test loss and
# accuracy and weights_sha256 (`--json`), all bitwise.
#   gcc:     gcc -O2 and -O3 (the CPU's best kernels, AVX-512VL or AVX2+FMA, and -O2
#            with PARITY_KERNELS=portable, and =avx2 where that is not the best),
#            gcc -O3 -march=x86-64-v3 (the whole program built for AVX2+FMA);
#   clang:   clang -O2 and -O3;
#   aarch64: gcc-aarch64-linux-gnu -O2 and -O3 (cmake/aarch64-linux-gnu.cmake)
#            under qemu-aarch64, NEON kernels and PARITY_KERNELS=portable,
#            after test_kernels under qemu (every kernel set against the contract).
# Matrix: the default MLP (sgd) and a CNN with conv, batchnorm and max-pool
# (adam), f32 and f64, serial and omp T=2, STEPS (30) steps on a subset of
# MNIST (2560 training and 512 test records, so that qemu evaluates quickly).
# Where a run parts from the reference, the test names the first differing
# step and the arrays that differ after it (`parity bisect --logs` with the
# weights both sides save after that step), then fails. Skipped (77), with
# the reason, when clang with OpenMP, the aarch64 cross toolchain, its arm64
# libraries or qemu-user are missing (ci/setup.sh --ci installs them).
# Variant builds are MPI-less (the matrix runs serial and omp) and only the
# parity target; they are kept, so a second run rebuilds what changed only.
# Usage: test_cross.sh gcc|clang|aarch64 PATH/TO/parity BUILD_DIR
set -u
. "$(dirname "$0")/../common/test_lib.sh"
PART=$1
P=$2
BUILD=$3
SRC=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${PARITY_CROSS_STEPS:-30}
JOBS=$(nproc)
[ "$JOBS" -gt 2 ] && JOBS=2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_WAIT_POLICY=passive
t_start=$SECONDS

skip() {
    echo "skip: $*"
    exit 77
}

# --- what this part needs ------------------------------------------------------
QEMU=()
case $PART in
gcc) ;;
clang)
    command -v clang >/dev/null || skip "clang is not installed (ci/setup.sh --ci installs clang and libomp-14-dev)"
    echo 'int main(void) { return 0; }' >"$T/omp.c"
    clang -fopenmp "$T/omp.c" -o "$T/omp" 2>/dev/null ||
        skip "clang cannot link OpenMP programs (ci/setup.sh --ci installs libomp-14-dev)"
    ;;
aarch64)
    command -v aarch64-linux-gnu-gcc >/dev/null ||
        skip "no aarch64 cross compiler (gcc-aarch64-linux-gnu; ci/setup.sh --ci installs it)"
    q=$(command -v qemu-aarch64 || command -v qemu-aarch64-static) ||
        skip "no qemu-aarch64 (qemu-user; ci/setup.sh --ci installs it)"
    # The cross libc's loader with the cross libc (cmake/aarch64-linux-gnu.cmake says why).
    QEMU=("$q" -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
    missing=$(PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig pkg-config --print-errors \
        --exists zlib mpfr jansson libzip libsodium 2>&1 | head -n 1)
    [ -z "$missing" ] || skip "arm64 libraries missing ($missing; ci/setup.sh --ci installs them)"
    [ -e /usr/lib/aarch64-linux-gnu/libxxhash.so ] ||
        skip "arm64 libxxhash missing (libxxhash-dev:arm64; ci/setup.sh --ci installs it)"
    ;;
*)
    echo "usage: test_cross.sh gcc|clang|aarch64 PATH/TO/parity BUILD_DIR" >&2
    exit 2
    ;;
esac

# --- a small MNIST (Fashion-MNIST if MNIST is missing) --------------------------
DATA=
for d in mnist fashion-mnist; do
    for root in "${PARITY_DATA:-}" "$HOME/.cache/parity/data" /usr/share/datasets; do
        [ -n "$root" ] && [ -e "$root/$d/train-images-idx3-ubyte" -o -e "$root/$d/train-images-idx3-ubyte.gz" ] &&
            { DATA=$root/$d; break 2; }
    done
done
[ -n "$DATA" ] || skip "no MNIST or Fashion-MNIST (data/fetch.sh)"
/usr/bin/python3 - "$DATA" "$T/data" <<'PY' || { echo "cannot cut a subset of $DATA"; exit 1; }
# The first N records of each IDX file (header count rewritten): raw or .gz.
import gzip, os, struct, sys
src, dst = sys.argv[1:]
os.makedirs(dst)
for name, n in (("train", 2560), ("t10k", 512)):
    for kind, dims in (("images-idx3", 3), ("labels-idx1", 1)):
        f = "%s-%s-ubyte" % (name, kind)
        p = os.path.join(src, f)
        raw = open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
        shape = struct.unpack(">%dI" % dims, raw[4:4 + 4 * dims])
        per = 1
        for s in shape[1:]:
            per *= s
        head = raw[:4] + struct.pack(">I", n) + raw[8:4 + 4 * dims]
        open(os.path.join(dst, f), "wb").write(head + raw[4 + 4 * dims:4 + 4 * dims + n * per])
PY

# --- the matrix ----------------------------------------------------------------
declare -A CASE
CASE[mlp-f32]="--dtype f32 --optim sgd --lr 0.01"
CASE[mlp-f64]="--dtype f64 --optim sgd --lr 0.01"
CNN="--model cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10 --optim adam --lr 0.001"
CASE[cnn-f32]="--dtype f32 $CNN"
CASE[cnn-f64]="--dtype f64 $CNN"
KEYS=(mlp-f32 mlp-f64 cnn-f32 cnn-f64)
declare -A TRAINER
TRAINER[serial]="--trainer serial"
TRAINER[omp2]="--trainer omp --threads 2 --fixed-threads"
# The summary fields compared bitwise (printed with 17 significant digits).
FIELDS='"(final_loss|val_loss|val_accuracy|test_loss|test_accuracy|weights_sha256)": *[^,}]*'

# train TAG KERNELS QEMU BIN STEPS ARGS...: one run, under qemu when QEMU is 1,
# with PARITY_KERNELS=KERNELS ("": the best set): step log $T/TAG.jsonl,
# summary $T/TAG.json, its compared fields $T/TAG.fields.
train() {
    local tag=$1 kern=$2 emu=$3 bin=$4 steps=$5
    shift 5
    local launch=()
    [ "$emu" = 1 ] && launch=("${QEMU[@]}")
    PARITY_KERNELS=$kern timeout -k 10 300 "${launch[@]}" "$bin" train --dataset "$T/data" \
        --steps "$steps" --seed 42 --batch 64 --quiet --json --log "$T/$tag.jsonl" "$@" \
        >"$T/$tag.json" 2>"$T/$tag.err" </dev/null
    local rc=$?
    grep -Eo "$FIELDS" "$T/$tag.json" >"$T/$tag.fields"
    return $rc
}

# The reference: `--trainer reference` of the binary under test (x86-64).
for k in "${KEYS[@]}"; do
    # shellcheck disable=SC2086
    train "ref-$k" "" 0 "$P" "$STEPS" --trainer reference ${CASE[$k]} ||
        { cat "$T/ref-$k.err"; echo "the reference run of $k failed"; exit 1; }
done

# diagnose TAG KEY KERNELS QEMU BIN TRAINER: run TAG parted from the reference
# of KEY. Names the first differing step (parity bisect --logs), then runs
# both sides again to that step, saves their weights and compares them array
# by array.
diagnose() {
    local tag=$1 k=$2 kern=$3 emu=$4 bin=$5 tr=$6 step
    step=$("$P" bisect --logs "$T/ref-$k.jsonl" "$T/$tag.jsonl" --json 2>/dev/null |
        grep -Eo '"step": *[0-9]+' | grep -Eo '[0-9]+$')
    if [ -z "$step" ]; then
        echo "    every step's digests agree; the summaries differ (reference <, run >):"
        diff "$T/ref-$k.fields" "$T/$tag.fields" | grep '^[<>]' | sed 's/^/    /'
        return
    fi
    # shellcheck disable=SC2086
    train "ref-$k.to$step" "" 0 "$P" "$step" --trainer reference ${CASE[$k]} \
        --save "$T/ref-$k.to$step.npz"
    # shellcheck disable=SC2086
    train "$tag.to$step" "$kern" "$emu" "$bin" "$step" ${TRAINER[$tr]} ${CASE[$k]} \
        --save "$T/$tag.to$step.npz"
    "$P" bisect --logs "$T/ref-$k.jsonl" "$T/$tag.jsonl" "$T/ref-$k.to$step.npz" \
        "$T/$tag.to$step.npz" 2>&1 | sed 's/^/    /'
}

# --- the builds ------------------------------------------------------------------
# build NAME COMPILER|aarch64 BUILD_TYPE CFLAGS [TARGETS...]: BUILD/cross-NAME,
# MPI-less and CUDA-less (the host's bits are what it compares); "aarch64" cross-compiles with cmake/aarch64-linux-gnu.cmake.
build() {
    local name=$1 cc=$2 bt=$3 cflags=$4 t0=$SECONDS
    shift 4
    local dir=$BUILD/cross-$name args
    args=(-S "$SRC" -B "$dir" -DCMAKE_BUILD_TYPE="$bt" -DPARITY_MPI=OFF -DPARITY_CUDA=OFF
          -DCMAKE_C_FLAGS="$cflags")
    if [ "$cc" = aarch64 ]; then
        args+=(-DCMAKE_TOOLCHAIN_FILE="$SRC/cmake/aarch64-linux-gnu.cmake")
    else
        args+=(-DCMAKE_C_COMPILER="$cc")
    fi
    if ! cmake "${args[@]}" >"$T/build-$name.log" 2>&1 ||
        ! cmake --build "$dir" -j"$JOBS" --target parity "$@" >>"$T/build-$name.log" 2>&1; then
        tail -n 30 "$T/build-$name.log"
        check "build $name ($cc $bt${cflags:+ $cflags})" false
        return 1
    fi
    check "build $name ($cc $bt${cflags:+ $cflags}; $((SECONDS - t0)) s)" true
}

# Configs: NAME|KERNELS|QEMU|BIN, each run on the whole matrix.
CONFIGS=()
case $PART in
gcc)
    CONFIGS+=("this build||0|$P")
    build gcc-O2 gcc RelWithDebInfo "" &&
        CONFIGS+=("gcc-O2||0|$BUILD/cross-gcc-O2/parity" "gcc-O2|portable|0|$BUILD/cross-gcc-O2/parity")
    # AVX2's set too where it is not the best (the AVX-512VL one is).
    if [ "$(PARITY_KERNELS=avx2 "$P" version 2>/dev/null | sed -n 's/^kernels: *//p' | cut -d' ' -f1)" = avx2+fma ] &&
        ! "$P" version 2>/dev/null | grep -Eq '^kernels: +avx2\+fma'; then
        CONFIGS+=("gcc-O2|avx2|0|$BUILD/cross-gcc-O2/parity")
    fi
    build gcc-O3 gcc Release "" && CONFIGS+=("gcc-O3||0|$BUILD/cross-gcc-O3/parity")
    # The whole program for AVX2+FMA (x86-64-v3) where this CPU runs it: the
    # compiler may use fma anywhere it is written, never where it is not.
    if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo &&
        grep -qw movbe /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
        build gcc-O3-v3 gcc Release "-march=x86-64-v3" &&
            CONFIGS+=("gcc-O3-v3||0|$BUILD/cross-gcc-O3-v3/parity")
    else
        echo "note: this CPU lacks x86-64-v3; gcc -O3 -march=x86-64-v3 not run"
    fi
    ;;
clang)
    build clang-O2 clang RelWithDebInfo "" && CONFIGS+=("clang-O2||0|$BUILD/cross-clang-O2/parity")
    build clang-O3 clang Release "" && CONFIGS+=("clang-O3||0|$BUILD/cross-clang-O3/parity")
    ;;
aarch64)
    if build arm64-O2 aarch64 RelWithDebInfo "" test_kernels; then
        # Every kernel set this (emulated) CPU runs against the contract loops.
        timeout 600 "${QEMU[@]}" "$BUILD/cross-arm64-O2/tests/unit/test_kernels" >"$T/tk.out" 2>&1
        rc=$?
        grep -E "kernel sets available|passed" "$T/tk.out"
        check "test_kernels under qemu-aarch64: every set bitwise (neon and portable)" \
            test $rc = 0 -a "$(grep -c '^neon .* ok$' "$T/tk.out")" -gt 0
        CONFIGS+=("arm64-O2||1|$BUILD/cross-arm64-O2/parity" "arm64-O2|portable|1|$BUILD/cross-arm64-O2/parity")
    fi
    build arm64-O3 aarch64 Release "" && CONFIGS+=("arm64-O3||1|$BUILD/cross-arm64-O3/parity")
    ;;
esac
t_built=$SECONDS

# --- runs and comparisons ------------------------------------------------------------
declare -A ROW
for cfg in "${CONFIGS[@]}"; do
    IFS='|' read -r name kern emu bin <<<"$cfg"
    t0=$SECONDS
    equal=0 runs=0 kname=
    for k in "${KEYS[@]}"; do
        for tr in serial omp2; do
            tag="$(echo "$name-$kern" | tr -c 'A-Za-z0-9.\n-' _)-$k-$tr"
            runs=$((runs + 1))
            # shellcheck disable=SC2086
            if ! train "$tag" "$kern" "$emu" "$bin" "$STEPS" ${TRAINER[$tr]} ${CASE[$k]}; then
                check "$name ${kern:+(PARITY_KERNELS=$kern) }$k $tr: runs" false
                head -n 5 "$T/$tag.err"
                continue
            fi
            kname=$(grep -Eo '"kernels": *"[^"]*"' "$T/$tag.json" | grep -Eo '"[^"]*"$' | tr -d '"')
            "$P" bisect --logs "$T/ref-$k.jsonl" "$T/$tag.jsonl" >/dev/null 2>&1
            steps_ok=$?
            if [ "$steps_ok" = 0 ] && cmp -s "$T/ref-$k.fields" "$T/$tag.fields" &&
                [ "$(wc -l <"$T/$tag.fields")" = 6 ]; then
                equal=$((equal + 1))
                check "$name $kname $k $tr: $STEPS steps' digests and the summary equal the reference" true
            else
                check "$name $kname $k $tr: $STEPS steps' digests and the summary equal the reference" false
                diagnose "$tag" "$k" "$kern" "$emu" "$bin" "$tr"
            fi
        done
    done
    launch=()
    [ "$emu" = 1 ] && launch=("${QEMU[@]}")
    "${launch[@]}" "$bin" version >"$T/version" 2>/dev/null
    compiler=$(sed -n 's/^compiler: *//p' "$T/version")
    flags=$(sed -n 's/^flags: *//p' "$T/version" | tr ' ' '\n' | grep -v '^-W' | tr '\n' ' ')
    isa=x86-64
    [ "$emu" = 1 ] && isa="aarch64 (qemu)"
    ROW[$cfg]="| $name | $compiler | ${flags% } | $isa | $kname | $equal/$runs | $((SECONDS - t0)) s |"
done

echo
echo "| build | compiler | flags | ISA | kernels | runs equal to the reference | time |"
echo "|---|---|---|---|---|---|---|"
for cfg in "${CONFIGS[@]}"; do echo "${ROW[$cfg]}"; done
echo
echo "Reference digests ($STEPS steps; every run above that is equal has them):"
for k in "${KEYS[@]}"; do
    sha=$(grep -Eo '"weights_sha256": *"[0-9a-f]*"' "$T/ref-$k.json" | grep -Eo '[0-9a-f]{64}')
    xxh=$(grep '"type":"step"' "$T/ref-$k.jsonl" | tail -n 1 | grep -Eo '"weights_xxh128":"[0-9a-f]*"' |
        grep -Eo '[0-9a-f]{32}')
    echo "  $k: weights_sha256 $sha, step $STEPS weights_xxh128 $xxh"
done
echo "times: builds $((t_built - t_start)) s, runs $((SECONDS - t_built)) s, total $((SECONDS - t_start)) s"
finish
