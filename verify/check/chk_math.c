// `parity check --math`: the project's own exp, log, tanh and sigmoid (f32 and
// f64) against MPFR at 128 bits, as max error in ulps. The sampling follows
// tests/unit/test_math.c (dense log-spaced and uniform sweeps, values around every
// threshold) plus, for f64, known hard-to-round arguments. Not exhaustive.
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "chk_check.h"
#include "par_math.h"

const char *chk_fn_name(int fn)
{
    static const char *const names[] = {"exp", "log", "tanh", "sigmoid"};
    return fn >= 0 && fn < CHK_N_FN ? names[fn] : "?";
}

// Hard-to-round binary64 arguments (the exact value lies within 2^-100 or so
// of a rounding boundary), from V. Lefevre's tables as listed in the
// CORE-MATH project's worst-case files (src/binary64/{exp,log,tanh}/*.wc).
static const double HARD_EXP[] = {
    0x1.0122ef37212ebp-1,  0x1.00d48a707b93ep-1,  0x1.012c061237773p-1,   0x1.0ee29b11cda85p-1,
    0x1.62e062da73194p-1,  0x1.fedc746ddf8fap-1,  0x1.008eb56314daap+0,   0x1.62cabe3b007f3p+0,
    -0x1.120a1a8a545fbp+8, -0x1.12386fb4bfd61p+9, -0x1.1243385cabc99p+3,  -0x1.12468725dc05cp+1,
    -0x1.124daa5673834p+7, -0x1.12511420cababp+5, -0x1.1256706528f9cp-20, -0x1.132ea0f79cac3p+4,
    -0x1.18f447433b89fp+9, -0x1.1976d7126e271p+9, -0x1.27370b200f77p+9,   -0x1.286e4594a59f2p+9,
    -0x1.62c9fc0dcbdb5p+9, -0x1.671e26a8abff2p+9, -0x1.1300000000025p-46, -0x1.80000018p-26,
    -0x1.1530b5b401476p-1, -0x1.9429812eb696bp+8, -0x1.b593d166bde4ep+8,  -0x1.a54105bf235dap+8,
};
static const double HARD_LOG[] = {
    0x1.a6ae5142326b5p+0,  0x1.a6ba95b1520f9p+0,  0x1.a702b2ce91b3p+0,   0x1.b072ab04ee9bfp+0,
    0x1.c877cba59d0acp+0,  0x1.1e852e6951306p+1,  0x1.dafdb40362537p+0,  0x1.ffcd1f1e0c16fp+1,
    0x1.2d26e1ebebee6p+2,  0x1.0af4fba7063b8p+4,  0x1.49d218d102f06p+5,  0x1.15956b273c365p+8,
    0x1.38a3dbb5a6a4fp+10, 0x1.a455a70c31d8p+13,  0x1.561031d4db97cp+16, 0x1.7d822b508bb3bp+20,
    0x1.70945ecdc0194p+28, 0x1.8e27f4f0e6c74p+34, 0x1.a6004162f2b8cp+45, 0x1.f9bd207cafe2fp+38,
};
static const double HARD_TANH[] = {
    0x1.000b47bdb383fp-9, 0x1.004524207fad9p-3,  0x1.00a0f3cf999acp+2, 0x1.015bdb2761717p+4,
    0x1.015cee8026857p+1, 0x1.01885ae3c818ap+0,  0x1.028bf1d22b07dp-2, 0x1.02a3ad2ef6f49p-24,
    0x1.0481dc5df327dp-1, 0x1.0a402fcc79292p-25, 0x1.30fc1931f09c8p+4, 0x1.093bb419995c8p+0,
    0x1.097519f44243fp+3, 0x1.0cb8a1d5d7dfbp+0,  0x1.2f6e41a10545ep+0, 0x1.568f550ed9598p-1,
};

// ---- samples (as tests/unit/test_math.c) ---------------------------------------------

typedef struct sample {
    double *x;
    size_t n, cap;
    int f32;
    int oom;
} sample;

static void push(sample *s, double x)
{
    if (s->oom) return;
    if (s->n == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 4096;
        double *p = realloc(s->x, cap * sizeof *p);
        if (!p) {
            s->oom = 1;
            return;
        }
        s->x = p;
        s->cap = cap;
    }
    s->x[s->n++] = s->f32 ? (double)(float)x : x;
}

// Monotone integer image of a float/double: consecutive values, consecutive integers.
static int64_t ord_of(const sample *s, double x)
{
    if (s->f32) {
        const float f = (float)x;
        int32_t b;
        memcpy(&b, &f, sizeof b);
        return b < 0 ? -(int64_t)(b & INT32_MAX) : b;
    }
    int64_t b;
    memcpy(&b, &x, sizeof b);
    return b < 0 ? -(b & INT64_MAX) : b;
}

