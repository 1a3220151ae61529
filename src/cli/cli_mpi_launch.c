// MPI start-up and the `--ranks` launcher with its output watcher; see cli_mpi_launch.h.
#define _POSIX_C_SOURCE 200809L
#include "cli_mpi_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"
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

int cli_mpi_relaunch(int argc, char **argv, int ranks)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "parity: cannot find its own executable to relaunch under mpirun\n");
        return EXIT_RUNTIME;
    }
    exe[n] = '\0';
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", ranks);
    const char *pre[] = {PARITY_MPIEXEC, "-n", nbuf, "--oversubscribe", "--bind-to", "none",
                         "--mca", "mpi_yield_when_idle", "1"};
    const int n_pre = (int)(sizeof pre / sizeof pre[0]);
    char **args = calloc((size_t)(n_pre + argc + 2), sizeof *args);
    if (!args) return EXIT_RUNTIME;
    int k = 0;
    for (int i = 0; i < n_pre; i++) args[k++] = (char *)pre[i];
    if (geteuid() == 0) args[k++] = "--allow-run-as-root";
    args[k++] = exe;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    fflush(NULL);
    execvp(args[0], args);
    fprintf(stderr, "parity: cannot run '%s' for --ranks %d\n", args[0], ranks);
    fprintf(stderr, "hint: install openmpi-bin (ci/setup.sh does) or run mpirun yourself\n");
    free(args);
    return EXIT_RUNTIME;
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

// The exit code of a watched job, and what it says: the rank that died, or
// why mpirun failed; mpirun's unrecognised message boxes (w may be NULL).
static int launch_verdict(const mpirun_watch *w, int status, const char *cmd, const char *ck)
{
    int rc;
    if (w && w->dead_rank >= 0 && w->dead_sig > 0) {
        fprintf(stderr, "parity %s: MPI rank %d died (signal %d, %s); mpirun ended the job\n",
                cmd, w->dead_rank, w->dead_sig, strsignal(w->dead_sig));
        if (ck) fprintf(stderr, "hint: continue from the last checkpoint: parity %s --resume "
                                "%s\n", cmd, ck);
        rc = EXIT_RUNTIME;
    } else if (WIFEXITED(status) &&
               (WEXITSTATUS(status) <= EXIT_RUNTIME || WEXITSTATUS(status) == 128 + SIGINT ||
                WEXITSTATUS(status) == 128 + SIGTERM)) {
        rc = WEXITSTATUS(status);   // the ranks' agreed exit code; they said why
        if (w && w->other_len) fputs(w->other, stderr);
    } else {
        if (w && w->other_len) fputs(w->other, stderr);
        if (WIFSIGNALED(status))
            fprintf(stderr, "parity %s: mpirun was killed by signal %d (%s)\n", cmd,
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            fprintf(stderr, "parity %s: the MPI job failed (mpirun exit status %d)\n", cmd,
                    WEXITSTATUS(status));
        if (ck) fprintf(stderr, "hint: continue from the last checkpoint: parity %s --resume "
                                "%s\n", cmd, ck);
        rc = EXIT_RUNTIME;
    }
    return rc;
}

int cli_mpi_launch_watched(int argc, char **argv, int ranks, const char *cmd,
                           const char *ckpt_dir)
{
    int pfd[2];
    if (pipe(pfd) != 0) {
        fprintf(stderr, "parity %s: cannot create a pipe for mpirun: %s\n", cmd,
                strerror(errno));
        return EXIT_RUNTIME;
    }
    const pid_t parent = getpid();
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "parity %s: cannot fork mpirun: %s\n", cmd, strerror(errno));
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
        _exit(cli_mpi_relaunch(argc, argv, ranks));
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
                t_first = par_now();
            } else if (forwarded == 1 && par_now() - t_first >= 2.0) {
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
        if (parent_sig_count > seen && par_now() - t_first >= 2.0) kill(pid, SIGTERM);
        seen = parent_sig_count;
    }
    if (w && w->len) watch_line(w, w->line, w->len);
    const int rc = launch_verdict(w, status, cmd, ckpt_dir);
    free(w);
    return rc;
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
