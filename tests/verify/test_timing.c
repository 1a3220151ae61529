// Unit tests of the timing statistics of `parity verify` (verify/harness/
// vf_stats.h) and the machine readings around them (vf_harness.h): median,
// MLPerf's dropping of the fastest and slowest run, the coefficient of
// variation, the paired bootstrap interval of a speedup, the near rounds of
// a two-core row, the NOISY rule (half-width above 10%), the pairing of
// rounds, /proc/stat's steal, /proc/loadavg, the core-to-core round trip
// (verify/scaling/sm_measure.h), and the one comparator and median of
// doubles (src/core/par_sort.h) they use. Every expected value is worked
// out by hand in the comment beside it.
// Run: cmake --build build --target test_timing && build/tests/verify/test_timing
#define _GNU_SOURCE   // sched_getaffinity, sched_setaffinity

#include <jansson.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "par_sort.h"
#include "par_test.h"
#include "sm_measure.h"
#include "vf_harness.h"
#include "vf_stats.h"

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

// Ascending order and the median: odd n the middle value, even n the mean
// of the two middle ones; -0.0 and 0.0 compare equal.
static void test_sort(void)
{
    double x[] = {3.5, -1.0, 2.0, 10.0, 0.0};
    par_check(par_median_sort(x, 5) == 2.0 && x[0] == -1.0 && x[1] == 0.0 && x[2] == 2.0 &&
                  x[3] == 3.5 && x[4] == 10.0,
              "par_median_sort: 5 values sorted ascending, median the middle one, 2.0");
    double y[] = {4.0, 1.0, 3.0, 2.0};
    par_check(par_median_sort(y, 4) == 2.5, "par_median_sort: 4 values, (2 + 3) / 2 = 2.5");
    double one[] = {7.25};
    par_check(par_median_sort(one, 1) == 7.25, "par_median_sort: 1 value, itself");
    const double a = 1.0, b = 2.0, z = 0.0, mz = -0.0;
    par_check(par_cmp_double(&a, &b) == -1 && par_cmp_double(&b, &a) == 1 &&
                  par_cmp_double(&a, &a) == 0 && par_cmp_double(&z, &mz) == 0,
              "par_cmp_double: -1, 1, 0; -0.0 equals 0.0");
    // par_median_select: the values above by hand; then against par_median_sort on
    // 2000 arrays of lengths 1..2000 with many ties (values of 0..n/3).
    double x2[] = {3.5, -1.0, 2.0, 10.0, 0.0}, y2[] = {4.0, 1.0, 3.0, 2.0}, one2[] = {7.25};
    par_check(par_median_select(x2, 5) == 2.0 && par_median_select(y2, 4) == 2.5 &&
                  par_median_select(one2, 1) == 7.25,
              "par_median_select: 2.0, 2.5 and 7.25 as by hand");
    int same = 1;
    uint64_t r = 12345;
    for (size_t n = 1; n <= 2000 && same; n++) {
        double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            u[i] = v[i] = (double)((r >> 33) % (n / 3 + 1));
        }
        same = par_median_select(u, n) == par_median_sort(v, (int)n);
        free(u);
        free(v);
    }
    par_check(same, "par_median_select = par_median_sort on 2000 arrays with ties");
}

