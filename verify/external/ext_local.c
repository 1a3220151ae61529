// The checks of a trainer's own intermediates (ext_local.h): every op of its
// step from its own inputs, in double, under that op's bound alone.
#define _POSIX_C_SOURCE 200809L
#include "ext_local.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_bn.h"
#include "ext_sums.h"
#include "par_sort.h"

#define SLACK (1 + 0x1p-30)
static const double UD = 0x1p-53;

par_status ext_get_array(const par_array **out, const par_npz *z, const char *name, int ndim,
                         const size_t *shape, par_dtype dt, long step, const char *file,
                         int optional)
{
    *out = NULL;
    const par_array *a = NULL;
    for (size_t i = 0; z && i < z->n && !a; i++)
        if (strcmp(z->arrays[i].name, name) == 0) a = &z->arrays[i];
    if (!a && optional) return PAR_OK;
    PAR_FAIL_IF(!a, PAR_ERR_EXTERNAL, "step %ld: the trainer's %s has no array '%s'", step, file,
                name);
    int same = a->ndim == ndim && !a->int_bytes;
    for (int d = 0; same && d < ndim; d++) same = a->shape[d] == shape[d];
    char want[64] = "(", have[64] = "(";
    for (int d = 0; d < ndim; d++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%zu", d ? ", " : "",
                 shape[d]);
    for (int d = 0; d < a->ndim; d++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%zu", d ? ", " : "",
                 a->shape[d]);
    PAR_FAIL_IF(!same, PAR_ERR_EXTERNAL, "step %ld: the trainer's %s: array '%s' has shape %s), "
                "expected %s)", step, file, name, have, want);
    PAR_FAIL_IF(a->dtype != dt, PAR_ERR_EXTERNAL, "step %ld: the trainer's %s: array '%s' is %s, "
                "the run is %s", step, file, name, par_dtype_name(a->dtype), par_dtype_name(dt));
    for (size_t i = 0; i < a->count; i++)
        PAR_FAIL_IF(!isfinite(par_get_real(dt, a->data, i)), PAR_ERR_EXTERNAL,
                    "step %ld: the trainer's %s: array '%s' holds %g at element %zu", step, file,
                    name, par_get_real(dt, a->data, i), i);
    *out = a;
    return PAR_OK;
}

typedef struct local {
    const ext_local_in *in;
    double u, tiny;
    const double *a[PAR_MAX_LAYERS + 1];   // layer inputs: x, then the trainer's outputs
    const double *dz[PAR_MAX_LAYERS];      // the trainer's output gradients
    double *t1, *t2, *t3;                  // scratch, (B, max_width) each
    double *zero;                          // (B, max_width) zeros: its own values, exact
    ext_bn bn[PAR_MAX_LAYERS];             // batchnorm layers' statistics of its input
} local;

static double gam(const local *L, double n)
{
    return n * L->u / (1 - n * L->u) + n * UD / (1 - n * UD);
}

static void cmp(const local *L, const char *tensor, const char *op, size_t d0, size_t d1, size_t i,
                double got, double centre, double bound)
{
    const size_t shape[2] = {d0, d1};
    const ext_cmp c = {tensor, op, d1 ? 2 : 1, shape, i, got, centre, bound};
    L->in->note(L->in->ctx, &c);
}

// An f32 sum done in order, b first (ops rounded to float one at a time),
// for the signature; f64 has no narrower reference to size against.
static double f32_dot(const par_layer *ly, const double *W, double b, const double *xs, size_t co,
                      size_t oh, size_t ow)
{
    const size_t K = ly->K;
    float acc = (float)b;
    for (size_t ci = 0; ci < ly->c_in; ci++)
        for (size_t kh = 0; kh < K; kh++)
            for (size_t kw = 0; kw < K; kw++) {
                const long iy = (long)(oh * ly->stride + kh) - (long)ly->pad;
                const long ix = (long)(ow * ly->stride + kw) - (long)ly->pad;
                if (iy < 0 || ix < 0 || iy >= (long)ly->h_in || ix >= (long)ly->w_in) continue;
                const float p = (float)W[((co * ly->c_in + ci) * K + kh) * K + kw] *
                                (float)xs[(ci * ly->h_in + (size_t)iy) * ly->w_in + (size_t)ix];
                acc = acc + p;
            }
    return acc;
}

