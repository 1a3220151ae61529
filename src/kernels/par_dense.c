// Kernel instantiation and dispatch: dense kernels in up to four variants,
// portable C (dense_impl.inc, libm's fma), AVX2+FMA intrinsics on x86-64
// (twice: with AVX2's 16 registers, and with AVX-512VL's 32) and NEON on
// aarch64 (all the register-tiled dense_simd.inc; the x86 ones through
// dense_avx.inc, NEON's own pieces in dense_neon.inc), each a par_kernel_set
// table; the best set the CPU runs is resolved once, on first use.
// Batchnorm's sums, normalisation and input gradient likewise: portable
// (bn_impl.inc, the NEON set's too) and AVX2 / AVX-512VL (bn_simd.inc through
// dense_avx.inc, with bn_avx.inc's transposes).
// Elementwise kernels once (elementwise_impl.inc), their ReLU and Adam loops
// through the set; the 2 x 2 max-pool forward and input gradient in every
// variant (pool2_impl.inc). Every variant evaluates the same fma chains, so they
// agree bit for bit (test_kernels runs every available set).
#include "par_kernels.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "par_conv.h"
#include "par_math.h"
#include "par_target.h"

#if defined(PAR_HAVE_AARCH64) && defined(__linux__)
#include <asm/hwcap.h>   // HWCAP_ASIMD
#include <sys/auxv.h>    // getauxval
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define CAT3(a, b, c) CAT(CAT(a, b), c)

// --- portable variant ------------------------------------------------------
#define REAL float
#define FMA fmaf
#define SB 4
#define NAME(f) CAT3(f, _f32_, portable)
#include "dense_impl.inc"
#include "conv_direct_impl.inc"
#undef REAL
#undef FMA
#undef SB
#undef NAME

#define REAL double
#define FMA fma
#define SB 2
#define NAME(f) CAT3(f, _f64_, portable)
#include "dense_impl.inc"
#include "conv_direct_impl.inc"
#undef REAL
#undef FMA
#undef SB
#undef NAME

#define REAL float
#define FMA fmaf
#define NAME(f) CAT3(f, _f32_, portable)
#include "bn_impl.inc"
#undef REAL
#undef FMA
#undef NAME

#define REAL double
#define FMA fma
#define NAME(f) CAT3(f, _f64_, portable)
#include "bn_impl.inc"
#undef REAL
#undef FMA
#undef NAME

// --- AVX2 + FMA variant: intrinsics ----------------------------------------
// Every function here carries PAR_TARGET_AVX2 (par_target.h); the file
// outside them stays portable, and the set is used only where cpu_has_avx2.
#ifdef PAR_HAVE_X86_64
#define PAR_HAVE_AVX2_VARIANT 1

static inline PAR_TARGET_AVX2 __m256i lane_mask32(size_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

static inline PAR_TARGET_AVX2 __m256i lane_mask64(size_t n)
{
    const __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)n), idx);
}

#define TARGET PAR_TARGET_AVX2
#define MR 6        // 12 accumulators of AVX2's 16 registers
#define FOLD_L1 1   // and the exact weight gradient's fold in L1 (dense_simd.inc)
#define VARIANT avx2
#include "bn_avx.inc"
#include "dense_avx.inc"
#undef TARGET
#undef MR
#undef FOLD_L1
#undef VARIANT

// --- AVX-512VL variant: the same 256-bit code, compiled where AVX-512VL's
// EVEX encoding gives it 32 vector registers, not 16. Tiles of 8 rows: 16
// accumulators, and the exact weight gradient's 16 running sums stay in
// registers too (with 16 registers they live in L1). The same chains, so
// the same bits; relu, Adam and the transposes are AVX2's.
#define PAR_HAVE_AVX512VL_VARIANT 1
#define TARGET PAR_TARGET_AVX512VL
#define MR 8
#define FOLD_L1 0
#define VARIANT avx512vl
#include "bn_avx.inc"
#include "dense_avx.inc"
#undef TARGET
#undef MR
#undef FOLD_L1
#undef VARIANT

