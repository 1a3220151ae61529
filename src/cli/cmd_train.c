// `parity train`: plain training with any trainer, dataset and dtype, with a
// progress line on a terminal (off one: a plain line every 5 s and a
// summary), a JSONL log written as it goes, .npz weights and a JSON summary,
// checkpoints and --resume (bit for bit), a clean stop on SIGINT/SIGTERM,
// and a NaN/Inf check every step. MPI trainers run one process per rank;
// only rank 0 prints and writes. Tests: tests/test_cli.sh,
// tests/test_resume.sh, tests/test_faults.sh.
#define _GNU_SOURCE   // strsignal
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <jansson.h>

#include "cli.h"
#include "par_io.h"
#include "par_kernels.h"
#include "par_engine.h"
#include "par_run.h"
#include "par_mpi_launch.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

typedef struct train_opts {
    const char *dataset, *model, *act, *trainer, *mode, *dtype;
    const char *log, *save, *init_save, *init_load, *fault;
    const char *ckpt_dir, *resume;
    int epochs, batch, chunk, threads, ranks, json, quiet, help, no_digest;
    int steps, ckpt_every, keep, check_every;
    int upscale;                              // --upscale S: images resampled to S x S (0: off)
    double lr;
    uint64_t seed;
    const char *optim_s, *batch_s, *select;   // --optim, --batch B|full, --select
    double momentum, beta1, beta2, eps;       // NAN: not given (the defaults apply)
    par_optim optim;                          // resolved
    int batch_full, best_val;                 // --batch full, --select best-val
} train_opts;

typedef struct train_ctx {
    const train_opts *o;
    const par_model *m;
    const par_dataset *ds;
    par_dtype dt;
    int rank, size, tty, mpi;      // mpi: more than one rank (collective agreement)
    int plain;                     // rank 0, stderr not a terminal, no --quiet: plain lines
    double progress_every;         // seconds between them (PARITY_PROGRESS_SECONDS, 5)
    par_log *log;
    long total_steps;
    double t_start, t_last_print, t_eval;
    size_t samples;
    double last_loss;
    double val_loss, val_acc, test_loss, test_acc;
    // Checkpoints (rank 0 writes them).
    par_ckpt_dir *ck;
    par_ckpt_logtrack *track;
    par_ckpt_meta meta;            // config and writer filled once; position per checkpoint
    int checkpointing;             // --checkpoint-dir or --resume (same on every rank)
    long every;
    long last_ckpt;                // step of the newest checkpoint, -1 if none
    long resumed_from;             // step the run resumed at, -1 if it did not
    // A hook's own failure, held until the ranks have agreed to stop.
    par_status pending;
    int peer_failed;               // another rank failed: stop quietly
    int stop_sig;                  // SIGINT or SIGTERM: stopped cleanly at a step
    // --select best-val (rank 0): the weights and evaluation of the best epoch so far.
    void *best_w;
    int best_epoch;                // 0-based; -1 before the first evaluation
    double best_val_loss, best_val_acc, best_test_loss, best_test_acc;
    par_optim_state optim_now;     // the trainer's optimizer state, filled before after_step
} train_ctx;

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

// MPI: every rank contributes v[0..n), all get the maxima. No-op for one process.
static void agree_max(const train_ctx *c, int *v, int n)
{
#ifdef PARITY_HAVE_MPI
    if (c->mpi) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#else
    (void)c, (void)v, (void)n;
#endif
}

