// `parity lockstep` as one call (vf_lockstep.h): the data and the initial
// weights a lockstep check starts from, and the flags checked against them.
// Tests: tests/verify/test_verify.sh (lockstep), tests/cli/test_check_cli.sh.
#include "vf_lockstep.h"

#include <stdlib.h>

#include "par_io.h"

// The batch (the split's size with batch_full) and the steps, checked
// against the split; the batch into *batch.
static par_status check_fit(size_t *batch, const vf_lockstep_job *j, const par_dataset *ds)
{
    const par_model *m = j->cfg.model;
    PAR_FAIL_IF(ds->train.n_features != m->n_inputs, PAR_ERR_CONFIG,
                "--model %s takes %zu inputs but dataset %s has %zu features per sample%s",
                m->spec, m->n_inputs, ds->name, ds->train.n_features,
                j->upscale > 0 ? " after --upscale" : "");
    const size_t b = j->batch_full ? ds->n_train : j->cfg.batch;
    PAR_FAIL_IF(b > ds->n_train, PAR_ERR_CONFIG,
                "--batch %zu: expected at most %zu, the training split of %s", b, ds->n_train,
                ds->name);
    const long per_epoch = (long)((ds->n_train + b - 1) / b);
    PAR_FAIL_IF(j->steps > per_epoch * j->epochs, PAR_ERR_CONFIG,   // not a silent stop
                "--steps %ld: expected at most %ld, the steps of --epochs %d (%zu training "
                "records, batch %zu); give --epochs %ld", j->steps, per_epoch * j->epochs,
                j->epochs, ds->n_train, b, (j->steps + per_epoch - 1) / per_epoch);
    *batch = b;
    return PAR_OK;
}

par_status vf_lockstep_run(vf_lockstep_result *r, const vf_lockstep_job *job, int *opening)
{
    const par_model *m = job->cfg.model;
    const par_dtype dt = job->cfg.dtype;
    par_dataset ds;
    par_status st = par_dataset_open(&ds, job->dataset, 10);
    *opening = st != PAR_OK;
    PAR_TRY(st);
    par_run_cfg cfg = job->cfg;
    if (job->upscale > 0) st = par_dataset_upscale(&ds, (size_t)job->upscale, dt);
    if (st == PAR_OK) st = check_fit(&cfg.batch, job, &ds);
    void *init = st == PAR_OK ? malloc(m->n_params * par_dtype_size(dt)) : NULL;
    if (st == PAR_OK && !init)
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK && job->init_load) st = par_weights_load(job->init_load, m, dt, init);
    else if (st == PAR_OK) par_model_init(m, dt, job->seed, init);
    cfg.init_params = init;
    if (st == PAR_OK)
        st = vf_lockstep(r, job->ops, &cfg, cfg.lr, &ds, job->seed, job->epochs, job->steps,
                         job->comm);
    free(init);
    par_dataset_free(&ds);
    return st;
}
