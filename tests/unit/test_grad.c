// Gradient check of the reference trainer (the contract's backward pass):
// g.v against central differences of the loss along random unit directions
// v, in f64, for relu, sigmoid and tanh hidden layers and a single layer,
// over the whole parameter vector and one view at a time (so a wrong layer
// is named), with a tolerance from the check's own error (kann's
// kad_check_grad). A 1%-wrong gradient must fail. Run: ctest -R test_grad.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_model.h"
#include "par_rng.h"
#include "par_test.h"
#include "ref_train.h"

enum { B = 6, C = 4, N_FULL_DIRS = 3, MAX_TRIES = 50 };

// Step of the central difference, along a unit direction. Truncation error
// ~ h^2 |L'''| / 6 ~ 1e-11, rounding error <= R u |L| / h ~ 2e-8 (see
// fd_compare): h ~ 1e-5 balances them loosely and leaves both far below
// the 1% of g.v (~ 1e-4) that the negative control must see.
static const double H = 1e-5;

// Rounding error of one computed loss, in units of u |L|. Each pre-activation
// is an fma chain of <= 13 terms (error <= gamma_13 sum|terms|), carried
// through <= 3 layers whose rows have sum |W_oi| <= ~4, then softmax, exp
// and log (a few ulps): 13 * 4^2 + 10 * 4 + 8 + 16 < 2^9 when every rounding
// error lines up; 2^10 covers it twice. (Measured: |D(h) - D(h/2)|, which
// holds the rounding noise of both, is ~ 4 u |L| / h here.)
static const double R_ROUND = 1024;

// u = 2^-53, unit roundoff of binary64.
static const double U = 0x1p-53;

typedef struct problem {
    par_model m;
    par_act act;
    uint64_t seed;
    double *x; // (B, n_inputs)
    int32_t labels[B];
    double *w;  // the point of the check
    double *g;  // reference gradient at w
    double L0;  // reference loss at w
    double *wt; // scratch: perturbed parameters
} problem;

// Loss of the reference at w (a fresh trainer, lr = 0).
static double loss_at(const problem *p, const double *w)
{
    ref_trainer *t;
    double L = NAN;
    if (ref_create(&t, &p->m, PAR_F64, C, 0.0, w) != PAR_OK) return NAN;
    if (ref_step(t, p->x, p->labels, B, &L) != PAR_OK) L = NAN;
    ref_destroy(t);
    return L;
}

// (L(w + h v) - L(w - h v)) / 2h.
static double central_diff(const problem *p, const double *v, double h)
{
    const size_t n = p->m.n_params;
    for (size_t i = 0; i < n; i++)
        p->wt[i] = p->w[i] + h * v[i];
    const double Lp = loss_at(p, p->wt);
    for (size_t i = 0; i < n; i++)
        p->wt[i] = p->w[i] - h * v[i];
    const double Lm = loss_at(p, p->wt);
    return (Lp - Lm) / (2 * h);
}

typedef struct fd_result {
    double gv, d, d2, err, tol, trunc, round;
} fd_result;

// Does g.v agree with the central difference D(h) within the check's own error?
//   truncation: D(h) = L' + c h^2 + O(h^4), D(h/2) = L' + c h^2 / 4, so
//     c h^2 ~ 4/3 |D(h) - D(h/2)| (this also carries the rounding noise of
//     both, so it only overestimates);
//   rounding: each loss is off by <= R u |L| (R_ROUND above), and rounding
//     w_i + h v_i moves the point by <= u |w_i| per element, which moves L
//     by <= u sum |g_i w_i|; the difference of two such, / 2h, gives
//     R u |L| / h + u sum |g_i w_i| / h;
//   g.v itself: an n-term dot product, <= gamma_n sum |g_i v_i|.
// tol = 2 (truncation + rounding) + gamma_n sum |g_i v_i|; NaN fails.
static int fd_compare(const problem *p, const double *g, const double *v, fd_result *r)
{
    const size_t n = p->m.n_params;
    double gv = 0, s_gv = 0, s_gw = 0;
    for (size_t i = 0; i < n; i++) {
        gv += g[i] * v[i];
        s_gv += fabs(g[i] * v[i]);
        if (v[i] != 0) s_gw += fabs(g[i] * p->w[i]);
    }
    r->gv = gv;
    r->d = central_diff(p, v, H);
    r->d2 = central_diff(p, v, H / 2);
    r->trunc = 4.0 / 3.0 * fabs(r->d - r->d2);
    r->round = (R_ROUND * U * fabs(p->L0) + U * s_gw) / H;
    const double gamma_n = (double)n * U / (1 - (double)n * U);
    r->tol = 2 * (r->trunc + r->round) + gamma_n * s_gv;
    r->err = fabs(gv - r->d);
    return isfinite(r->err) && isfinite(r->tol) && r->err <= r->tol;
}

