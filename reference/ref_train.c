// The reference trainer: buffers and the f32/f64 instantiation of
// ref_impl.inc. Run it through `parity train --trainer reference`.
#include "ref_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par_math.h"
#include "par_time.h"

struct ref_trainer {
    const par_model *m;
    par_dtype dt;
    size_t C;
    double lr;
    size_t B_cap;                       // samples the buffers hold
    void *w, *g, *loss;
    ref_optim_kind opt;                 // the optimizer and its hyperparameters as given
    double mu, b1, b2, eps;
    void *s1, *s2;                      // its state: velocity, or m and v
    long opt_steps;                     // updates done
    double *gabs;                       // NULL unless ref_track_abs
    void *a[PAR_MAX_LAYERS + 1];        // a[0] input, a[l+1] output of layer l
    void *d[PAR_MAX_LAYERS];            // d[l]: gradient at layer l's pre-activation
    void *term_dz, *term_x;             // the terms of one weight-gradient element of a sample
    void *bn_stat[PAR_MAX_LAYERS];      // batchnorm layers: the last step's S, mean, Q, var
                                        //   and inv = 1 / sqrt(var + eps), c_out each
    double phase[4];                    // seconds: forward, input grads, weight grads, update
};

// Adds the time since *t to phase k and moves *t to now.
static void phase_to(ref_trainer *t, int k, double *tm)
{
    const double now = par_now();
    t->phase[k] += now - *tm;
    *tm = now;
}

// The step is built twice on x86-64 with GCC: as written, and for
// x86-64-v3, chosen at load time where the CPU has AVX2 and FMA. There fma()
// is one instruction rather than a call into libm, and the step runs in about
// 0.6 of the time (the tests run it on every case). The bits are the same:
// fma is correctly rounded either way, and contraction is off
// (-ffp-contract=off). flatten inlines the step's helpers, so that they are
// built for the clone too.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define REF_STEP_CLONES __attribute__((flatten, target_clones("arch=x86-64-v3", "default")))
#else
#define REF_STEP_CLONES
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SFX f32
#define FMA fmaf
#define EXP par_exp_f32
#define LOG par_log_f32
#define TANH par_tanh_f32
#define SIGMOID par_sigmoid_f32
#define SQRT sqrtf
#include "ref_impl.inc"
#undef REAL
#undef SFX
#undef FMA
#undef EXP
#undef LOG
#undef TANH
#undef SIGMOID
#undef SQRT

#define REAL double
#define SFX f64
#define FMA fma
#define EXP par_exp_f64
#define LOG par_log_f64
#define TANH par_tanh_f64
#define SIGMOID par_sigmoid_f64
#define SQRT sqrt
#include "ref_impl.inc"

static void free_buffers(ref_trainer *t)
{
    for (int l = 0; l <= PAR_MAX_LAYERS; l++) {
        free(t->a[l]);
        t->a[l] = NULL;
    }
    for (int l = 0; l < PAR_MAX_LAYERS; l++) {
        free(t->d[l]);
        t->d[l] = NULL;
    }
    free(t->loss);
    t->loss = NULL;
}

// The most terms one weight-gradient element gets from one sample.
static size_t max_terms(const par_model *m)
{
    size_t n = 1;
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].n_rows && m->layers[l].n_out / m->layers[l].n_rows > n)
            n = m->layers[l].n_out / m->layers[l].n_rows;
    return n;
}

static par_status grow(ref_trainer *t, size_t B)
{
    if (B <= t->B_cap) return PAR_OK;
    free_buffers(t);
    const size_t sz = par_dtype_size(t->dt);
    const par_model *m = t->m;
    t->a[0] = malloc(B * m->n_inputs * sz);
    int ok = t->a[0] != NULL;
    for (int l = 0; l < m->n_layers; l++) {
        t->a[l + 1] = malloc(B * m->layers[l].n_out * sz);
        t->d[l] = malloc(B * m->layers[l].n_out * sz);
        ok = ok && t->a[l + 1] && t->d[l];
    }
    t->loss = malloc(B * sz);
    PAR_FAIL_IF(!ok || !t->loss, PAR_ERR_ALLOC, "reference: out of memory for batch %zu", B);
    t->B_cap = B;
    return PAR_OK;
}

