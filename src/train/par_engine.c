// Shared compute of the kernel-based trainers; see par_engine.h. Threads
// split samples (forward, input gradients) and parameter rows (weight
// gradients); no element's arithmetic depends on the split.
#include "par_engine.h"

#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_alloc.h"
#include "par_conv.h"
#include "par_kernels.h"
#include "par_layers.h"
#include "par_time.h"

#define at par_at

void par_engine_begin_step(par_engine *e) { e->steps++; }

// Adds the time since *t to phase p and moves *t to now. Only the caller's
// thread (or the master thread inside a region) writes e->phase.
static void phase_to(par_engine *e, par_phase p, double *t)
{
    const double now = par_now();
    e->phase[p] += now - *t;
    *t = now;
}

par_status par_engine_init(par_engine *e, const par_run_cfg *cfg)
{
    memset(e, 0, sizeof *e);
    const par_model *m = cfg->model;
    PAR_FAIL_IF(cfg->chunk == 0, PAR_ERR_CONFIG, "--chunk must be >= 1");
    PAR_FAIL_IF(cfg->batch == 0, PAR_ERR_CONFIG, "--batch must be >= 1");
    PAR_FAIL_IF(cfg->threads < 1, PAR_ERR_CONFIG, "--threads must be >= 1");
    e->m = m;
    e->dt = cfg->dtype;
    e->mode = cfg->mode;
    e->C = cfg->chunk;
    e->B_cap = cfg->batch;
    e->lr = cfg->lr;
    e->threads = cfg->threads;
    for (int l = 0; l < m->n_layers; l++) e->ops[l] = par_layer_ops_of(m->layers[l].kind);
    e->fault = cfg->fault ? *cfg->fault : *par_fault_process();
    e->optim = cfg->optim ? *cfg->optim : par_optim_default(PAR_OPTIM_SGD);
    e->pow_t = -1;
    const size_t sz = par_dtype_size(e->dt), B = e->B_cap;
    e->w = par_calloc_big(m->n_params, sz);
    e->g = par_calloc_big(m->n_params, sz);
    e->loss = par_calloc_big(B, sz);
    int ok = e->w && e->g && e->loss;
    for (int i = 0; i < par_optim_n_state(e->optim.kind) && ok; i++) {
        e->os[i] = par_calloc_big(m->n_params, sz);   // velocity, m, v start at 0
        ok = e->os[i] != NULL;
    }
    for (int l = 0; l < m->n_layers && ok; l++) {
        const par_layer *L = &m->layers[l];
        if (L->n_rows > 0) {
            e->wt[l] = par_calloc_big(par_dense_wt_elems(L->row_len, L->n_rows), sz);   // padding stays 0
            ok = e->wt[l] != NULL;
        }
        e->a[l + 1] = par_calloc_big(B * L->n_out, sz);
        e->d[l] = par_calloc_big(B * L->n_out, sz);
        ok = ok && e->a[l + 1] && e->d[l];
        if (L->kind == PAR_LAYER_BATCHNORM && ok) {
            // mean, inv, (spare), sums; then per chunk of the batch: two partial sums
            e->bn[l] = par_calloc_big((PAR_BN_SLOTS + 2 * par_n_chunks(B, e->C)) * L->c_out, sz);
            ok = e->bn[l] != NULL;
        }
        if (L->kind == PAR_LAYER_CONV2D && ok) {
            // Per thread (layer_conv.c): one sample's im2col rows, then its
            // outputs by position, or its tap gradients, or a chunk's partial
            // weight gradient (par_conv_wgrad_elems); or one padded sample and
            // the packed weights.
            const size_t n_pos = L->h_out * L->w_out, cols = n_pos * par_conv_ldcol(L);
            const size_t by_pos = n_pos * (L->row_len > L->c_out ? L->row_len : L->c_out);
            size_t need = par_conv_wgrad_elems(L, L->c_out);
            if (cols + by_pos > need) need = cols + by_pos;
            const size_t fwd = par_conv_padded_elems(L) + par_conv_pack_elems(L);
            if (fwd > need) need = fwd;
            const size_t dgrad = par_conv_dz_elems(L) + par_conv_dpack_elems(L);
            if (dgrad > need) need = dgrad;
            if (need > e->scratch_elems) e->scratch_elems = need;
        }
    }
    if (ok && e->scratch_elems > 0) {
        e->scratch = par_calloc_big((size_t)e->threads * e->scratch_elems, sz);
        ok = e->scratch != NULL;
    }
    if (!ok) {
        par_engine_free(e);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory for model %s at batch %zu", m->spec, B);
    }
    if (e->fault.kind != PAR_FAULT_NONE) {
        const par_status st = par_fault_install(e);
        if (st != PAR_OK) {
            par_engine_free(e);
            return st;
        }
    }
    memcpy(e->w, cfg->init_params, m->n_params * sz);
    par_engine_sync_wt(e);
    return PAR_OK;
}

