// Tiny test helpers shared by the C tests (tests/*/test_*.c): named checks that print
// "name ... ok|FAIL" and count failures, and one numeric comparison routine.
// main() returns par_test_exit() so any failure gives a non-zero exit.
#ifndef PAR_TEST_H
#define PAR_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

#include "par_status.h"

static int par_test_failures_;
static int par_test_count_;

// Records one named check. Returns cond so callers can print detail on failure.
static inline int par_check(int cond, const char *name)
{
    par_test_count_++;
    if (!cond) par_test_failures_++;
    printf("%s ... %s\n", name, cond ? "ok" : "FAIL");
    fflush(stdout);
    return cond;
}

// A setup call that must succeed before anything can be checked (parsing a
// fixed spec, writing a fixture file): on failure prints the call, its
// status and message as a FAIL line and exits 1, rather than go on to check
// what the call did not produce.
#define PAR_REQUIRE(expr) par_require_((expr), #expr, __FILE__, __LINE__)
static inline void par_require_(par_status st, const char *what, const char *file, int line)
{
    if (st == PAR_OK) return;
    printf("%s:%d: %s ... FAIL (%s: %s)\n", file, line, what, par_status_str(st),
           par_last_error());
    fflush(stdout);
    exit(1);
}

// The status of a call whose output check `name` is about to compare: true
// on PAR_OK (the comparison is the check); else records `name` as FAIL with
// the status and message and returns 0 (there is nothing to compare).
static inline int par_ran(par_status st, const char *name)
{
    if (st == PAR_OK) return 1;
    printf("  status %d (%s): %s\n", (int)st, par_status_str(st), par_last_error());
    return par_check(0, name);
}

static inline int par_test_exit(void)
{
    printf("%d passed, %d failed\n", par_test_count_ - par_test_failures_, par_test_failures_);
    return par_test_failures_ ? 1 : 0;
}

// |a - b| <= atol + rtol * |b| for every element (b is the trusted side);
// NaN or Inf anywhere fails. On failure prints max abs/rel error, the worst
// index and the first differing pairs. With atol = rtol = 0 it is bitwise
// equality (and -0 vs +0 differ: compare bits).
static inline int par_check_close(const char *name, const double *a, const double *b, size_t n,
                                  double atol, double rtol)
{
    double max_abs = 0, max_rel = 0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        int fail;
        if (!isfinite(a[i]) || !isfinite(b[i])) fail = 1;
        else if (atol == 0 && rtol == 0) fail = memcmp(&a[i], &b[i], sizeof(double)) != 0;
        else fail = fabs(a[i] - b[i]) > atol + rtol * fabs(b[i]);
        double d = fabs(a[i] - b[i]);
        double r = b[i] != 0 ? d / fabs(b[i]) : d;
        if (d > max_abs || (isnan(d) && !isnan(max_abs))) { max_abs = d; worst = i; }
        if (r > max_rel) max_rel = r;
        if (fail) {
            if (bad < 5) printf("  %s[%zu]: %.17g vs %.17g\n", name, i, a[i], b[i]);
            bad++;
        }
    }
    if (bad) printf("  %s: %zu of %zu differ, max abs %.3g, max rel %.3g, worst index %zu\n",
                    name, bad, n, max_abs, max_rel, worst);
    return par_check(bad == 0, name);
}

#endif
