// `parity bisect --external` (ext_free.h): parity's reference run and its
// runs under other reduction orders make each step's loss band and each
// final tensor's spread; the trainer's `run` (its log and its last weights)
// is held to them; a departure is narrowed in lockstep. Not the lockstep
// itself (ext_lockstep.c), nor the protocol (ext_proto.c).
#define _POSIX_C_SOURCE 200809L
#include "ext_free.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chk_check.h"
#include "ext_local.h"
#include "par_io.h"
#include "par_time.h"
#include "par_trainer.h"

typedef struct plan {
    const ext_lockstep_cfg *c;
    long T;                        // steps
    size_t N, sz;                  // parameters, bytes per element
    size_t *idx, *B;               // T x batch records (row t-1: step t), T sizes
    void *x;
    int32_t *labels;
    double *ref, *lo, *hi, *El;    // per step: the reference's loss, the spread, its bound
    double *trainer;               // per step: the trainer's loss
    long timed_from;               // steps whose seconds the log's sum leaves out (warm-up)
    int n_snap;                    // the steps whose weights are compared: 1, 2, 4, ..., T
    long snap[EXT_FREE_MAX_SNAPS];
    void *w_ref;                   // the reference's weights after each (n_snap x N)
    double spread[EXT_FREE_MAX_SNAPS][PAR_MAX_VIEWS];   // max |run - reference| there
    double E[EXT_FREE_MAX_SNAPS][PAR_MAX_VIEWS];   // that step's any-order bound (view's largest)
} plan;

// A run of parity's own making the spread: trainer, mode, threads, chunk.
typedef struct member {
    const char *trainer;
    par_mode mode;
    int threads;
    size_t chunk;
} member;

// max |a[ia + i] - b[ib + i]| over i < n, arrays of dt. One loop per dtype
// with no early exit: gcc 12's aarch64 vectorizer crashes (an internal
// compiler error at -O3) on the fmax reduction written through par_get_real.
static double max_abs_diff(par_dtype dt, const void *a, size_t ia, const void *b, size_t ib,
                           size_t n)
{
    double d = 0;
    if (dt == PAR_F32) {
        const float *x = (const float *)a + ia, *y = (const float *)b + ib;
        for (size_t i = 0; i < n; i++) {
            const double e = fabs((double)x[i] - (double)y[i]);
            if (e > d) d = e;
        }
    } else {
        const double *x = (const double *)a + ia, *y = (const double *)b + ib;
        for (size_t i = 0; i < n; i++) {
            const double e = fabs(x[i] - y[i]);
            if (e > d) d = e;
        }
    }
    return d;
}

// Which snapshot step t is (-1: none).
static int snap_of(const plan *p, long t)
{
    for (int k = 0; k < p->n_snap; k++)
        if (p->snap[k] == t) return k;
    return -1;
}

static void *w_ref(const plan *p, int k) { return (char *)p->w_ref + (size_t)k * p->N * p->sz; }

static void gather(plan *p, long t)
{
    const ext_lockstep_cfg *c = p->c;
    par_data_gather(&c->ds->train, p->idx + (size_t)(t - 1) * c->batch, p->B[t - 1], c->dt,
                    p->x, p->labels);
}

static par_status plan_records(plan *p)
{
    const ext_lockstep_cfg *c = p->c;
    for (long t = 1; t <= p->T; t++) {
        size_t *idx, B;
        int epoch;
        PAR_TRY(chk_step_records(&idx, &B, &epoch, c->ds, c->seed, c->batch, t));
        memcpy(p->idx + (size_t)(t - 1) * c->batch, idx, B * sizeof *idx);
        p->B[t - 1] = B;
        free(idx);
    }
    return PAR_OK;
}

