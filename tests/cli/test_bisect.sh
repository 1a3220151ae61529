#!/usr/bin/env bash
# CLI tests of `parity bisect`. cli: exit codes and one-line errors, --json
# fields, the human report, --logs on real step logs (and the .npz weights
# of the differing step). mpi: serial against
# mpi/root on 2 ranks (parity launches mpirun), faults found at their step
# and element, the same element as the omp trainer with the same fault.
# Usage: test_bisect.sh cli|mpi PATH/TO/parity   (needs fashion-mnist)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
MODE=$1
P=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive

# bisect NAME CODE ARGS...: runs `parity bisect ARGS --json` into $T/NAME.json.
bisect() {
    local name=$1 code=$2
    shift 2
    timeout 120 "$P" bisect "$@" --json >"$T/$name.json" 2>"$T/$name.err" </dev/null
    local rc=$?
    check "bisect $name: exit $code (got $rc)" test "$rc" = "$code"
    [ "$rc" = "$code" ] || cat "$T/$name.err"
}

# field NAME KEY: a field of $T/NAME.json ("null" when absent).
field() {
    /usr/bin/python3 -c "import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print('null' if v is None else v)" \
        "$T/$1.json" "$2" 2>/dev/null
}

# found NAME STEP TENSOR INDEX: the first difference is where it must be,
# and every tensor before it agrees on all of its elements.
found() {
    local got
    got="$(field "$1" step) $(field "$1" tensor) $(field "$1" index)"
    check "$1: step $2, $3[$4] (got $got)" test "$got" = "$2 $3 $4"
    /usr/bin/python3 - "$T/$1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rows = j["tensors"]
first = next(r for r in rows if r["n_diff"])
assert j["tensor"].startswith(first["name"].rstrip("*")), (first, j["tensor"])
assert all(r["n"] > 0 for r in rows), rows
assert j["closer"] in ("a", "b", "tie"), j["closer"]
PY
    check "$1: earlier tensors agree, a verdict" test $? = 0
}

# Layer 2's weight [3,5]: a parameter whose gradient at step 3 is not 0
# (tests/verify/test_bisect.c checks that on the same batches' trainer).
ULP=234245

if [ "$MODE" = cli ]; then
    expect 2 "expected two run configurations" bisect
    expect 2 "expected two run configurations" bisect "--trainer serial"
    expect 2 "unknown flag '--bogus'" bisect "--trainer serial" "--trainer omp --bogus 1"
    expect 2 "unexpected argument 'omp'" bisect "--trainer serial" "omp"
    expect 2 "--batch differs between A \(64\) and B \(32\)" bisect "" "--batch 32"
    expect 2 "--threads 2: trainer serial runs one thread" bisect "" "--threads 2"
    expect 2 "--trainer 'nope'" bisect "" "--trainer nope"
    expect 2 "--fault 'bad'" bisect "" "--fault bad"
    expect 2 "--ranks 2: trainer omp is not an MPI trainer" bisect "" "--trainer omp --ranks 2"
    expect 2 "--tol must be >= 0" bisect "" "" --tol -1
    expect 2 "^parity bisect: --atol -1: expected a number >= 0$" bisect "" "" --atol -1
    expect 2 "^parity bisect: A: --fault 'ulp:3:1': trainer reference takes no faults" \
        bisect "--trainer reference --fault ulp:3:1" ""
    expect 2 "^parity bisect: B: --fault 'ulp:3:1': trainer reference takes no faults" \
        bisect "" "--trainer reference --fault ulp:3:1"

    # --tol is relative; the absolute floor (--atol, by default 4 ulps of each
    # tensor's largest |value|) keeps a = 2^-35 vs b = 0 in a gradient of
    # values near 1e-2 from counting. The documented example passes:
    timeout 120 "$P" bisect "--chunk 8" "--chunk 16" --tol 0.5 --steps 30 >"$T/human" 2>"$T/err" </dev/null
    check "bisect \"--chunk 8\" \"--chunk 16\" --tol 0.5 --steps 30: exit 0" test $? = 0 -a ! -s "$T/err"
    check "... no divergence in 30 steps" grep -qx "no divergence in 30 steps: loss, gradient and weights agree after every step" "$T/human"
    check "... and says which floor" grep -qF -- "--tol 0.5 --atol auto: |a - b| <= 0.5 max(|a|, |b|) or |a - b| <= 4 ulps of the tensor's largest |value| counts as equal" "$T/human"
    bisect chunk_auto 0 "--chunk 8" "--chunk 16" --tol 0.5 --steps 30
    check "chunk_auto: diverged false, 30 steps, atol auto" test \
        "$(field chunk_auto diverged) $(field chunk_auto steps) $(field chunk_auto atol)" = "False 30 auto"
    # Without the floor (--atol 0, relative only) a gradient element that is
    # exactly 0 on one side and rounding noise on the other differs: any
    # a != 0 against b = 0 fails every relative tolerance below 1. It is the
    # case the floor is for, so it must be tiny: below the 1e-10 used next.
    bisect chunk_rel 1 "--chunk 8" "--chunk 16" --tol 0.5 --atol 0 --steps 30
    check "chunk_rel: a weight gradient, tiny against an exact 0" python3 -c "