// Pre-activations of the hidden layers at w (plain double; only used to keep
// relu kinks away from the segment [w - h v, w + h v]).
static void hidden_preacts(const problem *p, const double *w, double *z)
{
    const par_model *m = &p->m;
    double *a = malloc(m->max_width * sizeof *a), *y = malloc(m->max_width * sizeof *y);
    size_t k = 0;
    for (size_t s = 0; s < B; s++) {
        memcpy(a, p->x + s * m->n_inputs, m->n_inputs * sizeof *a);
        for (int l = 0; l + 1 < m->n_layers; l++) {
            const par_layer *L = &m->layers[l];
            const double *W = w + m->views[L->w_view].offset, *b = w + m->views[L->b_view].offset;
            for (size_t o = 0; o < L->n_out; o++) {
                double acc = b[o];
                for (size_t i = 0; i < L->n_in; i++)
                    acc += W[o * L->n_in + i] * a[i];
                z[k++] = acc;
                y[o] = acc > 0 ? acc : 0;
            }
            memcpy(a, y, L->n_out * sizeof *a);
        }
    }
    free(a);
    free(y);
}

static size_t n_hidden(const par_model *m)
{
    size_t n = 0;
    for (int l = 0; l + 1 < m->n_layers; l++)
        n += m->layers[l].n_out;
    return n * B;
}

// ReLU is not differentiable where a pre-activation is 0. A direction is
// usable when every hidden pre-activation keeps its sign on the whole
// segment with room to spare: |z(w)| > 4 max |z(w +/- h v) - z(w)| (the
// second-order change over h = 1e-5 is ~ 1e-10, negligible). Other
// activations are smooth: every direction is usable.
static int kink_free(const problem *p, const double *v)
{
    if (p->act != PAR_ACT_RELU || p->m.n_layers < 2) return 1;
    const size_t nh = n_hidden(&p->m), n = p->m.n_params;
    double *z0 = malloc(nh * sizeof *z0), *z1 = malloc(nh * sizeof *z1);
    hidden_preacts(p, p->w, z0);
    int ok = 1;
    for (int sgn = -1; sgn <= 1 && ok; sgn += 2) {
        for (size_t i = 0; i < n; i++)
            p->wt[i] = p->w[i] + sgn * H * v[i];
        hidden_preacts(p, p->wt, z1);
        for (size_t k = 0; k < nh && ok; k++)
            ok = fabs(z0[k]) > 4 * fabs(z1[k] - z0[k]);
    }
    free(z0);
    free(z1);
    return ok;
}

// A random unit direction over views [v0, v1) (zero elsewhere), the
// `index`-th draw; redrawn (index + 1, ...) while it crosses a relu kink.
// Returns the draw used, or -1 when MAX_TRIES draws all hit a kink.
static long draw_direction(const problem *p, double *v, int v0, int v1, long index)
{
    const par_model *m = &p->m;
    for (long k = index; k < index + MAX_TRIES; k++) {
        memset(v, 0, m->n_params * sizeof *v);
        double nrm = 0;
        for (int j = v0; j < v1; j++) {
            for (size_t i = m->views[j].offset; i < m->views[j].offset + m->views[j].count; i++) {
                v[i] = 2 * par_rng_uniform(p->seed, PAR_RNG_DATA, 1000 + (uint32_t)k, i) - 1;
                nrm += v[i] * v[i];
            }
        }
        nrm = sqrt(nrm);
        for (size_t i = 0; i < m->n_params; i++)
            v[i] /= nrm;
        if (kink_free(p, v)) return k;
    }
    return -1;
}

// Says which draws were skipped for relu kinks; fails when all were.
static int usable(const char *name, long first, long used)
{
    if (used < 0) {
        printf("  draws %ld..%ld all cross a relu kink\n", first, first + MAX_TRIES - 1);
        return par_check(0, name);
    }
    if (used > first) printf("  (draws %ld..%ld cross a relu kink: skipped)\n", first, used - 1);
    return 1;
}

static int report(const char *name, int agree, const fd_result *r)
{
    // A check that could not see a 1% error in g.v proves little.
    const int resolves = r->tol < 0.005 * fabs(r->gv);
    printf("  g.v %.15g  D(h) %.15g  D(h/2) %.15g  |diff| %.3g  tol %.3g (trunc %.3g, round "
           "%.3g)%s\n",
           r->gv, r->d, r->d2, r->err, r->tol, r->trunc, r->round,
           resolves ? "" : "  tol >= 0.5% of g.v: too coarse");
    return par_check(agree && resolves, name);
}

