// The bodies of the project's own exp, log, tanh and sigmoid (par_math.h): one
// source for the host (par_math.c wraps them as par_exp_f32 ...) and the
// device (src/cuda includes this header under nvcc, where PAR_HD makes every
// function __host__ __device__ and the 2^(j/32) table has a __constant__ copy
// built from the same initialiser). Plain IEEE double arithmetic, no libm, no
// FMA: nvcc must compile it with -fmad=false. Tests: tests/unit/test_math.c
// (MPFR), tests/unit/test_cuda_bodies.c (host), tests/gpu/test_cuda.c (device).
#ifndef PAR_MATH_BODY_H
#define PAR_MATH_BODY_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PAR_HD __host__ __device__
#else
#define PAR_HD
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "par_math_body.h needs plain binary64 evaluation (FLT_EVAL_METHOD == 0)"
#endif
#endif

// ---- bits and double-double helpers ------------------------------------

PAR_HD static inline double par_math_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

PAR_HD static inline uint64_t par_math_to_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

// 2^m for -1022 <= m <= 1023.
PAR_HD static inline double par_math_pow2i(int m)
{
    return par_math_from_bits((uint64_t)(m + 1023) << 52);
}

// s + e == a + b exactly (Knuth).
PAR_HD static inline void par_math_two_sum(double a, double b, double *s, double *e)
{
    double t = a + b;
    double bb = t - a;
    *e = (a - (t - bb)) + (b - bb);
    *s = t;
}

// s + e == a + b exactly, given |a| >= |b| or a == 0 (Dekker).
PAR_HD static inline void par_math_fast_two_sum(double a, double b, double *s, double *e)
{
    double t = a + b;
    *e = b - (t - a);
    *s = t;
}

