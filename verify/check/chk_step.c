// The MPFR recomputation of one training step and its comparison with a run:
// LOCAL (every op from the run's own rounded inputs, checked against a priori
// bounds) and END-TO-END (exact propagation from the step's inputs, no
// verdict). OpenMP over output elements, MPFR temporaries per thread. Not a
// trainer: it never produces weights. Tests: tests/test_check.c.
#include <math.h>
#include <mpfr.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_check.h"
#include "chk_step_int.h"
#include "chk_terms.h"

// ---- error model ----------------------------------------------------------------
//
// Every rounding of the run (round to nearest, binary32 or binary64):
//   fl(x) = x (1 + d) + e,  |d| <= u,  |e| <= tiny,
// u = 2^-p and tiny = the smallest subnormal (2^-149, 2^-1074), which bounds
// the error of a result in the subnormal range (half of it, in fact). An
// addition or subtraction of two floats is exact when its result is
// subnormal, so it has e = 0.
//
// Reductions (forward, input gradients, weight and bias gradients): any
// evaluation of init + sum_k a_k b_k (N terms) in which every term goes
// through at most n roundings (fma chains, chunk folds, trees: every order)
// satisfies
//   |fl - exact| <= gamma_n S + m tiny,   S = |init| + sum_k |a_k b_k|,
// gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, 3.1 and 3.3),
// m = max(n, N): each fma rounds its result once, and only an fma can add an
// e (a subnormal sum of floats is exact); each e is at most tiny / 2 and
// grows by (1 + u)^n at most. If every term is 0 the result is exactly 0 in
// any order: the bound is 0. n per layer kind (chk_terms.c):
//   dense: n_in + 1 for a forward element (bias included), n_out for an input
//     gradient, B for a weight or bias gradient.
//   conv2d forward: the chain from b[co] over all c_in K K taps, padding taps
//     included (an fma with input +0 leaves the sum as it is; counted all the
//     same): n = c_in K K + 1.
//   conv2d input gradient of x[ci][ih][iw]: its terms are dz[co][p] W[co][ci][kh][kw]
//     for every co and every output position p whose window holds the pixel
//     (at most K K of them, one per (kh, kw)). Per p the run forms t_p by an
//     fma chain over co from 0 (a term: at most c_out roundings), then
//     dx = 0 + t_p + t_p' + ... (at most K K additions, the first exact): no
//     term goes through more than n = c_out + K K roundings, whatever the
//     order of the positions (N, c_out times those positions, can exceed n).
//   conv2d weight and bias gradient: per chunk of C <= B samples one chain
//     over its samples and their P = h_out w_out positions (C P roundings),
//     then the left fold of the ceil(B / C) chunks (ceil(B / C) - 1 more);
//     C P + ceil(B / C) - 1 <= B P for P >= 1, so n = B P.
//   max-pool: a copy forward and a routed copy backward, no rounding: bound
//     0, i.e. the output must be the window's first maximum in scan order and
//     its gradient must reach that input and no other.
//   batchnorm (chk_bn.c): its four per-channel batch sums (S, Q, dgamma,
//     dbeta) keep C-sample chunks in every mode and trainer: a term goes
//     through at most C P - 1 roundings in its chunk's chain (C P for an fma
//     chain from 0) and ceil(B / C) - 1 in the fold of the chunks, in any
//     order of the chunks: n = min(B, C) P + ceil(B / C) - 1. Its other ops
//     (mean, var, inv, the outputs, dx, the running statistics) are short
//     chains of correctly rounded ops, bounded op by op there.
//
// The project's exp, log, tanh, sigmoid are faithful: error < 1 ulp of the
// exact result, measured by `parity check --math` (f32 < 0.5 ulp, f64 <= 0.55
// ulp on dense samples; tests/test_math.c asserts < 1). 1 ulp(y) <= 2u |y| +
// tiny, so we use |F(x) - f(x)| <= 2u |f(x)| + 2 tiny.
//
// MPFR's own rounding (prec bits) is added to every bound: a sum of n terms
// at prec bits is within (n + 2) 2^(1-prec) S of the true sum; an elementwise
// chain of a few MPFR ops within 2^(8-prec) of its scale. Bounds are computed
// in double and multiplied by SLACK, which covers their own ~20 roundings.


fmt chk_fmt_of(par_dtype dt)
{
    if (dt == PAR_F32) return (fmt){0x1p-24, 0x1p-149, 24, -126};
    return (fmt){0x1p-53, 0x1p-1074, 53, -1022};
}


static void ws_terms(ws *w, int prec, size_t T, int e2e)
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

static void ws_init(ws *w, int prec, size_t K)
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

static void ws_clear(ws *w)
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

static const void *off(par_dtype dt, const void *p, size_t i)
{
    return (const char *)p + i * par_dtype_size(dt);
}

// dst[k] = src[base + idx[k]] for k < n (dtype values).
static void gather(par_dtype dt, void *dst, const void *src, size_t base, const size_t *idx,
                   size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (dt == PAR_F32) ((float *)dst)[k] = ((const float *)src)[base + idx[k]];
        else ((double *)dst)[k] = ((const double *)src)[base + idx[k]];
    }
}

