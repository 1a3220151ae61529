// `parity check --external` (ext_check.h): the lockstep loop (ext_lockstep.c)
// run to step S with parity alone before it, two hooks on it: every
// comparison of the trainer's own ops becomes a LOCAL row, and the step's
// answer becomes a chk_step (parity's serial step, its results replaced by
// the trainer's) that verify/check recomputes in MPFR with END-TO-END bounds.
#define _POSIX_C_SOURCE 200809L
#include "ext_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_trainer.h"

typedef struct hook {
    const ext_lockstep_cfg *c;
    const chk_opts *o;
    ext_check_result *r;
    const ext_lockstep_result *lr;   // the loop's result, filled as it goes
    chk_report local;             // LOCAL rows, in the order the checks reach them
    size_t last;                  // the row the last comparison went to
    int failed;                   // out of memory for a row
} hook;

par_status ext_ulps_parse_list(ext_ulps *u, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save))
        PAR_TRY(ext_ulps_parse(u, tok));
    return PAR_OK;
}

// The row name of a compared tensor: "opt.m.layer0.weight" of the update is
// "layer0.weight.m.new" as `parity check` names it, "layer0.weight"
// "layer0.weight.new"; the op checks keep theirs ("layer0.out", "grad.layer0.bias").
static void row_name(char *buf, size_t n, const ext_cmp *c, int update)
{
    char state[16];
    int k = 0;
    if (!update)
        snprintf(buf, n, "%s", c->tensor);
    else if (sscanf(c->tensor, "opt.%15[^.].%n", state, &k) == 1 && k > 0)
        snprintf(buf, n, "%s.%s.new", c->tensor + k, state);
    else
        snprintf(buf, n, "%s.new", c->tensor);
}

static void on_cmp(void *ctx, long step, int local, const ext_cmp *c)
{
    hook *h = ctx;
    (void)step;
    if (!local || h->failed) return;
    char name[64];
    row_name(name, sizeof name, c, c->op && strstr(c->op, "the update") != NULL);
    chk_report *r = &h->local;
    if (h->last >= r->n || strncmp(r->t[h->last].name, name, sizeof r->t[0].name - 1) != 0) {
        size_t k = 0;
        while (k < r->n && strncmp(r->t[k].name, name, sizeof r->t[0].name - 1) != 0) k++;
        if (k == r->n) {
            size_t d0 = c->ndim ? c->shape[0] : 1, d1 = 0;
            for (int d = 1; d < c->ndim; d++) d1 = (d1 ? d1 : 1) * c->shape[d];
            if (!chk_report_add(r, CHK_LOCAL, name, d1 ? 2 : 1, d0, d1, 0, 1)) {
                h->failed = 1;
                return;
            }
        }
        h->last = k;
    }
    const double err = fabs(c->got - c->centre);
    chk_tensor_record(&r->t[h->last], c->i, c->got, c->centre, err,
                      err / chk_ulp_of(c->centre, h->c->dt), c->bound);
}

// par_array data into dst at the view's offset.
static void put_view(void *dst, const par_view *v, const par_array *a, size_t sz)
{
    memcpy((char *)dst + v->offset * sz, a->data, v->count * sz);
}

// parity's serial step from the answer's state, its results then replaced by
// the trainer's: new weights, state, loss; with intermediates its gradient,
// and with its layers' values its outputs, output gradients, sample losses.
static par_status make_step(hook *h, const ext_answer *a)
{
    const ext_lockstep_cfg *c = h->c;
    const par_model *m = c->m;
    chk_step *st = &h->r->step;
    const par_optim po = {(par_optim_kind)c->optim.kind, c->optim.mu, c->optim.b1, c->optim.b2,
                          c->optim.eps};
    const par_run_cfg rc = {.model = m, .dtype = c->dt, .mode = PAR_MODE_EXACT, .batch = a->B,
                            .chunk = c->chunk, .lr = c->optim.lr, .threads = 1,
                            .init_params = a->w, .optim = &po};
    const int ns = par_optim_n_state(po.kind);
    const par_optim_state start = {ns, {(void *)a->s[0], (void *)a->s[1]}, a->opt_t};
    const par_batch pb = {.x = a->x, .labels = a->labels, .B = a->B};
    PAR_TRY(chk_capture_state(st, par_trainer_find("serial"), &rc, &pb, &start));
    const size_t sz = par_dtype_size(c->dt);
    for (int v = 0; v < m->n_views; v++) {
        put_view(st->w_new, &m->views[v], a->wa[v], sz);
        for (int j = 0; j < ns; j++)
            put_view(st->s_new[j], &m->views[v], a->sa[j * m->n_views + v], sz);
        if (a->ga && a->ga[v]) put_view(st->g, &m->views[v], a->ga[v], sz);   // none: a statistic
    }
    st->loss = a->loss;
    st->trainer = "external";
    st->internals = "parity's serial step (the trainer sent none)";
    if (!h->r->layers_checked) return PAR_OK;
    st->internals = "the trainer's intermediates";
    for (int l = 0; l < m->n_layers; l++) {
        const par_array *o, *d;
        const size_t shape[2] = {a->B, m->layers[l].n_out};
        char name[48];
        snprintf(name, sizeof name, "layer%d.out", l);
        PAR_TRY(ext_get_array(&o, a->inter, name, 2, shape, c->dt, a->step, "intermediates.npz",
                              0));
        snprintf(name, sizeof name, "layer%d.dz", l);
        PAR_TRY(ext_get_array(&d, a->inter, name, 2, shape, c->dt, a->step, "intermediates.npz",
                              0));
        memcpy(st->a[l + 1], o->data, o->count * sz);
        memcpy(st->d[l], d->data, d->count * sz);
    }
    const par_array *ls;
    const size_t bshape[1] = {a->B};
    PAR_TRY(ext_get_array(&ls, a->inter, "loss.samples", 1, bshape, c->dt, a->step,
                          "intermediates.npz", 0));
    memcpy(st->loss_s, ls->data, a->B * sz);
    return PAR_OK;
}