import sys
t, a, b = sys.argv[1:]
sys.exit(not (t.endswith('.grad') and float(b) == 0 and 0 < abs(float(a)) < 1e-10))" \
        "$(field chunk_rel tensor)" "$(field chunk_rel a)" "$(field chunk_rel b)"
    # A floor above that difference but given explicitly: equal too.
    bisect chunk_abs 0 "--chunk 8" "--chunk 16" --tol 0.5 --atol 1e-10 --steps 30
    check "chunk_abs: --atol 1e-10 recorded" test "$(field chunk_abs atol)" = "1e-10"
    expect 3 "$T/none" bisect "" "" --dataset "$T/none"
    expect 2 "expected two step logs" bisect --logs "$T/a.jsonl"
    expect 3 "cannot open log" bisect --logs "$T/none1" "$T/none2"

    bisect same 0 "--trainer serial" "--trainer serial" --steps 3
    check "same: diverged false, 3 steps" test "$(field same diverged) $(field same steps)" = "False 3"
    bisect omp 0 "--trainer serial" "--trainer omp --threads 2" --steps 3
    bisect ulp 1 "--trainer serial" "--trainer omp --threads 2 --fault ulp:3:$ULP" --steps 5
    found ulp 3 layer2.weight.grad 389
    check "ulp: 1 ulp at [3,5], param $ULP, the chunk fold differs" test \
        "$(field ulp ulps) $(field ulp row) $(field ulp col) $(field ulp param) $(field ulp chunk_fold_differs)" = "1.0 3 5 $ULP True"
    bisect swap 1 "--trainer serial" "--trainer omp --threads 2 --fault swap:2:1" --steps 4
    check "swap: step 2, layer1.weight.grad" test "$(field swap step) $(field swap tensor)" = "2 layer1.weight.grad"

    # Optimizers: the replay starts from a's weights and optimizer state. A
    # gradient fault under adam is found where SGD's is; mu + 2^-10 in b's
    # momentum (obeta) leaves every gradient equal and shows first in the
    # new weights, with no exact verdict (the update is not SGD's).
    bisect adam_same 0 "--trainer serial" "--trainer omp --threads 2" --optim adam --steps 6
    bisect adam_ulp 1 "--trainer serial" "--trainer omp --threads 2 --fault ulp:3:$ULP" --optim adam --steps 5
    found adam_ulp 3 layer2.weight.grad 389
    bisect mom_beta 1 "--trainer serial" "--trainer omp --fault obeta:4" --optim momentum --momentum 0.8 --steps 6
    check "mom_beta: step 4, layer0.weight.new first, every gradient equal, no exact verdict" test \
        "$(field mom_beta step) $(field mom_beta tensor) $(field mom_beta exact) $(field mom_beta closer)" = "4 layer0.weight.new null null"
    /usr/bin/python3 -c "
