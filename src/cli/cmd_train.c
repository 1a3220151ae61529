// `parity train`: plain training with any trainer, dataset and dtype, with a
// progress line on a terminal (off one: a plain line every 5 s and a
// summary), a JSONL log written as it goes, .npz weights and a JSON summary,
// checkpoints and --resume (bit for bit), a clean stop on SIGINT/SIGTERM,
// and a NaN/Inf check every step. The CLI parses, prints and chooses exit
// codes; the run itself is a session (src/train/par_session.h). MPI trainers
// run one process per rank; only rank 0 prints and writes. Tests:
// tests/cli/test_cli.sh, tests/cli/test_resume.sh, tests/cli/test_faults.sh.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "par_hash.h"
#include "par_kernels.h"
#include "cli_mpi_launch.h"
#include "par_session.h"
#include "train_args.h"

// Progress on rank 0's stderr: a line kept up to date on a terminal; off one
// (and without --quiet) a plain line every progress_every seconds.
typedef struct train_view {
    int tty, plain, epochs;
    double progress_every;         // PARITY_PROGRESS_SECONDS, 5
    double last_print;             // 0: not yet (the run's start counts)
} train_view;

// One `parity train` process: its flags, numerics, place in the job, dataset.
typedef struct train_run {
    train_opts o;
    cli_numerics nu;
    int rank, size;
    par_dataset ds;
    const char *hint;              // how to fix a failure of the preparation
    int peer_failed;               // another rank's preparation failed
    const char *threads_from;      // why the thread count, when --threads was not typed
    int ranks_typed;               // --ranks was typed (else one rank, or mpirun's count)
    int mpi;                       // this run is MPI ranks (PAR_CAP_RANKS, or asked for)
    train_view view;
} train_run;

// The signal that asks for a clean stop (SIGINT or SIGTERM; under MPI also
// SIGUSR1 / SIGUSR2, which mpirun forwards, standing for them).
static volatile sig_atomic_t stop_request;

static void on_signal(int sig)
{
    stop_request = (sig == SIGINT || sig == SIGUSR1) ? SIGINT : SIGTERM;
}

static void catch_stop_signals(int mpi)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;   // a second signal ends the process at once
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (mpi) {
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGUSR2, &sa, NULL);
    }
}

static void on_progress(void *ctx, const par_session_progress *p)
{
    train_view *v = ctx;
    if (v->last_print == 0) v->last_print = p->t_start;
    if (p->epoch_end) {
        if (v->tty)
            fprintf(stderr,
                    "\repoch %d/%d  step %ld  loss %.4f  val acc %.4f  test acc %.4f      \n",
                    p->epoch + 1, v->epochs, p->step, p->loss, p->val_acc, p->test_acc);
        return;
    }
    const double t = p->now, train_s = p->train_seconds;
    if (v->tty && (t - v->last_print > 0.2 || p->step == p->total_steps)) {
        fprintf(stderr, "\repoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s   ", p->epoch + 1,
                v->epochs, p->step, p->total_steps, p->loss,
                train_s > 0 ? (double)p->samples / train_s : 0.0);
        v->last_print = t;
    }
    if (v->plain && t - v->last_print >= v->progress_every) {   // a log file, a pipe
        fprintf(stderr, "step %ld/%ld epoch %d loss %.4f %.1f s\n", p->step, p->total_steps,
                p->epoch + 1, p->loss, t - p->t_start);
        v->last_print = t;
    }
}