static par_status create(const plan *p, const member *mb, const par_trainer_ops **ops, void **h)
{
    const ext_lockstep_cfg *c = p->c;
    const par_optim po = {(par_optim_kind)c->optim.kind, c->optim.mu, c->optim.b1, c->optim.b2,
                          c->optim.eps};
    const par_run_cfg rc = {.model = c->m, .dtype = c->dt, .mode = mb->mode, .batch = c->batch,
                            .chunk = mb->chunk, .lr = c->optim.lr, .threads = mb->threads,
                            .init_params = c->init, .optim = &po,
                            .threads_policy = PAR_THREADS_FIXED};
    *ops = par_trainer_find(mb->trainer);
    PAR_FAIL_IF(!*ops, PAR_ERR_CONFIG, "trainer %s is not in this build", mb->trainer);
    return (*ops)->create(&rc, h);
}

// A snapshot step's bound of every new weight, from the reference's state
// before it, the largest of each view into E.
static par_status step_bound(const plan *p, const par_trainer_ops *ops, void *h, const void *w,
                             const ext_step_bound *e, double *Ev)
{
    const ext_lockstep_cfg *c = p->c;
    const int n_state = par_optim_n_state((par_optim_kind)c->optim.kind);
    par_optim_state so = {0};
    if (n_state) PAR_TRY(ops->get_optim(h, &so));
    ext_update up;
    ext_update_init(&up, &c->optim, c->dt, so.t + 1);
    for (int v = 0; v < c->m->n_views; v++) {
        const par_view *vw = &c->m->views[v];
        const int stat = ext_view_is_stat(c->m, v);
        Ev[v] = 0;
        for (size_t k = 0; k < vw->count; k++) {
            const size_t i = vw->offset + k;
            const double s0 = n_state > 0 ? par_get_real(c->dt, so.arr[0], i) : 0;
            const double s1 = n_state > 1 ? par_get_real(c->dt, so.arr[1], i) : 0;
            double cen[3], E[3];
            ext_new_bound(&up, stat, e, i, par_get_real(c->dt, w, i), s0, s1, cen, E);
            Ev[v] = fmax(Ev[v], E[0]);
        }
    }
    return PAR_OK;
}

// The reference (serial exact at the run's chunk): its losses, each step's
// loss bound, its weights after each snapshot step and that step's bounds.
static par_status reference(plan *p)
{
    const ext_lockstep_cfg *c = p->c;
    const member mb = {"serial", PAR_MODE_EXACT, 1, c->chunk};
    const par_trainer_ops *ops;
    void *h = NULL;
    ext_bound *b = NULL;
    ext_step_bound e = {malloc(p->N * sizeof(double)), malloc(p->N * sizeof(double)),
                        malloc(p->N * sizeof(double)), 0, 0};
    par_status st = !e.gc || !e.Eg || !e.G
                        ? par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory")
                        : ext_bound_create(&b, c->m, c->dt, c->batch);
    if (st == PAR_OK) st = create(p, &mb, &ops, &h);
    for (long t = 1; st == PAR_OK && t <= p->T; t++) {
        gather(p, t);
        const void *w;
        size_t n;
        st = ops->params(h, &w, &n);
        if (st == PAR_OK) st = ext_bound_step(b, w, p->x, p->labels, p->B[t - 1], &c->ulps, &e);
        const int k = snap_of(p, t);
        if (st == PAR_OK && k >= 0) st = step_bound(p, ops, h, w, &e, p->E[k]);
        p->El[t - 1] = e.El;
        const par_batch pb = {p->x, p->labels, p->B[t - 1], NULL, NULL};
        if (st == PAR_OK) st = ops->step(h, &pb, &p->ref[t - 1]);
        p->lo[t - 1] = p->hi[t - 1] = p->ref[t - 1];
        if (st == PAR_OK && k >= 0) st = ops->params(h, &w, &n);
        if (st == PAR_OK && k >= 0) memcpy(w_ref(p, k), w, p->N * p->sz);
    }
    if (h) ops->destroy(h);
    ext_bound_destroy(b);
    free(e.gc);
    free(e.Eg);
    free(e.G);
    return st;
}

