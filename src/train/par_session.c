// A training session (par_session.h): the training loop with initial
// weights, log, checkpoints, resume, --select best-val and the agreement of
// MPI ranks. Every rank passes every collective whatever fails, so that no
// rank waits for another. Never prints. Tests: tests/unit/test_session.c, and
// tests/cli/test_resume.sh, tests/cli/test_faults.sh through `parity train`.
#define _POSIX_C_SOURCE 200809L
#include "par_session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_ckpt.h"
#include "par_hash.h"
#include "par_log.h"
#include "par_npz.h"
#include "par_time.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

struct par_session {
    par_session_cfg cfg;
    par_session_result res;
    int mpi;                       // more than one rank (collective agreement)
    long total_steps, per_epoch;
    double t_start, t_eval;
    // --warmup-steps K: the clock, evaluation time and samples when the K-th step ended
    int warm_done;
    double t_warm, t_eval_warm;
    size_t samples_warm;
    double phase_warm[PAR_PHASE_N];   // the phases so far (par_trainer_stats.phase)
    void *init, *final;
    par_optim optim;               // cfg.run.cfg.optim, or SGD
    par_fault fault;               // cfg.run.cfg.fault, counted from the resume point
    // Checkpoints (rank 0 writes them).
    par_ckpt_dir *ck;
    par_ckpt_logtrack *track;
    par_ckpt_meta meta;            // config and writer filled once; position per checkpoint
    int checkpointing;             // ckpt_dir or resume (same on every rank)
    long every;
    int keep;
    // Resume: the checkpoint found, its point and optimizer state.
    par_ckpt_meta found;
    par_run_point start;
    par_ckpt_optim ros;
    par_log *log;
    char replayed_from[1200];      // the file the log's first lines were read from
    // A hook's own failure, held until the ranks have agreed to stop.
    par_status pending;
    const volatile sig_atomic_t *stop;
    // --select best-val (rank 0): the weights and evaluation of the best epoch so far.
    void *best_w;
    double best_val_loss, best_val_acc, best_test_loss, best_test_acc;
    char skipped[1024], steps_hint[96];
    char used_hint[1200];          // the hint of a --checkpoint-dir that holds a run
};

// MPI: every rank contributes v[0..n), all get the maxima. No-op for one process.
static void agree_max(int mpi, int *v, int n)
{
#ifdef PARITY_HAVE_MPI
    if (mpi) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#else
    (void)mpi, (void)v, (void)n;
#endif
}

par_status par_session_agree(int ranks, par_status local, int *peer_failed)
{
    if (ranks <= 1) return local;
    int v = local != PAR_OK;
    agree_max(1, &v, 1);
    if (local != PAR_OK) return local;
    if (v) {
        *peer_failed = 1;
        return PAR_RUN_STOP;
    }
    return PAR_OK;
}

void par_session_share(int ranks, int *v)
{
#ifdef PARITY_HAVE_MPI
    if (ranks > 1) MPI_Bcast(v, 1, MPI_INT, 0, MPI_COMM_WORLD);
#else
    (void)ranks, (void)v;
#endif
}

static par_status agree_status(par_session *s, par_status local)
{
    return par_session_agree(s->cfg.ranks, local, &s->res.peer_failed);
}

static size_t weight_bytes(const par_session *s)
{
    return s->cfg.run.cfg.model->n_params * par_dtype_size(s->cfg.run.cfg.dtype);
}

// ---- the hooks of the loop ----

static void progress(par_session *s, int epoch_end, int epoch, long step, double t)
{
    const par_session_progress p = {epoch_end, epoch, step, s->total_steps, s->res.last_loss,
                                    s->res.samples, t, s->t_start, t - s->t_start - s->t_eval,
                                    s->res.val_acc, s->res.test_acc};
    if (s->cfg.progress) s->cfg.progress(s->cfg.ctx, &p);
}

