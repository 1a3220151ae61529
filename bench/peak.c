// bench_peak: the machine's measured FMA peak, GFLOP/s for f32 and f64 on 1
// and 2 threads: 12 independent accumulator vectors per thread (more than
// the FMA latency x throughput product), so the loop is bound by FMA
// throughput alone. Then, one thread f32, the ceiling of the kernels'
// register tiles: the same independent fmas fed as a tile of MR rows x 2
// vectors feeds them, MR broadcast scalars and 2 vector loads from L1 an
// iteration (MR = 6 for the avx2+fma set, 8 for avx512vl), the best of 5
// runs. No kernel that runs such a tile can pass its line, whatever its
// blocking. Prints figures; it is a benchmark, not a test.
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <time.h>

#include "peak.h"   // peak_f32, peak_f64; par_target.h

#ifdef PAR_HAVE_X86_64

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// A register tile's operand mix: a_v[r] = fma(x[r], d[v], a_v[r]) for
// r < MR, v < 2, x[r] broadcast from memory and d[v] loaded, at addresses
// that move every iteration within 4 KiB (L1), as the conv and dense tiles
// read theirs. The operands are ~1e-7 so that nothing overflows.
#define TILE(NAME, ATTR, MR)                                                                    \
    static ATTR double NAME(long iters, const float *buf)                                       \
    {                                                                                           \
        __m256 a0[MR], a1[MR];                                                                  \
        for (int r = 0; r < MR; r++) a0[r] = a1[r] = _mm256_set1_ps((float)r);                  \
        for (long it = 0; it < iters; it++) {                                                   \
            const float *p = buf + (it & 63) * 16;                                              \
            const __m256 d0 = _mm256_loadu_ps(p), d1 = _mm256_loadu_ps(p + 8);                  \
            _Pragma("GCC unroll 8")                                                             \
            for (int r = 0; r < MR; r++) {                                                      \
                const __m256 x = _mm256_broadcast_ss(p + 1 + 2 * r);                            \
                a0[r] = _mm256_fmadd_ps(x, d0, a0[r]);                                          \
                a1[r] = _mm256_fmadd_ps(x, d1, a1[r]);                                          \
            }                                                                                   \
        }                                                                                       \
        __m256 s = _mm256_setzero_ps();                                                         \
        _Pragma("GCC unroll 8")                                                                 \
        for (int r = 0; r < MR; r++) s = _mm256_add_ps(s, _mm256_add_ps(a0[r], a1[r]));         \
        float out[8];                                                                           \
        _mm256_storeu_ps(out, s);                                                               \
        return (double)out[0];                                                                  \
    }

TILE(tile_avx2, PAR_TARGET_AVX2, 6)
TILE(tile_avx512vl, PAR_TARGET_AVX512VL, 8)

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
    static float buf[64 * 16 + 16];
    for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) buf[i] = 1e-7f * (float)(i % 7 + 1);
    const int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    for (int MR = 6; MR <= 8; MR += 2) {
        if (MR == 8 && !has512) continue;
        double best = 0;   // the best of 5: a ceiling, not a typical run
        for (int k = 0; k < 5; k++) {
            const double t0 = now();
            sink += MR == 6 ? tile_avx2(iters / 5, buf) : tile_avx512vl(iters / 5, buf);
            const double g = 2.0 * 8 * 2 * MR * (double)(iters / 5) / (now() - t0) / 1e9;
            best = g > best ? g : best;
        }
        printf("tile f32 1 thread, %d x 2 (%s): %.1f GFLOP/s (best of 5)\n", MR,
               MR == 6 ? "avx2+fma" : "avx512vl", best);
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
