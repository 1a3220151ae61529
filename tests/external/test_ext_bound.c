// Unit tests of the any-order bound of a step (verify/external/ext_bound.h):
// it must hold every conforming evaluation of the gradient and the loss —
// parity's reference with three chunk sizes (three summation orders), and
// the reference in f64 under the f64 bound — for MLPs with each activation
// and CNNs with max-pooling and batchnorm (whose running statistics' new
// values the bound holds too), and it must not hold a gradient with a
// sample left out. Prints how tight it is (largest |g - centre| / bound).
// Run: cmake --build build --target test_ext_bound && build/tests/external/test_ext_bound
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_bound.h"
#include "ext_sums.h"
#include "par_fixtures.h"
#include "par_model.h"
#include "par_test.h"
#include "ref_train.h"

enum { B = 16 };

// The batch of the first B records, pixels / 255 in dt, as parity loads them.
static void batch_of(const par_dataset *ds, par_dtype dt, void *x, int32_t *labels, size_t n_in)
{
    for (size_t s = 0; s < B; s++) {
        for (size_t i = 0; i < n_in; i++)
            par_put_real(dt, x, s * n_in + i, (double)ds->train.pixels[s * n_in + i] / 255.0);
        labels[s] = ds->train.labels[s];
    }
}

// The reference's gradient and loss on (w, x) with chunk C and B samples;
// for batchnorm's running statistics, which have none, their new values
// (as ext_step_bound holds them).
static void ref_grad_of(const par_model *m, par_dtype dt, size_t C, const void *w, const void *x,
                        const int32_t *labels, size_t n, double *g, double *loss)
{
    ref_trainer *t;
    PAR_REQUIRE(ref_create(&t, m, dt, C, 0.01, w));
    PAR_REQUIRE(ref_step(t, x, labels, n, loss));
    const void *gr = ref_grad(t), *wn = ref_params(t);
    for (int v = 0; v < m->n_views; v++)
        for (size_t k = 0; k < m->views[v].count; k++) {
            const size_t i = m->views[v].offset + k;
            g[i] = par_get_real(dt, ext_view_is_stat(m, v) ? wn : gr, i);
        }
    ref_destroy(t);
}

// Largest |g - gc| / Eg over the parameters (0/0 counts 0), and how many exceed 1.
static double worst(const double *g, const ext_step_bound *e, size_t n, size_t *over)
{
    double q = 0;
    *over = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs(g[i] - e->gc[i]);
        const double r = d == 0 ? 0 : d / e->Eg[i];
        if (!(r <= 1)) ++*over;
        if (!(r <= q)) q = r;
    }
    return q;
}

static void check_model(const par_dataset *ds, const char *spec, par_act act, par_dtype dt)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, spec, act));
    const size_t N = m.n_params, sz = par_dtype_size(dt);
    void *w = malloc(N * sz), *x = malloc(B * m.n_inputs * sz);
    int32_t labels[B];
    double *g = malloc(N * sizeof *g);
    ext_step_bound e = {malloc(N * sizeof(double)), malloc(N * sizeof(double)),
                        malloc(N * sizeof(double)), 0, 0};
    par_model_init(&m, dt, 42, w);
    batch_of(ds, dt, x, labels, m.n_inputs);
    ext_bound *b;
    PAR_REQUIRE(ext_bound_create(&b, &m, dt, B));
    const ext_ulps ulps = ext_ulps_default();
    PAR_REQUIRE(ext_bound_step(b, w, x, labels, B, &ulps, &e));
    char name[300];
    // Three summation orders of the batch: chunks of 1 (a left fold of the
    // samples), 8 and B (one chain): each a conforming evaluation.
    const size_t chunks[3] = {1, 8, B};
    double q = 0;
    for (int k = 0; k < 3; k++) {
        double loss;
        size_t over;
        ref_grad_of(&m, dt, chunks[k], w, x, labels, B, g, &loss);
        q = fmax(q, worst(g, &e, N, &over));
        snprintf(name, sizeof name, "%s %s %s, chunk %zu: gradient within the bound (%zu over), "
                 "loss |%.9g - %.9g| <= %.3g", spec, par_act_name(act), par_dtype_name(dt),
                 chunks[k], over, loss, e.lc, e.El);
        par_check(over == 0 && fabs(loss - e.lc) <= e.El, name);
    }
    printf("# %s %s %s: largest |g - centre| / bound %.3g\n", spec, par_act_name(act),
           par_dtype_name(dt), q);
    // A gradient with the last sample left out (the mean over B - 1): not a
    // conforming evaluation of this step; far outside the bound.
    double loss;
    size_t over;
    ref_grad_of(&m, dt, 8, w, x, labels, B - 1, g, &loss);
    worst(g, &e, N, &over);
    snprintf(name, sizeof name, "%s %s %s: one sample left out, %zu of %zu gradient elements "
             "outside the bound", spec, par_act_name(act), par_dtype_name(dt), over, N);
    par_check(over > N / 10, name);
    ext_bound_destroy(b);
    free(w);
    free(x);
    free(g);
    free(e.gc);
    free(e.Eg);
    free(e.G);
}

