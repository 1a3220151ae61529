// Dense kernels against naive loops that spell out the contract (written
// here, independently of src/kernels and reference/): bitwise equality for
// f32 and f64, every kernel set the CPU runs (par_kernels_available:
// AVX-512VL, AVX2+FMA and portable on x86-64; NEON and portable on aarch64, where the cross build
// runs this under qemu-aarch64, tests/tools/test_cross.sh), shapes
// including 1, 7, 33, 784 and 785, any row/column sub-range, any chunk range,
// fresh or continued folds, and 512 x 1024 and 1024 x 512 (rows 2 KB apart,
// which the SIMD kernels copy first); ReLU, Adam and batchnorm's sums,
// normalisation and input gradient, and the 2 x 2 max-pool input gradient
// likewise. A failure prints the shape and
// seed to reproduce it.
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "par_alloc.h"
#include "par_conv.h"
#include "par_kernels.h"
#include "par_rng.h"
#include "par_test.h"

static double rnd(uint64_t seed, uint64_t i) { return par_rng_uniform(seed, 9, 0, i) * 2 - 1; }

// The kernel sets this CPU runs, best first.
enum { MAX_SETS = 8 };
static size_t kernel_sets(const par_kernel_set **sets)
{
    const size_t n = par_kernels_available(sets, MAX_SETS);
    return n < MAX_SETS ? n : MAX_SETS;
}

#define NAIVE(REAL, SFX, FMA)                                                                   \
    static void naive_forward_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b,       \
                                    size_t s0, size_t s1, size_t o0, size_t o1, size_t n_in,    \
                                    size_t n_out)                                               \
    {                                                                                           \
        for (size_t s = s0; s < s1; s++)                                                        \
            for (size_t o = o0; o < o1; o++) {                                                  \
                REAL acc = b[o];                                                                \
                for (size_t i = 0; i < n_in; i++) acc = FMA(x[s * n_in + i], W[o * n_in + i], acc); \
                y[s * n_out + o] = acc;                                                         \
            }                                                                                   \
    }                                                                                           \
    static void naive_bdata_##SFX(REAL *dx, const REAL *dz, const REAL *W, size_t s0, size_t s1, \
                                  size_t n_in, size_t n_out)                                    \
    {                                                                                           \
        for (size_t s = s0; s < s1; s++)                                                        \
            for (size_t i = 0; i < n_in; i++) {                                                 \
                REAL acc = 0;                                                                   \
                for (size_t o = 0; o < n_out; o++) acc = FMA(dz[s * n_out + o], W[o * n_in + i], acc); \
                dx[s * n_in + i] = acc;                                                         \
            }                                                                                   \
    }                                                                                           \
    static void naive_wgrad_##SFX(REAL *dW, REAL *db, const REAL *dz, const REAL *x, size_t B,   \
                                  size_t C, size_t c0, size_t c1, size_t o0, size_t o1,         \
                                  size_t n_in, size_t n_out, int cont)                          \
    {                                                                                           \
        for (size_t o = o0; o < o1; o++) {                                                      \
            for (size_t i = 0; i <= n_in; i++) { /* i == n_in: the bias */                      \
                REAL run = i < n_in ? dW[o * n_in + i] : db[o];                                 \
                for (size_t c = c0; c < c1; c++) {                                              \
                    REAL part = 0;                                                              \
                    for (size_t s = c * C; s < B && s < (c + 1) * C; s++)                       \
                        part = i < n_in ? FMA(dz[s * n_out + o], x[s * n_in + i], part)        \
                                        : part + dz[s * n_out + o];                             \
                    run = (c == c0 && !cont) ? part : run + part;                               \
                }                                                                               \
                if (i < n_in) dW[o * n_in + i] = run;                                           \
                else db[o] = run;                                                               \
            }                                                                                   \
        }                                                                                       \
    }

NAIVE(float, f32, fmaf)
NAIVE(double, f64, fma)

#define RUN_CASE(REAL, SFX)                                                                     \
    do {                                                                                        \
        REAL *x = malloc(B * n_in * sizeof(REAL)), *W = malloc(n_out * n_in * sizeof(REAL));    \
        REAL *WT = calloc(par_dense_wt_elems(n_in, n_out), sizeof(REAL));                       \
        REAL *b = malloc(n_out * sizeof(REAL));                                                 \
        REAL *dz = malloc(B * n_out * sizeof(REAL)), *y1 = calloc(B * n_out, sizeof(REAL));     \
        REAL *y2 = calloc(B * n_out, sizeof(REAL)), *dx1 = calloc(B * n_in, sizeof(REAL));      \
        REAL *dx2 = calloc(B * n_in, sizeof(REAL)), *g1 = malloc(n_out * n_in * sizeof(REAL));  \
        REAL *g2 = malloc(n_out * n_in * sizeof(REAL)), *gb1 = malloc(n_out * sizeof(REAL));    \
        REAL *gb2 = malloc(n_out * sizeof(REAL));                                               \
        for (size_t i = 0; i < B * n_in; i++) x[i] = (REAL)rnd(seed, i);                        \
        for (size_t i = 0; i < n_out * n_in; i++) W[i] = (REAL)rnd(seed + 1, i);                \
        for (size_t i = 0; i < n_out; i++) b[i] = (REAL)rnd(seed + 2, i);                       \
        for (size_t i = 0; i < B * n_out; i++) dz[i] = (REAL)rnd(seed + 3, i);                  \
        for (size_t i = 0; i < n_out * n_in; i++) g1[i] = g2[i] = (REAL)rnd(seed + 4, i);       \
        for (size_t i = 0; i < n_out; i++) gb1[i] = gb2[i] = (REAL)rnd(seed + 5, i);            \
        /* transpose in two column ranges, as two threads would */                             \
        par_dense_transpose_##SFX(WT, W, n_in, n_out, 0, o_mid);                                \
        par_dense_transpose_##SFX(WT, W, n_in, n_out, o_mid, n_out);                            \
        par_dense_forward_##SFX(y1, x, WT, b, s0, s1, o0, o1, n_in, n_out);                     \
        naive_forward_##SFX(y2, x, W, b, s0, s1, o0, o1, n_in, n_out);                          \
        ok_f &= memcmp(y1, y2, B * n_out * sizeof(REAL)) == 0;                                  \
        par_dense_backward_data_##SFX(dx1, dz, W, s0, s1, n_in, n_out);                         \
        naive_bdata_##SFX(dx2, dz, W, s0, s1, n_in, n_out);                                     \
        ok_d &= memcmp(dx1, dx2, B * n_in * sizeof(REAL)) == 0;                                 \
        par_dense_backward_weights_##SFX(g1, gb1, dz, x, B, C, c0, c1, o0, o1, n_in, n_out, cont); \
        naive_wgrad_##SFX(g2, gb2, dz, x, B, C, c0, c1, o0, o1, n_in, n_out, cont);             \
        ok_w &= memcmp(g1, g2, n_out * n_in * sizeof(REAL)) == 0 &&                             \
                memcmp(gb1, gb2, n_out * sizeof(REAL)) == 0;                                    \
        free(x); free(W); free(WT); free(b); free(dz); free(y1); free(y2); free(dx1);          \
        free(dx2); free(g1); free(g2); free(gb1); free(gb2);                                    \
    } while (0)

