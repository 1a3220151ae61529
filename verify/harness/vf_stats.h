// The statistics of `parity verify`'s timings (docs/table.md, "Timings"):
// per config the median of its timed runs; as MLPerf Training scores a
// benchmark, the fastest and the slowest run dropped before the mean and
// the coefficient of variation; the NOISY rule; and the 95% confidence
// interval of a speedup by a paired percentile bootstrap over the rounds.
// Pure functions of the runs, with a fixed seed: a table can be recomputed
// from the raw seconds in results.json. Tests: tests/test_timing.c.
#ifndef VF_STATS_H
#define VF_STATS_H

#include <stdint.h>

#include "par_status.h"

enum {
    VF_TRIM_MIN_RUNS = 5,     // from this many runs on, the fastest and slowest are dropped
    VF_CV_MIN_RUNS = 3,       // fewer runs kept: the noise is not judged (no CV, never NOISY)
    VF_BOOT_RESAMPLES = 10000,
};
#define VF_NOISY_CV 0.05                    // a row whose CV is above this is NOISY
#define VF_BOOT_SEED UINT64_C(20261125)     // splitmix64's seed for every interval

typedef struct vf_time_stats {
    int n;                    // timed runs
    double median, min, max;  // over all n (dropping one fastest and one slowest run
                              // leaves the median as it is)
    int n_kept;               // n - 2 when n >= VF_TRIM_MIN_RUNS, else n
    double mean_kept;         // the mean of the kept runs (MLPerf's score)
    double cv_kept;           // their sample standard deviation / mean_kept;
                              // NAN when n_kept < VF_CV_MIN_RUNS
    int noisy;                // cv_kept > VF_NOISY_CV
} vf_time_stats;

// The statistics of n >= 1 run times (seconds, > 0; any order).
// PAR_ERR_CONFIG for n < 1 or a time that is not a positive finite number,
// PAR_ERR_ALLOC when out of memory.
par_status vf_time_stats_of(vf_time_stats *st, const double *sec, int n);

// The speedup median(base) / median(x) and its two-sided 95% confidence
// interval [*lo, *hi] by a paired percentile bootstrap: base[i] and x[i]
// are the i-th round's runs (n >= 2 rounds each); each of `resamples`
// resamples draws n round indices with replacement (splitmix64 from
// `seed`, index = output mod n) and takes median(base) / median(x) over
// them; *lo and *hi are the sorted ratios at 0-based positions
// floor(0.025 resamples) and resamples - 1 - floor(0.025 resamples).
// Pairing keeps what one round's drift did to both configs together.
par_status vf_speedup_ci(double *speedup, double *lo, double *hi, const double *base,
                         const double *x, int n, int resamples, uint64_t seed);

#endif
