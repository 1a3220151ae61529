// The engine trainers' test-only faults (par_fault, par_trainer.h; declared in
// par_engine.h): the spec parser, the process-wide fault, and what the engine
// installs when a fault is in force: a wrapper around the faulty layer's ops
// (e->ops) and the update's faults. A run without a fault never calls in
// here, so the passes, the layer ops and the update carry no fault branch.
// Negative controls: tests/verify/test_check*.c, test_cnn.c, test_bisect.c and the
// --fault runs of test_bisect.sh, test_check_cli.sh and test_verify.sh.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_layers.h"

// What an installed fault keeps (e->fs).
struct par_fault_state {
    par_layer_ops wrap;           // e->ops[layer]: the layer's ops inside the fault
    const par_layer_ops *inner;   // the layer's own ops
    void *dz;                     // SKIP_SAMPLE: per thread, B_cap n_out elements
    void *saved;                  // OPT_SWAP: w, then each state array, of the rows being updated
};

static par_fault fault;

void par_fault_set(const par_fault *f) { fault = *f; }

// The spec of each fault: its name, its kind, how many fields follow the
// name (STEP, then LAYER or INDEX, then INDEX), and whether the first after
// STEP is a layer.
static const struct {
    const char *name;
    par_fault_kind kind;
    int fields, layer;
} specs[] = {
    {"ulp", PAR_FAULT_GRAD_ULP, 2, 0},      {"skip", PAR_FAULT_SKIP_SAMPLE, 3, 1},
    {"half", PAR_FAULT_HALF_FWD, 2, 1},     {"swap", PAR_FAULT_CHUNK_SWAP, 2, 1},
    {"bnswap", PAR_FAULT_BN_SWAP, 2, 1},    {"bnvar", PAR_FAULT_BN_VAR_ULP, 3, 1},
    {"obeta", PAR_FAULT_OPT_BETA, 1, 0},    {"oswap", PAR_FAULT_OPT_SWAP, 1, 0},
};

par_status par_fault_parse(par_fault *f, const char *spec)
{
    memset(f, 0, sizeof *f);
    char kind[8];
    long a = 0, b = 0, c = 0;
    int n = sscanf(spec, "%7[a-z]:%ld:%ld:%ld", kind, &a, &b, &c);
    f->step = a;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        if (n != 1 + specs[i].fields || strcmp(kind, specs[i].name) != 0) continue;
        f->kind = specs[i].kind;
        if (specs[i].layer) f->layer = (int)b;
        if (specs[i].fields == 3) f->index = (size_t)c;
        else if (specs[i].fields == 2 && !specs[i].layer) f->index = (size_t)b;
        PAR_FAIL_IF(a < 0 || b < 0 || c < 0, PAR_ERR_CONFIG, "--fault '%s': negative field", spec);
        return PAR_OK;
    }
    return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                         "--fault '%s': expected ulp:STEP:INDEX, skip:STEP:LAYER:SAMPLE, "
                         "half:STEP:LAYER, swap:STEP:LAYER, bnswap:STEP:LAYER, "
                         "bnvar:STEP:LAYER:CHANNEL, obeta:STEP or oswap:STEP", spec);
}

const par_fault *par_fault_process(void) { return &fault; }

int par_fault_fires(const par_engine *e, par_fault_kind kind)
{
    const par_fault *f = &e->fault;
    return f->kind == kind && (f->step == 0 || f->step == e->steps);
}

// PAR_FAULT_HALF_FWD: keep 11 significant bits of y[lo..hi) (f16-like).
static void round_to_half(const par_engine *e, void *y, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) {
        double v = par_get_real(e->dt, y, i);
        int ex;
        double m = frexp(v, &ex);
        v = ldexp(nearbyint(ldexp(m, 11)), ex - 11);
        par_put_real(e->dt, y, i, v);
    }
}

