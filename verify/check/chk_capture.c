// Capture one step of a run for the MPFR checker: which records a step of
// `parity train` uses, and the tensors a trainer computes on them (its own
// internals for the reference, a par_engine replica of the step for the
// kernel trainers). Runs trainers; no MPFR. Tests: tests/verify/test_check*.c.
#include <stdlib.h>
#include <string.h>

#include "chk_check.h"
#include "par_engine.h"
#include "par_run.h"
#include "ref_train.h"

par_status chk_step_records(size_t **idx, size_t *B, int *epoch, const par_dataset *ds,
                            uint64_t seed, size_t batch, long step)
{
    *idx = NULL;
    const size_t n = ds->n_train;
    PAR_FAIL_IF(n == 0, PAR_ERR_CONFIG, "dataset %s has no training records", ds->name);
    PAR_FAIL_IF(batch == 0, PAR_ERR_CONFIG, "--batch must be >= 1");
    PAR_FAIL_IF(step < 1, PAR_ERR_CONFIG, "--step %ld: steps count from 1", step);
    const size_t per_epoch = (n + batch - 1) / batch;
    const size_t e = (size_t)(step - 1) / per_epoch;
    PAR_FAIL_IF(e > 1000000000u, PAR_ERR_CONFIG, "--step %ld: epoch %zu is out of range", step, e);
    const size_t pos = ((size_t)(step - 1) - e * per_epoch) * batch;
    *B = n - pos < batch ? n - pos : batch;
    *epoch = (int)e;
    size_t *order;
    PAR_TRY(par_epoch_order(&order, n, seed, (int)e));
    *idx = malloc(*B * sizeof **idx);
    if (*idx) memcpy(*idx, order + pos, *B * sizeof **idx);
    free(order);
    PAR_FAIL_IF(!*idx, PAR_ERR_ALLOC, "out of memory");
    return PAR_OK;
}

void chk_step_free(chk_step *s)
{
    free(s->x);
    free(s->labels);
    free(s->w);
    free(s->w_new);
    free(s->g);
    free(s->loss_s);
    for (int i = 0; i < 2; i++) {
        free(s->s[i]);
        free(s->s_new[i]);
    }
    for (int l = 0; l < PAR_MAX_LAYERS; l++) {
        free(s->a[l + 1]);
        free(s->d[l]);
        free(s->bn[l]);
    }
    memset(s, 0, sizeof *s);
}

static void copy_layers(chk_step *s, const void *const *a, const void *const *d)
{
    const size_t sz = par_dtype_size(s->dt);
    for (int l = 0; l < s->m->n_layers; l++) {
        const size_t bytes = s->B * s->m->layers[l].n_out * sz;
        memcpy(s->a[l + 1], a[l + 1], bytes);
        memcpy(s->d[l], d[l], bytes);
    }
}