// p + e == a * b exactly (Dekker with Veltkamp splitting); |a|, |b| < 2^995.
PAR_HD static inline void par_math_two_prod(double a, double b, double *p, double *e)
{
    const double split = 134217729.0;    // 2^27 + 1
    double ca = split * a, cb = split * b;
    double a_hi = ca - (ca - a), a_lo = a - a_hi;
    double b_hi = cb - (cb - b), b_lo = b - b_hi;
    double t = a * b;
    *e = ((a_hi * b_hi - t) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
    *p = t;
}

// (a_hi + a_lo) / (b_hi + b_lo) rounded once, error ~0.5 ulp + 2^-100 relative.
PAR_HD static inline double par_math_dd_div(double a_hi, double a_lo, double b_hi, double b_lo)
{
    double q = a_hi / b_hi;
    double p, pe;
    par_math_two_prod(q, b_hi, &p, &pe);
    double r = (((a_hi - p) - pe) + a_lo) - q * b_lo;
    return q + r / b_hi;
}

// ---- exp core ----------------------------------------------------------

// 2^(j/32) = hi + lo, j = 0..31 (hi = RN(2^(j/32)), lo = RN(rest); from MPFR).
#define PAR_MATH_EXP_TAB \
    { \
    {0x1p+0, 0x0p+0}, \
    {0x1.059b0d3158574p+0, 0x1.d73e2a475b465p-55}, \
    {0x1.0b5586cf9890fp+0, 0x1.8a62e4adc610bp-54}, \
    {0x1.11301d0125b51p+0, -0x1.6c51039449b3ap-54}, \
    {0x1.172b83c7d517bp+0, -0x1.19041b9d78a76p-55}, \
    {0x1.1d4873168b9aap+0, 0x1.e016e00a2643cp-54}, \
    {0x1.2387a6e756238p+0, 0x1.9b07eb6c70573p-54}, \
    {0x1.29e9df51fdee1p+0, 0x1.612e8afad1255p-55}, \
    {0x1.306fe0a31b715p+0, 0x1.6f46ad23182e4p-55}, \
    {0x1.371a7373aa9cbp+0, -0x1.63aeabf42eae2p-54}, \
    {0x1.3dea64c123422p+0, 0x1.ada0911f09ebcp-55}, \
    {0x1.44e086061892dp+0, 0x1.89b7a04ef80dp-59}, \
    {0x1.4bfdad5362a27p+0, 0x1.d4397afec42e2p-56}, \
    {0x1.5342b569d4f82p+0, -0x1.07abe1db13cadp-55}, \
    {0x1.5ab07dd485429p+0, 0x1.6324c054647adp-54}, \
    {0x1.6247eb03a5585p+0, -0x1.383c17e40b497p-54}, \
    {0x1.6a09e667f3bcdp+0, -0x1.bdd3413b26456p-54}, \
    {0x1.71f75e8ec5f74p+0, -0x1.16e4786887a99p-55}, \
    {0x1.7a11473eb0187p+0, -0x1.41577ee04992fp-55}, \
    {0x1.82589994cce13p+0, -0x1.d4c1dd41532d8p-54}, \
    {0x1.8ace5422aa0dbp+0, 0x1.6e9f156864b27p-54}, \
    {0x1.93737b0cdc5e5p+0, -0x1.75fc781b57ebcp-57}, \
    {0x1.9c49182a3f09p+0, 0x1.c7c46b071f2bep-56}, \
    {0x1.a5503b23e255dp+0, -0x1.d2f6edb8d41e1p-54}, \
    {0x1.ae89f995ad3adp+0, 0x1.7a1cd345dcc81p-54}, \
    {0x1.b7f76f2fb5e47p+0, -0x1.5584f7e54ac3bp-56}, \
    {0x1.c199bdd85529cp+0, 0x1.11065895048ddp-55}, \
    {0x1.cb720dcef9069p+0, 0x1.503cbd1e949dbp-56}, \
    {0x1.d5818dcfba487p+0, 0x1.2ed02d75b3707p-55}, \
    {0x1.dfc97337b9b5fp+0, -0x1.1a5cd4f184b5cp-54}, \
    {0x1.ea4afa2a490dap+0, -0x1.e9c23179c2893p-54}, \
    {0x1.f50765b6e454p+0, 0x1.9d3e12dd8a18bp-54}, \
    }
#ifdef __CUDACC__
static __constant__ double par_math_exp_tab_dev[32][2] = PAR_MATH_EXP_TAB;
#endif
static const double par_math_exp_tab[32][2] = PAR_MATH_EXP_TAB;

// Entry [j][k] of the table: the device's copy in device code, else the host's.
PAR_HD static inline double par_math_tab(int j, int k)
{
#ifdef __CUDA_ARCH__
    return par_math_exp_tab_dev[j][k];
#else
    return par_math_exp_tab[j][k];
#endif
}

// ln2 = PM_LN2_HI + PM_LN2_LO to 2^-86; PM_LN2_HI has 32 significant bits, so k * PM_LN2_HI
// and k * PM_LN2_HI / 32 are exact for |k| < 2^21.
static const double PM_LN2_HI = 0x1.62e42feep-1;
static const double PM_LN2_LO = 0x1.a39ef35793c76p-33;
static const double PM_INV_L = 0x1.71547652b82fep+5;    // 32 / ln2
static const double PM_L_HI = 0x1.62e42feep-6;          // PM_LN2_HI / 32
static const double PM_L_LO = 0x1.a39ef35793c76p-38;    // PM_LN2_LO / 32
static const double PM_SHIFT = 0x1.8p52;                // (y + SHIFT) - SHIFT: y rounded

// x = k ln2/32 + r with k = 32 m + j, 0 <= j < 32, |r| <= ln2/64 (+tiny),
// r = r_hi + r_lo to ~2^-75 absolute (Cody-Waite). Needs |x| < 1000.
typedef struct par_math_exp_red {
    int m, j;
    double r_hi, r_lo;
} par_math_exp_red;

PAR_HD static inline par_math_exp_red par_math_exp_reduce(double x)
{
    double kd = (x * PM_INV_L + PM_SHIFT) - PM_SHIFT;
    int k = (int)kd;
    // exact: kd * PM_L_HI has <= 48 bits and lies within ln2/64 of x
    double t = x - kd * PM_L_HI;
    par_math_exp_red red;
    par_math_two_sum(t, -(kd * PM_L_LO), &red.r_hi, &red.r_lo);
    red.j = (k + 65536) % 32;
    red.m = (k + 65536) / 32 - 2048;
    return red;
}

// e^r - 1 = p_hi + p_lo for the reduced r: Taylor to degree 7 (truncation
// < 2^-67), rounding errors ~2^-53 r^2, so relative to e^r - 1 below 2^-59.
PAR_HD static inline void par_math_expm1_reduced(const par_math_exp_red *red, double *p_hi,
                                                  double *p_lo)
{
    double r = red->r_hi;
    double q = 1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120
               + r * (1.0 / 720 + r * (1.0 / 5040)))));
    double tail = red->r_lo + (r * red->r_lo + (r * r) * q);
    par_math_fast_two_sum(r, tail, p_hi, p_lo);
}

