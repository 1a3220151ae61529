#!/usr/bin/env bash
# CLI tests of the optimizers, --batch full and --select best-val (issue 8),
# on a 600 + 200 record slice of fashion-mnist written as IDX files:
# --batch full is one step per epoch and equal for reference, serial, omp
# and mpi; --select best-val keeps the epoch with the best validation
# accuracy (a tie keeps the earlier one), also across a checkpoint;
# adam/momentum/nesterov checkpoints resume bit for bit, across trainers and
# rank counts; bad flags and a checkpoint
# of another optimizer are refused with one line.
# Usage: test_optim_cli.sh PATH/TO/parity   (needs fashion-mnist: data/fetch.sh)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMPI_MCA_btl_vader_single_copy_mechanism=none
PY=/usr/bin/python3

field() { $PY -c "import json,sys; print(json.load(open('$1')).get('$2'))"; }

SRC=""
for d in "${PARITY_DATA:-/nonexistent}/fashion-mnist" "$HOME/.cache/parity/data/fashion-mnist" \
         /usr/share/datasets/fashion-mnist; do
    [ -f "$d/train-images-idx3-ubyte.gz" ] && SRC=$d && break
done
if [ -z "$SRC" ]; then
    echo "fashion-mnist (.gz) not found: run data/fetch.sh"
    exit 1
fi
$PY - "$SRC" "$T/small" 600 200 <<'PY' || exit 1
import gzip, os, struct, sys
src, dst, ntr, nte = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(dst)
for pre, n in (("train", ntr), ("t10k", nte)):
    with gzip.open(f"{src}/{pre}-images-idx3-ubyte.gz") as f:
        magic, _, h, w = struct.unpack(">IIII", f.read(16))
        px = f.read(n * h * w)
    with open(f"{dst}/{pre}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", magic, n, h, w) + px)
    with gzip.open(f"{src}/{pre}-labels-idx1-ubyte.gz") as f:
        magic, _ = struct.unpack(">II", f.read(8))
        lb = f.read(n)
    with open(f"{dst}/{pre}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", magic, n) + lb)
PY
D=$T/small   # 540 training, 60 validation, 200 test records
COMMON=(--dataset "$D" --model mlp:784-16-10 --quiet --json)
have_mpi=0   # a build with MPI and mpirun (the --help text lists mpi either way)
"$P" train "${COMMON[@]}" --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null && have_mpi=1

# --- --batch full: one step of all 540 records per epoch, the same for every trainer.
"$P" train "${COMMON[@]}" --trainer reference --batch full --epochs 3 --optim adam --lr 0.01 \
    >"$T/ref.json"
check "--batch full: 3 epochs are 3 steps of 540" \
    test "$(field "$T/ref.json" steps) $(field "$T/ref.json" batch) $(field "$T/ref.json" batch_full)" = "3 540 True"
for tr in "serial" "omp --threads 3"; do
    # shellcheck disable=SC2086
    "$P" train "${COMMON[@]}" --trainer $tr --batch full --epochs 3 --optim adam --lr 0.01 >"$T/b.json"
    check "--batch full, adam: $tr == reference" \
        test "$(field "$T/b.json" weights_sha256)" = "$(field "$T/ref.json" weights_sha256)"
done
if [ $have_mpi = 1 ]; then
    "$P" train "${COMMON[@]}" --trainer mpi --ranks 3 --batch full --epochs 3 --optim adam \
        --lr 0.01 >"$T/b.json"
    check "--batch full, adam: mpi R=3 == reference" \
        test "$(field "$T/b.json" weights_sha256)" = "$(field "$T/ref.json" weights_sha256)"
fi

# --- --select best-val on a constructed case: full-batch SGD at lr 2 oscillates;
# validation accuracy per epoch 0.15, 0.067, 0.15, 0.1, ...: epochs 1 and 3 tie
# for the best (1-based), so best-val keeps epoch 1, not 3 and not the last.
"$P" train "${COMMON[@]}" --batch full --epochs 8 --lr 2 --select best-val --log "$T/l.jsonl" \
    --save "$T/best.npz" >"$T/best.json"
$PY - "$T/l.jsonl" "$T/best.json" "$T/best_step.xxh" >"$T/sel.txt" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
ep = [l for l in lines if l["type"] == "epoch"]
acc = [e["val_accuracy"] for e in ep]
first = acc.index(max(acc))                       # 0-based, ties: the earliest
tie_later = any(a == max(acc) for a in acc[first + 1:])
# the step log's digest (XXH3-128) of the weights after the last step of that epoch
xxh = [l["weights_xxh128"] for l in lines if l["type"] == "step" and l["step"] == ep[first]["step"]][0]
open(sys.argv[3], "w").write(xxh)
print(s["select"], s["best_epoch"] == first + 1, first + 1 < len(ep), tie_later,
      s["val_accuracy"] == acc[first], s["test_accuracy"] == ep[first]["test_accuracy"])
PY
check "--select best-val: the first epoch of the best validation accuracy, a tie after it, not the last" \
    test "$(cat "$T/sel.txt")" = "best-val True True True True True"
