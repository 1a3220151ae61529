// The single-process trainers: `serial` (one thread) and `omp` (cfg.threads
// OpenMP threads). Both fold the chunks of the whole batch in order inside
// the weight-gradient kernel; with threads splitting samples and parameter
// rows, every element is the serial one (exact mode).
#include <stdlib.h>

#include "par_engine.h"

static par_status create_common(const par_run_cfg *cfg, void **state, int threads)
{
    *state = NULL;
    par_engine *e = malloc(sizeof *e);
    PAR_FAIL_IF(!e, PAR_ERR_ALLOC, "out of memory");
    par_run_cfg c = *cfg;
    c.threads = threads;
    par_status st = par_engine_init(e, &c);
    if (st != PAR_OK) {
        free(e);
        return st;
    }
    *state = e;
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
    par_engine *e = state;
    const size_t B = batch->B, n_chunks = par_n_chunks(B, e->C);
    PAR_FAIL_IF(B == 0 || B > e->B_cap, PAR_ERR_CONFIG, "batch of %zu samples, expected 1..%zu", B,
                e->B_cap);
    par_engine_begin_step(e);
    par_engine_step(e, batch);
    *loss = par_engine_loss_mean(e, par_engine_loss_fold(e, B, 0, n_chunks, 0, 0), B);
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
    .caps = 0,
    .create = serial_create,
    .step = local_step,
    .params = par_engine_params_op,
    .destroy = local_destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
};

const par_trainer_ops par_trainer_omp = {
    .name = "omp",
    .summary = "OpenMP threads (--threads T): samples and weight rows split among threads",
    .caps = PAR_CAP_THREADS,
    .create = omp_create,
    .step = local_step,
    .params = par_engine_params_op,
    .destroy = local_destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
};