// dst[k] = src[base + idx[k]] for k < n (exact values).
static void gather_mp(mpfr_t *dst, mpfr_t *src, size_t base, const size_t *idx, size_t n)
{
    for (size_t k = 0; k < n; k++)
        mpfr_set(dst[k], src[base + idx[k]], MPFR_RNDN);
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
static void dot_md(ws *w, mpfr_t *a, size_t sa, par_dtype dt, const void *b, size_t sb, size_t n,
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
static void dot_mm(ws *w, mpfr_t *a, size_t sa, mpfr_t *b, size_t sb, size_t n)
{
    mpfr_set_zero(w->acc, 1);
    for (size_t k = 0; k < n; k++)
        if (!mpfr_zero_p(a[k * sa]) && !mpfr_zero_p(b[k * sb]))
            mpfr_fma(w->acc, a[k * sa], b[k * sb], w->acc, MPFR_RNDN);
}

// The reduction bound (see the error model): gamma_n S + m tiny + MPFR's part.
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
static void act_deriv_mp(mpfr_ptr dst, mpfr_srcptr y, par_act act)
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

// The first exact maximum in scan order of max-pool output j's window over
// one sample's exact inputs x (chk_pool_arg on MPFR values).
static size_t pool_arg_mp(const par_layer *ly, size_t j, mpfr_t *x)
{
    const size_t base = chk_pool_base(ly, j);
    size_t arg = base;
    for (size_t kh = 0; kh < ly->K; kh++)
        for (size_t kw = 0; kw < ly->K; kw++)
            if (mpfr_greater_p(x[base + kh * ly->w_in + kw], x[arg]))
                arg = base + kh * ly->w_in + kw;
    return arg;
}

// ---- the check ------------------------------------------------------------------


void chk_merge2(chk_tensor *dst0, const chk_tensor *p0, chk_tensor *dst1, const chk_tensor *p1)
{
#pragma omp critical(chk_merge)
    {
        chk_tensor_merge(dst0, p0);
        if (dst1) chk_tensor_merge(dst1, p1);
    }
}

// Forward of layer l: z = b + sum x W over the element's terms (chk_terms.h:
// every input of a dense output, the taps of a conv output) from the run's
// a[l] (LOCAL), then act. Bound of the output y = ACT(fl(z)):
//   relu, none: act is exact and 1-Lipschitz: |y - act(z)| <= Ez (the
//     reduction bound; also when relu cuts fl(z) and z on different sides);
//   tanh (Lipschitz 1), sigmoid (1/4): |ACT(fl z) - act(fl z)| <= 2u |act(fl z)|
//     + 2 tiny and |act(fl z) - act(z)| <= L Ez, so
//     |y - act(z)| <= L Ez + 2u (|act(z)| + L Ez) + 2 tiny.
// Max-pool copies the first maximum of its window: exact, bound 0.
static void stage_forward(ctx *c, ws *w, int l)
{
    const chk_step *st = c->st;
    const par_layer *ly = &c->m->layers[l];
    const par_dtype dt = c->dt;
    const size_t n_in = ly->n_in, n_out = ly->n_out, N = c->B * n_out;
    const int pool = ly->kind == PAR_LAYER_MAXPOOL;
    const void *W = pool ? NULL : off(dt, st->w, c->m->views[ly->w_view].offset);
    const void *bias = pool ? NULL : off(dt, st->w, c->m->views[ly->b_view].offset);
    const double L = ly->act == PAR_ACT_SIGMOID ? 0.25 : 1.0;
    const int smooth = ly->act == PAR_ACT_SIGMOID || ly->act == PAR_ACT_TANH;
    chk_tensor p0 = chk_tensor_blank(c->out[0][l]), p1 = {0};
    if (c->e2e) p1 = chk_tensor_blank(c->out[1][l]);
#pragma omp for schedule(dynamic, 16)
    for (size_t k = 0; k < N; k++) {
        const size_t s = k / n_out, j = k % n_out;
        const double run = par_get_real(dt, st->a[l + 1], k);
        if (pool) {
            const size_t arg = chk_pool_arg(ly, j, off(dt, st->a[l], s * n_in), dt);
            mpfr_set_d(w->y, par_get_real(dt, st->a[l], s * n_in + arg), MPFR_RNDN);
            chk_record(&p0, w, k, w->y, run, &c->f, 0);
            if (c->e2e) {   // the first exact maximum of the window (l == 0: the input's)
                mpfr_t *x = l > 0 ? c->ea[l] + s * n_in : NULL;
                mpfr_set(c->ea[l + 1][k], x ? x[pool_arg_mp(ly, j, x)] : w->y, MPFR_RNDN);
                chk_record(&p1, w, k, c->ea[l + 1][k], run, &c->f, NAN);
            }
            continue;
        }
        size_t o;
        const size_t n = chk_forward_terms(ly, j, w->ia, w->ib, &o);
        gather(dt, w->va, st->a[l], s * n_in, w->ia, n);
        gather(dt, w->vb, W, 0, w->ib, n);
        const double S = chk_dot_run(w, dt, w->va, 1, w->vb, 1, n, par_get_real(dt, bias, o));
        const double Ez = chk_bound_dot(&c->f, dt, chk_forward_rounds(ly), n, S, c->prec);
        chk_act_mp(w, w->y, w->acc, ly->act);
        double bound = Ez;
        if (smooth) {
            const double y = fabs(mpfr_get_d(w->y, MPFR_RNDN));
            bound = L * Ez + 2 * c->f.u * (y + L * Ez) + 2 * c->f.tiny + ldexp(y, 8 - c->prec);
        }
        chk_record(&p0, w, k, w->y, run, &c->f, bound);
        if (c->e2e) {
            if (l > 0) {
                gather_mp(w->ma, c->ea[l], s * n_in, w->ia, n);
                dot_md(w, w->ma, 1, dt, w->vb, 1, n, par_get_real(dt, bias, o));
            }
            // l == 0: the run's a[0] is the step's input, so w->acc is already exact z
            chk_act_mp(w, c->ea[l + 1][k], w->acc, ly->act);
            chk_record(&p1, w, k, c->ea[l + 1][k], run, &c->f, NAN);
        }
    }
    chk_merge2(c->out[0][l], &p0, c->e2e ? c->out[1][l] : NULL, &p1);
}

// Softmax + cross-entropy of one sample from logits z (exact MPFR values):
// m = max z, E_j = e^(z_j - m), SE = sum E_j (w->acc), loss = log SE - (z_y - m)
// into `loss`, dz_j = (E_j / SE - [j == y]) / B into dz[j]. Leaves E_j in w->E.
static void softmax_mp(ws *w, mpfr_t *z, size_t K, size_t lab, size_t B, mpfr_ptr loss, mpfr_t *dz)
{
    size_t arg = 0;
    for (size_t j = 1; j < K; j++)
        if (mpfr_greater_p(z[j], z[arg])) arg = j;
    mpfr_set_zero(w->acc, 1);
    for (size_t j = 0; j < K; j++) {
        mpfr_sub(w->q, z[j], z[arg], MPFR_RNDN);
        mpfr_exp(w->E[j], w->q, MPFR_RNDN);
        mpfr_add(w->acc, w->acc, w->E[j], MPFR_RNDN);
    }
    mpfr_log(w->y, w->acc, MPFR_RNDN);
    mpfr_sub(w->q, z[lab], z[arg], MPFR_RNDN);
    mpfr_sub(loss, w->y, w->q, MPFR_RNDN);
    for (size_t j = 0; j < K; j++) {
        mpfr_div(dz[j], w->E[j], w->acc, MPFR_RNDN);
        if (j == lab) mpfr_sub_ui(dz[j], dz[j], 1, MPFR_RNDN);
        mpfr_div_ui(dz[j], dz[j], (unsigned long)B, MPFR_RNDN);
    }
}

// Softmax + cross-entropy, per sample, from the run's logits z (LOCAL). The
// run (par_kernels.h, ref_impl.inc) computes m = max z (exact), d_j = fl(z_j
// - m), e_j = EXP(d_j), sum = fl(left fold of e_j), t = fl(z_y - m),
// loss = fl(LOG(sum) - t), p_j = fl(e_j / sum), r_j = fl(p_j - 1) for j = y
// else p_j, dz_j = fl(r_j / B). With E_j = e^(z_j - m), SE = sum E_j >= 1
// (the max term is e^0 = 1), P_j = E_j / SE:
//   |d_j - (z_j - m)| <= u |z_j - m| =: tau_j, so
//   |e_j - E_j| <= E_j rho_j + 2 tiny,  rho_j = (e^tau_j - 1)(1 + 2u) + 2u;
//   |sum - SE| <= Ds = A + gamma_{K-1} (SE + A),  A = sum_j (E_j rho_j + 2 tiny);
//   sum = SE (1 + s), |s| <= es = Ds / SE;  |log sum - log SE| <= lam = -log(1 - es);
//   |LOG(sum) - log SE| <= Pl = lam + 2u (log SE + lam) + 2 tiny;
//   loss: |fl(LOG - t) - L| <= El + u (|L| + El) + tiny,  El = Pl + u |z_y - m|;
//   |e_j / sum - P_j| <= Ep = (P_j (rho_j + es) + 2 tiny / SE) / (1 - es);
//   |p_j - P_j| <= Ep' = Ep + u (P_j + Ep) + tiny;  R_j = P_j - [j == y];
//   |r_j - R_j| <= Er = Ep' (+ u (|R_j| + Ep') for j = y);
//   |dz_j - R_j / B| <= Er / B + u (|R_j| + Er) / B + tiny.
static void stage_softmax(ctx *c, ws *w)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const int Ll = c->m->n_layers - 1;
    const size_t K = c->K, B = c->B;
    const double u = c->f.u, tiny = c->f.tiny, gK = chk_gamma(K - 1, dt);
    const double mp = ldexp(1.0, 8 - c->prec);
    chk_tensor pl0 = chk_tensor_blank(c->ls[0]), pd0 = chk_tensor_blank(c->dz[0][Ll]);
    chk_tensor pl1 = {0}, pd1 = {0};
    if (c->e2e) {
        pl1 = chk_tensor_blank(c->ls[1]);
        pd1 = chk_tensor_blank(c->dz[1][Ll]);
    }
#pragma omp for schedule(dynamic, 1)
    for (size_t s = 0; s < B; s++) {
        const size_t lab = (size_t)st->labels[s];
        double zmax = par_get_real(dt, st->a[Ll + 1], s * K);
        for (size_t j = 0; j < K; j++) {
            const double z = par_get_real(dt, st->a[Ll + 1], s * K + j);
            mpfr_set_d(w->Z[j], z, MPFR_RNDN);
            if (z > zmax) zmax = z;
        }
        softmax_mp(w, w->Z, K, lab, B, w->e, w->D);
        mpfr_set(w->y, w->e, MPFR_RNDN); // the exact loss (chk_record uses w->e)
        const double SE = mpfr_get_d(w->acc, MPFR_RNDN), Lx = mpfr_get_d(w->y, MPFR_RNDN);
        double A = 0;
        for (size_t j = 0; j < K; j++) {
            const double tau = u * fabs(par_get_real(dt, st->a[Ll + 1], s * K + j) - zmax);
            w->rho[j] = expm1(tau) * (1 + 2 * u) + 2 * u;
            A += mpfr_get_d(w->E[j], MPFR_RNDU) * w->rho[j] + 2 * tiny;
        }
        const double es = (A + gK * (SE + A)) / SE;
        const double lam = es < 0.5 ? -log1p(-es) : INFINITY;
        const double Pl = lam + 2 * u * (log(SE) + lam) + 2 * tiny;
        const double El = Pl + u * fabs(par_get_real(dt, st->a[Ll + 1], s * K + lab) - zmax);
        const double bl = El + u * (fabs(Lx) + El) + tiny + mp * (fabs(Lx) + log(SE) + 1);
        chk_record(&pl0, w, s, w->y, par_get_real(dt, st->loss_s, s), &c->f, bl);
        for (size_t j = 0; j < K; j++) {
            const double P = mpfr_get_d(w->E[j], MPFR_RNDN) / SE;
            const double r = w->rho[j];
            const double Ep = (P * (r + es) + 2 * tiny / SE) / (1 - es);
            const double Ep2 = Ep + u * (P + Ep) + tiny;
            const double R = fabs(P - (j == lab));
            const double Er = j == lab ? Ep2 + u * (R + Ep2) : Ep2;
            const double bd =
                Er / (double)B + u * (R + Er) / (double)B + tiny + mp * (R + 1) / (double)B;
            chk_record(&pd0, w, s * K + j, w->D[j], par_get_real(dt, st->d[Ll], s * K + j), &c->f,
                       bd);
        }
        if (c->e2e) {
            softmax_mp(w, c->ea[Ll + 1] + s * K, K, lab, B, c->eloss[s], c->ed[Ll] + s * K);
            chk_record(&pl1, w, s, c->eloss[s], par_get_real(dt, st->loss_s, s), &c->f, NAN);
            for (size_t j = 0; j < K; j++)
                chk_record(&pd1, w, s * K + j, c->ed[Ll][s * K + j],
                           par_get_real(dt, st->d[Ll], s * K + j), &c->f, NAN);
        }
    }
    chk_merge2(c->ls[0], &pl0, c->e2e ? c->ls[1] : NULL, &pl1);
    chk_merge2(c->dz[0][Ll], &pd0, c->e2e ? c->dz[1][Ll] : NULL, &pd1);
}

// The batch loss: T = fold of the B per-sample losses (any order: |fl(T) -
// T| <= gamma_B sum |l_s|, additions of floats need no tiny), then fl(T / B):
//   |loss - T/B| <= Et / B + u (|T| + Et) / B + tiny,  Et = gamma_B sum |l_s|.
// LOCAL from the run's per-sample losses; E2E from the exact ones.
static void stage_loss(ctx *c, ws *w)
{
    const chk_step *st = c->st;
    const double S = chk_dot_run(w, c->dt, st->loss_s, 1, NULL, 0, c->B, 0);
    mpfr_div_ui(w->y, w->acc, (unsigned long)c->B, MPFR_RNDN);
    const double T = fabs(mpfr_get_d(w->acc, MPFR_RNDN));
    const double Et = chk_bound_dot(&c->f, c->dt, c->B, c->B, S, c->prec);
    const double b = Et / (double)c->B + c->f.u * (T + Et) / (double)c->B + c->f.tiny;
    chk_record(c->loss[0], w, 0, w->y, st->loss, &c->f, b);
    if (c->e2e) {
        dot_md(w, c->eloss, 1, c->dt, NULL, 0, c->B, 0);
        mpfr_div_ui(w->y, w->acc, (unsigned long)c->B, MPFR_RNDN);
        chk_record(c->loss[1], w, 0, w->y, st->loss, &c->f, NAN);
    }
}

// Input gradient through layer l: d[l-1] = act'(layer l-1) * Sigma, from
// the run's d[l] and its a[l] = y (LOCAL). Sigma = the sum of the element's
// terms dz W (chk_terms.h; fl: within E = reduction bound over the roundings
// a term goes through), or for max-pool the routed dz (exact: E = 0);
// q = act'(y) in the kernels' formula:
//   relu: q in {0, 1} taken from y, no rounding: bound q E;
//   sigmoid: q = fl(y fl(1 - y)): |q_fl - q| <= Dq = (2u + u^2) |q| + tiny;
//   tanh: q = fl(1 - fl(y y)): |q_fl - q| <= Dq = u y^2 (1 + u) + tiny + u (|q| + u y^2 + tiny);
//   then fl(Sigma_fl q_fl): |d - Sigma q| <= E (|q| + Dq) + |Sigma| Dq
//                                          + u (|Sigma| + E)(|q| + Dq) + tiny.
static void stage_backward(ctx *c, ws *w, int l)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const par_layer *ly = &c->m->layers[l];
    const par_act act = c->m->layers[l - 1].act;
    const size_t n_in = ly->n_in, n_out = ly->n_out, N = c->B * n_in;
    const int pool = ly->kind == PAR_LAYER_MAXPOOL;
    const void *W = pool ? NULL : off(dt, st->w, c->m->views[ly->w_view].offset);
    const double u = c->f.u, tiny = c->f.tiny;
    chk_tensor p0 = chk_tensor_blank(c->dz[0][l - 1]), p1 = {0};
    if (c->e2e) p1 = chk_tensor_blank(c->dz[1][l - 1]);
#pragma omp for schedule(dynamic, 16)
    for (size_t k = 0; k < N; k++) {
        const size_t s = k / n_in, i = k % n_in;
        const double run = par_get_real(dt, st->d[l - 1], k);
        double E = 0;
        size_t n = 0, win = SIZE_MAX;   // pool: the output window that holds i, if any
        if (pool) {
            win = chk_pool_window(ly, i);
            mpfr_set_zero(w->acc, 1);
            if (win != SIZE_MAX && chk_pool_arg(ly, win, off(dt, st->a[l], s * n_in), dt) == i)
                mpfr_set_d(w->acc, par_get_real(dt, st->d[l], s * n_out + win), MPFR_RNDN);
        } else {
            n = chk_input_grad_terms(ly, i, w->ia, w->ib);
            gather(dt, w->va, st->d[l], s * n_out, w->ia, n);
            gather(dt, w->vb, W, 0, w->ib, n);
            const double S = chk_dot_run(w, dt, w->va, 1, w->vb, 1, n, 0);
            E = chk_bound_dot(&c->f, dt, chk_input_grad_rounds(ly), n, S, c->prec);
        }
        const double y = par_get_real(dt, st->a[l], k);
        mpfr_set_d(w->e, y, MPFR_RNDN);
        act_deriv_mp(w->q, w->e, act);
        const double q = fabs(mpfr_get_d(w->q, MPFR_RNDN));
        const double Sg = fabs(mpfr_get_d(w->acc, MPFR_RNDN));
        mpfr_mul(w->y, w->acc, w->q, MPFR_RNDN);
        double bound;
        if (act == PAR_ACT_RELU || act == PAR_ACT_NONE) {
            bound = q * E;
        } else {
            const double Dq = act == PAR_ACT_SIGMOID
                                  ? (2 * u + u * u) * q + tiny
                                  : u * y * y * (1 + u) + tiny + u * (q + u * y * y + tiny);
            bound = E * (q + Dq) + Sg * Dq + u * (Sg + E) * (q + Dq) + tiny +
                    ldexp(Sg * q + Sg + q, 8 - c->prec);
        }
        chk_record(&p0, w, k, w->y, run, &c->f, bound);
        if (c->e2e) {
            if (pool) {   // the exact dz routed by the exact maximum
                mpfr_set_zero(w->acc, 1);
                if (win != SIZE_MAX && pool_arg_mp(ly, win, c->ea[l] + s * n_in) == i)
                    mpfr_set(w->acc, c->ed[l][s * n_out + win], MPFR_RNDN);
            } else {
                gather_mp(w->ma, c->ed[l], s * n_out, w->ia, n);
                dot_md(w, w->ma, 1, dt, w->vb, 1, n, 0);
            }
            act_deriv_mp(w->q, c->ea[l][k], act);
            mpfr_mul(c->ed[l - 1][k], w->acc, w->q, MPFR_RNDN);
            chk_record(&p1, w, k, c->ed[l - 1][k], run, &c->f, NAN);
        }
    }
    chk_merge2(c->dz[0][l - 1], &p0, c->e2e ? c->dz[1][l - 1] : NULL, &p1);
}

