// Timing statistics (vf_stats.h): median, MLPerf's trimmed mean and the
// coefficient of variation of the kept runs, the paired percentile bootstrap
// of a speedup's 95% confidence interval, the rounds of one placement of the
// cores for a two-core row and the NOISY rule.
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
    double *r = malloc((size_t)n * sizeof *r), *draw = malloc((size_t)n * sizeof *draw);
    double *boot = malloc((size_t)resamples * sizeof *boot);
    if (!r || !draw || !boot) {
        free(r);
        free(draw);
        free(boot);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    for (int i = 0; i < n; i++) r[i] = base[i] / x[i];   // round i's own speedup
    memcpy(draw, r, (size_t)n * sizeof *draw);
    *speedup = par_median_sort(draw, n);
    uint64_t s = seed;
    for (int k = 0; k < resamples; k++) {
        for (int i = 0; i < n; i++) draw[i] = r[splitmix64(&s) % (uint64_t)n];
        boot[k] = par_median_sort(draw, n);
    }
    qsort(boot, (size_t)resamples, sizeof *boot, par_cmp_double);
    const int tail = (int)floor(0.025 * resamples);
    *lo = boot[tail];
    *hi = boot[resamples - 1 - tail];
    free(r);
    free(draw);
    free(boot);
    return PAR_OK;
}

int vf_speedup_rounds(int *use, vf_placement *placement, const int *near, int n, int cores)
{
    int n_near = 0;
    for (int k = 0; k < n; k++) n_near += near[k] != 0;
    const int keep_near = n_near > n - n_near;   // the majority; far on a tie
    const int kept = keep_near ? n_near : n - n_near;
    *placement = VF_ROUNDS_ALL;
    if (cores >= 2 && n_near > 0 && n_near < n && kept >= VF_PLACEMENT_MIN_ROUNDS)
        *placement = keep_near ? VF_ROUNDS_NEAR : VF_ROUNDS_FAR;
    for (int k = 0; k < n; k++)
        use[k] = *placement == VF_ROUNDS_ALL || (near[k] != 0) == keep_near;
    return *placement == VF_ROUNDS_ALL ? n : kept;
}

par_status vf_speedup_of(vf_speedup *e, const double *base, const double *x, const int *use,
                         int n, vf_placement placement)
{
    memset(e, 0, sizeof *e);
    double *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    double *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    int m = 0;
    for (int k = 0; k < n; k++)
        if (use[k]) {
            a[m] = base[k];
            b[m++] = x[k];
        }
    par_status st = PAR_OK;
    e->n = m;
    e->placement = placement;
    e->lo = e->hi = e->half_width = NAN;
    if (m >= 2) {
        st = vf_speedup_ci(&e->speedup, &e->lo, &e->hi, a, b, m, VF_BOOT_RESAMPLES, VF_BOOT_SEED);
        e->half_width = (e->hi - e->lo) / (2 * e->speedup);
        e->significant = e->lo > 1 || e->hi < 1;
        e->noisy = !(e->half_width <= VF_NOISY_HALF_WIDTH);
    } else if (m == 1) {
        e->speedup = a[0] / b[0];
    } else {
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "a speedup of no rounds");
    }
    free(a);
    free(b);
    return st;
}

par_status vf_row_speedup(vf_speedup *e, const double *base_sec, const int *base_round, int nb,
                          const double *x_sec, const int *x_round, const int *x_near, int nx,
                          int cores)
{
    const size_t m = (size_t)(nx > 0 ? nx : 1);
    double *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
    int *near = malloc(m * sizeof *near), *use = malloc(m * sizeof *use);
    par_status st = PAR_OK;
    if (!a || !b || !near || !use) {
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    } else {
        int n = 0;
        for (int j = 0, i = 0; j < nx; j++) {
            while (i < nb && base_round[i] < x_round[j]) i++;
            if (i == nb || base_round[i] != x_round[j]) continue;
            a[n] = base_sec[i];
            b[n] = x_sec[j];
            near[n++] = x_near[j];
        }
        vf_placement placement;
        vf_speedup_rounds(use, &placement, near, n, cores);
        st = vf_speedup_of(e, a, b, use, n, placement);
    }
    free(a);
    free(b);
    free(near);
    free(use);
    return st;
}
