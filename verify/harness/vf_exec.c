// Runs one child process for the harness: new session, stdin /dev/null,
// stdout/stderr to files, extra environment, a timeout that ends the whole
// process group (mpirun gets SIGTERM first so it can end its ranks).
#define _POSIX_C_SOURCE 200809L
#include "vf_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "par_time.h"

static volatile sig_atomic_t running_pid;

pid_t vf_exec_running(void) { return (pid_t)running_pid; }

static void (*wait_fn)(void *, double);
static void *wait_ctx;

void vf_exec_on_wait(void (*fn)(void *ctx, double waited_s), void *ctx)
{
    wait_fn = fn;
    wait_ctx = ctx;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int open_out(const char *path)
{
    return open(path ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

par_status vf_exec(const char *const *argv, const char *const *env, const char *out_path,
                   const char *err_path, double timeout_s, int *code, double *wall_s)
{
    *code = -1;
    const double t0 = par_now();
    int fd_in = open("/dev/null", O_RDONLY), fd_out = open_out(out_path), fd_err = open_out(err_path);
    if (fd_in < 0 || fd_out < 0 || fd_err < 0) {
        const int e = errno;
        if (fd_in >= 0) close(fd_in);
        if (fd_out >= 0) close(fd_out);
        if (fd_err >= 0) close(fd_err);
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot open the output files of %s: %s",
                             argv[0], strerror(e));
    }
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(fd_in, 0);
        dup2(fd_out, 1);
        dup2(fd_err, 2);
        close(fd_in);
        close(fd_out);
        close(fd_err);
        for (int i = 0; env && env[i]; i++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd_in);
    close(fd_out);
    close(fd_err);
    PAR_FAIL_IF(pid < 0, PAR_ERR_IO, "cannot start %s: %s", argv[0], strerror(errno));
    running_pid = (sig_atomic_t)pid;
    int status = 0, timed_out = 0;
    double term_at = 0, ticked = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            running_pid = 0;
            *wall_s = par_now() - t0;
            return par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "waitpid: %s", strerror(errno));
        }
        const double t = par_now() - t0;
        if (!timed_out && t > timeout_s) {
            timed_out = 1;
            term_at = t;
            kill(-pid, SIGTERM);
        } else if (timed_out && t > term_at + 5) {
            kill(-pid, SIGKILL);
        }
        if (wait_fn && t >= ticked + 1) {
            ticked = t;
            wait_fn(wait_ctx, t);
        }
        nap(t < 1 ? 0.005 : 0.05);
    }
    running_pid = 0;
    if (timed_out) kill(-pid, SIGKILL);   // stragglers of the group
    *wall_s = par_now() - t0;
    if (timed_out) *code = 124;
    else if (WIFEXITED(status)) *code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) *code = 128 + WTERMSIG(status);
    if (*code == 127 && !timed_out)
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot run %s", argv[0]);
    return PAR_OK;
}