// The update bound of stage_grads (derived there).
double chk_update_bound(const ctx *c, ws *w, double g, double wv)
{
    const double u = c->f.u, tiny = c->f.tiny, lr = c->st->lr, lg = fabs(lr * g);
    mpfr_set_d(w->y, g, MPFR_RNDN);
    mpfr_mul_d(w->y, w->y, lr, MPFR_RNDN);
    mpfr_d_sub(w->y, wv, w->y, MPFR_RNDN);
    const double ax = fabs(mpfr_get_d(w->y, MPFR_RNDN));
    return u * lg + tiny + u * (ax + u * lg + tiny) + ldexp(ax + lg, 8 - c->prec);
}

// ---- the optimizer update (momentum, nesterov, adam) --------------------------------
//
// The run evaluates par_kernels.h's formulas, one rounding per operation, no
// fma, from its own w, state (m, v) and g; the coefficients are dtype values:
// lr, mu, b1, b2, eps as given (rounded once), c1 = fl(1 - b1), c2 = fl(1 -
// b2), bc1 = fl(1 - p1), bc2 = fl(1 - p2) with p = b^t formed in double by t
// - 1 roundings (par_optim_coefs, par_optim_power). The exact update uses
// c1 = 1 - b1, c2 = 1 - b2, bc1 = 1 - b1^t, bc2 = 1 - b2^t exactly, so the
// coefficients' own roundings are part of the bound (ec*, below).
//
// LOCAL checks each new state from the run's state before the step and g,
// and the new weight from the run's own new state (the kernel keeps the
// stored m and v in registers and goes on from them), so a wrong state and a
// wrong weight step fail different rows. Errors are carried op by op, with
// the exact values x of the intermediate results (|x^ - x| <= E):
//   product fl(c^ x^), |c^ - c| <= ec:  D = |c| E + ec (|x| + E),
//                                       E' = D + u (|c x| + D) + tiny
//   sum fl(x^ + y^) (no tiny: a subnormal sum is exact):
//                                       E' = Ex + Ey + u (|x + y| + Ex + Ey)
//   quotient fl(x^ / y^), y > Ey:       D = (Ex + |x/y| Ey) / (|y| - Ey),
//                                       E' = D + u (|x/y| + D) + tiny
//   sqrt(x^), x >= 0: |sqrt(x^) - sqrt(x)| = |x^ - x| / (sqrt(x^) + sqrt(x))
//                                       D = min(E / sqrt(x), sqrt(E)),
//                                       E' = D + u (sqrt(x) + D) + tiny
// (the first from c^ x^ - c x = (c^ - c) x^ + c (x^ - x), the third from
// x^/y^ - x/y = ((x^ - x) - (x/y)(y^ - y)) / y^). Momentum and nesterov:
//   m' = mu m + g:              E = add(mul(mu, m), 0)
//   momentum w' = w - lr m'^:   add(mul(lr, m'^), 0)      (the SGD bound)
//   nesterov w' = w - lr (g + mu m'^): add(mul(lr, add(mul(mu, m'^), 0)), 0)
// Adam (c1, c2 with ec1, ec2; bc1, bc2 with ebc1, ebc2):
//   m' = b1 m + c1 g:           add(mul(b1, m), mul(c1^, g))
//   v' = b2 v + c2 g g:         add(mul(b2, v), mul(g, mul(c2^, g)))
//   w' = w - lr (m'^/bc1) / (sqrt(v'^/bc2) + eps):
//     mh: quot(m'^, bc1^), vh: quot(v'^, bc2^), d: add(sqrt(vh), 0 (eps)),
//     t: mul(lr, mh), q: quot(t, d), w': add(q, 0).
// Coefficients: fl64 then fl_dt of 1 - b (a subtraction: no tiny) gives
// ec = (u + 2^-53 + u 2^-53) |c|; p^ = b^t by t - 1 products in double is
// within gamma53_(t-1) p + (t - 1) 2^-1075 of b^t (underflow), and bc^ =
// fl_dt(fl64(1 - p^)) within |p^ - p| + (u + 2^-53 + u 2^-53)(|bc| + |p^ - p|).
// The exact values are computed in MPFR (a chain of at most 10 ops); MPFR's
// own error and the doubles used for |x| in the bounds add
// 2^(8 - prec) (|w| + |q|) (or the state's terms), as elsewhere.
static double e_mul(const fmt *f, double c, double ec, double x, double ex)
{
    const double d = c * ex + ec * (x + ex);
    return d + f->u * (c * x + d) + f->tiny;
}

