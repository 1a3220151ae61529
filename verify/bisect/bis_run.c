// `parity bisect`'s run (bis_bisect.h): the dataset and the initial weights
// both sides start from, then the lockstep.
#include "bis_bisect.h"

#include <stdlib.h>

#include "par_io.h"

// The batch of both sides, checked against the split: the split's size
// for batch_full.
static par_status set_batch(bis_opts *o, const par_dataset *ds, int batch_full)
{
    size_t batch = batch_full ? ds->n_train : o->side[0].cfg.batch;
    PAR_FAIL_IF(batch > ds->n_train, PAR_ERR_CONFIG,
                "--batch %zu: expected at most %zu, the training split of %s", batch,
                ds->n_train, ds->name);
    o->side[0].cfg.batch = o->side[1].cfg.batch = batch;
    return PAR_OK;
}

par_status bis_run(bis_result *r, bis_opts *o, const bis_data *d, bis_run_stage *stage)
{
    const par_model *m = o->side[0].cfg.model;
    const par_dtype dt = o->side[0].cfg.dtype;
    par_dataset ds;
    *stage = BIS_RUN_DATA;
    par_status st = par_dataset_open(&ds, d->dataset, 10);
    if (st != PAR_OK) return st;
    void *init = NULL;
    if (d->upscale > 0 && (st = par_dataset_upscale(&ds, (size_t)d->upscale, dt)) != PAR_OK)
        *stage = BIS_RUN_UPSCALE;
    if (st == PAR_OK && (st = set_batch(o, &ds, d->batch_full)) != PAR_OK) *stage = BIS_RUN_BATCH;
    if (st == PAR_OK) {
        *stage = BIS_RUN_INIT;
        init = malloc(m->n_params * par_dtype_size(dt));
        if (!init)
            st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
        else if (d->init_load)
            st = par_weights_load(d->init_load, m, dt, init);
        else
            par_model_init(m, dt, o->seed, init);
    }
    if (st == PAR_OK) {
        *stage = BIS_RUN_LOCKSTEP;
        o->ds = &ds;
        o->side[0].cfg.init_params = o->side[1].cfg.init_params = init;
        st = bis_lockstep(r, o);
    }
    if (st == PAR_OK) *stage = BIS_RUN_OK;
    o->ds = NULL;
    o->side[0].cfg.init_params = o->side[1].cfg.init_params = NULL;
    free(init);
    par_dataset_free(&ds);
    return st;
}
