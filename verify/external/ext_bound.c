// The any-order bound of one training step (ext_bound.h; the derivation is
// docs/external.md, "The bound"). A double-precision pass computes a centre
// for every tensor of the step and, beside it, E: a bound on how far any
// conforming evaluation in the run's dtype (any summation order, foreign
// elementwise functions within their ulps), the exact value included, can
// lie from that centre. Centres and bounds go forward through the layers,
// then backward to the gradient. Plain loops, one layer kind at a time; no
// threads (the foreign trainer's step is the slower side).
#include "ext_bound.h"
#include "ext_bn.h"
#include "ext_sums.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- the error model ---------------------------------------------------------------
//
// Every rounding: fl(x) = x (1 + d) + e, |d| <= u, |e| <= tiny. A sum of n
// products in any order: |fl - exact| <= gamma_n S + n tiny, S = sum |term|
// (Higham 3.1, 3.3). The centre is such a sum in double (u_d = 2^-53), so
// |centre - exact| has the same form: both add, gam(n) = gamma_n(u) +
// gamma_n(u_d). Each bound below is a sum of nonnegative doubles, each
// rounded: every result is multiplied by SLACK for its own evaluation.

#define SLACK (1 + 0x1p-30)

struct ext_bound {
    const par_model *m;
    par_dtype dt;
    size_t Bmax;
    double u, tiny;
    double *w;                                 // the weights in double
    double *a[PAR_MAX_LAYERS + 1], *Ea[PAR_MAX_LAYERS + 1];   // layer inputs/outputs
    double *z[PAR_MAX_LAYERS], *Ez[PAR_MAX_LAYERS];          // pre-activation
    double *dz, *Edz, *dx, *Edx, *t1, *t2;     // backward, (Bmax, max_width) each
    double *gs;        // a layer's gradient sums: 4 (n_rows row_len + n_rows), the widest
    size_t gs_n;
    ext_bn bn[PAR_MAX_LAYERS];                 // batchnorm layers' statistics
};

static double gamma_n(double n, double u) { return n * u / (1 - n * u); }
static double gam(const ext_bound *b, double n) { return gamma_n(n, b->u) + gamma_n(n, 0x1p-53); }

ext_ulps ext_ulps_default(void) { return (ext_ulps){1, 1, 1, 1}; }

par_status ext_ulps_parse(ext_ulps *u, const char *spec)
{
    static const char *const names[] = {"exp", "log", "tanh", "sigmoid"};
    double *const dst[] = {&u->exp, &u->log, &u->tanh, &u->sigmoid};
    const char *eq = strchr(spec, '=');
    for (int k = 0; eq && k < 4; k++) {
        if ((size_t)(eq - spec) != strlen(names[k]) || strncmp(spec, names[k], strlen(names[k])))
            continue;
        char *end;
        errno = 0;
        const double v = strtod(eq + 1, &end);
        PAR_FAIL_IF(end == eq + 1 || *end || errno || !(v >= 0 && v <= 1e6), PAR_ERR_CONFIG,
                    "--ulps %s: expected FUNC=U with U a number of ulps from 0 to 1e6", spec);
        *dst[k] = v;
        return PAR_OK;
    }
    return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                         "--ulps %s: expected FUNC=U, FUNC one of exp, log, tanh, sigmoid", spec);
}

void ext_bound_destroy(ext_bound *b)
{
    if (!b) return;
    free(b->w);
    for (int l = 0; l <= PAR_MAX_LAYERS; l++) {
        free(b->a[l]);
        free(b->Ea[l]);
        if (l < PAR_MAX_LAYERS) {
            free(b->z[l]);
            free(b->Ez[l]);
        }
    }
    free(b->dz);
    free(b->Edz);
    free(b->dx);
    free(b->Edx);
    free(b->t1);
    free(b->t2);
    free(b->gs);
    for (int l = 0; l < PAR_MAX_LAYERS; l++) ext_bn_free(&b->bn[l]);
    free(b);
}

