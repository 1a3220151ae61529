// Training loop (resumable, NaN/Inf-checked) and evaluation; see par_run.h.
#include "par_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_engine.h"
#include "par_rng.h"
#include "par_time.h"

par_status par_epoch_order(size_t **order, size_t n_train, uint64_t seed, int epoch)
{
    *order = malloc((n_train ? n_train : 1) * sizeof **order);
    PAR_FAIL_IF(!*order, PAR_ERR_ALLOC, "out of memory for the order of %zu samples", n_train);
    par_rng_shuffle(*order, n_train, seed, (uint32_t)epoch);
    return PAR_OK;
}

// 1 if any of n elements is NaN or Inf: some element's exponent bits are all
// ones, i.e. (~bits & EXP) == 0. The min over 16 fixed lanes is an integer
// reduction the compiler vectorises at -O2, so the scan costs little of a step.
#define FINITE_SCAN(NAME, UINT, EXP)                                        \
    static int NAME(const UINT *u, size_t n)                                \
    {                                                                       \
        enum { LANES = 16 };                                                \
        UINT acc[LANES];                                                    \
        for (int j = 0; j < LANES; j++) acc[j] = EXP;                       \
        size_t i = 0;                                                       \
        for (; i + LANES <= n; i += LANES)                                  \
            for (int j = 0; j < LANES; j++) {                               \
                const UINT v = ~u[i + j] & (EXP);                           \
                acc[j] = v < acc[j] ? v : acc[j];                           \
            }                                                               \
        UINT m = EXP;                                                       \
        for (; i < n; i++) m = (~u[i] & (EXP)) < m ? (~u[i] & (EXP)) : m;   \
        for (int j = 0; j < LANES; j++) m = acc[j] < m ? acc[j] : m;        \
        return m == 0;                                                      \
    }
FINITE_SCAN(any_nonfinite_32, uint32_t, UINT32_C(0x7f800000))
FINITE_SCAN(any_nonfinite_64, uint64_t, UINT64_C(0x7ff0000000000000))

static int any_nonfinite(const void *p, par_dtype dt, size_t n)
{
    return dt == PAR_F32 ? any_nonfinite_32(p, n) : any_nonfinite_64(p, n);
}

// The same on `threads` threads (the trainer's), so that the check costs
// the same share of a step whatever the thread count. An integer OR: exact.
static int any_nonfinite_threads(const void *p, par_dtype dt, size_t n, int threads)
{
    if (threads <= 1 || n < ((size_t)1 << 16)) return any_nonfinite(p, dt, n);
    const size_t sz = par_dtype_size(dt);
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad)
    for (int t = 0; t < threads; t++) {
        const size_t lo = n * (size_t)t / (size_t)threads, hi = n * (size_t)(t + 1) / (size_t)threads;
        bad |= any_nonfinite((const char *)p + lo * sz, dt, hi - lo);
    }
    return bad;
}

int par_find_nonfinite(char *where, size_t cap, const par_model *m, par_dtype dt,
                       const void *params)
{
    if (!any_nonfinite(params, dt, m->n_params)) return 0;
    for (int v = 0; v < m->n_views; v++) {
        const par_view *w = &m->views[v];
        for (size_t i = 0; i < w->count; i++) {
            const size_t k = w->offset + i;
            const double x = par_get_real(dt, params, k);
            if (isfinite(x)) continue;
            if (w->ndim == 2)
                snprintf(where, cap, "%s[%zu][%zu] = %g", w->name, i / w->shape[1],
                         i % w->shape[1], x);
            else
                snprintf(where, cap, "%s[%zu] = %g", w->name, i, x);
            return 1;
        }
    }
    snprintf(where, cap, "an element outside every view");
    return 1;
}