void par_engine_free(par_engine *e)
{
    free(e->w);
    free(e->g);
    free(e->loss);
    free(e->os[0]);
    free(e->os[1]);
    for (int l = 0; l < PAR_MAX_LAYERS; l++) {
        free(e->wt[l]);
        free(e->a[l + 1]);
        free(e->d[l]);
        free(e->bn[l]);
    }
    free(e->scratch);
    par_fault_free(e);
    memset(e, 0, sizeof *e);
}

// Every layer with parameters, whole: r[0..n), returns n.
static int all_rows(const par_model *m, par_rows *r)
{
    int n = 0;
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].n_rows > 0) r[n++] = (par_rows){l, 0, m->layers[l].n_rows};
    return n;
}

// Thread t of T's share of rows r: whole layers go by par_engine_own_rows
// (the rows this thread reads next step), pieces are split evenly.
static void share_of(const par_engine *e, const par_rows *r, int t, int T, size_t *lo, size_t *hi)
{
    const par_layer *ly = &e->m->layers[r->layer];
    if (r->o0 == 0 && r->o1 == ly->n_rows) {
        par_engine_own_rows(ly, t, T, lo, hi);
        return;
    }
    par_split_range(r->o0, r->o1, t, T, lo, hi);
}

// The context of thread t of T's ops (par_layers.h).
static par_layer_ctx ctx_of(par_engine *e, int t, int T)
{
    void *scratch = e->scratch ? at(e, e->scratch, (size_t)t * e->scratch_elems) : NULL;
    return (par_layer_ctx){.e = e, .t = t, .T = T, .scratch = scratch, .ks = par_kernels_active()};
}

// Forward, loss and input gradients of samples [s0, s1): thread t of T's
// share, inside a parallel region; returns its correct predictions.
static size_t pass(par_engine *e, const par_batch *batch, size_t s0, size_t s1, int backward,
                   int t, int T)
{
    const par_model *m = e->m;
    const par_dtype dt = e->dt;
    const int L = m->n_layers;
    const size_t B = batch->B;
    size_t hits = 0;
    double tm = t == 0 ? par_now() : 0;   // the master thread times the phases
    const par_layer_ctx c = ctx_of(e, t, T);
    size_t lo, hi;
    par_engine_own_samples(s0, s1, t, T, &lo, &hi);
    if (batch->fill) {
        // Each thread assembles the samples it computes first; a first
        // layer that splits its work otherwise waits for all of them.
        par_batch_fill(batch, lo, hi);
        if (T > 1 && !par_engine_splits_samples(e, 0, s1 - s0, T)) {
#pragma omp barrier
        }
        if (t == 0) phase_to(e, PAR_PHASE_BATCH, &tm);
    }
    // Forward, layer by layer; each kind splits its work among the threads.
    // Between two per_sample layers (and after the last, the loss being per
    // sample too) a thread reads only what it wrote itself: no barrier.
    for (int l = 0; l < L; l++) {
        e->ops[l]->forward(&c, l, s0, s1);
        const int next = l + 1 == L || par_engine_splits_samples(e, l + 1, s1 - s0, T);
        if (!par_engine_splits_samples(e, l, s1 - s0, T) || !next) {
#pragma omp barrier
        }
    }
    // Loss and input gradients: each thread takes its own samples, top down;
    // a thread needs no other thread's samples, so no barrier between layers.
    if (hi > lo)
        hits += PAR_DT_CALL(dt, par_softmax_xent, e->d[L - 1], e->loss, e->a[L], batch->labels, lo, hi,
                      m->n_classes, B);
    if (t == 0) phase_to(e, PAR_PHASE_FORWARD, &tm);
    for (int l = L - 1; l >= 0 && backward; l--) {   // every thread: layers may sync
        const par_layer *ly = &m->layers[l];
        e->ops[l]->backward(&c, l, lo, hi);
        if (l > 0 && !e->ops[l]->applies_act)
            PAR_DT_CALL(dt, par_act_backward, at(e, e->d[l - 1], lo * ly->n_in),
                  at(e, e->a[l], lo * ly->n_in), (hi - lo) * ly->n_in, m->layers[l - 1].act);
    }
    if (t == 0 && backward) phase_to(e, PAR_PHASE_BACKWARD, &tm);
    return hits;
}