import json, sys
rows = json.load(open(sys.argv[1]))['tensors']
assert all(r['n_diff'] == 0 for r in rows if not r['name'].endswith('.new')), rows
" "$T/mom_beta.json"
    check "mom_beta: nothing before the update differs" test $? = 0
    expect 2 "^parity bisect: --optim differs between A \(adam\) and B \(sgd\)" bisect "--optim adam" "--optim sgd"
    expect 2 "^parity bisect: --beta1 does not apply to --optim momentum$" bisect "" "" --optim momentum --beta1 0.5
    # --upscale and --batch full: the same batches for both, resampled.
    bisect up_full 0 "--trainer serial" "--trainer omp --threads 2" --upscale 14 --model mlp:196-16-10 \
        --batch full --epochs 2 --steps 2
    check "up_full: 2 full-batch steps of resampled images, no divergence" test "$(field up_full steps)" = 2

    # The human report: lockstep, the first tensor marked, the verdict.
    timeout 120 "$P" bisect "--trainer serial" "--trainer omp --threads 2 --fault ulp:3:$ULP" --steps 5 \
        >"$T/human" 2>&1 </dev/null
    check "human report: exit 1" test $? = 1
    check "human report says lockstep" grep -q "lockstep" "$T/human"
    check "human report marks layer2.weight.grad first" grep -q "layer2.weight.grad .*<- first" "$T/human"
    check "human report names the element and the verdict" grep -q "closer to exact: \(a\|b\|tie\)" "$T/human"
    check "human report: the chunk fold differs" grep -q "the chunk fold differs" "$T/human"

    # --logs on real step logs: the same run twice agrees; a half fault at step 4 is found there.
    "$P" train --steps 6 --log "$T/a.jsonl" </dev/null &&
        "$P" train --steps 6 --trainer omp --threads 2 --log "$T/b.jsonl" </dev/null &&
        "$P" train --steps 6 --trainer omp --threads 2 --fault half:4:1 --log "$T/c.jsonl" </dev/null &&
        "$P" train --steps 6 --trainer omp --threads 2 --fault half:4:1 --no-digest --log "$T/d.jsonl" </dev/null
    check "four step logs written" test $? = 0
    # Step lines carry XXH3-128 digests (32 hex) of weights and loss, no SHA-256.
    /usr/bin/python3 - "$T/a.jsonl" "$T/d.jsonl" <<'PY'
import json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
steps = [s for s in steps if s["type"] == "step"]
assert len(steps) == 6, steps
for s in steps:
    assert re.fullmatch("[0-9a-f]{32}", s["weights_xxh128"]), s
    assert re.fullmatch("[0-9a-f]{32}", s["loss_xxh128"]), s
    assert not any(k.endswith("sha256") for k in s), s
assert len({s["weights_xxh128"] for s in steps}) == 6, "weights change every step"
nd = [json.loads(l) for l in open(sys.argv[2])]
assert all("weights_xxh128" not in s for s in nd), "--no-digest: no digest"
PY
    check "step lines carry weights_xxh128 and loss_xxh128 (32 hex), no *_sha256" test $? = 0
    bisect logs_same 0 --logs "$T/a.jsonl" "$T/b.jsonl"
    check "logs_same: by digests" test "$(field logs_same digests)" = True
    bisect logs_half 1 --logs "$T/a.jsonl" "$T/c.jsonl"
    check "logs_half: step 4, loss and weights" test "$(field logs_half step) $(field logs_half what)" = "4 loss and weights"
    check "logs_half: the two XXH3-128 weight digests of step 4, 32 hex each, differ" /usr/bin/python3 -c "
import re, sys
a, b = sys.argv[1:]
sys.exit(not (re.fullmatch('[0-9a-f]{32}', a) and re.fullmatch('[0-9a-f]{32}', b) and a != b))" \
        "$(field logs_half weights_xxh128_a)" "$(field logs_half weights_xxh128_b)"
    bisect logs_nodigest 1 --logs "$T/a.jsonl" "$T/d.jsonl"
    check "logs without digests: step 4 by the loss" test \
        "$(field logs_nodigest step) $(field logs_nodigest what) $(field logs_nodigest digests)" = "4 loss False"
    timeout 60 "$P" bisect --logs "$T/a.jsonl" "$T/c.jsonl" >"$T/human" 2>&1
    check "logs human report names step 4" grep -q "first difference at step 4" "$T/human"
    check "logs human report: compared by XXH3-128" grep -q "compared by the XXH3-128 of loss and weights" "$T/human"
    # With the weights each side saved after step 4 (runs of two builds cannot
    # be replayed in one process): the arrays that differ, the first named.
    "$P" train --steps 4 --save "$T/a4.npz" </dev/null &&
        "$P" train --steps 4 --trainer omp --threads 2 --fault half:4:1 --save "$T/c4.npz" </dev/null &&
        "$P" train --steps 3 --trainer omp --threads 2 --fault half:4:1 --save "$T/c3.npz" </dev/null
    check "weights of steps 4 and 3 saved" test $? = 0
    bisect logs_npz 1 --logs "$T/a.jsonl" "$T/c.jsonl" "$T/a4.npz" "$T/c4.npz"
    /usr/bin/python3 - "$T/logs_npz.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
arr = j["arrays"]
assert j["step"] == 4 and arr, j
assert j["tensor"] == arr[0]["name"] and j["index"] == arr[0]["index"], j
names = ["layer%d.%s" % (l, k) for l in range(3) for k in ("weight", "bias")]
assert [a["name"] for a in arr] == [n for n in names if n in {a["name"] for a in arr}], arr
for a in arr:
    assert 0 < a["differ"] <= a["elements"] and a["a"] != a["b"] and a["ulps"] >= 1, a
