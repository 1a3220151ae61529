#!/usr/bin/env bash
# Faults and bad input for `parity train`: NaN/Inf stops the run naming the
# step, tensor and element (exit 3, last good checkpoint kept), an MPI rank
# killed with SIGKILL ends the job within 30 s naming the rank, with no
# process left and the checkpoints intact, an unwritable folder and a full
# disk give a clear error and leave no half-written file, and malformed
# files (IDX raw and gzip, .npz/.npy, checkpoints), model specs and flags
# are rejected with one line naming the file or flag (exit 2 or 3), never a
# crash or a hang. Usage: test_faults.sh PATH/TO/parity [nan|mpi|disk|input ...]
# (default: all). Needs fashion-mnist (data/fetch.sh) and python3. ~30 s.
set -u
. "$(dirname "$0")/../common/test_lib.sh"
EXPECT_TIMEOUT=60   # a parity that hangs on bad input fails here
P=$1
shift
parts=${*:-nan mpi disk input}
T=$(mktemp -d)
MNT=()
cleanup() {
    local m
    for m in "${MNT[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMPI_MCA_btl_vader_single_copy_mechanism=none

have_mpi() { "$P" train --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null; }

# special_dir KIND: sets SD to a folder where writing fails, KIND = ro
# (read-only) or full (64 KiB), or to "" (saying why) if this machine cannot.
special_dir() {
    local kind=$1 dir="$T/mnt-$1"
    mkdir -p "$dir"
    local o=size=64k
    [ "$kind" = ro ] && o=ro,size=64k
    SD=
    if mount -t tmpfs -o "$o" tmpfs "$dir" 2>/dev/null; then
        MNT+=("$dir")
        SD=$dir
    else
        echo "$kind: skipped: cannot mount a tmpfs here (needs root with mount rights)"
    fi
}

for part in $parts; do
    case $part in
    nan)
        d="$T/nan"
        mkdir -p "$d"
        expect 3 'step 3 \(epoch 0\): loss = -?nan; gradient layer0\.weight\[[0-9]+\]\[[0-9]+\] = -?nan; weight layer0\.weight\[[0-9]+\]\[[0-9]+\] = -?nan after the update: not finite' \
            train --steps 50 --lr 1e6 --checkpoint-dir "$d/ck" --checkpoint-every 1 --log "$d/l.jsonl"
        check "NaN: hint names the last good checkpoint" \
            grep -q "^hint: lower --lr; the weights of the last good checkpoint (step 2) are $d/ck/ckpt-0000000002.npz" "$T/err"
        check "NaN: checkpoints of steps 1 and 2 kept, none of step 3" \
            test -e "$d/ck/ckpt-0000000002.json" -a ! -e "$d/ck/ckpt-0000000003.json"
        check "NaN: the log holds the 2 good steps" test "$(grep -c '"type":"step"' "$d/l.jsonl")" = 2
        # The last good checkpoint is whole: resuming it up to its own step works.
        "$P" train --steps 2 --lr 1e6 --resume "$d/ck" --json >"$T/out" 2>"$T/err" </dev/null
        rc=$?   # before any $(...) below, which would set $? to its own status
        check "NaN: last good checkpoint loads ($(head -c 200 "$T/err"))" test $rc = 0
        expect 3 'step [0-9]+ \(epoch 0\): loss = inf: not finite' train --steps 50 --lr 100
        # Weights overflow while the loss (computed before the update) is finite:
        # caught by the scan after the last step, and before a checkpoint.
        expect 3 'step 1 \(epoch 0\): weight layer[0-9]\.[a-z]+\[[0-9]+\](\[[0-9]+\])? = -?(inf|nan) after the update: not finite' \
            train --steps 1 --lr 1e40
        expect 3 'step 1 \(epoch 0\): weight layer[0-9]\.[a-z]+\[[0-9]+\](\[[0-9]+\])? = -?(inf|nan): not finite; no checkpoint written' \
            train --steps 3 --lr 1e40 --check-every 0 --checkpoint-dir "$d/ck2" --checkpoint-every 1
        check "no checkpoint of the bad step" test ! -e "$d/ck2/ckpt-0000000001.json"
        expect 3 'step 2 \(epoch 0\): loss = -?nan.*not finite' train --steps 50 --lr 1e300 --dtype f64
        if have_mpi; then
            expect 3 'step 3 \(epoch 0\): loss = -?nan.*not finite' train --trainer mpi --ranks 2 --steps 50 --lr 1e6
            expect 3 'step 3 \(epoch 0\): loss = -?nan.*not finite' train --trainer root --ranks 2 --mode fast --steps 50 --lr 1e6
        fi
        if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
            "$P" train --steps 1 --init-save "$d/w.npz" >/dev/null 2>&1 </dev/null
            /usr/bin/python3 - "$d/w.npz" "$d/bad.npz" <<'PY'
