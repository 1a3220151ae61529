// The single-process trainers: `serial` (one thread) and `omp` (cfg.threads
// OpenMP threads). Both fold the chunks of the whole batch in order inside
// the weight-gradient kernel; with threads splitting samples and parameter
// rows, every element is the serial one (exact mode). `omp` may run a step
// on one thread when that is faster (a busy machine; par_governor.h):
// the same bits either way, which test_trainers checks with the thread
// count changing every step.
#include <stdlib.h>
#include <string.h>

#include "par_engine.h"
#include "par_governor.h"
#include "par_time.h"

typedef struct local_state {
    par_engine e;           // first: the par_engine_*_op helpers take the state as the engine
    par_governor gov;       // how many threads the next step runs on
} local_state;

static par_status create_common(const par_run_cfg *cfg, void **state, int threads)
{
    *state = NULL;
    local_state *s = calloc(1, sizeof *s);
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "out of memory");
    par_run_cfg c = *cfg;
    c.threads = threads;
    par_status st = par_engine_init(&s->e, &c);
    if (st != PAR_OK) {
        free(s);
        return st;
    }
    par_governor_init(&s->gov, threads, cfg->threads_policy);
    *state = s;
    return PAR_OK;
}

static par_status serial_create(const par_run_cfg *cfg, void **state)
{
    return create_common(cfg, state, 1);
}

static par_status omp_create(const par_run_cfg *cfg, void **state)
{
    return create_common(cfg, state, cfg->threads);
}

static par_status local_step(void *state, const par_batch *batch, double *loss)
{
    local_state *s = state;
    par_engine *e = &s->e;
    const size_t B = batch->B, n_chunks = par_n_chunks(B, e->C);
    PAR_FAIL_IF(B == 0 || B > e->B_cap, PAR_ERR_CONFIG, "batch of %zu samples, expected 1..%zu", B,
                e->B_cap);
    par_governor *g = &s->gov;
    e->threads = par_governor_threads(g);   // at most the count the engine was made for
    const double t0 = par_now(), c0 = par_governor_measures(g) ? par_thread_cpu() : 0;
    par_engine_begin_step(e);
    par_engine_step(e, batch);
    *loss = par_engine_loss_mean(e, par_engine_loss_fold(e, B, 0, n_chunks, 0, 0), B);
    par_governor_step(g, e->threads, par_now() - t0,
                      par_governor_measures(g) ? par_thread_cpu() - c0 : 0);
    e->threads = g->T;   // params, set_params and the rest: every thread
    return PAR_OK;
}

static par_status local_stats(void *state, par_trainer_stats *out)
{
    const local_state *s = state;
    memcpy(out->phase, s->e.phase, sizeof out->phase);
    out->threads_adaptive = par_governor_measures(&s->gov);
    out->steps_one_thread = s->gov.T > 1 ? s->gov.one : 0;
    return PAR_OK;
}

static void local_destroy(void *state)
{
    if (!state) return;
    par_engine_free(state);
    free(state);
}

const par_trainer_ops par_trainer_serial = {
    .name = "serial",
    .summary = "kernels, one thread",
    .caps = PAR_CAP_FILLS_BATCH,
    .create = serial_create,
    .step = local_step,
    .params = par_engine_params_op,
    .destroy = local_destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
    .set_step = par_engine_set_step_op,
    .stats = local_stats,
};

const par_trainer_ops par_trainer_omp = {
    .name = "omp",
    .summary = "OpenMP threads (--threads T): samples and weight rows split among threads",
    .caps = PAR_CAP_THREADS | PAR_CAP_FILLS_BATCH,
    .create = omp_create,
    .step = local_step,
    .params = par_engine_params_op,
    .destroy = local_destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
    .set_step = par_engine_set_step_op,
    .stats = local_stats,
};