// ReLU forward y = y > 0 ? y : 0 and backward dy = y > 0 ? dy : 0 with the
// same semantics as the scalar loops (+0 for y <= 0, -0 and NaN included):
// an ordered compare and a mask, no branch.
#define RELU_AVX2(SFX, REAL, V, LANES, LD, ST, AND, CMP, ZERO)                                  \
    static PAR_TARGET_AVX2 void relu_forward_##SFX##_avx2(REAL *y, size_t n)                    \
    {                                                                                           \
        size_t i = 0;                                                                           \
        for (; i + LANES <= n; i += LANES) {                                                    \
            const V v = LD(y + i);                                                              \
            ST(y + i, AND(CMP(v, ZERO(), _CMP_GT_OQ), v));                                      \
        }                                                                                       \
        for (; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0;                                          \
    }                                                                                           \
    static PAR_TARGET_AVX2 void relu_backward_##SFX##_avx2(REAL *dy, const REAL *y, size_t n)   \
    {                                                                                           \
        size_t i = 0;                                                                           \
        for (; i + LANES <= n; i += LANES)                                                      \
            ST(dy + i, AND(CMP(LD(y + i), ZERO(), _CMP_GT_OQ), LD(dy + i)));                    \
        for (; i < n; i++) dy[i] = y[i] > 0 ? dy[i] : 0;                                        \
    }

RELU_AVX2(f32, float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_and_ps, _mm256_cmp_ps,
          _mm256_setzero_ps)
RELU_AVX2(f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_and_pd,
          _mm256_cmp_pd, _mm256_setzero_pd)

// Adam (par_kernels.h's order, one IEEE rounding per operation, no fma) on
// whole vectors [0, n - n % LANES); the caller does the tail with the scalar
// loop. vdivps/vsqrtps round each lane exactly as divss/sqrtss do.
#define ADAM_AVX2(SFX, REAL, V, LANES, P)                                                       \
    static PAR_TARGET_AVX2 size_t adam_##SFX##_avx2(REAL *w, REAL *m, REAL *v, const REAL *g,   \
                                                    size_t n, const REAL c[8])                  \
    {                                                                                           \
        const V b1 = P(set1)(c[0]), c1 = P(set1)(c[1]), b2 = P(set1)(c[2]), c2 = P(set1)(c[3]); \
        const V bc1 = P(set1)(c[4]), bc2 = P(set1)(c[5]), eps = P(set1)(c[6]);                 \
        const V lr = P(set1)(c[7]);                                                             \
        size_t i = 0;                                                                           \
        for (; i + LANES <= n; i += LANES) {                                                    \
            const V gi = P(loadu)(g + i);                                                       \
            const V a = P(add)(P(mul)(b1, P(loadu)(m + i)), P(mul)(c1, gi));                   \
            P(storeu)(m + i, a);                                                                \
            const V b = P(add)(P(mul)(b2, P(loadu)(v + i)), P(mul)(P(mul)(c2, gi), gi));        \
            P(storeu)(v + i, b);                                                                \
            const V d = P(add)(P(sqrt)(P(div)(b, bc2)), eps);                                   \
            const V t = P(div)(P(mul)(lr, P(div)(a, bc1)), d);                                  \
            P(storeu)(w + i, P(sub)(P(loadu)(w + i), t));                                       \
        }                                                                                       \
        return i;                                                                               \
    }
#define PS_(f) _mm256_##f##_ps
#define PD_(f) _mm256_##f##_pd
ADAM_AVX2(f32, float, __m256, 8, PS_)
ADAM_AVX2(f64, double, __m256d, 4, PD_)
#undef PS_
#undef PD_
#endif

// --- portable ReLU and Adam: the scalar loops, no vector head ---------------
#define RELU_PORTABLE(SFX, REAL)                                                                \
    static void relu_forward_##SFX##_portable(REAL *restrict y, size_t n)                      \
    {                                                                                           \
        for (size_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0;                              \
    }                                                                                           \
    static void relu_backward_##SFX##_portable(REAL *restrict dy, const REAL *restrict y,      \
                                               size_t n)                                        \
    {                                                                                           \
        for (size_t i = 0; i < n; i++) dy[i] = y[i] > 0 ? dy[i] : 0;                            \
    }                                                                                           \
    static size_t adam_##SFX##_portable(REAL *restrict w, REAL *restrict m, REAL *restrict v,  \
                                        const REAL *restrict g, size_t n, const REAL c[8])      \
    {                                                                                           \
        (void)w, (void)m, (void)v, (void)g, (void)n, (void)c;                                   \
        return 0;                                                                               \
    }
RELU_PORTABLE(f32, float)
RELU_PORTABLE(f64, double)