static double e_add(const fmt *f, double ex, double ey, double s)
{
    return ex + ey + f->u * (s + ex + ey);
}

// No finite bound when Ey >= y: 0 then (the element must be exact).
static double e_div(const fmt *f, double x, double ex, double y, double ey)
{
    if (!(ey < y)) return 0;
    const double q = x / y, d = (ex + q * ey) / (y - ey);
    return d + f->u * (q + d) + f->tiny;
}

static double e_sqrt(const fmt *f, double x, double ex)
{
    const double r = sqrt(x), d = r > 0 ? fmin(ex / r, sqrt(ex)) : sqrt(ex);
    return d + f->u * (r + d) + f->tiny;
}

// w->us[0] = b m + c g (c exact in mc, NULL: 1), from dtype values m, g.
static void state_first(ws *w, double b, double m, mpfr_srcptr mc, mpfr_srcptr g)
{
    if (mc)
        mpfr_mul(w->ua, mc, g, MPFR_RNDN);
    else
        mpfr_set(w->ua, g, MPFR_RNDN);
    mpfr_set_d(w->us[0], m, MPFR_RNDN);
    mpfr_mul_d(w->us[0], w->us[0], b, MPFR_RNDN);
    mpfr_add(w->us[0], w->us[0], w->ua, MPFR_RNDN);
}

