#!/usr/bin/env bash
# The binary's OpenMP wait policy (src/cli/omp_wait.c): with neither
# GOMP_SPINCOUNT nor OMP_WAIT_POLICY set it re-executes itself once with
# GOMP_SPINCOUNT bounded; a value the user set is what libgomp uses, with no
# re-exec; the processes it starts see the user's environment again; and the
# weights are the same bits on 1 and 2 threads under the policy.
# libgomp prints its settings (OMP_DISPLAY_ENV) each time it loads: the
# number of blocks is the number of executions.
# Usage: test_omp_wait.sh PATH/TO/parity   (needs fashion-mnist: data/fetch.sh)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
P=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GOMP_SPINCOUNT OMP_WAIT_POLICY PARITY_OMP_SPIN_SET
cli_h=$(dirname "$0")/../../src/cli/cli.h
spin=$(sed -n 's/^#define CLI_OMP_SPINCOUNT "\([0-9]*\)"$/\1/p' "$cli_h")

# blocks ENV...: runs `parity version` with OMP_DISPLAY_ENV=verbose; prints
# the number of executions and libgomp's GOMP_SPINCOUNT in the last one.
blocks() {
    env "$@" OMP_DISPLAY_ENV=verbose "$P" version >/dev/null 2>"$T/env"
    echo "$(grep -c 'OPENMP DISPLAY ENVIRONMENT BEGIN' "$T/env")" \
         "$(grep "GOMP_SPINCOUNT = " "$T/env" | tail -n 1 | sed "s/.*= '\(.*\)'/\1/")"
}

check "CLI_OMP_SPINCOUNT is read from cli.h" test -n "$spin"
check "nothing set: one re-exec, GOMP_SPINCOUNT=$spin" test "$(blocks X=1)" = "2 $spin"
check "GOMP_SPINCOUNT=12345 kept, no re-exec" test "$(blocks GOMP_SPINCOUNT=12345)" = "1 12345"
check "OMP_WAIT_POLICY=passive kept (spin 0), no re-exec" \
    test "$(blocks OMP_WAIT_POLICY=passive)" = "1 0"
check "OMP_WAIT_POLICY=active kept, no re-exec" \
    test "$(blocks OMP_WAIT_POLICY=active)" = "1 30000000000"
check "the re-executed process does not re-execute (marker set)" \
    test "$(blocks PARITY_OMP_SPIN_SET=1)" = "1 300000"

# The ranks of --ranks 2 see the user's environment: each decides, and
# re-executes, for itself (1 + 1 for the launcher, 2 + 2 for the ranks).
if "$P" version 2>/dev/null | grep -q '^MPI: *Open MPI'; then
    OMP_DISPLAY_ENV=true "$P" train --trainer mpi --ranks 2 --steps 1 --quiet >/dev/null 2>"$T/env"
    check "--ranks 2: the ranks re-execute themselves (6 executions)" \
        test "$(grep -c 'OPENMP DISPLAY ENVIRONMENT BEGIN' "$T/env")" = 6
fi

# The same bits on 1 and 2 threads under the policy (no OMP_WAIT_POLICY here).
sha() { "$P" train "$@" --steps 30 --json --quiet | sed -n 's/.*"weights_sha256": "\([0-9a-f]*\)".*/\1/p'; }
a=$(sha --trainer serial)
b=$(sha --trainer omp --threads 2)
check "serial and omp T=2 weights the same bits under the bounded spin" test -n "$a" -a "$a" = "$b"

# --fixed-threads: every step on T threads (what verify's timed rows use),
# the same bits; without it --json counts the steps run on one thread.
"$P" train --trainer omp --threads 2 --fixed-threads --steps 30 --json --quiet >"$T/f.json"
c=$(sed -n 's/.*"weights_sha256": "\([0-9a-f]*\)".*/\1/p' "$T/f.json")
check "omp T=2 --fixed-threads: the same bits" test -n "$c" -a "$c" = "$a"
check "omp T=2 --fixed-threads: no steps_one_thread count" \
    python3 -c "import json,sys; sys.exit('steps_one_thread' in json.load(open('$T/f.json')))"
"$P" train --trainer omp --threads 2 --steps 30 --json --quiet >"$T/a.json"
check "omp T=2 adaptive: --json counts steps_one_thread (0..30)" \
    python3 -c "import json,sys; n=json.load(open('$T/a.json'))['steps_one_thread']; sys.exit(not 0 <= n <= 30)"
"$P" train --trainer omp --threads 2 --fixed-threads --no-such-flag >/dev/null 2>&1
check "an unknown flag beside --fixed-threads is refused" test $? = 2
finish