// --- transposes: WT[i][o] = W[o][i] for o in [o0, o1), i in [i0, i1) --------
// Blocks of TBO rows x TBI columns: each row is read TBI values at a time,
// runs long enough for the prefetcher (blocks of 32 columns made a conv
// layer's 32 x 1024 output gradient, rows 4 KiB apart, three times slower to
// transpose), and the TBO values written to each WT row fill whole cache
// lines. The AVX2 variant moves 8 x 8 (f32) or 4 x 4 (f64) tiles through
// registers, the block's edges one value at a time; same values, so no bit
// depends on the variant.
enum { TBO = 32, TBI = 256 };
#define TRANSPOSE(SFX, REAL, VAR, TL, TILE, ATTR)                                               \
    static ATTR void transpose_##SFX##_##VAR(REAL *restrict WT, size_t ld,                      \
                                             const REAL *restrict W, size_t n_in, size_t o0,    \
                                             size_t o1, size_t i0, size_t i1)                   \
    {                                                                                           \
        for (size_t ob = o0; ob < o1; ob += TBO) {                                              \
            const size_t oe = o1 - ob < TBO ? o1 : ob + TBO;                                    \
            for (size_t ib = i0; ib < i1; ib += TBI) {                                          \
                const size_t ie = i1 - ib < TBI ? i1 : ib + TBI;                                \
                size_t o = ob;                                                                  \
                for (; TL > 1 && o + TL <= oe; o += TL) {                                       \
                    size_t i = ib;                                                              \
                    for (; i + TL <= ie; i += TL) TILE(WT + i * ld + o, ld, W + o * n_in + i, n_in); \
                    for (; i < ie; i++)                                                         \
                        for (size_t k = 0; k < TL; k++) WT[i * ld + o + k] = W[(o + k) * n_in + i]; \
                }                                                                               \
                for (size_t i = ib; i < ie; i++)                                                \
                    for (size_t r = o; r < oe; r++) WT[i * ld + r] = W[r * n_in + i];           \
            }                                                                                   \
        }                                                                                       \
    }
#define NO_TILE(WT, ld, W, n_in) (void)0
TRANSPOSE(f32, float, portable, 1, NO_TILE, )
TRANSPOSE(f64, double, portable, 1, NO_TILE, )