// Local work of a step (log line, progress); a failure is held in s->pending
// until after_step, where the ranks agree on it.
static par_status on_step(void *ctx, int epoch, long step, size_t B, double loss,
                          const void *params)
{
    par_session *s = ctx;
    s->res.samples += B;
    s->res.last_loss = loss;
    if (s->cfg.rank != 0) return PAR_OK;
    if (s->log) {
        // XXH3-128 of the weight buffer's bytes as they lie in memory (so equal
        // weights give equal digests across trainers and ranks): the step
        // log's digest, cheap beside a step; artefacts keep SHA-256.
        char xxh[33];
        if (!s->cfg.no_digest) par_xxh128_hex(xxh, params, weight_bytes(s));
        s->pending = par_log_step(s->log, epoch, step, loss, s->cfg.no_digest ? NULL : xxh);
        if (s->pending != PAR_OK) return s->mpi ? PAR_OK : s->pending;
    }
    progress(s, 0, epoch, step, par_now());
    return PAR_OK;
}

// Rank 0 writes the checkpoint of point pt.
static par_status write_checkpoint(par_session *s, const par_run_point *pt, const void *params,
                                   const par_optim_state *now)
{
    // Weights are scanned every check_every steps only: never save a bad one.
    char where[160];
    const par_run_cfg *rc = &s->cfg.run.cfg;
    PAR_FAIL_IF(par_find_nonfinite(where, sizeof where, rc->model, rc->dtype, params),
                PAR_ERR_NUMERIC, "step %ld (epoch %d): weight %s: not finite; no checkpoint "
                "written (learning rate too large?)", pt->step, pt->epoch, where);
    par_ckpt_meta *mt = &s->meta;
    mt->step = pt->step;
    mt->epoch = pt->epoch;
    mt->pos = pt->pos;
    mt->has_log = s->track != NULL;
    if (s->track) PAR_TRY(par_ckpt_log_sync(s->track, &mt->log));
    par_ckpt_optim os = {now->n, {NULL, NULL}, {now->arr[0], now->arr[1]}, now->t};
    for (int i = 0; i < os.n; i++) os.names[i] = par_optim_state_name(s->optim.kind, i);
    mt->has_best = s->best_w && s->res.best_epoch >= 0;   // --select best-val: the best so far
    mt->best_epoch = s->res.best_epoch;
    mt->best_val_loss = s->best_val_loss;
    mt->best_val_acc = s->best_val_acc;
    mt->best_test_loss = s->best_test_loss;
    mt->best_test_acc = s->best_test_acc;
    PAR_TRY(par_ckpt_write_ex(s->ck, mt, rc->model, rc->dtype, params, &os, s->best_w,
                              s->keep));
    s->res.last_ckpt = pt->step;
    return PAR_OK;
}

// After every step: the ranks agree on stop requests and failures, and a
// checkpoint is written every s->every steps, at the last step, and on stop.
static par_status after_step(void *ctx, const par_run_point *pt, const void *params,
                             const par_run_now *now)
{
    par_session *s = ctx;
    int v[2] = {s->stop ? *s->stop : 0, s->pending != PAR_OK};
    agree_max(s->mpi, v, 2);
    if (v[1]) {
        if (s->pending != PAR_OK) return s->pending;
        s->res.peer_failed = 1;
        return PAR_RUN_STOP;
    }
    const int due = s->every > 0 && (pt->step % s->every == 0 || pt->step == s->total_steps);
    if ((due || v[0]) && s->checkpointing) {
        par_optim_state os;   // every rank: collective for the MPI trainers
        size_t n;
        par_status st = params ? PAR_OK : now->trainer->params(now->state, &params, &n);
        if (st == PAR_OK) st = par_run_optim(now, &os);
        if (st == PAR_OK && s->cfg.rank == 0 && s->ck) st = write_checkpoint(s, pt, params, &os);
        PAR_TRY(agree_status(s, st));
    }
    if (v[0]) {
        s->res.stop_sig = v[0];
        return PAR_RUN_STOP;
    }
    // The timed window starts here, once the ranks have agreed on step K:
    // first-touch page faults, cold caches and thread start-up stay outside it.
    if (s->cfg.warmup_steps > 0 && pt->step - s->start.step == s->cfg.warmup_steps) {
        s->warm_done = 1;
        par_trainer_stats so_far = {0};   // collective for the MPI trainers, like this hook
        if (now->trainer->stats) PAR_TRY(now->trainer->stats(now->state, &so_far));
        so_far.phase[PAR_PHASE_BATCH] += now->run_phase[PAR_PHASE_BATCH];
        so_far.phase[PAR_PHASE_LOG] = now->run_phase[PAR_PHASE_LOG];
        memcpy(s->phase_warm, so_far.phase, sizeof s->phase_warm);
        s->t_warm = par_now();
        s->t_eval_warm = s->t_eval;
        s->samples_warm = s->res.samples;
    }
    return PAR_OK;
}

