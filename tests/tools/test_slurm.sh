#!/usr/bin/env bash
# Slurm on one machine: a private munged, slurmctld and slurmd (all as root, conf, key, state and
# logs in a temporary folder, ports of their own, nothing under /etc touched), then one sbatch
# job of 2 tasks that runs parity as users do: `mpirun` with the count it reads from the
# allocation, and `srun --mpi=pmix`. Both must equal --trainer reference bit for bit, the job
# must end COMPLETED, and a failing job must be seen to fail. Every daemon is stopped and the
# folder removed on exit; every wait is bounded. About 15 s (most of it sbatch --wait, which
# polls the job after 2 s, then every 8-10 s).
# Usage: test_slurm.sh PATH/TO/parity   (root, slurm-wlm and munge; exits 77 = skipped without)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$(readlink -f "$1")
pids=()
T=

teardown() {
    # A job still queued or running is cancelled while slurmctld can still do it.
    if [ -n "${job:-}" ] && [ ${#pids[@]} = 3 ]; then
        scancel "$job" 2>/dev/null
        for _ in $(seq 20); do [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break; sleep 0.5; done
    fi
    # slurmd, slurmctld, munged: the processes this script started, by their ids.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
    for p in "${pids[@]}"; do
        for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    [ -n "$T" ] && rm -rf "$T"
}
trap teardown EXIT
trap 'exit 1' INT TERM

skip() {
    echo "skipped: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (slurmd and munged run as root here)"
for c in munged slurmctld slurmd sbatch sinfo scontrol squeue scancel; do
    command -v "$c" >/dev/null || skip "$c not found (apt-get install slurm-wlm munge)"
done
[ "$(nproc)" -ge 2 ] || skip "a 2-task job needs 2 CPUs, this machine has $(nproc)"

T=$(mktemp -d)
chmod 755 "$T" # munged wants its socket's folder searchable by all
H=$(hostname -s)
port=$((17000 + $$ % 4000 * 2)) # slurmctld's, slurmd's the next: not a real Slurm's 6817/6818
export SLURM_CONF=$T/slurm.conf
mkdir "$T/state" "$T/spool"
# A private munge key, socket, pid and seed file: /etc/munge and /run/munge stay as they are.
head -c 128 /dev/urandom >"$T/munge.key"
chmod 400 "$T/munge.key"
# No cgroups (a container has none to give): processes tracked through /proc, no task
# binding; no accounting daemon, so the job's state comes from scontrol, not sacct.
cat >"$SLURM_CONF" <<EOF
ClusterName=parity
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge.sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$H NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=parity Nodes=$H Default=YES MaxTime=5 State=UP
EOF

munged -F --key-file="$T/munge.key" --socket="$T/munge.sock" --pid-file="$T/munged.pid" \
    --seed-file="$T/munged.seed" --log-file="$T/munged.log" 2>>"$T/munged.log" &
pids+=($!)
slurmctld -D -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$H" >"$T/slurmd.out" 2>&1 &
pids+=($!)
# Up when the node is idle (a second or two); skip, with the daemons' last words, when one of
# them exits or 30 s pass (sinfo retries an absent slurmctld for 9 s: each call is bounded).
state=
while [ "$state" != idle ] && [ "$SECONDS" -lt 30 ]; do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || break 2; done
    sleep 0.25
    state=$(timeout 2 sinfo -h -n "$H" -o %t 2>/dev/null)
done
if [ "$state" != idle ]; then
    tail -n 3 "$T"/munged.log "$T"/slurm*.out
    skip "Slurm did not start: the node is not idle ('$state') after ${SECONDS} s (logs above)"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
ARGS="--dataset fashion-mnist --steps 30 --batch 50 --chunk 7 --json --quiet"
# field KEY FILE: KEY of the JSON object in FILE (empty when there is none).
field() {
    python3 -c "import json,sys; print(json.load(open(sys.argv[2]))[sys.argv[1]])" "$@" 2>/dev/null
}
"$P" train --trainer reference $ARGS >"$T/ref.json" </dev/null
ref=$(field weights_sha256 "$T/ref.json")

# The job: its allocation as the script sees it, then the two launchers, one JSON each.
cat >"$T/job.sh" <<EOF
#!/bin/bash
echo "tasks=\$SLURM_NTASKS nodes=\$SLURM_JOB_NUM_NODES"
mpirun --bind-to none $P train --trainer mpi $ARGS >$T/mpirun.json || exit 1
srun --mpi=pmix $P train --trainer mpi $ARGS >$T/srun.json
EOF
job=$(timeout 60 sbatch --parsable --wait -N1 -n2 -t 2 -D "$T" -o "$T/job.out" "$T/job.sh")
rc=$?
check "sbatch --wait -N1 -n2: the job exits 0" test "$rc" = 0
[ "$rc" = 0 ] || tail -n 5 "$T/job.out"
check "the job's state is COMPLETED, exit code 0:0" \
    grep -Eq 'JobState=COMPLETED .*ExitCode=0:0' <(scontrol show job "$job" | tr '\n' ' ')
check "the job ran 2 tasks on 1 node" grep -qx 'tasks=2 nodes=1' "$T/job.out"
for l in mpirun srun; do
    check "$l in the allocation: 2 ranks" test "$(field ranks "$T/$l.json")" = 2
    check "$l in the allocation: weights_sha256 == reference (${ref:0:12})" \
        test -n "$ref" -a "$(field weights_sha256 "$T/$l.json")" = "$ref"
done

# The negative control: a job that fails is seen to fail, by sbatch and by its state.
job=$(timeout 30 sbatch --parsable --wait -n1 -t 1 -D "$T" -o /dev/null --wrap 'exit 3')
check "a job that exits 3: sbatch --wait exits 3" test $? = 3
check "... and its state is FAILED, exit code 3:0" \
    grep -Eq 'JobState=FAILED .*ExitCode=3:0' <(scontrol show job "$job" | tr '\n' ' ')

finish