import sys, numpy as np
z = dict(np.load(sys.argv[1]))
z['layer1.bias'][7] = np.inf
np.savez(sys.argv[2], **z)
PY
            expect 3 "bad.npz: layer1.bias\[7\] = inf is not finite" train --steps 1 --init-load "$d/bad.npz"
        fi
        ;;
    mpi)
        if ! have_mpi; then echo "mpi: skipped (no MPI build or no mpirun)"; continue; fi
        d="$T/mpi"
        mkdir -p "$d"
        setsid "$P" train --trainer mpi --ranks 2 --epochs 6 --steps 5000 --quiet --checkpoint-dir "$d/ck" \
            --checkpoint-every 50 --log "$d/l.jsonl" >/dev/null 2>"$d/err" </dev/null &
        pid=$!
        for i in $(seq 1 3000); do [ -e "$d/ck/ckpt-0000000100.json" ] && break; sleep 0.01; done
        # rank 1: the newest of the two rank processes of this session
        r1=$(ps -eo pid=,sid=,args= | awk -v s=$pid '$2 == s && $3 ~ /parity$/ && $4 == "train" {print $1}' | sort -n | tail -n 1)
        t0=$(date +%s)
        kill -9 "$r1"
        for i in $(seq 1 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
        dt=$(($(date +%s) - t0))
        alive=$(kill -0 $pid 2>/dev/null && echo yes || echo no)
        [ $alive = yes ] && kill -9 $(ps -eo pid=,sid= | awk -v s=$pid '$2 == s {print $1}')
        wait $pid
        rc=$?
        check "rank killed: the job ended in ${dt}s (<= 30 s)" test $alive = no -a $dt -le 30
        check "rank killed: exit 3 (got $rc)" test $rc = 3
        check "rank killed: the error names rank 1 ($(grep -v '^hint' "$d/err" | head -c 300))" \
            grep -q '^parity train: MPI rank 1 died (signal 9, Killed); mpirun ended the job' "$d/err"
        check "rank killed: the hint says how to resume" grep -q "^hint: continue from the last checkpoint: parity train --resume $d/ck" "$d/err"
        sleep 0.5
        check "rank killed: no process of the job left" \
            test "$(ps -eo sid=,stat= | awk -v s=$pid '$1 == s && $2 !~ /^Z/' | wc -l)" = 0
        newest=$(ls "$d/ck" | sed -n 's/^ckpt-0*\([0-9][0-9]*\)\.json$/\1/p' | sort -n | tail -n 1)
        "$P" train --steps "${newest:-1}" --resume "$d/ck" --log "$d/l.jsonl" >/dev/null 2>"$d/err2" </dev/null
        rc=$?
        check "rank killed: checkpoints intact, newest ($newest) resumes with its log ($(head -c 200 "$d/err2"))" \
            test $rc = 0 -a "$(grep -c '"type":"step"' "$d/l.jsonl")" = "${newest:-x}"
        ;;
    disk)
        d="$T/disk"
        mkdir -p "$d"
        special_dir ro
        ro=$SD
        if [ -n "$ro" ]; then
            # Found before the dataset is read (tests/cli/test_cli.sh has the other cases).
            expect 2 "--checkpoint-dir $ro/ck: cannot write in folder $ro: Read-only file system" train --steps 5 --checkpoint-dir "$ro/ck"
            expect 2 "--log $ro/l.jsonl: cannot write in folder $ro: Read-only file system" train --steps 5 --log "$ro/l.jsonl"
            expect 2 "--save $ro/w.npz: cannot write in folder $ro: Read-only file system" train --steps 5 --save "$ro/w.npz"
            check "read-only: nothing written" test -z "$(ls -A "$ro")"
        fi
        special_dir full
        full=$SD
        if [ -n "$full" ]; then
            expect 3 "cannot write $full/ck/ckpt-0000000005.npz: .*No space left on device" \
                train --steps 20 --checkpoint-dir "$full/ck" --checkpoint-every 5
            check "disk full: no checkpoint file, no temp file" test -z "$(ls "$full/ck")"
            expect 3 "cannot write $full/w.npz: .*No space left on device" train --steps 5 --save "$full/w.npz"
            expect 3 "cannot write log $full/l.jsonl: No space left on device" \
                train --steps 400 --log "$full/l.jsonl"
            check "disk full: no other file left" test -z "$(ls "$full" | grep -v '^ck$' | grep -v '^l.jsonl$')"
            check "disk full: the log keeps whole lines only" \
                test ! -s "$full/l.jsonl" -o "$(tail -c 1 "$full/l.jsonl" | od -An -c | tr -d ' ')" = '\n'
        fi
        # Without mount rights too: a file size limit makes writes fail (EFBIG)
        # like a full disk. The checkpoints of steps 5 and 10 fit in 2.5 MB,
        # the third does not fit with them... each file is 0.9 MB: limit 1 MB
        # lets every checkpoint be written and the --save of 5 MB model fail.
        (
            trap '' XFSZ
            ulimit -f 600
            timeout 60 "$P" train --steps 20 --checkpoint-dir "$d/ck" --checkpoint-every 5 \
                >/dev/null 2>"$d/err" </dev/null
            echo $? >"$d/rc"
        )
        check "file size limit: exit 3 ($(head -c 200 "$d/err"))" test "$(cat "$d/rc")" = 3
        check "file size limit: 'File too large' named" grep -q "cannot write $d/ck/ckpt-0000000005.npz: .*File too large" "$d/err"
        check "file size limit: no half-written file" test -z "$(ls "$d/ck" | grep -v '^\.lock$')"
        # An unwritable place for the folder itself.
        expect 2 "--checkpoint-dir $d/no/such/ck: folder $d/no/such does not exist" train --steps 5 --checkpoint-dir "$d/no/such/ck"
        : >"$d/afile"
        expect 2 "--checkpoint-dir $d/afile: not a folder" train --steps 5 --checkpoint-dir "$d/afile"
        ;;
    input)
        # Output files are written whole by renaming a temporary file over them:
        # never over a device (as root that would replace /dev/null itself).
        expect 2 "/dev/null: not a regular file" train --steps 1 --save /dev/null
        expect 2 "/dev/null: not a regular file" train --steps 1 --log /dev/null
        check "/dev/null is still a character device" test -c /dev/null
        d="$T/in"
        mkdir -p "$d"
        # A small valid dataset (IDX, raw), then one damage per copy.
        /usr/bin/python3 - "$d/good" <<'PY'