// The steps whose hooks read the parameters: every one with a digest in the
// log; checkpoints that are due (after_step fetches them itself on a stop).
static int wants_params(void *ctx, long step)
{
    const par_session *s = ctx;
    if (s->cfg.rank == 0 && s->log && !s->cfg.no_digest) return 1;
    return s->checkpointing && s->every > 0 && (step % s->every == 0 || step == s->total_steps);
}

static par_status on_epoch(void *ctx, int epoch, long step, const void *params)
{
    par_session *s = ctx;
    par_session_result *r = &s->res;
    par_status st = PAR_OK;
    if (s->cfg.rank == 0 && s->cfg.no_eval) {
        r->val_loss = r->val_acc = r->test_loss = r->test_acc = NAN;
        if (s->log) st = par_log_epoch(s->log, epoch, step, NAN, NAN, NAN, NAN);
        if (st == PAR_OK) progress(s, 1, epoch, step, par_now());
    } else if (s->cfg.rank == 0) {
        double t0 = par_now();
        const par_dataset *ds = s->cfg.run.ds;
        const par_model *m = s->cfg.run.cfg.model;
        int T = s->cfg.run.cfg.threads;
        st = par_evaluate(m, s->cfg.run.cfg.dtype, params, &ds->train, ds->n_train, ds->n_val, T,
                          &r->val_loss, &r->val_acc);
        if (st == PAR_OK)
            st = par_evaluate(m, s->cfg.run.cfg.dtype, params, &ds->test, 0, ds->test.n, T,
                              &r->test_loss, &r->test_acc);
        s->t_eval += par_now() - t0;
        if (st == PAR_OK && s->log)
            st = par_log_epoch(s->log, epoch, step, r->val_loss, r->val_acc, r->test_loss,
                               r->test_acc);
        // --select best-val: strictly better validation accuracy (a tie keeps the earlier).
        if (st == PAR_OK && s->best_w && (r->best_epoch < 0 || r->val_acc > s->best_val_acc)) {
            memcpy(s->best_w, params, weight_bytes(s));
            r->best_epoch = epoch;
            s->best_val_loss = r->val_loss;
            s->best_val_acc = r->val_acc;
            s->best_test_loss = r->test_loss;
            s->best_test_acc = r->test_acc;
        }
        if (st == PAR_OK) progress(s, 1, epoch, step, par_now());
    }
    return agree_status(s, st);
}

// ---- checkpoints: config and resume ----

// x in the fewest digits that read back as x.
static void shortest(char *buf, size_t cap, double x)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return;
    }
}

// The optimizer as the checkpoint config records it: "sgd" (as before
// optimizers existed), or its name and every hyperparameter, exactly.
static void optim_text(char *buf, size_t cap, const par_optim *op)
{
    char a[32], b[32], e[32];
    if (op->kind == PAR_OPTIM_SGD) {
        snprintf(buf, cap, "sgd");
    } else if (op->kind == PAR_OPTIM_ADAM) {
        shortest(a, sizeof a, op->beta1);
        shortest(b, sizeof b, op->beta2);
        shortest(e, sizeof e, op->eps);
        snprintf(buf, cap, "adam beta1=%s beta2=%s eps=%s", a, b, e);
    } else {
        shortest(a, sizeof a, op->momentum);
        snprintf(buf, cap, "%s momentum=%s", par_optim_name(op->kind), a);
    }
}

