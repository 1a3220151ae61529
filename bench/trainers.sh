#!/usr/bin/env bash
# Seconds per epoch of Fashion-MNIST (mlp:784-256-128-10, batch 64, f32) for
# serial, omp T=2, mpi R=2, hybrid 1x2 and 2x1, root R=2, exact and fast:
# medians of ROUNDS interleaved rounds (every round runs every config once, so
# a slow spell of a shared machine hits all of them alike); speedup over
# serial exact, exact/fast speed ratio, and the bytes one rank sends per step
# against 2 N sizeof(f32) of a ring allreduce; then where each config's step
# goes (phase_seconds, microseconds per step), and the cores' distance
# before each round (bench_cores: a VM's cores far apart slow two-core runs).
# Prints figures; it is a benchmark, not a test.
# Usage: bench/trainers.sh [ROUNDS] [EPOCHS]   (3 rounds of 1 epoch)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
EPOCHS=${2:-1}
# No config here has more threads than cores, so OpenMP keeps parity's own
# wait policy, a bounded spin (passive would add a futex wake to every
# parallel region; docs/performance.md, "Threads on a busy machine"; on a
# busy machine see bench/contention.sh).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

CONFIGS=("serial" "omp --threads 2" "mpi --ranks 2" "hybrid --ranks 1 --threads 2"
         "hybrid --ranks 2 --threads 1" "root --ranks 2")
C=./build/bench_cores   # the cores' distance before each round (bench/cores.c)
[ -x "$C" ] || cmake --build build --target bench_cores >/dev/null
for r in $(seq 1 "$ROUNDS"); do
    "$C" >"$T/cores.$r"
    for i in "${!CONFIGS[@]}"; do
        for mode in exact fast; do
            # shellcheck disable=SC2086
            $P train --trainer ${CONFIGS[$i]} --mode $mode --epochs "$EPOCHS" --json --quiet \
                >"$T/$i.$mode.$r.json"
        done
    done
    echo "round $r of $ROUNDS done" >&2
done

python3 - "$T" "$ROUNDS" "$EPOCHS" "${CONFIGS[@]}" <<'PY'
import json, statistics, sys
d, rounds, epochs, configs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
N = 235146
def runs(i, mode):
    return [json.load(open(f"{d}/{i}.{mode}.{r}.json")) for r in range(1, rounds + 1)]
sec = {(i, m): statistics.median(j["seconds"] / epochs for j in runs(i, m))
       for i in range(len(configs)) for m in ("exact", "fast")}
base = sec[(0, "exact")]
print(f"medians of {rounds} interleaved rounds, {epochs} epoch(s) each")
# A VM's host may move its two virtual CPUs apart (no shared cache): two-core
# runs are then slower. A round is "far" when its probe is over twice the
# fastest probe's; the medians of the near rounds alone follow when some were.
ns = [float(open(f"{d}/cores.{r}").read()) for r in range(1, rounds + 1)]
fin = [x for x in ns if x == x]
far = [x > 2 * min(fin) for x in ns] if fin else [False] * rounds
print("core-to-core round trip before each round (ns): " + ", ".join("%.0f" % x for x in ns) +
      ("; far rounds: %d of %d" % (sum(far), rounds) if any(far) else ""))
near = [r for r in range(rounds) if not far[r]]
if any(far) and near:
    print("near rounds only (%d), s/epoch:" % len(near))
    for i, c in enumerate(configs):
        print("  %-30s" % c + "".join(
            "  %s %.3f" % (m, statistics.median(runs(i, m)[r]["seconds"] / epochs for r in near))
            for m in ("exact", "fast")))
print("%-30s %-6s %9s %9s %9s %13s %9s" % ("config", "mode", "s/epoch", "min", "speedup",
                                           "bytes/step", "vs 2N*4"))
for i, c in enumerate(configs):
    for m in ("exact", "fast"):
        js = runs(i, m)
        b = js[0].get("bytes_sent_per_step", 0)
        lo = min(j["seconds"] / epochs for j in js)
        print("%-30s %-6s %9.3f %9.3f %8.2fx %13.0f %8.3fx" % (c, m, sec[(i, m)], lo,
              base / sec[(i, m)], b, b / (2 * N * 4)))
    print("%-30s exact/fast speed ratio %.2f" % (c, sec[(i, "fast")] / sec[(i, "exact")]))

# Where a step goes: the median over the rounds of each phase of
# phase_seconds (rank 0's, the master thread's), in microseconds per step.
phases = list(runs(0, "exact")[0]["phase_seconds"])
print("\nper-phase profile, us per step (medians; %s)" % ", ".join(phases))
print("%-30s %-6s" % ("config", "mode") + "".join(" %7s" % p[:7] for p in phases))
for i, c in enumerate(configs):
    for m in ("exact", "fast"):
        js = runs(i, m)
        us = [statistics.median(1e6 * j["phase_seconds"][p] / j["steps"] for j in js)
              for p in phases]
        print("%-30s %-6s" % (c, m) + "".join(" %7.1f" % u for u in us))
PY
