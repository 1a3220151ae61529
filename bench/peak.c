// bench_peak: the machine's measured FMA peak, GFLOP/s for f32 and f64 on 1
// and 2 threads: 12 independent accumulator vectors per thread (more than
// the FMA latency x throughput product), so the loop is bound by FMA
// throughput alone. Prints figures; it is a benchmark, not a test.
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <time.h>

#include "par_target.h"   // PAR_TARGET_AVX2, <immintrin.h> (src/kernels)

#ifdef PAR_HAVE_X86_64

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define PEAK(NAME, V, SET1, FMADD, ADD, STORE, REAL, LANES)                                     \
    static PAR_TARGET_AVX2 double NAME(long iters)                                              \
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

int main(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("bench_peak: this CPU lacks AVX2+FMA\n");
        return 0;
    }
    const long iters = 100000000;
    volatile double sink = 0;
    for (int d = 0; d < 2; d++) {
        for (int T = 1; T <= 2; T++) {
            double t0 = now();
#pragma omp parallel num_threads(T)
            {
                double r = d == 0 ? peak_f32(iters) : peak_f64(iters);
#pragma omp atomic
                sink += r;
            }
            double t = now() - t0;
            const double lanes = d == 0 ? 8 : 4;
            printf("peak %s %d thread%s: %.1f GFLOP/s\n", d == 0 ? "f32" : "f64", T,
                   T > 1 ? "s" : " ", 2.0 * lanes * 12 * (double)iters * T / t / 1e9);
        }
    }
    return sink == 12345.678;
}
#else
int main(void)
{
    printf("bench_peak: needs x86-64 with AVX2+FMA\n");
    return 0;
}
#endif