static void pass_begin(par_engine *e, const par_batch *batch, size_t s0, size_t s1, int backward)
{
    e->a[0] = (void *)batch->x;   // read only: layer 0's input
    e->bn_train = backward;       // batchnorm: batch statistics when training
    e->fb_s0 = s0;
    e->fb_s1 = s1;
    e->fb_B = batch->B;
}

void par_engine_forward_backward(par_engine *e, const par_batch *batch, size_t s0, size_t s1,
                                 int backward)
{
    pass_begin(e, batch, s0, s1, backward);
    size_t hits = 0;
#pragma omp parallel num_threads(e->threads) if (e->threads > 1) reduction(+ : hits)
    hits += pass(e, batch, s0, s1, backward, omp_get_thread_num(), omp_get_num_threads());
    e->hits = hits;
}

// Rows [o0, o1) of layer l for the calling thread c->t; no parallel region.
static void layer_rows(const par_layer_ctx *cx, int l, size_t B, size_t c0, size_t c1, size_t o0,
                       size_t o1, int cont)
{
    par_engine *e = cx->e;
    size_t C = e->C, s_base = 0;
    // fast mode sums each chunk range in one chain; batchnorm keeps the chunks
    // (its batch sums also build the input gradient, which fast mode keeps).
    if (e->mode == PAR_MODE_FAST && e->m->layers[l].kind != PAR_LAYER_BATCHNORM) {
        // One fma chain over all the samples of chunks [c0, c1).
        s_base = c0 * C;
        B = (c1 * C < B ? c1 * C : B) - s_base;
        C = B;
        c0 = 0;
        c1 = B > 0;
    }
    const par_grad_range r = {s_base, B, C, c0, c1, o0, o1, cont,
                              at(e, e->d[l], s_base * e->m->layers[l].n_out)};
    e->ops[l]->weight_grads(cx, l, &r);
}

void par_engine_layer_grads(par_engine *e, int l, size_t B, size_t c0, size_t c1, size_t o0,
                            size_t o1, int cont)
{
    double tm = par_now();
#pragma omp parallel num_threads(e->threads) if (e->threads > 1)
    {
        const par_layer_ctx c = ctx_of(e, omp_get_thread_num(), omp_get_num_threads());
        size_t lo, hi;
        par_split_range(o0, o1, c.t, c.T, &lo, &hi);
        if (hi > lo) layer_rows(&c, l, B, c0, c1, lo, hi, cont);
    }
    phase_to(e, PAR_PHASE_WGRAD, &tm);
}

// The weight gradients of thread t of T's rows of every layer.
static void grad_rows(par_engine *e, size_t B, size_t c0, size_t c1, int cont, int t, int T)
{
    const par_model *m = e->m;
    const par_layer_ctx c = ctx_of(e, t, T);
    for (int l = 0; l < m->n_layers; l++) {
        size_t lo, hi;
        par_engine_own_rows(&m->layers[l], t, T, &lo, &hi);
        if (hi > lo) layer_rows(&c, l, B, c0, c1, lo, hi, cont);
    }
}

void par_engine_weight_grads(par_engine *e, size_t B, size_t c0, size_t c1, int cont)
{
    double tm = par_now();
#pragma omp parallel num_threads(e->threads) if (e->threads > 1)
    grad_rows(e, B, c0, c1, cont, omp_get_thread_num(), omp_get_num_threads());
    phase_to(e, PAR_PHASE_WGRAD, &tm);
}

double par_engine_loss_fold(const par_engine *e, size_t B, size_t c0, size_t c1, double acc,
                            int cont)
{
    if (e->dt == PAR_F32)
        return par_loss_fold_f32(e->loss, B, e->C, c0, c1, (float)acc, cont);
    return par_loss_fold_f64(e->loss, B, e->C, c0, c1, acc, cont);
}

double par_engine_loss_mean(const par_engine *e, double sum, size_t B)
{
    if (e->dt == PAR_F32) return (double)((float)sum / (float)B);
    return sum / (double)B;
}

par_status par_engine_params_op(void *state, const void **w, size_t *n)
{
    const par_engine *e = state;
    *w = e->w;
    *n = e->m->n_params;
    return PAR_OK;
}

par_status par_engine_set_params_op(void *state, const void *w)
{
    par_engine *e = state;
    memcpy(e->w, w, e->m->n_params * par_dtype_size(e->dt));
    par_engine_sync_wt(e);
    return PAR_OK;
}