// par_gemm_acc: C[s][j] continues from its own value, k ascending, against
// the loop written out; strides larger than the widths (as conv2d passes them)
// and row sub-ranges. Lanes past N must be neither stored nor read into C.
#define GEMM_CASE(REAL, SFX, FMA)                                                               \
    do {                                                                                        \
        REAL *A = malloc(M * lda * sizeof(REAL)), *Bm = malloc((K ? K : 1) * ldb * sizeof(REAL)); \
        REAL *C1 = malloc(M * ldc * sizeof(REAL)), *C2 = malloc(M * ldc * sizeof(REAL));        \
        for (size_t i = 0; i < M * lda; i++) A[i] = (REAL)rnd(seed + 10, i);                    \
        for (size_t i = 0; i < K * ldb; i++) Bm[i] = (REAL)rnd(seed + 11, i);                   \
        for (size_t i = 0; i < M * ldc; i++) C1[i] = C2[i] = (REAL)rnd(seed + 12, i);           \
        par_gemm_acc_##SFX(C1, ldc, A, lda, Bm, ldb, s0, s1, N, K);                              \
        for (size_t r = s0; r < s1; r++)                                                        \
            for (size_t j = 0; j < N; j++)                                                      \
                for (size_t k = 0; k < K; k++)                                                  \
                    C2[r * ldc + j] = FMA(A[r * lda + k], Bm[k * ldb + j], C2[r * ldc + j]);    \
        ok &= memcmp(C1, C2, M * ldc * sizeof(REAL)) == 0;                                      \
        free(A); free(Bm); free(C1); free(C2);                                                  \
    } while (0)

static void test_gemm_acc(void)
{
    const size_t sizes[] = {1, 7, 9, 16, 27, 33, 300};
    char name[160];
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    for (size_t v = 0; v < n_sets; v++) {
        par_kernels_use(sets[v]);
        for (int d = 0; d < 2; d++) {
            int all = 1;
            for (uint64_t seed = 1; seed <= 40; seed++) {
                const size_t M = sizes[par_rng_bits(seed, 8, 1, 0) % 7];
                const size_t N = sizes[par_rng_bits(seed, 8, 1, 1) % 7];
                const size_t K = sizes[par_rng_bits(seed, 8, 1, 2) % 7];
                const size_t lda = K + par_rng_bits(seed, 8, 1, 3) % 3;
                const size_t ldb = N + (seed % 2 ? 0 : 1 + par_rng_bits(seed, 8, 1, 4) % 20);
                const size_t ldc = N + par_rng_bits(seed, 8, 1, 5) % 3;
                const size_t s0 = par_rng_bits(seed, 8, 1, 6) % M;
                const size_t s1 = s0 + 1 + par_rng_bits(seed, 8, 1, 7) % (M - s0);
                int ok = 1;
                if (d == 0) GEMM_CASE(float, f32, fmaf);
                else GEMM_CASE(double, f64, fma);
                if (!ok)
                    printf("  seed %llu: M=%zu N=%zu K=%zu lda=%zu ldb=%zu ldc=%zu s=[%zu,%zu)\n",
                           (unsigned long long)seed, M, N, K, lda, ldb, ldc, s0, s1);
                all &= ok;
            }
            snprintf(name, sizeof name, "%s %s gemm_acc == contract loop (40 random shapes)",
                     par_kernels_variant(), d ? "f64" : "f32");
            par_check(all, name);
        }
    }
    par_kernels_use(NULL);
}

// ReLU forward/backward and Adam (par_kernels.h's order, written out here) on
// n in 1..40 elements, so that every vector width leaves every tail; inputs
// include +0, -0 and exact zeros of the pre-activation.
#define ELEM_CASE(REAL, SFX, SQRT)                                                              \
    do {                                                                                        \
        REAL y1[40], y2[40], dy1[40], dy2[40], w1[40], w2[40], m1[40], m2[40], v1[40], v2[40],  \
            g[40];                                                                              \
        for (size_t i = 0; i < n; i++) {                                                        \
            const double r = rnd(seed + 20, i);                                                 \
            y1[i] = y2[i] = (REAL)(i % 5 == 0 ? 0.0 : i % 7 == 0 ? -0.0 : r);                   \
            dy1[i] = dy2[i] = (REAL)rnd(seed + 21, i);                                          \
            w1[i] = w2[i] = (REAL)rnd(seed + 22, i);                                            \
            m1[i] = m2[i] = (REAL)rnd(seed + 23, i);                                            \
            v1[i] = v2[i] = (REAL)fabs(rnd(seed + 24, i));                                      \
            g[i] = (REAL)rnd(seed + 25, i);                                                     \
        }                                                                                       \
        par_act_backward_##SFX(dy1, y1, n, PAR_ACT_RELU);                                       \
        par_act_forward_##SFX(y1, n, PAR_ACT_RELU);                                             \
        for (size_t i = 0; i < n; i++) dy2[i] = y2[i] > 0 ? dy2[i] : 0;                         \
        for (size_t i = 0; i < n; i++) y2[i] = y2[i] > 0 ? y2[i] : 0;                           \
        ok_r &= memcmp(y1, y2, n * sizeof(REAL)) == 0 && memcmp(dy1, dy2, n * sizeof(REAL)) == 0; \
        const par_optim_coef k = {PAR_UPDATE_ADAM, (REAL)0.01, 0, (REAL)0.9, (REAL)0.999,       \
                                  (REAL)0.1, (REAL)(1 - (REAL)0.999), (REAL)0.19, (REAL)0.002,  \
                                  (REAL)1e-8};                                                  \
        par_optim_##SFX(w1, m1, v1, g, n, &k);                                                  \
        const REAL lr = (REAL)k.lr, b1 = (REAL)k.b1, b2 = (REAL)k.b2, c1 = (REAL)k.c1;          \
        const REAL c2 = (REAL)k.c2, bc1 = (REAL)k.bc1, bc2 = (REAL)k.bc2, eps = (REAL)k.eps;    \
        for (size_t i = 0; i < n; i++) {                                                        \
            REAL a = b1 * m2[i], t = c1 * g[i];                                                 \
            a = a + t;                                                                          \
            m2[i] = a;                                                                          \
            REAL b = b2 * v2[i];                                                                \
            t = c2 * g[i];                                                                      \
            t = t * g[i];                                                                       \
            b = b + t;                                                                          \
            v2[i] = b;                                                                          \
            const REAL mh = a / bc1, vh = b / bc2;                                              \
            REAL dd = SQRT(vh);                                                                 \
            dd = dd + eps;                                                                      \
            t = lr * mh;                                                                        \
            t = t / dd;                                                                         \
            w2[i] = w2[i] - t;                                                                  \
        }                                                                                       \
        ok_a &= memcmp(w1, w2, n * sizeof(REAL)) == 0 && memcmp(m1, m2, n * sizeof(REAL)) == 0 && \
                memcmp(v1, v2, n * sizeof(REAL)) == 0;                                          \
    } while (0)

static void test_elementwise(void)
{
    char name[160];
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    for (size_t v = 0; v < n_sets; v++) {
        par_kernels_use(sets[v]);
        for (int d = 0; d < 2; d++) {
            int ok_r = 1, ok_a = 1;
            for (size_t n = 1; n <= 40; n++) {
                const uint64_t seed = 100 + n;
                if (d == 0) ELEM_CASE(float, f32, sqrtf);
                else ELEM_CASE(double, f64, sqrt);
            }
            snprintf(name, sizeof name, "%s %s relu forward/backward == contract loops (n 1..40)",
                     par_kernels_variant(), d ? "f64" : "f32");
            par_check(ok_r, name);
            snprintf(name, sizeof name, "%s %s adam == contract loop (n 1..40)",
                     par_kernels_variant(), d ? "f64" : "f32");
            par_check(ok_a, name);
        }
    }
    par_kernels_use(NULL);
}