static double act_of(par_act act, double z)
{
    return act == PAR_ACT_RELU ? (z > 0 ? z : 0) : act == PAR_ACT_SIGMOID ? 1 / (1 + exp(-z))
           : act == PAR_ACT_TANH ? tanh(z) : z;
}

static const char *kind_name(const par_layer *ly)
{
    return ly->kind == PAR_LAYER_CONV2D ? "conv2d" : ly->kind == PAR_LAYER_DENSE ? "dense"
           : ly->kind == PAR_LAYER_BATCHNORM ? "batchnorm" : "max-pool";
}

// Batchnorm layer l's output from the trainer's own input: its batch
// statistics over every sample it sent, the any-order bound of ext_bn.c.
static par_status check_bn_forward(local *L, int l, const double *W, const double *b,
                                   const char *tensor, const char *op)
{
    const ext_local_in *in = L->in;
    const par_layer *ly = &in->m->layers[l];
    ext_bn *s = &L->bn[l];
    PAR_TRY(ext_bn_alloc(s, ly, in->B));
    s->B = in->B;
    s->u = L->u;
    s->tiny = L->tiny;
    s->gamma = W;
    s->beta = b;
    ext_bn_forward(s, L->a[l], L->zero, L->t1, L->t2);
    for (size_t j = 0; j < in->B * ly->n_out; j++) {
        double Ea;
        const double a = ext_act_bound(ly->act, L->t1[j], L->t2[j], L->u, L->tiny, in->ulps, &Ea);
        cmp(L, tensor, op, in->B, ly->n_out, j, L->a[l + 1][j], a, Ea);
    }
    return PAR_OK;
}

// The signature sizes a trainer's deviations on at most this many outputs
// of a layer, spread evenly: a median needs no more, and the in-order f32
// dot it compares with costs as much as the layer's forward pass.
enum { SIG_SAMPLES = 1024 };

// Layer l's output from the trainer's own input; the signature's ratio into
// *ratio (0 where nothing sizes it).
static par_status check_forward(local *L, int l, const double *W, const double *b, double *ratio)
{
    const ext_local_in *in = L->in;
    const par_layer *ly = &in->m->layers[l];
    const size_t B = in->B, n_out = B * ly->n_out, n_in = B * ly->n_in;
    const double *x = L->a[l], *out = L->a[l + 1];
    char tensor[48], op[64];
    snprintf(tensor, sizeof tensor, "layer%d.out", l);
    snprintf(op, sizeof op, "%s forward%s%s, from its own input", kind_name(ly),
             ly->act ? ", " : "", ly->act ? par_act_name(ly->act) : "");
    *ratio = 0;
    if (ly->kind == PAR_LAYER_BATCHNORM) return check_bn_forward(L, l, W, b, tensor, op);
    if (ly->kind == PAR_LAYER_MAXPOOL) {   // a copy of the window's maximum: exact
        const size_t K = ly->K;
        for (size_t s = 0; s < B; s++)
            for (size_t o = 0; o < ly->n_out; o++) {
                const size_t c = o / (ly->h_out * ly->w_out), oh = o / ly->w_out % ly->h_out;
                const size_t base = s * ly->n_in + (c * ly->h_in + oh * K) * ly->w_in +
                                    o % ly->w_out * K;
                double mx = -INFINITY;
                for (size_t kh = 0; kh < K; kh++)
                    for (size_t kw = 0; kw < K; kw++) mx = fmax(mx, x[base + kh * ly->w_in + kw]);
                cmp(L, tensor, op, B, ly->n_out, s * ly->n_out + o, out[s * ly->n_out + o], mx, 0);
            }
        return PAR_OK;
    }
    const double n = (double)(ly->c_in * ly->K * ly->K + 1), g = gam(L, n);
    PAR_TRY(ext_conv_fwd(ly, L->t1, x, W, b, B, 0));
    for (size_t i = 0; i < n_in; i++) L->t3[i] = fabs(x[i]);
    PAR_TRY(ext_conv_fwd(ly, L->t2, L->t3, W, b, B, 1));
    // The signature's samples go to the front of t3 and t2: sample k is
    // written at output j >= k, after t2[k] was read.
    double *dev_t = L->t3, *dev_p = L->t2;
    const size_t stride = n_out > SIG_SAMPLES ? n_out / SIG_SAMPLES : 1;
    size_t ns = 0;
    for (size_t j = 0; j < n_out; j++) {
        const double z = L->t1[j], Ez = (g * L->t2[j] + n * L->tiny) * SLACK;
        double Ea;
        const double a = ext_act_bound(ly->act, z, Ez, L->u, L->tiny, in->ulps, &Ea);
        cmp(L, tensor, op, B, ly->n_out, j, out[j], a, Ea);
        if (in->dt == PAR_F32 && j % stride == 0) {
            const size_t s = j / ly->n_out, o = j % ly->n_out, P = ly->h_out * ly->w_out;
            const size_t co = o / P, oh = o % P / ly->w_out, ow = o % ly->w_out;
            const double z32 = f32_dot(ly, W, b[co], x + s * ly->n_in, co, oh, ow);
            dev_p[ns] = fabs((double)(float)act_of(ly->act, z32) - a);
            dev_t[ns++] = fabs(out[j] - a);
        }
    }
    const double mt = ns ? par_median_select(dev_t, ns) : 0;
    const double mp = ns ? par_median_select(dev_p, ns) : 0;
    *ratio = mt == 0 || mp == 0 ? 0 : mt / mp;   // nothing to size against: 0
    return PAR_OK;
}