// One run under another order: its losses widen each step's band, its
// weights at each snapshot step each view's spread there.
static par_status spread_run(plan *p, const member *mb)
{
    const ext_lockstep_cfg *c = p->c;
    const par_trainer_ops *ops;
    void *h = NULL;
    par_status st = create(p, mb, &ops, &h);
    for (long t = 1; st == PAR_OK && t <= p->T; t++) {
        gather(p, t);
        const par_batch pb = {p->x, p->labels, p->B[t - 1], NULL, NULL};
        double loss;
        st = ops->step(h, &pb, &loss);
        p->lo[t - 1] = fmin(p->lo[t - 1], loss);
        p->hi[t - 1] = fmax(p->hi[t - 1], loss);
        const int k = snap_of(p, t);
        const void *w;
        size_t n;
        if (st == PAR_OK && k >= 0) st = ops->params(h, &w, &n);
        for (int v = 0; st == PAR_OK && k >= 0 && v < c->m->n_views; v++) {
            const par_view *vw = &c->m->views[v];
            p->spread[k][v] = fmax(p->spread[k][v], max_abs_diff(c->dt, w, vw->offset, w_ref(p, k),
                                                                 vw->offset, vw->count));
        }
    }
    if (h) ops->destroy(h);
    return st;
}

// The runs of the spread: other chunk sizes in exact mode, one chain over the
// batch (serial fast), threads' partial sums (omp fast, 2 and 3 threads).
static par_status spread(plan *p, ext_free_result *r)
{
    const size_t C = p->c->chunk, Bt = p->c->batch;
    const member all[] = {{"serial", PAR_MODE_EXACT, 1, 1},
                          {"serial", PAR_MODE_EXACT, 1, 2 * C},
                          {"serial", PAR_MODE_FAST, 1, C},
                          {"omp", PAR_MODE_FAST, 2, C},
                          {"omp", PAR_MODE_FAST, 3, C}};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        const member *mb = &all[k];
        if ((mb->mode == PAR_MODE_EXACT && (mb->chunk == C || mb->chunk > Bt)) ||
            !par_trainer_find(mb->trainer) || r->members == EXT_FREE_MAX_MEMBERS)
            continue;
        PAR_TRY(spread_run(p, mb));
        char *d = r->member[r->members++];
        if (mb->mode == PAR_MODE_EXACT)
            snprintf(d, 40, "%s exact chunk %zu", mb->trainer, mb->chunk);
        else if (mb->threads > 1) snprintf(d, 40, "%s fast T=%d", mb->trainer, mb->threads);
        else snprintf(d, 40, "%s fast", mb->trainer);
    }
    return PAR_OK;
}

// ---- the trainer's run ----------------------------------------------------------

static par_status write_batches(const plan *p, const char *path)
{
    const size_t Bt = p->c->batch;
    int64_t *rec = malloc((size_t)p->T * Bt * sizeof *rec);
    PAR_FAIL_IF(!rec, PAR_ERR_ALLOC, "out of memory");
    for (long t = 0; t < p->T; t++)   // a shorter batch's row is padded with -1
        for (size_t s = 0; s < Bt; s++)
            rec[(size_t)t * Bt + s] = s < p->B[t] ? (int64_t)p->idx[(size_t)t * Bt + s] : -1;
    par_array a = {.name = "records", .int_bytes = 8, .ndim = 2, .shape = {(size_t)p->T, Bt},
                   .count = (size_t)p->T * Bt, .data = rec};
    par_status st = par_npz_write(path, &a, 1);
    free(rec);
    return st;
}

// One line of the log: {"step": t, "loss": L, "seconds": s}.
static par_status log_line(plan *p, const char *line, long t, double *seconds)
{
    json_error_t err;
    json_t *j = json_loads(line, 0, &err);
    const json_t *ls = json_object_get(j, "loss"), *ss = json_object_get(j, "seconds");
    const json_int_t step = json_integer_value(json_object_get(j, "step"));
    const double loss = json_number_value(ls), sec = json_number_value(ss);
    const int is_obj = json_is_object(j), ok_loss = json_is_number(ls) && isfinite(loss);
    const int ok_sec = json_is_number(ss) && sec >= 0;
    json_decref(j);
    PAR_FAIL_IF(!is_obj, PAR_ERR_EXTERNAL,
                "the trainer's log.jsonl: line %ld is not a JSON object (%s; a loss that is not "
                "a finite number is answered with an error, not logged)", t, err.text);
    PAR_FAIL_IF(step != t, PAR_ERR_EXTERNAL,
                "the trainer's log.jsonl: line %ld has step %lld, expected %ld", t,
                (long long)step, t);
    PAR_FAIL_IF(!ok_loss, PAR_ERR_EXTERNAL,
                "step %ld: the trainer's log.jsonl: the loss is not a finite number", t);
    PAR_FAIL_IF(!ok_sec, PAR_ERR_EXTERNAL,
                "step %ld: the trainer's log.jsonl: 'seconds' is not a number >= 0", t);
    p->trainer[t - 1] = loss;
    if (t > p->timed_from) *seconds += sec;
    return PAR_OK;
}