// After step `step`: the loss and every weight must be finite. Both are the
// same on every rank, so every rank decides alike. The gradient (complete
// on this rank or not) only helps name where it started.
static par_status check_finite(const par_run_opts *o, void *state, int epoch, long step,
                               int last, double loss)
{
    const par_model *m = o->cfg.model;
    const void *w = NULL;
    size_t n;
    char wbad[160] = "", gbad[160] = "", msg[400];
    const int scan = (o->check_every > 0 && (step % o->check_every == 0 || last)) ||
                     !isfinite(loss);
    if (scan) PAR_TRY(o->trainer->params(state, &w, &n));
    const int w_bad = scan &&
                      any_nonfinite_threads(w, o->cfg.dtype, m->n_params, o->cfg.threads) &&
                      par_find_nonfinite(wbad, sizeof wbad, m, o->cfg.dtype, w);
    if (isfinite(loss) && !w_bad) return PAR_OK;
    const void *g = NULL;
    const int g_bad = o->trainer->grad && o->trainer->grad(state, &g) == PAR_OK && g &&
                      par_find_nonfinite(gbad, sizeof gbad, m, o->cfg.dtype, g);
    int k = snprintf(msg, sizeof msg, "step %ld (epoch %d):", step, epoch);
    if (!isfinite(loss) && k >= 0 && (size_t)k < sizeof msg)
        k += snprintf(msg + k, sizeof msg - (size_t)k, " loss = %g;", loss);
    if (g_bad && k >= 0 && (size_t)k < sizeof msg)
        k += snprintf(msg + k, sizeof msg - (size_t)k, " gradient %s;", gbad);
    if (w_bad && k >= 0 && (size_t)k < sizeof msg)
        k += snprintf(msg + k, sizeof msg - (size_t)k, " weight %s after the update;", wbad);
    if (k > 0 && (size_t)k < sizeof msg) msg[k - 1] = '\0';   // drop the last ';'
    return par_set_error(PAR_ERR_NUMERIC, __FILE__, __LINE__,
                         "%s: not finite (learning rate too large?)", msg);
}

par_status par_run_optim(const par_run_now *now, par_optim_state *out)
{
    memset(out, 0, sizeof *out);
    if (now->optim == PAR_OPTIM_SGD) return PAR_OK;
    PAR_FAIL_IF(!now->trainer->get_optim, PAR_ERR_CONFIG,
                "trainer %s has no optimizer state access", now->trainer->name);
    return now->trainer->get_optim(now->state, out);
}

static par_status check_start(const par_run_opts *o, const par_run_point *p)
{
    const size_t n_train = o->ds->n_train, B = o->cfg.batch;
    const long per_epoch = (long)((n_train + B - 1) / B);
    PAR_FAIL_IF(p->epoch < 0 || p->pos > n_train || p->step < 0, PAR_ERR_CONFIG,
                "resume point epoch %d, record %zu, step %ld is outside the run", p->epoch,
                p->pos, p->step);
    PAR_FAIL_IF(p->epoch >= o->epochs, PAR_ERR_CONFIG,
                "resume point is in epoch %d (0-based), but the run has --epochs %d", p->epoch,
                o->epochs);
    const long want = (long)p->epoch * per_epoch + (long)((p->pos + B - 1) / B);
    PAR_FAIL_IF(want != p->step, PAR_ERR_CONFIG,
                "resume point says step %ld, but epoch %d, record %zu is step %ld for "
                "batch %zu and %zu training records", p->step, p->epoch, p->pos, want, B,
                n_train);
    return PAR_OK;
}