// dL/d(layer l's input) from the trainer's dz of layer l, into t1, and its
// bound into t2; then through layer l-1's activation, against the trainer's
// dz of layer l-1.
static par_status check_backward(local *L, int l, const double *W)
{
    const ext_local_in *in = L->in;
    const par_model *m = in->m;
    const par_layer *ly = &m->layers[l], *prev = &m->layers[l - 1];
    const size_t B = in->B, n_in = B * ly->n_in;
    double *dx = L->t1, *Edx = L->t2;
    const double *dz = L->dz[l];
    char op[96];
    if (ly->kind == PAR_LAYER_MAXPOOL) {   // routed to the window's maximum; a tie either way
        const double *x = L->a[l];
        const size_t K = ly->K;
        memset(dx, 0, n_in * sizeof *dx);
        memset(Edx, 0, n_in * sizeof *Edx);
        for (size_t s = 0; s < B; s++)
            for (size_t o = 0; o < ly->n_out; o++) {
                const size_t c = o / (ly->h_out * ly->w_out), oh = o / ly->w_out % ly->h_out;
                const size_t base = s * ly->n_in + (c * ly->h_in + oh * K) * ly->w_in +
                                    o % ly->w_out * K;
                size_t arg = base;
                int ties = 0;
                for (size_t kh = 0; kh < K; kh++)
                    for (size_t kw = 0; kw < K; kw++)
                        if (x[base + kh * ly->w_in + kw] > x[arg]) arg = base + kh * ly->w_in + kw;
                for (size_t kh = 0; kh < K; kh++)
                    for (size_t kw = 0; kw < K; kw++)
                        ties += x[base + kh * ly->w_in + kw] == x[arg];
                const double d = dz[s * ly->n_out + o];
                dx[arg] = d;
                for (size_t kh = 0; ties > 1 && kh < K; kh++)
                    for (size_t kw = 0; kw < K; kw++)
                        if (x[base + kh * ly->w_in + kw] == x[arg]) Edx[base + kh * ly->w_in + kw] = fabs(d);
            }
        snprintf(op, sizeof op, "max-pool %d routing", l);
    } else if (ly->kind == PAR_LAYER_BATCHNORM) {   // its statistics from the forward check
        double *dg = malloc(4 * ly->c_out * sizeof *dg);   // its gamma and beta gradients
        PAR_FAIL_IF(!dg, PAR_ERR_ALLOC, "the input gradient check of layer %d", l);
        ext_bn_backward(&L->bn[l], dz, L->zero, dg, dg + ly->c_out, dg + 2 * ly->c_out,
                        dg + 3 * ly->c_out, dx, Edx);
        free(dg);
        snprintf(op, sizeof op, "batchnorm %d input gradient", l);
    } else {
        const double n = (double)(ly->c_out * ly->K * ly->K), g = gam(L, n);
        PAR_TRY(ext_conv_bwd(ly, dx, dz, W, B, 0));
        for (size_t j = 0; j < B * ly->n_out; j++) L->t3[j] = fabs(dz[j]);
        PAR_TRY(ext_conv_bwd(ly, Edx, L->t3, W, B, 1));
        for (size_t i = 0; i < n_in; i++) Edx[i] = (g * Edx[i] + n * L->tiny) * SLACK;
        snprintf(op, sizeof op, "%s %d input gradient", kind_name(ly), l);
    }
    char tensor[48];
    snprintf(tensor, sizeof tensor, "layer%d.dz", l - 1);
    if (prev->act) snprintf(op + strlen(op), sizeof op - strlen(op), ", %s", par_act_name(prev->act));
    snprintf(op + strlen(op), sizeof op - strlen(op), ", from its own layer%d.dz", l);
    const double *y = L->a[l], u = L->u;   // layer l-1's output: its activation's
    for (size_t i = 0; i < n_in; i++) {
        double want = dx[i], E = Edx[i];
        if (prev->act == PAR_ACT_RELU) {
            want = y[i] > 0 ? dx[i] : 0;
            E = y[i] > 0 ? Edx[i] : 0;
        } else if (prev->act == PAR_ACT_SIGMOID || prev->act == PAR_ACT_TANH) {
            const double d = prev->act == PAR_ACT_SIGMOID ? y[i] * (1 - y[i]) : 1 - y[i] * y[i];
            want = dx[i] * d;
            E = (Edx[i] * fabs(d) + (3 * u + 4 * UD) * (fabs(dx[i]) + Edx[i]) * fabs(d)) * SLACK;
        }
        cmp(L, tensor, op, B, prev->n_out, i, L->dz[l - 1][i], want, E);
    }
    return PAR_OK;
}