// Every set's transpose against the definition WT[i][o] = W[o][i], on row
// and column sub-ranges of odd shapes (tile edges): the range written, every
// other value of WT (its padding included) left as it was.
#define TRANSPOSE_CASE(REAL, SFX)                                                               \
    do {                                                                                        \
        const size_t ld = n_out + 5;                                                            \
        REAL *W = malloc(n_out * n_in * sizeof(REAL)), *WT = malloc(n_in * ld * sizeof(REAL));  \
        REAL *want = malloc(n_in * ld * sizeof(REAL));                                          \
        for (size_t k = 0; k < n_out * n_in; k++) W[k] = (REAL)rnd(seed, k);                    \
        for (size_t k = 0; k < n_in * ld; k++) WT[k] = want[k] = (REAL)rnd(seed + 1, k);        \
        for (size_t i = i0; i < i1; i++)                                                        \
            for (size_t o = o0; o < o1; o++) want[i * ld + o] = W[o * n_in + i];                \
        sets[v]->SFX.transpose(WT, ld, W, n_in, o0, o1, i0, i1);                                \
        ok &= memcmp(WT, want, n_in * ld * sizeof(REAL)) == 0;                                  \
        free(W), free(WT), free(want);                                                          \
    } while (0)

static void test_transpose(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    const size_t sizes[] = {1, 3, 4, 8, 9, 33, 64, 70};
    char name[160];
    for (size_t v = 0; v < n_sets; v++)
        for (int d = 0; d < 2; d++) {
            int ok = 1;
            for (uint64_t seed = 1; seed <= 60; seed++) {
                const size_t n_out = sizes[par_rng_bits(seed, 11, 0, 0) % 8];
                const size_t n_in = sizes[par_rng_bits(seed, 11, 0, 1) % 8];
                size_t o0 = par_rng_bits(seed, 11, 0, 2) % n_out, o1 = par_rng_bits(seed, 11, 0, 3) % n_out;
                size_t i0 = par_rng_bits(seed, 11, 0, 4) % n_in, i1 = par_rng_bits(seed, 11, 0, 5) % n_in;
                if (seed % 3 == 0) o0 = 0, o1 = n_out, i0 = 0, i1 = n_in;   // whole
                if (o0 > o1) { size_t t = o0; o0 = o1; o1 = t; }
                if (i0 > i1) { size_t t = i0; i0 = i1; i1 = t; }
                if (d == 0) TRANSPOSE_CASE(float, f32);
                else TRANSPOSE_CASE(double, f64);
            }
            snprintf(name, sizeof name, "%s %s transpose == WT[i][o] = W[o][i], sub-ranges, rest kept",
                     sets[v]->name, d ? "f64" : "f32");
            par_check(ok, name);
        }
}

// The weight gradient where every product underflows to -0 (dz = -2^-100,
// x = 2^-100 in f32; -2^-600 and 2^-600 in f64): by hand, each chunk's
// chain is fma(d, x, +0) = -0, then fma(d, x, -0) = -0, and the fold
// -0 + -0 = -0, so every dW is -0; a fold that started from +0 would give
// +0 (+0 + -0 = +0 under round to nearest). The bias chain starts from +0
// and adds dz: with dz = -0 every db is +0.
#define ZERO_CASE(REAL, SFX, TINY)                                                              \
    do {                                                                                        \
        const size_t B = 20, C = 8, n_in = 37, n_out = 13;                                      \
        REAL x[20 * 37], dz[20 * 13], dzb[20 * 13], dW[13 * 37], db[13];                         \
        for (size_t i = 0; i < B * n_in; i++) x[i] = (REAL)(TINY);                               \
        for (size_t i = 0; i < B * n_out; i++) dz[i] = -(REAL)(TINY), dzb[i] = -(REAL)0;         \
        par_dense_backward_weights_##SFX(dW, db, dz, x, B, C, 0, 3, 0, n_out, n_in, n_out, 0);   \
        for (size_t i = 0; i < n_out * n_in; i++) ok &= dW[i] == 0 && signbit(dW[i]);             \
        par_dense_backward_weights_##SFX(dW, db, dzb, x, B, C, 0, 3, 0, n_out, n_in, n_out, 0);  \
        for (size_t i = 0; i < n_out; i++) ok &= db[i] == 0 && !signbit(db[i]);                   \
    } while (0)

static void test_signed_zero_fold(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    for (size_t v = 0; v < n_sets; v++) {
        par_kernels_use(sets[v]);
        int ok = 1;
        ZERO_CASE(float, f32, 0x1p-100);
        ZERO_CASE(double, f64, 0x1p-600);
        char name[160];
        snprintf(name, sizeof name, "%s backward_weights: products underflowing to -0 fold to -0",
                 sets[v]->name);
        par_check(ok, name);
    }
    par_kernels_use(NULL);
}

// Batchnorm's loops as the contract states them (par_kernels.h, bn_*): one
// chain per channel over samples, then positions; the elementwise forms.
#define BN_NAIVE(REAL, SFX, FMA)                                                                \
    static void naive_bn_sums_##SFX(REAL *p0, REAL *p1, const REAL *x, const REAL *dz,         \
                                    const REAL *mean, const REAL *inv, size_t n, size_t nc,     \
                                    size_t P, size_t c0, size_t c1, int what, int add)          \
    {                                                                                           \
        for (size_t c = c0; c < c1; c++) {                                                      \
            REAL a0 = 0, a1 = 0;                                                                \
            for (size_t s = 0; s < n; s++)                                                      \
                for (size_t q = 0; q < P; q++) {                                                \
                    const size_t i = (s * nc + c) * P + q;                                      \
                    if (what == 0) a0 = a0 + x[i];                                              \
                    if (what == 1) a0 = FMA(x[i] - mean[c], x[i] - mean[c], a0);                \
                    if (what == 2) {                                                            \
                        a0 = FMA(dz[i], (x[i] - mean[c]) * inv[c], a0);                         \
                        a1 = a1 + dz[i];                                                        \
                    }                                                                           \
                }                                                                               \
            p0[c] = add ? p0[c] + a0 : a0;                                                      \
            if (what == 2) p1[c] = add ? p1[c] + a1 : a1;                                       \
        }                                                                                       \
    }                                                                                           \
    static void naive_bn_elementwise_##SFX(REAL *y, REAL *dx, const REAL *x, const REAL *dz,   \
                                           const REAL *mean, const REAL *inv, const REAL *gamma, \
                                           const REAL *beta, const REAL *G, const REAL *D,      \
                                           REAL N, size_t n, size_t nc, size_t P, size_t c0,    \
                                           size_t c1, int relu)                                 \
    {                                                                                           \
        for (size_t s = 0; s < n; s++)                                                          \
            for (size_t c = c0; c < c1; c++)                                                    \
                for (size_t q = 0; q < P; q++) {                                                \
                    const size_t i = (s * nc + c) * P + q;                                      \
                    const REAL h = (x[i] - mean[c]) * inv[c];                                   \
                    y[i] = FMA(h, gamma[c], beta[c]);                                           \
                    if (relu && !(y[i] > 0)) y[i] = 0;                                          \
                    const REAL a = gamma[c] * inv[c] / N;                                       \
                    dx[i] = a * ((N * dz[i] - D[c]) - h * G[c]);                                \
                }                                                                               \
    }

