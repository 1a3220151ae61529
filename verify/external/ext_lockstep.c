// `parity lockstep --external` (ext_lockstep.h): the step loop. Per step:
// hand the trainer parity's state and the batch, compute the step's bound
// and parity's own step meanwhile, read the trainer's answer back, check
// every array it must send, compare element by element, go on from
// parity's state.
#define _POSIX_C_SOURCE 200809L
#include "ext_lockstep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_check.h"
#include "ext_local.h"
#include "par_io.h"
#include "par_sort.h"
#include "par_time.h"
#include "par_trainer.h"

typedef struct loop {
    const ext_lockstep_cfg *c;
    ext_lockstep_result *r;
    ext_trainer *t;
    ext_bound *b;
    const par_trainer_ops *ops;
    void *serial;                 // parity's own trajectory
    size_t N, sz;
    int n_state;                  // optimizer state arrays
    void *w, *s[2];               // the state entering the step (dt)
    long opt_t;
    void *x;
    int32_t *labels;
    int64_t *records;
    ext_step_bound e;
    double *dev;                  // scratch for medians (N)
} loop;

static const char *const part_names[EXT_PART_N] = {"files", "bound", "step", "checks"};

// Adds the seconds since *t0 to part k and restarts the clock.
static void lap(ext_lockstep_result *r, ext_part k, double *t0)
{
    const double now = par_now();
    r->seconds_part[k] += now - *t0;
    *t0 = now;
}

static const char *state_name(const ext_optim *o, int j)
{
    return par_optim_state_name((par_optim_kind)o->kind, j);
}

// ---- files handed over ------------------------------------------------------------

par_status ext_write_state(const ext_lockstep_cfg *c, const char *path, const void *w,
                           void *const s[2])
{
    const par_model *m = c->m;
    const int n_state = par_optim_n_state((par_optim_kind)c->optim.kind);
    const size_t sz = par_dtype_size(c->dt);
    par_array *a = calloc((size_t)m->n_views * (size_t)(1 + n_state), sizeof *a);
    PAR_FAIL_IF(!a, PAR_ERR_ALLOC, "out of memory");
    size_t k = 0;
    for (int j = -1; j < n_state; j++)
        for (int v = 0; v < m->n_views; v++, k++) {
            const par_view *vw = &m->views[v];
            if (j < 0) snprintf(a[k].name, sizeof a[k].name, "%s", vw->name);
            else snprintf(a[k].name, sizeof a[k].name, "opt.%s.%s", state_name(&c->optim, j),
                          vw->name);
            a[k].dtype = c->dt;
            a[k].ndim = vw->ndim;
            memcpy(a[k].shape, vw->shape, sizeof a[k].shape);
            a[k].count = vw->count;
            a[k].data = (char *)(j < 0 ? (void *)w : s[j]) + vw->offset * sz;
        }
    par_status st = par_npz_write(path, a, k);
    free(a);
    return st;
}

static par_status write_state(loop *L, const char *path)
{
    return ext_write_state(L->c, path, L->w, L->s);
}

static par_status write_batch(loop *L, const char *path, size_t B)
{
    par_array a[3] = {
        {.name = "x", .dtype = L->c->dt, .ndim = 2, .shape = {B, L->c->m->n_inputs},
         .count = B * L->c->m->n_inputs, .data = L->x},
        {.name = "labels", .int_bytes = 4, .ndim = 1, .shape = {B}, .count = B, .data = L->labels},
        {.name = "records", .int_bytes = 8, .ndim = 1, .shape = {B}, .count = B,
         .data = L->records}};
    return par_npz_write(path, a, 3);
}

static par_status get_array(const par_array **out, const par_npz *z, const char *name,
                            const par_view *v, par_dtype dt, long step, const char *file)
{
    return ext_get_array(out, z, name, v->ndim, v->shape, dt, step, file, 0);
}

// ---- comparing --------------------------------------------------------------------

