// What `parity model` measures for the scaling model (sm_model.h) besides
// the model's own arithmetic: so far the cores' distance (sm_cores.c).
// Never prints. Tests: tests/test_timing.c.
#ifndef SM_MEASURE_H
#define SM_MEASURE_H

// The round trip of one cache line between two cores, in ns: two threads
// pinned to the first two CPUs of the calling thread's affinity mask pass
// it back and forth (C11 atomics, acquire/release) 200 times untimed, then
// 5 x 2000 times timed (a few ms in all); the median of the 5. About 100 ns
// between cores that share a cache, 400 between cores far apart: on a VM
// whose host moves its virtual CPUs it tells which placement the timings
// met. NAN when the mask holds fewer than two CPUs or a thread cannot be
// pinned.
double sm_core_round_trip_ns(void);

// Which of n measurements met near cores, when rt[k] holds the round trips
// read just before and just after measurement k: near[k] = 0 when either
// is over twice the fastest of all 2n readings; NAN readings tell nothing
// and count as near. Returns how many are near.
int sm_near_probes(const double (*rt)[2], int n, int near[]);

#endif