BN_NAIVE(float, f32, fmaf)
BN_NAIVE(double, f64, fma)

// One shape: B samples in chunks of C (the last one shorter), channels
// [c0, c1) of nc, P positions. The sums as the layer folds them (a chain per
// chunk, added to the running value after the first), every kind; then
// normalize and dx on samples [1, B) (a tensor's later part). Every output
// array compared whole: values outside the range must stay as they were.
#define BN_CASE(REAL, SFX)                                                                      \
    do {                                                                                        \
        const size_t T = B * nc * P;                                                            \
        REAL *x = malloc(T * sizeof(REAL)), *dz = malloc(T * sizeof(REAL));                     \
        REAL *y1 = malloc(T * sizeof(REAL)), *y2 = malloc(T * sizeof(REAL));                    \
        REAL *dx1 = malloc(T * sizeof(REAL)), *dx2 = malloc(T * sizeof(REAL));                  \
        REAL *par = malloc(10 * nc * sizeof(REAL));                                             \
        REAL *mean = par, *inv = par + nc, *gamma = par + 2 * nc, *beta = par + 3 * nc;         \
        REAL *G = par + 4 * nc, *D = par + 5 * nc, *p = par + 6 * nc;                           \
        for (size_t i = 0; i < T; i++) x[i] = (REAL)(rnd(seed, i) * 3 + 0.5);                   \
        for (size_t i = 0; i < T; i++) dz[i] = (REAL)rnd(seed + 1, i);                          \
        for (size_t i = 0; i < T; i++) y1[i] = y2[i] = (REAL)rnd(seed + 2, i);                  \
        for (size_t i = 0; i < T; i++) dx1[i] = dx2[i] = (REAL)rnd(seed + 3, i);                \
        for (size_t i = 0; i < 10 * nc; i++) par[i] = (REAL)rnd(seed + 4, i);                   \
        for (size_t c = 0; c < nc; c++) inv[c] = (REAL)(1 + rnd(seed + 5, c) / 2);              \
        for (int what = 0; what < 3; what++) {                                                  \
            for (size_t c = 0; c < 2 * nc; c++) p[2 * nc + c] = p[c];                           \
            for (size_t k = 0; k * C < B; k++) {                                                \
                const size_t n = B - k * C < C ? B - k * C : C, o = k * C * nc * P;             \
                sets[v]->SFX.bn_sums(p, p + nc, x + o, what == 2 ? dz + o : NULL, mean, inv, n, \
                                     nc, P, c0, c1, what, k > 0);                               \
                naive_bn_sums_##SFX(p + 2 * nc, p + 3 * nc, x + o, dz + o, mean, inv, n, nc, P, \
                                    c0, c1, what, k > 0);                                       \
            }                                                                                   \
            ok_s &= memcmp(p, p + 2 * nc, 2 * nc * sizeof(REAL)) == 0;                          \
        }                                                                                       \
        const size_t o = nc * P;                                                                \
        const REAL N = (REAL)(B * P);                                                           \
        sets[v]->SFX.bn_normalize(y1 + o, x + o, mean, inv, gamma, beta, B - 1, nc, P, c0, c1,  \
                                  relu);                                                        \
        sets[v]->SFX.bn_dx(dx1 + o, x + o, dz + o, mean, inv, gamma, G, D, N, B - 1, nc, P, c0, \
                           c1);                                                                 \
        naive_bn_elementwise_##SFX(y2 + o, dx2 + o, x + o, dz + o, mean, inv, gamma, beta, G, D, \
                                   N, B - 1, nc, P, c0, c1, relu);                              \
        ok_e &= memcmp(y1, y2, T * sizeof(REAL)) == 0 && memcmp(dx1, dx2, T * sizeof(REAL)) == 0; \
        free(x), free(dz), free(y1), free(y2), free(dx1), free(dx2), free(par);                 \
    } while (0)

// Every set's batchnorm kernels against the contract's loops: channel counts
// around the vector widths (1 .. 33), positions 1, 7, 9, 49 and 64 (vector
// tails and none), batches and chunks that do not divide, channel sub-ranges,
// normalize with and without its ReLU.
static void test_bn(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    const size_t ncs[] = {1, 3, 4, 5, 8, 9, 13, 16, 17, 33}, Ps[] = {1, 7, 9, 49, 64};
    char name[160];
    for (size_t v = 0; v < n_sets; v++)
        for (int d = 0; d < 2; d++) {
            int ok_s = 1, ok_e = 1, cases = 0;
            for (uint64_t seed = 1; seed <= 60; seed++) {
                const size_t nc = ncs[par_rng_bits(seed, 8, 1, 0) % (sizeof ncs / sizeof ncs[0])];
                const size_t P = Ps[par_rng_bits(seed, 8, 1, 1) % (sizeof Ps / sizeof Ps[0])];
                const size_t B = 2 + par_rng_bits(seed, 8, 1, 2) % 12;
                const size_t C = 1 + par_rng_bits(seed, 8, 1, 3) % 5;
                // every channel in a third of the cases, else a sub-range
                const int all = seed % 3 == 0, relu = seed % 2 == 0;
                const size_t c0 = all ? 0 : par_rng_bits(seed, 8, 1, 4) % nc;
                const size_t c1 = all ? nc : c0 + 1 + par_rng_bits(seed, 8, 1, 5) % (nc - c0);
                const int ok_s0 = ok_s, ok_e0 = ok_e;
                if (d == 0) BN_CASE(float, f32);
                else BN_CASE(double, f64);
                if (ok_s != ok_s0 || ok_e != ok_e0)
                    printf("  seed %llu: nc=%zu P=%zu B=%zu C=%zu c=[%zu,%zu): sums %s, "
                           "normalize/dx %s\n",
                           (unsigned long long)seed, nc, P, B, C, c0, c1, ok_s ? "ok" : "DIFF",
                           ok_e ? "ok" : "DIFF");
                cases++;
            }
            snprintf(name, sizeof name,
                     "%s %s bn_sums (x, squares, dz xhat and dz; chunk folds) == contract loops "
                     "(%d shapes)",
                     sets[v]->name, d ? "f64" : "f32", cases);
            par_check(ok_s, name);
            snprintf(name, sizeof name, "%s %s bn_normalize (relu and none), bn_dx == contract loops",
                     sets[v]->name, d ? "f64" : "f32");
            par_check(ok_e, name);
        }
}