// The layer's forward, with BN_SWAP or BN_VAR_ULP inside batchnorm's
// statistics, then HALF_FWD on every output of samples [s0, s1). Every
// thread calls it (par_layers.h), so it may wait for all of them.
static void wrap_forward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    par_engine *e = c->e;
    if (par_fault_fires(e, PAR_FAULT_BN_SWAP) || par_fault_fires(e, PAR_FAULT_BN_VAR_ULP))
        par_bn_forward_fault(c, l, s0, s1, &e->fault);
    else
        e->fs->inner->forward(c, l, s0, s1);
    if (!par_fault_fires(e, PAR_FAULT_HALF_FWD)) return;
    const size_t n = e->m->layers[l].n_out;
#pragma omp barrier
    // (every thread's share of the outputs is there)
    if (c->t == 0) round_to_half(e, e->a[l + 1], s0 * n, s1 * n);
#pragma omp barrier
}

static void wrap_backward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    c->e->fs->inner->backward(c, l, s0, s1);
}

// The layer's weight gradient with SKIP_SAMPLE (sample `index` of r: its
// output gradient row read as zeros, from the calling thread's copy; the
// input gradients and the checker still see the real one) or CHUNK_SWAP (a
// fresh fold of >= 3 chunks as ((g1 + g2) + g0) + g3 + ...: a real
// reordering; swapping two chunks alone would not show, IEEE addition being
// commutative).
static void wrap_grads(const par_layer_ctx *c, int l, const par_grad_range *r)
{
    par_engine *e = c->e;
    const par_fault_state *fs = e->fs;
    par_grad_range g = *r;
    if (par_fault_fires(e, PAR_FAULT_SKIP_SAMPLE) && e->fault.index < r->B) {
        const size_t row = e->m->layers[l].n_out * par_dtype_size(e->dt);
        void *copy = (char *)fs->dz + (size_t)c->t * e->B_cap * row;
        memcpy(copy, r->dz, r->B * row);
        memset((char *)copy + e->fault.index * row, 0, row);
        g.dz = copy;
    }
    if (par_fault_fires(e, PAR_FAULT_CHUNK_SWAP) && !r->cont && r->c0 == 0 && r->c1 >= 3) {
        const size_t from[3] = {1, 0, 3}, to[3] = {3, 1, r->c1};
        for (int k = 0; k < 3 && from[k] < to[k]; k++) {
            g.c0 = from[k];
            g.c1 = to[k];
            g.cont = k > 0;
            fs->inner->weight_grads(c, l, &g);
        }
        return;
    }
    fs->inner->weight_grads(c, l, &g);
}

// 1: fault f changes what its layer's ops compute (and so needs the wrapper).
static int wraps_layer(const par_engine *e, const par_fault *f)
{
    if (f->layer < 0 || f->layer >= e->m->n_layers) return 0;
    const par_layer *ly = &e->m->layers[f->layer];
    switch (f->kind) {
    case PAR_FAULT_HALF_FWD:
        return 1;
    case PAR_FAULT_SKIP_SAMPLE:
    case PAR_FAULT_CHUNK_SWAP:
        return ly->n_rows > 0;
    case PAR_FAULT_BN_SWAP:
    case PAR_FAULT_BN_VAR_ULP:
        return ly->kind == PAR_LAYER_BATCHNORM;
    default:
        return 0;
    }
}

par_status par_fault_install(par_engine *e)
{
    const par_fault *f = &e->fault;
    const size_t sz = par_dtype_size(e->dt);
    par_fault_state *fs = calloc(1, sizeof *fs);
    PAR_FAIL_IF(!fs, PAR_ERR_ALLOC, "out of memory for the test fault");
    e->fs = fs;
    int ok = 1;
    if (wraps_layer(e, f)) {
        fs->inner = e->ops[f->layer];
        fs->wrap = *fs->inner;
        fs->wrap.forward = wrap_forward;
        fs->wrap.backward = wrap_backward;
        if (fs->inner->weight_grads) fs->wrap.weight_grads = wrap_grads;
        e->ops[f->layer] = &fs->wrap;
        if (f->kind == PAR_FAULT_SKIP_SAMPLE) {
            fs->dz = calloc((size_t)e->threads * e->B_cap * e->m->layers[f->layer].n_out, sz);
            ok = fs->dz != NULL;
        }
    }
    if (f->kind == PAR_FAULT_OPT_SWAP && e->optim.kind != PAR_OPTIM_SGD) {
        const size_t n = (size_t)(1 + par_optim_n_state(e->optim.kind)) * e->m->n_params;
        fs->saved = malloc(n * sz);
        ok = ok && fs->saved != NULL;
    }
    PAR_FAIL_IF(!ok, PAR_ERR_ALLOC, "out of memory for the test fault");
    return PAR_OK;
}