// The problem: inputs in [-1, 1), labels uniform, weights from
// par_model_init, biases uniform in [-0.5, 0.5) so that they are not 0.
static int setup(problem *p, const char *spec, par_act act, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    if (par_model_parse(&p->m, spec, act) != PAR_OK) return 0;
    p->act = act;
    p->seed = seed;
    const par_model *m = &p->m;
    const size_t n = m->n_params;
    p->x = malloc(B * m->n_inputs * sizeof *p->x);
    p->w = malloc(n * sizeof *p->w);
    p->g = malloc(n * sizeof *p->g);
    p->wt = malloc(n * sizeof *p->wt);
    for (size_t i = 0; i < B * m->n_inputs; i++)
        p->x[i] = 2 * par_rng_uniform(seed, PAR_RNG_DATA, 1, i) - 1;
    for (size_t s = 0; s < B; s++)
        p->labels[s] = (int32_t)(par_rng_bits(seed, PAR_RNG_DATA, 2, s) % m->n_classes);
    par_model_init(m, PAR_F64, seed, p->w);
    for (int l = 0; l < m->n_layers; l++) {
        const par_view *b = &m->views[m->layers[l].b_view];
        for (size_t i = 0; i < b->count; i++)
            p->w[b->offset + i] = par_rng_uniform(seed, PAR_RNG_DATA, 3, b->offset + i) - 0.5;
    }

    // The gradient: one reference step at lr 0, which must leave w as it was.
    ref_trainer *t;
    if (ref_create(&t, m, PAR_F64, C, 0.0, p->w) != PAR_OK) return 0;
    int ok = ref_step(t, p->x, p->labels, B, &p->L0) == PAR_OK;
    memcpy(p->g, ref_grad(t), n * sizeof *p->g);
    char name[160];
    snprintf(name, sizeof name, "%s %s seed %llu: a step at lr 0 leaves the weights bitwise", spec,
             par_act_name(act), (unsigned long long)seed);
    par_check(ok && memcmp(ref_params(t), p->w, n * sizeof *p->w) == 0, name);
    ref_destroy(t);
    return ok;
}

static void teardown(problem *p)
{
    free(p->x);
    free(p->w);
    free(p->g);
    free(p->wt);
}

static void check_model(const char *spec, par_act act, uint64_t seed)
{
    problem p;
    if (!setup(&p, spec, act, seed)) {
        printf("  %s\n", par_last_error());
        par_check(0, "setup");
        teardown(&p);
        return;
    }
    const par_model *m = &p.m;
    const size_t n = m->n_params;
    double *v = malloc(n * sizeof *v);
    char name[200];
    const char *an = m->n_layers > 1 ? par_act_name(act) : "none";
    printf("%s %s seed %llu: B %d C %d, loss %.15g, h %g\n", spec, an, (unsigned long long)seed, B,
           C, p.L0, H);
    fd_result r;

    // Whole parameter vector, a few directions.
    long next = 0;
    for (int k = 0; k < N_FULL_DIRS; k++) {
        const long used = draw_direction(&p, v, 0, m->n_views, next);
        snprintf(name, sizeof name, "grad %s %s seed %llu: all views, direction %ld", spec, an,
                 (unsigned long long)seed, used);
        if (!usable(name, next, used)) break;
        next = used + 1;
        report(name, fd_compare(&p, p.g, v, &r), &r);
    }

    // One view at a time, so that a wrong layer is named.
    int worst_view = 0;
    double worst_gv = -1;
    for (int j = 0; j < m->n_views; j++) {
        const long used = draw_direction(&p, v, j, j + 1, 100 * (long)(j + 1));
        snprintf(name, sizeof name, "grad %s %s seed %llu: %s only, direction %ld", spec, an,
                 (unsigned long long)seed, m->views[j].name, used);
        if (!usable(name, 100 * (long)(j + 1), used)) continue;
        report(name, fd_compare(&p, p.g, v, &r), &r);
        if (fabs(r.gv) > worst_gv) {
            worst_gv = fabs(r.gv);
            worst_view = j;
        }
    }

    // Negative control: the same comparisons with the gradient of one view
    // scaled by 1.01 must fail, on that view alone and on all views.
    double *bad = malloc(n * sizeof *bad);
    memcpy(bad, p.g, n * sizeof *bad);
    const par_view *wv = &m->views[worst_view];
    for (size_t i = wv->offset; i < wv->offset + wv->count; i++)
        bad[i] *= 1.01;
    long used = draw_direction(&p, v, worst_view, worst_view + 1, 100 * (long)(worst_view + 1));
    int caught = used >= 0 && !fd_compare(&p, bad, v, &r);
    used = draw_direction(&p, v, 0, m->n_views, 0);
    caught = caught && used >= 0 && !fd_compare(&p, bad, v, &r);
    snprintf(name, sizeof name, "grad %s %s seed %llu: %s x 1.01 is caught (view and all views)",
             spec, an, (unsigned long long)seed, wv->name);
    par_check(caught, name);

    free(bad);
    free(v);
    teardown(&p);
}

int main(void)
{
    check_model("mlp:12-9-7-5", PAR_ACT_RELU, 1);
    check_model("mlp:12-9-7-5", PAR_ACT_SIGMOID, 2);
    check_model("mlp:12-9-7-5", PAR_ACT_TANH, 3);
    check_model("mlp:12-5", PAR_ACT_RELU, 4);
    return par_test_exit();
}
