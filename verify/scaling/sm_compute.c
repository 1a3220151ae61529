// The scaling model's compute costs (sm_measure.h): serial steps of the
// engine timed in this process on the setup's own data, as a rank's step
// runs them (every thread reads every weight), and the update shared by
// threads that have all just read the weights.
#define _POSIX_C_SOURCE 200809L
#include "sm_measure.h"

#include <stdint.h>
#include <stdlib.h>

#include "par_engine.h"
#include "par_run.h"
#include "par_sort.h"
#include "par_time.h"

par_status sm_time_steps(const sm_setup *s, size_t b, int reps, int threads, double *sec,
                         double *upd, double *pan)
{
    const par_model *m = s->m;
    const par_dataset *ds = s->ds;
    const par_dtype dt = s->dt;
    const par_run_cfg cfg = {.optim = s->optim,
                             .model = m,
                             .dtype = dt,
                             .mode = PAR_MODE_EXACT,
                             .batch = b,
                             .chunk = (size_t)s->chunk,
                             .lr = 0.01,
                             .threads = threads,
                             .init_params = s->w};
    par_engine e;
    PAR_TRY(par_engine_init(&e, &cfg));
    e.samples_only = 1;   // every thread reads every weight, as every MPI rank does
    void *x = malloc(b * m->n_inputs * par_dtype_size(dt));
    int32_t *labels = malloc(b * sizeof *labels);
    size_t *idx = malloc(b * sizeof *idx);
    double *t = malloc(3 * (size_t)reps * sizeof *t);
    if (!x || !labels || !idx || !t) {
        free(x), free(labels), free(idx), free(t);
        par_engine_free(&e);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    for (int r = -3; r < reps; r++) {   // 3 warm-up steps
        for (size_t i = 0; i < b; i++) idx[i] = ((size_t)(r + 3) * b + i) % ds->n_train;
        par_data_gather(&ds->train, idx, b, dt, x, labels);
        const par_batch batch = {.x = x, .labels = labels, .B = b};
        const double t0 = par_now();
        par_engine_forward_backward(&e, &batch, 0, b, 1);
        par_engine_weight_grads(&e, b, 0, par_n_chunks(b, (size_t)s->chunk), 0);
        const double t1 = par_now();
        par_engine_update(&e);
        const double t2 = par_now();
        par_engine_sync_wt(&e);
        if (r >= 0) {
            t[r] = t2 - t0;
            t[reps + r] = t2 - t1;
            t[2 * reps + r] = par_now() - t2;
        }
    }
    for (int k = 0; k < 3; k++) qsort(t + k * reps, (size_t)reps, sizeof *t, par_cmp_double);
    *sec = t[reps / 2];
    *upd = t[reps + reps / 2];
    *pan = t[2 * reps + reps / 2];
    free(x), free(labels), free(idx), free(t);
    par_engine_free(&e);
    return PAR_OK;
}

// The omp step does not write its weights so: its wide layers' forward
// splits rows, hence samples_only in sm_time_steps. Every line a core
// writes, the others hold, and must give up. The least of 3 medians: now and
// then the scheduler puts the threads on one core for a while, and the
// update takes several times longer.
double sm_shared_update(const sm_setup *s, int k)
{
    double best = 0;
    for (int r = 0; r < 3 && k >= 2; r++) {
        double step, upd, pan;
        if (sm_time_steps(s, 64, 40, k, &step, &upd, &pan) != PAR_OK) return 0;
        if (r == 0 || upd < best) best = upd;
    }
    return best;
}