#ifdef PAR_HAVE_AVX2_VARIANT
// T[k][j] = S[j][k] for an 8 x 8 tile: S rows lds apart, T rows ldt apart.
static inline __attribute__((always_inline)) PAR_TARGET_AVX2 void
tile_f32(float *T, size_t ldt, const float *S, size_t lds)
{
    __m256 r[8], t[8], u[8];
    for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(S + j * lds);
    for (int j = 0; j < 8; j += 2) {
        t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);       // r_j0 r_j+1,0 r_j1 r_j+1,1 (x2 lanes)
        t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);   // r_j2 r_j+1,2 r_j3 r_j+1,3
    }
    for (int j = 0; j < 8; j += 4) {
        u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);      // column 0 (4 in each lane)
        u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);  // column 1
        u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
        u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {   // low lanes: columns 0..3, high lanes: 4..7
        _mm256_storeu_ps(T + k * ldt, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps(T + (k + 4) * ldt, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
}

static inline __attribute__((always_inline)) PAR_TARGET_AVX2 void
tile_f64(double *T, size_t ldt, const double *S, size_t lds)
{
    const __m256d r0 = _mm256_loadu_pd(S), r1 = _mm256_loadu_pd(S + lds);
    const __m256d r2 = _mm256_loadu_pd(S + 2 * lds), r3 = _mm256_loadu_pd(S + 3 * lds);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(T, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(T + ldt, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(T + 2 * ldt, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(T + 3 * ldt, _mm256_permute2f128_pd(t1, t3, 0x31));
}
TRANSPOSE(f32, float, avx2, 8, tile_f32, PAR_TARGET_AVX2)
TRANSPOSE(f64, double, avx2, 4, tile_f64, PAR_TARGET_AVX2)
#endif

// --- NEON variant (aarch64): its dense chains, ReLU, Adam and transposes -----
#ifdef PAR_HAVE_AARCH64
#include "dense_neon.inc"
#endif

// --- the 2 x 2 max-pool forward and input gradient: every variant's ---------
#include "pool2_impl.inc"

// --- the sets ----------------------------------------------------------------
// The dense chains of variant VAR, the elementwise helpers of EW, the
// batchnorm kernels of BN.
#define SET_DTYPE3(SFX, VAR, EW, BN)                                                            \
    {                                                                                           \
        .forward = CAT3(forward, _##SFX##_, VAR), .gemm_acc = CAT3(gemm_acc, _##SFX##_, VAR),    \
        .backward_data = CAT3(backward_data, _##SFX##_, VAR),                                  \
        .backward_weights = CAT3(backward_weights, _##SFX##_, VAR),                            \
        .conv_pack = CAT3(conv_pack, _##SFX##_, VAR),                                          \
        .conv_forward = CAT3(conv_forward, _##SFX##_, VAR),                                    \
        .conv_wgrad = CAT3(conv_wgrad, _##SFX##_, VAR),                                        \
        .conv_dpack = CAT3(conv_dpack, _##SFX##_, VAR),                                        \
        .conv_dgrad = CAT3(conv_dgrad, _##SFX##_, VAR),                                        \
        .relu_forward = relu_forward_##SFX##_##EW, .relu_backward = relu_backward_##SFX##_##EW,  \
        .pool2_forward = pool2_forward_##SFX##_##EW,                                            \
        .pool2_backward = pool2_backward_##SFX##_##EW,                                          \
        .adam_head = adam_##SFX##_##EW, .transpose = transpose_##SFX##_##EW,                    \
        .bn_sums = CAT3(bn_sums, _##SFX##_, BN),                                               \
        .bn_normalize = CAT3(bn_normalize, _##SFX##_, BN), .bn_dx = CAT3(bn_dx, _##SFX##_, BN), \
    }
#define SET_DTYPE(SFX, VAR) SET_DTYPE3(SFX, VAR, VAR, VAR)

static const par_kernel_set set_portable = {
    .name = "portable", .f32 = SET_DTYPE(f32, portable), .f64 = SET_DTYPE(f64, portable)};

#ifdef PAR_HAVE_AVX2_VARIANT
static const par_kernel_set set_avx2 = {
    .name = "avx2+fma", .f32 = SET_DTYPE(f32, avx2), .f64 = SET_DTYPE(f64, avx2)};

static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

#ifdef PAR_HAVE_AVX512VL_VARIANT
static const par_kernel_set set_avx512vl = {.name = "avx512vl",
                                            .f32 = SET_DTYPE3(f32, avx512vl, avx2, avx512vl),
                                            .f64 = SET_DTYPE3(f64, avx512vl, avx2, avx512vl)};

// libgcc's test also asks the OS (XGETBV) whether it saves the AVX-512 state.
static int cpu_has_avx512vl(void)
{
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl");
}
#endif

#ifdef PAR_HAVE_NEON_VARIANT
// Batchnorm: the portable loops (aarch64's fma is an instruction).
static const par_kernel_set set_neon = {.name = "neon",
                                        .f32 = SET_DTYPE3(f32, neon, neon, portable),
                                        .f64 = SET_DTYPE3(f64, neon, neon, portable)};

// Advanced SIMD is part of the base ARMv8-A ISA, and Linux always reports it;
// the check still keeps NEON code off a Linux system that does not.
static int cpu_has_neon(void)
{
#ifdef __linux__
    return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
    return 1;
#endif
}
#endif

// Every compiled set, best first, with the CPU test it needs (NULL: none).
// A new variant adds its table and one line here.
static const struct {
    const par_kernel_set *set;
    int (*runs)(void);
} candidates[] = {
#ifdef PAR_HAVE_AVX512VL_VARIANT
    {&set_avx512vl, cpu_has_avx512vl},
#endif
#ifdef PAR_HAVE_AVX2_VARIANT
    {&set_avx2, cpu_has_avx2},
#endif
#ifdef PAR_HAVE_NEON_VARIANT
    {&set_neon, cpu_has_neon},
#endif
    {&set_portable, NULL},
};

size_t par_kernels_available(const par_kernel_set **sets, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (candidates[i].runs && !candidates[i].runs()) continue;
        if (n < max) sets[n] = candidates[i].set;
        n++;
    }
    return n;
}

// The active set; NULL until the first call resolves it. Sets are constant
// tables, so a racing first use by two threads stores the same pointer.
static _Atomic(const par_kernel_set *) active_set;

static const par_kernel_set *best_set(void)
{
    const par_kernel_set *best = &set_portable;
    par_kernels_available(&best, 1);
    return best;
}

static const par_kernel_set *resolve(void)
{
    const par_kernel_set *want = best_set(), *expect = NULL;
    // Keep a set installed meanwhile by par_kernels_use.
    if (!atomic_compare_exchange_strong(&active_set, &expect, want)) return expect;
    return want;
}

static inline const par_kernel_set *kset(void)
{
    const par_kernel_set *k = atomic_load_explicit(&active_set, memory_order_acquire);
    return k ? k : resolve();
}

const par_kernel_set *par_kernels_active(void) { return kset(); }

void par_kernels_use(const par_kernel_set *k) { atomic_store(&active_set, k ? k : best_set()); }

const par_kernel_set *par_kernels_find(const char *name)
{
    const par_kernel_set *sets[sizeof candidates / sizeof candidates[0]];
    const size_t n = par_kernels_available(sets, sizeof sets / sizeof sets[0]);
    for (size_t i = 0; i < n && name; i++) {
        const char *plus = strchr(sets[i]->name, '+');
        const size_t stem = plus ? (size_t)(plus - sets[i]->name) : strlen(sets[i]->name);
        if (strcmp(name, sets[i]->name) == 0 ||
            (strlen(name) == stem && strncmp(name, sets[i]->name, stem) == 0))
            return sets[i];
    }
    return NULL;
}

const char *par_kernels_variant(void) { return kset()->name; }

#define DEFINE_DENSE(REAL, SFX)                                                                 \
    void par_dense_transpose_##SFX(REAL *restrict WT, const REAL *restrict W, size_t n_in,     \
                                   size_t n_out, size_t o0, size_t o1)                          \
    {                                                                                           \
        kset()->SFX.transpose(WT, par_dense_ldwt(n_out), W, n_in, o0, o1, 0, n_in);             \
    }                                                                                           \
    void par_dense_forward_##SFX(REAL *restrict y, const REAL *restrict x,                     \
                                 const REAL *restrict WT, const REAL *restrict b, size_t s0,    \
                                 size_t s1, size_t o0, size_t o1, size_t n_in, size_t n_out)    \
    {                                                                                           \
        kset()->SFX.forward(y, x, WT, b, s0, s1, o0, o1, n_in, n_out);                          \
    }                                                                                           \
    void par_gemm_acc_##SFX(REAL *restrict C, size_t ldc, const REAL *restrict A, size_t lda,  \
                            const REAL *restrict B, size_t ldb, size_t s0, size_t s1, size_t N, \
                            size_t K)                                                           \
    {                                                                                           \
        kset()->SFX.gemm_acc(C, ldc, A, lda, B, ldb, s0, s1, N, K);                             \
    }                                                                                           \
    void par_dense_backward_data_##SFX(REAL *restrict dx, const REAL *restrict dz,             \
                                       const REAL *restrict W, size_t s0, size_t s1,            \
                                       size_t n_in, size_t n_out)                               \
    {                                                                                           \
        kset()->SFX.backward_data(dx, dz, W, s0, s1, n_in, n_out);                              \
    }                                                                                           \
    void par_dense_backward_weights_##SFX(REAL *restrict dW, REAL *restrict db,                \
                                          const REAL *restrict dz, const REAL *restrict x,      \
                                          size_t B, size_t C, size_t c0, size_t c1, size_t o0,  \
                                          size_t o1, size_t n_in, size_t n_out, int cont)       \
    {                                                                                           \
        kset()->SFX.backward_weights(dW, db, dz, x, B, C, c0, c1, o0, o1, n_in, n_out, cont);   \
    }                                                                                           \
    void par_conv_wgrad_##SFX(REAL *restrict g, REAL *restrict gb, const REAL *restrict xp,    \
                              const REAL *restrict dzT, size_t ld, const par_layer *ly,        \
                              size_t no, size_t ns, int first, REAL *restrict fold)            \
    {                                                                                           \
        kset()->SFX.conv_wgrad(g, gb, xp, dzT, ld, ly, no, ns, first, fold);                    \
    }

DEFINE_DENSE(float, f32)
DEFINE_DENSE(double, f64)

#define REAL float
#define SFX f32
#define EXP par_exp_f32
#define LOG par_log_f32
#define TANH par_tanh_f32
#define SIGMOID par_sigmoid_f32
#define SQRT sqrtf
#include "elementwise_impl.inc"
#undef REAL
#undef SFX
#undef EXP
#undef LOG
#undef TANH
#undef SIGMOID
#undef SQRT

#define REAL double
#define SFX f64
#define EXP par_exp_f64
#define LOG par_log_f64
#define TANH par_tanh_f64
#define SIGMOID par_sigmoid_f64
#define SQRT sqrt
#include "elementwise_impl.inc"
