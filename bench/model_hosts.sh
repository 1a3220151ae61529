#!/usr/bin/env bash
# The scaling model against runs over TCP between hosts: three network
# namespaces on this machine (tests/tools/netns_lib.sh; root), one rank per host,
# `parity model --launcher` through them at R = 2 and 3. The hosts share this
# machine's cores, so the model is told so (--cores). Writes the model's
# output to bench/results/model_hosts.md (bench/results_lib.sh); a
# benchmark, not a test. On shared memory: bench/model.sh.
# Usage: bench/model_hosts.sh [extra parity model flags]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/model_hosts.sh: needs root (ip netns)" >&2; exit 1; }
. bench/results_lib.sh
bench_begin model_hosts "The scaling model against runs over TCP between namespace hosts" "$@"
bench_parity
. tests/tools/netns_lib.sh
BENCH_ON_EXIT=netns_down
netns_up "$T" || { echo "bench/model_hosts.sh: cannot make network namespaces" >&2; exit 1; }
export OMP_WAIT_POLICY=passive
# The launcher parity model calls with {R}: R ranks, one per host.
cat >"$T/launch.sh" <<LAUNCH
#!/usr/bin/env bash
. $(pwd)/tests/tools/netns_lib.sh
R=\$1
shift
NETNS_TIMEOUT=600 netns_mpirun $T 1 "\$R" "\$@"
LAUNCH
chmod +x "$T/launch.sh"
"$P" model --launcher "$T/launch.sh {R}" --cores "$(nproc)" --validate 2,3 "$@" >"$T/model"

report() {
    echo "\`parity model --launcher LAUNCH --cores $(nproc) --validate 2,3${*:+ $*}\`, LAUNCH"
    echo "running one rank on each of R network-namespace hosts of this machine"
    echo "(tests/tools/netns_lib.sh), connected over TCP: measured costs, the validation rows"
    echo "(negative error: the model predicted less time than the runs took) and the"
    echo "predicted strong scaling."
    echo
    echo '```'
    cat "$T/model"
    echo '```'
}
bench_write report "$@"