// e^x = hi + lo for -100 <= x <= 0 (results stay normal), relative error < 2^-64;
// absolute error in e^x - 1 below 2^-59 |e^x - 1|, so 1 - e^x keeps its accuracy.
PAR_HD static inline double par_math_exp_dd(double x, double *lo)
{
    par_math_exp_red red = par_math_exp_reduce(x);
    double p_hi, p_lo;
    par_math_expm1_reduced(&red, &p_hi, &p_lo);
    double t_hi = par_math_tab(red.j, 0), t_lo = par_math_tab(red.j, 1);
    // T (1 + p) = t_hi + t_hi p_hi + (t_lo + t_hi p_lo + t_lo p_hi)
    double ph, pl, s, e, hi;
    par_math_two_prod(t_hi, p_hi, &ph, &pl);
    par_math_fast_two_sum(t_hi, ph, &s, &e);
    e = e + (pl + (t_lo + (t_hi * p_lo + t_lo * p_hi)));
    par_math_fast_two_sum(s, e, &hi, lo);
    double scale = par_math_pow2i(red.m);
    *lo *= scale;
    return hi * scale;
}

// For f32 results, in plain double: returns p with e^x = 2^m 2^(j/32) (1 + p),
// |p| < 0.011, relative error of p < 2^-51. Needs |x| < 150.
PAR_HD static inline double par_math_expm1_lite(double x, int *m, int *j)
{
    double kd = (x * PM_INV_L + PM_SHIFT) - PM_SHIFT;
    int k = (int)kd;
    double r = (x - kd * PM_L_HI) - kd * PM_L_LO;
    *j = (k + 65536) % 32;
    *m = (k + 65536) / 32 - 2048;
    return r + (r * r) * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120
                         + r * (1.0 / 720)))));
}

// e^x for |x| < 150, relative error < 2^-51.
PAR_HD static inline double par_math_exp_d(double x)
{
    int m, j;
    double p = par_math_expm1_lite(x, &m, &j);
    return par_math_tab(j, 0) * (1.0 + p) * par_math_pow2i(m);
}

// ---- exp ---------------------------------------------------------------