// The f32 reference against the f64 one: both within their own bounds of
// the centre, so within the sum of the two of each other.
static void check_f64_against_f32(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-32-16-10", PAR_ACT_RELU));
    const size_t N = m.n_params;
    float *w32 = malloc(N * sizeof *w32), *x32 = malloc(B * 784 * sizeof *x32);
    double *w64 = malloc(N * sizeof *w64), *x64 = malloc(B * 784 * sizeof *x64);
    int32_t labels[B];
    par_model_init(&m, PAR_F32, 3, w32);
    for (size_t i = 0; i < N; i++) w64[i] = w32[i];
    batch_of(ds, PAR_F32, x32, labels, 784);
    for (size_t i = 0; i < B * 784; i++) x64[i] = x32[i];
    ext_step_bound e32 = {malloc(N * 8), malloc(N * 8), malloc(N * 8), 0, 0};
    ext_step_bound e64 = {malloc(N * 8), malloc(N * 8), malloc(N * 8), 0, 0};
    ext_bound *b32, *b64;
    const ext_ulps ulps = ext_ulps_default();
    PAR_REQUIRE(ext_bound_create(&b32, &m, PAR_F32, B));
    PAR_REQUIRE(ext_bound_create(&b64, &m, PAR_F64, B));
    PAR_REQUIRE(ext_bound_step(b32, w32, x32, labels, B, &ulps, &e32));
    PAR_REQUIRE(ext_bound_step(b64, w64, x64, labels, B, &ulps, &e64));
    double *g32 = malloc(N * 8), *g64 = malloc(N * 8), l32, l64;
    ref_grad_of(&m, PAR_F32, 8, w32, x32, labels, B, g32, &l32);
    ref_grad_of(&m, PAR_F64, 8, w64, x64, labels, B, g64, &l64);
    size_t over = 0, tighter = 0;
    for (size_t i = 0; i < N; i++) {
        over += !(fabs(g32[i] - g64[i]) <= e32.Eg[i] + e64.Eg[i]);
        tighter += e64.Eg[i] < e32.Eg[i];
    }
    par_check(over == 0, "the f32 and f64 references' gradients within the sum of their bounds");
    par_check(tighter == N && e64.El < e32.El, "the f64 bound is tighter than the f32 one everywhere");
    par_check(fabs(e32.lc - e64.lc) == 0, "the centre does not depend on the run's dtype");
    ext_bound_destroy(b32);
    ext_bound_destroy(b64);
    free(w32), free(x32), free(w64), free(x64), free(g32), free(g64);
    free(e32.gc), free(e32.Eg), free(e32.G), free(e64.gc), free(e64.Eg), free(e64.G);
}

// The update bound: parity's formula order and PyTorch's (adam: m by lerp,
// bias corrections in double from the double hyperparameters, eps added to
// sqrt(v) / sqrt(bc2), w += -(lr / bc1) m / denom), both evaluated in f32
// from the same state and gradient, lie within it; the same update with
// lr off by 1e-3 relative does not, for most elements.
static float f(double x) { return (float)x; }