static void index_of(char *buf, size_t n, int ndim, const size_t *shape, size_t i)
{
    size_t count = 1;
    for (int d = 0; d < ndim; d++) count *= shape[d];
    if (ndim == 0 || count == 1) {
        buf[0] = '\0';
        return;
    }
    size_t idx[4], rest = i;
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = rest % shape[d];
        rest /= shape[d];
    }
    buf[0] = '[';
    buf[1] = '\0';
    for (int d = 0; d < ndim; d++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%zu", d ? "," : "", idx[d]);
    snprintf(buf + strlen(buf), n - strlen(buf), "]");
}

// Records one comparison into (worst, first, count).
static void note_cmp(ext_worst *worst, ext_worst *first, size_t *count, long step,
                     const ext_cmp *c)
{
    const double d = fabs(c->got - c->centre), q = d == 0 ? 0 : d / c->bound;   // NaN: over
    const int over = !(q <= 1);
    if (!over && !(q > worst->ratio)) return;
    ext_worst w = {step, "", "", "", c->got, c->centre, c->bound, over && !(q == q) ? INFINITY : q};
    snprintf(w.tensor, sizeof w.tensor, "%s", c->tensor);
    snprintf(w.op, sizeof w.op, "%s", c->op ? c->op : "");
    index_of(w.index, sizeof w.index, c->ndim, c->shape, c->i);
    if (over && ++*count == 1) *first = w;
    if (!(w.ratio <= worst->ratio)) *worst = w;
}

// One comparison into the result, of the step's bound (local 0) or of its
// own ops (1), and to the caller's hook.
static void note_any(loop *L, long step, int local, const ext_cmp *c)
{
    ext_lockstep_result *r = L->r;
    if (local) note_cmp(&r->local_worst, &r->local_first, &r->local_violations, step, c);
    else note_cmp(&r->worst, &r->first, &r->violations, step, c);
    const ext_hooks *h = L->c->hooks;
    if (h && h->cmp) h->cmp(h->ctx, step, local, c);
}

typedef struct local_sink {
    loop *L;
    long step;
} local_sink;

static void on_local(void *ctx, const ext_cmp *c)
{
    local_sink *k = ctx;
    note_any(k->L, k->step, 1, c);
}

// Element k of view v of the trainer's new weights (wa) and optimizer state
// (sa) against the centre and bound of each: into the step's bound, or
// (own) into the checks of its own ops.
static void compare_elem(loop *L, long step, int own, int v, size_t k,
                         const par_array *const *wa, const par_array *const *sa,
                         char names[3][64], const double cen[3], const double E[3])
{
    const ext_lockstep_cfg *c = L->c;
    const par_view *vw = &c->m->views[v];
    const char *op = own ? "the update, from its own gradient" : NULL;
    for (int j = -1; j < L->n_state; j++) {
        const par_array *a = j < 0 ? wa[v] : sa[j * c->m->n_views + v];
        const ext_cmp cmp = {names[1 + j], op, vw->ndim, vw->shape, k,
                             par_get_real(c->dt, a->data, k), cen[1 + j], E[1 + j]};
        note_any(L, step, own, &cmp);
    }
}