PAR_HD static inline double par_math_exp_f64(double x)
{
    if (x != x) return x + x;
    if (x > 709.8) return (double)INFINITY;    // ln(DBL_MAX) = 709.78271289338397
    if (x < -746.0) return 0.0;                // below ln(2^-1075) = -745.13321910194122
    par_math_exp_red red = par_math_exp_reduce(x);
    double p_hi, p_lo;
    par_math_expm1_reduced(&red, &p_hi, &p_lo);
    double t_hi = par_math_tab(red.j, 0), t_lo = par_math_tab(red.j, 1);
    // e^x = 2^m (t_hi + tail); |tail| < 0.012 t_hi, its rounding error < 2^-59 t_hi
    double tail = t_hi * p_hi + (t_lo + (t_hi * p_lo + t_lo * p_hi));
    if (red.m > 1023) return (t_hi + tail) * 2.0 * 0x1p1023;
    if (red.m > -1022) return (t_hi + tail) * par_math_pow2i(red.m);
    // Result near or below 2^-1022: w = e^x / 2^-1022 = w_hi + w_lo (exact
    // scalings). Round w once to a multiple of 2^-52, the subnormal spacing.
    double w_hi = t_hi * par_math_pow2i(red.m + 1022), w_lo = tail * par_math_pow2i(red.m + 1022);
    double w = w_hi + w_lo;
    if (w >= 1.0) return w * 0x1p-1022;
    double z = 1.0 + w_hi;
    double e = (1.0 - z) + w_hi;
    z = z + (e + w_lo);
    return (z - 1.0) * 0x1p-1022;
}

PAR_HD static inline float par_math_exp_f32(float x)
{
    if (x != x) return x + x;
    if (x > 89.0f) return INFINITY;    // ln(FLT_MAX) = 88.72
    if (x < -104.0f) return 0.0f;      // ln(2^-150) = -103.97
    return (float)par_math_exp_d((double)x);
}

// ---- log ---------------------------------------------------------------

// fdlibm's minimax coefficients: log(1+f) = 2s + s R(s^2) with s = f/(2+f),
// |R - sum LG[i] z^(i+1)| <= 2^-58.45 for |s| <= 0.1716.
static const double PM_LG1 = 6.666666666666735130e-01;
static const double PM_LG2 = 3.999999999940941908e-01;
static const double PM_LG3 = 2.857142874366239149e-01;
static const double PM_LG4 = 2.222219843214978396e-01;
static const double PM_LG5 = 1.818357216161805012e-01;
static const double PM_LG6 = 1.531383769920937332e-01;
static const double PM_LG7 = 1.479819860511658591e-01;
static const double PM_SQRT2 = 0x1.6a09e667f3bcdp+0;

PAR_HD static inline double par_math_log_r(double z)
{
    return z * (PM_LG1 + z * (PM_LG2 + z * (PM_LG3 + z * (PM_LG4 + z * (PM_LG5
                + z * (PM_LG6 + z * PM_LG7))))));
}

// x = 2^k m with sqrt(2)/2 < m <= sqrt(2); x must be positive and normal.
PAR_HD static inline double par_math_log_split(double x, int *k)
{
    uint64_t b = par_math_to_bits(x);
    *k = (int)(b >> 52) - 1023;
    double m = par_math_from_bits((b & 0x000fffffffffffffu) | 0x3ff0000000000000u);
    if (m > PM_SQRT2) {
        m *= 0.5;
        *k += 1;
    }
    return m;
}

PAR_HD static inline double par_math_log_f64(double x)
{
    if (x != x) return x + x;
    if (x == 0) return -(double)INFINITY;
    if (x < 0) return (double)NAN;
    if (x == (double)INFINITY) return x;
    int k, k_sub = 0;
    if (x < DBL_MIN) {
        x *= 0x1p54;
        k_sub = -54;
    }
    double f = par_math_log_split(x, &k) - 1.0;    // exact (Sterbenz)
    k += k_sub;
    // s = f / (2 + f) = s_hi + s_lo to ~2^-100 relative
    double d_hi = 2.0 + f;
    double d_lo = f - (d_hi - 2.0);
    double s_hi = f / d_hi;
    double p, pe;
    par_math_two_prod(s_hi, d_hi, &p, &pe);
    double s_lo = (((f - p) - pe) - s_hi * d_lo) / d_hi;
    // log x = k ln2 + 2 s + s R(s^2); the first two summed exactly
    double dk = k;
    double a_hi, a_lo;
    par_math_two_sum(dk * PM_LN2_HI, 2.0 * s_hi, &a_hi, &a_lo);
    return a_hi + (a_lo + (2.0 * s_lo + (s_hi * par_math_log_r(s_hi * s_hi) + dk * PM_LN2_LO)));
}

