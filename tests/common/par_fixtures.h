// Test fixtures: a dataset (a slice of real Fashion-MNIST when installed,
// else deterministic synthetic 28x28 images) and a lockstep trajectory
// runner that records every step's loss and the weights after every step.
#ifndef PAR_FIXTURES_H
#define PAR_FIXTURES_H

#include <stdlib.h>
#include <string.h>

#include "par_data.h"
#include "par_rng.h"
#include "par_run.h"
#include "par_test.h"
#include "ref_train.h"
#include "vf_lockstep.h"

// n training records of 784 features, 10 classes. Real data if available.
static inline void fixture_dataset(par_dataset *ds, size_t n)
{
    if (par_dataset_open(ds, "fashion-mnist", 10) == PAR_OK && ds->n_train >= n) {
        ds->n_train = n;
        printf("fixture: %zu records of real fashion-mnist\n", n);
        return;
    }
    memset(ds, 0, sizeof *ds);
    strcpy(ds->name, "synthetic");
    par_images *im = &ds->train;
    im->n = n;
    im->height = im->width = 28;
    im->channels = 1;
    im->n_features = 784;
    im->pixels = malloc(n * 784);
    im->labels = malloc(n);
    for (size_t i = 0; i < n * 784; i++)
        im->pixels[i] = (uint8_t)(par_rng_bits(1, PAR_RNG_DATA, 0, i) >> 56);
    for (size_t i = 0; i < n; i++)
        im->labels[i] = (uint8_t)(par_rng_bits(1, PAR_RNG_DATA, 1, i) % 10);
    ds->n_train = n;
    ds->n_classes = 10;
    printf("fixture: %zu synthetic records (fashion-mnist not installed)\n", n);
}

typedef struct trajectory {
    int steps;
    size_t n_params;
    double *loss;        // steps
    void *w;             // steps x n_params of dtype: weights after each step
    void *g;             // n_params of dtype: the gradient of the last step
    double bytes_max;    // MPI trainers: the most bytes a rank sent per step
    long one_thread;     // steps run on one thread of several (par_trainer_stats)
} trajectory;

// Runs `steps` steps of trainer ops from cfg (batch cfg->batch, shuffled
// with seed 7), recording losses and weights. A trainer that assembles its
// batch (PAR_CAP_FILLS_BATCH) gets it whole on even steps and to fill on odd
// ones, over NaN inputs: a sample it reads without filling it first spoils
// the trajectory. Returns PAR_OK, or the first
// failure (then the steps from the failing one on hold nothing): a caller
// checks it before it compares. tr is freed by trajectory_free either way.
static inline par_status run_trajectory(trajectory *tr, const par_trainer_ops *ops,
                                        const par_run_cfg *cfg, const par_dataset *ds, int steps)
{
    const size_t sz = par_dtype_size(cfg->dtype), N = cfg->model->n_params, B = cfg->batch;
    tr->steps = steps;
    tr->n_params = N;
    tr->loss = calloc((size_t)steps, sizeof(double));
    tr->w = malloc((size_t)steps * N * sz);
    tr->g = calloc(N, sz);
    tr->bytes_max = 0;
    tr->one_thread = 0;
    void *x = malloc(B * 784 * sz);
    int32_t *labels = malloc(B * sizeof *labels);
    void *state = NULL;
    par_status st = tr->loss && tr->w && tr->g && x && labels ? PAR_OK : PAR_ERR_ALLOC;
    if (st == PAR_OK) st = ops->create(cfg, &state);
    if (st != PAR_OK) {
        free(x);
        free(labels);
        return st;
    }
    size_t *order = NULL;
    int epoch = -1;
    size_t pos = ds->n_train;
    for (int k = 0; k < steps && st == PAR_OK; k++) {
        if (pos + B > ds->n_train) {   // full batches only: a new epoch
            free(order);
            order = NULL;
            st = par_epoch_order(&order, ds->n_train, 7, ++epoch);
            if (st != PAR_OK) break;
            pos = 0;
        }
        par_data_batch src = {&ds->train, order + pos, cfg->dtype};
        const int fills = (ops->caps & PAR_CAP_FILLS_BATCH) && k % 2 == 1;
        if (fills) {
            memset(x, 0xFF, B * 784 * sz);   // all bits set: a NaN in f32 and f64
            memset(labels, 0, B * sizeof *labels);
        } else {
            par_data_batch_fill(&src, 0, B, x, labels);
        }
        pos += B;
        const par_batch batch = {.x = x, .labels = labels, .B = B,
                                 .fill = fills ? par_data_batch_fill : NULL, .fill_ctx = &src};
        st = ops->step(state, &batch, &tr->loss[k]);
        const void *w;
        size_t n;
        if (st == PAR_OK) st = ops->params(state, &w, &n);
        if (st == PAR_OK) memcpy((char *)tr->w + (size_t)k * N * sz, w, N * sz);
    }
    const void *g = NULL;
    if (st == PAR_OK && ops->grad) st = ops->grad(state, &g);   // collective for MPI trainers
    if (st == PAR_OK && g) memcpy(tr->g, g, N * sz);
    par_trainer_stats stats;
    if (st == PAR_OK && ops->stats && ops->stats(state, &stats) == PAR_OK) {
        tr->bytes_max = stats.bytes_sent_max;
        tr->one_thread = stats.steps_one_thread;
    }
    ops->destroy(state);
    free(order);
    free(x);
    free(labels);
    return st;
}