// The trainer's new weights and state against the step's bound; with its
// gradient (ga), its update against the update of that gradient (Eg 0).
static void compare_state(loop *L, long step, const par_array *const *wa,
                          const par_array *const *sa, const par_array *const *ga)
{
    const ext_lockstep_cfg *c = L->c;
    ext_update up;
    ext_update_init(&up, &c->optim, c->dt, L->opt_t + 1);
    for (int v = 0; v < c->m->n_views; v++) {
        const par_view *vw = &c->m->views[v];
        const int stat = ext_view_is_stat(c->m, v);   // no gradient, nothing of its own
        char names[3][64];   // the view's weights and state arrays
        snprintf(names[0], sizeof names[0], "%s", vw->name);
        for (int j = 0; j < L->n_state; j++)
            snprintf(names[1 + j], sizeof names[1 + j], "opt.%s.%s", state_name(&c->optim, j),
                     vw->name);
        for (size_t k = 0; k < vw->count; k++) {
            const size_t i = vw->offset + k;
            const double w = par_get_real(c->dt, L->w, i);
            const double s0 = L->n_state > 0 ? par_get_real(c->dt, L->s[0], i) : 0;
            const double s1 = L->n_state > 1 ? par_get_real(c->dt, L->s[1], i) : 0;
            double cen[3], E[3];
            ext_new_bound(&up, stat, &L->e, i, w, s0, s1, cen, E);
            compare_elem(L, step, 0, v, k, wa, sa, names, cen, E);
            if (!ga || stat) continue;
            ext_update_bound(&up, w, s0, s1, par_get_real(c->dt, ga[v]->data, k), 0, cen, E);
            compare_elem(L, step, 1, v, k, wa, sa, names, cen, E);
        }
    }
}

// median(|g_trainer - gc|) / median(|g_parity - gc|) per view: how much more
// its gradient's rounding is than parity's on the same step.
static void signature(loop *L, long step, const par_array *const *ga, const void *gp)
{
    const par_model *m = L->c->m;
    for (int v = 0; v < m->n_views; v++) {
        const par_view *vw = &m->views[v];
        if (ext_view_is_stat(m, v)) continue;
        double *d = L->dev;
        for (size_t k = 0; k < vw->count; k++)
            d[k] = fabs(par_get_real(L->c->dt, ga[v]->data, k) - L->e.gc[vw->offset + k]);
        const double dt = par_median_select(d, vw->count);
        for (size_t k = 0; k < vw->count; k++)
            d[k] = fabs(par_get_real(L->c->dt, gp, vw->offset + k) - L->e.gc[vw->offset + k]);
        const double dp = par_median_select(d, vw->count);
        const double q = dt == 0 || dp == 0 ? 0 : dt / dp;   // nothing to size against: 0
        if (!(q <= L->r->signature) && vw->count >= 16) {
            L->r->signature = q;
            L->r->signature_step = step;
            snprintf(L->r->signature_tensor, sizeof L->r->signature_tensor, "grad.%s", vw->name);
        }
    }
    L->r->signature_flagged = !(L->r->signature <= EXT_SIGNATURE_LIMIT);
}

// ---- the loop ----------------------------------------------------------------------

json_t *ext_hello_json(const ext_lockstep_cfg *c)
{
    const par_dataset *ds = c->ds;
    return json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:{s:s, s:f, s:f, s:f, s:f, s:f}, s:{s:s, s:s, s:I, s:I, "
        "s:[I, I, I], s:I}, s:I, s:b, s:I}",
        "model", c->m->spec, "act", par_act_name(c->act), "dtype", par_dtype_name(c->dt), "batch",
        (json_int_t)c->batch, "chunk", (json_int_t)c->chunk, "optim", "name",
        par_optim_name((par_optim_kind)c->optim.kind), "lr", c->optim.lr, "momentum", c->optim.mu,
        "beta1", c->optim.b1, "beta2", c->optim.b2, "eps", c->optim.eps, "dataset", "name",
        ds->name, "dir", ds->dir, "n_train", (json_int_t)ds->n_train, "n_val",
        (json_int_t)ds->n_val, "shape", (json_int_t)ds->train.channels,
        (json_int_t)ds->train.height, (json_int_t)ds->train.width, "classes",
        (json_int_t)ds->n_classes, "seed", (json_int_t)c->seed, "intermediates",
        c->want_intermediates, "steps", (json_int_t)c->steps);
}

// The batch of `step` into L->x, labels, records; its size into *B.
static par_status load_batch(loop *L, long step, size_t *B)
{
    const ext_lockstep_cfg *c = L->c;
    size_t *idx;
    int epoch;
    PAR_TRY(chk_step_records(&idx, B, &epoch, c->ds, c->seed, c->batch, step));
    par_data_gather(&c->ds->train, idx, *B, c->dt, L->x, L->labels);
    for (size_t s = 0; s < *B; s++) L->records[s] = (int64_t)idx[s];
    free(idx);
    return PAR_OK;
}