PAR_HD static inline float par_math_log_f32(float x)
{
    if (x != x) return x + x;
    if (x == 0) return -INFINITY;
    if (x < 0) return NAN;
    if (x == INFINITY) return x;
    int k;
    double f = par_math_log_split((double)x, &k) - 1.0;    // every float is a normal double
    double s = f / (2.0 + f);
    double ln2 = PM_LN2_HI + PM_LN2_LO;
    return (float)(k * ln2 + (2.0 * s + s * par_math_log_r(s * s)));
}

// ---- tanh --------------------------------------------------------------

// tanh a = (1 - e) / (1 + e) with e = e^{-2a}; 1 - e from the double-double
// exp stays accurate down to tiny a (no 1 - 2/(e^{2a}+1) cancellation).
PAR_HD static inline double par_math_tanh_f64(double x)
{
    if (x != x) return x + x;
    double a = x < 0 ? -x : x;
    if (a > 22.0) return x < 0 ? -1.0 : 1.0;    // 1 - tanh 22 < 2^-62
    if (a < 0x1p-27) return x;                  // tanh x = x (1 - x^2/3 + ...), keeps -0
    double e_lo, e_hi = par_math_exp_dd(-2.0 * a, &e_lo);
    double u_hi, u_lo, d_hi, d_lo, t;
    par_math_two_sum(1.0, -e_hi, &u_hi, &t);
    par_math_fast_two_sum(u_hi, t - e_lo, &u_hi, &u_lo);
    par_math_two_sum(1.0, e_hi, &d_hi, &t);
    d_lo = t + e_lo;
    double q = par_math_dd_div(u_hi, u_lo, d_hi, d_lo);
    return x < 0 ? -q : q;
}

PAR_HD static inline float par_math_tanh_f32(float x)
{
    if (x != x) return x + x;
    if (x == 0) return x;
    double a = x < 0 ? -(double)x : (double)x;
    if (a > 10.0) return x < 0 ? -1.0f : 1.0f;    // 1 - tanh 10 < 2^-27
    // u = -expm1(-2a) = 1 - e^{-2a}; straight from p when the reduction is trivial
    int m, j;
    double p = par_math_expm1_lite(-2.0 * a, &m, &j);
    double u = (m == 0 && j == 0) ? -p : 1.0 - par_math_tab(j, 0) * (1.0 + p) * par_math_pow2i(m);
    double q = u / (2.0 - u);
    return (float)(x < 0 ? -q : q);
}

// ---- sigmoid -----------------------------------------------------------

// x >= 0: 1 / (1 + e^{-x});  x < 0: e^x / (1 + e^x), never overflows.
PAR_HD static inline double par_math_sigmoid_f64(double x)
{
    if (x != x) return x + x;
    if (x > 40.0) return 1.0;                 // e^-40 < 2^-57
    if (x < -45.0) return par_math_exp_f64(x);     // e^x (1 - e^x + ...), e^x < 2^-64
    double e_lo, e_hi = par_math_exp_dd(x < 0 ? x : -x, &e_lo);
    double d_hi, t;
    par_math_two_sum(1.0, e_hi, &d_hi, &t);
    double d_lo = t + e_lo;
    if (x < 0) return par_math_dd_div(e_hi, e_lo, d_hi, d_lo);
    return par_math_dd_div(1.0, 0.0, d_hi, d_lo);
}

PAR_HD static inline float par_math_sigmoid_f32(float x)
{
    if (x != x) return x + x;
    if (x > 20.0f) return 1.0f;     // e^-20 < 2^-28
    if (x < -110.0f) return 0.0f;   // below 2^-150
    double e = par_math_exp_d(x < 0 ? (double)x : -(double)x);
    return (float)(x < 0 ? e / (1.0 + e) : 1.0 / (1.0 + e));
}

#endif
