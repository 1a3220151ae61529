// Exact values (MPFR) of single elements of a training step, for the verdict
// of `parity bisect` on its first differing element; see bis_exact.h. Sums of
// exact products at `prec` bits: the inputs are values of the dtype, so each
// product of two doubles is exact at >= 106 bits. Tests: tests/verify/test_bisect.c.
#include "bis_exact.h"

#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdlib.h>

#include "chk_terms.h"

static const void *view(const bis_step_view *v, const void *base, int view_idx)
{
    return (const char *)base + v->m->views[view_idx].offset * par_dtype_size(v->dt);
}

// acc = acc + sum over samples [s0, s1) of p[s][i] * q[s][j] (q NULL: of p[s][i]).
static void sum_samples(mpfr_ptr acc, mpfr_ptr t, par_dtype dt, const void *p, size_t ldp, size_t i,
                        const void *q, size_t ldq, size_t j, size_t s0, size_t s1)
{
    for (size_t s = s0; s < s1; s++) {
        mpfr_set_d(t, par_get_real(dt, p, s * ldp + i), MPFR_RNDN);
        if (q) mpfr_mul_d(t, t, par_get_real(dt, q, s * ldq + j), MPFR_RNDN);
        mpfr_add(acc, acc, t, MPFR_RNDN);
    }
}