void chk_update_check(const ctx *c, ws *w, size_t p, size_t flat, mpfr_srcptr ge, chk_tensor *tw,
                      chk_tensor *ts)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const fmt *f = &c->f;
    const double lr = st->lr, g = par_get_real(dt, st->g, p), wv = par_get_real(dt, st->w, p);
    const double wn = par_get_real(dt, st->w_new, p);
    const int local = ge == NULL;
    if (c->opt == PAR_OPTIM_SGD) {
        double b = NAN;
        if (local) {
            b = chk_update_bound(c, w, g, wv);
        } else {
            mpfr_mul_d(w->y, ge, lr, MPFR_RNDN);
            mpfr_d_sub(w->y, wv, w->y, MPFR_RNDN);
        }
        chk_record(tw, w, flat, w->y, wn, f, b);
        return;
    }
    const double m = par_get_real(dt, st->s[0], p), mn = par_get_real(dt, st->s_new[0], p);
    const double v = c->n_state > 1 ? par_get_real(dt, st->s[1], p) : 0;
    const double vn = c->n_state > 1 ? par_get_real(dt, st->s_new[1], p) : 0;
    const double mp = ldexp(1, 8 - c->prec);
    if (local) {   // the exact gradient is the run's own
        mpfr_set_d(w->q, g, MPFR_RNDN);
        ge = w->q;
    }
    // The new state (LOCAL and END-TO-END alike, from ge).
    double bs[2] = {NAN, NAN};
    if (c->opt != PAR_OPTIM_ADAM) {
        state_first(w, c->mu, m, NULL, ge);   // m' = mu m + g
        if (local) {
            const double x1 = fabs(c->mu * m);
            bs[0] = e_add(f, e_mul(f, c->mu, 0, fabs(m), 0), 0, fabs(mpfr_get_d(w->us[0], MPFR_RNDN))) +
                    mp * (x1 + fabs(g));
        }
    } else {
        state_first(w, c->b1, m, c->mc1, ge);   // m' = b1 m + c1 g
        mpfr_mul(w->ua, c->mc2, ge, MPFR_RNDN); // v' = b2 v + (c2 g) g
        mpfr_mul(w->ua, w->ua, ge, MPFR_RNDN);
        mpfr_set_d(w->us[1], v, MPFR_RNDN);
        mpfr_mul_d(w->us[1], w->us[1], c->b2, MPFR_RNDN);
        mpfr_add(w->us[1], w->us[1], w->ua, MPFR_RNDN);
        if (local) {
            const double ag = fabs(g), am = fabs(mpfr_get_d(w->us[0], MPFR_RNDN));
            const double av = fabs(mpfr_get_d(w->us[1], MPFR_RNDN));
            const double e1 = e_mul(f, c->b1, 0, fabs(m), 0), e2 = e_mul(f, c->dc1, c->ec1, ag, 0);
            bs[0] = e_add(f, e1, e2, am) + mp * (c->b1 * fabs(m) + c->dc1 * ag);
            const double e3 = e_mul(f, c->b2, 0, fabs(v), 0), e4 = e_mul(f, c->dc2, c->ec2, ag, 0);
            const double e5 = e_mul(f, ag, 0, c->dc2 * ag, e4);
            bs[1] = e_add(f, e3, e5, av) + mp * (c->b2 * fabs(v) + c->dc2 * ag * ag);
        }
    }
    for (int i = 0; i < c->n_state; i++)
        chk_record(&ts[i], w, flat, w->us[i], i ? vn : mn, f, bs[i]);
    // The new weight: LOCAL from the run's new state, END-TO-END from the exact one.
    if (local) {
        mpfr_set_d(w->us[0], mn, MPFR_RNDN);
        if (c->n_state > 1) mpfr_set_d(w->us[1], vn, MPFR_RNDN);
    }
    double bw = NAN;
    if (c->opt == PAR_OPTIM_MOMENTUM) {   // w' = w - lr m'
        mpfr_mul_d(w->y, w->us[0], lr, MPFR_RNDN);
        mpfr_d_sub(w->y, wv, w->y, MPFR_RNDN);
        if (local) bw = chk_update_bound(c, w, mn, wv);   // leaves the same w->y
    } else if (c->opt == PAR_OPTIM_NESTEROV) {   // w' = w - lr (g + mu m')
        mpfr_mul_d(w->ua, w->us[0], c->mu, MPFR_RNDN);
        mpfr_add(w->ua, w->ua, ge, MPFR_RNDN);
        const double x2 = fabs(mpfr_get_d(w->ua, MPFR_RNDN));
        mpfr_mul_d(w->ua, w->ua, lr, MPFR_RNDN);
        mpfr_d_sub(w->y, wv, w->ua, MPFR_RNDN);
        if (local) {
            const double e2 = e_add(f, e_mul(f, c->mu, 0, fabs(mn), 0), 0, x2);
            const double e3 = e_mul(f, lr, 0, x2, e2);
            bw = e_add(f, e3, 0, fabs(mpfr_get_d(w->y, MPFR_RNDN))) + mp * (fabs(wv) + lr * x2);
        }
    } else {   // w' = w - lr (m'/bc1) / (sqrt(v'/bc2) + eps)
        mpfr_div(w->ua, w->us[0], c->mbc1, MPFR_RNDN);   // mh
        const double mh = fabs(mpfr_get_d(w->ua, MPFR_RNDN));
        mpfr_div(w->us[1], w->us[1], c->mbc2, MPFR_RNDN);   // vh
        const double vh = mpfr_get_d(w->us[1], MPFR_RNDN);
        mpfr_sqrt(w->us[1], w->us[1], MPFR_RNDN);
        mpfr_add_d(w->us[1], w->us[1], c->eps, MPFR_RNDN);   // d
        const double d = mpfr_get_d(w->us[1], MPFR_RNDN);
        mpfr_mul_d(w->ua, w->ua, lr, MPFR_RNDN);
        mpfr_div(w->ua, w->ua, w->us[1], MPFR_RNDN);   // q
        const double q = fabs(mpfr_get_d(w->ua, MPFR_RNDN));
        mpfr_d_sub(w->y, wv, w->ua, MPFR_RNDN);
        if (local) {
            const double emh = e_div(f, fabs(mn), 0, c->dbc1, c->ebc1);
            const double evh = e_div(f, fabs(vn), 0, c->dbc2, c->ebc2);
            const double ed = e_add(f, e_sqrt(f, vh, evh), 0, d);
            const double et = e_mul(f, lr, 0, mh, emh);
            const double eq = e_div(f, lr * mh, et, d, ed);
            bw = e_add(f, eq, 0, fabs(mpfr_get_d(w->y, MPFR_RNDN))) + mp * (fabs(wv) + q);
        }
    }
    chk_record(tw, w, flat, w->y, wn, f, bw);
}