PY
    check "logs_npz: the differing arrays in buffer order, the first named with its element" test $? = 0
    timeout 60 "$P" bisect --logs "$T/a.jsonl" "$T/c.jsonl" "$T/a4.npz" "$T/c4.npz" >"$T/human" 2>&1
    check "logs_npz human report: first differing tensor" \
        grep -Eq "^first differing tensor: layer[0-9]\.(weight|bias), element \[[0-9,]+\]" "$T/human"
    expect 2 "^parity bisect: $T/c3.npz: not the weights of log b after step 4 \(XXH3-128 [0-9a-f]{32}, the log has [0-9a-f]{32}\)$" \
        bisect --logs "$T/a.jsonl" "$T/c.jsonl" "$T/a4.npz" "$T/c3.npz"
    expect 2 "expected two step logs \(and the two runs' .npz weights\)" \
        bisect --logs "$T/a.jsonl" "$T/c.jsonl" "$T/a4.npz"
    # A log of parity before XXH3-128 step digests (SHA-256): refused with one
    # line naming the file and what was expected, never compared.
    sed 's/"weights_xxh128":"[0-9a-f]*"/"weights_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"/' \
        "$T/a.jsonl" >"$T/old.jsonl"
    expect 3 "^parity bisect: $T/old.jsonl:1: \"weights_sha256\": a log of parity before XXH3-128 step digests; expected \"weights_xxh128\"" \
        bisect --logs "$T/a.jsonl" "$T/old.jsonl"
fi

if [ "$MODE" = mpi ]; then
    expect 2 "A runs 2 MPI ranks and B 3" bisect "--trainer mpi --ranks 2" "--trainer mpi --ranks 3"
    bisect mpi_same 0 "--trainer serial" "--trainer mpi --ranks 2" --steps 3
    # root keeps adam's state current on rank 0 only: the replay's state is rank 0's.
    bisect root_adam 1 "--trainer serial" "--trainer root --ranks 2 --fault swap:3:0" --optim adam --steps 5
    check "root_adam: step 3, layer0.weight.grad" test "$(field root_adam step) $(field root_adam tensor)" = "3 layer0.weight.grad"
    bisect mpi_ulp 1 "--trainer serial" "--trainer mpi --ranks 2 --fault ulp:3:$ULP" --steps 5
    found mpi_ulp 3 layer2.weight.grad 389
    check "mpi_ulp: activations of both ranks compared" test "$(field mpi_ulp internals_compared)" = True
    # root keeps the whole gradient on rank 0 only: compared there.
    bisect root_ulp 1 "--trainer serial" "--trainer root --ranks 2 --fault ulp:3:$ULP" --steps 5
    found root_ulp 3 layer2.weight.grad 389
    bisect root_fast_same 1 "--trainer serial" "--trainer root --ranks 2 --mode fast" --steps 2
    check "root fast: parts at step 1 in a gradient" test \
        "$(field root_fast_same step) $(field root_fast_same chunk_fold_differs)" = "1 True"
    # swap and half: the same element as the omp trainer with the same fault
    # (rank 0's chunks fold ((g1 + g2) + g0) + g3, then rank 1 continues:
    # the omp trainer's order; tests/verify/test_bisect.c checks omp against an oracle).
    for f in swap:2:1 swap:3:0 half:2:1; do
        n=${f//:/_}
        bisect "omp_$n" 1 "--trainer serial" "--trainer omp --threads 2 --fault $f" --steps 4
        bisect "mpi_$n" 1 "--trainer serial" "--trainer mpi --ranks 2 --fault $f" --steps 4
        want="$(field "omp_$n" step) $(field "omp_$n" tensor) $(field "omp_$n" index) $(field "omp_$n" a) $(field "omp_$n" b)"
        got="$(field "mpi_$n" step) $(field "mpi_$n" tensor) $(field "mpi_$n" index) $(field "mpi_$n" a) $(field "mpi_$n" b)"
        check "mpi $f: same element as omp ($want)" test "$got" = "$want"
    done
    # Both sides MPI, and the faulty side first.
    bisect mpi_mpi 1 "--trainer mpi --ranks 2 --fault ulp:3:$ULP" "--trainer hybrid --ranks 2 --threads 2" --steps 4
    found mpi_mpi 3 layer2.weight.grad 389
fi

finish
