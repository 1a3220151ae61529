#!/usr/bin/env bash
# Multi-host MPI on one machine: three "hosts" are network namespaces joined
# by a bridge (10.200.0.1-3/24, private to the namespaces), mpirun reaches them
# through an rsh agent that enters the namespace with its own hostname
# (docs/DESIGN.md, section 7). Exact-mode mpi and hybrid runs across hosts must equal the
# reference bit for bit. Everything is torn down on exit, every run is bounded.
# Usage: test_multihost.sh PATH/TO/parity   (root; exits 77 = skipped without netns)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$(readlink -f "$1")
T=$(mktemp -d)
. "$(dirname "$0")/netns_lib.sh"

teardown() {
    netns_down
    rm -rf "$T"
}
trap teardown EXIT

if [ "$(id -u)" != 0 ] || ! netns_up "$T"; then
    echo "skipped: needs root and network namespaces (ip netns)"
    exit 77
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
COMMON="--steps 20 --batch 50 --chunk 7 --json --quiet --no-digest"
sha() { python3 -c "import json,sys; print(json.load(sys.stdin)['weights_sha256'])" 2>/dev/null; }
ref=$("$P" train --trainer reference $COMMON </dev/null | sha)

# across hosts: mpirun runs inside h1, TCP only between the namespaces
across() { # ranks per node, ranks, train flags...
    local ppn=$1 np=$2
    shift 2
    netns_mpirun "$T" "$ppn" "$np" "$P" train "$@" $COMMON </dev/null 2>"$T/err" | sha
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