// parity's own step from L's state on L's batch.
static par_status parity_step(loop *L, size_t B)
{
    PAR_TRY(L->ops->set_params(L->serial, L->w));
    if (L->n_state) {
        const par_optim_state in = {L->n_state, {L->s[0], L->s[1]}, L->opt_t};
        PAR_TRY(L->ops->set_optim(L->serial, &in));
    }
    const par_batch pb = {L->x, L->labels, B, NULL, NULL};
    double loss_parity;
    return L->ops->step(L->serial, &pb, &loss_parity);
}

// On from parity's state after its step (the reference's bits).
static par_status advance(loop *L)
{
    const void *wn;
    size_t n;
    PAR_TRY(L->ops->params(L->serial, &wn, &n));
    memcpy(L->w, wn, L->N * L->sz);
    if (L->n_state) {
        par_optim_state so;
        PAR_TRY(L->ops->get_optim(L->serial, &so));
        for (int j = 0; j < L->n_state; j++) memcpy(L->s[j], so.arr[j], L->N * L->sz);
        L->opt_t = so.t;
    }
    return PAR_OK;
}

// A step before cfg.first: parity's alone.
static par_status own_step(loop *L, long step)
{
    double t = par_now();
    size_t B;
    PAR_TRY(load_batch(L, step, &B));
    PAR_TRY(parity_step(L, B));
    PAR_TRY(advance(L));
    lap(L->r, EXT_PART_STEP, &t);
    return PAR_OK;
}