// The trainer's weight (gw) and bias (gb) gradient of layer l against the
// centres c and bounds E, nw weights then nb biases.
static void check_grad_rows(local *L, int l, const par_array *gw, const par_array *gb,
                            const double *c, const double *E, size_t nw, size_t nb)
{
    const par_layer *ly = &L->in->m->layers[l];
    const par_dtype dt = L->in->dt;
    char tw[48], tb[48], op[96];
    snprintf(tw, sizeof tw, "grad.layer%d.weight", l);
    snprintf(tb, sizeof tb, "grad.layer%d.bias", l);
    snprintf(op, sizeof op, "%s %d weight gradient, from its own dz and input", kind_name(ly), l);
    const size_t d1 = ly->kind == PAR_LAYER_BATCHNORM ? 0 : ly->row_len;   // gamma: (c)
    for (size_t i = 0; i < nw + nb; i++) {
        if (i < nw)
            cmp(L, tw, op, nb, d1, i, par_get_real(dt, gw->data, i), c[i], E[i]);
        else
            cmp(L, tb, op, nb, 0, i - nw, par_get_real(dt, gb->data, i - nw), c[i], E[i]);
    }
}

// Layer l's weight and bias gradient from the trainer's own dz and input.
static par_status check_grads(local *L, int l, const par_array *gw, const par_array *gb)
{
    const ext_local_in *in = L->in;
    const par_layer *ly = &in->m->layers[l];
    const size_t B = in->B, nw = ly->n_rows * ly->row_len, nb = ly->n_rows;
    const double n = (double)(B * ly->h_out * ly->w_out), g = gam(L, n), u = L->u;
    double *c = calloc(2 * (nw + nb), sizeof *c);
    PAR_FAIL_IF(!c, PAR_ERR_ALLOC, "the gradient check of layer %d", l);
    double *s = c + nw + nb;
    if (ly->kind == PAR_LAYER_BATCHNORM) {   // gamma (c), then beta (c), with their bounds
        ext_bn_backward(&L->bn[l], L->dz[l], L->zero, c, s, c + nw, s + nw, NULL, NULL);
        check_grad_rows(L, l, gw, gb, c, s, nw, nb);
        free(c);
        return PAR_OK;
    }
    par_status st = ext_conv_grad(ly, c, c + nw, L->dz[l], L->a[l], B);
    for (size_t j = 0; j < B * ly->n_out; j++) L->t1[j] = fabs(L->dz[l][j]);
    for (size_t i = 0; i < B * ly->n_in; i++) L->t2[i] = fabs(L->a[l][i]);
    if (st == PAR_OK) st = ext_conv_grad(ly, s, s + nw, L->t1, L->t2, B);
    if (st != PAR_OK) {
        free(c);
        return st;
    }
    for (size_t i = 0; i < nw + nb; i++)   // 4u |g|: where a trainer puts the 1/B and DDP's 1/world
        s[i] = (g * s[i] + 4 * u * (fabs(c[i]) + g * s[i]) + n * L->tiny) * SLACK;
    check_grad_rows(L, l, gw, gb, c, s, nw, nb);
    free(c);
    return PAR_OK;
}

