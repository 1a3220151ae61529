// The statistics of `parity verify`'s timings (docs/table.md, "Timings"):
// per config the median of its timed runs and, as MLPerf Training scores a
// benchmark, the fastest and the slowest run dropped before the mean and
// the coefficient of variation (shown, never a veto); a speedup as the
// median of the rounds' own speedups (baseline over row, run in the same
// round) with its 95% percentile bootstrap interval over the rounds; which
// rounds a two-core row's speedup uses when the cores moved (those of the
// placement most of its runs met);
// the NOISY rule (an interval too wide to quote) and the stopping rule of
// adaptive rounds. Pure functions of the runs, with a fixed seed: a table
// can be recomputed from the raw seconds in results.json.
// Tests: tests/verify/test_timing.c.
#ifndef VF_STATS_H
#define VF_STATS_H

#include <stdint.h>

#include "par_status.h"

enum {
    VF_TRIM_MIN_RUNS = 5,     // from this many runs on, the fastest and slowest are dropped
    VF_CV_MIN_RUNS = 3,       // fewer runs kept: no CV
    VF_BOOT_RESAMPLES = 10000,
    VF_PLACEMENT_MIN_ROUNDS = 5, // a two-core row keeps to one placement from this many rounds
    VF_ADAPT_MIN_ROUNDS = 5,  // adaptive rounds: no row is settled before this many
};
// NOISY: the speedup's interval is wider than +-10% of it, e.g. [1.50, 1.90]
// around 1.70: too wide to quote a number.
#define VF_NOISY_HALF_WIDTH 0.10
#define VF_BOOT_SEED UINT64_C(20261125)     // splitmix64's seed for every interval

typedef struct vf_time_stats {
    int n;                    // timed runs
    double median, min, max;  // over all n (dropping one fastest and one slowest run
                              // leaves the median as it is)
    int n_kept;               // n - 2 when n >= VF_TRIM_MIN_RUNS, else n
    double mean_kept;         // the mean of the kept runs (MLPerf's score)
    double cv_kept;           // their sample standard deviation / mean_kept;
                              // NAN when n_kept < VF_CV_MIN_RUNS
} vf_time_stats;

// The statistics of n >= 1 run times (seconds, > 0; any order).
// PAR_ERR_CONFIG for n < 1 or a time that is not a positive finite number,
// PAR_ERR_ALLOC when out of memory.
par_status vf_time_stats_of(vf_time_stats *st, const double *sec, int n);

// The speedup: the median over the n >= 2 rounds of base[i] / x[i] (round
// i's runs: its own speedup), and its two-sided 95% confidence interval
// [*lo, *hi] by a percentile bootstrap: each of `resamples` resamples
// draws n rounds with replacement (splitmix64 from `seed`, index = output
// mod n) and takes the median of their speedups; *lo and *hi are the
// sorted medians at 0-based positions floor(0.025 resamples) and
// resamples - 1 - floor(0.025 resamples). A round's two runs are seconds
// apart: what the machine did to both cancels in their ratio.
par_status vf_speedup_ci(double *speedup, double *lo, double *hi, const double *base,
                         const double *x, int n, int resamples, uint64_t seed);

// Which rounds of a row a speedup uses (vf_speedup_rounds).
typedef enum vf_placement {
    VF_ROUNDS_ALL,            // every round
    VF_ROUNDS_NEAR,           // only those whose run met the cores near
    VF_ROUNDS_FAR,            // only those whose run met them far
} vf_placement;

// The speedup of one row against the baseline, as the table reports it.
typedef struct vf_speedup {
    int n;                    // rounds it is computed from
    vf_placement placement;   // which of the row's rounds those are
    double speedup, lo, hi;   // the median of those rounds' base / x; 95% interval
                              // (lo = hi = NAN with one round: no interval)
    double half_width;        // (hi - lo) / (2 speedup): the interval's relative half-width
    int significant;          // the interval excludes 1 (lo > 1 or hi < 1)
    int noisy;                // half_width > VF_NOISY_HALF_WIDTH: no number is quoted
} vf_speedup;

// Which of a row's n rounds its speedup uses (use[k] = 1): all of them,
// except for a row on two cores or more (cores >= 2) whose runs met both
// placements of the cores (near[k]: run k's probes before and after it
// read the nearest placement, sm_near_probes): then only the rounds of the
// placement most of them met (far on a tie), provided there are at least
// VF_PLACEMENT_MIN_ROUNDS of them. The two placements are two different
// machines for a two-core run, faster or slower depending on the step
// (docs/table.md), and a median over a mix of them says neither. Returns how
// many rounds are used and sets *placement.
int vf_speedup_rounds(int *use, vf_placement *placement, const int *near, int n, int cores);

// The speedup of x against base over the rounds with use[k] set (base[k],
// x[k]: round k's runs; n rounds, at least one used): vf_speedup_ci over
// those rounds when there are two or more, the NOISY and n.s. rules.
// PAR_ERR_CONFIG when no round is used, PAR_ERR_ALLOC when out of memory.
par_status vf_speedup_of(vf_speedup *e, const double *base, const double *x, const int *use,
                         int n, vf_placement placement);

// The speedup of a row from the runs as verify records them: the
// baseline's run i took base_sec[i] in round base_round[i] (nb runs), the
// row's run j x_sec[j] in round x_round[j], with x_near[j] its placement
// (nx runs); the row runs on `cores` cores. Each of the row's runs is
// paired with the baseline's run of the same round (a run without one is
// left out), then vf_speedup_rounds and vf_speedup_of. Rounds are listed
// in ascending order on both sides. PAR_ERR_CONFIG when no round pairs.
par_status vf_row_speedup(vf_speedup *e, const double *base_sec, const int *base_round, int nb,
                          const double *x_sec, const int *x_round, const int *x_near, int nx,
                          int cores);

#endif
