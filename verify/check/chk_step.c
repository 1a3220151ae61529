// The MPFR recomputation of one training step and its comparison with a run:
// LOCAL (every op from the run's own rounded inputs, checked against a priori
// bounds) and END-TO-END (exact propagation from the step's inputs, no
// verdict). OpenMP over output elements, MPFR temporaries per thread. The
// error model and the dense, conv, max-pool, softmax and loss stages are
// here; batchnorm in chk_bn.c, the update in chk_update.c, the MPFR building
// blocks in chk_mpfr.c. Not a trainer: it never produces weights. Tests:
// tests/verify/test_check.c, tests/verify/test_check_cnn.c.
#include <math.h>
#include <mpfr.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_bn.h"
#include "chk_check.h"
#include "chk_mpfr.h"
#include "chk_terms.h"
#include "chk_update.h"

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
// ulp on dense samples; tests/unit/test_math.c asserts < 1). 1 ulp(y) <= 2u |y| +
// tiny, so we use |F(x) - f(x)| <= 2u |f(x)| + 2 tiny.
//
// MPFR's own rounding (prec bits) is added to every bound: a sum of n terms
// at prec bits is within (n + 2) 2^(1-prec) S of the true sum; an elementwise
// chain of a few MPFR ops within 2^(8-prec) of its scale. Bounds are computed
// in double and multiplied by SLACK, which covers their own ~20 roundings.

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
                chk_dot_md(w, w->ma, 1, dt, w->vb, 1, n, par_get_real(dt, bias, o));
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
        chk_dot_md(w, c->eloss, 1, c->dt, NULL, 0, c->B, 0);
        mpfr_div_ui(w->y, w->acc, (unsigned long)c->B, MPFR_RNDN);
        chk_record(c->loss[1], w, 0, w->y, st->loss, &c->f, c->eb ? c->eb->loss : NAN);
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
        chk_act_deriv_mp(w->q, w->e, act);
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
                chk_dot_md(w, w->ma, 1, dt, w->vb, 1, n, 0);
            }
            chk_act_deriv_mp(w->q, c->ea[l][k], act);
            mpfr_mul(c->ed[l - 1][k], w->acc, w->q, MPFR_RNDN);
            chk_record(&p1, w, k, c->ed[l - 1][k], run, &c->f, NAN);
        }
    }
    chk_merge2(c->dz[0][l - 1], &p0, c->e2e ? c->dz[1][l - 1] : NULL, &p1);
}

// Weight and bias gradients of layer l (reduction over the B samples, from
// the run's d[l] and a[l]: LOCAL), and the update of each element from the
// run's gradient g (chk_update.c).
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
                chk_dot_md(w, w->ma, 1, dt, NULL, 0, n, 0);
            else if (l == 0)
                chk_dot_md(w, w->ma, 1, dt, w->vb, 1, n, 0);
            else {
                gather_mp(w->mb, c->ea[l], 0, w->ib, n);
                chk_dot_mm(w, w->ma, 1, w->mb, 1, n);
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
    const int nb = !v || c->eb;   // rows of the new values (and the loss) with a bound
    ok &= !!chk_report_add(r, view, "loss", 1, 1, 0, c->B, nb);
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
        ok &= !!chk_report_add(r, view, name, bn ? 1 : 2, ly->n_rows, ly->row_len, 0, nb);
        snprintf(name, sizeof name, "layer%d.bias.new", l);
        ok &= !!chk_report_add(r, view, name, 1, ly->n_rows, 0, 0, nb);
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < c->n_state; i++) {
                snprintf(name, sizeof name, "layer%d.%s.%s.new", l, j ? "bias" : "weight",
                         par_optim_state_name(c->opt, i));
                ok &= !!chk_report_add(r, view, name, j || bn ? 1 : 2, ly->n_rows,
                                       j ? 0 : ly->row_len, 0, nb);
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
    return chk_check_step_bounded(r, st, o, NULL);
}

par_status chk_check_step_bounded(chk_report *r, const chk_step *st, const chk_opts *o,
                                  const chk_e2e_bounds *b)
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
    c.eb = o->end_to_end ? b : NULL;
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
    chk_update_consts(&c);
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
            chk_ws_init(&w, c.prec, c.K);
            chk_ws_terms(&w, c.prec, terms_cap(m, c.B), c.e2e);
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
            chk_ws_clear(&w);
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
    chk_update_consts_clear(&c);
    PAR_FAIL_IF(!ok, PAR_ERR_ALLOC, "out of memory for the END-TO-END values");
    chk_report_finish(r);
    return PAR_OK;
}
