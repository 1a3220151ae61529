#!/usr/bin/env bash
# What batchnorm's ordered statistics ring costs under MPI: the same CNN with
# and without its batchnorm layers, trainer mpi exact at R ranks, in one run.
# Prints the communication seconds per step of each (the gradient ring, plus
# the statistics ring where there is batchnorm: parity's comm_seconds_per_step,
# waiting included) and the difference per batchnorm layer per step.
# Prints figures; it is a benchmark, not a test.
# Usage: bench/bn_ring.sh [STEPS] [RANKS] [REPEATS]   (300 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-300}
R=${2:-2}
REPEATS=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=./build/parity
[ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
with=cnn:1x28x28-c16k3p1-bn-r-m2-c32k3p1-bn-r-m2-f-fc64-bn-r-fc10
without=${with//-bn/}
n_bn=$(grep -o -- '-bn' <<<"$with" | wc -l)

# Median over REPEATS of a field of `parity train --json`.
median() { # field model
    for _ in $(seq "$REPEATS"); do
        $P train --trainer mpi --ranks "$R" --dataset mnist --model "$2" --steps "$STEPS" \
            --batch 64 --json --quiet | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
    done | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

printf 'mpi exact, R=%d, %d steps of batch 64 on MNIST, median of %d runs\n' "$R" "$STEPS" "$REPEATS"
cw=$(median comm_seconds_per_step "$with")
co=$(median comm_seconds_per_step "$without")
bw=$(median bytes_sent_per_step "$with")
bo=$(median bytes_sent_per_step "$without")
printf '%-62s %12s %12s\n' model "comm ms/step" "bytes/step"
printf '%-62s %12.3f %12.0f\n' "$with" "$(python3 -c "print($cw * 1e3)")" "$bw"
printf '%-62s %12.3f %12.0f\n' "$without" "$(python3 -c "print($co * 1e3)")" "$bo"
python3 -c "print('statistics ring: %.1f us per batchnorm layer per step (%d layers, 3 exchanges each)'
                  % (($cw - $co) * 1e6 / $n_bn, $n_bn))"
