// The MPFR building blocks of the step check (chk_step.c, chk_bn.c,
// chk_update.c): per-thread workspaces, exact dot products with their
// reduction bound, the activations in MPFR, recording an element against its
// bound, and merging per-thread rows. The error model they serve is written
// at the top of chk_step.c. Tests: tests/verify/test_check*.c.
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

#include "chk_mpfr.h"

fmt chk_fmt_of(par_dtype dt)
{
    if (dt == PAR_F32) return (fmt){0x1p-24, 0x1p-149, 24, -126};
    return (fmt){0x1p-53, 0x1p-1074, 53, -1022};
}



void chk_ws_terms(ws *w, int prec, size_t T, int e2e)
{
    w->T = T;
    w->ia = malloc(2 * T * sizeof *w->ia);
    w->va = malloc(2 * T * sizeof(double));
    w->ma = e2e ? malloc(2 * T * sizeof(mpfr_t)) : NULL;
    if (!w->ia || !w->va || (e2e && !w->ma)) abort(); // like MPFR's own allocations
    w->ib = w->ia + T;
    w->vb = (double *)w->va + T;
    w->mb = e2e ? w->ma + T : NULL;
    for (size_t k = 0; e2e && k < 2 * T; k++)
        mpfr_init2(w->ma[k], prec);
}

void chk_ws_init(ws *w, int prec, size_t K)
{
    w->T = 0;
    w->ma = NULL;
    w->ia = NULL;
    w->va = NULL;
    mpfr_inits2(prec, w->acc, w->y, w->q, w->e, w->us[0], w->us[1], w->ua, (mpfr_ptr)0);
    mpfr_init2(w->t53, 53);
    mpfr_init2(w->tp, prec > 128 ? prec : 128);
    w->K = K;
    w->Z = malloc(3 * K * sizeof(mpfr_t));
    w->rho = malloc(K * sizeof(double));
    if (!w->Z || !w->rho) abort(); // like MPFR's own allocations
    w->E = w->Z + K;
    w->D = w->E + K;
    for (size_t j = 0; j < 3 * K; j++)
        mpfr_init2(w->Z[j], prec);
}

void chk_ws_clear(ws *w)
{
    for (size_t k = 0; w->ma && k < 2 * w->T; k++)
        mpfr_clear(w->ma[k]);
    free(w->ma);
    free(w->ia);
    free(w->va);
    for (size_t j = 0; j < 3 * w->K; j++)
        mpfr_clear(w->Z[j]);
    free(w->Z);
    free(w->rho);
    mpfr_clears(w->acc, w->y, w->q, w->e, w->t53, w->tp, w->us[0], w->us[1], w->ua, (mpfr_ptr)0);
}


// w->acc = init + sum_{k<n} a[k sa] b[k sb] (b NULL: + a[k sa]) of dtype values;
// returns S = |init| + sum |terms|, rounded up. f32 products are exact in
// double; f64 products are formed exactly in w->tp. S is summed in double
// (terms >= 0; each addition and f64 product rounds by 2^-53 at most), so
// S (1 + (n + 2) 2^-52) + n 2^-1074 bounds the exact S.
double chk_dot_run(ws *w, par_dtype dt, const void *a, size_t sa, const void *b, size_t sb,
                   size_t n, double init)
{
    mpfr_set_d(w->acc, init, MPFR_RNDN);
    double S = fabs(init);
    int any = 0;
    if (dt == PAR_F32) {
        const float *x = a, *y = b;
        for (size_t k = 0; k < n; k++) {
            const double t = y ? (double)x[k * sa] * (double)y[k * sb] : (double)x[k * sa];
            if (t == 0) continue;
            mpfr_set_d(w->t53, t, MPFR_RNDN);
            mpfr_add(w->acc, w->acc, w->t53, MPFR_RNDN);
            S += fabs(t);
            any = 1;
        }
    } else {
        const double *x = a, *y = b;
        for (size_t k = 0; k < n; k++) {
            const double xv = x[k * sa], yv = y ? y[k * sb] : 1.0;
            if (xv == 0 || yv == 0) continue;
            mpfr_set_d(w->t53, xv, MPFR_RNDN);
            if (y) {
                mpfr_mul_d(w->tp, w->t53, yv, MPFR_RNDN);
                mpfr_add(w->acc, w->acc, w->tp, MPFR_RNDN);
            } else {
                mpfr_add(w->acc, w->acc, w->t53, MPFR_RNDN);
            }
            S += fabs(xv * yv);
            any = 1;
        }
    }
    if (!any) return fabs(init); // every term exactly 0
    return S * (1 + (double)(n + 2) * 0x1p-52) + (dt == PAR_F64 ? (double)n * 0x1p-1074 : 0);
}