static void test_stats(void)
{
    vf_time_stats s;
    // 10 runs, one disturbed (5.0). Sorted: 0.8 0.9 0.95 1.0 1.0 1.0 1.05 1.1 1.2 5.0;
    // median (1.0 + 1.0) / 2 = 1.0. Kept (0.8 and 5.0 dropped): 0.9 0.95 1.0 1.0 1.0 1.05
    // 1.1 1.2, sum 8.2, mean 1.025; squared deviations 0.015625 0.005625 3 x 0.000625
    // 0.000625 0.005625 0.030625, sum 0.06; sd = sqrt(0.06 / 7) = 0.0925820100,
    // CV = 0.0925820100 / 1.025 = 0.0903239122.
    const double a[10] = {1.0, 1.1, 0.9, 1.2, 5.0, 1.0, 0.95, 1.05, 1.0, 0.8};
    PAR_REQUIRE(vf_time_stats_of(&s, a, 10));
    par_check(s.n == 10 && s.median == 1.0 && s.min == 0.8 && s.max == 5.0,
              "10 runs: median 1.0, min 0.8, max 5.0");
    par_check(s.n_kept == 8 && near(s.mean_kept, 1.025, 1e-15),
              "10 runs: the fastest and slowest dropped, mean of the other 8 = 1.025");
    par_check(near(s.cv_kept, 0.0903239122, 1e-9), "10 runs: CV of the kept 8 = 9.03%");
    // The outlier alone would have made any row noisy; dropped, it moves nothing: the
    // same runs with 5.0 replaced by 1.25 (still the slowest) give the same CV.
    const double a2[10] = {1.0, 1.1, 0.9, 1.2, 1.25, 1.0, 0.95, 1.05, 1.0, 0.8};
    PAR_REQUIRE(vf_time_stats_of(&s, a2, 10));
    par_check(near(s.cv_kept, 0.0903239122, 1e-9) && s.max == 1.25,
              "the slowest run's value does not enter the CV");

    // Quiet: 5 runs 2.00 2.02 1.98 2.01 1.99; kept 1.99 2.00 2.01, mean 2.00,
    // sd = sqrt((0.0001 + 0 + 0.0001) / 2) = 0.01, CV 0.005.
    const double q[5] = {2.00, 2.02, 1.98, 2.01, 1.99};
    PAR_REQUIRE(vf_time_stats_of(&s, q, 5));
    par_check(s.median == 2.00 && s.n_kept == 3 && near(s.mean_kept, 2.0, 1e-15) &&
                  near(s.cv_kept, 0.005, 1e-12),
              "5 quiet runs: median 2.00, CV 0.5% of the kept 3");

    // Kept runs 0.96 1.00 1.04: sd 0.04, CV 4%; 0.94 1.00 1.06: 6%. The dropped 0.5
    // and 3.0 change neither.
    const double t4[5] = {0.5, 0.96, 1.0, 1.04, 3.0}, t6[5] = {3.0, 1.06, 0.5, 1.0, 0.94};
    PAR_REQUIRE(vf_time_stats_of(&s, t4, 5));
    par_check(near(s.cv_kept, 0.04, 1e-12), "CV 4% of the kept runs");
    PAR_REQUIRE(vf_time_stats_of(&s, t6, 5));
    par_check(near(s.cv_kept, 0.06, 1e-12), "CV 6% of the kept runs");

    // Fewer than 5 runs: none dropped. 1 2 3 4: median 2.5, mean 2.5,
    // sd = sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3) = sqrt(5 / 3) = 1.2909944487, CV 0.5163977795.
    const double f[4] = {4, 1, 3, 2};
    PAR_REQUIRE(vf_time_stats_of(&s, f, 4));
    par_check(s.n_kept == 4 && s.median == 2.5 && near(s.cv_kept, 0.5163977795, 1e-9),
              "4 runs: nothing dropped, median 2.5, CV 51.6%");
    // 2 runs: too few for a CV; 1 run: its own median.
    const double two[2] = {1.0, 3.0}, one[1] = {0.7};
    PAR_REQUIRE(vf_time_stats_of(&s, two, 2));
    par_check(s.median == 2.0 && isnan(s.cv_kept), "2 runs: median 2.0, no CV");
    PAR_REQUIRE(vf_time_stats_of(&s, one, 1));
    par_check(s.median == 0.7 && s.min == 0.7 && s.max == 0.7 && isnan(s.cv_kept),
              "1 run: median = min = max = 0.7, no CV");
    // Bad input.
    const double bad[3] = {1.0, -1.0, 2.0}, nan3[3] = {1.0, NAN, 2.0};
    par_check(vf_time_stats_of(&s, bad, 3) == PAR_ERR_CONFIG, "a negative time: PAR_ERR_CONFIG");
    par_check(vf_time_stats_of(&s, nan3, 3) == PAR_ERR_CONFIG, "a NaN time: PAR_ERR_CONFIG");
    par_check(vf_time_stats_of(&s, one, 0) == PAR_ERR_CONFIG, "no runs: PAR_ERR_CONFIG");
}