par_status ref_create(ref_trainer **out, const par_model *m, par_dtype dt, size_t C, double lr,
                      const void *init_params)
{
    PAR_FAIL_IF(C == 0, PAR_ERR_CONFIG, "reference: chunk must be >= 1");
    ref_trainer *t = calloc(1, sizeof *t);
    PAR_FAIL_IF(!t, PAR_ERR_ALLOC, "reference: out of memory");
    t->m = m;
    t->dt = dt;
    t->C = C;
    t->lr = lr;
    const size_t bytes = m->n_params * par_dtype_size(dt);
    t->w = malloc(bytes);
    t->g = calloc(1, bytes);
    t->term_dz = malloc(max_terms(m) * par_dtype_size(dt));
    t->term_x = malloc(max_terms(m) * par_dtype_size(dt));
    int ok = 1;
    for (int l = 0; l < m->n_layers; l++) {
        if (m->layers[l].kind != PAR_LAYER_BATCHNORM) continue;
        t->bn_stat[l] = calloc(5 * m->layers[l].c_out, par_dtype_size(dt));
        ok = ok && t->bn_stat[l];
    }
    if (!ok || !t->w || !t->g || !t->term_dz || !t->term_x) {
        ref_destroy(t);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "reference: out of memory for %zu parameters", m->n_params);
    }
    memcpy(t->w, init_params, bytes);
    *out = t;
    return PAR_OK;
}

par_status ref_set_optimizer(ref_trainer *t, ref_optim_kind kind, double mu, double b1, double b2,
                             double eps)
{
    free(t->s1);
    free(t->s2);
    t->s1 = t->s2 = NULL;
    t->opt = kind;
    t->mu = mu;
    t->b1 = b1;
    t->b2 = b2;
    t->eps = eps;
    t->opt_steps = 0;
    const size_t n = t->m->n_params, sz = par_dtype_size(t->dt);
    if (kind != REF_SGD) t->s1 = calloc(n, sz);
    if (kind == REF_ADAM) t->s2 = calloc(n, sz);
    PAR_FAIL_IF((kind != REF_SGD && !t->s1) || (kind == REF_ADAM && !t->s2), PAR_ERR_ALLOC,
                "reference: out of memory for the optimizer state");
    return PAR_OK;
}

int ref_optim_state(ref_trainer *t, void *arr[2], long *steps)
{
    arr[0] = t->s1;
    arr[1] = t->s2;
    *steps = t->opt_steps;
    return t->opt == REF_SGD ? 0 : t->opt == REF_ADAM ? 2 : 1;
}

void ref_set_optim_steps(ref_trainer *t, long steps) { t->opt_steps = steps; }

par_status ref_step(ref_trainer *t, const void *x, const int32_t *labels, size_t B, double *loss)
{
    PAR_FAIL_IF(B == 0, PAR_ERR_CONFIG, "reference: empty batch");
    PAR_TRY(grow(t, B));
    *loss = PAR_DT_CALL(t->dt, step, t, x, labels, B);
    return PAR_OK;
}

const void *ref_params(const ref_trainer *t) { return t->w; }
const void *ref_grad(const ref_trainer *t) { return t->g; }
size_t ref_n_params(const ref_trainer *t) { return t->m->n_params; }
par_dtype ref_dtype(const ref_trainer *t) { return t->dt; }

void ref_set_params(ref_trainer *t, const void *w)
{
    memcpy(t->w, w, t->m->n_params * par_dtype_size(t->dt));
}

par_status ref_track_abs(ref_trainer *t)
{
    if (!t->gabs) t->gabs = calloc(t->m->n_params, sizeof *t->gabs);
    PAR_FAIL_IF(!t->gabs, PAR_ERR_ALLOC, "reference: out of memory");
    return PAR_OK;
}

const double *ref_grad_abs(const ref_trainer *t) { return t->gabs; }

const void *ref_act(const ref_trainer *t, int l)
{
    return l >= 0 && l <= t->m->n_layers ? t->a[l] : NULL;
}

const void *ref_delta(const ref_trainer *t, int l)
{
    return l >= 0 && l < t->m->n_layers ? t->d[l] : NULL;
}

const void *ref_losses(const ref_trainer *t) { return t->loss; }

void ref_phase_seconds(const ref_trainer *t, double out[4])
{
    memcpy(out, t->phase, sizeof t->phase);
}

const void *ref_bn_stats(const ref_trainer *t, int l)
{
    return l >= 0 && l < t->m->n_layers ? t->bn_stat[l] : NULL;
}

void ref_destroy(ref_trainer *t)
{
    if (!t) return;
    free_buffers(t);
    free(t->w);
    free(t->g);
    free(t->gabs);
    free(t->term_dz);
    free(t->term_x);
    for (int l = 0; l < PAR_MAX_LAYERS; l++) {
        free(t->bn_stat[l]);
    }
    free(t->s1);
    free(t->s2);
    free(t);
}