static inline void trajectory_free(trajectory *tr)
{
    free(tr->loss);
    free(tr->w);
    free(tr->g);
}

// Bitwise comparison of two trajectories; reports the first differing step,
// and in it the first differing parameter (view name and index).
static inline int trajectory_equal(const trajectory *a, const trajectory *b,
                                   const par_model *m, par_dtype dt, const char *name)
{
    const size_t sz = par_dtype_size(dt), N = a->n_params;
    for (int k = 0; k < a->steps; k++) {
        if (memcmp(&a->loss[k], &b->loss[k], sizeof(double)) != 0) {
            printf("  %s: loss differs at step %d: %.17g vs %.17g\n", name, k + 1, a->loss[k],
                   b->loss[k]);
            return par_check(0, name);
        }
        const char *wa = (const char *)a->w + (size_t)k * N * sz;
        const char *wb = (const char *)b->w + (size_t)k * N * sz;
        if (memcmp(wa, wb, N * sz) != 0) {
            size_t i = 0;
            while (memcmp(wa + i * sz, wb + i * sz, sz) == 0) i++;
            int v = 0;
            while (v + 1 < m->n_views && m->views[v + 1].offset <= i) v++;
            printf("  %s: weights differ at step %d, %s[%zu]\n", name, k + 1, m->views[v].name,
                   i - m->views[v].offset);
            return par_check(0, name);
        }
    }
    return par_check(1, name);
}

// fast mode against the reference, one step at a time from the same weights
// (lockstep with re-sync), under the derived bound: the library version
// vf_lockstep (verify/harness/vf_lockstep.h, where the bound is derived), on the
// batches of shuffle seed 7, epoch 0. Returns vf_lockstep's status; r holds
// the violations over all steps, the first violating step and the largest
// |diff| / tol seen (< 1 passes), all zero unless the status is PAR_OK. A
// check that the bound holds wants PAR_OK and no violation; a negative
// control wants PAR_OK and violations (an error is neither).
static inline par_status fast_lockstep(vf_lockstep_result *r, const par_trainer_ops *ops,
                                       const par_run_cfg *cfg_fast, double lr_ref,
                                       const par_dataset *ds, int steps)
{
    memset(r, 0, sizeof *r);
    par_status st = vf_lockstep(r, ops, cfg_fast, lr_ref, ds, 7, 1, steps, NULL);
    if (st != PAR_OK) memset(r, 0, sizeof *r);
    return st;
}

#endif