static void test_bootstrap(void)
{
    double sp, lo, hi;
    // Paired rounds: the config takes exactly half the baseline's time in every
    // round while the rounds themselves drift from 1 s to 5 s. Every round's
    // speedup is exactly 2, so is every resampled median: the interval is [2, 2].
    // (Medians of the two rows taken apart would give a wide interval: pairing
    // cancels the drift.)
    const double base[5] = {1.0, 2.0, 3.0, 4.0, 5.0}, half[5] = {0.5, 1.0, 1.5, 2.0, 2.5};
    PAR_REQUIRE(vf_speedup_ci(&sp, &lo, &hi, base, half, 5, VF_BOOT_RESAMPLES, VF_BOOT_SEED));
    par_check(sp == 2.0 && lo == 2.0 && hi == 2.0, "paired rounds, drift common to both: 2 [2, 2]");

    // 2 rounds: base 1.0 1.2, config 0.5 0.5: round speedups 2.0 and 2.4, point
    // 2.2. A resample is round 0 twice (median 2.0, probability 1/4), round 1
    // twice (2.4, 1/4) or one of each (2.2, 1/2): the 2.5% and 97.5% points are
    // 2.0 and 2.4.
    const double b2[2] = {1.0, 1.2}, x2[2] = {0.5, 0.5};
    PAR_REQUIRE(vf_speedup_ci(&sp, &lo, &hi, b2, x2, 2, VF_BOOT_RESAMPLES, VF_BOOT_SEED));
    par_check(near(sp, 2.2, 1e-15) && lo == 2.0 && hi == 2.4, "2 rounds: 2.2 [2.0, 2.4]");

    // 3 rounds: base 1 2 3 against a config at 1 s: round speedups 1, 2, 3. A
    // resample's median is 1 when at least two draws are round 0: 3 (1/3)^2 (2/3)
    // + (1/3)^3 = 7/27 = 26% > 2.5%; likewise 3 for round 2; so the interval is
    // [1, 3], around the point 2.
    const double b3[3] = {1, 2, 3}, x3[3] = {1, 1, 1};
    PAR_REQUIRE(vf_speedup_ci(&sp, &lo, &hi, b3, x3, 3, VF_BOOT_RESAMPLES, VF_BOOT_SEED));
    par_check(sp == 2 && lo == 1 && hi == 3, "3 rounds: 2 [1, 3]");

    // The same runs give the same interval (a fixed seed: the table can be
    // recomputed from results.json), which holds the point estimate.
    const double nb[10] = {1.00, 1.03, 0.98, 1.10, 1.01, 0.99, 1.05, 1.02, 0.97, 1.04};
    const double nx[10] = {0.55, 0.52, 0.60, 0.51, 0.54, 0.58, 0.53, 0.56, 0.57, 0.50};
    double sp2, lo2, hi2;
    PAR_REQUIRE(vf_speedup_ci(&sp, &lo, &hi, nb, nx, 10, VF_BOOT_RESAMPLES, VF_BOOT_SEED));
    PAR_REQUIRE(vf_speedup_ci(&sp2, &lo2, &hi2, nb, nx, 10, VF_BOOT_RESAMPLES, VF_BOOT_SEED));
    par_check(sp == sp2 && lo == lo2 && hi == hi2, "the same runs and seed: the same interval");
    // The round speedups, ascending: 0.98/0.60 = 1.6333, 0.97/0.57, 0.99/0.58,
    // 1.00/0.55, 1.02/0.56 = 1.8214, 1.01/0.54 = 1.8704, 1.03/0.52, 1.05/0.53,
    // 1.04/0.50, 1.10/0.51 = 2.1569. The point is the mean of the 5th and 6th,
    // 1.8459; every resampled median lies between the smallest and the largest.
    par_check(near(sp, (1.02 / 0.56 + 1.01 / 0.54) / 2, 1e-12) && lo <= sp && sp <= hi &&
                  lo >= 0.98 / 0.60 && hi <= 1.10 / 0.51 && lo < hi,
              "10 noisy rounds: 1.846 inside its interval, within [1.633, 2.157]");
    par_check(vf_speedup_ci(&sp, &lo, &hi, nb, nx, 1, VF_BOOT_RESAMPLES, VF_BOOT_SEED) ==
                  PAR_ERR_CONFIG,
              "1 round: no interval (PAR_ERR_CONFIG)");
}