import os, struct, sys, random
d = sys.argv[1]; os.makedirs(d)
random.seed(1)
def idx(path, dims, data):
    with open(path, 'wb') as f:
        f.write(struct.pack('>I', 0x0800 | len(dims)))
        for n in dims: f.write(struct.pack('>I', n))
        f.write(data)
for name, n in (('train', 200), ('t10k', 50)):
    idx(f'{d}/{name}-images-idx3-ubyte', (n, 28, 28), bytes(random.randrange(256) for _ in range(n * 784)))
    idx(f'{d}/{name}-labels-idx1-ubyte', (n,), bytes(random.randrange(10) for _ in range(n)))
PY
        G="$d/good"
        expect 0 '^$' train --dataset "$G" --steps 3 --quiet
        mk() { rm -rf "$d/$1"; cp -r "$G" "$d/$1"; echo "$d/$1"; }
        x=$(mk trunc); head -c 1000 "$G/train-images-idx3-ubyte" >"$x/train-images-idx3-ubyte"
        expect 3 "$x/train-images-idx3-ubyte: truncated" train --dataset "$x" --steps 1
        x=$(mk magic); printf '\x00\x00\x08\x02' | dd of="$x/t10k-images-idx3-ubyte" conv=notrunc 2>/dev/null
        expect 3 "$x/t10k-images-idx3-ubyte: bad magic" train --dataset "$x" --steps 1
        x=$(mk count); printf '\x00\x00\x00\x05' | dd of="$x/train-labels-idx1-ubyte" bs=1 seek=4 conv=notrunc 2>/dev/null
        expect 3 "$x/train-labels-idx1-ubyte" train --dataset "$x" --steps 1
        x=$(mk label); printf '\x0c' | dd of="$x/train-labels-idx1-ubyte" bs=1 seek=20 conv=notrunc 2>/dev/null
        expect 3 "$x/train-labels-idx1-ubyte: label 12 at record 12 is out of range" train --dataset "$x" --steps 1
        x=$(mk empty); : >"$x/train-labels-idx1-ubyte"
        expect 3 "$x/train-labels-idx1-ubyte: empty file" train --dataset "$x" --steps 1
        x=$(mk huge); printf '\x7f\xff\xff\xff' | dd of="$x/train-images-idx3-ubyte" bs=1 seek=4 conv=notrunc 2>/dev/null
        expect 3 "$x/train-images-idx3-ubyte: truncated" train --dataset "$x" --steps 1
        x=$(mk trail); printf 'xyz' >>"$x/t10k-labels-idx1-ubyte"
        expect 3 "$x/t10k-labels-idx1-ubyte: 3 trailing bytes" train --dataset "$x" --steps 1
        x=$(mk gzcut); gzip -c "$G/train-images-idx3-ubyte" | head -c 3000 >"$x/train-images-idx3-ubyte.gz"; rm "$x/train-images-idx3-ubyte"
        expect 3 "$x/train-images-idx3-ubyte.gz: gzip stream is truncated" train --dataset "$x" --steps 1
        x=$(mk gzbad); { printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x07'; head -c 500 /dev/zero; } >"$x/train-labels-idx1-ubyte.gz"; rm "$x/train-labels-idx1-ubyte"
        # deflate block type 3 (reserved): corrupt whatever follows (random bytes could inflate)
        expect 3 "$x/train-labels-idx1-ubyte.gz: corrupt gzip data" train --dataset "$x" --steps 1
        x=$(mk dims); /usr/bin/python3 -c "
import struct,sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b[:8]+struct.pack('>II',14,56)+b[16:])" "$x/t10k-images-idx3-ubyte"
        expect 3 "$x/t10k-images-idx3-ubyte: images are 14x56" train --dataset "$x" --steps 1
        expect 2 "takes 784 inputs but dataset .* has 784|takes 100 inputs" train --dataset "$G" --model mlp:100-10 --steps 1
        # Weights files.
        "$P" train --dataset "$G" --steps 1 --init-save "$d/w.npz" >/dev/null 2>&1 </dev/null
        # (the damaged copies below are of it: without it an empty file would pass for one)
        check "weights to damage written" test $? = 0 -a -s "$d/w.npz"
        head -c 3000 "$d/w.npz" >"$d/cut.npz"
        expect 3 "$d/cut.npz" train --dataset "$G" --steps 1 --init-load "$d/cut.npz"
        head -c 4000 /dev/urandom >"$d/rand.npz"
        expect 3 "$d/rand.npz: not a zip archive" train --dataset "$G" --steps 1 --init-load "$d/rand.npz"
        : >"$d/empty.npz"
        expect 3 "$d/empty.npz: not a zip archive \(empty file\)" train --dataset "$G" --steps 1 --init-load "$d/empty.npz"
        cp "$d/w.npz" "$d/flip.npz"
        printf 'X' | dd of="$d/flip.npz" bs=1 seek=100000 conv=notrunc 2>/dev/null
        expect 3 "$d/flip.npz: member 'layer0.weight.npy': .*(CRC|crc)" train --dataset "$G" --steps 1 --init-load "$d/flip.npz"
        expect 3 "$d/w.npz: array 'layer0.weight' has shape \(256, 784\), expected \(64, 784\)" \
            train --dataset "$G" --steps 1 --model mlp:784-64-10 --init-load "$d/w.npz"
        expect 3 "cannot read $d: not a regular file" train --dataset "$G" --steps 1 --init-load "$d"
        if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
            /usr/bin/python3 - "$d" <<'PY'
