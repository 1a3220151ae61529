#!/usr/bin/env bash
# Checkpoints and --resume of `parity train`, end to end: for serial, omp
# (2 threads), a CNN under omp, and mpi (--ranks 2) a run is killed with SIGKILL mid-epoch,
# resumed, and must equal an uninterrupted run bit for bit: weights_sha256
# of --json and the whole JSONL log, byte for byte. Also: SIGINT/SIGTERM
# stop cleanly (exit 130/143, checkpoint, hint), a resumed run under another
# trainer, a damaged newest checkpoint skipped, a checkpoint of another
# config refused (exit 2), --keep, a fresh run refusing a used folder, a log
# of an older parity (SHA-256 step digests) refused with one line.
# Usage: test_resume.sh PATH/TO/parity [serial|omp|cnn|mpi|signals|misc ...]
# (default: all). Needs fashion-mnist (data/fetch.sh). ~40 s in all.
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
shift
parts=${*:-serial omp cnn mpi signals misc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# A job killed with SIGKILL leaves its shared-memory segments behind (no
# rank lives to unlink them): put them in $T, which goes at the end, not
# in /dev/shm.
export OMPI_MCA_btl_vader_backing_directory="$T"

sha() { sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1"; }
# The run of every test: 2 epochs would be 1688 steps; 1000 steps cross the
# end of epoch 0 (step 844, with its evaluation line) and stop mid-epoch 1.
# A narrow model (50,890 parameters, 4 ring segments) keeps the run short.
RUN=(train --steps 1000 --epochs 2 --seed 7 --quiet --model mlp:784-64-10)

# Live processes (not zombies) of session $1.
alive_in_session() { ps -eo sid=,stat= | awk -v s="$1" '$1 == s && $2 !~ /^Z/' | wc -l; }

# kill_at DIR STEP PID SID: SIGKILL every process of session SID as soon as
# checkpoint STEP exists (the run is then between two checkpoints).
kill_at() {
    local dir=$1 step=$2 pid=$3 sid=$4 i
    local f
    f=$(printf '%s/ckpt-%010d.json' "$dir" "$step")
    for i in $(seq 1 3000); do
        [ -e "$f" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    kill -9 $(ps -eo pid=,sid= | awk -v s="$sid" '$2 == s {print $1}') 2>/dev/null
    wait "$pid" 2>/dev/null
}

# One trainer: uninterrupted, then killed and resumed.
resume_case() { # name, trainer flags...
    local name=$1
    shift
    local d="$T/$name"
    mkdir -p "$d"
    "$P" "${RUN[@]}" "$@" --json --log "$d/full.jsonl" >"$d/full.json" 2>"$d/full.err" </dev/null
    check "$name: uninterrupted run" test $? = 0 -a -n "$(sha "$d/full.json")"
    setsid "$P" "${RUN[@]}" "$@" --json --log "$d/run.jsonl" --checkpoint-dir "$d/ck" \
        --checkpoint-every 300 >"$d/killed.json" 2>"$d/killed.err" </dev/null &
    local pid=$!
    kill_at "$d/ck" 300 $pid $pid
    # The log is written as it goes: the killed run's steps are there, whole lines.
    check "$name: killed mid-run (the log has its steps so far, no JSON)" \
        test "$(grep -c '"type":"step"' "$d/run.jsonl")" -ge 300 -a ! -s "$d/killed.json" \
        -a "$(tail -c 1 "$d/run.jsonl" | od -An -c | tr -d ' ')" = '\n'
    local ck
    ck=$(ls "$d/ck" | grep -c '\.json$')
    check "$name: checkpoints left ($ck)" test "$ck" -ge 1
    sleep 0.2
    check "$name: nothing of the killed run left running" test "$(alive_in_session $pid)" = 0
    "$P" "${RUN[@]}" "$@" --json --log "$d/run.jsonl" --resume "$d/ck" \
        >"$d/resumed.json" 2>"$d/resumed.err" </dev/null
    local rc=$?
    check "$name: resume exits 0 ($(head -c 300 "$d/resumed.err"))" test $rc = 0
    check "$name: resumed weights equal uninterrupted ($(sha "$d/resumed.json"))" \
        test -n "$(sha "$d/full.json")" -a "$(sha "$d/full.json")" = "$(sha "$d/resumed.json")"
    check "$name: resumed log equals uninterrupted, byte for byte" cmp -s "$d/full.jsonl" "$d/run.jsonl"
    check "$name: resumed after step 300" grep -q '"resumed_from_step": *[1-9]' "$d/resumed.json"
    check "$name: no temp files left" test -z "$(ls "$d" "$d/ck" | grep '\.tmp\.')"
}

for part in $parts; do
    case $part in
    serial) resume_case serial --trainer serial ;;
    omp) resume_case omp --trainer omp --threads 2 ;;
    cnn) # a conv + max-pool CNN (adam: optimizer state in the checkpoint too)
        resume_case cnn --trainer omp --threads 2 --model cnn:1x28x28-c4k3p1-r-m2-f-fc10 \
            --optim adam --lr 0.001 ;;
    mpi)
        if "$P" train --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null; then
            resume_case mpi --trainer mpi --ranks 2
        else
            echo "mpi: skipped (parity built without MPI or mpirun missing)"
        fi
        ;;
    signals)
        d="$T/sig"
        mkdir -p "$d"
        "$P" "${RUN[@]}" --json --log "$d/full.jsonl" >"$d/full.json" 2>/dev/null </dev/null
        for s in INT TERM; do
            want=130
            [ $s = TERM ] && want=143
            "$P" "${RUN[@]}" --log "$d/$s.jsonl" --checkpoint-dir "$d/ck$s" --checkpoint-every 100 \
                >/dev/null 2>"$d/$s.err" </dev/null &
            pid=$!
            f="$d/ck$s/ckpt-0000000100.json"
            for i in $(seq 1 3000); do [ -e "$f" ] && break; sleep 0.01; done
            kill -$s $pid
            wait $pid
            rc=$?
            check "SIG$s: exit $want (got $rc)" test $rc = $want
            check "SIG$s: says how to resume" grep -q "^hint: continue with: parity train --resume $d/ck$s" "$d/$s.err"
            n=$(sed -n 's/.*stopped by SIG[A-Z]* after step \([0-9]*\);.*/\1/p' "$d/$s.err")
            check "SIG$s: checkpoint of the step it stopped at ($n)" \
                test -n "$n" -a -e "$(printf '%s/ck%s/ckpt-%010d.json' "$d" "$s" "${n:-0}")"
            check "SIG$s: the log holds the steps done" \
                test "$(grep -c '"type":"step"' "$d/$s.jsonl" 2>/dev/null)" = "${n:-x}"
            "$P" "${RUN[@]}" --json --log "$d/$s.jsonl" --resume "$d/ck$s" >"$d/$s.json" 2>/dev/null </dev/null
            check "SIG$s: resumed run equals uninterrupted" \
                test "$(sha "$d/full.json")" = "$(sha "$d/$s.json")"
            check "SIG$s: resumed log equals uninterrupted" cmp -s "$d/full.jsonl" "$d/$s.jsonl"
        done
        # MPI: the signal goes to parity, which passes it to every rank via mpirun.
        if "$P" train --trainer mpi --ranks 1 --steps 1 >/dev/null 2>&1 </dev/null; then
            "$P" "${RUN[@]}" --trainer mpi --ranks 2 --log "$d/m.jsonl" --checkpoint-dir "$d/ckm" \
                --checkpoint-every 100 >/dev/null 2>"$d/m.err" </dev/null &
            pid=$!
            for i in $(seq 1 3000); do [ -e "$d/ckm/ckpt-0000000100.json" ] && break; sleep 0.01; done
            kill -TERM $pid
            wait $pid
            rc=$?
            check "mpi SIGTERM: exit 143 with one message (got $rc: $(head -c 600 "$d/m.err"))" \
                test $rc = 143 -a "$(grep -vc '^hint:' "$d/m.err")" = 1
            "$P" "${RUN[@]}" --trainer hybrid --ranks 2 --json --log "$d/m.jsonl" --resume "$d/ckm" \
                >"$d/m.json" 2>/dev/null </dev/null
            check "mpi SIGTERM: resumed (as hybrid) equals uninterrupted serial" \
                test "$(sha "$d/full.json")" = "$(sha "$d/m.json")"
            check "mpi SIGTERM: resumed log equals uninterrupted" cmp -s "$d/full.jsonl" "$d/m.jsonl"
        fi
        ;;
    misc)
        d="$T/misc"
        mkdir -p "$d"
        R=(train --steps 120 --seed 7 --quiet)
        "$P" "${R[@]}" --json --log "$d/full.jsonl" >"$d/full.json" 2>/dev/null </dev/null
        "$P" "${R[@]}" --steps 90 --log "$d/a.jsonl" --checkpoint-dir "$d/ck" --checkpoint-every 20 \
            --keep 2 >/dev/null 2>&1 </dev/null
        check "--keep 2 keeps the newest two (80, 90)" \
            test "$(ls "$d/ck" | grep -c '\.json$')" = 2 -a -e "$d/ck/ckpt-0000000080.json" -a -e "$d/ck/ckpt-0000000090.json"
        cp -r "$d/ck" "$d/ck0"
        # A run of another config may not continue it.
        "$P" "${R[@]}" --lr 0.02 --resume "$d/ck" >/dev/null 2>"$d/err" </dev/null
        rc=$?
        check "another --lr: refused, exit 2, field named (got $rc: $(head -n 1 "$d/err"))" \
            test $rc = 2 -a "$(grep -c 'is from another run: --lr: checkpoint 0.01, this run 0.02' "$d/err")" = 1
        "$P" "${R[@]}" --dataset mnist --resume "$d/ck" >/dev/null 2>"$d/err" </dev/null
        rc=$?
        if [ $rc != 3 ] || ! grep -q "not found" "$d/err"; then
            check "another --dataset: refused, exit 2 ($(head -n 1 "$d/err"))" \
                test $rc = 2 -a "$(grep -c 'is from another run: --dataset' "$d/err")" = 1
        fi
        # A fresh run refuses a folder with checkpoints.
        "$P" "${R[@]}" --checkpoint-dir "$d/ck" >/dev/null 2>"$d/err" </dev/null
        check "fresh run into a used folder: exit 2" test $? = 2 -a "$(grep -c 'already holds checkpoints' "$d/err")" = 1
        # A damaged newest checkpoint is skipped with a warning; the older one is used.
        printf 'x' | dd of="$d/ck/ckpt-0000000090.npz" bs=1 seek=5000 conv=notrunc 2>/dev/null
        "$P" "${R[@]}" --json --log "$d/a.jsonl" --resume "$d/ck" >"$d/b.json" 2>"$d/err" </dev/null
        rc=$?
        check "damaged newest checkpoint: skipped with a warning, exit 0 (got $rc)" \
            test $rc = 0 -a "$(grep -c 'warning: skipped damaged checkpoints: .*ckpt-0000000090.npz: SHA-256 differs' "$d/err")" = 1
        check "damaged newest checkpoint: resumed from the older one, result exact" \
            test "$(sha "$d/full.json")" = "$(sha "$d/b.json")" -a "$(grep -c '"resumed_from_step": 80' "$d/b.json")" = 1
        check "damaged newest checkpoint: log exact" cmp -s "$d/full.jsonl" "$d/a.jsonl"
        # Edited config: its hash no longer matches.
        sed -i 's/"batch": 64/"batch": 32/' "$d/ck0/ckpt-0000000090.json" "$d/ck0/ckpt-0000000080.json"
        "$P" "${R[@]}" --resume "$d/ck0" >/dev/null 2>"$d/err" </dev/null
        rc=$?
        check "edited checkpoints: none valid, exit 3 naming the reason (got $rc)" \
            test $rc = 3 -a "$(grep -c 'no valid checkpoint in .*config_sha256 does not match' "$d/err")" = 1
        rm -rf "$d/ck1" && mkdir "$d/ck1"
        "$P" "${R[@]}" --resume "$d/ck1" >/dev/null 2>"$d/err" </dev/null
        check "empty folder: exit 3, 'no checkpoint'" test $? = 3 -a "$(grep -c 'no checkpoint in' "$d/err")" = 1
        "$P" "${R[@]}" --resume "$d/none" >/dev/null 2>"$d/err" </dev/null
        check "missing folder: exit 3" test $? = 3
        "$P" "${R[@]}" --checkpoint-every 5 >/dev/null 2>"$d/err" </dev/null
        check "--checkpoint-every without a folder: exit 2" test $? = 2
        # --resume DIR alone: the checkpoint gives the config, the trainer,
        # the log (continued in place) and --steps/--epochs.
        RA=(train --steps 1000 --epochs 2 --seed 9 --lr 0.02 --batch 48 --model mlp:784-32-10
            --optim momentum --quiet)
        "$P" "${RA[@]}" --json --log "$d/fa.jsonl" >"$d/fa.json" 2>/dev/null </dev/null
        "$P" "${RA[@]}" --trainer omp --threads 2 --log "$d/ra.jsonl" --checkpoint-dir "$d/cka" \
            --checkpoint-every 100 >/dev/null 2>&1 </dev/null &
        pid=$!
        for i in $(seq 1 3000); do [ -e "$d/cka/ckpt-0000000100.json" ] && break; sleep 0.01; done
        kill -INT $pid
        wait $pid
        check "--resume DIR alone: the stopped run's log holds its steps, whole lines" \
            test "$(grep -c '"type":"step"' "$d/ra.jsonl")" -ge 100 -a \
            "$(tail -c 1 "$d/ra.jsonl" | od -An -c | tr -d ' ')" = '\n'
        PA=$(cd "$(dirname "$P")" && pwd)/$(basename "$P")
        (cd / && "$PA" train --resume "$d/cka" --json >"$d/ra.json" 2>"$d/err" </dev/null)
        rc=$?
        check "--resume DIR alone: exit 0 ($rc: $(head -n 1 "$d/err"))" test $rc = 0
        check "--resume DIR alone: the checkpoint's trainer, threads and --steps" \
            grep -q '"trainer": "omp", .*"threads": 2, .*"steps": 1000,' "$d/ra.json"
        check "--resume DIR alone: weights equal the uninterrupted run" \
            test -n "$(sha "$d/fa.json")" -a "$(sha "$d/fa.json")" = "$(sha "$d/ra.json")"
        check "--resume DIR alone: the log continued in place equals the uninterrupted one" \
            cmp -s "$d/fa.jsonl" "$d/ra.jsonl"
        # A typed flag that disagrees with the checkpoint: one line naming it and both values.
        "$P" train --resume "$d/cka" --batch 64 >/dev/null 2>"$d/err" </dev/null
        rc=$?
        check "--resume DIR --batch 64: exit 2, the flag and both values ($(head -n 1 "$d/err"))" \
            test $rc = 2 -a "$(grep -c "^parity train: $d/cka/ckpt-[0-9]*.json is from another run: --batch: checkpoint 48, this run 64$" "$d/err")" = 1 \
            -a "$(grep -c "^hint: leave the flag out to go on with the checkpoint's value" "$d/err")" = 1
        # Overrides: --steps/--epochs (with the rest from the checkpoint), and another trainer.
        "$P" "${RA[@]}" --steps 600 --log "$d/rb.jsonl" --checkpoint-dir "$d/ckb" >/dev/null 2>&1 </dev/null
        "$P" train --resume "$d/ckb" --steps 1000 --trainer serial --json >"$d/rb.json" 2>"$d/err" </dev/null
        check "--resume DIR --steps 1000 --trainer serial: goes on to step 1000, exact ($(head -n 1 "$d/err"))" \
            test "$(sha "$d/fa.json")" = "$(sha "$d/rb.json")" -a "$(grep -c '"resumed_from_step": 600' "$d/rb.json")" = 1
        check "--resume DIR --steps 1000: log exact" cmp -s "$d/fa.jsonl" "$d/rb.jsonl"
        # A log of parity before XXH3-128 step digests ("weights_sha256" step
        # lines, made here by renaming the field, of the same length, and
        # recording the log's new SHA-256 in the checkpoints) cannot be
        # continued: one line naming the log and the field expected.
        "$P" "${RA[@]}" --steps 200 --log "$d/ro.jsonl" --checkpoint-dir "$d/cko" \
            --checkpoint-every 100 >/dev/null 2>&1 </dev/null
        sed -i 's/"weights_xxh128"/"weights_sha256"/' "$d/ro.jsonl"
        python3 - "$d/cko" "$d/ro.jsonl" <<'PY'
