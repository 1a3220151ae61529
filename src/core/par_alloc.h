// Large zeroed buffers for the engine (weights, gradients, optimizer state,
// activations): aligned to 2 MiB and, on Linux, marked for transparent huge
// pages. A 3.2M-parameter layer's weights span 3,200 4-KiB pages, more than
// the TLB holds, and streaming them cold costs the dense kernels a large
// share of their time (bench/kernels.sh). Contents and arithmetic do not
// change. On Linux the zeroing leaves the pages
// unmapped until first written (madvise MADV_DONTNEED), so a buffer costs
// memory only for what is used. Free with free().
#ifndef PAR_ALLOC_H
#define PAR_ALLOC_H

#include <stddef.h>

// n * size zeroed bytes, or NULL when out of memory (or n * size overflows).
void *par_calloc_big(size_t n, size_t size);

#endif
