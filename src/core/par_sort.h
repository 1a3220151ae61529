// Ordering doubles: the one ascending comparator for qsort, and the median
// of an array. For timings and statistics (the scaling model's probes, the
// harness's medians), not for anything exact mode computes.
// Tests: tests/verify/test_timing.c.
#ifndef PAR_SORT_H
#define PAR_SORT_H

#include <stddef.h>

// qsort's comparator for doubles in ascending order (NaN compares equal to
// everything: keep NaN out).
int par_cmp_double(const void *a, const void *b);

// The median of x[0..n) (n >= 1): the middle value, or the mean of the two
// middle values; x is reordered (sorted ascending).
double par_median_sort(double *x, int n);

// The same median in linear time on average (quickselect; no NaN in x):
// x is reordered, not sorted. For arrays of millions (a model's gradient).
double par_median_select(double *x, size_t n);

#endif
