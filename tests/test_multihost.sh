#!/usr/bin/env bash
# Multi-host MPI on one machine: three "hosts" are network namespaces joined
# by a bridge (10.200.0.1-3/24, private to the namespaces), mpirun reaches them
# through an rsh agent that enters the namespace with its own hostname
# (docs/DESIGN.md, section 7). Exact-mode mpi and hybrid runs across hosts must equal the
# reference bit for bit. Everything is torn down on exit, every run is bounded.
# Usage: test_multihost.sh PATH/TO/parity   (root; exits 77 = skipped without netns)
set -u
. "$(dirname "$0")/test_lib.sh"
P=$(readlink -f "$1")
T=$(mktemp -d)
NS="par_sw par_h1 par_h2 par_h3"

teardown() {
    for n in $NS; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
    for n in $NS; do ip netns del "$n" 2>/dev/null; done
    rm -rf "$T"
}
trap teardown EXIT

if [ "$(id -u)" != 0 ] || ! ip netns add par_probe 2>/dev/null; then
    echo "skipped: needs root and network namespaces (ip netns)"
    exit 77
fi
ip netns del par_probe
teardown 2>/dev/null
T=$(mktemp -d)

# The switch: a bridge in its own namespace; one veth per host.
ip netns add par_sw
ip -n par_sw link add br0 type bridge
ip -n par_sw link set br0 up
for i in 1 2 3; do
    ip netns add "par_h$i"
    ip link add "ph$i" netns "par_h$i" type veth peer name "sw$i" netns par_sw
    ip -n par_sw link set "sw$i" master br0 up
    ip -n "par_h$i" addr add "10.200.0.$i/24" dev "ph$i"
    ip -n "par_h$i" link set "ph$i" up
    ip -n "par_h$i" link set lo up
done

# mpirun's "ssh": skip options, map the address to its namespace, give the
# process that host's name (Open MPI names shared memory by hostname).
cat >"$T/agent.sh" <<'AGENT'
#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1
shift
n=${host##*.}
exec ip netns exec "par_h$n" unshare --uts sh -c "hostname h$n && exec $*"
AGENT
chmod +x "$T/agent.sh"
printf '10.200.0.1 slots=2\n10.200.0.2 slots=2\n10.200.0.3 slots=2\n' >"$T/hosts"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
COMMON="--steps 20 --batch 50 --chunk 7 --json --quiet --no-digest"
sha() { python3 -c "import json,sys; print(json.load(sys.stdin)['weights_sha256'])" 2>/dev/null; }
ref=$("$P" train --trainer reference $COMMON </dev/null | sha)

# across hosts: mpirun runs inside h1, TCP only between the namespaces
across() { # ranks per node, ranks, train flags...
    local ppn=$1 np=$2
    shift 2
    timeout 180 ip netns exec par_h1 unshare --uts sh -c "hostname h1 && exec mpirun \
        --hostfile $T/hosts -n $np --map-by ppr:$ppn:node --bind-to none \
        --mca plm_rsh_agent $T/agent.sh --mca oob_tcp_if_include 10.200.0.0/24 \
        --mca btl tcp,self,vader --mca btl_tcp_if_include 10.200.0.0/24 \
        --mca mpi_yield_when_idle 1 -x OMP_WAIT_POLICY -x PARITY_DATA -x HOME \
        $P train $* $COMMON" </dev/null 2>"$T/err" | sha
}
got=$(across 1 3 --trainer mpi)
check "mpi: 3 hosts x 1 rank, exact == reference" test -n "$ref" -a "$got" = "$ref"
[ "$got" = "$ref" ] || grep -v setpgid "$T/err" | head -5
got=$(across 2 4 --trainer mpi)
check "mpi: 2 hosts x 2 ranks, exact == reference" test -n "$ref" -a "$got" = "$ref"
[ "$got" = "$ref" ] || grep -v setpgid "$T/err" | head -5
got=$(across 1 3 --trainer hybrid --threads 2)
check "hybrid: 3 hosts x 1 rank x 2 threads, exact == reference" test -n "$ref" -a "$got" = "$ref"
[ "$got" = "$ref" ] || grep -v setpgid "$T/err" | head -5
got=$(across 1 2 --trainer root)
check "root: 2 hosts x 1 rank, exact == reference" test -n "$ref" -a "$got" = "$ref"

finish