par_status ext_bound_create(ext_bound **out, const par_model *m, par_dtype dt, size_t Bmax)
{
    *out = NULL;
    ext_bound *b = calloc(1, sizeof *b);
    PAR_FAIL_IF(!b, PAR_ERR_ALLOC, "out of memory");
    b->m = m;
    b->dt = dt;
    b->Bmax = Bmax;
    b->u = dt == PAR_F32 ? 0x1p-24 : 0x1p-53;
    b->tiny = (dt == PAR_F32 ? 0x1p-149 : 0x1p-1074) + 0x1p-1074;
    const size_t wide = Bmax * m->max_width;
    int ok = (b->w = malloc(m->n_params * sizeof *b->w)) != NULL;
    for (int l = 0; ok && l <= m->n_layers; l++) {
        const size_t n = Bmax * (l == 0 ? m->n_inputs : m->layers[l - 1].n_out);
        ok = (b->a[l] = malloc(n * sizeof(double))) && (b->Ea[l] = malloc(n * sizeof(double)));
        if (ok && l < m->n_layers) {
            const size_t k = Bmax * m->layers[l].n_out;
            ok = (b->z[l] = malloc(k * sizeof(double))) && (b->Ez[l] = malloc(k * sizeof(double)));
        }
    }
    ok = ok && (b->dz = malloc(wide * sizeof(double))) && (b->Edz = malloc(wide * sizeof(double)));
    ok = ok && (b->dx = malloc(wide * sizeof(double))) && (b->Edx = malloc(wide * sizeof(double)));
    ok = ok && (b->t1 = malloc(wide * sizeof(double))) && (b->t2 = malloc(wide * sizeof(double)));
    for (int l = 0; l < m->n_layers; l++) {
        const size_t k = 4 * (m->layers[l].n_rows * m->layers[l].row_len + m->layers[l].n_rows);
        b->gs_n = k > b->gs_n ? k : b->gs_n;
    }
    ok = ok && (b->gs = malloc(b->gs_n * sizeof(double)));
    for (int l = 0; ok && l < m->n_layers; l++) {
        const par_layer *ly = &m->layers[l];
        if (ly->kind != PAR_LAYER_BATCHNORM) continue;
        ok = ext_bn_alloc(&b->bn[l], ly, Bmax) == PAR_OK;
        b->bn[l].u = b->u;
        b->bn[l].tiny = b->tiny;
        b->bn[l].gamma = b->w + m->views[ly->w_view].offset;
        b->bn[l].beta = b->w + m->views[ly->b_view].offset;
    }
    if (!ok) {
        ext_bound_destroy(b);
        return par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    *out = b;
    return PAR_OK;
}

// ---- forward -------------------------------------------------------------------------

// Layer l's pre-activation z and its bound from its input a[l], Ea[l]:
//   Ez = gam(n) (|b| + sum |W| (|a| + Ea)) + sum |W| Ea + n tiny,
// n = c_in K K + 1 terms (padding taps counted: an upper bound).
static par_status forward_sum(ext_bound *b, int l, size_t B)
{
    const par_layer *ly = &b->m->layers[l];
    const double *W = b->w + b->m->views[ly->w_view].offset;
    const double *bias = b->w + b->m->views[ly->b_view].offset;
    const size_t n_in = B * ly->n_in, n_out = B * ly->n_out;
    const double n = (double)(ly->c_in * ly->K * ly->K + 1), g = gam(b, n);
    PAR_TRY(ext_conv_fwd(ly, b->z[l], b->a[l], W, bias, B, 0));
    for (size_t i = 0; i < n_in; i++) b->t1[i] = fabs(b->a[l][i]) + b->Ea[l][i];
    PAR_TRY(ext_conv_fwd(ly, b->Ez[l], b->t1, W, bias, B, 1));    // |b| + sum |W| (|a| + Ea)
    PAR_TRY(ext_conv_fwd(ly, b->t2, b->Ea[l], W, NULL, B, 1));    // sum |W| Ea
    for (size_t j = 0; j < n_out; j++)
        b->Ez[l][j] = (g * b->Ez[l][j] + b->t2[j] + n * b->tiny) * SLACK;
    return PAR_OK;
}

double ext_act_bound(par_act act, double z, double Ez, double u, double tiny,
                     const ext_ulps *ulps, double *Ea)
{
    const double ud = 0x1p-53;
    if (act == PAR_ACT_RELU) {
        *Ea = Ez;
        return z > 0 ? z : 0;
    }
    if (act == PAR_ACT_SIGMOID) {
        const double a = 1 / (1 + exp(-z)), d = Ez / 4;
        *Ea = (d + ulps->sigmoid * 2 * u * (a + d) + 8 * ud * a + tiny) * SLACK;
        return a;
    }
    if (act == PAR_ACT_TANH) {
        const double a = tanh(z);
        *Ea = (Ez + ulps->tanh * 2 * u * (fabs(a) + Ez) + 8 * ud * fabs(a) + tiny) * SLACK;
        return a;
    }
    *Ea = Ez;
    return z;
}

// Layer l's activation, element by element (ext_act_bound).
static void activate(ext_bound *b, int l, size_t B, const ext_ulps *ulps)
{
    const par_layer *ly = &b->m->layers[l];
    for (size_t j = 0; j < B * ly->n_out; j++)
        b->a[l + 1][j] = ext_act_bound(ly->act, b->z[l][j], b->Ez[l][j], b->u, b->tiny, ulps,
                                       &b->Ea[l + 1][j]);
}

// Max-pool: |max(x') - max(x)| <= the window's largest |x' - x|.
static void pool_forward(ext_bound *b, int l, size_t B)
{
    const par_layer *ly = &b->m->layers[l];
    const size_t K = ly->K;
    for (size_t s = 0; s < B; s++)
        for (size_t c = 0; c < ly->c_out; c++)
            for (size_t oh = 0; oh < ly->h_out; oh++)
                for (size_t ow = 0; ow < ly->w_out; ow++) {
                    const size_t base = s * ly->n_in + (c * ly->h_in + oh * K) * ly->w_in + ow * K;
                    double mx = -INFINITY, E = 0;
                    for (size_t kh = 0; kh < K; kh++)
                        for (size_t kw = 0; kw < K; kw++) {
                            const size_t i = base + kh * ly->w_in + kw;
                            mx = fmax(mx, b->a[l][i]);
                            E = fmax(E, b->Ea[l][i]);
                        }
                    const size_t o = s * ly->n_out + (c * ly->h_out + oh) * ly->w_out + ow;
                    b->a[l + 1][o] = b->z[l][o] = mx;
                    b->Ea[l + 1][o] = b->Ez[l][o] = E;
                }
}

// ---- softmax and cross-entropy ---------------------------------------------------------
//
// Logits z with |z' - z| <= eps (the sample's largest Ez): the exact softmax
// moves by a factor within [e^-2eps, e^2eps]. A foreign softmax from its own
// logits (max subtracted, exps, a sum of K terms, a log, an exp of the
// log-softmax, a few roundings) is within a relative rho of its exact
// value, rho = e^Delta (1 + 2 U_exp u) - 1, Delta = u (2 T + L (1 + 2 U_log))
// + gamma_K (1 + 2 U_exp u) + 2 U_exp u, T = |z_k - max| + 2 eps, L = log Z +
// 2 eps. dz = (p - y) / B with three roundings (subtraction, 1 / B, product).
// The sample's loss -log p_y is within 2 eps + Delta_y of the centre's.
static void softmax_xent(ext_bound *b, int l, size_t B, const int32_t *labels,
                         const ext_ulps *ulps, double *El, double *loss_c)
{
    const size_t K = b->m->layers[l].n_out;
    const double u = b->u, ud = 0x1p-53, gK = gamma_n((double)K, u);
    double sum_l = 0, sum_abs = 0, sum_E = 0;
    for (size_t s = 0; s < B; s++) {
        const double *z = b->a[l + 1] + s * K, *Ez = b->Ea[l + 1] + s * K;
        double mx = -INFINITY, eps = 0, Z = 0;
        for (size_t k = 0; k < K; k++) {
            mx = fmax(mx, z[k]);
            eps = fmax(eps, Ez[k]);
        }
        for (size_t k = 0; k < K; k++) Z += exp(z[k] - mx);
        const double L = log(Z) + 2 * eps, ls_y = z[labels[s]] - mx - log(Z);
        for (size_t k = 0; k < K; k++) {
            const double p = exp(z[k] - mx) / Z, y = (size_t)labels[s] == k;
            const double T = fabs(z[k] - mx) + 2 * eps;
            const double D = u * (2 * T + L * (1 + 2 * ulps->log)) + gK * (1 + 2 * ulps->exp * u) +
                             2 * ulps->exp * u;
            const double rho = exp(D) * (1 + 2 * ulps->exp * u) - 1;
            const double cd = ((double)K + 8 + 2 * fabs(z[k] - mx)) * ud;   // the centre's own
            const double Ep = p * ((1 + cd) * exp(2 * eps) * (1 + rho) - 1);
            const double mag = fabs(p - y) + Ep;
            b->dz[s * K + k] = (p - y) / (double)B;
            b->Edz[s * K + k] = ((Ep + 3 * u * mag) / (double)B + 4 * ud * mag / (double)B) * SLACK;
            if (y) {
                const double Dl = 2 * eps + D + 8 * ud * (L + fabs(z[k] - mx));
                sum_E += Dl;
                sum_abs += fabs(ls_y) + Dl;
            }
        }
        sum_l += -ls_y;
    }
    // The mean: a sum of B terms in any order, then / B.
    *loss_c = sum_l / (double)B;
    *El = ((gam(b, (double)B) + 2 * u) * sum_abs + sum_E) / (double)B * SLACK;
}

// ---- backward --------------------------------------------------------------------------

// Layer l's weight and bias gradient bounds from dz (b->dz, b->Edz) and its
// input a[l]: n = B P terms, Eg = gam(n) sum (|dz| + Edz)(|a| + Ea) +
// sum (Edz (|a| + Ea) + |dz| Ea) + 3u |g| (where the 1/B sits) + n tiny.
static par_status grad_bound(ext_bound *b, int l, size_t B, ext_step_bound *o)
{
    double *Eg = o->Eg, *G = o->G;
    const par_layer *ly = &b->m->layers[l];
    const par_model *m = b->m;
    const size_t ow = m->views[ly->w_view].offset, ob = m->views[ly->b_view].offset;
    const size_t nw = ly->n_rows * ly->row_len, nb = ly->n_rows;
    const size_t n_in = B * ly->n_in, n_out = B * ly->n_out;
    const double n = (double)(B * ly->h_out * ly->w_out), g = gam(b, n), u = b->u;
    double *gc = b->gs;
    memset(gc, 0, (nw + nb) * 4 * sizeof *gc);
    double *q1 = gc + (nw + nb), *q2 = q1 + (nw + nb), *q3 = q2 + (nw + nb);
    PAR_TRY(ext_conv_grad(ly, gc, gc + nw, b->dz, b->a[l], B));         // the centre
    for (size_t j = 0; j < n_out; j++) b->t1[j] = fabs(b->dz[j]) + b->Edz[j];
    for (size_t i = 0; i < n_in; i++) b->t2[i] = fabs(b->a[l][i]) + b->Ea[l][i];
    PAR_TRY(ext_conv_grad(ly, q1, q1 + nw, b->t1, b->t2, B));           // sum DZ A
    PAR_TRY(ext_conv_grad(ly, q2, q2 + nw, b->Edz, b->t2, B));          // sum Edz A
    for (size_t j = 0; j < n_out; j++) b->t1[j] = fabs(b->dz[j]);
    PAR_TRY(ext_conv_grad(ly, q3, q3 + nw, b->t1, b->Ea[l], B));        // sum |dz| Ea
    for (size_t i = 0; i < nw + nb; i++) {
        const size_t at = i < nw ? ow + i : ob + (i - nw);
        const double e = i < nw ? g * q1[i] + q2[i] + q3[i] : g * q1[i] + q2[i];
        o->gc[at] = gc[i];
        Eg[at] = (e + 3 * u * (fabs(gc[i]) + e) + n * b->tiny) * SLACK;
        G[at] = fabs(gc[i]) + Eg[at];
    }
    return PAR_OK;
}

// dL/d(layer l's input) from its dz: Edx = gam(n) sum |W| (|dz| + Edz) +
// sum |W| Edz + n tiny, n = c_out K K terms at most per input element.
static par_status input_grad(ext_bound *b, int l, size_t B)
{
    const par_layer *ly = &b->m->layers[l];
    const double *W = b->w + b->m->views[ly->w_view].offset;
    const size_t n_in = B * ly->n_in, n_out = B * ly->n_out;
    const double n = (double)(ly->c_out * ly->K * ly->K), g = gam(b, n);
    PAR_TRY(ext_conv_bwd(ly, b->dx, b->dz, W, B, 0));
    for (size_t j = 0; j < n_out; j++) b->t1[j] = fabs(b->dz[j]) + b->Edz[j];
    PAR_TRY(ext_conv_bwd(ly, b->t2, b->t1, W, B, 1));
    PAR_TRY(ext_conv_bwd(ly, b->Edx, b->Edz, W, B, 1));
    for (size_t i = 0; i < n_in; i++)
        b->Edx[i] = (g * b->t2[i] + b->Edx[i] + n * b->tiny) * SLACK;
    return PAR_OK;
}

// Max-pool backward: dz goes to the window's first maximum. Where another
// input lies within the two bounds of it, a trainer may route it there: each
// such input may get 0 or the whole dz, so its bound is |dz| + Edz.
static void pool_backward(ext_bound *b, int l, size_t B)
{
    const par_layer *ly = &b->m->layers[l];
    const size_t K = ly->K;
    const double *x = b->a[l], *Ex = b->Ea[l];
    memset(b->dx, 0, B * ly->n_in * sizeof *b->dx);
    memset(b->Edx, 0, B * ly->n_in * sizeof *b->Edx);
    for (size_t s = 0; s < B; s++)
        for (size_t c = 0; c < ly->c_out; c++)
            for (size_t oh = 0; oh < ly->h_out; oh++)
                for (size_t ow = 0; ow < ly->w_out; ow++) {
                    const size_t o = s * ly->n_out + (c * ly->h_out + oh) * ly->w_out + ow;
                    const size_t base = s * ly->n_in + (c * ly->h_in + oh * K) * ly->w_in + ow * K;
                    size_t arg = base;
                    for (size_t kh = 0; kh < K; kh++)
                        for (size_t kw = 0; kw < K; kw++)
                            if (x[base + kh * ly->w_in + kw] > x[arg]) arg = base + kh * ly->w_in + kw;
                    int ties = 0;
                    for (size_t kh = 0; kh < K; kh++)
                        for (size_t kw = 0; kw < K; kw++) {
                            const size_t i = base + kh * ly->w_in + kw;
                            ties += i != arg && x[i] >= x[arg] - (Ex[i] + Ex[arg]);
                        }
                    b->dx[arg] = b->dz[o];
                    for (size_t kh = 0; kh < K; kh++)
                        for (size_t kw = 0; kw < K; kw++) {
                            const size_t i = base + kh * ly->w_in + kw;
                            if (i == arg) b->Edx[i] = ties ? fabs(b->dz[o]) + b->Edz[o] : b->Edz[o];
                            else if (ties && x[i] >= x[arg] - (Ex[i] + Ex[arg]))
                                b->Edx[i] = fabs(b->dz[o]) + b->Edz[o];
                        }
                }
}

// dz of layer l from dx = dL/d(its output after the activation): relu's mask
// is exact where the sign of z is sure (|z| > Ez), elsewhere the trainer may
// pass 0 or dx; sigmoid y(1 - y) and tanh 1 - y^2 from its output y with
// bound Ey, three roundings on the product.
static void activation_backward(ext_bound *b, int l, size_t B)
{
    const par_layer *ly = &b->m->layers[l];
    const size_t n = B * ly->n_out;
    const double u = b->u;
    for (size_t j = 0; j < n; j++) {
        const double dx = b->dx[j], Edx = b->Edx[j];
        if (ly->act == PAR_ACT_RELU) {
            const double z = b->z[l][j], Ez = b->Ez[l][j];
            b->dz[j] = z > 0 ? dx : 0;
            b->Edz[j] = fabs(z) > Ez ? (z > 0 ? Edx : 0) : (fabs(dx) + Edx) * SLACK;
        } else if (ly->act == PAR_ACT_SIGMOID || ly->act == PAR_ACT_TANH) {
            const double y = b->a[l + 1][j], Ey = b->Ea[l + 1][j];
            const int sg = ly->act == PAR_ACT_SIGMOID;
            const double d = sg ? y * (1 - y) : 1 - y * y;
            const double Dd = sg ? Ey * (1 + Ey) : Ey * (2 * fabs(y) + Ey);
            const double mag = (fabs(d) + Dd) * (fabs(dx) + Edx);
            b->dz[j] = dx * d;
            b->Edz[j] = (Edx * (fabs(d) + Dd) + fabs(dx) * Dd + 3 * u * mag + 4 * 0x1p-53 * mag) *
                        SLACK;
        } else {
            b->dz[j] = dx;
            b->Edz[j] = Edx;
        }
    }
}

// Batchnorm layer l: z, Ez from its input. Its running statistics have no
// gradient: out's gc and Eg hold their new values' centre and bound (the
// count's + 1 is exact).
static void bn_forward(ext_bound *b, int l, size_t B, ext_step_bound *o)
{
    const par_layer *ly = &b->m->layers[l];
    const par_view *v = b->m->views;
    const size_t rm = v[ly->stat_view].offset, rv = v[ly->stat_view + 1].offset;
    const size_t cnt = v[ly->stat_view + 2].offset;
    ext_bn *s = &b->bn[l];
    s->B = B;
    ext_bn_forward(s, b->a[l], b->Ea[l], b->z[l], b->Ez[l]);
    ext_bn_running(s, b->w + rm, b->w + rv, o->gc + rm, o->Eg + rm, o->gc + rv, o->Eg + rv);
    o->gc[cnt] = b->w[cnt] + 1;
    o->Eg[cnt] = 0;
    for (size_t i = rm; i <= cnt; i++) o->G[i] = fabs(o->gc[i]) + o->Eg[i];
}

// Batchnorm layer l's gamma and beta gradients and (l > 0) dx from its dz.
static void bn_backward(ext_bound *b, int l, ext_step_bound *o)
{
    const par_layer *ly = &b->m->layers[l];
    const size_t ow = b->m->views[ly->w_view].offset, ob = b->m->views[ly->b_view].offset;
    ext_bn_backward(&b->bn[l], b->dz, b->Edz, o->gc + ow, o->Eg + ow, o->gc + ob, o->Eg + ob,
                    l > 0 ? b->dx : NULL, b->Edx);
    for (size_t c = 0; c < ly->c_out; c++) {
        o->G[ow + c] = fabs(o->gc[ow + c]) + o->Eg[ow + c];
        o->G[ob + c] = fabs(o->gc[ob + c]) + o->Eg[ob + c];
    }
}

int ext_view_is_stat(const par_model *m, int v)
{
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].stat_view >= 0 && v >= m->layers[l].stat_view &&
            v < m->layers[l].stat_view + 3)
            return 1;
    return 0;
}

