// MPI start-up and the `--ranks` launcher with its output watcher; see cli_mpi_launch.h.
#define _POSIX_C_SOURCE 200809L
#include "cli_mpi_launch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "par_proc.h"
#include "par_time.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

int cli_mpi_under_launcher(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
           getenv("PMIX_RANK") != NULL;
}

int cli_mpi_env_size(int *rank)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!n) n = getenv("PMI_SIZE");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    *rank = r ? atoi(r) : 0;
    const int size = n ? atoi(n) : 1;
    return size > 0 ? size : 1;
}

// argv of `mpirun -n ranks <flags> <this binary> argv[1..]` (cli_mpi_relaunch);
// 0, or EXIT_RUNTIME after saying why.
static int mpirun_argv(par_argv *a, int argc, char **argv, int ranks)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "parity: cannot find its own executable to relaunch under mpirun\n");
        return EXIT_RUNTIME;
    }
    exe[n] = '\0';
    par_argv_add(a, "%s", PARITY_MPIEXEC);
    par_argv_add(a, "-n");
    par_argv_add(a, "%d", ranks);
    par_argv_words(a, "--oversubscribe --bind-to none --mca mpi_yield_when_idle 1");
    // The ranks share this host: ob1 over shared memory is what Open MPI picks
    // anyway, and naming it skips probing the cm PML's fabrics (0.2 s a start).
    if (!getenv("OMPI_MCA_pml")) par_argv_words(a, "--mca pml ob1");
    if (geteuid() == 0) par_argv_add(a, "--allow-run-as-root");
    par_argv_add(a, "%s", exe);
    for (int i = 1; i < argc; i++) par_argv_add(a, "%s", argv[i]);
    return a->oom ? EXIT_RUNTIME : 0;
}

// mpirun could not be started.
static int cannot_run(const char *mpirun, int ranks)
{
    fprintf(stderr, "parity: cannot run '%s' for --ranks %d\n", mpirun, ranks);
    fprintf(stderr, "hint: install openmpi-bin (ci/setup.sh does) or run mpirun yourself\n");
    return EXIT_RUNTIME;
}

int cli_mpi_relaunch(int argc, char **argv, int ranks)
{
    par_argv a = {0};
    int rc = mpirun_argv(&a, argc, argv, ranks);
    if (rc == 0) {
        fflush(NULL);
        execvp(a.v[0], a.v);
        rc = cannot_run(a.v[0], ranks);
    }
    par_argv_free(&a);
    return rc;
}

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

// The exit code of a watched job (r: how mpirun ended), and what it says:
// the rank that died, or why mpirun failed; mpirun's unrecognised message
// boxes (w may be NULL).
static int launch_verdict(const mpirun_watch *w, const par_proc_result *r, const char *cmd,
                          const char *ck)
{
    int rc;
    if (w && w->dead_rank >= 0 && w->dead_sig > 0) {
        fprintf(stderr, "parity %s: MPI rank %d died (signal %d, %s); mpirun ended the job\n",
                cmd, w->dead_rank, w->dead_sig, strsignal(w->dead_sig));
        if (ck) fprintf(stderr, "hint: continue from the last checkpoint: parity %s --resume "
                                "%s\n", cmd, ck);
        rc = EXIT_RUNTIME;
    } else if (!r->signal && (r->code <= EXIT_RUNTIME || r->code == 128 + SIGINT ||
                              r->code == 128 + SIGTERM)) {
        rc = r->code;   // the ranks' agreed exit code; they said why
        if (w && w->other_len) fputs(w->other, stderr);
    } else {
        if (w && w->other_len) fputs(w->other, stderr);
        if (r->signal)
            fprintf(stderr, "parity %s: mpirun was killed by signal %d (%s)\n", cmd, r->signal,
                    strsignal(r->signal));
        else
            fprintf(stderr, "parity %s: the MPI job failed (mpirun exit status %d)\n", cmd,
                    r->code);
        if (ck) fprintf(stderr, "hint: continue from the last checkpoint: parity %s --resume "
                                "%s\n", cmd, ck);
        rc = EXIT_RUNTIME;
    }
    return rc;
}

