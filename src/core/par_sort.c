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

// The k-th smallest of x[lo..hi] (inclusive), moving it to x[k]: Hoare's
// partition around the middle element, then the side that holds k.
static double select_kth(double *x, size_t lo, size_t hi, size_t k)
{
    while (lo < hi) {
        const double pivot = x[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] < pivot) i++;
            while (x[j] > pivot) j--;
            if (i <= j) {
                const double t = x[i];
                x[i] = x[j];
                x[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return x[k];
    }
    return x[k];
}

double par_median_select(double *x, size_t n)
{
    const double hi = select_kth(x, 0, n - 1, n / 2);
    if (n % 2) return hi;
    double lo = x[0];   // the largest of the lower half, x[0 .. n/2)
    for (size_t i = 1; i < n / 2; i++)
        if (x[i] > lo) lo = x[i];
    return 0.5 * (lo + hi);
}