// The loss layer from the trainer's logits: its dz, its per-sample losses,
// its batch loss (the formula of ext_bound.c's softmax with eps = 0).
static void check_loss(local *L, int l, const par_array *ls)
{
    const ext_local_in *in = L->in;
    const size_t B = in->B, K = in->m->layers[l].n_out;
    const double u = L->u, gK = K * u / (1 - K * u);
    const ext_ulps *U = in->ulps;
    char dzname[48];
    snprintf(dzname, sizeof dzname, "layer%d.dz", l);
    double sum = 0, sum_abs = 0;
    for (size_t s = 0; s < B; s++) {
        const double *z = L->a[l + 1] + s * K;
        double mx = -INFINITY, Z = 0;
        for (size_t k = 0; k < K; k++) mx = fmax(mx, z[k]);
        for (size_t k = 0; k < K; k++) Z += exp(z[k] - mx);
        const double Lse = log(Z);
        for (size_t k = 0; k < K; k++) {
            const double p = exp(z[k] - mx) / Z, y = (size_t)in->labels[s] == k;
            const double T = fabs(z[k] - mx);
            const double D = u * (2 * T + Lse * (1 + 2 * U->log)) + gK * (1 + 2 * U->exp * u) +
                             2 * U->exp * u;
            const double rho = exp(D) * (1 + 2 * U->exp * u) - 1;
            const double cd = ((double)K + 8 + 2 * T) * UD;
            const double Ep = p * ((1 + cd) * (1 + rho) - 1);
            const double mag = fabs(p - y) + Ep;
            cmp(L, dzname, "softmax and cross-entropy gradient, from its own logits", B, K,
                s * K + k, L->dz[l][s * K + k], (p - y) / (double)B,
                ((Ep + 4 * u * mag) / (double)B + 4 * UD * mag / (double)B) * SLACK);
            if (!y) continue;
            const double want = Lse + mx - z[k];
            const double E = (D + 8 * UD * (Lse + T)) * SLACK;
            const double got = par_get_real(in->dt, ls->data, s);
            cmp(L, "loss.samples", "cross-entropy, from its own logits", B, 0, s, got, want, E);
            sum += got;
            sum_abs += fabs(got);
        }
    }
    const double E = ((gam(L, (double)B) + 2 * u) * sum_abs / (double)B) * SLACK;
    cmp(L, "loss", "the batch mean of its loss.samples", 0, 0, 0, in->loss, sum / (double)B, E);
}