static par_status read_log(plan *p, const char *path, double *seconds)
{
    FILE *f = fopen(path, "r");
    PAR_FAIL_IF(!f, PAR_ERR_EXTERNAL, "the trainer answered run but wrote no log.jsonl");
    char *line = NULL;
    size_t cap = 0;
    long t = 0;
    par_status st = PAR_OK;
    while (st == PAR_OK && getline(&line, &cap, f) > 0) {
        if (++t > p->T) {
            st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                               "the trainer's log.jsonl has more than %ld lines, one a step",
                               p->T);
            break;
        }
        st = log_line(p, line, t, seconds);
    }
    free(line);
    fclose(f);
    PAR_TRY(st);
    PAR_FAIL_IF(t != p->T, PAR_ERR_EXTERNAL,
                "the trainer's log.jsonl has %ld lines for %ld steps, one a step", t, p->T);
    return PAR_OK;
}

// Its weights after snapshot step k against the reference's, each view
// against its spread there.
static par_status compare_weights(plan *p, ext_free_result *r, int k, const char *path)
{
    const ext_lockstep_cfg *c = p->c;
    const long t = p->snap[k];
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    PAR_FAIL_IF(access(path, F_OK) != 0, PAR_ERR_EXTERNAL,
                "step %ld: the trainer wrote no %s, the snapshot parity asked for", t, file);
    par_npz z = {0};
    par_status st = par_npz_read(&z, path);
    if (st != PAR_OK)
        st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__, "step %ld: the trainer's %s: %s",
                           t, file, par_last_error());
    for (int v = 0; st == PAR_OK && v < c->m->n_views; v++) {
        const par_view *vw = &c->m->views[v];
        const par_array *a;
        st = ext_get_array(&a, &z, vw->name, vw->ndim, vw->shape, c->dt, t, file, 0);
        const double d = st == PAR_OK ? max_abs_diff(c->dt, a->data, 0, w_ref(p, k),
                                                      vw->offset, vw->count) : 0;
        const double lim = p->spread[k][v] + p->E[k][v], q = d == 0 ? 0 : d / lim;
        if (st == PAR_OK && d > 0)   // 0 / 0: equal; d / 0: no reordering moved it
            r->worst_spread_ratio = fmax(r->worst_spread_ratio,
                                         p->spread[k][v] > 0 ? d / p->spread[k][v] : INFINITY);
        if (st == PAR_OK && !(q <= r->worst_tensor_ratio)) {
            r->worst_tensor_ratio = q;
            r->worst_tensor_step = t;
            snprintf(r->worst_tensor, sizeof r->worst_tensor, "%s", vw->name);
        }
        if (st == PAR_OK && !(q <= 1) && !r->tensor_step) {
            r->tensor_step = t;
            snprintf(r->first_tensor, sizeof r->first_tensor, "%s", vw->name);
            r->tensor_diff = d;
            r->tensor_limit = lim;
        }
    }
    par_npz_free(&z);
    return st;
}