par_status par_run(const par_run_opts *o, const par_run_hooks *h, void *final_params,
                   long *steps_done, par_trainer_stats *stats)
{
    if (stats) memset(stats, 0, sizeof *stats);
    const par_model *m = o->cfg.model;
    const par_dataset *ds = o->ds;
    const size_t Bmax = o->cfg.batch, n_train = ds->n_train;
    const size_t sz = par_dtype_size(o->cfg.dtype);
    *steps_done = 0;
    PAR_FAIL_IF(ds->train.n_features != m->n_inputs, PAR_ERR_CONFIG,
                "--model %s takes %zu inputs but dataset %s has %zu features per sample",
                m->spec, m->n_inputs, ds->name, ds->train.n_features);
    const par_layer *l0 = &m->layers[0];
    PAR_FAIL_IF(m->is_cnn && l0->kind != PAR_LAYER_DENSE &&
                    (l0->c_in != ds->train.channels || l0->h_in != ds->train.height ||
                     l0->w_in != ds->train.width),
                PAR_ERR_CONFIG, "--model %s takes %zux%zux%zu images but dataset %s has %zux%zux%zu",
                m->spec, l0->c_in, l0->h_in, l0->w_in, ds->name, ds->train.channels,
                ds->train.height, ds->train.width);
    PAR_FAIL_IF(ds->n_classes != m->n_classes, PAR_ERR_CONFIG,
                "--model %s has %zu outputs but dataset %s has %zu classes", m->spec,
                m->n_classes, ds->name, ds->n_classes);
    PAR_FAIL_IF(n_train == 0, PAR_ERR_CONFIG, "dataset %s has no training records", ds->name);
    PAR_FAIL_IF(o->epochs < 1, PAR_ERR_CONFIG, "--epochs must be >= 1");
    const par_run_point p0 = {0, 0, 0}, *start = o->start ? o->start : &p0;
    if (o->start) PAR_TRY(check_start(o, o->start));

    const par_optim_kind okind = o->cfg.optim ? o->cfg.optim->kind : PAR_OPTIM_SGD;
    PAR_FAIL_IF(o->start && !o->start_optim && okind != PAR_OPTIM_SGD, PAR_ERR_CONFIG,
                "resuming optimizer %s needs its state", par_optim_name(okind));
    PAR_FAIL_IF(o->start_optim && okind != PAR_OPTIM_SGD &&
                    (!o->trainer->get_optim || !o->trainer->set_optim),
                PAR_ERR_CONFIG, "trainer %s has no optimizer state access", o->trainer->name);

    void *state = NULL;
    PAR_TRY(o->trainer->create(&o->cfg, &state));
    if (o->start && o->start_optim && o->trainer->set_optim) {
        const par_status s0 = o->trainer->set_optim(state, o->start_optim);
        if (s0 != PAR_OK) {
            o->trainer->destroy(state);
            return s0;
        }
    }
    void *xb = malloc(Bmax * m->n_inputs * sz);
    int32_t *labels = malloc(Bmax * sizeof *labels);
    size_t *order = NULL;
    par_status st = (xb && labels) ? PAR_OK
                                  : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__,
                                                  "out of memory for a batch of %zu", Bmax);
    long step = start->step;
    const int limited = o->max_steps > 0;
    double run_ph[PAR_PHASE_N] = {0};   // par_run's own phases: batch and log
    for (int epoch = start->epoch; st == PAR_OK && epoch < o->epochs; epoch++) {
        free(order);
        order = NULL;
        st = par_epoch_order(&order, n_train, o->seed, epoch);
        const size_t first = epoch == start->epoch ? start->pos : 0;
        for (size_t pos = first; st == PAR_OK && pos < n_train; pos += Bmax) {
            if (limited && step >= o->max_steps) break;
            const size_t B = n_train - pos < Bmax ? n_train - pos : Bmax;
            double t0 = par_now();
            // The trainer's threads assemble their own samples, or it is done here.
            par_data_batch src = {&ds->train, order + pos, o->cfg.dtype};
            const int fills = (o->trainer->caps & PAR_CAP_FILLS_BATCH) != 0;
            if (!fills) par_data_batch_fill(&src, 0, B, xb, labels);
            const par_batch batch = {.x = xb, .labels = labels, .B = B,
                                     .fill = fills ? par_data_batch_fill : NULL, .fill_ctx = &src};
            double loss = 0;
            run_ph[PAR_PHASE_BATCH] += par_now() - t0;
            st = o->trainer->step(state, &batch, &loss);
            step++;
            t0 = par_now();
            if (st == PAR_OK && o->check_finite) {
                const int last = (limited && step >= o->max_steps) ||
                                 (epoch == o->epochs - 1 && pos + B >= n_train);
                st = check_finite(o, state, epoch, step, last, loss);
            }
            const void *w = NULL;
            size_t n;
            const int lazy = (o->trainer->caps & PAR_CAP_LAZY_PARAMS) && h && h->wants_params;
            if (st == PAR_OK && h && (h->on_step || h->after_step) &&
                (!lazy || h->wants_params(h->ctx, step)))
                st = o->trainer->params(state, &w, &n);
            if (st == PAR_OK && h && h->on_step) st = h->on_step(h->ctx, epoch, step, B, loss, w);
            if (st == PAR_OK && h && h->after_step) {
                const par_run_point pt = {epoch, pos + B, step};
                const par_run_now now = {o->trainer, state, okind, run_ph};
                st = h->after_step(h->ctx, &pt, w, &now);
            }
            run_ph[PAR_PHASE_LOG] += par_now() - t0;
        }
        const void *w;
        size_t n;
        if (st == PAR_OK) st = o->trainer->params(state, &w, &n);
        if (st == PAR_OK && h && h->on_epoch) st = h->on_epoch(h->ctx, epoch, step, w);
        if (limited && step >= o->max_steps) break;
    }
    if ((st == PAR_OK || st == PAR_RUN_STOP) && final_params) {
        const void *w;
        size_t n;
        const par_status s2 = o->trainer->params(state, &w, &n);
        if (s2 == PAR_OK) memcpy(final_params, w, m->n_params * sz);
        else st = s2;
    }
    if ((st == PAR_OK || st == PAR_RUN_STOP) && stats && o->trainer->stats) {
        const par_status s2 = o->trainer->stats(state, stats);
        if (s2 != PAR_OK) st = s2;
    }
    if (stats) {
        stats->phase[PAR_PHASE_BATCH] += run_ph[PAR_PHASE_BATCH];   // and the trainer's
        stats->phase[PAR_PHASE_LOG] = run_ph[PAR_PHASE_LOG];
    }
    *steps_done = step;
    free(order);
    free(xb);
    free(labels);
    o->trainer->destroy(state);
    return st;
}