// After a hook's local work: all ranks learn whether any failed. The rank
// that failed returns its error, the others stop quietly.
static par_status agree_status(train_ctx *c, par_status local)
{
    if (!c->mpi) return local;
    int v = local != PAR_OK;
    agree_max(c, &v, 1);
    if (local != PAR_OK) return local;
    if (v) {
        c->peer_failed = 1;
        return PAR_RUN_STOP;
    }
    return PAR_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Local work of a step (log line, progress); a failure is held in c->pending
// until after_step, where the ranks agree on it.
static par_status on_step(void *vctx, int epoch, long step, size_t B, double loss,
                          const void *params)
{
    train_ctx *c = vctx;
    c->samples += B;
    c->last_loss = loss;
    if (c->rank != 0) return PAR_OK;
    if (c->log) {
        char sha[65];
        if (!c->o->no_digest) par_sha256_hex(sha, params, c->m->n_params * par_dtype_size(c->dt));
        c->pending = par_log_step(c->log, epoch, step, loss, c->o->no_digest ? NULL : sha);
        if (c->pending != PAR_OK) return c->mpi ? PAR_OK : c->pending;
    }
    double t = now();
    if (c->tty && (t - c->t_last_print > 0.2 || step == c->total_steps)) {
        double train_s = t - c->t_start - c->t_eval;
        fprintf(stderr, "\repoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s   ", epoch + 1,
                c->o->epochs, step, c->total_steps, loss,
                train_s > 0 ? (double)c->samples / train_s : 0.0);
        c->t_last_print = t;
    }
    if (c->plain && t - c->t_last_print >= c->progress_every) {   // a log file, a pipe
        fprintf(stderr, "step %ld/%ld epoch %d loss %.4f %.1f s\n", step, c->total_steps,
                epoch + 1, loss, t - c->t_start);
        c->t_last_print = t;
    }
    return PAR_OK;
}

// Rank 0 writes the checkpoint of point pt.
static par_status write_checkpoint(train_ctx *c, const par_run_point *pt, const void *params)
{
    // Weights are scanned every --check-every steps only: never save a bad one.
    char where[160];
    PAR_FAIL_IF(par_find_nonfinite(where, sizeof where, c->m, c->dt, params), PAR_ERR_NUMERIC,
                "step %ld (epoch %d): weight %s: not finite; no checkpoint written "
                "(learning rate too large?)", pt->step, pt->epoch, where);
    par_ckpt_meta *mt = &c->meta;
    mt->step = pt->step;
    mt->epoch = pt->epoch;
    mt->pos = pt->pos;
    mt->has_log = c->track != NULL;
    if (c->track) PAR_TRY(par_ckpt_log_sync(c->track, &mt->log));
    par_ckpt_optim os = {c->optim_now.n, {NULL, NULL}, {c->optim_now.arr[0], c->optim_now.arr[1]},
                         c->optim_now.t};
    for (int i = 0; i < os.n; i++) os.names[i] = par_optim_state_name(c->o->optim.kind, i);
    mt->has_best = c->best_w && c->best_epoch >= 0;   // --select best-val: the best so far
    mt->best_epoch = c->best_epoch;
    mt->best_val_loss = c->best_val_loss;
    mt->best_val_acc = c->best_val_acc;
    mt->best_test_loss = c->best_test_loss;
    mt->best_test_acc = c->best_test_acc;
    PAR_TRY(par_ckpt_write_ex(c->ck, mt, c->m, c->dt, params, &os, c->best_w, c->o->keep));
    c->last_ckpt = pt->step;
    return PAR_OK;
}

// After every step: the ranks agree on stop requests and failures, and a
// checkpoint is written every c->every steps, at the last step, and on stop.
static par_status after_step(void *vctx, const par_run_point *pt, const void *params)
{
    train_ctx *c = vctx;
    int v[2] = {stop_request, c->pending != PAR_OK};
    agree_max(c, v, 2);
    if (v[1]) {
        if (c->pending != PAR_OK) return c->pending;
        c->peer_failed = 1;
        return PAR_RUN_STOP;
    }
    const int due = c->every > 0 && (pt->step % c->every == 0 || pt->step == c->total_steps);
    if ((due || v[0]) && c->checkpointing) {
        par_status st = c->rank == 0 && c->ck ? write_checkpoint(c, pt, params) : PAR_OK;
        PAR_TRY(agree_status(c, st));
    }
    if (v[0]) {
        c->stop_sig = v[0];
        return PAR_RUN_STOP;
    }
    return PAR_OK;
}

static par_status on_epoch(void *vctx, int epoch, long step, const void *params)
{
    train_ctx *c = vctx;
    par_status st = PAR_OK;
    if (c->rank == 0) {
        double t0 = now();
        const par_dataset *ds = c->ds;
        int T = c->o->threads;
        st = par_evaluate(c->m, c->dt, params, &ds->train, ds->n_train, ds->n_val, T,
                          &c->val_loss, &c->val_acc);
        if (st == PAR_OK)
            st = par_evaluate(c->m, c->dt, params, &ds->test, 0, ds->test.n, T, &c->test_loss,
                              &c->test_acc);
        c->t_eval += now() - t0;
        if (st == PAR_OK && c->log)
            st = par_log_epoch(c->log, epoch, step, c->val_loss, c->val_acc, c->test_loss,
                               c->test_acc);
        // --select best-val: strictly better validation accuracy (a tie keeps the earlier).
        if (st == PAR_OK && c->best_w && (c->best_epoch < 0 || c->val_acc > c->best_val_acc)) {
            memcpy(c->best_w, params, c->m->n_params * par_dtype_size(c->dt));
            c->best_epoch = epoch;
            c->best_val_loss = c->val_loss;
            c->best_val_acc = c->val_acc;
            c->best_test_loss = c->test_loss;
            c->best_test_acc = c->test_acc;
        }
        if (st == PAR_OK && c->tty)
            fprintf(stderr,
                    "\repoch %d/%d  step %ld  loss %.4f  val acc %.4f  test acc %.4f      \n",
                    epoch + 1, c->o->epochs, step, c->last_loss, c->val_acc, c->test_acc);
    }
    return agree_status(c, st);
}

static void print_json(const train_ctx *c, const void *w, long steps, double seconds,
                       const par_trainer_stats *stats)
{
    const train_opts *o = c->o;
    char sha[65];
    par_sha256_hex(sha, w, c->m->n_params * par_dtype_size(c->dt));
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:i, s:f, s:I, s:I, s:i, s:s,"
        " s:f, s:f, s:f, s:f, s:f, s:s, s:f, s:f}",
        "trainer", o->trainer, "mode", o->mode, "dataset", c->ds->name, "model", c->m->spec,
        "act", o->act, "threads", o->threads, "ranks", c->size, "dtype",
        par_dtype_name(c->dt), "batch", (json_int_t)o->batch, "chunk", (json_int_t)o->chunk,
        "epochs", o->epochs, "lr", o->lr, "seed", (json_int_t)o->seed, "steps", (json_int_t)steps,
        "n_params", (int)c->m->n_params, "kernels", par_kernels_variant(), "final_loss",
        c->last_loss, "val_loss", c->val_loss, "val_accuracy", c->val_acc, "test_loss",
        c->test_loss, "test_accuracy", c->test_acc, "weights_sha256", sha, "seconds", seconds,
        "samples_per_second", seconds > 0 ? (double)c->samples / seconds : 0.0);
    if (c->resumed_from >= 0)
        json_object_set_new(j, "resumed_from_step", json_integer(c->resumed_from));
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
    if (o->upscale > 0) json_object_set_new(j, "upscale", json_integer(o->upscale));
    json_object_set_new(j, "select", json_string(o->best_val ? "best-val" : "last"));
    if (o->best_val && c->best_epoch >= 0)   // 1-based, like "epochs"
        json_object_set_new(j, "best_epoch", json_integer(c->best_epoch + 1));
    if (c->last_ckpt >= 0)
        json_object_set_new(j, "last_checkpoint_step", json_integer(c->last_ckpt));
    if (stats->steps > 0) {   // MPI trainers: the busiest rank's traffic and wait
        json_object_set_new(j, "bytes_sent_per_step", json_real(stats->bytes_sent_max));
        json_object_set_new(j, "comm_seconds_per_step", json_real(stats->comm_seconds_max));
    }
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

// ---- --ranks: mpirun as a child, watched ----

static volatile sig_atomic_t parent_sig, parent_sig_count;

static void on_parent_signal(int sig)
{
    parent_sig = sig;
    parent_sig_count++;
}

typedef struct mpirun_watch {
    char line[4096];
    size_t len;
    int in_box;               // between two lines of dashes (an mpirun message box)
    char box[8192];
    size_t box_len;
    int dead_rank, dead_sig;  // from "process rank R ... exited on signal S"
    char other[8192];         // mpirun boxes we did not recognise, printed at the end
    size_t other_len;
} mpirun_watch;

static int is_dashes(const char *s, size_t n)
{
    if (n < 20) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '-') return 0;
    return 1;
}

static void append(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n + 1 >= cap) n = *len + 1 < cap ? cap - *len - 1 : 0;
    memcpy(buf + *len, s, n);
    *len += n;
    buf[*len] = '\0';
}

// One complete line of mpirun's stderr (with its '\n', if any).
static void watch_line(mpirun_watch *w, const char *s, size_t n)
{
    size_t k = n && s[n - 1] == '\n' ? n - 1 : n;
    if (is_dashes(s, k)) {
        if (w->in_box) {   // a box ends: keep what matters, drop the noise
            const char *p = strstr(w->box, "process rank ");
            int r, sig;
            if (p && strstr(p, "exited on signal") &&
                sscanf(p, "process rank %d", &r) == 1 &&
                sscanf(strstr(p, "exited on signal"), "exited on signal %d", &sig) == 1) {
                w->dead_rank = r;
                w->dead_sig = sig;
            } else if (!strstr(w->box, "terminated normally, but") &&
                       !strstr(w->box, "exited with non-zero status")) {
                append(w->other, sizeof w->other, &w->other_len, w->box, w->box_len);
            }
            w->box_len = 0;
            w->box[0] = '\0';
        }
        w->in_box = !w->in_box;
        return;
    }
    if (w->in_box) {
        append(w->box, sizeof w->box, &w->box_len, s, n);
    } else if (strncmp(s, "mpirun: Forwarding signal", 25) != 0) {
        fwrite(s, 1, n, stderr);
        fflush(stderr);
    }
}

