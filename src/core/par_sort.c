// Ordering doubles (par_sort.h).
#include "par_sort.h"

#include <stdlib.h>

int par_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double par_median_sort(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, par_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}
