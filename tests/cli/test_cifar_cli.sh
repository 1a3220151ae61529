#!/usr/bin/env bash
# CLI tests of CIFAR-10 and --upscale: `parity data make-cifar`, training on
# the generated files with serial, omp --threads 2 and the reference (equal
# weight digests, step by step), for the default MLP and the CIFAR-10 CNN
# without and with batchnorm (the latter also under mpi --ranks 2),
# the default MLP's input size, --model
# mismatches and damaged files (one-line errors naming the flag or file).
# With fashion-mnist installed also: --upscale 28 is the identity, bit for bit.
# Usage: test_cifar_cli.sh PATH/TO/parity
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_WAIT_POLICY=passive OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

field() { # file key: a top-level value of a one-line JSON summary
    sed -n "s/.*\"$2\": *\"\\{0,1\\}\\([^,\"}]*\\).*/\\1/p" "$1"
}

C=$T/cifar
"$P" data make-cifar "$C" --records 40 --seed 3 >"$T/make.out" 2>&1
check "make-cifar writes six files of 40 records" \
    test "$(stat -c %s "$C"/data_batch_{1,2,3,4,5}.bin "$C/test_batch.bin" | sort -u)" = 122920
"$P" data make-cifar "$T/cifar2" --records 40 --seed 3 >/dev/null 2>&1
check "make-cifar is deterministic" cmp -s "$C/data_batch_4.bin" "$T/cifar2/data_batch_4.bin"
expect 2 "make-cifar needs a folder" data make-cifar
"$P" data make-cifar "$T/new/deeper" --records 2 >/dev/null 2>&1
check "make-cifar makes missing parent folders (like mkdir -p)" test -s "$T/new/deeper/test_batch.bin"
expect 3 "^parity data: cannot create .*/make.out/x: Not a directory$" data make-cifar "$T/make.out/x"
expect 2 "--records 0: expected 1..1000000" data make-cifar "$T/x" --records 0

# serial, omp --threads 2 and the reference: the same weights, step by step.
common=(--dataset "$C" --steps 8 --batch 16 --chunk 4 --lr 0.05 --json --quiet)
for tr in serial omp reference; do
    th=1
    [ "$tr" = omp ] && th=2
    "$P" train "${common[@]}" --trainer $tr --threads $th --log "$T/$tr.jsonl" >"$T/$tr.json" 2>"$T/$tr.err"
    check "train on generated CIFAR-10, $tr (exit 0)" test $? = 0
done
check "default MLP takes 3072 inputs" test "$(field "$T/serial.json" model)" = mlp:3072-256-128-10
check "final weights: serial = omp --threads 2" \
    test -n "$(field "$T/serial.json" weights_sha256)" -a \
    "$(field "$T/serial.json" weights_sha256)" = "$(field "$T/omp.json" weights_sha256)"
check "final weights: serial = reference" \
    test "$(field "$T/serial.json" weights_sha256)" = "$(field "$T/reference.json" weights_sha256)"
check "per-step log (8 losses and weight digests): serial = omp --threads 2" \
    test "$(grep -c '"type":"step"' "$T/serial.jsonl")" = 8 -a \
    "$(grep '"type":"step"' "$T/serial.jsonl")" = "$(grep '"type":"step"' "$T/omp.jsonl")"

# The CIFAR-10 CNN of the fourth study without and with batchnorm (three conv
# blocks 3->32->64->128 with 2x2 max-pooling, two fc): 3 steps of each
# trainer given give the same per-step log (loss and weight digests) as the
# reference; a model for another image shape is refused.
same_steps() { # NAME MODEL OPTIM-FLAGS TRAINER...: every trainer's log equals the reference's
    local name=$1 model=$2 opt=$3 tr n
    shift 3
    for tr in reference "$@"; do
        n=${tr%% *}
        # shellcheck disable=SC2086
        "$P" train "${common[@]}" --steps 3 $opt --model "$model" --trainer $tr \
            --log "$T/$name-$n.jsonl" >"$T/$name-$n.json" 2>"$T/$name-$n.err"
        check "$name on generated CIFAR-10, $tr (exit 0)" test $? = 0
        [ "$n" = reference ] && continue
        check "$name: $tr = reference, every step" test \
            "$(grep -c '"type":"step"' "$T/$name-$n.jsonl")" = 3 -a \
            "$(grep '"type":"step"' "$T/$name-$n.jsonl")" = \
            "$(grep '"type":"step"' "$T/$name-reference.jsonl")"
    done
}
same_steps "CIFAR-10 CNN" cnn:3x32x32-c32k3p1-r-m2-c64k3p1-r-m2-c128k3p1-r-m2-f-fc256-r-fc10 \
    "--optim adam --lr 0.001" serial "omp --threads 2"
