#!/usr/bin/env bash
# Fuzzes parity's parsers with libFuzzer (clang, ASan+UBSan): IDX and
# CIFAR-10 (raw and gzip), .npz/.npy, model spec strings, verify suite files, checkpoint
# metadata and folders, the CLI's flag parser, and minisign signature and
# public-key files (tests/fuzz/). Each harness runs FUZZ_SECONDS (default 60) from a
# small generated seed corpus; any crash, leak, UB report or hang (> 10 s
# per input) fails the script and leaves the input under build-fuzz/artifacts/.
# Usage: ci/fuzz.sh [harness ...]   e.g. FUZZ_SECONDS=10 ci/fuzz.sh fuzz_idx
# ci/test.sh runs it with FUZZ_SECONDS=10. Needs root for apt-get once.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
all=(fuzz_idx fuzz_npz fuzz_model fuzz_suite fuzz_ckpt fuzz_cli fuzz_sign)
harnesses=("$@")
if [ $# -eq 0 ]; then harnesses=("${all[@]}"); fi

# clang with libFuzzer (libclang-rt-14-dev) and libomp for OpenMP under clang.
missing=()
for p in clang libclang-rt-14-dev libomp-14-dev python3; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "ci/fuzz.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

B=build-fuzz
CC=clang cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_FUZZ=ON -DPARITY_MPI=OFF \
    >/dev/null
cmake --build "$B" -j"$(nproc)" --target "${harnesses[@]}" parity >/dev/null

# Seeds: small valid inputs of every format, generated (nothing checked in).
S="$B/seeds"
rm -rf "$S"
mkdir -p "$S"/{fuzz_idx,fuzz_npz,fuzz_model,fuzz_suite,fuzz_ckpt,fuzz_cli,fuzz_sign} "$B/artifacts" "$B/corpus"
python3 - "$S" <<'PY'
import gzip, io, os, struct, sys, zipfile
S = sys.argv[1]
def idx(dims, payload):
    return struct.pack('>I', 0x0800 | len(dims)) + b''.join(struct.pack('>I', n) for n in dims) + payload
im = idx((2, 2, 2), bytes(range(8)))
lb = idx((2,), bytes([3, 9]))
seeds = {'im': b'\0' + im, 'lb': b'\1' + lb, 'imgz': b'\0' + gzip.compress(im),
         'lbgz': b'\1' + gzip.compress(lb), 'im2gz': b'\0' + gzip.compress(im[:10]) + gzip.compress(im[10:])}
for k, v in seeds.items(): open(f'{S}/fuzz_idx/{k}', 'wb').write(v)
cifar = bytes([3]) + bytes(i % 256 for i in range(3072))   # one CIFAR-10 record
open(f'{S}/fuzz_idx/cifar', 'wb').write(b'\2' + cifar + cifar)
open(f'{S}/fuzz_idx/cifargz', 'wb').write(b'\2' + gzip.compress(cifar))
def npy(shape, descr='<f4', nbytes=None):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h = d + ' ' * ((64 - (10 + len(d) + 1) % 64) % 64) + '\n'
    n = nbytes if nbytes is not None else 4 * eval('1*' + '*'.join(map(str, eval(shape) or (1,))))
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + bytes(n)
for name, comp in (('stored', zipfile.ZIP_STORED), ('deflated', zipfile.ZIP_DEFLATED)):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', comp) as z:
        z.writestr('layer0.weight.npy', npy('(2, 3)'))
        z.writestr('layer0.bias.npy', npy('(2,)'))
    open(f'{S}/fuzz_npz/{name}', 'wb').write(b'\0' + b.getvalue())
open(f'{S}/fuzz_npz/member', 'wb').write(b'\1' + npy('(2, 3)'))
open(f'{S}/fuzz_npz/member8', 'wb').write(b'\1' + npy('(3,)', '<f8', 24))
open(f'{S}/fuzz_npz/empty', 'wb').write(b'\0' + b'PK\x05\x06' + bytes(18))
for i, s in enumerate(['mlp:784-256-128-10', 'mlp:3-2', 'mlp:1-2-3-4-5', 'relu', 'tanh',
                       'mlp:16777216-1']):
    open(f'{S}/fuzz_model/{i}', 'w').write(s)
for i, a in enumerate([['--epochs', '3', '--lr=0.5', '--json'], ['--seed', '18446744073709551615'],
                       ['--dataset', 'x', 'pos', '--epochs=1000000000'], ['--lr', '1e-300']]):
    open(f'{S}/fuzz_cli/{i}', 'wb').write(b'\0'.join(s.encode() for s in a))
# A tiny dataset for a real run that writes a checkpoint.
os.makedirs(f'{S}/data', exist_ok=True)
for name, n in (('train', 40), ('t10k', 10)):
    open(f'{S}/data/{name}-images-idx3-ubyte', 'wb').write(idx((n, 2, 2), bytes(i % 256 for i in range(4 * n))))
    open(f'{S}/data/{name}-labels-idx1-ubyte', 'wb').write(idx((n,), bytes(i % 10 for i in range(n))))
PY
cp verify/suites/* "$S/fuzz_suite/" 2>/dev/null || true
"$B/parity" train --dataset "$S/data" --model mlp:4-3-10 --steps 3 --batch 8 \
    --checkpoint-dir "$S/ck" --checkpoint-every 3 --log "$S/l.jsonl" >/dev/null
for f in "$S"/ck/ckpt-*.json; do
    { printf '\0'; cat "$f"; } >"$S/fuzz_ckpt/even"
    { printf '\1'; cat "$f"; } >"$S/fuzz_ckpt/odd"
done
cp "$S"/ck/ckpt-*.npz "$S/fuzz_npz/real.npz.seed" && { printf '\0'; cat "$S/fuzz_npz/real.npz.seed"; } >"$S/fuzz_npz/real" && rm "$S/fuzz_npz/real.npz.seed"

# A valid minisign key and signature, made by the harness itself.
if [[ " ${harnesses[*]} " == *" fuzz_sign "* ]]; then
    FUZZ_SEED_OUT="$S/fuzz_sign" "$B/tests/fuzz/fuzz_sign" -runs=0 >/dev/null 2>&1 || true
fi

# Run. libFuzzer's own leak and UB checks are on (ASan+UBSan, halt on error).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
bad=0
printf '%-11s %12s %9s %8s %s\n' harness executions exec/s crashes corpus >"$B/fuzz-summary.txt"
for h in "${harnesses[@]}"; do
    mkdir -p "$B/corpus/$h"
    log="$B/$h.log"
    set +e
    quiet=()
    [ "$h" = fuzz_cli ] && quiet=(-close_fd_mask=2)   # its target prints one line per bad flag
    "$B/tests/fuzz/$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        "${quiet[@]}" -artifact_prefix="$B/artifacts/$h-" "$B/corpus/$h" "$S/$h" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    crashes=$(ls "$B/artifacts" | grep -c "^$h-" || true)
    printf '%-11s %12s %9s %8s %s\n' "$h" "${execs:-?}" "${rate:-?}" "$crashes" \
        "$(ls "$B/corpus/$h" | wc -l)" >>"$B/fuzz-summary.txt"
    if [ $rc != 0 ] || [ "$crashes" != 0 ]; then
        bad=1
        echo "ci/fuzz.sh: $h failed (exit $rc); its report:" >&2
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -n 20 >&2
    fi
done
rm -rf /dev/shm/parity-fuzz-* /tmp/parity-fuzz-* 2>/dev/null || true
cat "$B/fuzz-summary.txt"
[ $bad = 0 ] && echo "ci/fuzz.sh: no crash in ${#harnesses[@]} harnesses x ${secs}s" || exit 1