// w->acc = init + sum_k a[k sa] * b[k sb]: a exact (MPFR), b dtype values or NULL (1).
void chk_dot_md(ws *w, mpfr_t *a, size_t sa, par_dtype dt, const void *b, size_t sb, size_t n,
                   double init)
{
    mpfr_set_d(w->acc, init, MPFR_RNDN);
    for (size_t k = 0; k < n; k++) {
        if (mpfr_zero_p(a[k * sa])) continue;
        if (!b) {
            mpfr_add(w->acc, w->acc, a[k * sa], MPFR_RNDN);
            continue;
        }
        const double y = par_get_real(dt, b, k * sb);
        if (y == 0) continue;
        mpfr_set_d(w->t53, y, MPFR_RNDN);
        mpfr_fma(w->acc, a[k * sa], w->t53, w->acc, MPFR_RNDN);
    }
}

// w->acc = sum_k a[k sa] * b[k sb], both exact.
void chk_dot_mm(ws *w, mpfr_t *a, size_t sa, mpfr_t *b, size_t sb, size_t n)
{
    mpfr_set_zero(w->acc, 1);
    for (size_t k = 0; k < n; k++)
        if (!mpfr_zero_p(a[k * sa]) && !mpfr_zero_p(b[k * sb]))
            mpfr_fma(w->acc, a[k * sa], b[k * sb], w->acc, MPFR_RNDN);
}

// The reduction bound (chk_step.c, error model): gamma_n S + m tiny + MPFR's part.
double chk_bound_dot(const fmt *f, par_dtype dt, size_t n_red, size_t n_terms, double S, int prec)
{
    if (S == 0) return 0;
    return chk_gamma(n_red, dt) * S + (double)(n_red > n_terms ? n_red : n_terms) * f->tiny +
           (double)(n_terms + 2) * ldexp(S, 1 - prec);
}

// err = |run - exact| from MPFR (rounded up), its ulps in the run's format.
static void compare(ws *w, mpfr_srcptr exact, double run, const fmt *f, double *ex, double *err,
                    double *ulps)
{
    *ex = mpfr_get_d(exact, MPFR_RNDN);
    if (!isfinite(run) || !mpfr_number_p(exact)) {
        *err = *ulps = INFINITY;
        return;
    }
    mpfr_sub_d(w->e, exact, run, MPFR_RNDN);
    mpfr_abs(w->e, w->e, MPFR_RNDN);
    *err = mpfr_get_d(w->e, MPFR_RNDU);
    long ex2 = mpfr_zero_p(exact) ? f->emin
                                  : (long)mpfr_get_exp(exact) - 1; // |exact| in [2^ex2, 2^(ex2+1))
    if (ex2 < f->emin) ex2 = f->emin;
    mpfr_mul_2si(w->e, w->e, -(ex2 - f->p + 1), MPFR_RNDN);
    *ulps = mpfr_get_d(w->e, MPFR_RNDU);
}

void chk_record(chk_tensor *t, ws *w, size_t idx, mpfr_srcptr exact, double run, const fmt *f,
                double bound)
{
    double ex, err, ulps;
    compare(w, exact, run, f, &ex, &err, &ulps);
    chk_tensor_record(t, idx, run, ex, err, ulps, bound * SLACK);
}