par_status ext_bound_step(ext_bound *b, const void *w, const void *x, const int32_t *labels,
                          size_t B, const ext_ulps *ulps, ext_step_bound *out)
{
    const par_model *m = b->m;
    const int L = m->n_layers;
    PAR_FAIL_IF(B == 0 || B > b->Bmax, PAR_ERR_CONFIG, "bound of a batch of %zu (expected 1..%zu)",
                B, b->Bmax);
    for (size_t i = 0; i < m->n_params; i++) b->w[i] = par_get_real(b->dt, w, i);
    for (size_t i = 0; i < B * m->n_inputs; i++) {
        b->a[0][i] = par_get_real(b->dt, x, i);
        b->Ea[0][i] = 0;   // the batch is given to both sides as these values
    }
    for (size_t i = 0; i < m->n_params; i++) out->Eg[i] = out->G[i] = out->gc[i] = 0;
    for (int l = 0; l < L; l++) {
        const par_layer *ly = &m->layers[l];
        if (ly->kind == PAR_LAYER_MAXPOOL) {
            pool_forward(b, l, B);
            continue;
        }
        if (ly->kind == PAR_LAYER_BATCHNORM) bn_forward(b, l, B, out);
        else PAR_TRY(forward_sum(b, l, B));
        activate(b, l, B, ulps);
    }
    softmax_xent(b, L - 1, B, labels, ulps, &out->El, &out->lc);
    for (int l = L - 1; l >= 0; l--) {
        const par_layer *ly = &m->layers[l];
        if (ly->kind == PAR_LAYER_MAXPOOL) {
            pool_backward(b, l, B);
        } else if (ly->kind == PAR_LAYER_BATCHNORM) {
            bn_backward(b, l, out);
            if (l == 0) break;
        } else {
            PAR_TRY(grad_bound(b, l, B, out));
            if (l == 0) break;
            PAR_TRY(input_grad(b, l, B));
        }
        // dx is dL/d(output of layer l - 1 after its activation): into its dz.
        activation_backward(b, l - 1, B);
    }
    // A bound that overflowed holds nothing: where an infinite one met a zero
    // (a weight, a relu's mask) it reads NaN, and is infinite as well.
    for (size_t i = 0; i < m->n_params; i++)
        if (isnan(out->Eg[i])) out->Eg[i] = out->G[i] = INFINITY;
    if (isnan(out->El)) out->El = INFINITY;
    return PAR_OK;
}