# The .npz members in order are the parameter buffer: its SHA-256 is the
# summary's weights_sha256 (the artefact's identity), and its XXH3-128, by
# xxh128sum (independent of parity), the step log's weights_xxh128.
npz_sha=$($PY - "$T/best.npz" "$T/best.bin" <<'PY'
import hashlib, struct, sys, zipfile
h = hashlib.sha256()
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as raw:
    for n in z.namelist():
        b = z.read(n)
        hl = struct.unpack("<H", b[8:10])[0]      # .npy format 1.0 header length
        h.update(b[10 + hl:])
        raw.write(b[10 + hl:])
print(h.hexdigest())
PY
)
check "--select best-val: --save wrote those weights (SHA-256 = weights_sha256)" \
    test "$npz_sha" = "$(field "$T/best.json" weights_sha256)"
check "--select best-val: the step log's weights_xxh128 of that epoch = xxh128sum of the saved weights" \
    test -s "$T/best_step.xxh" -a "$(xxh128sum "$T/best.bin" | cut -d' ' -f1)" = "$(cat "$T/best_step.xxh")"
# Checkpointed after step 2 (its best so far: epoch 1) and resumed: the same choice.
rm -rf "$T/ckb"
"$P" train "${COMMON[@]}" --batch full --epochs 8 --lr 2 --select best-val --steps 2 \
    --checkpoint-dir "$T/ckb" --checkpoint-every 2 >/dev/null
"$P" train "${COMMON[@]}" --batch full --epochs 8 --lr 2 --select best-val --resume "$T/ckb" \
    --trainer omp --threads 2 >"$T/bestr.json"
check "--select best-val resumed from a checkpoint: same epoch, accuracy and weights" \
    test "$(field "$T/bestr.json" best_epoch) $(field "$T/bestr.json" test_accuracy) $(field "$T/bestr.json" weights_sha256)" \
    = "$(field "$T/best.json" best_epoch) $(field "$T/best.json" test_accuracy) $(field "$T/best.json" weights_sha256)"
"$P" train "${COMMON[@]}" --batch full --epochs 8 --lr 2 >"$T/last.json"
check "--select last (default): no best_epoch, the last weights" \
    test "$(field "$T/last.json" select) $(field "$T/last.json" best_epoch)" = "last None"

# --- resume with optimizer state, bit for bit, across trainers and rank counts.
for opt in "adam --lr 0.002" "momentum --momentum 0.8" "nesterov"; do
    name=${opt%% *}
    # shellcheck disable=SC2086
    "$P" train "${COMMON[@]}" --batch 32 --epochs 2 --optim $opt >"$T/full.json"
    rm -rf "$T/ck"
    # shellcheck disable=SC2086
    "$P" train "${COMMON[@]}" --batch 32 --epochs 2 --optim $opt --steps 11 --checkpoint-dir "$T/ck" \
        --checkpoint-every 11 >/dev/null
    # shellcheck disable=SC2086
    "$P" train "${COMMON[@]}" --batch 32 --epochs 2 --optim $opt --trainer omp --threads 2 \
        --resume "$T/ck" >"$T/res.json"
    check "$name: serial checkpoint at step 11, resumed by omp T=2 == uninterrupted" \
        test "$(field "$T/res.json" weights_sha256)" = "$(field "$T/full.json" weights_sha256)"
    if [ $have_mpi = 1 ] && [ "$name" = adam ]; then
        rm -rf "$T/ck"
        # shellcheck disable=SC2086
        "$P" train "${COMMON[@]}" --batch 32 --epochs 2 --optim $opt --trainer mpi --ranks 2 \
            --steps 7 --checkpoint-dir "$T/ck" --checkpoint-every 7 >/dev/null
        # shellcheck disable=SC2086
        "$P" train "${COMMON[@]}" --batch 32 --epochs 2 --optim $opt --trainer root --ranks 3 \
            --resume "$T/ck" >"$T/res.json"
        check "adam: mpi R=2 checkpoint, resumed by root R=3 == uninterrupted serial" \
            test "$(field "$T/res.json" weights_sha256)" = "$(field "$T/full.json" weights_sha256)"
    fi
done

# --- refusals: one line, exit 2.
expect2() { # name, pattern, args...
    local name=$1 pat=$2
    shift 2
    "$P" train "$@" >/dev/null 2>"$T/err" </dev/null
    local rc=$?
    check "$name" test "$rc" = 2 -a "$(grep -c -e "$pat" "$T/err")" = 1 \
        -a "$(grep -vc '^hint:' "$T/err")" = 1
}
expect2 "--optim rmsprop is refused" "--optim 'rmsprop': expected sgd, momentum" --optim rmsprop
expect2 "--momentum with adam is refused" "--momentum does not apply to --optim adam" \
    --optim adam --momentum 0.5
expect2 "--beta2 1 is refused" "--beta2 1: expected a number in \[0, 1)" --optim adam --beta2 1
expect2 "--batch fill is refused" "--batch 'fill': expected a non-negative integer or 'full'" \
    --batch fill
expect2 "--select best is refused" "--select 'best': expected last or best-val" --select best
rm -rf "$T/ck"
"$P" train "${COMMON[@]}" --batch 32 --optim adam --steps 3 --checkpoint-dir "$T/ck" >/dev/null
expect2 "--select best-val resuming a --select last checkpoint is refused" \
    "kept --select last, so its best epoch before step 3 is unknown" \
    "${COMMON[@]}" --batch 32 --optim adam --select best-val --resume "$T/ck"
expect2 "resuming an adam checkpoint with momentum is refused, naming --optim" \
    "another run: --optim: checkpoint adam beta1=0.9 beta2=0.999 eps=1e-08, this run momentum" \
    "${COMMON[@]}" --batch 32 --optim momentum --resume "$T/ck"

finish