static void print_json(const train_run *t, const par_session_result *r)
{
    const train_opts *o = &t->o;
    const par_session_cfg *c = &o->cfg;
    const par_run_cfg *rc = &c->run.cfg;
    const par_model *m = &t->nu.m;
    char sha[65];
    par_sha256_hex(sha, r->weights, m->n_params * par_dtype_size(t->nu.dt));
    const double seconds = r->seconds;
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:i, s:f, s:I, s:I, s:i, s:s,"
        " s:f, s:f, s:f, s:f, s:f, s:s, s:f, s:f}",
        "trainer", o->trainer, "mode", o->mode, "dataset", t->ds.name, "model", m->spec,
        "act", o->act, "threads", rc->threads, "ranks", t->size, "dtype",
        par_dtype_name(t->nu.dt), "batch", (json_int_t)rc->batch, "chunk", (json_int_t)rc->chunk,
        "epochs", c->run.epochs, "lr", rc->lr, "seed", (json_int_t)c->run.seed, "steps",
        (json_int_t)r->steps, "n_params", (int)m->n_params, "kernels", par_kernels_variant(),
        "final_loss", r->last_loss, "val_loss", 0.0, "val_accuracy", 0.0, "test_loss", 0.0,
        "test_accuracy", 0.0, "weights_sha256", sha, "seconds", seconds,
        "samples_per_second", seconds > 0 ? (double)r->timed_samples / seconds : 0.0);
    const char *ev[4] = {"val_loss", "val_accuracy", "test_loss", "test_accuracy"};
    const double evv[4] = {r->val_loss, r->val_acc, r->test_loss, r->test_acc};
    for (int k = 0; k < 4; k++)   // --no-eval: null
        json_object_set_new(j, ev[k], isnan(evv[k]) ? json_null() : json_real(evv[k]));
    if (c->warmup_steps > 0) {   // "seconds" is the window after them
        json_object_set_new(j, "warmup_steps", json_integer(c->warmup_steps));
        json_object_set_new(j, "timed_steps", json_integer(r->timed_steps));
    }
    if (r->resumed_from >= 0)
        json_object_set_new(j, "resumed_from_step", json_integer(r->resumed_from));
    const par_optim *op = &o->optim;
    json_object_set_new(j, "optim", json_string(par_optim_name(op->kind)));
    if (op->kind == PAR_OPTIM_MOMENTUM || op->kind == PAR_OPTIM_NESTEROV)
        json_object_set_new(j, "momentum", json_real(op->momentum));
    if (op->kind == PAR_OPTIM_ADAM) {
        json_object_set_new(j, "beta1", json_real(op->beta1));
        json_object_set_new(j, "beta2", json_real(op->beta2));
        json_object_set_new(j, "eps", json_real(op->eps));
    }
    if (o->batch_full) json_object_set_new(j, "batch_full", json_true());
    if (c->upscale > 0) json_object_set_new(j, "upscale", json_integer(c->upscale));
    json_object_set_new(j, "select", json_string(c->best_val ? "best-val" : "last"));
    if (c->best_val && r->best_epoch >= 0)   // 1-based, like "epochs"
        json_object_set_new(j, "best_epoch", json_integer(r->best_epoch + 1));
    if (r->last_ckpt >= 0)
        json_object_set_new(j, "last_checkpoint_step", json_integer(r->last_ckpt));
    if (r->stats.threads_adaptive)   // steps the governor ran on one thread
        json_object_set_new(j, "steps_one_thread", json_integer(r->stats.steps_one_thread));
    if (r->stats.steps > 0) {   // MPI trainers: the busiest rank's traffic and wait
        json_object_set_new(j, "bytes_sent_per_step", json_real(r->stats.bytes_sent_max));
        json_object_set_new(j, "comm_seconds_per_step", json_real(r->stats.comm_seconds_max));
    }
    // Where the seconds went (rank 0's; par_phase): "other" is what no phase holds.
    json_t *ph = json_object();
    double sum = 0;
    for (int k = 0; k < PAR_PHASE_N; k++) {
        json_object_set_new(ph, par_phase_names[k], json_real(r->stats.phase[k]));
        sum += r->stats.phase[k];
    }
    json_object_set_new(ph, "other", json_real(seconds > sum ? seconds - sum : 0.0));
    json_object_set_new(j, "phase_seconds", ph);
    char *s = json_dumps(j, JSON_REAL_PRECISION(17));
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

static const char *const HINT_DATA = "run data/fetch.sh (or ci/setup.sh) to install the datasets";
static const char *const HINT_NAME =
    "no folder of that name here: give a dataset folder's path, or mnist, fashion-mnist or "
    "cifar10 (data/fetch.sh installs those)";
static const char *const HINT_CIFAR =
    "put data_batch_1..5.bin and test_batch.bin in ~/.cache/parity/data/cifar10/ (or give "
    "--dataset DIR); for tests: parity data make-cifar DIR";
static const char DEFAULT_MODEL[] = "mlp:784-256-128-10";   // input: the dataset's features

// The flags resolved and checked, before any dataset is read: 0 or the exit code.
static int resolve(train_run *t, int argc, char **argv)
{
    train_opts *o = &t->o;
    const cli_numerics_flags nf = {o->act, o->model ? o->model : DEFAULT_MODEL, o->mode,
                                   o->dtype, o->fault, o->trainer, o->cfg.run.cfg.threads};
    int rc = cli_numerics_resolve("train", &nf, &t->nu);
    if (!rc) rc = cli_train_extras(o);
    if (rc) return rc;
    t->ranks_typed = cli_flag_given(argc, argv, "--ranks") || o->cfg.resume;
    if ((t->nu.tr->caps & PAR_CAP_THREADS) && !cli_flag_given(argc, argv, "--threads") &&
        !o->cfg.resume) {
        const char *env = getenv("OMP_NUM_THREADS");
        t->threads_from = env && env[0] ? "from OMP_NUM_THREADS" : "neither --threads nor "
                                                                   "OMP_NUM_THREADS given";
        if ((rc = cli_threads_from_env(&o->cfg.run.cfg.threads))) return rc;
    }
    return cli_train_check_flags(o);
}