static void watch_bytes(mpirun_watch *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (w->len + 1 < sizeof w->line) w->line[w->len++] = s[i];
        if (s[i] == '\n' || w->len + 1 >= sizeof w->line) {
            watch_line(w, w->line, w->len);
            w->len = 0;
        }
    }
}

// Runs the job under mpirun as a child whose stderr passes through us:
// SIGINT/SIGTERM are passed on as SIGUSR1/SIGUSR2 (mpirun forwards those to
// every rank, which stop cleanly at the same step; another signal 2 s later
// is passed on as SIGTERM: mpirun kills the job), mpirun's own message boxes about
// exit codes are dropped, and a rank that died is named in one line.
static int launch_ranks(int argc, char **argv, const train_opts *o)
{
    int pfd[2];
    if (pipe(pfd) != 0) {
        fprintf(stderr, "parity train: cannot create a pipe for mpirun: %s\n", strerror(errno));
        return EXIT_RUNTIME;
    }
    const pid_t parent = getpid();
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "parity train: cannot fork mpirun: %s\n", strerror(errno));
        return EXIT_RUNTIME;
    }
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], STDERR_FILENO);
        close(pfd[1]);
        int dn = open("/dev/null", O_RDONLY);   // mpirun must not read the terminal
        if (dn >= 0) dup2(dn, STDIN_FILENO);
        setpgid(0, 0);   // a terminal's Ctrl-C reaches us, and we pass it on
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGTERM);   // we die (kill -9): mpirun ends the job
        if (getppid() != parent) _exit(EXIT_RUNTIME);
#else
        (void)parent;