same_steps "CIFAR-10 batchnorm CNN" \
    cnn:3x32x32-c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-c128k3p1-bn-r-m2-f-fc256-r-fc10 "--lr 0.01" \
    "omp --threads 2" "mpi --ranks 2"
expect 2 "takes 1x32x96 images but dataset $C has 3x32x32" train --dataset "$C" --steps 1 \
    --model cnn:1x32x96-c4k3-f-fc10

# --upscale on CIFAR-10: 32 -> 40, 3 x 40 x 40 = 4800 inputs; serial = omp.
for tr in serial omp; do
    th=1
    [ "$tr" = omp ] && th=2
    "$P" train "${common[@]}" --steps 4 --upscale 40 --trainer $tr --threads $th >"$T/up-$tr.json" 2>"$T/up-$tr.err"
    check "train --upscale 40, $tr (exit 0)" test $? = 0
done
check "--upscale 40: default MLP takes 4800 inputs" \
    test "$(field "$T/up-serial.json" model)" = mlp:4800-256-128-10
check "--upscale 40: final weights serial = omp --threads 2" \
    test -n "$(field "$T/up-serial.json" weights_sha256)" -a \
    "$(field "$T/up-serial.json" weights_sha256)" = "$(field "$T/up-omp.json" weights_sha256)"
"$P" train "${common[@]}" --steps 4 >"$T/s4.json" 2>/dev/null
"$P" train "${common[@]}" --steps 4 --upscale 32 >"$T/s4u.json" 2>/dev/null
check "--upscale 32 on 32 x 32 images: the same weights, bit for bit" \
    test -n "$(field "$T/s4.json" weights_sha256)" -a \
    "$(field "$T/s4.json" weights_sha256)" = "$(field "$T/s4u.json" weights_sha256)"
expect 2 "--model mlp:3072-10 takes 3072 inputs but dataset .* has 4800 features per sample \(--upscale 40: 40 x 40 x 3\); expected an input size of 4800" \
    train --dataset "$C" --upscale 40 --model mlp:3072-10 --steps 1
expect 2 "--model mlp:784-10 takes 784 inputs but dataset .* has 3072 features" \
    train --dataset "$C" --model mlp:784-10 --steps 1
expect 2 "--upscale 5000: expected a side of 1..1024" train --dataset "$C" --upscale 5000

# Damaged files: one line naming the file and what was expected, exit 3.
mkdir "$T/bad" && cp "$C"/*.bin "$T/bad/"
head -c 1000 "$C/data_batch_2.bin" >"$T/bad/data_batch_2.bin"
expect 3 "data_batch_2.bin: 1000 bytes, expected a multiple of 3073" train --dataset "$T/bad" --steps 1
cp "$C/data_batch_2.bin" "$T/bad/" && printf '\x0c' | dd of="$T/bad/test_batch.bin" bs=1 seek=3073 conv=notrunc 2>/dev/null
expect 3 "test_batch.bin: label 12 at record 1 is out of range, expected < 10" train --dataset "$T/bad" --steps 1
rm "$T/bad/data_batch_5.bin"
expect 3 "data_batch_5.bin: not found" train --dataset "$T/bad" --steps 1
PARITY_DATA=$T/none HOME=$T/none expect 3 "dataset 'cifar10' not found" train --dataset cifar10 --steps 1
check "cifar10 not found: the hint names make-cifar" grep -q "^hint: .*parity data make-cifar" "$T/err"

# With fashion-mnist: --upscale 28 is the identity (same weights, bit for bit).
if "$P" train --steps 3 --batch 16 --json --quiet --model mlp:784-10 >"$T/fm.json" 2>/dev/null; then
    "$P" train --steps 3 --batch 16 --json --quiet --model mlp:784-10 --upscale 28 >"$T/fm28.json" 2>&1
    check "fashion-mnist --upscale 28 = no --upscale, bit for bit" \
        test "$(field "$T/fm.json" weights_sha256)" = "$(field "$T/fm28.json" weights_sha256)"
else
    echo "fashion-mnist not installed: --upscale 28 identity check skipped"
fi

finish