// The loss curve against each step's band, widened by the step's bound.
static void compare_losses(plan *p, ext_free_result *r)
{
    for (long t = 1; t <= p->T; t++) {
        const double L = p->trainer[t - 1], ref = p->ref[t - 1], E = p->El[t - 1];
        const double lo = p->lo[t - 1] - E, hi = p->hi[t - 1] + E;
        const double reach = L >= ref ? hi - ref : ref - lo;
        const double q = L == ref ? 0 : fabs(L - ref) / reach;
        if (!(q <= r->worst_loss_ratio)) {
            r->worst_loss_ratio = q;
            r->worst_loss_step = t;
        }
        if (!(q <= 1) && !r->first_step) {
            r->first_step = t;
            r->first_loss = L;
            r->first_ref = ref;
            r->first_lo = lo;
            r->first_hi = hi;
        }
    }
}

// The run message: its files in the trainer's folder, a snapshot a
// snapshot step (weights-T.npz).
static json_t *run_msg(const plan *p, ext_trainer *tr, char paths[3][600])
{
    json_t *snaps = json_array();
    for (int k = 0; snaps && k < p->n_snap; k++) {
        char name[64], path[600];
        snprintf(name, sizeof name, "weights-%ld.npz", p->snap[k]);
        ext_path(tr, path, sizeof path, name);
        json_array_append_new(snaps, json_pack("{s:I, s:s}", "step", (json_int_t)p->snap[k],
                                               "path", path));
    }
    return snaps ? json_pack("{s:s, s:I, s:s, s:s, s:s, s:o}", "op", "run", "steps",
                             (json_int_t)p->T, "state", paths[0], "batches", paths[1], "log",
                             paths[2], "snapshots", snaps)
                 : NULL;
}

// Hands the trainer its start (state, batches), waits for its run, reads
// its log and compares its snapshots.
static par_status hand_over(plan *p, ext_free_result *r, ext_trainer *tr)
{
    const ext_lockstep_cfg *c = p->c;
    char paths[3][600];
    ext_path(tr, paths[0], sizeof paths[0], "state.npz");
    ext_path(tr, paths[1], sizeof paths[1], "batches.npz");
    ext_path(tr, paths[2], sizeof paths[2], "log.jsonl");
    void *zeros = calloc(p->N, p->sz);
    void *const s[2] = {zeros, zeros};
    PAR_FAIL_IF(!zeros, PAR_ERR_ALLOC, "out of memory");
    par_status st = ext_write_state(c, paths[0], c->init, s);
    free(zeros);
    PAR_TRY(st);
    PAR_TRY(write_batches(p, paths[1]));
    json_t *msg = run_msg(p, tr, paths), *reply = NULL;
    PAR_FAIL_IF(!msg, PAR_ERR_ALLOC, "out of memory");
    st = ext_request(tr, msg, &reply);
    json_decref(msg);
    PAR_TRY(st);
    const json_int_t n = json_integer_value(json_object_get(reply, "steps"));
    json_decref(reply);
    PAR_FAIL_IF(n != p->T, PAR_ERR_EXTERNAL, "the trainer answered run with %lld steps, not %ld",
                (long long)n, p->T);
    PAR_TRY(read_log(p, paths[2], &r->seconds_trainer));
    for (int k = 0; k < p->n_snap; k++) {
        char name[64], path[600];
        snprintf(name, sizeof name, "weights-%ld.npz", p->snap[k]);
        ext_path(tr, path, sizeof path, name);
        PAR_TRY(compare_weights(p, r, k, path));
    }
    return PAR_OK;
}

static par_status trainer_run(plan *p, ext_free_result *r)
{
    ext_trainer *tr = NULL;
    json_t *hello = ext_hello_json(p->c), *reply = NULL;
    par_status st = hello ? ext_start(&tr, &p->c->proto, hello, &reply)
                          : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    json_decref(hello);
    if (st == PAR_OK) {
        const char *name = json_string_value(json_object_get(reply, "name"));
        snprintf(r->name, sizeof r->name, "%s", name ? name : "trainer");
        r->world = (int)json_integer_value(json_object_get(reply, "world"));
    }
    json_decref(reply);
    if (st == PAR_OK) st = hand_over(p, r, tr);
    char keep[700];   // past the cleanup, which may record its own
    snprintf(keep, sizeof keep, "%s", par_last_error());
    ext_stop(tr);
    return st == PAR_OK ? PAR_OK : par_set_error(st, __FILE__, __LINE__, "%s", keep);
}

