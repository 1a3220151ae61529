#!/usr/bin/env bash
# Seconds per epoch of Fashion-MNIST (mlp:784-256-128-10, batch 64, f32) for
# serial, omp T=2, mpi R=2, hybrid 1x2 and 2x1, root R=2, exact and fast:
# medians of ROUNDS interleaved rounds (every round runs every config once, so
# a slow spell of a shared machine hits all of them alike); speedup over
# serial exact, exact/fast speed ratio, and the bytes one rank sends per step
# against 2 N sizeof(f32) of a ring allreduce; then where each config's step
# goes (phase_seconds, microseconds per step), and the cores' distance
# before each round (bench_cores: a VM's cores far apart slow two-core runs).
# Writes bench/results/trainers.md (bench/results_lib.sh); a benchmark, not a test.
# Usage: bench/trainers.sh [ROUNDS] [EPOCHS]   (3 rounds of 1 epoch)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/results_lib.sh
bench_begin trainers "Trainers: seconds per epoch, speedup, where a step goes" "$@"
ROUNDS=${1:-3}
EPOCHS=${2:-1}
# No config here has more threads than cores, so OpenMP keeps parity's own
# wait policy, a bounded spin (passive would add a futex wake to every
# parallel region; docs/performance.md, "Threads on a busy machine"; on a
# busy machine see bench/contention.sh).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }

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

report() {
python3 - "$T" "$ROUNDS" "$EPOCHS" "${CONFIGS[@]}" <<'PY'
import json, statistics, sys
d, rounds, epochs, configs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def runs(i, mode):
    return [json.load(open(f"{d}/{i}.{mode}.{r}.json")) for r in range(1, rounds + 1)]
N = runs(0, "exact")[0]["n_params"]
def s_epoch(j):
    return j["seconds"] / epochs
sec = {(i, m): statistics.median(s_epoch(j) for j in runs(i, m))
       for i in range(len(configs)) for m in ("exact", "fast")}
base = sec[(0, "exact")]
print(f"`parity train --epochs {epochs}` on Fashion-MNIST, {runs(0, 'exact')[0]['model']}, "
      f"batch 64, f32: the median of {rounds} interleaved rounds (every round runs every "
      "config once), the fastest round in brackets; speedup over serial exact; exact / fast "
      "is fast's seconds over exact's (above 1: exact is the faster); bytes one rank sends "
      f"per step, and that over 2 N sizeof(f32) = {2 * N * 4:,} (a ring allreduce's).")
print()
# A VM's host may move its two virtual CPUs apart (no shared cache): two-core
# runs are then slower. A round is "far" when its probe is over twice the
# fastest probe's; the medians of the near rounds alone follow when some were.
ns = [float(open(f"{d}/cores.{r}").read()) for r in range(1, rounds + 1)]
fin = [x for x in ns if x == x]
far = [x > 2 * min(fin) for x in ns] if fin else [False] * rounds
print("Core-to-core round trip before each round (`bench_cores`): " +
      ", ".join("%.0f ns" % x for x in ns) +
      ("; far rounds (over twice the fastest): %d of %d." % (sum(far), rounds) if any(far)
       else "; every round near." if len(fin) > 1 else "."))
print()
print("| config | exact s/epoch | fast s/epoch | speedup, exact | speedup, fast "
      "| exact / fast | bytes/step, exact | bytes/step, fast |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
def cell(i, m):
    return "%.3f (%.3f)" % (sec[(i, m)], min(s_epoch(j) for j in runs(i, m)))
def sent(i, m):
    b = runs(i, m)[0].get("bytes_sent_per_step", 0)
    return "%s (%.3fx)" % (f"{b:,.0f}", b / (2 * N * 4)) if b else "0"
for i, c in enumerate(configs):
    print("| %s | %s | %s | %.2fx | %.2fx | %.2f | %s | %s |" % (
        c, cell(i, "exact"), cell(i, "fast"), base / sec[(i, "exact")],
        base / sec[(i, "fast")], sec[(i, "fast")] / sec[(i, "exact")],
        sent(i, "exact"), sent(i, "fast")))
near = [r for r in range(rounds) if not far[r]]
if any(far) and near:
    nb = statistics.median(s_epoch(runs(0, "exact")[r]) for r in near)
    print()
    print("The near rounds alone (%d of %d), medians:" % (len(near), rounds))
    print()
    print("| config | exact s/epoch | fast s/epoch | speedup, exact |")
    print("|---|--:|--:|--:|")
    for i, c in enumerate(configs):
        e, f = (statistics.median(s_epoch(runs(i, m)[r]) for r in near) for m in ("exact", "fast"))
        print("| %s | %.3f | %.3f | %.2fx |" % (c, e, f, nb / e))

# Where a step goes: the median over the rounds of each phase of
# phase_seconds (rank 0's, the master thread's), in microseconds per step.
phases = list(runs(0, "exact")[0]["phase_seconds"])
print()
print("Where a step goes: `phase_seconds` of rank 0's master thread, microseconds per step, "
      "medians over the rounds.")
print()
print("| config | mode | " + " | ".join(phases) + " |")
print("|---|---|" + "--:|" * len(phases))
for i, c in enumerate(configs):
    for m in ("exact", "fast"):
        js = runs(i, m)
        us = [statistics.median(1e6 * j["phase_seconds"][p] / j["steps"] for j in js)
              for p in phases]
        print("| %s | %s | " % (c, m) + " | ".join("%.1f" % u for u in us) + " |")
PY
}
bench_write report