// One conv2d layer (stride 1) and its data, for the direct conv kernels.
#define CONV_CASE(REAL, SFX, FMA)                                                               \
    do {                                                                                        \
        const size_t rl = ly->row_len, co = ly->c_out, ho = ly->h_out, wo = ly->w_out;          \
        const size_t P = ho * wo, ld = par_dense_ldwt(co), np = par_conv_padded_elems(ly);      \
        const REAL nan = (REAL)NAN;                                                             \
        REAL *x = malloc(2 * ly->n_in * sizeof(REAL)), *W = malloc(co * rl * sizeof(REAL));     \
        REAL *WT = malloc(par_dense_wt_elems(rl, co) * sizeof(REAL));                          \
        REAL *b = malloc(co * sizeof(REAL));                                                    \
        REAL *xp = malloc(2 * np * sizeof(REAL)), *dz = malloc(2 * co * P * sizeof(REAL));      \
        REAL *dzT = malloc(2 * P * ld * sizeof(REAL)), *y1 = malloc(co * P * sizeof(REAL));     \
        REAL *y2 = malloc(co * P * sizeof(REAL)), *g1 = malloc(rl * ld * sizeof(REAL));         \
        REAL *g2 = malloc(rl * ld * sizeof(REAL)), gb[2][40];                                   \
        const size_t hd = ho + 2 * (K - 1), wd = par_conv_dz_wp(ly), nd = par_conv_dz_elems(ly); \
        REAL *dzp = malloc(nd * sizeof(REAL)), *dx1 = malloc(ly->n_in * sizeof(REAL));          \
        REAL *dx2 = malloc(ly->n_in * sizeof(REAL));                                            \
        for (size_t i = 0; i < 2 * ly->n_in; i++) /* a few exact and signed zeros */            \
            x[i] = i % 11 == 3 ? (REAL)(i % 2 ? -0.0 : 0.0) : (REAL)rnd(seed, i);               \
        for (size_t i = 0; i < co * rl; i++) W[i] = (REAL)rnd(seed + 1, i);                     \
        for (size_t i = 0; i < co; i++) b[i] = (REAL)rnd(seed + 2, i);                          \
        for (size_t i = 0; i < 2 * co * P; i++) dz[i] = (REAL)rnd(seed + 3, i);                 \
        /* what the kernels may read but must not store: NaN */                                  \
        for (size_t i = 0; i < par_dense_wt_elems(rl, co); i++) WT[i] = nan;                    \
        for (size_t i = 0; i < 2 * P * ld; i++) dzT[i] = nan;                                   \
        for (size_t i = 0; i < rl * ld; i++) g1[i] = g2[i] = nan;                               \
        for (size_t t = 0; t < rl; t++)                                                         \
            for (size_t o = 0; o < co; o++) WT[t * ld + o] = W[o * rl + t];                     \
        for (size_t s = 0; s < 2; s++) {                                                        \
            par_conv_pad_##SFX(xp + s * np, x, ly, s);                                          \
            for (size_t i = np - PAR_CONV_SLACK; i < np; i++) xp[s * np + i] = nan;             \
            for (size_t p = 0; p < P; p++)                                                      \
                for (size_t o = 0; o < co; o++)                                                 \
                    dzT[(s * P + p) * ld + o] = dz[(s * co + o) * P + p];                       \
        }                                                                                       \
        /* the contract's loops: input +0 outside the image */                                  \
        for (size_t o = 0; o < co; o++) {                                                       \
            gb[1][o] = 0;                                                                       \
            for (size_t t = 0; t < rl; t++) g2[t * ld + o] = 0;                                 \
        }                                                                                       \
        for (size_t s = 0; s < 2; s++)                                                          \
            for (size_t o = 0; o < co; o++)                                                     \
                for (size_t p = 0; p < P; p++) {                                                \
                    REAL acc = b[o];                                                            \
                    for (size_t t = 0; t < rl; t++) {                                           \
                        const size_t ci = t / (K * K), kh = t / K % K, kw = t % K;              \
                        const long ih = (long)(p / wo + kh) - (long)pad;                        \
                        const long iw = (long)(p % wo + kw) - (long)pad;                        \
                        const int in = ih >= 0 && ih < (long)ly->h_in && iw >= 0 &&             \
                                       iw < (long)ly->w_in;                                     \
                        const size_t at = (ci * ly->h_in + (size_t)ih) * ly->w_in + (size_t)iw; \
                        const REAL xv = in ? x[s * ly->n_in + at] : (REAL)0;                    \
                        acc = FMA(W[o * rl + t], xv, acc);                                      \
                        g2[t * ld + o] = FMA(xv, dz[(s * co + o) * P + p], g2[t * ld + o]);       \
                    }                                                                           \
                    if (s == 0) y2[o * P + p] = acc;                                            \
                    gb[1][o] = gb[1][o] + dz[(s * co + o) * P + p];                             \
                }                                                                               \
        /* the input gradient: dzp's padding NaN too (lanes it reaches are never added) */       \
        for (size_t i = 0; i < nd; i++) dzp[i] = nan;                                           \
        for (size_t o = 0; o < co; o++)                                                         \
            for (size_t p = 0; p < P; p++)                                                      \
                dzp[(o * hd + p / wo + K - 1) * wd + p % wo + K - 1] = dz[o * P + p];           \
        for (size_t i = 0; i < ly->n_in; i++) {                                                 \
            const size_t c = i / (ly->h_in * ly->w_in), ih = i / ly->w_in % ly->h_in;           \
            const size_t iw = i % ly->w_in;                                                     \
            REAL acc = 0;                                                                       \
            for (size_t oh = 0; oh < ho; oh++) /* output positions ascending */                 \
                for (size_t ow = 0; ow < wo; ow++) {                                            \
                    const long kh = (long)(ih + pad) - (long)oh, kw = (long)(iw + pad) - (long)ow; \
                    if (kh < 0 || kh >= (long)K || kw < 0 || kw >= (long)K) continue;           \
                    REAL t = 0;                                                                 \
                    for (size_t o = 0; o < co; o++)                                             \
                        t = FMA(W[o * rl + (c * K + (size_t)kh) * K + (size_t)kw],              \
                                dz[o * P + oh * wo + ow], t);                                   \
                    acc = acc + t;                                                              \
                }                                                                               \
            dx2[i] = acc;                                                                       \
        }                                                                                       \
        REAL *Wd = malloc(par_conv_dpack_elems(ly) * sizeof(REAL));                            \
        sets[v]->SFX.conv_dpack(Wd, W, ly);                                                     \
        sets[v]->SFX.conv_dgrad(dx1, dzp, Wd, ly);                                              \
        free(Wd);                                                                               \
        ok_d &= memcmp(dx1, dx2, ly->n_in * sizeof(REAL)) == 0;                                 \
        REAL *Wp = malloc(par_conv_pack_elems(ly) * sizeof(REAL));                             \
        for (size_t i = 0; i < par_conv_pack_elems(ly); i++) Wp[i] = nan;                      \
        sets[v]->SFX.conv_pack(Wp, WT, ly);                                                     \
        sets[v]->SFX.conv_forward(y1, xp, Wp, b, ly);                                           \
        free(Wp);                                                                               \
        for (size_t o = 0; o < 40; o++) gb[0][o] = nan; /* past co: must stay NaN */            \
        sets[v]->SFX.conv_wgrad(g1, gb[0], xp, dzT, ld, ly, co, 1, 1, NULL); /* a sample a call */ \
        sets[v]->SFX.conv_wgrad(g1, gb[0], xp + np, dzT + P * ld, ld, ly, co, 1, 0, NULL);      \
        for (size_t o = co; o < 40; o++) gb[1][o] = nan;                                        \
        ok_f &= memcmp(y1, y2, co * P * sizeof(REAL)) == 0;                                     \
        ok_w &= memcmp(g1, g2, rl * ld * sizeof(REAL)) == 0;                                    \
        ok_w &= memcmp(gb[0], gb[1], sizeof gb[0]) == 0;                                        \
        for (size_t o = 0; o < 40; o++) gb[0][o] = nan;                                         \
        sets[v]->SFX.conv_wgrad(g1, gb[0], xp, dzT, ld, ly, co, 2, 1, NULL); /* both in one */  \
        ok_w &= memcmp(g1, g2, rl * ld * sizeof(REAL)) == 0;                                    \
        ok_w &= memcmp(gb[0], gb[1], sizeof gb[0]) == 0;                                        \
        /* the second sample's call ending in a fold: f1 = f + (both samples' chains) */        \
        REAL *f1 = malloc(rl * ld * sizeof(REAL)), *f2 = malloc(rl * ld * sizeof(REAL));        \
        for (size_t i = 0; i < rl * ld; i++) f1[i] = f2[i] = (REAL)((i * 37) % 101) / 7;       \
        for (size_t t = 0; t < rl; t++)                                                         \
            for (size_t i = 0; i < co; i++) f2[t * ld + i] = f2[t * ld + i] + g2[t * ld + i];  \
        sets[v]->SFX.conv_wgrad(g1, gb[0], xp, dzT, ld, ly, co, 1, 1, NULL);                   \
        sets[v]->SFX.conv_wgrad(g1, gb[0], xp + np, dzT + P * ld, ld, ly, co, 1, 0, f1);        \
        ok_w &= memcmp(f1, f2, rl * ld * sizeof(REAL)) == 0;                                    \
        free(f1), free(f2);                                                                     \
        free(x), free(W), free(WT), free(b), free(xp), free(dz), free(dzT), free(y1), free(y2); \
        free(g1), free(g2), free(dzp), free(dx1), free(dx2);                                    \
    } while (0)