import glob, hashlib, json, sys
for f in glob.glob(sys.argv[1] + "/ckpt-*.json"):
    j = json.load(open(f))
    j["log"]["sha256"] = hashlib.sha256(open(sys.argv[2], "rb").read()[:j["log"]["bytes"]]).hexdigest()
    json.dump(j, open(f, "w"), indent=2)
PY
        "$P" train --resume "$d/cko" --steps 300 >/dev/null 2>"$d/err" </dev/null
        rc=$?
        check "--resume with a log of SHA-256 step digests: exit 3, the log and the field named ($rc: $(head -n 1 "$d/err"))" \
            test $rc = 3 -a "$(grep -c "^parity train: .*ro.jsonl: its step lines carry \"weights_sha256\" .*expected \"weights_xxh128\"" "$d/err")" = 1
        check "--resume with a log of SHA-256 step digests: the log is left as it was" \
            test "$(grep -c '"weights_sha256"' "$d/ro.jsonl")" = 200
        # Two writers: the second is refused while the first holds the lock.
        "$P" train --epochs 4 --steps 3000 --quiet --checkpoint-dir "$d/ck2" >/dev/null 2>&1 </dev/null &
        pid=$!
        for i in $(seq 1 500); do [ -e "$d/ck2/.lock" ] && break; sleep 0.01; done
        sleep 0.3
        "$P" "${R[@]}" --resume "$d/ck2" >/dev/null 2>"$d/err" </dev/null
        rc=$?
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        check "second writer of a folder: refused (got $rc: $(head -n 1 "$d/err"))" \
            test $rc = 3 -a "$(grep -c 'in use by another run' "$d/err")" = 1
        ;;
    esac
done

finish