// This process's place: one process; the launcher of --ranks (which runs
// mpirun and watches it); or a rank of a job. Outputs that cannot be written
// fail now, not after the training. Returns -1 to go on, else the exit code.
static int join_ranks(train_run *t, int argc, char **argv)
{
    const train_opts *o = &t->o;
    const par_trainer_ops *tr = t->nu.tr;
    int rc, env_rank;
    const int world = cli_mpi_env_size(&env_rank);
    // cuda runs as MPI ranks only when asked: --ranks R > 1, or a launcher's several.
    t->mpi = (tr->caps & PAR_CAP_RANKS) ||
             ((tr->caps & PAR_CAP_RANKS_ASKED) && (o->ranks > 1 || world > 1));
    // A single-process trainer under a launcher with several ranks would run
    // that many independent copies: refused, said once (by rank 0).
    if (!t->mpi) {
        if (world > 1) {
            if (env_rank == 0) {
                fprintf(stderr, "parity train: --trainer %s runs in one process, but it was "
                                "launched as %d MPI ranks\n", tr->name, world);
                fprintf(stderr, "hint: use --trainer mpi, hybrid or root under mpirun, or run "
                                "%s without mpirun\n", tr->name);
            }
            return EXIT_USAGE;
        }
    }
    const int launch = t->mpi && o->ranks > 0 && !cli_mpi_under_launcher();
    if ((!t->mpi || launch) && (rc = cli_train_check_outputs(o))) return rc;
    if (!t->mpi) {
        if (o->ranks <= 1) return -1;
        fprintf(stderr, "parity train: --ranks %d: trainer %s is not an MPI trainer\n", o->ranks,
                tr->name);
        fprintf(stderr, "hint: use --trainer mpi, hybrid or root\n");
        return EXIT_USAGE;
    }
    if (launch)
        return cli_mpi_launch_watched(argc, argv, o->ranks, "train",
                                      o->cfg.ckpt_dir ? o->cfg.ckpt_dir : o->cfg.resume);
    if (cli_mpi_start(&t->rank, &t->size) != PAR_OK) return cli_fail("train", PAR_ERR_MPI, NULL);
    if (o->ranks > 0 && o->ranks != t->size) {   // under someone's mpirun -n N
        if (t->rank == 0) {
            fprintf(stderr, "parity train: --ranks %d: this MPI job has %d ranks\n", o->ranks,
                    t->size);
            fprintf(stderr, "hint: under your own mpirun leave out --ranks (mpirun -n sets "
                            "the ranks)\n");
        }
        return cli_mpi_finish(EXIT_USAGE);
    }
    rc = t->rank == 0 ? cli_train_check_outputs(o) : 0;   // rank 0 writes them
    par_session_share(t->size, &rc);
    return rc ? cli_mpi_finish(rc) : -1;
}

// The dataset (every rank reads it), --upscale, the model's inputs, --batch
// and --select against it; a failure's hint in t->hint.
static par_status open_data(train_run *t)
{
    train_opts *o = &t->o;
    par_session_cfg *c = &o->cfg;
    par_dataset *ds = &t->ds;
    par_model *m = &t->nu.m;
    const char *name = c->dataset;
    par_status st = par_dataset_open(ds, name, 10);
    const int known = strcmp(name, "mnist") == 0 || strcmp(name, "fashion-mnist") == 0 ||
                      strcmp(name, "cifar10") == 0 || strchr(name, '/');
    if (st != PAR_OK) {
        t->hint = !known ? HINT_NAME : strcmp(name, "cifar10") == 0 ? HINT_CIFAR : HINT_DATA;
        return st;
    }
    // --upscale S: resampled once here (every rank alike). Without --model the
    // default MLP takes the dataset's features; a given --model must match them.
    if (c->upscale > 0) PAR_TRY(par_dataset_upscale(ds, (size_t)c->upscale, t->nu.dt));
    if (!o->model && ds->train.n_features != m->n_inputs) {
        char spec[64];
        snprintf(spec, sizeof spec, "mlp:%zu-256-128-10", ds->train.n_features);
        PAR_TRY(par_model_parse(m, spec, t->nu.act));
    }
    if (o->model && ds->train.n_features != m->n_inputs) {
        char up[64] = "";
        if (c->upscale > 0)
            snprintf(up, sizeof up, " (--upscale %d: %d x %d x %zu)", c->upscale, c->upscale,
                     c->upscale, ds->train.channels);
        t->hint = cli_input_hint(m, ds);
        PAR_FAIL_IF(1, PAR_ERR_CONFIG, "--model %s takes %zu inputs but dataset %s has %zu "
                    "features per sample%s; expected an input size of %zu", m->spec, m->n_inputs,
                    ds->name, ds->train.n_features, up, ds->train.n_features);
    }
    if (o->batch_full) {   // one step per epoch: the whole training split
        PAR_FAIL_IF(ds->n_train > 1000000000, PAR_ERR_CONFIG, "--batch full: %zu training "
                    "records is more than one batch can hold", ds->n_train);
        c->run.cfg.batch = ds->n_train;
    }
    if (!o->batch_full && c->run.cfg.batch > ds->n_train) {   // not one short step
        t->hint = "give a smaller --batch, or --batch full for the whole split in one step";
        PAR_FAIL_IF(1, PAR_ERR_CONFIG, "--batch %zu: expected at most %zu, the training split "
                    "of %s", c->run.cfg.batch, ds->n_train, ds->name);
    }
    PAR_FAIL_IF(c->best_val && ds->n_val == 0, PAR_ERR_CONFIG,
                "--select best-val: dataset %s has no validation records", ds->name);
    return PAR_OK;
}