// Weight and bias gradients of layer l (reduction over the B samples, from
// the run's d[l] and a[l]: LOCAL), and the SGD update w' = fl(w - fl(lr g))
// from the run's gradient g. Two correctly rounded ops:
//   |fl(lr g) - lr g| <= u |lr g| + tiny;  w - fl(lr g) rounds by u |.| (a
//   subtraction: no tiny), so |w' - (w - lr g)| <= u |lr g| + tiny
//   + u (|w - lr g| + u |lr g| + tiny).
static void stage_grads(ctx *c, ws *w, int l)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const par_layer *ly = &c->m->layers[l];
    if (ly->n_rows == 0) return;   // max-pool: no parameters
    const size_t rl = ly->row_len, n_in = ly->n_in, n_out = ly->n_out, B = c->B;
    const size_t N = ly->n_rows * (rl + 1), n_red = chk_grad_rounds(ly, B);
    const size_t oW = c->m->views[ly->w_view].offset, ob = c->m->views[ly->b_view].offset;
    chk_tensor g0 = chk_tensor_blank(c->gw[0][l]), b0 = chk_tensor_blank(c->gb[0][l]);
    chk_tensor n0 = chk_tensor_blank(c->nw[0][l]), m0 = chk_tensor_blank(c->nb[0][l]);
    chk_tensor g1 = {0}, b1 = {0}, n1 = {0}, m1 = {0};
    chk_tensor sp[2][2][2];   // new state rows: [view][weight, bias][state]
    for (int v = 0; v <= c->e2e; v++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < c->n_state; i++) sp[v][j][i] = chk_tensor_blank(c->ns[v][l][j][i]);
    if (c->e2e) {
        g1 = chk_tensor_blank(c->gw[1][l]);
        b1 = chk_tensor_blank(c->gb[1][l]);
        n1 = chk_tensor_blank(c->nw[1][l]);
        m1 = chk_tensor_blank(c->nb[1][l]);
    }
#pragma omp for schedule(dynamic, 4)
    for (size_t k = 0; k < N; k++) {
        const size_t o = k / (rl + 1), t = k % (rl + 1);
        const int is_b = t == rl;
        const size_t p = is_b ? ob + o : oW + o * rl + t, flat = is_b ? o : o * rl + t;
        chk_tensor *tg = is_b ? &b0 : &g0, *tn = is_b ? &m0 : &n0;
        const double g = par_get_real(dt, st->g, p);
        // The terms of every sample, dz then x, as global indices into d[l], a[l].
        size_t n = 0;
        for (size_t s = 0; s < B; s++) {
            const size_t m = chk_grad_terms(ly, o, t, w->ia + n, w->ib + n);
            for (size_t q = n; q < n + m; q++) {
                w->ia[q] += s * n_out;
                w->ib[q] += s * n_in;
            }
            n += m;
        }
        gather(dt, w->va, st->d[l], 0, w->ia, n);
        if (!is_b) gather(dt, w->vb, st->a[l], 0, w->ib, n);
        const double S = chk_dot_run(w, dt, w->va, 1, is_b ? NULL : w->vb, 1, n, 0);
        chk_record(tg, w, flat, w->acc, g, &c->f, chk_bound_dot(&c->f, dt, n_red, n, S, c->prec));
        chk_update_check(c, w, p, flat, NULL, tn, sp[0][is_b]);   // from the run's own g
        if (c->e2e) {
            gather_mp(w->ma, c->ed[l], 0, w->ia, n);
            if (is_b)
                dot_md(w, w->ma, 1, dt, NULL, 0, n, 0);
            else if (l == 0)
                dot_md(w, w->ma, 1, dt, w->vb, 1, n, 0);
            else {
                gather_mp(w->mb, c->ea[l], 0, w->ib, n);
                dot_mm(w, w->ma, 1, w->mb, 1, n);
            }
            chk_record(is_b ? &b1 : &g1, w, flat, w->acc, g, &c->f, NAN);
            chk_update_check(c, w, p, flat, w->acc, is_b ? &m1 : &n1, sp[1][is_b]);
        }
    }
#pragma omp critical(chk_merge)
    {
        chk_tensor_merge(c->gw[0][l], &g0);
        chk_tensor_merge(c->gb[0][l], &b0);
        chk_tensor_merge(c->nw[0][l], &n0);
        chk_tensor_merge(c->nb[0][l], &m0);
        if (c->e2e) {
            chk_tensor_merge(c->gw[1][l], &g1);
            chk_tensor_merge(c->gb[1][l], &b1);
            chk_tensor_merge(c->nw[1][l], &n1);
            chk_tensor_merge(c->nb[1][l], &m1);
        }
        for (int v = 0; v <= c->e2e; v++)
            for (int j = 0; j < 2; j++)
                for (int i = 0; i < c->n_state; i++) chk_tensor_merge(c->ns[v][l][j][i], &sp[v][j][i]);
    }
}

