#!/usr/bin/env bash
# Rewrites every results file of bench/results/ (bench/README.md): builds
# parity, then runs the bench scripts one after another, each writing its
# own file with its provenance. The default sizes take about 10 minutes on 2
# quiet cores; --rounds N gives every script that repeats its runs N rounds
# (more: narrower medians, longer); --smoke runs each at its smallest size
# (a check that every script writes its file; the figures mean little);
# --verify adds the main job's signed table (`parity verify default`, about
# 15 minutes more), --studies the studies' (`parity verify studies`, about
# 25 minutes more); --only NAME,... runs those alone. A script that fails is
# reported and the others still run; the exit status is 1 if one failed.
# Then README.md's table of current figures is rewritten from the files
# (bench/readme_figures.py; not after --smoke).
# bench/model_hosts.sh needs root and iproute2: skipped otherwise.
# Usage: bench/run-all.sh [--rounds N] [--smoke] [--verify] [--studies] [--only NAMES]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=
SMOKE=0
STUDIES=0
VERIFY=0
ONLY=
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=${2:?--rounds N}; shift ;;
    --smoke) SMOKE=1 ;;
    --studies) STUDIES=1 ;;
    --verify) VERIFY=1 ;;
    --only) ONLY=${2:?--only NAME,...}; shift ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/run-all.sh: unknown flag $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done
case $ROUNDS in '' | [1-9] | [1-9][0-9]) ;; *) echo "--rounds: expected 1-99" >&2; exit 2 ;; esac

# name: the script's arguments at the default size, and at --smoke.
declare -A ARGS SMALL
ARGS[trainers]="${ROUNDS:-3} 1"              SMALL[trainers]="1 1"
ARGS[kernels]="300"                           SMALL[kernels]="30"
ARGS[layers]="15"                             SMALL[layers]="3"
ARGS[log]="${ROUNDS:-7}"                      SMALL[log]="1"
ARGS[contention]="${ROUNDS:-7} 400"           SMALL[contention]="1 100"
ARGS[vs_pytorch]="${ROUNDS:-3} mlp"           SMALL[vs_pytorch]="1 mlp"
ARGS[bn_ring]="300 2 ${ROUNDS:-3}"            SMALL[bn_ring]="30 2 1"
ARGS[model]=""                                SMALL[model]="--steps 30"
ARGS[model_hosts]=""                          SMALL[model_hosts]="--steps 30"
ARGS[studies]="studies"                       SMALL[studies]="studies-quick"
ARGS[verify]="default"                        SMALL[verify]="quick"
ARGS[external]="5"                            SMALL[external]="1"
NAMES=(trainers kernels layers log contention vs_pytorch bn_ring model model_hosts external)
[ "$VERIFY" = 0 ] || NAMES+=(verify)
[ "$STUDIES" = 0 ] || NAMES+=(studies)
[ -z "$ONLY" ] || IFS=, read -r -a NAMES <<<"$ONLY"
for name in "${NAMES[@]}"; do
    [ -n "${ARGS[$name]+x}" ] || { echo "bench/run-all.sh: no bench named $name" >&2; exit 2; }
done

cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target parity bench_peak bench_cores bench_layers >/dev/null

failed=()
start=$(date +%s)
for name in "${NAMES[@]}"; do
    if [ "$name" = model_hosts ] && { [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; }; then
        echo "== model_hosts: skipped (needs root and ip); bench/results/model_hosts.md left as it is"
        continue
    fi
    args=${ARGS[$name]}
    [ "$SMOKE" = 0 ] || args=${SMALL[$name]}
    echo "== bench/$name.sh $args   ($(($(date +%s) - start)) s so far)"
    # shellcheck disable=SC2086
    if ! "bench/$name.sh" $args >/dev/null; then
        failed+=("$name")
        echo "== $name FAILED; its results file is left as it was" >&2
    fi
done
# README.md's table of current figures, from the files just written.
[ "$SMOKE" = 1 ] || /usr/bin/python3 bench/readme_figures.py
echo "== done in $(($(date +%s) - start)) s: bench/results/"
[ ${#failed[@]} = 0 ] || { echo "failed: ${failed[*]}" >&2; exit 1; }