// dst = act(z) exactly (to prec bits); dst may not be z for sigmoid.
void chk_act_mp(ws *w, mpfr_ptr dst, mpfr_srcptr z, par_act act)
{
    switch (act) {
    case PAR_ACT_RELU:
        if (mpfr_sgn(z) > 0)
            mpfr_set(dst, z, MPFR_RNDN);
        else
            mpfr_set_zero(dst, 1);
        break;
    case PAR_ACT_SIGMOID: // 1 / (1 + e^-z)
        mpfr_neg(w->q, z, MPFR_RNDN);
        mpfr_exp(w->q, w->q, MPFR_RNDN);
        mpfr_add_ui(w->q, w->q, 1, MPFR_RNDN);
        mpfr_ui_div(dst, 1, w->q, MPFR_RNDN);
        break;
    case PAR_ACT_TANH:
        mpfr_tanh(dst, z, MPFR_RNDN);
        break;
    case PAR_ACT_NONE:
        mpfr_set(dst, z, MPFR_RNDN);
        break;
    }
}

// dst = act'(z) written through the output y = act(z), exactly: relu y > 0,
// sigmoid y (1 - y), tanh 1 - y^2 (the kernels' formulas, par_kernels.h).
void chk_act_deriv_mp(mpfr_ptr dst, mpfr_srcptr y, par_act act)
{
    switch (act) {
    case PAR_ACT_RELU:
        mpfr_set_ui(dst, mpfr_sgn(y) > 0, MPFR_RNDN);
        break;
    case PAR_ACT_SIGMOID:
        mpfr_ui_sub(dst, 1, y, MPFR_RNDN);
        mpfr_mul(dst, dst, y, MPFR_RNDN);
        break;
    case PAR_ACT_TANH:
        mpfr_sqr(dst, y, MPFR_RNDN);
        mpfr_ui_sub(dst, 1, dst, MPFR_RNDN);
        break;
    case PAR_ACT_NONE:
        mpfr_set_ui(dst, 1, MPFR_RNDN);
        break;
    }
}

void chk_merge2(chk_tensor *dst0, const chk_tensor *p0, chk_tensor *dst1, const chk_tensor *p1)
{
#pragma omp critical(chk_merge)
    {
        chk_tensor_merge(dst0, p0);
        if (dst1) chk_tensor_merge(dst1, p1);
    }
}


par_status chk_check_reduction(chk_elem *e, par_dtype dt, const double *a, const double *b,
                               size_t n, double init, size_t n_red, double run, int prec)
{
    PAR_FAIL_IF(prec < 64, PAR_ERR_CONFIG, "prec %d: expected >= 64 bits", prec);
    const size_t sz = par_dtype_size(dt);
    void *va = malloc((n ? n : 1) * sz), *vb = b ? malloc((n ? n : 1) * sz) : NULL;
    if (!va || (b && !vb)) {
        free(va);
        free(vb);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    int repr = dt == PAR_F64 || ((double)(float)init == init && (double)(float)run == run);
    for (size_t k = 0; k < n; k++) {
        if (dt == PAR_F32) {
            ((float *)va)[k] = (float)a[k];
            repr = repr && (double)(float)a[k] == a[k];
            if (b) {
                ((float *)vb)[k] = (float)b[k];
                repr = repr && (double)(float)b[k] == b[k];
            }
        } else {
            ((double *)va)[k] = a[k];
            if (b) ((double *)vb)[k] = b[k];
        }
    }
    if (!repr) {
        free(va);
        free(vb);
        PAR_FAIL_IF(1, PAR_ERR_CONFIG, "check_reduction: a value is not representable in f32");
    }
    const fmt f = chk_fmt_of(dt);
    ws w;
    chk_ws_init(&w, prec, 1);
    e->run = run;
    e->S = chk_dot_run(&w, dt, va, 1, vb, 1, n, init);
    e->bound = chk_bound_dot(&f, dt, n_red, n, e->S, prec) * SLACK;
    compare(&w, w.acc, run, &f, &e->exact, &e->err, &e->ulp);
    chk_ws_clear(&w);
    free(va);
    free(vb);
    return PAR_OK;
}