#endif
        _exit(par_mpi_relaunch(argc, argv, o->ranks));
    }
    close(pfd[1]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_parent_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    mpirun_watch *w = calloc(1, sizeof *w);
    int seen = 0, forwarded = 0, status = 0;
    double t_first = 0;
    char buf[4096];
    for (;;) {
        // The first signal asks for a clean stop; one that comes 2 s later
        // or more (not a duplicate, e.g. from `timeout` to its group) ends
        // the job at once.
        if (parent_sig_count > seen) {
            seen = parent_sig_count;
            if (forwarded == 0) {
                kill(pid, parent_sig == SIGINT ? SIGUSR1 : SIGUSR2);
                forwarded = 1;
                t_first = now();
            } else if (forwarded == 1 && now() - t_first >= 2.0) {
                kill(pid, SIGTERM);
                forwarded = 2;
            }
        }
        struct pollfd pf = {pfd[0], POLLIN, 0};
        int r = poll(&pf, 1, 200);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        ssize_t n = read(pfd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (w) watch_bytes(w, buf, (size_t)n);
        else fwrite(buf, 1, (size_t)n, stderr);
    }
    close(pfd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        if (parent_sig_count > seen && now() - t_first >= 2.0) kill(pid, SIGTERM);
        seen = parent_sig_count;
    }
    if (w && w->len) watch_line(w, w->line, w->len);
    const char *ck = o->ckpt_dir ? o->ckpt_dir : o->resume;
    int rc;
    if (w && w->dead_rank >= 0 && w->dead_sig > 0) {
        fprintf(stderr, "parity train: MPI rank %d died (signal %d, %s); mpirun ended the job\n",
                w->dead_rank, w->dead_sig, strsignal(w->dead_sig));
        if (ck) fprintf(stderr, "hint: continue from the last checkpoint: parity train --resume "
                                "%s\n", ck);
        rc = EXIT_RUNTIME;
    } else if (WIFEXITED(status) &&
               (WEXITSTATUS(status) <= EXIT_RUNTIME || WEXITSTATUS(status) == 128 + SIGINT ||
                WEXITSTATUS(status) == 128 + SIGTERM)) {
        rc = WEXITSTATUS(status);   // the ranks' agreed exit code; they said why
        if (w && w->other_len) fputs(w->other, stderr);
    } else {
        if (w && w->other_len) fputs(w->other, stderr);
        if (WIFSIGNALED(status))
            fprintf(stderr, "parity train: mpirun was killed by signal %d (%s)\n",
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            fprintf(stderr, "parity train: the MPI job failed (mpirun exit status %d)\n",
                    WEXITSTATUS(status));
        if (ck) fprintf(stderr, "hint: continue from the last checkpoint: parity train --resume "
                                "%s\n", ck);
        rc = EXIT_RUNTIME;
    }
    free(w);
    return rc;
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

static void fill_config(par_ckpt_config *cf, const train_opts *o, const par_model *m,
                        par_act act, par_dtype dt, const par_dataset *ds, const void *init)
{
    memset(cf, 0, sizeof *cf);
    snprintf(cf->model, sizeof cf->model, "%s", m->spec);
    snprintf(cf->act, sizeof cf->act, "%s", par_act_name(act));
    snprintf(cf->dtype, sizeof cf->dtype, "%s", par_dtype_name(dt));
    optim_text(cf->optimizer, sizeof cf->optimizer, &o->optim);
    cf->batch = o->batch;
    cf->chunk = o->chunk;
    cf->lr = o->lr;
    cf->seed = o->seed;
    par_sha256_hex(cf->init_sha256, init, m->n_params * par_dtype_size(dt));
    snprintf(cf->dataset, sizeof cf->dataset, "%s", o->dataset);
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

// Rank 0: the newest valid checkpoint of dir, checked against this run's
// config; its weights into params, its optimizer state into os (os->n
// arrays named os->names, allocated) and its position into *pt.
// Without --init-load the run takes the checkpoint's initial weights as its
// own (a resumed run starts from the checkpoint's weights, not from them).
static par_status find_resume(par_ckpt_meta *found, par_run_point *pt, const char *dir,
                              par_ckpt_config *run, int init_load, const par_model *m,
                              par_dtype dt, void *params, par_ckpt_optim *os)
{
    char skipped[1024];
    PAR_TRY(par_ckpt_find(found, dir, skipped, sizeof skipped));
    if (!init_load) memcpy(run->init_sha256, found->cfg.init_sha256, sizeof run->init_sha256);
    if (skipped[0])
        fprintf(stderr, "parity train: warning: skipped damaged checkpoints: %s\n", skipped);
    char why[600];
    PAR_FAIL_IF(par_ckpt_config_diff(why, sizeof why, &found->cfg, run), PAR_ERR_CONFIG,
                "%s/ckpt-%010ld.json is from another run: %s", dir, found->step, why);
    PAR_TRY(par_ckpt_load(dir, found, m, dt, params));
    PAR_TRY(par_ckpt_load_optim(dir, found, m, dt, os->n, os->names, os));
    pt->epoch = found->epoch;
    pt->pos = (size_t)found->pos;
    pt->step = found->step;
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

// Rank 0's resume status, point, checkpoint settings, weights and optimizer
// state to every rank (all ranks must take the same decisions in after_step,
// and every rank updates with the same state). Returns the status this rank
// continues with.
static par_status share_resume(train_ctx *c, par_status st, par_run_point *pt,
                               par_ckpt_meta *found, void *params, size_t bytes,
                               par_ckpt_optim *os)
{
    if (!c->mpi) return st;
    int s0 = (int)st;
    MPI_Bcast(&s0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (s0 != PAR_OK && c->rank != 0 && st == PAR_OK) {
        c->peer_failed = 1;   // rank 0 says why
        return PAR_RUN_STOP;
    }
    if (s0 != PAR_OK) return st;
    long v[6] = {pt->epoch, (long)pt->pos, pt->step, found->every, found->keep, os->t};
    MPI_Bcast(v, 6, MPI_LONG, 0, MPI_COMM_WORLD);
    pt->epoch = (int)v[0];
    pt->pos = (size_t)v[1];
    pt->step = v[2];
    found->every = v[3];
    found->keep = (int)v[4];
    os->t = v[5];
    bcast_bytes(params, bytes);
    for (int i = 0; i < os->n; i++) bcast_bytes(os->arr[i], bytes);   // optimizer state
    return st;
}
#else
static par_status share_resume(train_ctx *c, par_status st, par_run_point *pt,
                               par_ckpt_meta *found, void *params, size_t bytes,
                               par_ckpt_optim *os)
{
    (void)c, (void)pt, (void)found, (void)params, (void)bytes, (void)os;
    return st;
}
#endif

// --batch B|full, --optim and its hyperparameters, --select: into o, or
// one line naming the flag and EXIT_USAGE.
static int resolve_train_extras(train_opts *o)
{
    char *end = NULL;
    if (strcmp(o->batch_s, "full") == 0) {
        o->batch_full = 1;
        o->batch = 1;   // the training split's size, once the dataset is open
    } else {
        errno = 0;
        const long b = strtol(o->batch_s, &end, 10);
        if (o->batch_s[0] == '-' || end == o->batch_s || *end || errno || b > 1000000000) {
            fprintf(stderr, "parity train: --batch '%s': expected a non-negative integer or "
                            "'full'\n", o->batch_s);
            return EXIT_USAGE;
        }
        o->batch = (int)b;   // 0 is refused below with the other counts
    }
    par_optim_kind kind;
    if (par_optim_parse(&kind, o->optim_s) != PAR_OK) {
        fprintf(stderr, "parity train: --optim '%s': expected sgd, momentum, nesterov or adam\n",
                o->optim_s);
        return EXIT_USAGE;
    }
    o->optim = par_optim_default(kind);
    const int mom = kind == PAR_OPTIM_MOMENTUM || kind == PAR_OPTIM_NESTEROV;
    const int adam = kind == PAR_OPTIM_ADAM;
    const struct { const char *flag; double v; int applies; double *dst; int ok; } hp[] = {
        {"--momentum", o->momentum, mom, &o->optim.momentum, o->momentum >= 0 && o->momentum < 1},
        {"--beta1", o->beta1, adam, &o->optim.beta1, o->beta1 >= 0 && o->beta1 < 1},
        {"--beta2", o->beta2, adam, &o->optim.beta2, o->beta2 >= 0 && o->beta2 < 1},
        {"--eps", o->eps, adam, &o->optim.eps, o->eps > 0 && isfinite(o->eps)},
    };
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        if (isnan(hp[i].v)) continue;   // not given: the default
        if (!hp[i].applies) {
            fprintf(stderr, "parity train: %s does not apply to --optim %s\n", hp[i].flag,
                    o->optim_s);
            fprintf(stderr, "hint: --momentum goes with momentum or nesterov; --beta1, --beta2 "
                            "and --eps with adam\n");
            return EXIT_USAGE;
        }
        if (!hp[i].ok) {
            fprintf(stderr, "parity train: %s %g: expected %s\n", hp[i].flag, hp[i].v,
                    i == 3 ? "a finite number > 0" : "a number in [0, 1)");
            return EXIT_USAGE;
        }
        *hp[i].dst = hp[i].v;
    }
    if (strcmp(o->select, "best-val") == 0) {
        o->best_val = 1;
    } else if (strcmp(o->select, "last") != 0) {
        fprintf(stderr, "parity train: --select '%s': expected last or best-val\n", o->select);
        return EXIT_USAGE;
    }
    return 0;
}

// An output of the run, checked before the dataset is read: its folder
// exists and takes new files (the outputs are written as a temporary file
// renamed over the path), and the path, if there, is a regular file (dir:
// a folder). Else one line naming the flag and the path, and EXIT_USAGE.
static int check_output(const char *flag, const char *path, int dir)
{
    char parent[1024], why[1200];
    struct stat sb;
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') {   // "ck/": the folder is ck
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = '\0';   // "/w.npz": the root
    else *slash = '\0';
    why[0] = '\0';
    if (!path[0]) {
        snprintf(why, sizeof why, "expected a path");
    } else if (stat(path, &sb) == 0 && dir && !S_ISDIR(sb.st_mode)) {
        snprintf(why, sizeof why, "not a folder");
    } else if (stat(path, &sb) == 0 && !dir && S_ISDIR(sb.st_mode)) {
        snprintf(why, sizeof why, "a folder, expected a file");
    } else if (stat(path, &sb) == 0 && !dir && !S_ISREG(sb.st_mode)) {
        snprintf(why, sizeof why, "not a regular file (parity writes files whole: a temporary "
                 "file, then a rename over the old one)");
    } else if (stat(path, &sb) == 0 && dir && access(path, W_OK | X_OK) != 0) {
        snprintf(why, sizeof why, "cannot write in it: %s", strerror(errno));
    } else if (stat(parent, &sb) != 0 && errno == ENOENT) {
        snprintf(why, sizeof why, "folder %s does not exist", parent);
    } else if (stat(parent, &sb) != 0) {
        snprintf(why, sizeof why, "folder %s: %s", parent, strerror(errno));
    } else if (!S_ISDIR(sb.st_mode)) {
        snprintf(why, sizeof why, "%s is not a folder", parent);
    } else if (access(parent, W_OK | X_OK) != 0) {
        snprintf(why, sizeof why, "cannot write in folder %s: %s", parent, strerror(errno));
    }
    if (!why[0]) return 0;
    fprintf(stderr, "parity train: %s %s: %s\n", flag, path, why);
    if (dir)
        fprintf(stderr, "hint: give %s a folder that can be written, or a new one in a folder "
                        "that exists\n", flag);
    else
        fprintf(stderr, "hint: give %s a file path in a folder that exists and can be written\n",
                flag);
    return EXIT_USAGE;
}

// Every output path: checked before the run starts, so that a typo costs no
// training (the writes check again).
static int check_outputs(const train_opts *o)
{
    const struct { const char *flag, *path; int dir; } outs[] = {
        {"--save", o->save, 0}, {"--init-save", o->init_save, 0}, {"--log", o->log, 0},
        {"--checkpoint-dir", o->ckpt_dir, 1},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        int rc = outs[i].path ? check_output(outs[i].flag, outs[i].path, outs[i].dir) : 0;
        if (rc) return rc;
    }
    return 0;
}

// Whether `flag` was typed ("--flag V" or "--flag=V").
static int flag_given(int argc, char **argv, const char *flag)
{
    const size_t n = strlen(flag);
    for (int i = 2; i < argc; i++)
        if (strncmp(argv[i], flag, n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '=')) return 1;
    return 0;
}

// A threaded trainer without --threads takes OMP_NUM_THREADS as OpenMP
// programs do (its first number, "4" or "4,2"); unset or empty: 1.
static int threads_from_env(int *threads)
{
    const char *e = getenv("OMP_NUM_THREADS");
    if (!e || !e[0]) return 0;
    char *end;
    errno = 0;
    const long v = strtol(e, &end, 10);
    if (errno || end == e || v < 1 || v > 4096 || (*end != '\0' && *end != ',')) {
        fprintf(stderr, "parity train: OMP_NUM_THREADS '%s': expected a thread count >= 1 "
                        "(or give --threads T)\n", e);
        return EXIT_USAGE;
    }
    *threads = (int)v;
    return 0;
}

// --resume DIR: every setting not typed is taken from the newest valid
// checkpoint of DIR (its config, trainer, mode, threads, ranks, --select,
// --log, and --epochs/--steps unless either is typed). Typed settings that
// are part of the config are checked against it later (find_resume: one
// line naming the flag and both values). Nothing happens when DIR holds no
// valid checkpoint: the resume itself says why.
static void resume_defaults(train_opts *o, int argc, char **argv)
{
    static par_ckpt_meta f;   // its strings stay in use
    static char batch[32], optim[16];
    if (!o->resume || par_ckpt_find(&f, o->resume, NULL, 0) != PAR_OK) return;
    const par_ckpt_config *cf = &f.cfg;
#define GIVEN(flag) flag_given(argc, argv, flag)
    if (!GIVEN("--dataset")) o->dataset = cf->dataset;
    if (!GIVEN("--model")) o->model = cf->model;
    if (!GIVEN("--act")) o->act = cf->act;
    if (!GIVEN("--dtype")) o->dtype = cf->dtype;
    if (!GIVEN("--chunk")) o->chunk = (int)cf->chunk;
    if (!GIVEN("--lr")) o->lr = cf->lr;
    if (!GIVEN("--seed")) o->seed = cf->seed;
    if (!GIVEN("--batch")) {
        snprintf(batch, sizeof batch, "%ld", cf->batch);
        o->batch_s = batch;
    }
    if (!GIVEN("--optim")) {   // "sgd", "adam beta1=B1 beta2=B2 eps=E", "momentum momentum=MU"
        sscanf(cf->optimizer, "%15s", optim);
        o->optim_s = optim;
        const char *keys[4] = {"momentum=", "beta1=", "beta2=", "eps="};
        double *dst[4] = {&o->momentum, &o->beta1, &o->beta2, &o->eps};
        const char *flags[4] = {"--momentum", "--beta1", "--beta2", "--eps"};
        for (int i = 0; i < 4; i++) {
            const char *p = strstr(cf->optimizer, keys[i]);
            if (p && !GIVEN(flags[i])) *dst[i] = strtod(p + strlen(keys[i]), NULL);
        }
    }
    if (!GIVEN("--select") && f.select[0]) o->select = f.select;
    if (!GIVEN("--mode") && f.mode[0]) o->mode = f.mode;
    if (!GIVEN("--trainer") && f.trainer[0]) {   // another trainer: its own threads and ranks
        o->trainer = f.trainer;
        if (!GIVEN("--threads") && f.threads > 0) o->threads = f.threads;
        if (!GIVEN("--ranks") && f.ranks > 1 && !par_mpi_under_launcher()) o->ranks = f.ranks;
    }
    if (!GIVEN("--log") && f.has_log) o->log = f.log.path;
    if (f.has_run) {
        if (!GIVEN("--epochs") && !GIVEN("--steps")) {
            o->epochs = f.run_epochs;
            o->steps = f.run_steps;
        }
        if (!GIVEN("--upscale")) o->upscale = f.upscale;
        if (!GIVEN("--no-digest")) o->no_digest = f.no_digest;
    }
#undef GIVEN
}

int cmd_train(int argc, char **argv)
{
    train_opts o = {
        .dataset = "fashion-mnist", .model = NULL, .act = "relu",
        .trainer = "serial", .mode = "exact", .dtype = "f32", .epochs = 1, .batch = 64,
        .chunk = 8, .threads = 1, .ranks = -1, .lr = 0.01, .seed = 42, .check_every = 100,
        .batch_s = "64", .optim_s = "sgd", .select = "last",
        .momentum = NAN, .beta1 = NAN, .beta2 = NAN, .eps = NAN,
    };
    const cli_opt opts[] = {
        {"--dataset", CLI_STR, &o.dataset, "NAME|DIR  mnist, fashion-mnist, cifar10 or a folder of IDX or CIFAR-10 files (fashion-mnist)"},
        {"--upscale", CLI_INT, &o.upscale, "S         resample images to S x S, bilinear (28 -> 57: 3249 inputs, 112: 12544)"},
        {"--model", CLI_STR, &o.model, "SPEC      mlp:N0-N1-...-Nk (mlp:F-256-128-10, F = the dataset's features) or cnn:CxHxW-... (docs/cnn.md)"},
        {"--act", CLI_STR, &o.act, "relu|sigmoid|tanh  hidden activation (relu)"},
        {"--trainer", CLI_STR, &o.trainer, "NAME      reference, serial, omp, mpi, hybrid, root (serial)"},
        {"--mode", CLI_STR, &o.mode, "exact|fast  arithmetic contract kept or relaxed (exact)"},
        {"--dtype", CLI_STR, &o.dtype, "f32|f64   floating-point type (f32)"},
        {"--epochs", CLI_INT, &o.epochs, "N         epochs (1)"},
        {"--steps", CLI_INT, &o.steps, "N         stop after N steps in all, at most what --epochs holds (0: no limit)"},
        {"--batch", CLI_STR, &o.batch_s, "B|full    samples per step; full: the whole training split, one step per epoch (64)"},
        {"--chunk", CLI_INT, &o.chunk, "C         samples per chunk of the ordered fold (8)"},
        {"--lr", CLI_DOUBLE, &o.lr, "LR        learning rate (0.01)"},
        {"--optim", CLI_STR, &o.optim_s, "NAME      sgd, momentum, nesterov or adam (sgd)"},
        {"--momentum", CLI_DOUBLE, &o.momentum, "MU        momentum and nesterov: v = MU*v + g (0.9)"},
        {"--beta1", CLI_DOUBLE, &o.beta1, "B1        adam: decay of the first moment (0.9)"},
        {"--beta2", CLI_DOUBLE, &o.beta2, "B2        adam: decay of the second moment (0.999)"},
        {"--eps", CLI_DOUBLE, &o.eps, "EPS       adam: added to sqrt(vhat) (1e-8)"},
        {"--select", CLI_STR, &o.select, "last|best-val  weights kept at the end: the last, or the epoch with the best validation accuracy (last)"},
        {"--seed", CLI_U64, &o.seed, "S         seed of initialisation and shuffling (42)"},
        {"--threads", CLI_INT, &o.threads, "T         OpenMP threads per process (OMP_NUM_THREADS, else 1)"},
        {"--ranks", CLI_INT, &o.ranks, "R         launch R MPI ranks through mpirun (mpi/hybrid/root)"},
        {"--log", CLI_STR, &o.log, "FILE      JSONL log: one line per step and per epoch, written as it goes"},
        {"--save", CLI_STR, &o.save, "FILE.npz  final weights"},
        {"--init-save", CLI_STR, &o.init_save, "FILE.npz  initial weights"},
        {"--init-load", CLI_STR, &o.init_load, "FILE.npz  start from these weights"},
        {"--checkpoint-dir", CLI_STR, &o.ckpt_dir, "DIR       write checkpoints there (one run per folder)"},
        {"--checkpoint-every", CLI_INT, &o.ckpt_every, "N       checkpoint every N steps (default: once per epoch), and at the end"},
        {"--keep", CLI_INT, &o.keep, "K         keep the newest K checkpoints (3)"},
        {"--resume", CLI_STR, &o.resume, "DIR       continue the run of DIR's newest valid checkpoint; flags not given come from it (--steps, --epochs, --trainer, --threads, --ranks, --mode, --log may differ; the others must agree)"},
        {"--check-every", CLI_INT, &o.check_every, "N         NaN/Inf check of all weights every N steps and at the end (100; 0: loss only)"},
        {"--no-digest", CLI_FLAG, &o.no_digest, "          no per-step SHA-256 of the weights in --log (saves ~2 ms/step)"},
        {"--json", CLI_FLAG, &o.json, "          print a JSON summary on stdout"},
        {"--quiet", CLI_FLAG, &o.quiet, "          no progress: none on a terminal, and off one no lines every 5 s nor the final summary"},
        {"--help", CLI_FLAG, &o.help, "          this text"},
        {"--fault", CLI_STR, &o.fault, "SPEC      TESTS ONLY: inject a deliberate arithmetic fault"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos;
    int rc = cli_parse("train", argc, argv, 2, opts, pos, 0, &n_pos);
    if (rc) return rc;
    if (o.help) {
        cli_usage("parity train [flags]", opts);
        printf("\nSIGINT/SIGTERM: the run finishes its step, writes a checkpoint (with\n"
               "--checkpoint-dir) and exits 130/143; --resume DIR continues it bit for bit.\n");
        return EXIT_OK;
    }

    resume_defaults(&o, argc, argv);
    cli_numerics nu;
    const cli_numerics_flags nf = {o.act, o.model ? o.model : DEFAULT_MODEL, o.mode, o.dtype,
                                   o.fault, o.trainer, o.threads};
    rc = cli_numerics_resolve("train", &nf, &nu);
    if (rc) return rc;
    const par_act act = nu.act;
    par_model m = nu.m;   // without --model: its input set to the dataset's features below
    const par_mode mode = nu.mode;
    const par_dtype dt = nu.dt;
    par_fault fault = nu.fault;
    const par_trainer_ops *tr = nu.tr;
    rc = resolve_train_extras(&o);
    if (rc) return rc;
    if ((tr->caps & PAR_CAP_THREADS) && !flag_given(argc, argv, "--threads") && !o.resume) {
        rc = threads_from_env(&o.threads);
        if (rc) return rc;
    }
    const struct { const char *flag; int v; } counts[] = {
        {"--epochs", o.epochs}, {"--batch", o.batch}, {"--chunk", o.chunk},
        {"--threads", o.threads}, {"--ranks", o.ranks},   // --ranks: -1 when not given
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].v == 0) {
            fprintf(stderr, "parity train: %s 0: expected an integer >= 1\n", counts[i].flag);
            return EXIT_USAGE;
        }
    }
    if (!(o.lr > 0)) {
        fprintf(stderr, "parity train: --lr %g: expected a number > 0\n", o.lr);
        return EXIT_USAGE;
    }
    if (o.upscale > 1024) {
        fprintf(stderr, "parity train: --upscale %d: expected a side of 1..1024\n", o.upscale);
        return EXIT_USAGE;
    }
    if ((o.ckpt_every > 0 || o.keep > 0) && !o.ckpt_dir && !o.resume) {
        fprintf(stderr, "parity train: --checkpoint-every and --keep need --checkpoint-dir DIR\n");
        return EXIT_USAGE;
    }
    if (o.resume && o.init_save) {
        fprintf(stderr, "parity train: --init-save: a resumed run does not start from its "
                        "initial weights\n");
        fprintf(stderr, "hint: drop --init-save (the first run wrote them, if asked)\n");
        return EXIT_USAGE;
    }

    // A single-process trainer under a launcher with several ranks would run
    // that many independent copies: refused, said once (by rank 0).
    if (!(tr->caps & PAR_CAP_RANKS)) {
        int env_rank;
        const int world = par_mpi_env_size(&env_rank);
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

    // Outputs that cannot be written fail now, not after the training: in
    // one process, in the one that launches the ranks, and on rank 0 (which
    // writes them) once the ranks have joined.
    const int launch = (tr->caps & PAR_CAP_RANKS) && o.ranks > 0 && !par_mpi_under_launcher();
    if (!(tr->caps & PAR_CAP_RANKS) || launch) {
        rc = check_outputs(&o);
        if (rc) return rc;
    }

    // MPI trainers: launch mpirun for --ranks and watch it, else join the job.
    int rank = 0, size = 1;
    if (tr->caps & PAR_CAP_RANKS) {
        if (launch) return launch_ranks(argc, argv, &o);
        if (par_mpi_start(&rank, &size) != PAR_OK) return cli_fail("train", PAR_ERR_MPI, NULL);
        if (o.ranks > 0 && o.ranks != size) {   // under someone's mpirun -n N
            if (rank == 0) {
                fprintf(stderr, "parity train: --ranks %d: this MPI job has %d ranks\n", o.ranks,
                        size);
                fprintf(stderr, "hint: under your own mpirun leave out --ranks (mpirun -n sets "
                                "the ranks)\n");
            }
            return par_mpi_finish(EXIT_USAGE);
        }
        rc = rank == 0 ? check_outputs(&o) : 0;
#ifdef PARITY_HAVE_MPI
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
        if (rc) return par_mpi_finish(rc);
    } else if (o.ranks > 1) {
        fprintf(stderr, "parity train: --ranks %d: trainer %s is not an MPI trainer\n", o.ranks,
                tr->name);
        fprintf(stderr, "hint: use --trainer mpi, hybrid or root\n");
        return EXIT_USAGE;
    }
    catch_stop_signals((tr->caps & PAR_CAP_RANKS) != 0);

    train_ctx c = {.o = &o, .m = &m, .dt = dt, .rank = rank, .size = size, .mpi = size > 1,
                   .tty = !o.quiet && rank == 0 && isatty(STDERR_FILENO), .last_ckpt = -1,
                   .resumed_from = -1};
    c.plain = !o.quiet && rank == 0 && !c.tty;
    c.progress_every = 5.0;
    const char *pe = getenv("PARITY_PROGRESS_SECONDS");
    if (pe && *pe) {
        char *end;
        const double v = strtod(pe, &end);
        if (!*end && v >= 0 && v < 1e9) c.progress_every = v;
    }
    c.checkpointing = o.ckpt_dir || o.resume;
    const char *ckdir = o.ckpt_dir ? o.ckpt_dir : o.resume;

    // Preparation. Every rank passes every collective below whatever fails,
    // and all agree before training, so that no rank waits for another.
    par_dataset ds;
    par_status st = par_dataset_open(&ds, o.dataset, 10);
    const int known = strcmp(o.dataset, "mnist") == 0 || strcmp(o.dataset, "fashion-mnist") == 0 ||
                      strcmp(o.dataset, "cifar10") == 0 || strchr(o.dataset, '/');
    const char *hint = st == PAR_OK ? NULL
                       : !known ? HINT_NAME
                       : strcmp(o.dataset, "cifar10") == 0 ? HINT_CIFAR : HINT_DATA;
    c.ds = &ds;
    // --upscale S: resampled once here (every rank alike). Without --model the
    // default MLP takes the dataset's features; a given --model must match them.
    if (st == PAR_OK && o.upscale > 0) st = par_dataset_upscale(&ds, (size_t)o.upscale, dt);
    if (st == PAR_OK && !o.model && ds.train.n_features != m.n_inputs) {
        char spec[64];
        snprintf(spec, sizeof spec, "mlp:%zu-256-128-10", ds.train.n_features);
        st = par_model_parse(&m, spec, act);
    }
    if (st == PAR_OK && o.model && ds.train.n_features != m.n_inputs) {
        char up[64] = "";
        if (o.upscale > 0)
            snprintf(up, sizeof up, " (--upscale %d: %d x %d x %zu)", o.upscale, o.upscale,
                     o.upscale, ds.train.channels);
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--model %s takes %zu inputs but "
                           "dataset %s has %zu features per sample%s; expected an input size "
                           "of %zu", m.spec, m.n_inputs, ds.name, ds.train.n_features, up,
                           ds.train.n_features);
        hint = "leave out --model for the default MLP, or make its first number the input size";
    }
    if (st == PAR_OK && o.batch_full) {   // one step per epoch: the whole training split
        if (ds.n_train > 1000000000)
            st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--batch full: %zu training "
                               "records is more than one batch can hold", ds.n_train);
        else o.batch = (int)ds.n_train;
    }
    if (st == PAR_OK && !o.batch_full && (size_t)o.batch > ds.n_train) {   // not one short step
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--batch %d: expected at most %zu, "
                           "the training split of %s", o.batch, ds.n_train, ds.name);
        hint = "give a smaller --batch, or --batch full for the whole split in one step";
    }
    if (st == PAR_OK && o.best_val && ds.n_val == 0)
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                           "--select best-val: dataset %s has no validation records", ds.name);
    const size_t sz = par_dtype_size(dt);
    void *init = malloc(m.n_params * sz), *final = malloc(m.n_params * sz);
    if (st == PAR_OK && (!init || !final))
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    // --select best-val: rank 0 keeps the best epoch's weights.
    c.best_epoch = -1;
    if (st == PAR_OK && o.best_val && rank == 0 && !(c.best_w = malloc(m.n_params * sz)))
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    // --resume: the optimizer state of the checkpoint (every rank receives it).
    par_ckpt_optim ros = {par_optim_n_state(o.optim.kind), {NULL, NULL}, {NULL, NULL}, 0};
    for (int i = 0; i < ros.n; i++) {
        ros.names[i] = par_optim_state_name(o.optim.kind, i);
        if (st == PAR_OK && o.resume && !(ros.arr[i] = malloc(m.n_params * sz)))
            st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    if (st == PAR_OK) {
        if (o.init_load) st = par_weights_load(o.init_load, &m, dt, init);
        else par_model_init(&m, dt, o.seed, init);
        char where[160];
        if (st == PAR_OK && o.init_load && par_find_nonfinite(where, sizeof where, &m, dt, init))
            st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: %s is not finite",
                               o.init_load, where);
    }
    if (st == PAR_OK && o.init_save && rank == 0) st = par_weights_save(o.init_save, &m, dt, init);
    const long per_epoch =
        st == PAR_OK ? (long)((ds.n_train + (size_t)o.batch - 1) / (size_t)o.batch) : 1;
    c.total_steps = per_epoch * o.epochs;
    char steps_hint[96];
    if (st == PAR_OK && o.steps > c.total_steps) {   // the run would end before, silently
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--steps %d: expected at most %ld, "
                           "the steps of --epochs %d (%zu training records, batch %d)", o.steps,
                           c.total_steps, o.epochs, ds.n_train, o.batch);
        snprintf(steps_hint, sizeof steps_hint, "give --epochs %ld, or leave out --steps",
                 (o.steps + per_epoch - 1) / per_epoch);
        hint = steps_hint;
    }
    if (o.steps > 0 && o.steps < c.total_steps) c.total_steps = o.steps;

    // Checkpoint folder (rank 0 locks it before looking), config, resume.
    par_ckpt_meta found;
    memset(&found, 0, sizeof found);
    par_run_point start = {0, 0, 0};
    if (st == PAR_OK && rank == 0 && c.checkpointing) {
        fill_config(&c.meta.cfg, &o, &m, act, dt, &ds, init);
        const int same = o.resume && strcmp(ckdir, o.resume) == 0;   // resume in place
        st = par_ckpt_dir_open(&c.ck, ckdir, !same, !same);
        if (st == PAR_OK && o.resume) st = find_resume(&found, &start, o.resume, &c.meta.cfg,
                                                       o.init_load != NULL, &m,
                                                       dt, init, &ros);
        if (st == PAR_ERR_CONFIG && strstr(par_last_error(), " is from another run: --"))
            hint = "leave the flag out to go on with the checkpoint's value (--resume DIR alone "
                   "continues the run)";
        // --select best-val goes on from the checkpoint's best epoch so far.
        if (st == PAR_OK && o.resume && o.best_val && strcmp(found.select, "best-val") != 0)
            st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                               "--select best-val: the run of %s kept --select %s, so its best "
                               "epoch before step %ld is unknown", o.resume, found.select,
                               found.step);
        if (st == PAR_OK && o.resume && o.best_val && found.has_best) {
            st = par_ckpt_load_best(o.resume, &found, &m, dt, c.best_w);
            c.best_epoch = found.best_epoch;
            c.best_val_loss = found.best_val_loss;
            c.best_val_acc = found.best_val_acc;
            c.best_test_loss = found.best_test_loss;
            c.best_test_acc = found.best_test_acc;
        }
    }
    if (o.resume)
        st = share_resume(&c, st, &start, &found, init, init ? m.n_params * sz : 0, &ros);
    const par_optim_state start_os = {ros.n, {ros.arr[0], ros.arr[1]}, ros.t};
    c.every = o.ckpt_every > 0 ? o.ckpt_every : o.resume && found.every > 0 ? found.every
                                                                            : per_epoch;
    if (o.keep == 0) o.keep = o.resume && found.keep > 0 ? found.keep : 3;
    if (c.checkpointing) {
        snprintf(c.meta.trainer, sizeof c.meta.trainer, "%s", tr->name);
        snprintf(c.meta.mode, sizeof c.meta.mode, "%s", par_mode_name(mode));
        snprintf(c.meta.select, sizeof c.meta.select, "%s", o.best_val ? "best-val" : "last");
        c.meta.threads = o.threads;
        c.meta.ranks = size;
        c.meta.every = c.every;
        c.meta.keep = o.keep;
        c.meta.has_run = 1;
        c.meta.run_epochs = o.epochs;
        c.meta.run_steps = o.steps;
        c.meta.upscale = o.upscale;
        c.meta.no_digest = o.no_digest;
    }
    // The test-only fault counts steps from the start of the whole run.
    if (o.resume && fault.step > 0) {
        if (fault.step <= start.step) fault.kind = PAR_FAULT_NONE;
        else fault.step -= start.step;
    }

    // The log: a resumed run first writes the lines up to its checkpoint again.
    char replayed_from[1200] = "";
    char *prefix = NULL;
    if (st == PAR_OK && o.log && rank == 0) {
        if (o.resume && !found.has_log)
            st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                               "--log %s: the run of %s had no --log, so its log cannot be "
                               "continued", o.log, o.resume);
        if (st == PAR_OK && o.resume)
            st = par_ckpt_log_find(&prefix, replayed_from, sizeof replayed_from, &found.log,
                                   o.log);
        if (st == PAR_OK) st = par_log_open(&c.log, o.log);
        if (st == PAR_OK && c.checkpointing) st = par_ckpt_log_track(&c.track, o.log);
        if (st == PAR_OK && o.resume)
            st = par_ckpt_log_replay(c.log, c.track, &found.log, prefix, replayed_from);
        free(prefix);
    }
    c.last_ckpt = o.resume && st == PAR_OK ? start.step : -1;
    c.resumed_from = c.last_ckpt;
    {
        int v = st != PAR_OK;
        agree_max(&c, &v, 1);
        if (v && st == PAR_OK) {
            st = PAR_RUN_STOP;
            c.peer_failed = 1;
        }
    }

    long steps = 0;
    par_trainer_stats stats = {0};
    if (st == PAR_OK) {
        const par_run_opts ro = {
            .trainer = tr,
            .cfg = {&m, dt, mode, (size_t)o.batch, (size_t)o.chunk, o.lr, o.threads, init,
                    o.fault ? &fault : NULL, &o.optim},
            .ds = &ds, .seed = o.seed, .epochs = o.epochs, .max_steps = o.steps,
        };
        const par_run_ext rx = {o.resume ? &start : NULL, 1, o.check_every > 0 ? o.check_every : -1,
                                after_step, o.resume ? &start_os : NULL, &c.optim_now};
        const par_run_hooks hooks = {&c, on_step, on_epoch};
        c.t_start = c.t_last_print = now();
        st = par_run_ex(&ro, &rx, &hooks, final, &steps, &stats);
    }
    const double seconds = now() - c.t_start - c.t_eval;
    if (st == PAR_OK && c.best_w && c.best_epoch >= 0) {
        // --select best-val: that epoch's weights and evaluation stand for the run.
        memcpy(final, c.best_w, m.n_params * sz);
        c.val_loss = c.best_val_loss;
        c.val_acc = c.best_val_acc;
        c.test_loss = c.best_test_loss;
        c.test_acc = c.best_test_acc;
    }
    if (st == PAR_OK && o.save && rank == 0) st = par_weights_save(o.save, &m, dt, final);
    if (c.log) {
        // The log is written as it goes: a stopped or failed run keeps the
        // whole lines of the steps it did (with checkpoints, for --resume).
        if (st == PAR_OK || c.checkpointing) {
            par_status lst = par_log_close(c.log);
            if (st == PAR_OK) st = lst;
            if (lst == PAR_OK && replayed_from[0] && strcmp(replayed_from, found.log.tmp) == 0 &&
                strcmp(found.log.tmp, found.log.path) != 0)
                remove(replayed_from);   // an older version's temp log: now in o.log
        } else {
            par_log_discard(c.log);
        }
    }
    if (st == PAR_OK && o.json && rank == 0) print_json(&c, final, steps, seconds, &stats);
    if (st == PAR_OK && c.plain)
        fprintf(stderr, "parity train: done: %ld steps, loss %.4f, val acc %.4f, test acc %.4f, "
                        "%.1f s\n", steps, c.last_loss, c.val_acc, c.test_acc, seconds);

    if (st == PAR_OK) {
        rc = EXIT_OK;
    } else if (st == PAR_RUN_STOP && c.peer_failed) {
        rc = EXIT_OK;   // another rank failed and says why; the exit codes are combined
    } else if (st == PAR_RUN_STOP) {
        rc = 128 + c.stop_sig;
        if (rank == 0) {
            const char *name = c.stop_sig == SIGINT ? "SIGINT" : "SIGTERM";
            if (c.ck)
                fprintf(stderr, "parity train: stopped by %s after step %ld; checkpoint "
                                "%s/ckpt-%010ld written\nhint: continue with: parity train "
                                "--resume %s\n", name, steps, ckdir,
                        c.last_ckpt, ckdir);
            else
                fprintf(stderr, "parity train: stopped by %s after step %ld; nothing saved\n"
                                "hint: with --checkpoint-dir DIR a stopped run can be "
                                "continued (--resume DIR)\n", name, steps);
        }
    } else if (c.mpi && rank != 0 && (st == PAR_ERR_NUMERIC || st == PAR_ERR_CONFIG)) {
        rc = st == PAR_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;   // rank 0 says the same
    } else {
        char h[1400];
        if (st == PAR_ERR_NUMERIC && c.last_ckpt >= 0)
            snprintf(h, sizeof h, "lower --lr; the weights of the last good checkpoint (step "
                     "%ld) are %s/ckpt-%010ld.npz (usable with --init-load)", c.last_ckpt, ckdir,
                     c.last_ckpt);
        else if (st == PAR_ERR_NUMERIC)
            snprintf(h, sizeof h, "lower --lr");
        else if (c.last_ckpt >= 0)
            snprintf(h, sizeof h, "the newest checkpoint (step %ld) is kept: fix the cause, "
                     "then --resume %s", c.last_ckpt, ckdir);
        else
            snprintf(h, sizeof h, "%s", hint ? hint : "");
        rc = cli_fail("train", st, h[0] ? h : NULL);
    }
    par_ckpt_log_untrack(c.track);
    par_ckpt_dir_close(c.ck);
    free(init);
    free(final);
    free(c.best_w);
    free(ros.arr[0]);
    free(ros.arr[1]);
    par_dataset_free(&ds);
    return par_mpi_finish(rc);
}