static void plan_free(plan *p)
{
    free(p->idx);
    free(p->B);
    free(p->x);
    free(p->labels);
    free(p->ref);
    free(p->w_ref);
}

// The plan's arrays for c->steps steps and p->n_snap snapshots (p->c, T, N,
// sz and the snapshots set).
static par_status plan_alloc(plan *p)
{
    const ext_lockstep_cfg *c = p->c;
    const size_t T = (size_t)p->T;
    p->idx = malloc(T * c->batch * sizeof *p->idx);
    p->B = malloc(T * sizeof *p->B);
    p->x = malloc(c->batch * c->m->n_inputs * p->sz);
    p->labels = malloc(c->batch * sizeof *p->labels);
    p->ref = malloc(5 * T * sizeof *p->ref);   // ref, lo, hi, El, trainer
    p->w_ref = malloc((size_t)(p->n_snap > 0 ? p->n_snap : 1) * p->N * p->sz);
    PAR_FAIL_IF(!p->idx || !p->B || !p->x || !p->labels || !p->ref || !p->w_ref, PAR_ERR_ALLOC,
                "out of memory");
    p->lo = p->ref + T;
    p->hi = p->lo + T;
    p->El = p->hi + T;
    p->trainer = p->El + T;
    return PAR_OK;
}

par_status ext_free(ext_free_result *r, const ext_lockstep_cfg *c)
{
    memset(r, 0, sizeof *r);
    PAR_FAIL_IF(c->steps < 1 || c->batch < 1, PAR_ERR_CONFIG,
                "bisect --external needs steps >= 1 and a batch >= 1");
    plan p = {.c = c, .T = c->steps, .N = c->m->n_params, .sz = par_dtype_size(c->dt)};
    for (long t = 1; t < p.T && p.n_snap < EXT_FREE_MAX_SNAPS - 1; t *= 2) p.snap[p.n_snap++] = t;
    p.snap[p.n_snap++] = p.T;
    par_status st = plan_alloc(&p);
    const double t0 = par_now();
    if (st == PAR_OK) st = plan_records(&p);
    if (st == PAR_OK) st = reference(&p);
    if (st == PAR_OK) st = spread(&p, r);
    r->seconds_parity = par_now() - t0;
    if (st == PAR_OK) st = trainer_run(&p, r);
    if (st == PAR_OK) compare_losses(&p, r);
    r->steps = p.T;
    r->within = st == PAR_OK && !r->first_step && !r->tensor_step;
    plan_free(&p);
    PAR_TRY(st);
    if (r->within) return PAR_OK;
    ext_lockstep_cfg narrow = *c;   // steps 1..the first step outside, by loss or by weights
    narrow.steps = !r->tensor_step || (r->first_step && r->first_step < r->tensor_step)
                       ? r->first_step : r->tensor_step;
    r->lockstep_ran = 1;
    return ext_lockstep(&r->lockstep, &narrow);
}

par_status ext_free_fn(void *result, const ext_lockstep_cfg *c) { return ext_free(result, c); }

par_status ext_time_fn(void *result, const ext_lockstep_cfg *c)
{
    ext_time_result *tr = result;
    PAR_FAIL_IF(c->steps < 1 || c->batch < 1 || tr->warmup < 0 || tr->warmup >= c->steps,
                PAR_ERR_CONFIG, "a timed external run needs steps >= 1 after its warm-up");
    plan p = {.c = c, .T = c->steps, .N = c->m->n_params, .sz = par_dtype_size(c->dt),
              .timed_from = tr->warmup};
    ext_free_result *r = calloc(1, sizeof *r);
    par_status st = r ? plan_alloc(&p)
                      : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK) st = plan_records(&p);
    if (st == PAR_OK) st = trainer_run(&p, r);
    if (st == PAR_OK) {
        tr->seconds = r->seconds_trainer;
        tr->world = r->world;
        snprintf(tr->name, sizeof tr->name, "%s", r->name);
    }
    free(r);
    plan_free(&p);
    return st;
}