// Softmax + cross-entropy of sample s from the logits: *loss or dz_j.
static void softmax_exact(mpfr_ptr out, mpfr_ptr t, mpfr_ptr sum, const bis_step_view *v, size_t s,
                          long j)
{
    const size_t K = v->m->n_classes;
    const void *z = v->a[v->m->n_layers];
    double mx = par_get_real(v->dt, z, s * K);
    for (size_t k = 1; k < K; k++)
        mx = fmax(mx, par_get_real(v->dt, z, s * K + k));
    mpfr_set_zero(sum, 1);
    for (size_t k = 0; k < K; k++) {
        mpfr_set_d(t, par_get_real(v->dt, z, s * K + k), MPFR_RNDN);
        mpfr_sub_d(t, t, mx, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add(sum, sum, t, MPFR_RNDN);
    }
    const size_t lab = (size_t)v->labels[s];
    if (j < 0) { // loss = log(sum) - (z_label - max)
        mpfr_log(out, sum, MPFR_RNDN);
        mpfr_set_d(t, par_get_real(v->dt, z, s * K + lab), MPFR_RNDN);
        mpfr_sub_d(t, t, mx, MPFR_RNDN);
        mpfr_sub(out, out, t, MPFR_RNDN);
        return;
    }
    // dz_j = (e_j / sum - [j == label]) / B
    mpfr_set_d(t, par_get_real(v->dt, z, s * K + (size_t)j), MPFR_RNDN);
    mpfr_sub_d(t, t, mx, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    mpfr_div(out, t, sum, MPFR_RNDN);
    if ((size_t)j == lab) mpfr_sub_ui(out, out, 1, MPFR_RNDN);
    mpfr_div_ui(out, out, (unsigned long)v->B, MPFR_RNDN);
}

static void activation(mpfr_ptr x, mpfr_ptr t, par_act act)
{
    switch (act) {
    case PAR_ACT_RELU:
        if (mpfr_sgn(x) <= 0) mpfr_set_zero(x, 1);
        break;
    case PAR_ACT_SIGMOID: // 1 / (1 + e^-x)
        mpfr_neg(t, x, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_ui_div(x, 1, t, MPFR_RNDN);
        break;
    case PAR_ACT_TANH:
        mpfr_tanh(x, x, MPFR_RNDN);
        break;
    case PAR_ACT_NONE:
        break;
    }
}

// x = x * act'(z) written through y = act(z), as par_act_backward does:
// relu y > 0, sigmoid y (1 - y), tanh 1 - y^2.
static void activation_deriv(mpfr_ptr x, mpfr_ptr t, double y, par_act act)
{
    switch (act) {
    case PAR_ACT_RELU:
        if (!(y > 0)) mpfr_set_zero(x, 1);
        break;
    case PAR_ACT_SIGMOID:
        mpfr_set_d(t, y, MPFR_RNDN);
        mpfr_ui_sub(t, 1, t, MPFR_RNDN);
        mpfr_mul_d(t, t, y, MPFR_RNDN);
        mpfr_mul(x, x, t, MPFR_RNDN);
        break;
    case PAR_ACT_TANH:
        mpfr_set_d(t, y, MPFR_RNDN);
        mpfr_sqr(t, t, MPFR_RNDN);
        mpfr_ui_sub(t, 1, t, MPFR_RNDN);
        mpfr_mul(x, x, t, MPFR_RNDN);
        break;
    case PAR_ACT_NONE:
        break;
    }
}

// x += sum_k p[pi[k]] q[qi[k]] (q NULL: p alone) over n terms.
static void add_terms(mpfr_ptr x, mpfr_ptr t, par_dtype dt, const void *p, size_t pb,
                      const size_t *pi, const void *q, size_t qb, const size_t *qi, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        mpfr_set_d(t, par_get_real(dt, p, pb + pi[k]), MPFR_RNDN);
        if (q) mpfr_mul_d(t, t, par_get_real(dt, q, qb + qi[k]), MPFR_RNDN);
        mpfr_add(x, x, t, MPFR_RNDN);
    }
}

// x = the input gradient element i of sample s through layer `up`, before
// the activation derivative: its terms dz W (chk_terms.h), or the routed dz
// of a max-pool. ia, ib: room for chk_max_terms(up) indices each.
static void input_grad(mpfr_ptr x, mpfr_ptr t, const bis_step_view *v, int up_l, size_t s,
                       size_t i, size_t *ia, size_t *ib)
{
    const par_layer *up = &v->m->layers[up_l];
    const par_dtype dt = v->dt;
    mpfr_set_zero(x, 1);
    if (up->kind == PAR_LAYER_MAXPOOL) {
        const size_t win = chk_pool_window(up, i);
        if (win == SIZE_MAX) return;
        if (chk_pool_arg(up, win, (const char *)v->a[up_l] + s * up->n_in * par_dtype_size(dt),
                         dt) == i)
            mpfr_set_d(x, par_get_real(dt, v->d[up_l], s * up->n_out + win), MPFR_RNDN);
        return;
    }
    const size_t n = chk_input_grad_terms(up, i, ia, ib);
    add_terms(x, t, dt, v->d[up_l], s * up->n_out, ia, view(v, v->w, up->w_view), 0, ib, n);
}

static void exact_value(mpfr_ptr x, mpfr_ptr t, mpfr_ptr u, const bis_step_view *v, bis_kind kind,
                        int l, size_t chunk, size_t index)
{
    const par_model *m = v->m;
    const par_dtype dt = v->dt;
    const par_layer *ly = &m->layers[l >= 0 ? l : 0];
    const size_t n_in = ly->n_in, n_out = ly->n_out;
    mpfr_set_zero(x, 1);
    if (ly->kind == PAR_LAYER_BATCHNORM && kind != BIS_LOSS && kind != BIS_LOSS_SAMPLE) {
        mpfr_set_nan(x);   // not covered yet: no verdict
        return;
    }
    size_t cap = chk_max_terms(ly);
    if (l + 1 < m->n_layers && chk_max_terms(&m->layers[l + 1]) > cap)
        cap = chk_max_terms(&m->layers[l + 1]);
    size_t *ia = malloc(2 * cap * sizeof *ia), *ib = ia ? ia + cap : NULL;
    if (!ia) {
        mpfr_set_nan(x);
        return;
    }
    switch (kind) {
    case BIS_OUT: { // act(b + sum of the terms x W); max-pool: the first maximum
        const size_t s = index / n_out, j = index % n_out;
        if (ly->kind == PAR_LAYER_MAXPOOL) {
            const size_t arg = chk_pool_arg(
                ly, j, (const char *)v->a[l] + s * n_in * par_dtype_size(dt), dt);
            mpfr_set_d(x, par_get_real(dt, v->a[l], s * n_in + arg), MPFR_RNDN);
            break;
        }
        size_t o;
        const size_t n = chk_forward_terms(ly, j, ia, ib, &o);
        mpfr_set_d(x, par_get_real(dt, view(v, v->w, ly->b_view), o), MPFR_RNDN);
        add_terms(x, t, dt, v->a[l], s * n_in, ia, view(v, v->w, ly->w_view), 0, ib, n);
        activation(x, t, ly->act);
        break;
    }
    case BIS_LOSS_SAMPLE:
        softmax_exact(x, t, u, v, index, -1);
        break;
    case BIS_DZ: {
        const size_t s = index / n_out, i = index % n_out;
        if (l == m->n_layers - 1) {
            softmax_exact(x, t, u, v, s, (long)i);
            break;
        }
        // (input gradient through layer l + 1) act'(y[s][i]), y = layer l's output
        input_grad(x, t, v, l + 1, s, i, ia, ib);
        activation_deriv(x, t, par_get_real(dt, v->a[l + 1], s * n_out + i), ly->act);
        break;
    }
    case BIS_WGRAD_CHUNK:
    case BIS_BGRAD_CHUNK:
    case BIS_WGRAD:
    case BIS_BGRAD: {
        const int chunked = kind == BIS_WGRAD_CHUNK || kind == BIS_BGRAD_CHUNK;
        const int bias = kind == BIS_BGRAD_CHUNK || kind == BIS_BGRAD;
        const size_t s0 = chunked ? chunk * v->C : 0;
        const size_t s1 = chunked && s0 + v->C < v->B ? s0 + v->C : v->B;
        const size_t o = bias ? index : index / ly->row_len;
        const size_t tap = bias ? ly->row_len : index % ly->row_len;
        for (size_t s = s0; s < s1; s++) {
            const size_t n = chk_grad_terms(ly, o, tap, ia, ib);
            add_terms(x, t, dt, v->d[l], s * n_out, ia, bias ? NULL : v->a[l], s * n_in, ib, n);
        }
        break;
    }
    case BIS_LOSS:
        sum_samples(x, t, dt, v->loss_s, 1, 0, NULL, 0, 0, 0, v->B);
        mpfr_div_ui(x, x, (unsigned long)v->B, MPFR_RNDN);
        break;
    case BIS_WNEW:
    case BIS_BNEW: { // w - lr g
        const int vi = kind == BIS_WNEW ? ly->w_view : ly->b_view;
        const size_t p = m->views[vi].offset + index;
        mpfr_set_d(t, par_get_real(dt, v->g, p), MPFR_RNDN);
        mpfr_mul_d(t, t, v->lr, MPFR_RNDN);
        mpfr_set_d(x, par_get_real(dt, v->w, p), MPFR_RNDN);
        mpfr_sub(x, x, t, MPFR_RNDN);
        break;
    }
    }
    free(ia);
}

void bis_exact_verdict(const bis_step_view *v, bis_kind kind, int layer, size_t chunk, size_t index,
                       double a, double b, int prec, double *exact, bis_closer *closer)
{
    mpfr_t x, t, u, ea, eb;
    mpfr_inits2(prec < 64 ? 64 : prec, x, t, u, ea, eb, (mpfr_ptr)0);
    exact_value(x, t, u, v, kind, layer, chunk, index);
    *exact = mpfr_get_d(x, MPFR_RNDN);
    if (!mpfr_number_p(x))
        *closer = BIS_CLOSER_NONE;
    else if (!isfinite(a) || !isfinite(b))
        *closer = isfinite(a) ? BIS_CLOSER_A : isfinite(b) ? BIS_CLOSER_B : BIS_CLOSER_NONE;
    else {
        mpfr_sub_d(ea, x, a, MPFR_RNDN);
        mpfr_sub_d(eb, x, b, MPFR_RNDN);
        const int c = mpfr_cmpabs(ea, eb);
        *closer = c < 0 ? BIS_CLOSER_A : c > 0 ? BIS_CLOSER_B : BIS_CLOSER_TIE;
    }
    mpfr_clears(x, t, u, ea, eb, (mpfr_ptr)0);
}