// The optimizer's coefficients (derivation at chk_update_check): the
// dtype-rounded hyperparameters, the exact c1, c2, bc1, bc2 and the bounds
// on the run's roundings of them.
static void opt_consts(ctx *c)
{
    const chk_step *st = c->st;
    const double u = c->f.u, r = u + 0x1p-53 + u * 0x1p-53;   // fl64 then fl_dt
    c->mu = par_round_real(c->dt, st->optim.momentum);
    c->b1 = par_round_real(c->dt, st->optim.beta1);
    c->b2 = par_round_real(c->dt, st->optim.beta2);
    c->eps = par_round_real(c->dt, st->optim.eps);
    mpfr_inits2(c->prec, c->mc1, c->mc2, c->mbc1, c->mbc2, (mpfr_ptr)0);
    const long t = st->opt_t > 0 ? st->opt_t : 1;
    const double g53 = (double)(t - 1) * 0x1p-53 / (1 - (double)(t - 1) * 0x1p-53);
    mpfr_ptr mc[2] = {c->mc1, c->mc2}, mbc[2] = {c->mbc1, c->mbc2};
    const double b[2] = {c->b1, c->b2};
    double *dc[2] = {&c->dc1, &c->dc2}, *ec[2] = {&c->ec1, &c->ec2};
    double *dbc[2] = {&c->dbc1, &c->dbc2}, *ebc[2] = {&c->ebc1, &c->ebc2};
    for (int k = 0; k < 2; k++) {
        mpfr_set_d(mc[k], b[k], MPFR_RNDN);
        mpfr_ui_sub(mc[k], 1, mc[k], MPFR_RNDN);
        *dc[k] = mpfr_get_d(mc[k], MPFR_RNDN);
        *ec[k] = r * *dc[k];
        mpfr_set_d(mbc[k], b[k], MPFR_RNDN);
        mpfr_pow_si(mbc[k], mbc[k], t, MPFR_RNDN);
        const double p = mpfr_get_d(mbc[k], MPFR_RNDN) * (1 + 0x1p-52);
        mpfr_ui_sub(mbc[k], 1, mbc[k], MPFR_RNDN);
        *dbc[k] = mpfr_get_d(mbc[k], MPFR_RNDN);
        const double ep = g53 * p + (double)(t - 1) * 0x1p-1074;
        *ebc[k] = ep + r * (*dbc[k] + ep);
    }
}

// Rows in reading order: forward, loss, backward (top down), gradients,
// update; view v (0 LOCAL, 1 E2E). Returns the index of the first row.
static par_status add_rows(ctx *c, chk_report *r, int v, size_t *first)
{
    const par_model *m = c->m;
    const int L = m->n_layers;
    const chk_view view = v ? CHK_E2E : CHK_LOCAL;
    char name[40];
    int ok = 1;
    *first = r->n;
    for (int l = 0; l < L; l++) {
        const par_layer *ly = &m->layers[l];
        const int bn = ly->kind == PAR_LAYER_BATCHNORM;
        for (int k = 0; bn && k < CHK_BN_N; k++) {
            const int sum = k == CHK_BN_S || k == CHK_BN_Q;
            snprintf(name, sizeof name, "layer%d.bn.%s", l, chk_bn_stat_name(k));
            ok &= !!chk_report_add(r, view, name, 1, ly->c_out, 0,
                                   sum ? chk_bn_rounds(ly, c->B, c->st->C) : 0, !v);
        }
        snprintf(name, sizeof name, "layer%d.out", l);
        ok &= !!chk_report_add(r, view, name, 2, c->B, ly->n_out,
                               bn ? 0 : chk_forward_rounds(ly), !v);
    }
    ok &= !!chk_report_add(r, view, "loss.sample", 1, c->B, 0, 0, !v);
    ok &= !!chk_report_add(r, view, "loss", 1, 1, 0, c->B, !v);
    for (int l = L - 1; l >= 0; l--) {
        snprintf(name, sizeof name, "layer%d.dz", l);
        ok &= !!chk_report_add(r, view, name, 2, c->B, m->layers[l].n_out,
                               l == L - 1 ? 0 : chk_input_grad_rounds(&m->layers[l + 1]), !v);
    }
    for (int l = 0; l < L; l++) {
        const par_layer *ly = &m->layers[l];
        if (!ly->n_rows) continue;
        const int bn = ly->kind == PAR_LAYER_BATCHNORM;   // gamma, beta: (c) each
        const size_t n_red = bn ? chk_bn_rounds(ly, c->B, c->st->C) : chk_grad_rounds(ly, c->B);
        snprintf(name, sizeof name, "layer%d.weight.grad", l);
        ok &= !!chk_report_add(r, view, name, bn ? 1 : 2, ly->n_rows, ly->row_len, n_red, !v);
        snprintf(name, sizeof name, "layer%d.bias.grad", l);
        ok &= !!chk_report_add(r, view, name, 1, ly->n_rows, 0, n_red, !v);
    }
    static const char *const stats[3] = {"running_mean", "running_var", "num_batches_tracked"};
    for (int l = 0; l < L; l++) {
        const par_layer *ly = &m->layers[l];
        if (!ly->n_rows) continue;
        const int bn = ly->kind == PAR_LAYER_BATCHNORM;
        snprintf(name, sizeof name, "layer%d.weight.new", l);
        ok &= !!chk_report_add(r, view, name, bn ? 1 : 2, ly->n_rows, ly->row_len, 0, !v);
        snprintf(name, sizeof name, "layer%d.bias.new", l);
        ok &= !!chk_report_add(r, view, name, 1, ly->n_rows, 0, 0, !v);
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < c->n_state; i++) {
                snprintf(name, sizeof name, "layer%d.%s.%s.new", l, j ? "bias" : "weight",
                         par_optim_state_name(c->opt, i));
                ok &= !!chk_report_add(r, view, name, j || bn ? 1 : 2, ly->n_rows,
                                       j ? 0 : ly->row_len, 0, !v);
            }
        for (int k = 0; bn && k < 3; k++) {
            snprintf(name, sizeof name, "layer%d.%s.new", l, stats[k]);
            ok &= !!chk_report_add(r, view, name, 1, k < 2 ? ly->c_out : 1, 0, 0, !v);
        }
    }
    PAR_FAIL_IF(!ok, PAR_ERR_ALLOC, "out of memory for the report");
    return PAR_OK;
}

// Row pointers of view v, in add_rows' order (once the array stops growing).
static void set_rows(ctx *c, chk_report *r, int v, size_t first)
{
    const int L = c->m->n_layers;
    chk_tensor *t = r->t + first;
    for (int l = 0; l < L; l++) {
        for (int k = 0; c->m->layers[l].kind == PAR_LAYER_BATCHNORM && k < CHK_BN_N; k++)
            c->bst[v][l][k] = t++;
        c->out[v][l] = t++;
    }
    c->ls[v] = t++;
    c->loss[v] = t++;
    for (int l = L - 1; l >= 0; l--)
        c->dz[v][l] = t++;
    for (int l = 0; l < L; l++) {
        if (!c->m->layers[l].n_rows) continue;
        c->gw[v][l] = t++;
        c->gb[v][l] = t++;
    }
    for (int l = 0; l < L; l++) {
        if (!c->m->layers[l].n_rows) continue;
        c->nw[v][l] = t++;
        c->nb[v][l] = t++;
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < c->n_state; i++) c->ns[v][l][j][i] = t++;
        for (int k = 0; c->m->layers[l].kind == PAR_LAYER_BATCHNORM && k < 3; k++)
            c->brs[v][l][k] = t++;
    }
}