void par_engine_sync_rows(par_engine *e, const par_rows *r, int n)
{
    double tm = par_now();
#pragma omp parallel num_threads(e->threads) if (e->threads > 1)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        for (int i = 0; i < n; i++) {
            const par_layer *ly = &e->m->layers[r[i].layer];
            size_t lo, hi;
            share_of(e, &r[i], t, T, &lo, &hi);
            if (hi > lo)
                PAR_DT_CALL(e->dt, par_dense_transpose, e->wt[r[i].layer],
                      at(e, e->w, e->m->views[ly->w_view].offset), ly->row_len, ly->n_rows, lo, hi);
        }
    }
    phase_to(e, PAR_PHASE_UPDATE, &tm);
}

void par_engine_sync_wt(par_engine *e)
{
    par_rows r[PAR_MAX_LAYERS];
    par_engine_sync_rows(e, r, all_rows(e->m, r));
}

par_status par_engine_grad_op(void *state, const void **g)
{
    *g = ((const par_engine *)state)->g;
    return PAR_OK;
}

double par_optim_power(double b, long t)
{
    double p = 1;
    for (long i = 0; i < t; i++) p = p * b;
    return p;
}

void par_optim_coefs(par_optim_coef *k, const par_optim *o, par_dtype dt, double lr, double p1,
                     double p2)
{
    memset(k, 0, sizeof *k);
    k->kind = o->kind == PAR_OPTIM_MOMENTUM   ? PAR_UPDATE_MOMENTUM
              : o->kind == PAR_OPTIM_NESTEROV ? PAR_UPDATE_NESTEROV
                                              : PAR_UPDATE_ADAM;
    k->lr = par_round_real(dt, lr);
    k->mu = par_round_real(dt, o->momentum);
    k->b1 = par_round_real(dt, o->beta1);
    k->b2 = par_round_real(dt, o->beta2);
    k->c1 = par_round_real(dt, 1.0 - k->b1);   // the dtype's subtraction (double rounding is exact)
    k->c2 = par_round_real(dt, 1.0 - k->b2);
    k->bc1 = par_round_real(dt, 1.0 - p1);
    k->bc2 = par_round_real(dt, 1.0 - p2);
    k->eps = par_round_real(dt, o->eps);
}

par_status par_engine_get_optim_op(void *state, par_optim_state *out)
{
    par_engine *e = state;
    out->n = par_optim_n_state(e->optim.kind);
    out->arr[0] = e->os[0];
    out->arr[1] = e->os[1];
    out->t = e->opt_t;
    return PAR_OK;
}

par_status par_engine_set_step_op(void *state, long steps)
{
    ((par_engine *)state)->steps = steps;
    return PAR_OK;
}

par_status par_engine_set_optim_op(void *state, const par_optim_state *in)
{
    par_engine *e = state;
    const int n = par_optim_n_state(e->optim.kind);
    PAR_FAIL_IF(in->n != n || in->t < 0, PAR_ERR_CONFIG,
                "optimizer state of %d arrays at step %ld, optimizer %s has %d", in->n, in->t,
                par_optim_name(e->optim.kind), n);
    for (int i = 0; i < n; i++)
        memcpy(e->os[i], in->arr[i], e->m->n_params * par_dtype_size(e->dt));
    e->opt_t = in->t;
    e->pow_t = -1;
    return PAR_OK;
}

void par_engine_update_begin(par_engine *e, par_update *u)
{
    memset(u, 0, sizeof *u);
    u->sgd = e->optim.kind == PAR_OPTIM_SGD;
    if (u->sgd) return;
    const long t = ++e->opt_t;
    if (e->optim.kind == PAR_OPTIM_ADAM) {
        const double b1 = par_round_real(e->dt, e->optim.beta1),
                     b2 = par_round_real(e->dt, e->optim.beta2);
        if (e->pow_t >= 0 && e->pow_t == t - 1) {   // one more factor: the same products
            e->p1 = e->p1 * b1;
            e->p2 = e->p2 * b2;
        } else {
            e->p1 = par_optim_power(b1, t);
            e->p2 = par_optim_power(b2, t);
        }
        e->pow_t = t;
    }
    par_optim_coefs(&u->k, &e->optim, e->dt, e->lr, e->p1, e->p2);
    if (e->fault.kind != PAR_FAULT_NONE) par_fault_coefs(e, &u->k);
}