// The session's settings: the flags that land there directly (cli_train_parse),
// completed by the ones resolved here (trainer, numerics, optimizer, fault,
// --fixed-threads) and this process's place.
static par_session_cfg session_cfg(train_run *t)
{
    const train_opts *o = &t->o;
    par_session_cfg c = o->cfg;
    c.run.trainer = t->nu.tr;
    c.run.ds = &t->ds;
    c.run.cfg.model = &t->nu.m;
    c.run.cfg.dtype = t->nu.dt;
    c.run.cfg.mode = t->nu.mode;
    c.run.cfg.optim = &o->optim;
    c.run.cfg.fault = o->fault ? &t->nu.fault : NULL;
    c.run.cfg.threads_policy = o->fixed_threads ? PAR_THREADS_FIXED : PAR_THREADS_ADAPT;
    c.act = t->nu.act;
    c.rank = t->rank;
    c.ranks = t->size;
    c.ctx = &t->view;
    c.progress = on_progress;
    return c;
}

// Appends printf(fmt, ...) to the string line (cap bytes), cut at its end.
static void add(char *line, size_t cap, const char *fmt, ...)
{
    const size_t n = strlen(line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, cap - n, fmt, ap);
    va_end(ap);
}

// The human summary of a finished run (stderr): its steps, loss and accuracy;
// a resumed run's own steps and seconds apart from the whole run's loss; the
// steps a busy machine ran on one thread; the thread and rank counts that
// were not typed, and where they came from.
static void print_done(const train_run *t, const par_session_result *r)
{
    char s[600] = "";
    const size_t n = sizeof s;
    const long ran = r->resumed_from >= 0 ? r->steps - r->resumed_from : r->steps;
    if (r->resumed_from < 0)
        add(s, n, "done: %ld steps, loss %.4f", r->steps, r->last_loss);
    else if (ran > 0)
        add(s, n, "done: resumed at step %ld: %ld steps in %.1f s; final loss %.4f (the run's)",
            r->resumed_from, ran, r->seconds, r->last_loss);
    else
        add(s, n, "done: resumed at step %ld: 0 steps (the run had finished)", r->resumed_from);
    if (isnan(r->val_acc))
        add(s, n, ", not evaluated");
    else
        add(s, n, ", val acc %.4f, test acc %.4f", r->val_acc, r->test_acc);
    if (r->resumed_from < 0) add(s, n, ", %.1f s", r->seconds);
    const int threads = t->o.cfg.run.cfg.threads;
    if (r->stats.threads_adaptive && r->stats.steps_one_thread > 0)
        add(s, n, "; %ld of %ld steps on one thread (busy machine; --fixed-threads to pin)",
            (long)r->stats.steps_one_thread, ran);
    if (t->threads_from)
        add(s, n, "; %s: %d thread%s (%s)", t->nu.tr->name, threads, threads == 1 ? "" : "s",
            t->threads_from);
    if (t->mpi && !t->ranks_typed)
        add(s, n, "; %s: %d rank%s (%s)", t->nu.tr->name, t->size, t->size == 1 ? "" : "s",
            t->size == 1 ? "no --ranks given" : "from mpirun -n");
    fprintf(stderr, "parity train: %s\n", s);
}