// END-TO-END bounds: the trainer and the exact step (hyperparameters rounded
// to the dtype, as the MPFR step takes them) each lie within the step's
// any-order bound E of its centre (ext_update_bound), so within 2 E of each other.
static void e2e_bounds(const hook *h, const ext_answer *a, double *b[3], double *loss)
{
    const ext_lockstep_cfg *c = h->c;
    const int ns = par_optim_n_state((par_optim_kind)c->optim.kind);
    ext_update up;
    ext_update_init(&up, &c->optim, c->dt, a->opt_t + 1);
    for (int v = 0; v < c->m->n_views; v++) {
        const par_view *vw = &c->m->views[v];
        const int stat = ext_view_is_stat(c->m, v);
        for (size_t i = vw->offset; i < vw->offset + vw->count; i++) {
            const double s0 = ns > 0 ? par_get_real(c->dt, a->s[0], i) : 0;
            const double s1 = ns > 1 ? par_get_real(c->dt, a->s[1], i) : 0;
            double cen[3], E[3];
            ext_new_bound(&up, stat, a->e, i, par_get_real(c->dt, a->w, i), s0, s1, cen, E);
            for (int k = 0; k < 3; k++) b[k][i] = 2 * E[k];
        }
    }
    *loss = 2 * a->e->El;
}

// Whether END-TO-END row t is the trainer's: its new values and loss always;
// its intermediates' rows when it sent them (else they are parity's own).
static int e2e_row_kept(const chk_tensor *t, int layers)
{
    return t->has_bound || layers;
}

static par_status on_answer(void *ctx, const ext_answer *a)
{
    hook *h = ctx;
    ext_check_result *r = h->r;
    PAR_FAIL_IF(h->failed, PAR_ERR_ALLOC, "out of memory for the report");
    r->layers_checked = h->lr->layers_checked;
    PAR_TRY(make_step(h, a));
    const size_t N = h->c->m->n_params;
    double *b[3] = {malloc(N * sizeof(double)), malloc(N * sizeof(double)),
                    malloc(N * sizeof(double))};
    chk_report full = {0};
    par_status st = b[0] && b[1] && b[2] ? PAR_OK
                                         : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__,
                                                         "out of memory");
    if (st == PAR_OK) {
        chk_e2e_bounds eb = {b[0], {b[1], b[2]}, 0};
        e2e_bounds(h, a, b, &eb.loss);
        chk_opts o = *h->o;
        o.end_to_end = 1;
        st = chk_check_step_bounded(&full, &r->step, &o, &eb);
    }
    // LOCAL: the trainer's own ops; then the END-TO-END rows that are its.
    for (size_t k = 0; st == PAR_OK && k < h->local.n + full.n; k++) {
        const chk_tensor *t = k < h->local.n ? &h->local.t[k] : &full.t[k - h->local.n];
        if (k >= h->local.n && (t->view != CHK_E2E || !e2e_row_kept(t, r->layers_checked)))
            continue;
        chk_tensor *d = chk_report_add(&r->rep, t->view, t->name, t->ndim, t->shape[0],
                                       t->shape[1], t->n_red, t->has_bound);
        if (!d) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
        else *d = *t;
    }
    r->rep.seconds = full.seconds;
    r->rep.threads = full.threads;
    r->rep.prec = full.prec;
    chk_report_finish(&r->rep);
    chk_report_free(&full);
    for (int k = 0; k < 3; k++) free(b[k]);
    return st;
}

par_status ext_check_run(ext_check_result *r, ext_lockstep_job *job, const chk_opts *o,
                         int *opening)
{
    memset(r, 0, sizeof *r);
    ext_lockstep_result lr;
    hook h = {.c = &job->cfg, .o = o, .r = r, .lr = &lr};
    const ext_hooks hooks = {on_cmp, on_answer, &h};
    job->cfg.first = job->cfg.steps;
    job->cfg.hooks = &hooks;
    job->cfg.want_intermediates = 1;
    const par_status st = ext_job_run(job, opening, ext_lockstep_fn, &lr);
    job->cfg.hooks = NULL;
    chk_report_free(&h.local);
    PAR_TRY(st);
    snprintf(r->name, sizeof r->name, "%s", lr.name);
    r->world = lr.world;
    r->intermediates = lr.intermediates;
    r->local_first = lr.local_first;
    r->signature = lr.signature;
    r->signature_flagged = lr.signature_flagged;
    snprintf(r->signature_tensor, sizeof r->signature_tensor, "%s", lr.signature_tensor);
    r->seconds_wait = lr.seconds_wait;
    r->seconds_parity = lr.seconds_parity;
    if (!r->intermediates)
        r->local_skipped = "the trainer declined intermediates: END-TO-END only";
    else if (!r->layers_checked)
        r->local_skipped = "the trainer sent its gradient but not its layers' outputs and "
                           "gradients: LOCAL holds its update from its own gradient only";
    return PAR_OK;
}

void ext_check_free(ext_check_result *r)
{
    chk_step_free(&r->step);
    chk_report_free(&r->rep);
}