// Which rounds a row uses, the NOISY rule and the pairing of rounds.
static void test_speedup_rows(void)
{
    // Near flags of 8 rounds, 6 near: a two-core row keeps to those 6; a one-core
    // row (serial, omp T=1, ...) uses all 8; 4 near of 8 (a tie, and 4 is fewer
    // than 5): all 8; all near: all. 7 far of 10: those 7, "far".
    const int nf[8] = {1, 0, 1, 1, 0, 1, 1, 1}, few[8] = {1, 0, 0, 1, 0, 1, 0, 1};
    const int all[8] = {1, 1, 1, 1, 1, 1, 1, 1}, mostly_far[10] = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0};
    int use[10];
    vf_placement p;
    par_check(vf_speedup_rounds(use, &p, nf, 8, 2) == 6 && p == VF_ROUNDS_NEAR && use[0] &&
                  !use[1] && use[2] && !use[4] && use[7],
              "two cores, 6 of 8 rounds near: the 6 near rounds");
    par_check(vf_speedup_rounds(use, &p, nf, 8, 1) == 8 && p == VF_ROUNDS_ALL && use[1] && use[4],
              "one core: every round, whatever the probes said");
    par_check(vf_speedup_rounds(use, &p, few, 8, 2) == 8 && p == VF_ROUNDS_ALL,
              "two cores, 4 of 8 near (a tie of 4 rounds each, fewer than 5): every round");
    par_check(vf_speedup_rounds(use, &p, all, 8, 4) == 8 && p == VF_ROUNDS_ALL,
              "every round near: all of them");
    par_check(vf_speedup_rounds(use, &p, mostly_far, 10, 2) == 7 && p == VF_ROUNDS_FAR &&
                  use[0] && !use[1] && use[2] && !use[4] && !use[7] && use[9],
              "two cores, 7 of 10 rounds far: the 7 far rounds");

    // Bimodal: serial takes 1.0 s in every round; a two-core row 0.5 s with the
    // cores near (rounds 0, 1, 3, 6) and 0.7 s with them far (2, 4, 5, 7, 8, 9).
    // All 10 rounds: speedups 1 / 0.7 (6 rounds) and 2 (4); the 5th and 6th
    // smallest are both 1 / 0.7 = 1.429, the point. A resample's median is 2 when
    // 6 or more of its 10 draws are near (p = 0.4: P(Bin(10, 0.4) >= 6) = 0.166),
    // 1.714 with exactly 5 (0.201), else 1 / 0.7 (0.633): each end holds over
    // 2.5%, so the interval is
    // [1 / 0.7, 1 / 0.5] = [1.429, 2.0], half-width (2 - 1 / 0.7) / 2 / (1 /
    // 0.7) = 0.2 > 0.10: NOISY. Its 6 far rounds: every ratio is exactly
    // 1 / 0.7: 1.43 [1.43, 1.43] far, not NOISY, significant.
    const double b10[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const double x10[10] = {0.5, 0.5, 0.7, 0.5, 0.7, 0.7, 0.5, 0.7, 0.7, 0.7};
    const int n10[10] = {1, 1, 0, 1, 0, 0, 1, 0, 0, 0};
    const int r10[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    vf_speedup e;
    const int every[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    PAR_REQUIRE(vf_speedup_of(&e, b10, x10, every, 10, VF_ROUNDS_ALL));
    par_check(e.n == 10 && e.speedup == 1 / 0.7 && e.lo == 1 / 0.7 && e.hi == 2 &&
                  near(e.half_width, 0.2, 1e-15) && e.noisy && e.significant,
              "bimodal, all 10 rounds: 1.429 [1.429, 2.000], half-width 20%: NOISY");
    PAR_REQUIRE(vf_row_speedup(&e, b10, r10, 10, x10, r10, n10, 10, 2));
    par_check(e.n == 6 && e.placement == VF_ROUNDS_FAR && e.speedup == 1 / 0.7 &&
                  e.lo == 1 / 0.7 && e.hi == 1 / 0.7 && e.half_width == 0 && !e.noisy &&
                  e.significant,
              "bimodal on two cores: its 6 far rounds, 1.43 [1.43, 1.43]");
    PAR_REQUIRE(vf_row_speedup(&e, b10, r10, 10, x10, r10, n10, 10, 1));
    par_check(e.n == 10 && e.placement == VF_ROUNDS_ALL && e.noisy,
              "the same runs on one core: all 10, NOISY");

    // The NOISY threshold. 2 rounds, serial 1.0 and 1.0: a row at 0.5 and 0.6 has
    // round speedups 2 and 1.667, point 1.833, interval [1.667, 2] (each
    // resample: both rounds 0 (1/4), both 1 (1/4) or one of each): half-width
    // (2 - 1.667) / 2 / 1.833 = 1/11 = 0.0909, quoted. At 0.5 and 0.625: speedups 2
    // and 1.6, [1.6, 2] around 1.8, half-width 1/9 = 0.111: NOISY.
    const double b2[2] = {1, 1}, x6[2] = {0.5, 0.6}, x625[2] = {0.5, 0.625};
    const int u2[2] = {1, 1};
    PAR_REQUIRE(vf_speedup_of(&e, b2, x6, u2, 2, VF_ROUNDS_ALL));
    par_check(e.lo == 1 / 0.6 && e.hi == 2 && near(e.half_width, 1.0 / 11, 1e-12) && !e.noisy,
              "half-width 9.1%: a number is quoted");
    PAR_REQUIRE(vf_speedup_of(&e, b2, x625, u2, 2, VF_ROUNDS_ALL));
    par_check(e.lo == 1.6 && e.hi == 2 && near(e.half_width, 1.0 / 9, 1e-12) && e.noisy,
              "half-width 11.1%: NOISY");
    // One round: the ratio, no interval, never NOISY.
    PAR_REQUIRE(vf_speedup_of(&e, b2, x6, u2, 1, VF_ROUNDS_ALL));
    par_check(e.n == 1 && e.speedup == 2 && isnan(e.lo) && !e.noisy, "one round: 2, no interval");
    const int none[2] = {0, 0};
    par_check(vf_speedup_of(&e, b2, x6, none, 2, VF_ROUNDS_ALL) == PAR_ERR_CONFIG,
              "no round: PAR_ERR_CONFIG");

    // Pairing by round: serial ran rounds 0-5 (1.0 .. 1.5 s); a row settled
    // early ran rounds 2-5 at exactly half of serial's time in each: paired by
    // round every ratio is 2 (paired by position it would meet 1.0-1.3 and
    // give 1.15 / 0.675 = 1.70).
    const double b6[6] = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5}, x4[4] = {0.6, 0.65, 0.7, 0.75};
    const int rb6[6] = {0, 1, 2, 3, 4, 5}, rx4[4] = {2, 3, 4, 5}, n4[4] = {1, 1, 1, 1};
    PAR_REQUIRE(vf_row_speedup(&e, b6, rb6, 6, x4, rx4, n4, 4, 2));
    par_check(e.n == 4 && e.speedup == 2 && e.lo == 2 && e.hi == 2,
              "rounds 2-5 paired with serial's rounds 2-5: 2.00 [2.00, 2.00]");
    const int rx0[4] = {6, 7, 8, 9};
    par_check(vf_row_speedup(&e, b6, rb6, 6, x4, rx0, n4, 4, 2) == PAR_ERR_CONFIG,
              "no round in common with serial: PAR_ERR_CONFIG");
}

static char dir[64];

static const char *write_file(const char *name, const char *text)
{
    static char path[2][160];
    static int k;
    char *p = path[k++ % 2];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("cannot write %s ... FAIL\n", p);
        exit(1);
    }
    return p;
}

