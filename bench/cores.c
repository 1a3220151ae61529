// Prints the round trip of a cache line between the first two CPUs of this
// process's affinity mask, in ns (sm_core_round_trip_ns), or "nan" when
// there are fewer than two. On a VM whose host moves its virtual CPUs the
// figure tells whether two-core timings ran on cores that share a cache
// (the faster round trips) or far apart (several times slower, and so are
// two-core runs: bench/results/trainers.md).
// bench/trainers.sh records it before every round. A benchmark helper.
#include <stdio.h>

#include "sm_measure.h"

int main(void)
{
    printf("%.0f\n", sm_core_round_trip_ns());
    return 0;
}