static double unord_of(const sample *s, int64_t o)
{
    if (s->f32) {
        const uint32_t b = o < 0 ? (uint32_t)(-o) | 0x80000000u : (uint32_t)o;
        float f;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    const int64_t b = o < 0 ? (-o) | INT64_MIN : o;
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

// n values spread evenly over the bit patterns of [a, b], low bits jittered.
static void add_logspaced(sample *s, double a, double b, size_t n)
{
    if (a < 0 && b > 0) {
        add_logspaced(s, a, -0.0, n / 2);
        add_logspaced(s, 0.0, b, n / 2);
        return;
    }
    const int64_t oa = ord_of(s, a), ob = ord_of(s, b);
    int64_t step = (ob - oa) / (int64_t)(n ? n : 1);
    if (step < 1) step = 1;
    const int64_t count = (ob - oa) / step; // oa + i * step <= ob: no overflow
    for (int64_t i = 0; i <= count; i++) {
        const int64_t jit = (int64_t)(((uint64_t)i * 2654435761u) % (uint64_t)step);
        const int64_t base = oa + i * step;
        push(s, unord_of(s, jit <= ob - base ? base + jit : ob));
    }
    push(s, b);
}

static void add_uniform(sample *s, double a, double b, size_t n)
{
    for (size_t i = 0; i <= n; i++)
        push(s, a + (b - a) * ((double)i / (double)(n ? n : 1)));
}

static void add_around(sample *s, double c, int w)
{
    const int64_t o = ord_of(s, c);
    for (int64_t i = -w; i <= w; i++)
        push(s, unord_of(s, o + i));
}

static void add_list(sample *s, const double *v, size_t n, int both_signs, double scale)
{
    for (size_t i = 0; i < n; i++) {
        push(s, v[i] * scale);
        if (both_signs) push(s, -v[i] * scale);
    }
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static sample make_sample(int fn, int f32, size_t n)
{
    sample s = {NULL, 0, 0, f32, 0};
    const double tiny = f32 ? 0x1p-149 : 0x1p-1074, big = f32 ? FLT_MAX : DBL_MAX;
    switch (fn) {
    case CHK_EXP:
        add_logspaced(&s, f32 ? -104.5 : -746.0, f32 ? 89.5 : 710.0, n);
        add_uniform(&s, f32 ? -104.5 : -746.0, f32 ? 89.5 : 710.0, n / 2);
        add_uniform(&s, -1.0, 1.0, n / 2);
        add_around(&s, 0.0, 2000);
        add_around(&s, f32 ? 88.72283905206835 : 709.782712893384, 2000);     // overflow
        add_around(&s, f32 ? -87.33654475055310 : -708.3964185322641, 2000);  // subnormal
        add_around(&s, f32 ? -103.97207708399179 : -745.1332191019412, 2000); // underflow
        if (!f32) add_list(&s, HARD_EXP, N_OF(HARD_EXP), 0, 1.0);
        break;
    case CHK_LOG:
        add_logspaced(&s, tiny, big, n);
        add_uniform(&s, 0.0, 4.0, n / 2);
        add_uniform(&s, 1.0 - 0x1p-8, 1.0 + 0x1p-8, n / 2);
        add_around(&s, 1.0, 5000);
        add_around(&s, 0x1.6a09e667f3bcdp+0, 2000); // reduction boundary sqrt 2
        add_around(&s, 0x1.6a09e667f3bcdp-1, 2000);
        add_around(&s, f32 ? FLT_MIN : DBL_MIN, 2000);
        add_around(&s, big, 1);
        if (!f32) add_list(&s, HARD_LOG, N_OF(HARD_LOG), 0, 1.0);
        break;
    case CHK_TANH:
        add_logspaced(&s, f32 ? -11.0 : -23.0, f32 ? 11.0 : 23.0, n);
        add_uniform(&s, f32 ? -11.0 : -23.0, f32 ? 11.0 : 23.0, n / 2);
        add_uniform(&s, -1.2, 1.2, n / 2);
        add_around(&s, 0.0, 2000);
        add_around(&s, 0x1p-27, 2000);
        add_around(&s, 0x1.62e42fefa39efp-7, 2000); // 2|x| = ln2/64
        add_around(&s, 0.5493061443340549, 2000);   // tanh = 0.5
        add_around(&s, f32 ? 10.0 : 22.0, 2000);
        add_around(&s, f32 ? 9.010913 : 19.06154746539849, 2000);
        if (!f32) add_list(&s, HARD_TANH, N_OF(HARD_TANH), 1, 1.0);
        break;
    default:
        add_logspaced(&s, f32 ? -111.0 : -750.0, f32 ? 21.0 : 41.0, n);
        add_uniform(&s, f32 ? -111.0 : -750.0, f32 ? 21.0 : 41.0, n / 2);
        add_uniform(&s, -8.0, 8.0, n / 2);
        add_around(&s, 0.0, 2000);
        add_around(&s, f32 ? 20.0 : 40.0, 2000);
        add_around(&s, f32 ? -110.0 : -45.0, 2000);
        add_around(&s, f32 ? -87.33654475055310 : -708.3964185322641, 2000);
        add_around(&s, f32 ? -103.97207708399179 : -745.1332191019412, 2000);
        if (!f32) { // sigmoid goes through e^-|x| and tanh-like ratios
            add_list(&s, HARD_EXP, N_OF(HARD_EXP), 1, 1.0);
            add_list(&s, HARD_TANH, N_OF(HARD_TANH), 1, 2.0);
        }
        break;
    }
    return s;
}

// ---- evaluation ---------------------------------------------------------------------

static double eval(int fn, int f32, double x)
{
    if (f32) {
        const float xf = (float)x;
        switch (fn) {
        case CHK_EXP:
            return par_exp_f32(xf);
        case CHK_LOG:
            return par_log_f32(xf);
        case CHK_TANH:
            return par_tanh_f32(xf);
        default:
            return par_sigmoid_f32(xf);
        }
    }
    switch (fn) {
    case CHK_EXP:
        return par_exp_f64(x);
    case CHK_LOG:
        return par_log_f64(x);
    case CHK_TANH:
        return par_tanh_f64(x);
    default:
        return par_sigmoid_f64(x);
    }
}

static void exact(mpfr_t y, int fn, double x)
{
    mpfr_set_d(y, x, MPFR_RNDN);
    switch (fn) {
    case CHK_EXP:
        mpfr_exp(y, y, MPFR_RNDN);
        break;
    case CHK_LOG:
        mpfr_log(y, y, MPFR_RNDN);
        break;
    case CHK_TANH:
        mpfr_tanh(y, y, MPFR_RNDN);
        break;
    default:
        mpfr_neg(y, y, MPFR_RNDN);
        mpfr_exp(y, y, MPFR_RNDN);
        mpfr_add_ui(y, y, 1, MPFR_RNDN);
        mpfr_ui_div(y, 1, y, MPFR_RNDN);
        break;
    }
}

// |got - exact| / ulp(exact) in the target format (subnormal spacing below
// the normal range; an infinite result beyond the largest finite counts as
// exact, otherwise as 2^emax). NaN when exact is NaN and got is not.
static double ulp_error(double got, mpfr_t ex, mpfr_t t, int f32)
{
    const int p = f32 ? 24 : 53, emin = f32 ? -126 : -1022, emax = f32 ? 128 : 1024;
    if (mpfr_nan_p(ex)) return got != got ? 0.0 : NAN;
    if (got != got) return NAN;
    if (mpfr_inf_p(ex)) return got == mpfr_get_d(ex, MPFR_RNDN) ? 0.0 : INFINITY;
    mpfr_abs(t, ex, MPFR_RNDN);
    if (isinf(got) && mpfr_cmp_d(t, f32 ? FLT_MAX : DBL_MAX) > 0 && (got > 0) == (mpfr_sgn(ex) > 0))
        return 0.0;
    if (isinf(got))
        mpfr_set_si_2exp(t, got > 0 ? 1 : -1, emax, MPFR_RNDN);
    else
        mpfr_set_d(t, got, MPFR_RNDN);
    mpfr_sub(t, t, ex, MPFR_RNDN);
    mpfr_abs(t, t, MPFR_RNDN);
    long e = mpfr_zero_p(ex) ? emin : (long)mpfr_get_exp(ex) - 1;
    if (e < emin) e = emin;
    mpfr_mul_2si(t, t, -(e - p + 1), MPFR_RNDN);
    return mpfr_get_d(t, MPFR_RNDU);
}

par_status chk_math_check(chk_math_report *r, size_t points_f32, size_t points_f64, int threads)
{
    memset(r, 0, sizeof *r);
    const int T = threads > 0 ? threads : omp_get_max_threads();
    r->threads = T;
    const double t_all = omp_get_wtime();
    for (int f32 = 1; f32 >= 0; f32--) {
        for (int fn = 0; fn < CHK_N_FN; fn++) {
            const double t0 = omp_get_wtime();
            sample s = make_sample(fn, f32, f32 ? points_f32 : points_f64);
            if (s.oom) {
                free(s.x);
                PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory for the %s samples", chk_fn_name(fn));
            }
            double worst = 0, worst_x = 0;
#pragma omp parallel num_threads(T)
            {
                mpfr_t y, t;
                mpfr_inits2(128, y, t, (mpfr_ptr)0);
                double my = 0, my_x = 0;
#pragma omp for schedule(dynamic, 4096)
                for (size_t i = 0; i < s.n; i++) {
                    const double x = s.x[i];
                    exact(y, fn, x);
                    double err = ulp_error(eval(fn, f32, x), y, t, f32);
                    if (err != err) err = INFINITY; // NaN where a number is due: worst
                    if (err > my || (err == my && err > 0 && x < my_x)) {
                        my = err;
                        my_x = x;
                    }
                }
#pragma omp critical(chk_math)
                {
                    if (my > worst || (my == worst && my > 0 && my_x < worst_x)) {
                        worst = my;
                        worst_x = my_x;
                    }
                }
                mpfr_clears(y, t, (mpfr_ptr)0);
                mpfr_free_cache();
            }
            chk_math_row *row = &r->rows[r->n_rows++];
            row->fn = fn;
            row->dt = f32 ? PAR_F32 : PAR_F64;
            row->points = s.n;
            row->max_ulp = worst;
            row->worst_x = worst_x;
            row->seconds = omp_get_wtime() - t0;
            free(s.x);
        }
    }
    r->seconds = omp_get_wtime() - t_all;
    return PAR_OK;
}
