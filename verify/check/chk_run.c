// One `parity check` of a training step (chk_run.h): the step's inputs
// loaded or made, the trainer's step captured and checked.
#define _POSIX_C_SOURCE 200809L
#include "chk_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "par_io.h"
#include "par_time.h"

par_status chk_records_parse(const char *spec, size_t n, size_t **idx, size_t *B)
{
    size_t cap = 1;
    for (const char *p = spec; *p; p++) cap += *p == ',';
    *B = 0;
    *idx = malloc(cap * sizeof **idx);
    PAR_FAIL_IF(!*idx, PAR_ERR_ALLOC, "out of memory");
    for (const char *p = spec;;) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(p, &end, 10);
        if (end == p || *p == '-' || errno || v >= n || (*end != ',' && *end != '\0')) {
            free(*idx);
            *idx = NULL;
            *B = 0;
            return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                                 "--samples '%s': expected record numbers below %zu, separated "
                                 "by commas", spec, n);
        }
        (*idx)[(*B)++] = (size_t)v;
        if (*end == '\0') return PAR_OK;
        p = end + 1;
    }
}

// The optimizer state before the step into start (arrays in sarr, zeros at
// update 0: step 1, or given records); after step S - 1 updates, the opt.*
// members of the weights' .npz (a checkpoint's, written after step S - 1).
static par_status optim_start(par_optim_state *start, void *sarr[2], const chk_run_cfg *c,
                              chk_run *r)
{
    const par_optim_kind kind = c->optim->kind;
    const int ns = par_optim_n_state(kind);
    *start = (par_optim_state){ns, {NULL, NULL}, c->step > 1 && !c->samples ? c->step - 1 : 0};
    for (int i = 0; i < ns; i++) {
        sarr[i] = calloc(c->m->n_params, par_dtype_size(c->dt));
        start->arr[i] = sarr[i];
        PAR_FAIL_IF(!sarr[i], PAR_ERR_ALLOC, "out of memory");
    }
    if (!ns || !c->weights || start->t == 0) return PAR_OK;
    const char *names[2] = {par_optim_state_name(kind, 0), par_optim_state_name(kind, 1)};
    const par_status st = par_npz_load_optim(c->weights, c->m, c->dt, ns, names, sarr);
    if (st != PAR_OK) r->failed = CHK_RUN_OPTIM_STATE;
    return st;
}

// The trainer's step on the batch, checked (rank 0); the reference's for the
// CONTRACT view.
static par_status check_batch(chk_run *r, const chk_run_cfg *c, const par_batch *batch,
                              const void *w0, const par_optim_state *start)
{
    const par_run_cfg cfg = {.model = c->m,
                             .dtype = c->dt,
                             .mode = c->mode,
                             .batch = batch->B,
                             .chunk = c->chunk,
                             .lr = c->lr,
                             .threads = c->threads,
                             .init_params = w0,
                             .optim = c->optim};
    const double t1 = par_now();
    par_status st = chk_capture_state(&r->run, c->tr, &cfg, batch, start);
    r->t_run = par_now() - t1;
    if (st == PAR_OK && c->rank == 0) st = chk_check_step(&r->rep, &r->run, &c->check);
    r->contract = c->rank == 0 && c->mode == PAR_MODE_EXACT && strcmp(c->tr->name, "reference");
    if (st == PAR_OK && r->contract) {
        const par_trainer_ops *rt = par_trainer_find("reference");
        st = chk_capture_state(&r->ref, rt, &cfg, batch, start);
        if (st == PAR_OK) st = chk_check_contract(&r->rep, &r->run, &r->ref);
    }
    return st;
}

par_status chk_run_step(chk_run *r, const chk_run_cfg *c)
{
    memset(r, 0, sizeof *r);
    r->failed = CHK_RUN_WEIGHTS;
    const par_model *m = c->m;
    const size_t sz = par_dtype_size(c->dt);
    void *w0 = malloc(m->n_params * sz), *x = NULL, *sarr[2] = {NULL, NULL};
    int32_t *labels = NULL;
    par_status st = w0 ? PAR_OK : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK && c->weights)
        st = par_weights_load(c->weights, m, c->dt, w0);
    else if (st == PAR_OK)
        par_model_init(m, c->dt, c->seed, w0);
    par_optim_state start;
    if (st == PAR_OK) st = optim_start(&start, sarr, c, r);
    size_t B = 0;
    if (st == PAR_OK && c->samples) {
        st = chk_records_parse(c->samples, c->ds->train.n, &r->idx, &B);
        if (st != PAR_OK) r->failed = CHK_RUN_SAMPLES;
    } else if (st == PAR_OK) {
        st = chk_step_records(&r->idx, &B, &r->epoch, c->ds, c->seed, c->batch, c->step);
    }
    if (st == PAR_OK) {
        x = malloc(B * m->n_inputs * sz);
        labels = malloc(B * sizeof *labels);
        if (!x || !labels)
            st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
        else
            par_data_gather(&c->ds->train, r->idx, B, c->dt, x, labels);
    }
    if (st == PAR_OK) st = check_batch(r, c, &(par_batch){.x = x, .labels = labels, .B = B}, w0,
                                       &start);
    if (st == PAR_OK) r->failed = CHK_RUN_OK;
    free(x);
    free(labels);
    free(w0);
    free(sarr[0]);
    free(sarr[1]);
    return st;
}

void chk_run_free(chk_run *r)
{
    chk_report_free(&r->rep);
    chk_step_free(&r->run);
    chk_step_free(&r->ref);
    free(r->idx);
    r->idx = NULL;
}
