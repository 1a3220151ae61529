// See par_alloc.h.
#define _GNU_SOURCE
#include "par_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

enum { HUGE_PAGE = 2 << 20 };

void *par_calloc_big(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size) return NULL;
    const size_t bytes = n * size;
    if (bytes < HUGE_PAGE) return calloc(n ? n : 1, size ? size : 1);
    const size_t padded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, padded);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, padded, MADV_HUGEPAGE);   // advice only: failure changes nothing
#endif
#if defined(__linux__) && defined(MADV_DONTNEED)   // elsewhere it may not zero
    // Zeroed by dropping the pages (whole ones: p and padded are 2 MiB
    // multiples): malloc's memory is anonymous and private, and such a page
    // reads as zero until it is written. So only what a run writes becomes
    // resident: an MPI rank of a --batch full run writes its own samples'
    // rows of the activations, not the others'.
    if (madvise(p, padded, MADV_DONTNEED) == 0) return p;
#endif
    memset(p, 0, padded);
    return p;
}