static void test_machine(void)
{
    vf_cpu_ticks a, b;
    // cpu user nice system idle iowait irq softirq steal guest guest_nice:
    // total 100 + 10 + 50 + 800 + 20 + 0 + 5 + 15 = 1000 (guest is inside user), steal 15;
    // then total 200 + 10 + 100 + 1500 + 20 + 0 + 5 + 165 = 2000, steal 165:
    // 150 of 1000 ticks stolen = 15%.
    PAR_REQUIRE(vf_cpu_ticks_read(&a, write_file("stat1", "cpu  100 10 50 800 20 0 5 15 0 0\n"
                                                          "cpu0 50 5 25 400 10 0 2 8 0 0\n")));
    PAR_REQUIRE(
        vf_cpu_ticks_read(&b, write_file("stat2", "cpu  200 10 100 1500 20 0 5 165 7 0\n")));
    par_check(a.total == 1000 && a.steal == 15 && b.total == 2000 && b.steal == 165,
              "/proc/stat: total 1000 and 2000 ticks, steal 15 and 165");
    par_check(near(vf_steal_percent(&a, &b), 15.0, 1e-12), "steal between them: 15%");
    par_check(isnan(vf_steal_percent(&a, &a)), "no tick between two readings: NaN");
    par_check(vf_cpu_ticks_read(&a, write_file("stat3", "intr 1 2 3\n")) == PAR_ERR_FORMAT,
              "a file without the cpu line: PAR_ERR_FORMAT");
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none", dir);
    par_check(vf_cpu_ticks_read(&a, missing) == PAR_ERR_IO, "a missing file: PAR_ERR_IO");

    json_t *l = vf_loadavg_json(write_file("loadavg", "0.52 0.61 0.70 1/234 5678\n"));
    par_check(json_array_size(l) == 3 && json_real_value(json_array_get(l, 0)) == 0.52 &&
                  json_real_value(json_array_get(l, 1)) == 0.61 &&
                  json_real_value(json_array_get(l, 2)) == 0.70,
              "/proc/loadavg: [0.52, 0.61, 0.70]");
    json_decref(l);
    par_check(vf_runnable_read(write_file("loadavg2", "2.10 1.90 1.70 3/234 5678\n")) == 3,
              "/proc/loadavg: 3 tasks runnable (3/234)");
    par_check(vf_runnable_read(write_file("loadavg3", "2.10 1.90\n")) == -1 &&
                  vf_runnable_read(missing) == -1,
              "a short or missing /proc/loadavg: -1");
    l = vf_loadavg_json(missing);
    par_check(json_is_null(l), "a missing load average: null");
    json_decref(l);
    // This machine's own files read (Linux).
    l = vf_loadavg_json(NULL);
    par_check(json_array_size(l) == 3 && vf_cpu_ticks_read(&a, NULL) == PAR_OK && a.total > 0 &&
                  vf_runnable_read(NULL) >= 1,
              "this machine's /proc/loadavg and /proc/stat read");
    json_decref(l);
}