static void fill_config(par_ckpt_config *cf, const par_session_cfg *c, const par_optim *op,
                        const void *init)
{
    const par_model *m = c->run.cfg.model;
    const par_dataset *ds = c->run.ds;
    memset(cf, 0, sizeof *cf);
    snprintf(cf->model, sizeof cf->model, "%s", m->spec);
    snprintf(cf->act, sizeof cf->act, "%s", par_act_name(c->act));
    snprintf(cf->dtype, sizeof cf->dtype, "%s", par_dtype_name(c->run.cfg.dtype));
    optim_text(cf->optimizer, sizeof cf->optimizer, op);
    cf->batch = c->run.cfg.batch;
    cf->chunk = c->run.cfg.chunk;
    cf->lr = c->run.cfg.lr;
    cf->seed = c->run.seed;
    par_sha256_hex(cf->init_sha256, init, m->n_params * par_dtype_size(c->run.cfg.dtype));
    snprintf(cf->dataset, sizeof cf->dataset, "%s", c->dataset ? c->dataset : ds->name);
    cf->n_train_file = ds->train.n;
    cf->n_test = ds->test.n;
    cf->n_train = ds->n_train;
    cf->n_val = ds->n_val;
    cf->features = ds->train.n_features;
    cf->classes = ds->n_classes;
    size_t b_train = 0, b_test = 0;   // pixels, or the --upscale values
    const void *parts[4] = {par_images_bytes(&ds->train, &b_train), ds->train.labels,
                            par_images_bytes(&ds->test, &b_test), ds->test.labels};
    const size_t sizes[4] = {b_train, ds->train.n, b_test, ds->test.n};
    par_sha256_parts(cf->data_sha256, parts, sizes, 4);
}

// Rank 0: the newest valid checkpoint of the resume folder, checked against
// this run's config; its weights into s->init, its optimizer state into
// s->ros and its position into s->start. Without init_load the run takes
// the checkpoint's initial weights as its own (a resumed run starts from the
// checkpoint's weights, not from them).
static par_status find_resume(par_session *s)
{
    const char *dir = s->cfg.resume;
    par_ckpt_meta *found = &s->found;
    par_ckpt_config *run = &s->meta.cfg;
    char skipped[sizeof s->skipped];
    PAR_TRY(par_ckpt_find(found, dir, skipped, sizeof skipped));
    if (!s->cfg.init_load)
        memcpy(run->init_sha256, found->cfg.init_sha256, sizeof run->init_sha256);
    memcpy(s->skipped, skipped, sizeof skipped);
    char why[600];
    PAR_FAIL_IF(par_ckpt_config_diff(why, sizeof why, &found->cfg, run), PAR_ERR_CONFIG,
                "%s/ckpt-%010ld.json is from another run: %s", dir, found->step, why);
    const par_run_cfg *rc = &s->cfg.run.cfg;
    PAR_TRY(par_ckpt_load(dir, found, rc->model, rc->dtype, s->init));
    PAR_TRY(par_ckpt_load_optim(dir, found, rc->model, rc->dtype, s->ros.n, s->ros.names,
                                &s->ros));
    s->start.epoch = found->epoch;
    s->start.pos = (size_t)found->pos;
    s->start.step = found->step;
    return PAR_OK;
}

