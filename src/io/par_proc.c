// Child processes (par_proc.h): fork and execve with everything the child
// needs prepared before the fork (path, environment, files), so the child
// only rearranges descriptors and executes; an exec failure comes back
// through a close-on-exec pipe as the errno it had.
#define _POSIX_C_SOURCE 200809L
#include "par_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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

#include "par_time.h"

extern char **environ;

// ---- argument lists -------------------------------------------------------------------

static void push(par_argv *a, char *s)
{
    if (!s || a->oom) {
        free(s);
        a->oom = 1;
        return;
    }
    if (a->n + 2 > a->cap) {
        const int cap = a->cap ? 2 * a->cap : 16;
        char **v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) {
            free(s);
            a->oom = 1;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

static void push_v(par_argv *a, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    const int len = vsnprintf(NULL, 0, fmt, ap);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (s) vsnprintf(s, (size_t)len + 1, fmt, again);
    va_end(again);
    push(a, s);
}

void par_argv_add(par_argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push_v(a, fmt, ap);
    va_end(ap);
}

void par_argv_opt(par_argv *a, const char *flag, const char *fmt, ...)
{
    push(a, strdup(flag));
    va_list ap;
    va_start(ap, fmt);
    push_v(a, fmt, ap);
    va_end(ap);
}

void par_argv_words(par_argv *a, const char *s)
{
    while (*s) {
        const size_t blank = strspn(s, " \t\n"), len = strcspn(s + blank, " \t\n");
        if (len) push(a, strndup(s + blank, len));
        s += blank + len;
    }
}

void par_argv_free(par_argv *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

// ---- starting -------------------------------------------------------------------------

static volatile sig_atomic_t running_pid;

pid_t par_proc_running(void) { return (pid_t)running_pid; }

// argv[0] as execvp would find it: itself when it names a path, else the
// first executable file of that name on PATH (itself when there is none:
// execve then says why).
static char *find_program(const char *name)
{
    if (strchr(name, '/')) return strdup(name);
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    const size_t n_name = strlen(name);
    for (const char *p = path; *p;) {
        const size_t len = strcspn(p, ":");
        char *full = malloc(len + n_name + 3);
        if (!full) return NULL;
        snprintf(full, len + n_name + 3, "%.*s/%s", (int)len, len ? p : ".", name);
        struct stat sb;
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode) && access(full, X_OK) == 0) return full;
        free(full);
        p += len + (p[len] == ':');
    }
    return strdup(name);
}

// This process's environment with the NAME=value entries of env set over it
// (NULL when env is NULL: the child inherits environ as it is).
static char **merged_env(const char *const *env, int *oom)
{
    *oom = 0;
    if (!env) return NULL;
    size_t n_env = 0, n_over = 0;
    while (environ[n_env]) n_env++;
    while (env[n_over]) n_over++;
    char **out = calloc(n_env + n_over + 1, sizeof *out);
    if (!out) {
        *oom = 1;
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        const size_t name = strcspn(environ[i], "=");
        int over = 0;
        for (size_t j = 0; j < n_over && !over; j++)
            over = strncmp(env[j], environ[i], name) == 0 && env[j][name] == '=';
        if (!over) out[k++] = environ[i];
    }
    for (size_t j = 0; j < n_over; j++)
        if (strchr(env[j], '=')) out[k++] = (char *)env[j];
    return out;
}

static int cloexec(int fd)
{
    return fd < 0 ? fd : fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 ? fd : -1;
}

// The descriptor a child's stdout or stderr gets, and for a pipe the read end.
static int open_stream(par_proc_io io, const char *path, int std_fd, int *read_end)
{
    *read_end = -1;
    switch (io) {
    case PAR_PROC_INHERIT:
        return std_fd;
    case PAR_PROC_FILE:
        return cloexec(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
    case PAR_PROC_PIPE: {
        int pf[2];
        if (pipe(pf) != 0) return -1;
        cloexec(pf[0]);
        cloexec(pf[1]);
        *read_end = pf[0];
        return pf[1];
    }
    case PAR_PROC_DEVNULL:
    default:
        return cloexec(open("/dev/null", O_WRONLY));
    }
}

// In the child: fd onto std_fd, open across the exec.
static void onto(int fd, int std_fd)
{
    if (fd == std_fd)
        fcntl(fd, F_SETFD, 0);
    else
        dup2(fd, std_fd);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

// The child's side of the fork: only async-signal-safe calls.
static void child(const par_proc_spec *s, const char *path, char **envp, const int fd[3],
                  int err_pipe, pid_t parent)
{
    if (s->group == PAR_PROC_OWN_SESSION) setsid();
    if (s->group == PAR_PROC_OWN_GROUP) setpgid(0, 0);
#ifdef __linux__
    if (s->die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);   // it died before the line above
    }
#else
    (void)parent;
#endif
    for (int i = 0; i < 3; i++) onto(fd[i], i);
    execve(path, (char *const *)s->argv, envp ? envp : environ);
    const int e = errno;
    ssize_t w;
    do {
        w = write(err_pipe, &e, sizeof e);
    } while (w < 0 && errno == EINTR);
    _exit(127);
}

par_status par_proc_start(par_proc *p, const par_proc_spec *s)
{
    memset(p, 0, sizeof *p);
    p->fd[0] = p->fd[1] = -1;
    PAR_FAIL_IF(!s->argv || !s->argv[0], PAR_ERR_CONFIG, "par_proc_start: an empty argv");
    const char *prog = s->argv[0];
    int oom = 0;
    char *path = find_program(prog);
    char **envp = merged_env(s->env, &oom);
    int fd[3] = {cloexec(open("/dev/null", O_RDONLY)), -1, -1}, ep[2] = {-1, -1};
    fd[1] = open_stream(s->out, s->out_path, STDOUT_FILENO, &p->fd[0]);
    // One file for both streams: opened once, so that they share one offset.
    const int same = s->out == PAR_PROC_FILE && s->err == PAR_PROC_FILE && s->out_path &&
                     s->err_path && strcmp(s->out_path, s->err_path) == 0;
    fd[2] = same ? (fd[1] < 0 ? -1 : cloexec(dup(fd[1])))
                 : open_stream(s->err, s->err_path, STDERR_FILENO, &p->fd[1]);
    const int e_open = errno;
    const int piped = pipe(ep) == 0 && cloexec(ep[0]) >= 0 && cloexec(ep[1]) >= 0;
    par_status st = PAR_OK;
    if (!path || oom)
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    else if (fd[0] < 0 || fd[1] < 0 || fd[2] < 0)
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot open the streams of %s: %s",
                           prog, strerror(e_open));
    else if (!piped)
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot create a pipe for %s: %s",
                           prog, strerror(errno));
    pid_t pid = -1;
    if (st == PAR_OK) {
        const pid_t parent = getpid();
        fflush(NULL);
        pid = fork();
        if (pid == 0) child(s, path, envp, fd, ep[1], parent);
        if (pid < 0)
            st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot fork %s: %s", prog,
                               strerror(errno));
    }
    if (pid > 0 && s->group == PAR_PROC_OWN_GROUP) setpgid(pid, pid);   // no race with a kill
    close_fd(&ep[1]);
    for (int i = 0; i < 3; i++)
        if (fd[i] != i) close_fd(&fd[i]);
    free(path);
    free(envp);
    int child_errno = 0;
    ssize_t got = 0;
    if (pid > 0) {
        do {
            got = read(ep[0], &child_errno, sizeof child_errno);
        } while (got < 0 && errno == EINTR);
    }
    close_fd(&ep[0]);
    if (pid > 0 && got == (ssize_t)sizeof child_errno) {   // the exec failed
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot run %s: %s", prog,
                           strerror(child_errno));
    }
    if (st != PAR_OK) {
        close_fd(&p->fd[0]);
        close_fd(&p->fd[1]);
        return st;
    }
    p->pid = pid;
    p->own_group = s->group != PAR_PROC_SAME_GROUP;
    p->t_start = par_now();
    return PAR_OK;
}