static par_status run_reference(chk_step *s)
{
    PAR_FAIL_IF(s->mode != PAR_MODE_EXACT, PAR_ERR_CONFIG,
                "--trainer reference: only --mode exact exists (it defines exact)");
    const size_t sz = par_dtype_size(s->dt), N = s->m->n_params;
    ref_trainer *t;
    PAR_TRY(ref_create(&t, s->m, s->dt, s->C, s->lr, s->w));
    const int ns = par_optim_n_state(s->optim.kind);
    par_status st = PAR_OK;
    if (ns) {
        static const ref_optim_kind kinds[] = {REF_SGD, REF_MOMENTUM, REF_NESTEROV, REF_ADAM};
        const par_optim *o = &s->optim;
        st = ref_set_optimizer(t, kinds[o->kind], o->momentum, o->beta1, o->beta2, o->eps);
        void *arr[2];
        long steps;
        if (st == PAR_OK && ref_optim_state(t, arr, &steps) == ns) {
            for (int i = 0; i < ns; i++) memcpy(arr[i], s->s[i], N * sz);
            ref_set_optim_steps(t, s->opt_t - 1);
        }
    }
    if (st == PAR_OK) st = ref_step(t, s->x, s->labels, s->B, &s->loss);
    if (st == PAR_OK) {
        const void *a[PAR_MAX_LAYERS + 1], *d[PAR_MAX_LAYERS];
        for (int l = 0; l < s->m->n_layers; l++) {
            a[l + 1] = ref_act(t, l + 1);
            d[l] = ref_delta(t, l);
        }
        copy_layers(s, a, d);
        for (int l = 0; l < s->m->n_layers; l++)
            if (s->bn[l])
                memcpy(s->bn[l], ref_bn_stats(t, l), CHK_BN_N * s->m->layers[l].c_out * sz);
        memcpy(s->loss_s, ref_losses(t), s->B * sz);
        memcpy(s->g, ref_grad(t), N * sz);
        memcpy(s->w_new, ref_params(t), N * sz);
        void *arr[2];
        long steps;
        if (ns && ref_optim_state(t, arr, &steps) == ns)
            for (int i = 0; i < ns; i++) memcpy(s->s_new[i], arr[i], N * sz);
        s->internals = "the reference's own buffers";
    }
    ref_destroy(t);
    return st;
}

// The engine's statistics of batchnorm layer l (layer_bn_impl.inc keeps
// mean, inv, var, the fold's accumulator, S, Q per channel) in CHK_BN_* order.
static void engine_bn_stats(chk_step *s, const par_engine *e, int l)
{
    const size_t sz = par_dtype_size(s->dt), nc = s->m->layers[l].c_out;
    static const int slot[CHK_BN_N] = {4, 0, 5, 2, 1};   // S, mean, Q, var, inv
    for (int k = 0; k < CHK_BN_N; k++)
        memcpy((char *)s->bn[l] + k * nc * sz, (const char *)e->bn[l] + slot[k] * nc * sz, nc * sz);
}

static par_status run_table(chk_step *s, const par_trainer_ops *tr, const par_run_cfg *cfg,
                            const par_batch *batch)
{
    const size_t sz = par_dtype_size(s->dt), N = s->m->n_params;
    void *state = NULL;
    PAR_TRY(tr->create(cfg, &state));
    const void *g, *w;
    size_t n = 0;
    const int ns = par_optim_n_state(s->optim.kind);
    par_status st = PAR_OK;
    if (ns) {
        if (!tr->set_optim || !tr->get_optim)
            st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                               "--trainer %s does not expose its optimizer state", tr->name);
        const par_optim_state in = {ns, {s->s[0], s->s[1]}, s->opt_t - 1};
        if (st == PAR_OK) st = tr->set_optim(state, &in);
    }
    if (st == PAR_OK) st = tr->step(state, batch, &s->loss);
    if (st == PAR_OK) st = tr->grad(state, &g);
    if (st == PAR_OK) st = tr->params(state, &w, &n);
    if (st == PAR_OK && n != N)
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                           "trainer %s has %zu parameters, the model %zu", tr->name, n, N);
    if (st == PAR_OK) {
        memcpy(s->g, g, N * sz);
        memcpy(s->w_new, w, N * sz);
    }
    par_optim_state now = {0, {NULL, NULL}, 0};
    if (st == PAR_OK && ns) st = tr->get_optim(state, &now);
    if (st == PAR_OK && ns && (now.n != ns || now.t != s->opt_t))
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                           "--trainer %s: optimizer state of %d arrays at update %ld after the "
                           "step, expected %d at %ld", tr->name, now.n, now.t, ns, s->opt_t);
    for (int i = 0; st == PAR_OK && i < ns; i++) memcpy(s->s_new[i], now.arr[i], N * sz);
    tr->destroy(state);
    PAR_TRY(st);
    // The activations, deltas and per-sample losses of the same step: an
    // engine's forward/backward is what every kernel trainer runs, element
    // for element; fast mode changes only the batch reductions (the weight
    // gradient and the loss fold), which the engine does not run here.
    par_engine e;
    PAR_TRY(par_engine_init(&e, cfg));
    par_engine_begin_step(&e);
    par_engine_forward_backward(&e, batch, 0, s->B, 1);
    copy_layers(s, (const void *const *)e.a, (const void *const *)e.d);
    for (int l = 0; l < s->m->n_layers; l++)
        if (s->bn[l]) engine_bn_stats(s, &e, l);
    memcpy(s->loss_s, e.loss, s->B * sz);
    par_engine_free(&e);
    s->internals = "a par_engine replica of the step";
    return PAR_OK;
}