#ifdef PARITY_HAVE_MPI
static void bcast_bytes(void *p, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += (size_t)1 << 30) {
        size_t n = bytes - off < ((size_t)1 << 30) ? bytes - off : (size_t)1 << 30;
        MPI_Bcast((char *)p + off, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}
#endif

// Rank 0's resume status, point, checkpoint settings, weights and optimizer
// state to every rank (all ranks must take the same decisions in after_step,
// and every rank updates with the same state). Returns the status this rank
// continues with.
static par_status share_resume(par_session *s, par_status st)
{
#ifdef PARITY_HAVE_MPI
    if (!s->mpi) return st;
    int s0 = (int)st;
    MPI_Bcast(&s0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (s0 != PAR_OK && s->cfg.rank != 0 && st == PAR_OK) {
        s->res.peer_failed = 1;   // rank 0 says why
        return PAR_RUN_STOP;
    }
    if (s0 != PAR_OK) return st;
    par_run_point *pt = &s->start;
    long v[6] = {pt->epoch, (long)pt->pos, pt->step, s->found.every, s->found.keep, s->ros.t};
    MPI_Bcast(v, 6, MPI_LONG, 0, MPI_COMM_WORLD);
    pt->epoch = (int)v[0];
    pt->pos = (size_t)v[1];
    pt->step = v[2];
    s->found.every = v[3];
    s->found.keep = (int)v[4];
    s->ros.t = v[5];
    const size_t bytes = s->init ? weight_bytes(s) : 0;
    bcast_bytes(s->init, bytes);
    for (int i = 0; i < s->ros.n; i++) bcast_bytes(s->ros.arr[i], bytes);   // optimizer state
#else
    (void)s;
#endif
    return st;
}

// ---- opening ----

// Buffers, the initial weights (a file or the seed), --init-save, the step count.
static par_status open_weights(par_session *s)
{
    const par_session_cfg *c = &s->cfg;
    const par_model *m = c->run.cfg.model;
    const size_t sz = weight_bytes(s);
    s->init = malloc(sz);
    s->final = malloc(sz);
    PAR_FAIL_IF(!s->init || !s->final, PAR_ERR_ALLOC, "out of memory");
    // --select best-val: rank 0 keeps the best epoch's weights.
    PAR_FAIL_IF(c->best_val && c->rank == 0 && !(s->best_w = malloc(sz)), PAR_ERR_ALLOC,
                "out of memory");
    // --resume: the optimizer state of the checkpoint (every rank receives it).
    for (int i = 0; i < s->ros.n; i++)
        PAR_FAIL_IF(c->resume && !(s->ros.arr[i] = malloc(sz)), PAR_ERR_ALLOC, "out of memory");
    const par_dtype dt = c->run.cfg.dtype;
    if (c->init_load) PAR_TRY(par_weights_load(c->init_load, m, dt, s->init));
    else par_model_init(m, dt, c->run.seed, s->init);
    char where[160];
    PAR_FAIL_IF(c->init_load && par_find_nonfinite(where, sizeof where, m, dt, s->init),
                PAR_ERR_FORMAT, "%s: %s is not finite", c->init_load, where);
    if (c->init_save && c->rank == 0) PAR_TRY(par_weights_save(c->init_save, m, dt, s->init));
    const size_t n_train = c->run.ds->n_train, batch = c->run.cfg.batch;
    const long steps = c->run.max_steps;
    s->per_epoch = (long)((n_train + batch - 1) / batch);
    s->total_steps = s->per_epoch * c->run.epochs;
    if (steps > s->total_steps) {   // the run would end before, silently
        snprintf(s->steps_hint, sizeof s->steps_hint, "give --epochs %ld, or leave out --steps",
                 (steps + s->per_epoch - 1) / s->per_epoch);
        s->res.hint = s->steps_hint;
        PAR_FAIL_IF(1, PAR_ERR_CONFIG, "--steps %ld: expected at most %ld, the steps of --epochs "
                    "%d (%zu training records, batch %zu)", steps, s->total_steps, c->run.epochs,
                    n_train, batch);
    }
    if (steps > 0 && steps < s->total_steps) s->total_steps = steps;
    return PAR_OK;
}

// Rank 0: the checkpoint folder (locked before looking), the config and
// the resume point, with --select best-val's best epoch so far.
static par_status open_checkpoints(par_session *s)
{
    const par_session_cfg *c = &s->cfg;
    fill_config(&s->meta.cfg, c, &s->optim, s->init);
    const char *ckdir = s->res.ckpt_dir;
    const int same = c->resume && strcmp(ckdir, c->resume) == 0;   // resume in place
    const par_status dst = par_ckpt_dir_open(&s->ck, ckdir, !same, !same);
    if (dst == PAR_ERR_CONFIG && !c->resume) {   // it holds checkpoints: a run to go on with?
        snprintf(s->used_hint, sizeof s->used_hint, "continue that run with --resume %s, or "
                 "give --checkpoint-dir an empty or new folder", ckdir);
        s->res.hint = s->used_hint;
    }
    PAR_TRY(dst);
    s->res.ckpt_open = 1;
    if (!c->resume) return PAR_OK;
    par_status st = find_resume(s);
    if (st == PAR_ERR_CONFIG && strstr(par_last_error(), " is from another run: --"))
        s->res.hint = "leave the flag out to go on with the checkpoint's value (--resume DIR "
                      "alone continues the run)";
    PAR_TRY(st);
    // --select best-val goes on from the checkpoint's best epoch so far.
    const par_ckpt_meta *f = &s->found;
    PAR_FAIL_IF(c->best_val && strcmp(f->select, "best-val") != 0, PAR_ERR_CONFIG,
                "--select best-val: the run of %s kept --select %s, so its best epoch before "
                "step %ld is unknown", c->resume, f->select, f->step);
    if (c->best_val && f->has_best) {
        st = par_ckpt_load_best(c->resume, f, c->run.cfg.model, c->run.cfg.dtype, s->best_w);
        s->res.best_epoch = f->best_epoch;
        s->best_val_loss = f->best_val_loss;
        s->best_val_acc = f->best_val_acc;
        s->best_test_loss = f->best_test_loss;
        s->best_test_acc = f->best_test_acc;
    }
    return st;
}

// Every checkpoint's writer settings (the run's other flags, for --resume DIR alone).
static void fill_meta(par_session *s)
{
    const par_session_cfg *c = &s->cfg;
    par_ckpt_meta *mt = &s->meta;
    snprintf(mt->trainer, sizeof mt->trainer, "%s", c->run.trainer->name);
    snprintf(mt->mode, sizeof mt->mode, "%s", par_mode_name(c->run.cfg.mode));
    snprintf(mt->select, sizeof mt->select, "%s", c->best_val ? "best-val" : "last");
    mt->threads = c->run.cfg.threads;
    mt->ranks = c->ranks;
    mt->every = s->every;
    mt->keep = s->keep;
    mt->has_run = 1;
    mt->run_epochs = c->run.epochs;
    mt->run_steps = (int)c->run.max_steps;
    mt->upscale = c->upscale;
    mt->no_digest = c->no_digest;
}

// Rank 0: the log; a resumed run first writes the lines up to its checkpoint again.
static par_status open_log(par_session *s)
{
    const par_session_cfg *c = &s->cfg;
    PAR_FAIL_IF(c->resume && !s->found.has_log, PAR_ERR_CONFIG, "--log %s: the run of %s had no "
                "--log, so its log cannot be continued", c->log, c->resume);
    char *prefix = NULL;
    par_status st = PAR_OK;
    if (c->resume)
        st = par_ckpt_log_find(&prefix, s->replayed_from, sizeof s->replayed_from, &s->found.log,
                               c->log);
    if (st == PAR_OK) st = par_log_open(&s->log, c->log);
    if (st == PAR_OK && s->checkpointing) st = par_ckpt_log_track(&s->track, c->log);
    if (st == PAR_OK && c->resume)
        st = par_ckpt_log_replay(s->log, s->track, &s->found.log, prefix, s->replayed_from);
    free(prefix);
    return st;
}

par_status par_session_open(par_session **sp, const par_session_cfg *cfg)
{
    par_session *s = calloc(1, sizeof *s);
    *sp = s;
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "out of memory");
    s->cfg = *cfg;
    const par_session_cfg *c = &s->cfg;
    s->mpi = c->ranks > 1;
    s->res.best_epoch = -1;
    s->res.last_ckpt = -1;
    s->res.resumed_from = -1;
    s->res.skipped = s->skipped;
    s->checkpointing = c->ckpt_dir || c->resume;
    s->res.ckpt_dir = c->ckpt_dir ? c->ckpt_dir : c->resume;
    s->optim = c->run.cfg.optim ? *c->run.cfg.optim : par_optim_default(PAR_OPTIM_SGD);
    s->ros.n = par_optim_n_state(s->optim.kind);
    for (int i = 0; i < s->ros.n; i++) s->ros.names[i] = par_optim_state_name(s->optim.kind, i);
    if (c->run.cfg.fault) s->fault = *c->run.cfg.fault;

    par_status st = open_weights(s);
    if (st == PAR_OK && c->rank == 0 && s->checkpointing) st = open_checkpoints(s);
    if (c->resume) st = share_resume(s, st);
    s->every = c->ckpt_every > 0                     ? c->ckpt_every
               : c->resume && s->found.every > 0 ? s->found.every
                                                     : s->per_epoch;
    s->keep = c->keep > 0 ? c->keep : c->resume && s->found.keep > 0 ? s->found.keep : 3;
    if (s->checkpointing) fill_meta(s);
    // The test-only fault counts steps from the start of the whole run.
    if (c->resume && s->fault.step > 0) {
        if (s->fault.step <= s->start.step) s->fault.kind = PAR_FAULT_NONE;
        else s->fault.step -= s->start.step;
    }
    // A warm-up as long as the run would leave nothing to time.
    const long run_steps = s->total_steps - s->start.step;
    if (st == PAR_OK && (c->warmup_steps < 0 || (c->warmup_steps > 0 &&
                                                  c->warmup_steps >= run_steps)))
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--warmup-steps %ld: expected "
                           "0 to %ld, fewer than the %ld steps this run trains", c->warmup_steps,
                           run_steps - 1, run_steps);
    if (st == PAR_OK && c->log && c->rank == 0) st = open_log(s);
    s->res.last_ckpt = c->resume && st == PAR_OK ? s->start.step : -1;
    s->res.resumed_from = s->res.last_ckpt;
    return agree_status(s, st);
}