// Every set's direct conv kernels (forward; weight gradient over two
// samples, a call each, both in one call, and a call each with the second
// ending in a fold; input gradient) against the contract's loops on random
// stride-1 shapes:
// channels 1 .. 37 in and out (register-tile tails), kernels 1 .. 5, padding
// 0 .. K - 1, images 1 .. 23 wide (vector tails). The padded sample's slack,
// the transposed weight panel's padding, dzT's columns past c_out and the
// padded output gradient's border hold NaN: a lane that reaches a stored
// value fails the test.
static void test_conv_direct(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    char name[200];
    for (size_t v = 0; v < n_sets; v++)
        for (int d = 0; d < 2; d++) {
            int ok_f = 1, ok_w = 1, ok_d = 1, cases = 0;
            for (uint64_t seed = 1; seed <= 40; seed++) {
                const size_t K = 1 + par_rng_bits(seed, 10, 1, 0) % 5;
                const size_t pad = par_rng_bits(seed, 10, 1, 1) % K;
                const size_t lo = K > 2 * pad ? K - 2 * pad : 1;   // h_out >= 1
                const size_t h = lo + par_rng_bits(seed, 10, 1, 2) % 12;
                const size_t w = lo + par_rng_bits(seed, 10, 1, 3) % 23;
                const size_t n_ci = 1 + par_rng_bits(seed, 10, 1, 4) % (seed % 4 ? 6 : 37);
                const size_t n_co = 1 + par_rng_bits(seed, 10, 1, 5) % 37;
                char spec[96];
                snprintf(spec, sizeof spec, "cnn:%zux%zux%zu-c%zuk%zup%zu-f-fc2", n_ci, h, w,
                         n_co, K, pad);
                par_model m;
                if (par_model_parse(&m, spec, PAR_ACT_RELU) != PAR_OK) {
                    printf("  %s: %s\n", spec, par_last_error());
                    ok_f = 0;
                    continue;
                }
                const par_layer *ly = &m.layers[0];
                const int f0 = ok_f, w0 = ok_w, d0 = ok_d;
                if (d == 0) CONV_CASE(float, f32, fmaf);
                else CONV_CASE(double, f64, fma);
                if (ok_f != f0 || ok_w != w0 || ok_d != d0)
                    printf("  seed %llu %s: forward %s, weight gradient %s, input gradient %s\n",
                           (unsigned long long)seed, spec, ok_f == f0 ? "ok" : "DIFF",
                           ok_w == w0 ? "ok" : "DIFF", ok_d == d0 ? "ok" : "DIFF");
                cases++;
            }
            snprintf(name, sizeof name,
                     "%s %s conv_forward, conv_wgrad, conv_dgrad (stride 1) == contract loops "
                     "(%d shapes)", sets[v]->name, d ? "f64" : "f32", cases);
            par_check(ok_f && ok_w && ok_d, name);
        }
}

// par_conv_backward_weights: the weight and bias gradient of output channels
// [o0, o1), chunks [c0, c1) folded left (cont: onto dW's and db's own values),
// against the header's loops written out, with every kernel set active. Random
// shapes, strides 1 (the direct chains, folded by tap and transposed into dW)
// and 2 (im2col); rows of dW and db outside [o0, o1) must keep their values.
#define WFOLD_CASE(REAL, SFX, FMA)                                                              \
    do {                                                                                        \
        const size_t rl = ly->row_len, co = ly->c_out, P = ly->h_out * ly->w_out;               \
        REAL *x = malloc(B * ly->n_in * sizeof(REAL)), *dz = malloc(B * co * P * sizeof(REAL)); \
        REAL *dW1 = malloc(co * rl * sizeof(REAL)), *dW2 = malloc(co * rl * sizeof(REAL));      \
        REAL *db1 = malloc(co * sizeof(REAL)), *db2 = malloc(co * sizeof(REAL));                \
        REAL *scr = malloc(par_conv_wgrad_elems(ly, o1 - o0) * sizeof(REAL));                   \
        for (size_t i = 0; i < B * ly->n_in; i++) x[i] = (REAL)rnd(seed, i);                    \
        for (size_t i = 0; i < B * co * P; i++) dz[i] = (REAL)rnd(seed + 1, i);                 \
        for (size_t i = 0; i < co * rl; i++) dW1[i] = dW2[i] = (REAL)rnd(seed + 2, i);          \
        for (size_t i = 0; i < co; i++) db1[i] = db2[i] = (REAL)rnd(seed + 3, i);               \
        par_conv_backward_weights_##SFX(dW1, db1, dz, x, ly, B, C, c0, c1, o0, o1, cont, scr);  \
        for (size_t o = o0; o < o1; o++)                                                        \
            for (size_t t = 0; t <= rl; t++) { /* t == rl: the bias */                          \
                REAL run = t < rl ? dW2[o * rl + t] : db2[o];                                   \
                const size_t ci = t / (K * K), kh = t / K % K, kw = t % K;                      \
                for (size_t c = c0; c < c1; c++) {                                              \
                    REAL part = 0;                                                              \
                    for (size_t s = c * C; s < B && s < (c + 1) * C; s++)                       \
                        for (size_t p = 0; p < P; p++) {                                        \
                            const REAL dv = dz[(s * co + o) * P + p];                           \
                            const long ih = (long)(p / ly->w_out * S + kh) - (long)pad;          \
                            const long iw = (long)(p % ly->w_out * S + kw) - (long)pad;          \
                            const int in = t < rl && ih >= 0 && ih < (long)ly->h_in &&          \
                                           iw >= 0 && iw < (long)ly->w_in; /* t = rl: no x */  \
                            const REAL xv = in ? x[s * ly->n_in + (ci * ly->h_in + (size_t)ih) * \
                                                   ly->w_in + (size_t)iw] : (REAL)0;            \
                            part = t < rl ? FMA(dv, xv, part) : part + dv;                      \
                        }                                                                       \
                    run = c == c0 && !cont ? part : run + part;                                 \
                }                                                                               \
                if (t < rl) dW2[o * rl + t] = run;                                              \
                else db2[o] = run;                                                              \
            }                                                                                   \
        ok &= memcmp(dW1, dW2, co * rl * sizeof(REAL)) == 0;                                    \
        ok &= memcmp(db1, db2, co * sizeof(REAL)) == 0;                                         \
        free(x), free(dz), free(dW1), free(dW2), free(db1), free(db2), free(scr);              \
    } while (0)