int par_proc_signal(const par_proc *p, int sig, int whole_group)
{
    if (p->pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    return kill(whole_group && p->own_group ? -p->pid : p->pid, sig);
}

// ---- waiting --------------------------------------------------------------------------

typedef struct sink {
    char *buf;
    size_t len, cap;
} sink;

static void sink_add(sink *k, const char *s, size_t n)
{
    if (k->len + n + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->len + n + 1) cap *= 2;
        char *b = realloc(k->buf, cap);
        if (!b) return;   // what does not fit is dropped
        k->buf = b;
        k->cap = cap;
    }
    memcpy(k->buf + k->len, s, n);
    k->len += n;
    k->buf[k->len] = '\0';
}

// Reads what pipe i holds now (waiting up to ms for the first byte when
// ms > 0); closes it at its end. Returns 1 when it read something.
static int drain(par_proc *p, int i, const par_proc_wait_opts *w, sink *k, int ms)
{
    char buf[4096];
    int any = 0;
    while (p->fd[i] >= 0) {
        struct pollfd pf = {p->fd[i], POLLIN, 0};
        const int r = poll(&pf, 1, any ? 0 : ms);
        if (r < 0 && errno == EINTR) return any;
        if (r <= 0) return any;
        const ssize_t n = read(p->fd[i], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close_fd(&p->fd[i]);
            return any;
        }
        any = 1;
        if (w && w->on_output)
            w->on_output(w->ctx, i + 1, buf, (size_t)n);
        else
            sink_add(k, buf, (size_t)n);
    }
    return any;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

// One wait of about ms milliseconds: on the pipes while any is open (what
// arrives is read at once), else a sleep.
static void wait_a_little(par_proc *p, const par_proc_wait_opts *w, sink k[2], int ms)
{
    struct pollfd pf[2];
    int n = 0;
    for (int i = 0; i < 2; i++)
        if (p->fd[i] >= 0) pf[n++] = (struct pollfd){p->fd[i], POLLIN, 0};
    if (n == 0) {
        nap(ms / 1e3);
        return;
    }
    if (poll(pf, (nfds_t)n, ms) <= 0) return;   // nothing yet, or a signal
    for (int i = 0; i < 2; i++) drain(p, i, w, &k[i], 0);
}

par_status par_proc_wait(par_proc *p, const par_proc_wait_opts *w, par_proc_result *r)
{
    memset(r, 0, sizeof *r);
    r->code = -1;
    PAR_FAIL_IF(p->pid <= 0, PAR_ERR_CONFIG, "par_proc_wait: no child");
    const int piped[2] = {p->fd[0] >= 0, p->fd[1] >= 0};
    sink k[2] = {{0}, {0}};
    running_pid = (sig_atomic_t)p->pid;
    int status = 0, timed_out = 0;
    double term_at = 0, ticked = 0;
    par_status st = PAR_OK;
    for (;;) {
        const pid_t got = waitpid(p->pid, &status, WNOHANG);
        if (got == p->pid) break;
        if (got < 0 && errno != EINTR) {
            st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "waitpid: %s", strerror(errno));
            break;
        }
        const double t = par_now() - p->t_start;
        if (w && w->timeout_s > 0 && !timed_out && t > w->timeout_s) {
            timed_out = 1;
            term_at = t;
            par_proc_signal(p, SIGTERM, 1);
        } else if (timed_out && t > term_at + 5) {
            par_proc_signal(p, SIGKILL, 1);
        }
        if (w && w->on_tick && t >= ticked + w->tick_s) {
            ticked = t;
            w->on_tick(w->ctx, p, t);
        }
        wait_a_little(p, w, k, t < 1 ? 5 : 50);
    }
    running_pid = 0;
    for (int i = 0; i < 2; i++) {   // what the child wrote before it ended
        while (drain(p, i, w, &k[i], 0)) {
        }
        close_fd(&p->fd[i]);
    }
    if (timed_out) par_proc_signal(p, SIGKILL, 1);   // stragglers of its group
    r->wall_s = par_now() - p->t_start;
    r->timed_out = timed_out;
    if (st == PAR_OK) {
        r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        r->code = timed_out ? 124 : r->signal ? 128 + r->signal : WEXITSTATUS(status);
    }
    for (int i = 0; i < 2; i++)
        if (piped[i] && !(w && w->on_output) && !k[i].buf) sink_add(&k[i], "", 0);
    r->out = k[0].buf, r->out_len = k[0].len;
    r->err = k[1].buf, r->err_len = k[1].len;
    p->pid = 0;
    return st;
}

int par_proc_poll(par_proc *p, par_proc_result *r)
{
    if (p->pid <= 0) return -1;
    int status = 0;
    const pid_t got = waitpid(p->pid, &status, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR)) return 0;
    if (got < 0) return -1;
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 2; i++) close_fd(&p->fd[i]);
    r->wall_s = par_now() - p->t_start;
    r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    r->code = r->signal ? 128 + r->signal : WEXITSTATUS(status);
    p->pid = 0;
    return 1;
}

par_status par_proc_run(const par_proc_spec *s, const par_proc_wait_opts *w, par_proc_result *r)
{
    memset(r, 0, sizeof *r);
    r->code = -1;
    par_proc p;
    PAR_TRY(par_proc_start(&p, s));
    return par_proc_wait(&p, w, r);
}

void par_proc_result_free(par_proc_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
}
