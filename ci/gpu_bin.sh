#!/usr/bin/env bash
# Puts together what ci/gpu.sh takes to a GPU machine, from a CUDA build
# (cmake -DPARITY_CUDA=ON): DEST/ gets parity, test_cuda, libpar_cuda.a,
# cuda_kernels.ptx, COMMIT (the source's commit, "-dirty" when its tracked
# files differ from it) and lib/ with the shared libraries the GPU machine
# lacks (libzip, libsodium; ci/gpu.sh puts lib/ on LD_LIBRARY_PATH). With
# DATA, DATA/ gets the datasets ci/gpu.sh reads, gzipped (about 41 MB):
# fashion-mnist and mnist, each the four IDX files. Not a test; nothing here
# runs the binaries. Usage: ci/gpu_bin.sh BUILD DEST [DATA]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: ci/gpu_bin.sh BUILD DEST [DATA]" >&2; exit 2; }
BUILD=$1
DEST=$2
DATA=${3:-}
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
ptx=$BUILD/CMakeFiles/par_cuda_ptx.dir/src/cuda/cuda_kernels.ptx
for f in "$BUILD/parity" "$BUILD/tests/gpu/test_cuda" "$BUILD/libpar_cuda.a" "$ptx"; do
    [ -f "$f" ] || { echo "ci/gpu_bin.sh: $f: missing (CUDA builds have it)" >&2; exit 1; }
done
mkdir -p "$DEST/lib"
cp "$BUILD/parity" "$BUILD/tests/gpu/test_cuda" "$BUILD/libpar_cuda.a" "$ptx" "$DEST/"
[ -f "$BUILD/tests/mpi/test_mpi_cnn" ] && cp "$BUILD/tests/mpi/test_mpi_cnn" "$DEST/"   # --ranks
# Without their debug sections (the device code stays): so BIN, a BASE build
# and the datasets travel together within a device call's 64 MiB.
strip "$DEST/parity" "$DEST/test_cuda"
[ -f "$DEST/test_mpi_cnn" ] && strip "$DEST/test_mpi_cnn"
commit=$(git -C "$SRC" rev-parse --short=12 HEAD)
git -C "$SRC" diff --quiet HEAD || commit+=-dirty
echo "$commit" > "$DEST/COMMIT"
for lib in libzip.so.4 libsodium.so.23; do
    path=$(ldd "$BUILD/parity" | awk -v l="$lib" '$1 == l { print $3 }')
    [ -n "$path" ] || { echo "ci/gpu_bin.sh: parity does not load $lib" >&2; exit 1; }
    cp -L "$path" "$DEST/lib/$lib"
done
if [ -n "$DATA" ]; then
    root=${PARITY_DATA:-$HOME/.cache/parity/data}
    for ds in fashion-mnist mnist; do
        mkdir -p "$DATA/$ds"
        for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
            t10k-labels-idx1-ubyte; do
            if [ -f "$root/$ds/$f.gz" ]; then
                cp "$root/$ds/$f.gz" "$DATA/$ds/"
            else
                gzip -c "$root/$ds/$f" > "$DATA/$ds/$f.gz"
            fi
        done
    done
fi
du -sh "$DEST" ${DATA:+"$DATA"}