void par_fault_free(par_engine *e)
{
    if (!e->fs) return;
    free(e->fs->dz);
    free(e->fs->saved);
    free(e->fs);
    e->fs = NULL;
}

void par_fault_coefs(const par_engine *e, par_optim_coef *k)
{
    if (!par_fault_fires(e, PAR_FAULT_OPT_BETA)) return;
    k->mu += 0x1p-10;   // mu, b1 in [0.5, 1): + 2^-10 stays exact
    k->b1 += 0x1p-10;
}

// The two flat ranges of rows r: its W rows and its bias entries.
static void rows_ranges(const par_engine *e, const par_rows *r, size_t i0[2], size_t i1[2])
{
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[r->layer];
    const size_t wo = m->views[ly->w_view].offset, bo = m->views[ly->b_view].offset;
    i0[0] = wo + r->o0 * ly->row_len;
    i1[0] = wo + r->o1 * ly->row_len;
    i0[1] = bo + r->o0;
    i1[1] = bo + r->o1;
}

void par_fault_grad_ulp(par_engine *e, const par_rows *r)
{
    const size_t fi = e->fault.index;
    size_t i0[2], i1[2];
    rows_ranges(e, r, i0, i1);
    if (!((fi >= i0[0] && fi < i1[0]) || (fi >= i0[1] && fi < i1[1]))) return;
    if (e->dt == PAR_F32) {
        float *g = e->g;
        g[fi] = nextafterf(g[fi], INFINITY);
    } else {
        double *g = e->g;
        g[fi] = nextafter(g[fi], INFINITY);
    }
}

// The saved copy a (0: w, 1 + i: state i) of the rows being updated, n_params apart.
static void *saved(const par_engine *e, int a)
{
    return par_at(e, e->fs->saved, (size_t)a * e->m->n_params);
}

void par_fault_swap_save(par_engine *e, const par_rows *r)
{
    const size_t sz = par_dtype_size(e->dt);
    size_t i0[2], i1[2];
    rows_ranges(e, r, i0, i1);
    for (int a = 0; a <= par_optim_n_state(e->optim.kind); a++) {
        const void *src = a == 0 ? e->w : e->os[a - 1];
        memcpy(saved(e, a), par_at(e, src, i0[0]), (i1[0] - i0[0]) * sz);
        memcpy(par_at(e, saved(e, a), i1[0] - i0[0]), par_at(e, src, i0[1]), (i1[1] - i0[1]) * sz);
    }
}

void par_fault_swap_apply(par_engine *e, const par_optim_coef *k, const par_rows *r)
{
    const void *w0 = saved(e, 0), *m0 = saved(e, 1);
    const void *v0 = par_optim_n_state(e->optim.kind) > 1 ? saved(e, 2) : NULL;
    size_t i0[2], i1[2];
    rows_ranges(e, r, i0, i1);
    size_t j = 0;   // index into the copies: the W rows, then the biases
    for (int part = 0; part < 2; part++)
        for (size_t i = i0[part]; i < i1[part]; i++, j++) {
            const double m = par_get_real(e->dt, m0, j), g = par_get_real(e->dt, e->g, i);
            double st = m;
            if (k->kind == PAR_UPDATE_NESTEROV) st = g + k->mu * m;
            if (k->kind == PAR_UPDATE_ADAM)
                st = (m / k->bc1) / (sqrt(par_get_real(e->dt, v0, j) / k->bc2) + k->eps);
            par_put_real(e->dt, e->w, i, par_get_real(e->dt, w0, j) - k->lr * st);
        }
}