static par_status one_step(loop *L, long step)
{
    const ext_lockstep_cfg *c = L->c;
    const par_model *m = c->m;
    ext_lockstep_result *r = L->r;
    double t = par_now();
    size_t B;
    PAR_TRY(load_batch(L, step, &B));
    char state[600], batch[600], out[600], inter[600];
    ext_path(L->t, state, sizeof state, "state.npz");
    ext_path(L->t, batch, sizeof batch, "batch.npz");
    ext_path(L->t, out, sizeof out, "out.npz");
    ext_path(L->t, inter, sizeof inter, "intermediates.npz");
    PAR_TRY(write_state(L, state));
    PAR_TRY(write_batch(L, batch, B));
    json_t *msg = json_pack("{s:s, s:I, s:s, s:I, s:s, s:s, s:o}", "op", "step", "step",
                            (json_int_t)step, "state", state, "optim_t", (json_int_t)L->opt_t,
                            "batch", batch, "out", out, "intermediates",
                            r->intermediates ? json_string(inter) : json_null());
    PAR_FAIL_IF(!msg, PAR_ERR_ALLOC, "out of memory");
    par_status st = ext_send(L->t, msg);
    json_decref(msg);
    PAR_TRY(st);
    lap(r, EXT_PART_FILES, &t);
    // Meanwhile: the step's bound, and parity's own step from the same state.
    PAR_TRY(ext_bound_step(L->b, L->w, L->x, L->labels, B, &c->ulps, &L->e));
    lap(r, EXT_PART_BOUND, &t);
    PAR_TRY(parity_step(L, B));
    lap(r, EXT_PART_STEP, &t);
    json_t *reply;
    PAR_TRY(ext_receive(L->t, "step", &reply));
    r->seconds_wait += par_now() - t;
    t = par_now();
    const json_int_t got_step = json_integer_value(json_object_get(reply, "step"));
    const json_t *lj = json_object_get(reply, "loss");
    const double loss = json_number_value(lj);
    const int loss_given = json_is_number(lj);
    const json_t *sj = json_object_get(reply, "seconds");   // optional: its own step time
    if (json_is_number(sj) && json_number_value(sj) >= 0) {
        r->seconds_trainer += json_number_value(sj);
        r->steps_trainer_timed++;
    }
    json_decref(reply);
    PAR_FAIL_IF(got_step != step, PAR_ERR_EXTERNAL,
                "the trainer answered step %ld as step %lld", step, (long long)got_step);
    PAR_FAIL_IF(!loss_given || !isfinite(loss), PAR_ERR_EXTERNAL,
                "step %ld: the trainer's loss is not a finite number", step);
    const ext_cmp lcmp = {"loss", NULL, 0, NULL, 0, loss, L->e.lc, L->e.El};
    note_any(L, step, 0, &lcmp);
    r->worst_loss_ratio = fmax(r->worst_loss_ratio,
                               loss == L->e.lc ? 0 : fabs(loss - L->e.lc) / L->e.El);
    par_npz zo = {0}, zi = {0};
    const par_array *wa[PAR_MAX_VIEWS], *sa[2 * PAR_MAX_VIEWS], *ga[PAR_MAX_VIEWS];
    st = par_npz_read(&zo, out);
    if (st != PAR_OK) st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                                         "step %ld: the trainer's out.npz: %s", step,
                                         par_last_error());
    for (int v = 0; st == PAR_OK && v < m->n_views; v++) {
        st = get_array(&wa[v], &zo, m->views[v].name, &m->views[v], c->dt, step, "out.npz");
        for (int j = 0; st == PAR_OK && j < L->n_state; j++) {
            char name[64];
            snprintf(name, sizeof name, "opt.%s.%s", state_name(&c->optim, j), m->views[v].name);
            st = get_array(&sa[j * m->n_views + v], &zo, name, &m->views[v], c->dt, step,
                           "out.npz");
        }
    }
    if (st == PAR_OK && r->intermediates) {
        st = par_npz_read(&zi, inter);
        if (st != PAR_OK) st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                                             "step %ld: the trainer's intermediates.npz: %s",
                                             step, par_last_error());
        for (int v = 0; st == PAR_OK && v < m->n_views; v++) {
            char name[64];
            ga[v] = NULL;
            if (ext_view_is_stat(m, v)) continue;   // batchnorm's statistics: no gradient
            snprintf(name, sizeof name, "grad.%s", m->views[v].name);
            st = get_array(&ga[v], &zi, name, &m->views[v], c->dt, step, "intermediates.npz");
        }
    }
    lap(r, EXT_PART_FILES, &t);
    if (st == PAR_OK) {
        compare_state(L, step, wa, sa, r->intermediates ? ga : NULL);
        if (r->intermediates) {
            const void *gp;
            st = L->ops->grad(L->serial, &gp);
            if (st == PAR_OK) signature(L, step, ga, gp);
        }
    }
    if (st == PAR_OK && r->intermediates) {   // its every op, from its own values
        local_sink k = {L, step};
        const ext_local_in li = {m, c->dt, B, L->w, L->x, L->labels, &zi, loss, &c->ulps, step,
                                 on_local, &k};
        int checked;
        double q;
        char qt[64];
        st = ext_local_check(&li, &checked, &q, qt, sizeof qt);
        r->layers_checked = checked;
        if (st == PAR_OK && !(q <= r->signature)) {
            r->signature = q;
            r->signature_step = step;
            snprintf(r->signature_tensor, sizeof r->signature_tensor, "%s", qt);
        }
        r->signature_flagged = !(r->signature <= EXT_SIGNATURE_LIMIT);
    }
    const ext_hooks *h = c->hooks;
    if (st == PAR_OK && h && h->answer) {
        const ext_answer a = {step, B, L->w, {L->s[0], L->s[1]}, L->opt_t, L->x, L->labels,
                              &L->e, loss, wa, sa, r->intermediates ? ga : NULL,
                              r->intermediates ? &zi : NULL};
        st = h->answer(h->ctx, &a);
    }
    lap(r, EXT_PART_CHECKS, &t);
    par_npz_free(&zo);
    par_npz_free(&zi);
    PAR_TRY(st);
    PAR_TRY(advance(L));
    lap(r, EXT_PART_STEP, &t);
    r->steps = step;
    return PAR_OK;
}