static void test_conv_wfold(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    char name[200];
    for (size_t v = 0; v < n_sets; v++) {
        par_kernels_use(sets[v]);
        for (int d = 0; d < 2; d++) {
            int ok_all = 1, cases = 0;
            for (uint64_t seed = 1; seed <= 24; seed++) {
                const size_t K = 1 + par_rng_bits(seed, 13, 0, 0) % 3;
                const size_t S = 1 + seed % 2, pad = par_rng_bits(seed, 13, 0, 1) % K;
                const size_t h = K + par_rng_bits(seed, 13, 0, 2) % 9;
                const size_t n_ci = 1 + par_rng_bits(seed, 13, 0, 3) % 5;
                const size_t n_co = 1 + par_rng_bits(seed, 13, 0, 4) % 21;
                const size_t B = 1 + par_rng_bits(seed, 13, 0, 5) % 12;
                const size_t C = 1 + par_rng_bits(seed, 13, 0, 6) % 4, nch = (B + C - 1) / C;
                const size_t c0 = par_rng_bits(seed, 13, 0, 7) % nch;
                const size_t c1 = c0 + 1 + par_rng_bits(seed, 13, 0, 8) % (nch - c0);
                const size_t o0 = par_rng_bits(seed, 13, 0, 9) % n_co;
                const size_t o1 = o0 + 1 + par_rng_bits(seed, 13, 0, 10) % (n_co - o0);
                const int cont = (int)(seed / 2 % 2);
                char spec[96];
                snprintf(spec, sizeof spec, "cnn:%zux%zux%zu-c%zuk%zus%zup%zu-f-fc2", n_ci, h,
                         h + 3, n_co, K, S, pad);
                par_model m;
                int ok = 1;
                if (par_model_parse(&m, spec, PAR_ACT_RELU) != PAR_OK) {
                    printf("  %s: %s\n", spec, par_last_error());
                    ok_all = 0;
                    continue;
                }
                const par_layer *ly = &m.layers[0];
                if (d == 0) WFOLD_CASE(float, f32, fmaf);
                else WFOLD_CASE(double, f64, fma);
                if (!ok)
                    printf("  seed %llu %s B=%zu C=%zu c=[%zu,%zu) o=[%zu,%zu) cont=%d: DIFF\n",
                           (unsigned long long)seed, spec, B, C, c0, c1, o0, o1, cont);
                ok_all &= ok;
                cases++;
            }
            snprintf(name, sizeof name,
                     "%s %s conv backward_weights (chunk fold, strides 1 and 2) == contract loops "
                     "(%d shapes)", sets[v]->name, d ? "f64" : "f32", cases);
            par_check(ok_all, name);
        }
    }
    par_kernels_use(NULL);
}

// The 2 x 2 max-pool forward, pool2_forward, against the first maximum of
// each window written out (y guarded after the plane); its input gradient
// with relu's (or no) derivative, pool2_backward, against the contract's two
// passes written out: dx = 0,
// the first maximum of each window (x00, then x01, x10, x11 each taken where
// greater) gets dy; then, for relu, dx = x > 0 ? dx : 0. Inputs from {-1, -0,
// +0, 0.5, 1, NaN} (ties, signed zeros, NaN in windows) and dy with -0 and
// NaN among them; dx starts as garbage and has a guard after the plane.
#define POOL2_CASE(REAL, SFX)                                                                   \
    do {                                                                                        \
        const size_t n_rows = 1 + par_rng_bits(seed, 12, 0, 0) % 5;                             \
        const size_t w_out = widths[par_rng_bits(seed, 12, 0, 1) % n_widths], w = 2 * w_out;    \
        const size_t n = 2 * n_rows * w;                                                        \
        const int relu = (int)(seed % 2);                                                       \
        const REAL vals[6] = {-1, (REAL)-0.0, 0, (REAL)0.5, 1, (REAL)NAN};                      \
        REAL *x = malloc(n * sizeof(REAL)), *dy = malloc(n_rows * w_out * sizeof(REAL));        \
        REAL *want = calloc(n + 1, sizeof(REAL)), *dx = malloc((n + 1) * sizeof(REAL));         \
        REAL *y = malloc((n_rows * w_out + 1) * sizeof(REAL));                                  \
        REAL *y_want = malloc((n_rows * w_out + 1) * sizeof(REAL));                             \
        for (size_t k = 0; k < n; k++) x[k] = vals[par_rng_bits(seed, 12, 1, k) % 6];           \
        for (size_t k = 0; k < n_rows * w_out; k++) {                                           \
            const uint32_t r = par_rng_bits(seed, 12, 2, k) % 8;                                \
            dy[k] = r == 0 ? (REAL)-0.0 : r == 1 ? (REAL)NAN : (REAL)rnd(seed, k);              \
        }                                                                                       \
        for (size_t k = 0; k <= n; k++) dx[k] = (REAL)rnd(seed + 7, k);                         \
        want[n] = dx[n];                                                                        \
        for (size_t k = 0; k <= n_rows * w_out; k++) y[k] = y_want[k] = (REAL)rnd(seed + 8, k); \
        for (size_t r = 0; r < n_rows; r++)                                                     \
            for (size_t ow = 0; ow < w_out; ow++) {                                             \
                const size_t at[4] = {2 * r * w + 2 * ow, 2 * r * w + 2 * ow + 1,               \
                                      (2 * r + 1) * w + 2 * ow, (2 * r + 1) * w + 2 * ow + 1};  \
                size_t arg = at[0];                                                             \
                for (int q = 1; q < 4; q++)                                                     \
                    if (x[at[q]] > x[arg]) arg = at[q];                                         \
                want[arg] = dy[r * w_out + ow];                                                 \
                y_want[r * w_out + ow] = x[arg];                                                \
            }                                                                                   \
        for (size_t k = 0; k < n && relu; k++) want[k] = x[k] > 0 ? want[k] : 0;               \
        sets[v]->SFX.pool2_backward(dx, dy, x, n_rows, w_out, relu);                            \
        ok &= memcmp(dx, want, (n + 1) * sizeof(REAL)) == 0;                                    \
        sets[v]->SFX.pool2_forward(y, x, n_rows, w_out);                                        \
        ok_f &= memcmp(y, y_want, (n_rows * w_out + 1) * sizeof(REAL)) == 0;                    \
        cases++;                                                                                \
        free(x), free(dy), free(want), free(dx), free(y), free(y_want);                         \
    } while (0)

static void test_pool2(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    const size_t widths[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17};
    const size_t n_widths = sizeof widths / sizeof widths[0];
    char name[160];
    for (size_t v = 0; v < n_sets; v++)
        for (int d = 0; d < 2; d++) {
            int ok = 1, ok_f = 1, cases = 0;
            for (uint64_t seed = 1; seed <= 200; seed++) {
                if (d == 0) POOL2_CASE(float, f32);
                else POOL2_CASE(double, f64);
            }
            snprintf(name, sizeof name,
                     "%s %s pool2_forward == the first maximum of each window (%d planes)",
                     sets[v]->name, d ? "f64" : "f32", cases);
            par_check(ok_f, name);
            snprintf(name, sizeof name,
                     "%s %s pool2_backward == max-pool input gradient, then relu's or no "
                     "derivative (%d planes)",
                     sets[v]->name, d ? "f64" : "f32", cases);
            par_check(ok, name);
        }
}