// ---- the update ------------------------------------------------------------------------
//
// Each formula is a few rounded ops on values whose sizes are known; for
// each, the difference carried from its inputs plus k u times the sizes of
// what it combines (k at least the ops any arrangement of it takes, each
// hyperparameter's rounding counted as one more), and the centre's own
// double roundings (16 u_d on the same sizes).
void ext_update_init(ext_update *u, const ext_optim *o, par_dtype dt, long t)
{
    u->o = *o;
    u->dt = dt;
    u->t = t;
    u->p1 = pow(o->b1, (double)t);
    u->p2 = pow(o->b2, (double)t);
}

void ext_update_bound(const ext_update *up, double w, double m, double v, double gc, double Eg,
                      double c[3], double E[3])
{
    const ext_optim *o = &up->o;
    const par_dtype dt = up->dt;
    const long t = up->t;
    const double u = dt == PAR_F32 ? 0x1p-24 : 0x1p-53, ud = 0x1p-53, r = 16 * ud;
    const double tiny = (dt == PAR_F32 ? 0x1p-149 : 0x1p-1074) * 8;
    const double G = fabs(gc) + Eg, lr = o->lr;
    c[1] = c[2] = E[1] = E[2] = 0;
    if (o->kind == 0) {   // w - lr g
        c[0] = w - lr * gc;
        E[0] = lr * Eg + (3 * u + r) * (fabs(w) + lr * G) + tiny;
    } else if (o->kind == 1 || o->kind == 2) {   // v = mu v + g; w - lr v, or w - lr (g + mu v)
        const double mu = o->mu, vc = mu * m + gc;
        const double Ev = Eg + (3 * u + r) * (mu * fabs(m) + G) + tiny;
        const double V = fabs(vc) + Ev;
        double sc = vc, Es = Ev;
        if (o->kind == 2) {
            sc = gc + mu * vc;
            Es = Eg + mu * Ev + (3 * u + r) * (G + mu * V) + tiny;
        }
        c[0] = w - lr * sc;
        E[0] = lr * Es + (3 * u + r) * (fabs(w) + lr * (fabs(sc) + Es)) + tiny;
        c[1] = vc;
        E[1] = Ev;
    } else {   // adam
        const double b1 = o->b1, b2 = o->b2, eps = o->eps;
        // 1 - b with b exact or rounded to dt: relative u b / (1 - b) apart (1000 u for 0.999).
        const double dc1 = u * b1 / (1 - b1) + 2 * u, dc2 = u * b2 / (1 - b2) + 2 * u;
        const double mc = b1 * m + (1 - b1) * gc;
        const double Em = (1 - b1) * Eg + dc1 * (1 - b1) * G +
                          (4 * u + r) * (fabs(m) + (1 - b1) * G) + 2 * u * fabs(mc) + tiny;
        const double vc = b2 * v + (1 - b2) * gc * gc;
        const double Ev = (1 - b2) * (2 * fabs(gc) + Eg) * Eg + dc2 * (1 - b2) * G * G +
                          (4 * u + r) * (v + (1 - b2) * (G * G + v)) + 2 * u * vc + tiny;
        const double p1 = up->p1, p2 = up->p2;
        const double bc1 = 1 - p1, bc2 = 1 - p2;
        // 1 - b^t with b exact or rounded (relative u), b^t by t products: t + 2 units.
        const double d1 = ((double)t + 2) * u * p1 / bc1 + 2 * u, d2 = ((double)t + 2) * u * p2 / bc2 + 2 * u;
        const double mh = mc / bc1, vh = vc / bc2;
        const double Emh = Em / bc1 * (1 + d1) + fabs(mh) * (d1 + 2 * u);
        const double Evh = Ev / bc2 * (1 + d2) + vh * (d2 + 2 * u);
        const double sq = sqrt(vh);
        const double Esq = (sq > 0 ? fmin(Evh / sq, sqrt(Evh)) : sqrt(Evh)) + 2 * u * (sq + sqrt(Evh));
        const double d = sq + eps, Ed = Esq + 2 * u * (d + Esq) + u * eps;
        const double step = lr * mh / d;
        const double low = fmax(d - Ed, eps * (1 - 2 * u));
        const double Estep = low > 0 ? lr * (Emh + fabs(mh / d) * Ed) / low * (1 + 4 * u) +
                                           (4 * u + r) * fabs(step) + tiny
                                     : INFINITY;
        c[0] = w - step;
        E[0] = Estep + (2 * u + r) * (fabs(w) + fabs(step) + Estep) + tiny;
        c[1] = mc;
        E[1] = Em;
        c[2] = vc;
        E[2] = Ev;
    }
    for (int k = 0; k < 3; k++) E[k] *= SLACK;
}

void ext_new_bound(const ext_update *up, int stat, const ext_step_bound *e, size_t i, double w,
                   double s0, double s1, double c[3], double E[3])
{
    if (!stat) {
        ext_update_bound(up, w, s0, s1, e->gc[i], e->Eg[i], c, E);
        return;
    }
    c[0] = e->gc[i];   // the forward's new value; no gradient, its state unchanged
    E[0] = e->Eg[i];
    c[1] = s0;
    c[2] = s1;
    E[1] = E[2] = 0;
}