static void loop_free(loop *L)
{
    ext_stop(L->t);
    ext_bound_destroy(L->b);
    if (L->serial) L->ops->destroy(L->serial);
    free(L->w);
    free(L->s[0]);
    free(L->s[1]);
    free(L->x);
    free(L->labels);
    free(L->records);
    free(L->e.gc);
    free(L->e.Eg);
    free(L->e.G);
    free(L->dev);
}

par_status ext_lockstep(ext_lockstep_result *r, const ext_lockstep_cfg *c)
{
    memset(r, 0, sizeof *r);
    const par_model *m = c->m;
    PAR_FAIL_IF(c->steps < 1 || c->batch < 1, PAR_ERR_CONFIG,
                "lockstep --external needs steps >= 1 and a batch >= 1");
    PAR_FAIL_IF(!(c->proto.timeout_s > 0), PAR_ERR_CONFIG, "--timeout %g: expected seconds > 0",
                c->proto.timeout_s);
    PAR_FAIL_IF(c->ds->train.n_features != m->n_inputs || c->ds->n_classes != m->n_classes,
                PAR_ERR_CONFIG, "--model %s does not fit dataset %s", m->spec, c->ds->name);
    loop L = {.c = c, .r = r, .N = m->n_params, .sz = par_dtype_size(c->dt)};
    L.ops = par_trainer_find("serial");
    L.n_state = par_optim_n_state((par_optim_kind)c->optim.kind);
    const par_optim po = {(par_optim_kind)c->optim.kind, c->optim.mu, c->optim.b1, c->optim.b2,
                          c->optim.eps};
    const par_run_cfg rc = {.model = m, .dtype = c->dt, .mode = PAR_MODE_EXACT,
                            .batch = c->batch, .chunk = c->chunk, .lr = c->optim.lr,
                            .threads = 1, .init_params = c->init, .optim = &po};
    par_status st = ext_bound_create(&L.b, m, c->dt, c->batch);
    if (st == PAR_OK) st = L.ops->create(&rc, &L.serial);
    const size_t N = L.N, sz = L.sz;
    L.w = malloc(N * sz);
    L.s[0] = calloc(N, sz);
    L.s[1] = calloc(N, sz);
    L.x = malloc(c->batch * m->n_inputs * sz);
    L.labels = malloc(c->batch * sizeof *L.labels);
    L.records = malloc(c->batch * sizeof *L.records);
    L.e.gc = malloc(N * sizeof(double));
    L.e.Eg = malloc(N * sizeof(double));
    L.e.G = malloc(N * sizeof(double));
    L.dev = malloc(N * sizeof(double));
    if (st == PAR_OK && (!L.w || !L.s[0] || !L.s[1] || !L.x || !L.labels || !L.records ||
                         !L.e.gc || !L.e.Eg || !L.e.G || !L.dev))
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK) {
        memcpy(L.w, c->init, N * sz);
        json_t *hello = ext_hello_json(c), *reply = NULL;
        st = hello ? ext_start(&L.t, &c->proto, hello, &reply)
                   : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
        json_decref(hello);
        if (st == PAR_OK) {
            snprintf(r->name, sizeof r->name, "%s",
                     json_string_value(json_object_get(reply, "name"))
                         ? json_string_value(json_object_get(reply, "name")) : "trainer");
            r->world = (int)json_integer_value(json_object_get(reply, "world"));
            r->intermediates = c->want_intermediates &&
                               json_is_true(json_object_get(reply, "intermediates"));
        }
        json_decref(reply);
    }
    for (long k = 1; st == PAR_OK && k <= c->steps; k++)
        st = k < c->first ? own_step(&L, k) : one_step(&L, k);
    for (int k = 0; k < EXT_PART_N; k++) r->seconds_parity += r->seconds_part[k];
    if (st != PAR_OK) {
        // Keep the message past the cleanup, which may record its own.
        char keep[700];
        snprintf(keep, sizeof keep, "%s", par_last_error());
        loop_free(&L);
        return par_set_error(st, __FILE__, __LINE__, "%s", keep);
    }
    loop_free(&L);
    return PAR_OK;
}