// What the run ends with on stdout and stderr, and its exit code.
static int finish(const train_run *t, par_status st, const par_session_result *r)
{
    const int rank = t->rank;
    if (st == PAR_OK && t->o.json && rank == 0) print_json(t, r);
    if (st == PAR_OK && t->view.plain) print_done(t, r);
    if (st == PAR_OK) return EXIT_OK;
    if (st == PAR_RUN_STOP && (t->peer_failed || r->peer_failed))
        return EXIT_OK;   // another rank failed and says why; the exit codes are combined
    const char *ckdir = r->ckpt_dir;
    if (st == PAR_RUN_STOP) {
        if (rank == 0) {
            const char *name = r->stop_sig == SIGINT ? "SIGINT" : "SIGTERM";
            if (r->ckpt_open)
                fprintf(stderr, "parity train: stopped by %s after step %ld; checkpoint "
                                "%s/ckpt-%010ld written\nhint: continue with: parity train "
                                "--resume %s\n", name, r->steps, ckdir, r->last_ckpt, ckdir);
            else
                fprintf(stderr, "parity train: stopped by %s after step %ld; nothing saved\n"
                                "hint: with --checkpoint-dir DIR a stopped run can be "
                                "continued (--resume DIR)\n", name, r->steps);
        }
        return 128 + r->stop_sig;
    }
    if (t->size > 1 && rank != 0 && (st == PAR_ERR_NUMERIC || st == PAR_ERR_CONFIG))
        return st == PAR_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;   // rank 0 says the same
    const char *hint = t->hint ? t->hint : r->hint;
    char h[1400];
    if (st == PAR_ERR_NUMERIC && r->last_ckpt >= 0)
        snprintf(h, sizeof h, "lower --lr; the weights of the last good checkpoint (step %ld) "
                 "are %s/ckpt-%010ld.npz (usable with --init-load)", r->last_ckpt, ckdir,
                 r->last_ckpt);
    else if (st == PAR_ERR_NUMERIC)
        snprintf(h, sizeof h, "lower --lr");
    else if (r->last_ckpt >= 0)
        snprintf(h, sizeof h, "the newest checkpoint (step %ld) is kept: fix the cause, then "
                 "--resume %s", r->last_ckpt, ckdir);
    else
        snprintf(h, sizeof h, "%s", hint ? hint : "");
    return cli_fail("train", st, h[0] ? h : NULL);
}

int cmd_train(int argc, char **argv)
{
    train_run *t = calloc(1, sizeof *t);
    if (!t) return cli_fail("train", par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__,
                                                   "out of memory"), NULL);
    t->size = 1;
    int rc = cli_train_parse(&t->o, argc, argv);   // -1: --help was shown
    if (rc == 0) {
        cli_train_resume_defaults(&t->o, argc, argv);
        rc = resolve(t, argc, argv);
        if (rc == 0) rc = join_ranks(t, argc, argv);   // -1: go on
    } else if (rc < 0) {
        rc = EXIT_OK;
    }
    if (rc >= 0) {
        free(t);
        return rc;
    }
    const train_opts *o = &t->o;
    catch_stop_signals(t->mpi);
    train_view *v = &t->view;
    v->tty = !o->quiet && t->rank == 0 && isatty(STDERR_FILENO);
    v->plain = !o->quiet && t->rank == 0 && !v->tty;
    v->epochs = o->cfg.run.epochs;
    v->progress_every = 5.0;
    const char *pe = getenv("PARITY_PROGRESS_SECONDS");
    if (pe && *pe) {
        char *end;
        const double x = strtod(pe, &end);
        if (!*end && x >= 0 && x < 1e9) v->progress_every = x;
    }

    // Every rank passes every collective whatever fails, and all agree
    // before training, so that no rank waits for another.
    par_status st = par_session_agree(t->size, open_data(t), &t->peer_failed);
    par_session *s = NULL;
    if (st == PAR_OK) {
        const par_session_cfg sc = session_cfg(t);
        st = par_session_open(&s, &sc);
        if (s && par_session_result_get(s)->skipped[0])
            fprintf(stderr, "parity train: warning: skipped damaged checkpoints: %s\n",
                    par_session_result_get(s)->skipped);
        if (st == PAR_OK) st = par_session_run(s, &stop_request);
    }
    static const par_session_result none = {.best_epoch = -1, .resumed_from = -1,
                                            .last_ckpt = -1};
    rc = finish(t, st, s ? par_session_result_get(s) : &none);
    par_session_close(s);
    par_dataset_free(&t->ds);
    free(t);
    return cli_mpi_finish(rc);
}
