// Lockstep of a fast-mode trainer against the reference under the derived
// bound; see vf_lockstep.h. Not a trajectory comparison: the trainer is
// re-synced to the reference's weights before every step.
// Tests: tests/test_trainers.c (omp), tests/test_mpi.c (mpi, hybrid, root).
#include "vf_lockstep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par_run.h"
#include "ref_train.h"

static double gamma_n(double n, double u) { return n * u / (1 - n * u); }

double vf_lockstep_tol(double lr, double S, double w, size_t B, double u)
{
    const double gB = gamma_n((double)B, u);
    return lr * S * (2 * gB + 4 * u * (1 + gB) * (1 + u)) + 2 * u * fabs(w);
}

size_t vf_terms_per_sample(const par_model *m, size_t i)
{
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *ly = &m->layers[l];
        if (ly->n_rows == 0) continue;
        const par_view *w = &m->views[ly->w_view], *b = &m->views[ly->b_view];
        if ((i >= w->offset && i < w->offset + w->count) ||
            (i >= b->offset && i < b->offset + b->count))
            return ly->n_out / ly->n_rows;   // conv2d: output positions; dense: 1
    }
    return 1;
}

static double at(par_dtype dt, const void *p, size_t i)
{
    return dt == PAR_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

typedef struct lockstep_buf {
    ref_trainer *ref;
    void *state, *x, *w0;
    int32_t *labels;
    size_t *order;
} lockstep_buf;

static void buf_free(lockstep_buf *b, const par_trainer_ops *ops)
{
    if (b->state) ops->destroy(b->state);
    ref_destroy(b->ref);
    free(b->x);
    free(b->w0);
    free(b->labels);
    free(b->order);
}

// One step of both sides from the reference's weights; updates r. With
// comm, ranks other than 0 only receive the weights and step the trainer.
static par_status one_step(vf_lockstep_result *r, lockstep_buf *b, const par_trainer_ops *ops,
                           const par_run_cfg *cfg, double lr, const par_batch *batch, long k,
                           const vf_lockstep_comm *comm)
{
    const par_model *m = cfg->model;
    const par_dtype dt = cfg->dtype;
    const size_t N = m->n_params, sz = par_dtype_size(dt);
    const double u = dt == PAR_F32 ? 0x1p-24 : 0x1p-53;
    const int checker = !comm || comm->rank == 0;
    if (checker) memcpy(b->w0, ref_params(b->ref), N * sz);
    if (comm) PAR_TRY(comm->bcast(comm->ctx, b->w0, N * sz));
    double le = 0, lf = 0;
    const void *wf;
    size_t n;
    PAR_TRY(ops->set_params(b->state, b->w0));
    PAR_TRY(ops->step(b->state, batch, &lf));
    PAR_TRY(ops->params(b->state, &wf, &n));
    r->steps = k;
    if (!checker) return PAR_OK;
    PAR_TRY(ref_step(b->ref, batch->x, batch->labels, batch->B, &le));
    const void *wr = ref_params(b->ref);
    const double *S = ref_grad_abs(b->ref);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        const double a = at(dt, wf, i), e = at(dt, wr, i);
        const size_t n_terms = batch->B * vf_terms_per_sample(m, i);
        const double tol = vf_lockstep_tol(lr, S[i], at(dt, b->w0, i), n_terms, u);
        const double q = a == e ? 0 : fabs(a - e) / tol;   // NaN or Inf: over
        if (!(q <= 1)) bad++;
        if (!(q <= r->worst_ratio)) {
            r->worst_ratio = q;
            r->worst_step = k;
            r->worst_index = i;
        }
    }
    const double gB = gamma_n((double)batch->B, u);
    const double ql = lf == le ? 0 : fabs(lf - le) / ((2 * gB + 3 * u) * le);
    if (!(ql <= 1)) bad++;
    if (!(ql <= r->worst_loss_ratio)) r->worst_loss_ratio = ql;
    if (bad && r->first_violation_step == 0) r->first_violation_step = k;
    r->violations += bad;
    return PAR_OK;
}

par_status vf_lockstep(vf_lockstep_result *r, const par_trainer_ops *ops,
                       const par_run_cfg *cfg_fast, double lr_ref, const par_dataset *ds,
                       uint64_t seed, int epochs, long steps, const vf_lockstep_comm *comm)
{
    memset(r, 0, sizeof *r);
    const par_model *m = cfg_fast->model;
    const par_dtype dt = cfg_fast->dtype;
    const size_t N = m->n_params, Bmax = cfg_fast->batch, sz = par_dtype_size(dt);
    const size_t n_train = ds->n_train;
    PAR_FAIL_IF(!ops->set_params, PAR_ERR_CONFIG, "trainer %s cannot set its parameters",
                ops->name);
    PAR_FAIL_IF(cfg_fast->optim && cfg_fast->optim->kind != PAR_OPTIM_SGD, PAR_ERR_CONFIG,
                "--optim %s: the fast-mode lockstep bound is derived for SGD only (use --optim "
                "sgd)", par_optim_name(cfg_fast->optim->kind));
    PAR_FAIL_IF(ds->train.n_features != m->n_inputs || ds->n_classes != m->n_classes,
                PAR_ERR_CONFIG, "--model %s does not fit dataset %s", m->spec, ds->name);
    PAR_FAIL_IF(n_train == 0 || Bmax == 0 || epochs < 1, PAR_ERR_CONFIG,
                "lockstep needs training records, a batch >= 1 and epochs >= 1");
    const double lr = dt == PAR_F32 ? (double)(float)lr_ref : lr_ref;
    lockstep_buf b = {0};
    par_status st = PAR_OK;
    if (!comm || comm->rank == 0) {
        st = ref_create(&b.ref, m, dt, cfg_fast->chunk, lr_ref, cfg_fast->init_params);
        if (st == PAR_OK) st = ref_track_abs(b.ref);
    }
    if (st == PAR_OK) st = ops->create(cfg_fast, &b.state);
    if (st == PAR_OK) {
        b.x = malloc(Bmax * m->n_inputs * sz);
        b.w0 = malloc(N * sz);
        b.labels = malloc(Bmax * sizeof *b.labels);
        if (!b.x || !b.w0 || !b.labels)
            st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory (lockstep)");
    }
    long k = 0;
    for (int e = 0; st == PAR_OK && e < epochs && (steps == 0 || k < steps); e++) {
        free(b.order);
        b.order = NULL;
        st = par_epoch_order(&b.order, n_train, seed, e);
        for (size_t pos = 0; st == PAR_OK && pos < n_train && (steps == 0 || k < steps);
             pos += Bmax) {
            const size_t B = n_train - pos < Bmax ? n_train - pos : Bmax;
            par_data_gather(&ds->train, b.order + pos, B, dt, b.x, b.labels);
            const par_batch batch = {b.x, b.labels, B};
            st = one_step(r, &b, ops, cfg_fast, lr, &batch, ++k, comm);
        }
    }
    buf_free(&b, ops);
    return st;
}