static void check_update(void)
{
    enum { N = 4000 };
    const char *names[4] = {"sgd", "momentum", "nesterov", "adam"};
    for (int kind = 0; kind < 4; kind++) {
        ext_optim o = {kind, 1e-3, 0.9, 0.9, 0.999, 1e-8};
        size_t over = 0, over_lr = 0;
        for (long t = 1; t <= 3; t++)
            for (int i = 0; i < N; i++) {
                const float w = f(0.1 * sin(i * 1.7 + t)), g = f(0.03 * cos(i * 0.37) * (i % 7 + 1));
                const float m = f(0.01 * sin(i * 0.11)), v = f(1e-4 * (1 + cos(i * 0.23)));
                double c[3], E[3];
                ext_update up;
                ext_update_init(&up, &o, PAR_F32, t);
                ext_update_bound(&up, w, m, v, g, 0, c, E);
                float pw[2], pm[2], pv[2];   // [0] parity's order, [1] torch's
                for (int k = 0; k < 2; k++) {
                    const float lr = f(o.lr), mu = f(o.mu);
                    if (kind == 0) {
                        const float s1 = lr * g;
                        pw[k] = w - s1;
                        pm[k] = pv[k] = 0;
                    } else if (kind <= 2) {
                        pm[k] = mu * m + g;
                        const float st = kind == 1 ? pm[k] : g + mu * pm[k];
                        pw[k] = w - lr * st;
                        pv[k] = 0;
                    } else if (k == 0) {
                        const float b1 = f(o.b1), b2 = f(o.b2), c1 = 1.0f - b1, c2 = 1.0f - b2;
                        pm[k] = b1 * m + c1 * g;
                        pv[k] = b2 * v + (c2 * g) * g;
                        double p1 = 1, p2 = 1;
                        for (long j = 0; j < t; j++) p1 *= b1, p2 *= b2;
                        const float bc1 = f(1 - p1), bc2 = f(1 - p2);
                        const float d = sqrtf(pv[k] / bc2) + f(o.eps);
                        pw[k] = w - (lr * (pm[k] / bc1)) / d;
                    } else {
                        pm[k] = m + f(1 - o.b1) * (g - m);   // lerp
                        pv[k] = f(o.b2) * v + f(1 - o.b2) * (g * g);
                        const double bc1 = 1 - pow(o.b1, (double)t), bc2 = 1 - pow(o.b2, (double)t);
                        const float denom = sqrtf(pv[k]) / f(sqrt(bc2)) + f(o.eps);
                        pw[k] = w + f(-(o.lr / bc1)) * (pm[k] / denom);
                    }
                    over += !(fabs(pw[k] - c[0]) <= E[0]) + !(fabs(pm[k] - c[1]) <= E[1]) +
                            !(fabs(pv[k] - c[2]) <= E[2]);
                }
                // The step 1e-3 too large: lr off by 1e-3 relative.
                const double step = c[0] - w;
                const float bad = f(w + step * (1 + 1e-3));
                over_lr += !(fabs(bad - c[0]) <= E[0]);
            }
        char name[200];
        snprintf(name, sizeof name, "%s: parity's and PyTorch's update orders in f32 within the "
                 "update bound (%zu over)", names[kind], over);
        par_check(over == 0, name);
        snprintf(name, sizeof name, "%s: lr off by 1e-3: %zu of %d elements outside it",
                 names[kind], over_lr, 3 * N);
        par_check(over_lr > 3 * N / 2, name);
    }
}

static void check_args(void)
{
    ext_ulps u = ext_ulps_default();
    par_check(ext_ulps_parse(&u, "exp=2.5") == PAR_OK && u.exp == 2.5 && u.log == 1,
              "--ulps exp=2.5 sets exp alone");
    par_check(ext_ulps_parse(&u, "sigmoid=0") == PAR_OK && u.sigmoid == 0, "--ulps sigmoid=0");
    par_check(ext_ulps_parse(&u, "cos=1") == PAR_ERR_CONFIG, "--ulps cos=1: refused");
    par_check(ext_ulps_parse(&u, "exp=-1") == PAR_ERR_CONFIG, "--ulps exp=-1: refused");
    par_check(ext_ulps_parse(&u, "exp") == PAR_ERR_CONFIG, "--ulps exp: refused (no =U)");
}