// Rows [lo, hi) of layer l: the update of weights, biases and state (and the
// panel columns), by the calling thread.
static void update_part(par_engine *e, const par_update *u, int l, size_t lo, size_t hi)
{
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const size_t wo = m->views[ly->w_view].offset, bo = m->views[ly->b_view].offset;
    if (u->sgd) {
        PAR_DT_CALL(e->dt, par_sgd_dense, at(e, e->w, wo), e->wt[l], at(e, e->g, wo), ly->row_len,
              ly->n_rows, lo, hi, e->lr);
        PAR_DT_CALL(e->dt, par_sgd, at(e, e->w, bo + lo), at(e, e->g, bo + lo), hi - lo, e->lr);
        return;
    }
    void *v_w = e->os[1] ? at(e, e->os[1], wo) : NULL;
    void *v_b = e->os[1] ? at(e, e->os[1], bo + lo) : NULL;
    PAR_DT_CALL(e->dt, par_optim_dense, at(e, e->w, wo), e->wt[l], at(e, e->os[0], wo), v_w,
          at(e, e->g, wo), ly->row_len, ly->n_rows, lo, hi, &u->k);
    PAR_DT_CALL(e->dt, par_optim, at(e, e->w, bo + lo), at(e, e->os[0], bo + lo), v_b,
          at(e, e->g, bo + lo), hi - lo, &u->k);
}

// Thread t of T's share of the update of rows r[0..n); inside a parallel region.
static void update_share(par_engine *e, const par_update *u, const par_rows *r, int n, int t, int T)
{
    for (int i = 0; i < n; i++) {
        size_t lo, hi;
        share_of(e, &r[i], t, T, &lo, &hi);
        if (hi > lo) update_part(e, u, r[i].layer, lo, hi);
    }
}

static void update_region(par_engine *e, const par_update *u, const par_rows *r, int n)
{
#pragma omp parallel num_threads(e->threads) if (e->threads > 1)
    update_share(e, u, r, n, omp_get_thread_num(), omp_get_num_threads());
}

// The update of rows r[0..n) with e's test fault, where it fires: GRAD_ULP
// before it, OPT_SWAP (a stateful optimizer) around it, rows by rows.
static void update_faulty(par_engine *e, const par_update *u, const par_rows *r, int n)
{
    if (par_fault_fires(e, PAR_FAULT_GRAD_ULP))
        for (int i = 0; i < n; i++) par_fault_grad_ulp(e, &r[i]);
    if (u->sgd || !par_fault_fires(e, PAR_FAULT_OPT_SWAP)) {
        update_region(e, u, r, n);
        return;
    }
    for (int i = 0; i < n; i++) {
        par_fault_swap_save(e, &r[i]);
        update_region(e, u, &r[i], 1);
        par_fault_swap_apply(e, &u->k, &r[i]);
        par_engine_sync_rows(e, &r[i], 1);
    }
}

void par_engine_update_rows(par_engine *e, const par_update *u, const par_rows *r, int n)
{
    double tm = par_now();
    if (e->fault.kind == PAR_FAULT_NONE)
        update_region(e, u, r, n);
    else
        update_faulty(e, u, r, n);
    phase_to(e, PAR_PHASE_UPDATE, &tm);
}

void par_engine_update(par_engine *e)
{
    par_rows r[PAR_MAX_LAYERS];
    const int n = all_rows(e->m, r);
    par_update u;
    par_engine_update_begin(e, &u);
    par_engine_update_rows(e, &u, r, n);
}

void par_engine_step(par_engine *e, const par_batch *batch)
{
    const size_t B = batch->B, n_chunks = par_n_chunks(B, e->C);
    par_update u;
    par_engine_update_begin(e, &u);   // reads no tensor: may come first
    par_rows r[PAR_MAX_LAYERS];
    const int n = all_rows(e->m, r);
    // With a test fault the update runs after the region, by
    // par_engine_update_rows (the same arithmetic); otherwise inside it.
    const int faulty = e->fault.kind != PAR_FAULT_NONE;
    pass_begin(e, batch, 0, B, 1);
    size_t hits = 0;
#pragma omp parallel num_threads(e->threads) if (e->threads > 1) reduction(+ : hits)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        hits += pass(e, batch, 0, B, 1, t, T);
        double tm = t == 0 ? par_now() : 0;
#pragma omp barrier
        // (every sample's activations and input gradients are there; the
        // backward pass no longer reads any weight)
        if (t == 0) phase_to(e, PAR_PHASE_BACKWARD, &tm);   // the wait for the others
        grad_rows(e, B, 0, n_chunks, 0, t, T);
        if (t == 0) phase_to(e, PAR_PHASE_WGRAD, &tm);
        // Each thread updates the rows whose gradient it has just computed
        // (share_of of a whole layer is its own_rows): no other thread reads
        // them before the region ends.
        if (!faulty) update_share(e, &u, r, n, t, T);
        if (t == 0) phase_to(e, PAR_PHASE_UPDATE, &tm);
    }
    e->hits = hits;
    if (faulty) par_engine_update_rows(e, &u, r, n);
}