static void test_round_trip(void)
{
    // Probes 90 100 400 95 NAN 410: 5 measured, sorted 90 95 100 400 410, median 100;
    // 410 > 2 x 90, so the distance changed; far: 400 and 410 (> 180).
    const double ns[6] = {90, 100, 400, 95, NAN, 410};
    json_t *o = vf_round_trip_summary(ns, 6);
    par_check(json_integer_value(json_object_get(o, "probes")) == 6 &&
                  json_integer_value(json_object_get(o, "measured")) == 5 &&
                  json_real_value(json_object_get(o, "min")) == 90 &&
                  json_real_value(json_object_get(o, "median")) == 100 &&
                  json_real_value(json_object_get(o, "max")) == 410 &&
                  json_integer_value(json_object_get(o, "far")) == 2,
              "round trips 90 100 400 95 - 410: 5 measured, 90 / 100 / 410 ns, 2 far");
    json_decref(o);
    // Steady: 90 150 170, 170 <= 2 x 90: none far.
    const double st[3] = {90, 150, 170};
    o = vf_round_trip_summary(st, 3);
    par_check(json_integer_value(json_object_get(o, "far")) == 0 &&
                  json_real_value(json_object_get(o, "median")) == 150,
              "round trips 90 150 170: median 150, none far (170 <= 2 x 90)");
    json_decref(o);
    const double none[2] = {NAN, NAN};
    o = vf_round_trip_summary(none, 2);
    par_check(json_integer_value(json_object_get(o, "measured")) == 0 &&
                  !json_object_get(o, "min") && !json_object_get(o, "far"),
              "no probe measured: no min, median, max or far");
    json_decref(o);

    // Probes with the round trip before and after each: the fastest reading
    // is 80; the second (170 after) and the fourth (400 after) read over
    // 2 x 80 = 160, the rest at most 150.
    const double rt[5][2] = {{80, 95}, {90, 170}, {85, 88}, {90, 400}, {NAN, 150}};
    int near[5];
    par_check(sm_near_probes(rt, 5, near) == 3 && near[0] && !near[1] && near[2] && !near[3] &&
                  near[4],
              "near probes: 80-95, 85-88 and -/150 near (<= 2 x 80), 90-170 and 90-400 far");
    // All far together: the fastest is far too, so all are alike.
    const double far[2][2] = {{330, 350}, {340, 380}};
    par_check(sm_near_probes(far, 2, near) == 2, "steadily far probes count as alike");
    const double unmeasured[2][2] = {{NAN, NAN}, {NAN, NAN}};
    par_check(sm_near_probes(unmeasured, 2, near) == 2, "unmeasured probes count as near");

    // This machine: with two CPUs or more in the mask, a finite time (a cache
    // line crosses in well under 100 us); restricted to one CPU (as `taskset -c 0`
    // does), NAN at once rather than two threads waiting for each other.
    cpu_set_t mask, one;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        par_check(0, "sched_getaffinity");
        return;
    }
    const double t = sm_core_round_trip_ns();
    if (CPU_COUNT(&mask) >= 2)
        par_check(isfinite(t) && t > 0 && t < 100000,
                  "core-to-core round trip of this machine in (0, 100000) ns");
    else
        par_check(isnan(t), "one CPU in the affinity mask: round trip NAN");
    printf("# core-to-core round trip: %.0f ns (%d CPUs in the mask)\n", t, CPU_COUNT(&mask));
    int first = 0;
    while (!CPU_ISSET(first, &mask)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        par_check(0, "sched_setaffinity to one CPU");
        return;
    }
    par_check(isnan(sm_core_round_trip_ns()), "affinity restricted to one CPU: round trip NAN");
    par_check(sched_setaffinity(0, sizeof mask, &mask) == 0, "affinity mask restored");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/par_timing_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_sort();
    test_stats();
    test_bootstrap();
    test_speedup_rows();
    test_machine();
    test_round_trip();
    const char *names[] = {"stat1", "stat2", "stat3", "loadavg", "loadavg2", "loadavg3"};
    for (int i = 0; i < 6; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return par_test_exit();
}