// ---- running ----

// The log is written as it goes: a stopped or failed run keeps the whole
// lines of the steps it did (with checkpoints, for --resume).
static par_status close_log(par_session *s, par_status st)
{
    if (!s->log) return st;
    par_log *log = s->log;
    s->log = NULL;
    if (st != PAR_OK && !s->checkpointing) {
        par_log_discard(log);
        return st;
    }
    par_status lst = par_log_close(log);
    const par_ckpt_log *fl = &s->found.log;
    if (lst == PAR_OK && s->replayed_from[0] && strcmp(s->replayed_from, fl->tmp) == 0 &&
        strcmp(fl->tmp, fl->path) != 0)
        remove(s->replayed_from);   // an older version's temp log: now in the log
    return st == PAR_OK ? lst : st;
}

par_status par_session_run(par_session *s, const volatile sig_atomic_t *stop)
{
    const par_session_cfg *c = &s->cfg;
    par_session_result *r = &s->res;
    s->stop = stop;
    const par_optim_state start_os = {s->ros.n, {s->ros.arr[0], s->ros.arr[1]}, s->ros.t};
    // The caller's loop settings, completed: the initial weights, the
    // optimizer as resolved, the fault counted from the resume point, the
    // resume point and the NaN/Inf check.
    par_run_opts ro = c->run;
    ro.cfg.init_params = s->init;
    ro.cfg.optim = &s->optim;
    ro.cfg.fault = c->run.cfg.fault ? &s->fault : NULL;
    ro.start = c->resume ? &s->start : NULL;
    ro.start_optim = c->resume ? &start_os : NULL;
    ro.check_finite = 1;
    const par_run_hooks hooks = {.ctx = s, .on_step = on_step, .on_epoch = on_epoch,
                                 .after_step = after_step, .wants_params = wants_params};
    s->t_start = par_now();
    par_status st = par_run(&ro, &hooks, s->final, &r->steps, &r->stats);
    const double t_end = par_now();
    r->seconds = t_end - s->t_start - s->t_eval;
    r->timed_steps = r->steps - s->start.step;
    r->timed_samples = r->samples;
    if (c->warmup_steps > 0) {   // the window after the warm-up steps only
        r->seconds = s->warm_done ? t_end - s->t_warm - (s->t_eval - s->t_eval_warm) : 0;
        r->timed_steps = s->warm_done ? r->timed_steps - c->warmup_steps : 0;
        r->timed_samples = s->warm_done ? r->samples - s->samples_warm : 0;
        for (int k = 0; k < PAR_PHASE_N && s->warm_done; k++) r->stats.phase[k] -= s->phase_warm[k];
    }
    if (st == PAR_OK && s->best_w && r->best_epoch >= 0) {
        // --select best-val: that epoch's weights and evaluation stand for the run.
        memcpy(s->final, s->best_w, weight_bytes(s));
        r->val_loss = s->best_val_loss;
        r->val_acc = s->best_val_acc;
        r->test_loss = s->best_test_loss;
        r->test_acc = s->best_test_acc;
    }
    r->weights = s->final;
    if (st == PAR_OK && c->save && c->rank == 0)
        st = par_weights_save(c->save, c->run.cfg.model, c->run.cfg.dtype, s->final);
    return close_log(s, st);
}

const par_session_result *par_session_result_get(const par_session *s)
{
    return &s->res;
}

void par_session_close(par_session *s)
{
    if (!s) return;
    close_log(s, PAR_RUN_STOP);   // never run, or run already closed it
    par_ckpt_log_untrack(s->track);
    par_ckpt_dir_close(s->ck);
    free(s->init);
    free(s->final);
    free(s->best_w);
    free(s->ros.arr[0]);
    free(s->ros.arr[1]);
    free(s);
}