// The blocked sums of ext_sums.c against plain loops, on small integers
// (every sum exact in double, so any order gives the same bits): a dense
// layer whose batch and width are not multiples of the 4-wide blocks, and a
// conv layer with padding and stride.
static void check_sums(const char *spec, size_t Bs)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, spec, PAR_ACT_RELU));
    const par_layer *ly = &m.layers[0];
    const size_t ni = ly->n_in, no = ly->n_out, nw = ly->n_rows * ly->row_len, K = ly->K;
    double *x = malloc(Bs * ni * sizeof *x), *dz = malloc(Bs * no * sizeof *dz);
    double *W = malloc(nw * sizeof *W), *bias = malloc(ly->n_rows * sizeof *bias);
    double *y = malloc(Bs * no * sizeof *y), *dx = malloc(Bs * ni * sizeof *dx);
    double *g = calloc(nw + ly->n_rows, sizeof *g);
    double *want = calloc(Bs * ni + Bs * no + nw + ly->n_rows, sizeof *want);
    PAR_REQUIRE(x && dz && W && bias && y && dx && g && want ? PAR_OK : PAR_ERR_ALLOC);
    for (size_t i = 0; i < Bs * ni; i++) x[i] = (double)((int)(i * 7 % 11) - 5);
    for (size_t i = 0; i < Bs * no; i++) dz[i] = (double)((int)(i * 5 % 9) - 4);
    for (size_t i = 0; i < nw; i++) W[i] = (double)((int)(i * 3 % 13) - 6);
    for (size_t i = 0; i < ly->n_rows; i++) bias[i] = (double)i - 2;
    double *wy = want, *wdx = wy + Bs * no, *wg = wdx + Bs * ni, *wb = wg + nw;
    const size_t P = ly->h_out * ly->w_out;
    for (size_t s = 0; s < Bs; s++)   // plain loops: the tap of (co, p, ci, kh, kw), padding 0
        for (size_t co = 0; co < ly->c_out; co++)
            for (size_t p = 0; p < P; p++) {
                const size_t o = s * no + co * P + p;
                wy[o] = fabs(bias[co]);
                wb[co] += dz[o];
                for (size_t ci = 0; ci < ly->c_in; ci++)
                    for (size_t kh = 0; kh < K; kh++)
                        for (size_t kw = 0; kw < K; kw++) {
                            const long iy = (long)(p / ly->w_out * ly->stride + kh) - (long)ly->pad;
                            const long ix = (long)(p % ly->w_out * ly->stride + kw) - (long)ly->pad;
                            if (iy < 0 || ix < 0 || iy >= (long)ly->h_in || ix >= (long)ly->w_in)
                                continue;
                            const size_t t = s * ni + (ci * ly->h_in + (size_t)iy) * ly->w_in +
                                             (size_t)ix;
                            const size_t k = ((co * ly->c_in + ci) * K + kh) * K + kw;
                            wy[o] += fabs(W[k]) * x[t];
                            wdx[t] += W[k] * dz[o];
                            wg[k] += dz[o] * x[t];
                        }
            }
    PAR_REQUIRE(ext_conv_fwd(ly, y, x, W, bias, Bs, 1));
    PAR_REQUIRE(ext_conv_bwd(ly, dx, dz, W, Bs, 0));
    PAR_REQUIRE(ext_conv_grad(ly, g, g + nw, dz, x, Bs));
    char name[160];
    snprintf(name, sizeof name, "%s B=%zu: forward (|W|, |b|) = plain loops", spec, Bs);
    par_check(memcmp(y, wy, Bs * no * sizeof *y) == 0, name);
    snprintf(name, sizeof name, "%s B=%zu: input gradient = plain loops", spec, Bs);
    par_check(memcmp(dx, wdx, Bs * ni * sizeof *dx) == 0, name);
    snprintf(name, sizeof name, "%s B=%zu: weight and bias gradient = plain loops", spec, Bs);
    par_check(memcmp(g, wg, (nw + ly->n_rows) * sizeof *g) == 0, name);
    free(x), free(dz), free(W), free(bias), free(y), free(dx), free(g), free(want);
}

int main(void)
{
    check_sums("mlp:37-10", 7);
    check_sums("mlp:37-10", 8);
    check_sums("mlp:2500-9", 8);   // a wide layer, as the MNIST CNN's flattened one
    check_sums("mlp:2500-9", 7);
    check_sums("cnn:2x7x6-c3k3s2p1-f-fc10", 5);
    par_dataset ds;
    fixture_dataset(&ds, 64);
    check_args();
    check_update();
    check_model(&ds, "mlp:784-32-16-10", PAR_ACT_RELU, PAR_F32);
    check_model(&ds, "mlp:784-32-16-10", PAR_ACT_SIGMOID, PAR_F32);
    check_model(&ds, "mlp:784-32-16-10", PAR_ACT_TANH, PAR_F32);
    check_model(&ds, "mlp:784-24-10", PAR_ACT_RELU, PAR_F64);
    check_model(&ds, "cnn:1x28x28-c4k3p1-r-m2-c6k3-th-m2-f-fc10", PAR_ACT_RELU, PAR_F32);
    check_model(&ds, "cnn:1x28x28-c4k3p1-bn-r-m2-f-fc10", PAR_ACT_RELU, PAR_F32);
    check_model(&ds, "cnn:1x28x28-c4k3p1-bn-r-m2-c6k3-bn-th-m2-f-fc16-bn-sg-fc10", PAR_ACT_RELU,
                PAR_F64);
    check_f64_against_f32(&ds);
    return par_test_exit();
}