// par_calloc_big zeroes by dropping pages on Linux: memory that malloc hands
// back after a free (filled with 0xAB here) must read as zero again, for a
// size under the huge page (calloc), one over it, and one not a multiple of it.
// glibc maps big blocks afresh (already zero) unless told to keep them in
// its heap, where a freed block's bytes stay as they were: so it is told.
static void test_calloc_big(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
    const size_t sizes[] = {1000, (size_t)3 << 20, ((size_t)5 << 20) + 12};
    int ok = 1;
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < 3; k++) {
            unsigned char *p = par_calloc_big(sizes[k], 1);
            ok &= p != NULL;
            for (size_t i = 0; p && i < sizes[k]; i++) ok &= p[i] == 0;
            if (p) memset(p, 0xAB, sizes[k]);
            free(p);
        }
    par_check(ok && par_calloc_big(SIZE_MAX / 2, 4) == NULL,
              "par_calloc_big: zeroed after reuse (1000 B, 3 MiB, 5 MiB + 12), NULL on overflow");
}

int main(void)
{
    const par_kernel_set *sets[MAX_SETS];
    const size_t n_sets = kernel_sets(sets);
    par_check(n_sets >= 1 && strcmp(sets[n_sets - 1]->name, "portable") == 0,
              "kernel sets: portable is available, last");
    par_check(par_kernels_active() == sets[0] && strcmp(par_kernels_variant(), sets[0]->name) == 0,
              "kernel sets: the best available is active by default");
    printf("kernel sets available: %zu (best: %s)\n", n_sets, sets[0]->name);
    // par_kernels_find (the CLI's PARITY_KERNELS): every available set by its
    // name and by the part before '+'; nothing for a set this CPU lacks.
    int found = par_kernels_find("nosuchset") == NULL && par_kernels_find("") == NULL &&
                par_kernels_find(NULL) == NULL && par_kernels_find("avx") == NULL;
    for (size_t v = 0; v < n_sets; v++) {
        char stem[32];
        snprintf(stem, sizeof stem, "%.*s", (int)strcspn(sets[v]->name, "+"), sets[v]->name);
        found &= par_kernels_find(sets[v]->name) == sets[v] && par_kernels_find(stem) == sets[v];
    }
    const char *all_names[] = {"avx512vl", "avx2+fma", "neon", "portable"};
    for (size_t i = 0; i < sizeof all_names / sizeof all_names[0]; i++) {
        int runs = 0;
        for (size_t v = 0; v < n_sets; v++) runs |= strcmp(sets[v]->name, all_names[i]) == 0;
        found &= (par_kernels_find(all_names[i]) != NULL) == runs;
    }
    par_check(found, "kernel sets: par_kernels_find by name and stem, NULL for others");
    test_gemm_acc();
    test_elementwise();
    test_transpose();
    test_signed_zero_fold();
    test_bn();
    test_conv_direct();
    test_conv_wfold();
    test_pool2();
    test_calloc_big();
    const size_t sizes[] = {1, 7, 16, 33, 128, 784, 785};
    const size_t n_sizes = sizeof sizes / sizeof sizes[0];
    char name[200];
    for (size_t v = 0; v < n_sets; v++) {
        par_kernels_use(sets[v]);
        par_check(par_kernels_active() == sets[v], "kernel sets: par_kernels_use selects a set");
        for (int d = 0; d < 2; d++) {
            int all_f = 1, all_d = 1, all_w = 1, cases = 0;
            for (uint64_t seed = 1; seed <= 40; seed++) {
                // A random shape from the list, sub-ranges and chunking from the seed.
                const size_t n_in = sizes[par_rng_bits(seed, 8, 0, 0) % n_sizes];
                const size_t n_out = sizes[par_rng_bits(seed, 8, 0, 1) % n_sizes];
                const size_t B = 1 + par_rng_bits(seed, 8, 0, 2) % 70;
                const size_t C = 1 + par_rng_bits(seed, 8, 0, 3) % 9;
                const size_t nch = (B + C - 1) / C;
                const size_t s0 = par_rng_bits(seed, 8, 0, 4) % B, s1 = s0 + 1 + par_rng_bits(seed, 8, 0, 5) % (B - s0);
                const size_t o0 = par_rng_bits(seed, 8, 0, 6) % n_out, o1 = o0 + 1 + par_rng_bits(seed, 8, 0, 7) % (n_out - o0);
                const size_t c0 = par_rng_bits(seed, 8, 0, 8) % nch, c1 = c0 + 1 + par_rng_bits(seed, 8, 0, 9) % (nch - c0);
                const size_t o_mid = par_rng_bits(seed, 8, 0, 10) % (n_out + 1);
                const int cont = (int)(seed % 2);
                int ok_f = 1, ok_d = 1, ok_w = 1;
                if (d == 0) RUN_CASE(float, f32);
                else RUN_CASE(double, f64);
                if (!(ok_f && ok_d && ok_w))
                    printf("  seed %llu: B=%zu n_in=%zu n_out=%zu C=%zu s=[%zu,%zu) o=[%zu,%zu) "
                           "c=[%zu,%zu) cont=%d: forward %s, backward_data %s, weights %s\n",
                           (unsigned long long)seed, B, n_in, n_out, C, s0, s1, o0, o1, c0, c1,
                           cont, ok_f ? "ok" : "DIFF", ok_d ? "ok" : "DIFF", ok_w ? "ok" : "DIFF");
                all_f &= ok_f;
                all_d &= ok_d;
                all_w &= ok_w;
                cases++;
            }
            // Rows 2 KB apart (512 or 1024 values of f32 or f64): the AVX2
            // kernels copy such panels before use; every row tile, full range.
            for (size_t k = 0; k < 2; k++) {
                const size_t n_in = k ? 512 : 1024, n_out = k ? 1024 : 512, B = 64, C = 8;
                const size_t s0 = k, s1 = B, o0 = 0, o1 = n_out, c0 = 0, c1 = B / C, o_mid = 13;
                const int cont = (int)k;
                const uint64_t seed = 100 + k;
                int ok_f = 1, ok_d = 1, ok_w = 1;
                if (d == 0) RUN_CASE(float, f32);
                else RUN_CASE(double, f64);
                if (!(ok_f && ok_d && ok_w))
                    printf("  n_in=%zu n_out=%zu: forward %s, backward_data %s, weights %s\n", n_in,
                           n_out, ok_f ? "ok" : "DIFF", ok_d ? "ok" : "DIFF", ok_w ? "ok" : "DIFF");
                all_f &= ok_f;
                all_d &= ok_d;
                all_w &= ok_w;
                cases++;
            }
            const char *dn = d ? "f64" : "f32";
            snprintf(name, sizeof name, "%s %s forward == contract loops (%d random shapes)",
                     par_kernels_variant(), dn, cases);
            par_check(all_f, name);
            snprintf(name, sizeof name, "%s %s backward_data == contract loops", par_kernels_variant(), dn);
            par_check(all_d, name);
            snprintf(name, sizeof name, "%s %s backward_weights (chunk fold) == contract loops",
                     par_kernels_variant(), dn);
            par_check(all_w, name);
        }
    }
    par_kernels_use(NULL);
    return par_test_exit();
}
