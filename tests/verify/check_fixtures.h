// What the tests of the MPFR checker share (test_check.c, test_check_optim.c,
// test_check_cnn.c): rows of a report by view and name, its failures, a
// batch from a dataset's shuffled order, one captured step checked LOCAL,
// END-TO-END and, for exact non-reference trainers, CONTRACT.
#ifndef CHECK_FIXTURES_H
#define CHECK_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_check.h"
#include "par_fixtures.h"

static inline const chk_tensor *row(const chk_report *r, chk_view v, const char *name)
{
    for (size_t k = 0; k < r->n; k++)
        if (r->t[k].view == v && strcmp(r->t[k].name, name) == 0) return &r->t[k];
    return NULL;
}

static inline int verdict_is(const chk_report *r, chk_view v, const char *name, chk_verdict want)
{
    const chk_tensor *t = row(r, v, name);
    return t && t->verdict == want;
}

// Names of the failing rows of a view, for messages.
static inline void print_fails(const chk_report *r)
{
    for (size_t k = 0; k < r->n; k++) {
        const chk_tensor *t = &r->t[k];
        if (t->verdict != CHK_FAIL) continue;
        char ix[48];
        chk_format_index(ix, sizeof ix, t, t->worst);
        printf("  FAIL %s %s%s: run %.9g exact %.9g bound %.3g (%zu over)\n",
               chk_view_name(t->view), t->name, ix, t->worst_run, t->worst_exact, t->worst_bound,
               t->n_over);
    }
}

static inline size_t local_fails(const chk_report *r)
{
    size_t n = 0;
    for (size_t k = 0; k < r->n; k++)
        n += r->t[k].view == CHK_LOCAL && r->t[k].verdict == CHK_FAIL;
    return n;
}

// The first failing row of view v; NULL if none.
static inline const chk_tensor *first_fail(const chk_report *r, chk_view v)
{
    for (size_t k = 0; k < r->n; k++)
        if (r->t[k].view == v && r->t[k].verdict == CHK_FAIL) return &r->t[k];
    return NULL;
}

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;

typedef struct batch_buf {
    void *x;
    int32_t labels[256];
    size_t B;
} batch_buf;

static inline void gather(batch_buf *bb, const par_dataset *ds, par_dtype dt, size_t B,
                          size_t first)
{
    size_t *order;
    PAR_REQUIRE(par_epoch_order(&order, ds->n_train, 7, 0));
    free(bb->x);
    bb->x = malloc(B * 784 * par_dtype_size(dt));
    bb->B = B;
    par_data_gather(&ds->train, order + first, B, dt, bb->x, bb->labels);
    free(order);
}

// The trainer settings of the steps these tests check: exact, lr 0.05, one
// thread, batch B in chunks of C, from weights w0.
static inline par_run_cfg step_cfg(const par_model *m, par_dtype dt, size_t B, size_t C,
                                   const void *w0)
{
    return (par_run_cfg){.model = m, .dtype = dt, .mode = PAR_MODE_EXACT, .batch = B,
                         .chunk = C, .lr = 0.05, .threads = 1, .init_params = w0};
}

// The batch bb holds.
static inline par_batch batch_of(const batch_buf *bb)
{
    return (par_batch){.x = bb->x, .labels = bb->labels, .B = bb->B};
}

// Captures one step and checks it (LOCAL + E2E, and CONTRACT for exact
// non-reference trainers). Returns the status; *r is filled.
static inline par_status check_step(chk_report *r, const par_model *m, par_dtype dt,
                             const par_trainer_ops *tr, par_mode mode, int threads,
                             const batch_buf *bb, size_t C, const void *w0, int prec)
{
    memset(r, 0, sizeof *r);
    par_run_cfg cfg = step_cfg(m, dt, bb->B, C, w0);
    cfg.mode = mode;
    cfg.threads = threads;
    const par_batch batch = batch_of(bb);
    chk_step run, ref;
    PAR_TRY(chk_capture(&run, tr, &cfg, &batch));
    const chk_opts o = {prec, 0, 1};
    par_status st = chk_check_step(r, &run, &o);
    if (st == PAR_OK && mode == PAR_MODE_EXACT && tr != &par_trainer_reference) {
        st = chk_capture(&ref, &par_trainer_reference, &cfg, &batch);
        if (st == PAR_OK) st = chk_check_contract(r, &run, &ref);
        chk_step_free(&ref);
    }
    chk_step_free(&run);
    return st;
}

#endif