import sys, zipfile, numpy as np, io
d = sys.argv[1]
def npz(name, members):
    with zipfile.ZipFile(f'{d}/{name}', 'w') as z:
        for k, v in members.items(): z.writestr(k, v)
hdr = lambda s: b'\x93NUMPY\x01\x00' + len(s).to_bytes(2, 'little') + s
npz('descr.npz', {'layer0.weight.npy': hdr(b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n") + bytes(8)})
npz('fortran.npz', {'layer0.weight.npy': hdr(b"{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n") + bytes(8)})
npz('short.npz', {'layer0.weight.npy': hdr(b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }\n") + bytes(8)})
npz('hlen.npz', {'layer0.weight.npy': b'\x93NUMPY\x01\x00\xff\xff' + b'{'})
npz('shape.npz', {'layer0.weight.npy': hdr(b"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n")})
npz('notnpy.npz', {'readme.txt': b'hello'})
PY
            expect 3 "$d/descr.npz: member 'layer0.weight.npy'" train --dataset "$G" --steps 1 --init-load "$d/descr.npz"
            expect 3 "$d/fortran.npz: member 'layer0.weight.npy'" train --dataset "$G" --steps 1 --init-load "$d/fortran.npz"
            expect 3 "$d/short.npz: member 'layer0.weight.npy'" train --dataset "$G" --steps 1 --init-load "$d/short.npz"
            expect 3 "$d/hlen.npz: member 'layer0.weight.npy'" train --dataset "$G" --steps 1 --init-load "$d/hlen.npz"
            expect 3 "$d/shape.npz: member 'layer0.weight.npy'" train --dataset "$G" --steps 1 --init-load "$d/shape.npz"
            expect 3 "$d/notnpy.npz: member 'readme.txt' is not a .npy array" train --dataset "$G" --steps 1 --init-load "$d/notnpy.npz"
        fi
        # Checkpoint files.
        "$P" train --dataset "$G" --epochs 3 --steps 4 --checkpoint-dir "$d/ck" --checkpoint-every 2 >/dev/null 2>&1 </dev/null
        check "checkpoints to damage written" test $? = 0 -a -s "$d/ck/ckpt-0000000004.json"
        "$P" train --dataset "$G" --steps 1 --save "$d/w1.npz" >/dev/null 2>&1 </dev/null
        j="$d/ck/ckpt-0000000004.json"
        cp "$j" "$d/ck4.json"
        for bad in garbage truncated version field; do
            rm -rf "$d/c-$bad" && mkdir "$d/c-$bad"
            cp "$d/ck/ckpt-0000000004.npz" "$d/c-$bad/"
            case $bad in
            garbage) head -c 300 /dev/urandom >"$d/c-$bad/ckpt-0000000004.json"; why='not JSON' ;;
            truncated) head -c 200 "$j" >"$d/c-$bad/ckpt-0000000004.json"; why='not JSON' ;;
            version) sed 's/"version": 1/"version": 9/' "$j" >"$d/c-$bad/ckpt-0000000004.json"; why='checkpoint version 9, this parity reads version 1' ;;
            field) sed 's/"epoch_records_done"/"epoch_records"/' "$j" >"$d/c-$bad/ckpt-0000000004.json"; why="field 'epoch_records_done' missing or malformed" ;;
            esac
            expect 3 "no valid checkpoint in $d/c-$bad: $d/c-$bad/ckpt-0000000004.json: $why" \
                train --dataset "$G" --epochs 3 --steps 6 --resume "$d/c-$bad"
        done
        rm -rf "$d/c-nonpz" && mkdir "$d/c-nonpz" && cp "$j" "$d/c-nonpz/"
        expect 3 "no valid checkpoint in $d/c-nonpz: cannot open $d/c-nonpz/ckpt-0000000004.npz" \
            train --dataset "$G" --epochs 3 --steps 6 --resume "$d/c-nonpz"
        expect 2 "ckpt-0000000004.json is from another run: --model: checkpoint mlp:784-256-128-10, this run mlp:784-32-10" \
            train --dataset "$G" --epochs 3 --steps 6 --model mlp:784-32-10 --resume "$d/ck"
        expect 2 "ckpt-0000000004.json is from another run: --batch: checkpoint 64, this run 32" \
            train --dataset "$G" --epochs 3 --steps 6 --batch 32 --resume "$d/ck"
        expect 2 "ckpt-0000000004.json is from another run: --dtype: checkpoint f32, this run f64" \
            train --dataset "$G" --epochs 3 --steps 6 --dtype f64 --resume "$d/ck"
        expect 2 "ckpt-0000000004.json is from another run: initial weights" \
            train --dataset "$G" --epochs 3 --steps 6 --init-load "$d/w1.npz" --resume "$d/ck"
        expect 2 "resume point is in epoch 1 \(0-based\), but the run has --epochs 1" \
            train --dataset "$G" --steps 3 --resume "$d/ck" --epochs 1
        expect 2 "--steps 6: expected at most 3, the steps of --epochs 1 \(180 training records, batch 64\)" \
            train --dataset "$G" --steps 6 --resume "$d/ck" --epochs 1
        # Model specs and flags.
        for spec in "mlp:" "mlp:784" "mlp:784--10" "mlp:784-0-10" "mlp:784-99999999999-10" \
            "cnn:784-10" "mlp:784-10-" "mlp:-784-10" "mlp:784-1a-10" "mlp:784 -10" \
            "mlp:1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1" "$(printf 'mlp:%0200d' 1)"; do
            expect 2 "--model" train --model "$spec" --steps 1
        done
        for f in "--batch -1" "--batch 1e3" "--epochs 0" "--lr nan" "--lr inf" "--lr -1" "--lr 1e999" \
            "--seed -3" "--seed 99999999999999999999999" "--threads 0" "--chunk 0" "--keep x" \
            "--checkpoint-every -5" "--steps 99999999999" "--dtype F32" "--trainer" "--resume" \
            "--fault bogus" "--mode exact,fast"; do
            # The line names the flag (any exit 2 would not do).
            # shellcheck disable=SC2086
            expect 2 "^parity train: ${f%% *} " train $f
        done
        ;;
    esac
done

finish
