// The FMA peak loop that bench_peak and bench_layers time: 12 independent
// accumulator vectors (more than the FMA latency x throughput product), so
// that the loop is bound by FMA throughput alone. peak_f32(iters) and
// peak_f64(iters) run 12 iters fmas of 8 and 4 lanes; their result keeps
// the loop alive. x86-64 with AVX2+FMA only (PAR_HAVE_X86_64; the caller
// checks the CPU).
#ifndef BENCH_PEAK_H
#define BENCH_PEAK_H

#include "par_target.h"   // PAR_TARGET_AVX2, <immintrin.h> (src/kernels)

#ifdef PAR_HAVE_X86_64
#define PEAK(NAME, V, SET1, FMADD, ADD, STORE, REAL, LANES)                                     \
    static inline PAR_TARGET_AVX2 double NAME(long iters)                                       \
    {                                                                                           \
        V a[12];                                                                                \
        const V x = SET1((REAL)0.999999), y = SET1((REAL)1e-7);                                 \
        for (int k = 0; k < 12; k++) a[k] = SET1((REAL)k);                                      \
        for (long it = 0; it < iters; it++) {                                                   \
            _Pragma("GCC unroll 12")                                                            \
            for (int k = 0; k < 12; k++) a[k] = FMADD(a[k], x, y);                              \
        }                                                                                       \
        V s = a[0];                                                                             \
        for (int k = 1; k < 12; k++) s = ADD(s, a[k]);                                          \
        REAL out[LANES];                                                                        \
        STORE(out, s);                                                                          \
        return (double)out[0]; /* keeps the loop alive */                                      \
    }

PEAK(peak_f32, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, float, 8)
PEAK(peak_f64, __m256d, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd, _mm256_storeu_pd, double, 4)
#endif

#endif