par_status ext_local_check(const ext_local_in *in, int *checked, double *sig, char *sig_tensor,
                           size_t sig_n)
{
    const par_model *m = in->m;
    const int Ln = m->n_layers;
    *checked = 0;
    *sig = 0;
    if (sig_n) sig_tensor[0] = '\0';
    const par_array *probe;
    const size_t shape0[2] = {in->B, m->layers[0].n_out};
    PAR_TRY(ext_get_array(&probe, in->inter, "layer0.out", 2, shape0, in->dt, in->step,
                          "intermediates.npz", 1));
    if (!probe) return PAR_OK;
    local L = {.in = in, .u = in->dt == PAR_F32 ? 0x1p-24 : 0x1p-53,
               .tiny = (in->dt == PAR_F32 ? 0x1p-149 : 0x1p-1074) + 0x1p-1074};
    const size_t wide = in->B * m->max_width;
    double *xd = malloc(in->B * m->n_inputs * sizeof *xd), *w = malloc(m->n_params * sizeof *w);
    double *arr = malloc(2 * (size_t)Ln * wide * sizeof *arr);
    L.t1 = malloc(wide * sizeof(double));
    L.t2 = malloc(wide * sizeof(double));
    L.t3 = malloc(wide * sizeof(double));
    L.zero = calloc(wide, sizeof(double));
    par_status st = xd && w && arr && L.t1 && L.t2 && L.t3 && L.zero
                        ? PAR_OK : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    const par_array *ls = NULL, *gw[PAR_MAX_LAYERS] = {0}, *gb[PAR_MAX_LAYERS] = {0};
    for (size_t i = 0; st == PAR_OK && i < in->B * m->n_inputs; i++)
        xd[i] = par_get_real(in->dt, in->x, i);
    for (size_t i = 0; st == PAR_OK && i < m->n_params; i++) w[i] = par_get_real(in->dt, in->w, i);
    L.a[0] = xd;
    for (int l = 0; st == PAR_OK && l < Ln; l++) {   // the trainer's arrays, checked, in double
        const par_layer *ly = &m->layers[l];
        const size_t shape[2] = {in->B, ly->n_out};
        const par_array *o, *d;
        char name[48];
        snprintf(name, sizeof name, "layer%d.out", l);
        st = ext_get_array(&o, in->inter, name, 2, shape, in->dt, in->step, "intermediates.npz", 0);
        snprintf(name, sizeof name, "layer%d.dz", l);
        if (st == PAR_OK)
            st = ext_get_array(&d, in->inter, name, 2, shape, in->dt, in->step, "intermediates.npz",
                               0);
        if (st != PAR_OK) break;
        double *ao = arr + (size_t)(2 * l) * wide, *ad = ao + wide;
        for (size_t i = 0; i < o->count; i++) {
            ao[i] = par_get_real(in->dt, o->data, i);
            ad[i] = par_get_real(in->dt, d->data, i);
        }
        L.a[l + 1] = ao;
        L.dz[l] = ad;
        if (ly->w_view >= 0) {
            const par_view *vw = &m->views[ly->w_view], *vb = &m->views[ly->b_view];
            snprintf(name, sizeof name, "grad.%s", vw->name);
            st = ext_get_array(&gw[l], in->inter, name, vw->ndim, vw->shape, in->dt, in->step,
                               "intermediates.npz", 0);
            snprintf(name, sizeof name, "grad.%s", vb->name);
            if (st == PAR_OK)
                st = ext_get_array(&gb[l], in->inter, name, vb->ndim, vb->shape, in->dt, in->step,
                                   "intermediates.npz", 0);
        }
    }
    const size_t bshape[1] = {in->B};
    if (st == PAR_OK)
        st = ext_get_array(&ls, in->inter, "loss.samples", 1, bshape, in->dt, in->step,
                           "intermediates.npz", 0);
    for (int l = 0; st == PAR_OK && l < Ln; l++) {
        const par_layer *ly = &m->layers[l];
        const double *W = ly->w_view >= 0 ? w + m->views[ly->w_view].offset : NULL;
        const double *b = ly->b_view >= 0 ? w + m->views[ly->b_view].offset : NULL;
        double q = 0;
        st = check_forward(&L, l, W, b, &q);
        if (st == PAR_OK && !(q <= *sig)) {
            *sig = q;
            snprintf(sig_tensor, sig_n, "layer%d.out", l);
        }
    }
    if (st == PAR_OK) check_loss(&L, Ln - 1, ls);
    for (int l = Ln - 1; st == PAR_OK && l >= 0; l--) {
        const par_layer *ly = &m->layers[l];
        const double *W = ly->w_view >= 0 ? w + m->views[ly->w_view].offset : NULL;
        if (ly->w_view >= 0) st = check_grads(&L, l, gw[l], gb[l]);
        if (st == PAR_OK && l > 0) st = check_backward(&L, l, W);
    }
    *checked = st == PAR_OK;
    free(xd);
    free(w);
    free(arr);
    free(L.t1);
    free(L.t2);
    free(L.t3);
    free(L.zero);
    for (int l = 0; l < Ln; l++) ext_bn_free(&L.bn[l]);
    return st;
}