static mpfr_t *mp_array(size_t n, int prec)
{
    mpfr_t *a = malloc((n ? n : 1) * sizeof *a);
    if (a)
        for (size_t i = 0; i < n; i++)
            mpfr_init2(a[i], prec);
    return a;
}

static void mp_array_free(mpfr_t *a, size_t n)
{
    if (!a) return;
    for (size_t i = 0; i < n; i++)
        mpfr_clear(a[i]);
    free(a);
}

// Most terms of one element over all layers and tensors (per-thread buffers).
static size_t terms_cap(const par_model *m, size_t B)
{
    size_t cap = 1;
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *ly = &m->layers[l];
        const size_t a = chk_max_terms(ly);
        const size_t g = ly->n_rows ? B * (ly->n_out / ly->n_rows) : 0;
        if (a > cap) cap = a;
        if (g > cap) cap = g;
    }
    return cap;
}

par_status chk_check_step(chk_report *r, const chk_step *st, const chk_opts *o)
{
    const par_model *m = st->m;
    PAR_FAIL_IF(o->prec < 64 || o->prec > 1 << 20, PAR_ERR_CONFIG,
                "--prec %d: expected 64 to 1048576 bits", o->prec);
    PAR_FAIL_IF(st->B == 0 || !st->g || !st->w_new || !st->loss_s, PAR_ERR_CONFIG,
                "check: the step has no batch or no results");
    for (int l = 0; l < m->n_layers; l++) {
        PAR_FAIL_IF(!st->a[l + 1] || !st->d[l], PAR_ERR_CONFIG,
                    "check: layer %d's activations or deltas are missing", l);
        const int bn = m->layers[l].kind == PAR_LAYER_BATCHNORM;
        PAR_FAIL_IF(bn && !st->bn[l], PAR_ERR_CONFIG,
                    "check: batchnorm layer %d's statistics are missing", l);
        PAR_FAIL_IF(bn && (l == 0 || m->layers[l - 1].act != PAR_ACT_NONE), PAR_ERR_CONFIG,
                    "check: --model %s: batchnorm layer %d must follow a layer without activation",
                    m->spec, l);
    }
    for (size_t s = 0; s < st->B; s++)
        PAR_FAIL_IF(st->labels[s] < 0 || (size_t)st->labels[s] >= m->n_classes, PAR_ERR_CONFIG,
                    "check: label %d of sample %zu is not a class of %s", (int)st->labels[s], s,
                    m->spec);
    ctx c;
    memset(&c, 0, sizeof c);
    c.st = st;
    c.m = m;
    c.dt = st->dt;
    c.f = chk_fmt_of(st->dt);
    c.prec = o->prec;
    c.e2e = o->end_to_end;
    c.B = st->B;
    c.K = m->n_classes;
    c.opt = st->optim.kind;
    c.n_state = par_optim_n_state(c.opt);
    for (int i = 0; i < c.n_state; i++)
        PAR_FAIL_IF(!st->s[i] || !st->s_new[i], PAR_ERR_CONFIG,
                    "check: --optim %s: the optimizer state is missing", par_optim_name(c.opt));
    const int L = m->n_layers;
    size_t first[2] = {0, 0};
    PAR_TRY(add_rows(&c, r, 0, &first[0]));
    if (c.e2e) PAR_TRY(add_rows(&c, r, 1, &first[1]));
    for (int v = 0; v <= c.e2e; v++)
        set_rows(&c, r, v, first[v]);
    opt_consts(&c);
    int ok = 1;
    if (c.e2e) {
        for (int l = 0; l < L && ok; l++) {
            c.ea[l + 1] = mp_array(c.B * m->layers[l].n_out, c.prec);
            c.ed[l] = mp_array(c.B * m->layers[l].n_out, c.prec);
            ok = c.ea[l + 1] && c.ed[l];
            if (ok && m->layers[l].kind == PAR_LAYER_BATCHNORM) {
                c.ebn[l] = mp_array(7 * m->layers[l].c_out, c.prec);
                ok = c.ebn[l] != NULL;
            }
        }
        c.eloss = mp_array(c.B, c.prec);
        ok = ok && c.eloss;
    }
    const int T = o->threads > 0 ? o->threads : omp_get_max_threads();
    const double t0 = omp_get_wtime();
    if (ok) {
#pragma omp parallel num_threads(T)
        {
            ws w;
            ws_init(&w, c.prec, c.K);
            ws_terms(&w, c.prec, terms_cap(m, c.B), c.e2e);
            for (int l = 0; l < L; l++) {
                if (m->layers[l].kind == PAR_LAYER_BATCHNORM)
                    chk_bn_forward(&c, &w, l);
                else
                    stage_forward(&c, &w, l);
            }
            stage_softmax(&c, &w);
#pragma omp single
            stage_loss(&c, &w);
            for (int l = L - 1; l >= 1; l--) {
                if (m->layers[l].kind == PAR_LAYER_BATCHNORM)
                    chk_bn_backward(&c, &w, l);
                else
                    stage_backward(&c, &w, l);
            }
            for (int l = 0; l < L; l++) {
                if (m->layers[l].kind == PAR_LAYER_BATCHNORM)
                    chk_bn_update(&c, &w, l);
                else
                    stage_grads(&c, &w, l);
            }
            ws_clear(&w);
            mpfr_free_cache();
        }
    }
    r->seconds += omp_get_wtime() - t0;
    r->threads = T;
    r->prec = c.prec;
    for (int l = 0; l < L; l++) {
        mp_array_free(c.ea[l + 1], c.B * m->layers[l].n_out);
        mp_array_free(c.ed[l], c.B * m->layers[l].n_out);
        mp_array_free(c.ebn[l], 7 * m->layers[l].c_out);
    }
    mp_array_free(c.eloss, c.B);
    mpfr_clears(c.mc1, c.mc2, c.mbc1, c.mbc2, (mpfr_ptr)0);
    PAR_FAIL_IF(!ok, PAR_ERR_ALLOC, "out of memory for the END-TO-END values");
    chk_report_finish(r);
    return PAR_OK;
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
    ws_init(&w, prec, 1);
    e->run = run;
    e->S = chk_dot_run(&w, dt, va, 1, vb, 1, n, init);
    e->bound = chk_bound_dot(&f, dt, n_red, n, e->S, prec) * SLACK;
    compare(&w, w.acc, run, &f, &e->exact, &e->err, &e->ulp);
    ws_clear(&w);
    free(va);
    free(vb);
    return PAR_OK;
}