par_status ext_job_run(ext_lockstep_job *job, int *opening, ext_job_fn fn, void *result)
{
    ext_lockstep_cfg *c = &job->cfg;
    par_dataset ds;
    par_status st = par_dataset_open(&ds, job->dataset, 10);
    *opening = st != PAR_OK;
    PAR_TRY(st);
    const par_model *m = c->m;
    if (ds.train.n_features != m->n_inputs)
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                           "--model %s takes %zu inputs but dataset %s has %zu features per "
                           "sample", m->spec, m->n_inputs, ds.name, ds.train.n_features);
    else if (c->batch > ds.n_train)
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                           "--batch %zu: expected at most %zu, the training split of %s",
                           c->batch, ds.n_train, ds.name);
    void *init = st == PAR_OK ? malloc(m->n_params * par_dtype_size(c->dt)) : NULL;
    if (st == PAR_OK && !init) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK && job->init_load) st = par_weights_load(job->init_load, m, c->dt, init);
    else if (st == PAR_OK) par_model_init(m, c->dt, c->seed, init);
    c->ds = &ds;
    c->init = init;
    if (st == PAR_OK) st = fn(result, c);
    c->ds = NULL;
    c->init = NULL;
    free(init);
    par_dataset_free(&ds);
    return st;
}

par_status ext_lockstep_fn(void *result, const ext_lockstep_cfg *c)
{
    return ext_lockstep(result, c);
}

int ext_lockstep_pass(const ext_lockstep_result *r)
{
    return r->violations == 0 && r->local_violations == 0 && !r->signature_flagged;
}

static void worst_json(json_t *j, const char *key, const ext_worst *w)
{
    if (w->step == 0) {
        json_object_set_new(j, key, json_null());
        return;
    }
    json_object_set_new(j, key, json_pack("{s:I, s:s, s:s, s:s, s:f, s:f, s:f, s:f}", "step",
                                          (json_int_t)w->step, "tensor", w->tensor, "index",
                                          w->index, "op", w->op, "trainer", w->got, "centre",
                                          w->centre, "bound", w->bound, "ratio", w->ratio));
}

json_t *ext_lockstep_json(const ext_lockstep_result *r)
{
    json_t *j = json_pack("{s:s, s:i, s:I, s:I, s:f, s:b, s:I, s:f, s:s, s:b, s:f, s:f, s:s}",
                          "trainer", r->name, "world", r->world, "steps", (json_int_t)r->steps,
                          "violations", (json_int_t)r->violations, "worst_loss_ratio",
                          r->worst_loss_ratio, "intermediates", r->intermediates,
                          "local_violations", (json_int_t)r->local_violations, "signature",
                          r->signature, "signature_tensor", r->signature_tensor,
                          "signature_flagged", r->signature_flagged, "seconds_waiting",
                          r->seconds_wait, "seconds_parity", r->seconds_parity, "verdict",
                          ext_lockstep_pass(r) ? "pass" : "fail");
    json_t *parts = json_object();
    for (int k = 0; parts && k < EXT_PART_N; k++)
        json_object_set_new(parts, part_names[k], json_real(r->seconds_part[k]));
    json_object_set_new(j, "seconds_parity_parts", parts);
    json_object_set_new(j, "seconds_trainer", r->steps_trainer_timed > 0
                                                  ? json_real(r->seconds_trainer) : json_null());
    json_object_set_new(j, "steps_trainer_timed", json_integer(r->steps_trainer_timed));
    worst_json(j, "worst", &r->worst);
    worst_json(j, "first_violation", &r->first);
    worst_json(j, "local_worst", &r->local_worst);
    worst_json(j, "local_first_violation", &r->local_first);
    return j;
}