par_status par_evaluate(const par_model *m, par_dtype dt, const void *params,
                        const par_images *im, size_t first, size_t count, int threads,
                        double *loss, double *accuracy)
{
    enum { EB = 500 };
    *loss = 0;
    *accuracy = 0;
    if (count == 0) return PAR_OK;
    PAR_FAIL_IF(first + count > im->n, PAR_ERR_CONFIG, "evaluation range past %zu records", im->n);
    const par_run_cfg cfg = {.model = m,
                             .dtype = dt,
                             .mode = PAR_MODE_EXACT,
                             .batch = EB,
                             .chunk = EB,
                             .lr = 0,
                             .threads = threads,
                             .init_params = params};
    par_engine e;
    PAR_TRY(par_engine_init(&e, &cfg));
    const size_t sz = par_dtype_size(dt);
    void *x = malloc(EB * m->n_inputs * sz);
    int32_t *labels = malloc(EB * sizeof *labels);
    size_t *idx = malloc(EB * sizeof *idx);
    if (!x || !labels || !idx) {
        free(x);
        free(labels);
        free(idx);
        par_engine_free(&e);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory for evaluation");
    }
    double sum = 0;
    size_t hits = 0;
    for (size_t pos = 0; pos < count; pos += EB) {
        const size_t B = count - pos < EB ? count - pos : EB;
        for (size_t s = 0; s < B; s++) idx[s] = first + pos + s;
        par_data_gather(im, idx, B, dt, x, labels);
        const par_batch batch = {.x = x, .labels = labels, .B = B};
        par_engine_forward_backward(&e, &batch, 0, B, 0);
        hits += e.hits;
        for (size_t s = 0; s < B; s++)
            sum += par_get_real(dt, e.loss, s);
    }
    *loss = sum / (double)count;
    *accuracy = (double)hits / (double)count;
    free(x);
    free(labels);
    free(idx);
    par_engine_free(&e);
    return PAR_OK;
}
