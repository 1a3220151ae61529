// Timing statistics (vf_stats.h): median, MLPerf's trimmed mean and the
// coefficient of variation of the kept runs, the NOISY rule, and the paired
// percentile bootstrap of a speedup's 95% confidence interval.
#include "vf_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par_sort.h"

par_status vf_time_stats_of(vf_time_stats *st, const double *sec, int n)
{
    memset(st, 0, sizeof *st);
    PAR_FAIL_IF(n < 1, PAR_ERR_CONFIG, "timing statistics of %d runs: expected at least 1", n);
    for (int i = 0; i < n; i++)
        PAR_FAIL_IF(!(sec[i] > 0) || !isfinite(sec[i]), PAR_ERR_CONFIG,
                    "timing statistics: run %d took %g s, expected a positive number", i + 1,
                    sec[i]);
    double *x = malloc((size_t)n * sizeof *x);
    PAR_FAIL_IF(!x, PAR_ERR_ALLOC, "out of memory");
    memcpy(x, sec, (size_t)n * sizeof *x);
    st->n = n;
    st->median = par_median_sort(x, n);
    st->min = x[0];
    st->max = x[n - 1];
    // MLPerf Training drops the fastest and the slowest run before it
    // averages: one run disturbed by something else on the machine (or one
    // lucky run) then moves neither the score nor the CV.
    const int drop = n >= VF_TRIM_MIN_RUNS;
    const double *k = x + drop;
    st->n_kept = n - 2 * drop;
    double sum = 0;
    for (int i = 0; i < st->n_kept; i++) sum += k[i];
    st->mean_kept = sum / st->n_kept;
    st->cv_kept = NAN;
    if (st->n_kept >= VF_CV_MIN_RUNS) {
        double ss = 0;
        for (int i = 0; i < st->n_kept; i++) ss += (k[i] - st->mean_kept) * (k[i] - st->mean_kept);
        st->cv_kept = sqrt(ss / (st->n_kept - 1)) / st->mean_kept;
    }
    st->noisy = st->cv_kept > VF_NOISY_CV;   // false for NAN
    free(x);
    return PAR_OK;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

par_status vf_speedup_ci(double *speedup, double *lo, double *hi, const double *base,
                         const double *x, int n, int resamples, uint64_t seed)
{
    PAR_FAIL_IF(n < 2 || resamples < 40, PAR_ERR_CONFIG, "speedup interval of %d rounds and "
                "%d resamples: expected at least 2 rounds and 40 resamples", n, resamples);
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    double *ratio = malloc((size_t)resamples * sizeof *ratio);
    if (!a || !b || !ratio) {
        free(a);
        free(b);
        free(ratio);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    memcpy(a, base, (size_t)n * sizeof *a);
    memcpy(b, x, (size_t)n * sizeof *b);
    *speedup = par_median_sort(a, n) / par_median_sort(b, n);
    uint64_t s = seed;
    for (int r = 0; r < resamples; r++) {
        for (int i = 0; i < n; i++) {
            const int k = (int)(splitmix64(&s) % (uint64_t)n);
            a[i] = base[k];
            b[i] = x[k];
        }
        ratio[r] = par_median_sort(a, n) / par_median_sort(b, n);
    }
    qsort(ratio, (size_t)resamples, sizeof *ratio, par_cmp_double);
    const int tail = (int)floor(0.025 * resamples);
    *lo = ratio[tail];
    *hi = ratio[resamples - 1 - tail];
    free(a);
    free(b);
    free(ratio);
    return PAR_OK;
}
