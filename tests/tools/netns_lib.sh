# Three "hosts" on one machine for MPI over TCP: network namespaces par_h1..3
# (10.200.0.1-3/24) joined by a bridge in namespace par_sw; mpirun reaches
# them through an rsh agent that enters the namespace with the host's own
# name (Open MPI names shared memory by hostname). Root only.
# Sourced by tests/tools/test_multihost.sh and bench/model_hosts.sh:
#   netns_up DIR        build the hosts; DIR gets the agent and a hostfile
#                       (returns 1 when namespaces cannot be made)
#   netns_mpirun DIR PPN NP CMD...   run CMD on NP ranks, PPN per host, from h1
#                       (killed after NETNS_TIMEOUT seconds, 180 by default)
#   netns_down          remove everything (idempotent)
NETNS_ALL="par_sw par_h1 par_h2 par_h3"

netns_down() {
    for n in $NETNS_ALL; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
    for n in $NETNS_ALL; do ip netns del "$n" 2>/dev/null; done
    return 0
}

netns_up() {
    local dir=$1
    ip netns add par_probe 2>/dev/null || return 1
    ip netns del par_probe
    netns_down
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
    # process that host's name.
    cat >"$dir/agent.sh" <<'AGENT'
#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1
shift
n=${host##*.}
exec ip netns exec "par_h$n" unshare --uts sh -c "hostname h$n && exec $*"
AGENT
    chmod +x "$dir/agent.sh"
    printf '10.200.0.1 slots=2\n10.200.0.2 slots=2\n10.200.0.3 slots=2\n' >"$dir/hosts"
}

# mpirun runs inside h1, TCP only between the namespaces.
netns_mpirun() {
    local dir=$1 ppn=$2 np=$3
    shift 3
    timeout "${NETNS_TIMEOUT:-180}" ip netns exec par_h1 unshare --uts sh -c "hostname h1 && exec mpirun \
        --hostfile $dir/hosts -n $np --map-by ppr:$ppn:node --bind-to none \
        --mca plm_rsh_agent $dir/agent.sh --mca oob_tcp_if_include 10.200.0.0/24 \
        --mca btl tcp,self,vader --mca btl_tcp_if_include 10.200.0.0/24 \
        --mca mpi_yield_when_idle 1 -x OMP_WAIT_POLICY -x PARITY_DATA -x HOME $*"
}