// What the launcher passes on while mpirun runs.
typedef struct forwarder {
    mpirun_watch *w;   // NULL: mpirun's stderr goes through as it is
    int seen, forwarded;
    double t_first;
} forwarder;

// The first signal asks for a clean stop (SIGINT as SIGUSR1, SIGTERM as
// SIGUSR2: mpirun forwards those to every rank); one that comes 2 s later
// or more (not a duplicate, e.g. from `timeout` to its group) ends the job
// at once (SIGTERM to mpirun).
static void forward_signals(void *ctx, const par_proc *p, double waited_s)
{
    (void)waited_s;
    forwarder *f = ctx;
    if (parent_sig_count <= f->seen) return;
    f->seen = parent_sig_count;
    if (f->forwarded == 0) {
        par_proc_signal(p, parent_sig == SIGINT ? SIGUSR1 : SIGUSR2, 0);
        f->forwarded = 1;
        f->t_first = par_now();
    } else if (f->forwarded == 1 && par_now() - f->t_first >= 2.0) {
        par_proc_signal(p, SIGTERM, 0);
        f->forwarded = 2;
    }
}

static void watch_stderr(void *ctx, int stream, const char *buf, size_t n)
{
    (void)stream;
    forwarder *f = ctx;
    if (f->w)
        watch_bytes(f->w, buf, n);
    else
        fwrite(buf, 1, n, stderr);
}

int cli_mpi_launch_watched(int argc, char **argv, int ranks, const char *cmd,
                           const char *ckpt_dir)
{
    par_argv a = {0};
    int rc = mpirun_argv(&a, argc, argv, ranks);
    if (rc) {
        par_argv_free(&a);
        return rc;
    }
    // mpirun in its own group: a terminal's Ctrl-C reaches us, and we pass
    // it on; if we die (kill -9), mpirun gets SIGTERM and ends the job.
    const par_proc_spec s = {.argv = (const char *const *)a.v, .out = PAR_PROC_INHERIT,
                             .err = PAR_PROC_PIPE, .group = PAR_PROC_OWN_GROUP,
                             .die_with_parent = 1};
    par_proc p;
    if (par_proc_start(&p, &s) != PAR_OK) {
        rc = cannot_run(a.v[0], ranks);
        par_argv_free(&a);
        return rc;
    }
    par_argv_free(&a);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_parent_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    forwarder f = {calloc(1, sizeof(mpirun_watch)), 0, 0, 0};
    const par_proc_wait_opts wo = {.on_tick = forward_signals, .on_output = watch_stderr,
                                   .ctx = &f};
    par_proc_result r;
    if (par_proc_wait(&p, &wo, &r) != PAR_OK) {
        fprintf(stderr, "parity %s: %s\n", cmd, cli_error_text());
        free(f.w);
        return EXIT_RUNTIME;
    }
    if (f.w && f.w->len) watch_line(f.w, f.w->line, f.w->len);
    rc = launch_verdict(f.w, &r, cmd, ckpt_dir);
    free(f.w);
    return rc;
}
int cli_mpi_launch_or_join(int argc, char **argv, int ranks, const char *cmd, int *rank,
                           int *size)
{
    if (ranks > 0 && !cli_mpi_under_launcher())
        return cli_mpi_launch_watched(argc, argv, ranks, cmd, NULL);
    if (cli_mpi_start(rank, size) != PAR_OK) return cli_fail(cmd, PAR_ERR_MPI, NULL);
    return -1;
}

#ifdef PARITY_HAVE_MPI
par_status cli_mpi_start(int *rank, int *size)
{
    int init = 0, provided = 0;
    MPI_Initialized(&init);
    if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__, "MPI_Init_thread failed");
    if (!init && provided < MPI_THREAD_FUNNELED)
        return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__,
                             "the MPI library does not provide MPI_THREAD_FUNNELED");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return PAR_OK;
}

int cli_mpi_finish(int rc)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return rc;
    int all = rc;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
}
#else
par_status cli_mpi_start(int *rank, int *size)
{
    *rank = 0;
    *size = 1;
    return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__, "parity was built without MPI");
}

int cli_mpi_finish(int rc) { return rc; }
#endif