par_status chk_capture(chk_step *s, const par_trainer_ops *tr, const par_run_cfg *cfg,
                       const par_batch *batch)
{
    return chk_capture_state(s, tr, cfg, batch, NULL);
}

par_status chk_capture_state(chk_step *s, const par_trainer_ops *tr, const par_run_cfg *cfg,
                             const par_batch *batch, const par_optim_state *start)
{
    memset(s, 0, sizeof *s);
    const par_model *m = cfg->model;
    const par_optim optim = cfg->optim ? *cfg->optim : par_optim_default(PAR_OPTIM_SGD);
    const int ns = par_optim_n_state(optim.kind);
    PAR_FAIL_IF(start && (start->n != ns || start->t < 0), PAR_ERR_CONFIG,
                "check: optimizer state of %d arrays at update %ld, --optim %s has %d",
                start->n, start->t, par_optim_name(optim.kind), ns);
    PAR_FAIL_IF(!tr->grad, PAR_ERR_CONFIG, "--trainer %s does not expose its gradient", tr->name);
    PAR_FAIL_IF(batch->B == 0 || batch->B > cfg->batch, PAR_ERR_CONFIG,
                "check: batch of %zu samples, expected 1..%zu", batch->B, cfg->batch);
    const size_t sz = par_dtype_size(cfg->dtype), B = batch->B, N = m->n_params;
    s->m = m;
    s->dt = cfg->dtype;
    s->mode = cfg->mode;
    s->B = B;
    s->C = cfg->chunk;
    s->lr = par_round_real(cfg->dtype, cfg->lr);
    s->trainer = tr->name;
    s->optim = optim;
    s->opt_t = (start ? start->t : 0) + 1;
    s->x = malloc(B * m->n_inputs * sz);
    s->labels = malloc(B * sizeof *s->labels);
    s->w = malloc(N * sz);
    s->w_new = malloc(N * sz);
    s->g = malloc(N * sz);
    s->loss_s = malloc(B * sz);
    int ok = s->x && s->labels && s->w && s->w_new && s->g && s->loss_s;
    for (int i = 0; i < ns && ok; i++) {
        s->s[i] = calloc(N, sz);
        s->s_new[i] = malloc(N * sz);
        ok = s->s[i] && s->s_new[i];
        if (ok && start) memcpy(s->s[i], start->arr[i], N * sz);
    }
    for (int l = 0; l < m->n_layers && ok; l++) {
        s->a[l + 1] = malloc(B * m->layers[l].n_out * sz);
        s->d[l] = malloc(B * m->layers[l].n_out * sz);
        ok = s->a[l + 1] && s->d[l];
        if (ok && m->layers[l].kind == PAR_LAYER_BATCHNORM) {
            s->bn[l] = malloc(CHK_BN_N * m->layers[l].c_out * sz);
            ok = s->bn[l] != NULL;
        }
    }
    if (!ok) {
        chk_step_free(s);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory for one step of %s", m->spec);
    }
    memcpy(s->x, batch->x, B * m->n_inputs * sz);
    memcpy(s->labels, batch->labels, B * sizeof *s->labels);
    memcpy(s->w, cfg->init_params, N * sz);
    s->a[0] = s->x;
    par_status st =
        strcmp(tr->name, "reference") == 0 ? run_reference(s) : run_table(s, tr, cfg, batch);
    if (st != PAR_OK) chk_step_free(s);
    return st;
}
