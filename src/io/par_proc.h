// Child processes, the one way the tree starts them: a program and its argv
// (never a shell string: nothing is quoted, globbed or redirected), stdin
// from /dev/null, stdout and stderr each to /dev/null, a file, a pipe or this
// process's own; optionally in a process group or session of its own, so a
// timeout or a signal reaches everything it started; waited for with a
// timeout, its exit status read as a shell reads it. Not a job controller:
// one caller waits for one child at a time. Tests: tests/unit/test_proc.c.
#ifndef PAR_PROC_H
#define PAR_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "par_status.h"

// ---- argument lists -------------------------------------------------------------------

// A growing argv: v[0..n) owned strings, v[n] NULL once anything was added.
// Zero-initialise; free with par_argv_free. Out of memory sets oom, and
// par_proc_start refuses the list.
typedef struct par_argv {
    char **v;
    int n, cap;
    int oom;
} par_argv;

// Appends one printf-formatted word (spaces in it stay in the word).
void par_argv_add(par_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Appends flag, then one printf-formatted word: its value.
void par_argv_opt(par_argv *a, const char *flag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Appends the words of s, split at blanks (spaces, tabs, newlines); no quoting.
void par_argv_words(par_argv *a, const char *s);

void par_argv_free(par_argv *a);

// ---- starting and waiting -------------------------------------------------------------

// Where a child's stdout or stderr goes.
typedef enum par_proc_io {
    PAR_PROC_DEVNULL = 0,   // /dev/null
    PAR_PROC_INHERIT,       // this process's own stream
    PAR_PROC_FILE,          // a file, created or truncated (mode 0644)
    PAR_PROC_PIPE,          // a pipe par_proc_wait reads while it waits
} par_proc_io;

// The process group a child runs in.
typedef enum par_proc_group {
    PAR_PROC_SAME_GROUP = 0,   // this process's: a terminal's Ctrl-C reaches both
    PAR_PROC_OWN_GROUP,        // its own (setpgid): par_proc_signal(.., 1) and a timeout
                               // reach what it starts; a terminal's Ctrl-C does not
    PAR_PROC_OWN_SESSION,      // its own session (setsid): as OWN_GROUP, and no
                               // controlling terminal
} par_proc_group;

typedef struct par_proc_spec {
    const char *const *argv;   // NULL-terminated; argv[0] a path, or a name looked up in PATH
    const char *const *env;    // "NAME=value" entries set over this process's environment
                               // (NULL-terminated; NULL: none)
    par_proc_io out, err;      // stdin is always /dev/null
    const char *out_path, *err_path;   // the files of PAR_PROC_FILE (one path for both:
                                       //   one file, the two streams interleaved)
    par_proc_group group;
    int die_with_parent;       // Linux: the child gets SIGTERM when this process dies
} par_proc_spec;

// A started child; the caller owns it until par_proc_wait has reaped it.
typedef struct par_proc {
    pid_t pid;          // > 0 from par_proc_start until par_proc_wait returns
    int own_group;      // its group is its own (the pid is the group's id)
    int fd[2];          // read ends of its stdout and stderr pipes (-1: none)
    double t_start;     // par_now() when it started
} par_proc;

// Starts s->argv[0]. PAR_ERR_IO with "cannot run PROGRAM: <reason>" when the
// program cannot be executed (not found, not executable) or a file cannot be
// opened; the child is then already reaped. stdio buffers are flushed first.
par_status par_proc_start(par_proc *p, const par_proc_spec *s);

// Sends sig to the child alone (whole_group 0) or to its process group
// (whole_group 1, when it has its own). 0, or -1 with errno.
int par_proc_signal(const par_proc *p, int sig, int whole_group);

typedef struct par_proc_wait_opts {
    // > 0: after this many seconds SIGTERM to the child's group (to the child
    // when it has none), SIGKILL 5 s later; the exit code is then 124.
    double timeout_s;
    // Called while waiting, at least every tick_s seconds apart (0: at every
    // wake-up, about every 50 ms and after a signal interrupted the wait).
    void (*on_tick)(void *ctx, const par_proc *p, double waited_s);
    double tick_s;
    // Called with what the child writes to a pipe (stream 1: stdout, 2:
    // stderr), as it comes. NULL: collected into the result's out and err.
    void (*on_output)(void *ctx, int stream, const char *buf, size_t n);
    void *ctx;
} par_proc_wait_opts;

typedef struct par_proc_result {
    int code;           // its exit status; 128 + N when signal N ended it; 124: timed out
    int signal;         // the signal that ended it (0: it exited)
    int timed_out;
    double wall_s;      // from the start until it was reaped
    char *out, *err;    // what its pipes carried (NUL-terminated; NULL: no pipe, or
    size_t out_len, err_len;   // on_output took it); free with par_proc_result_free
} par_proc_result;

// Waits until the child has ended (w NULL: no timeout, no callbacks),
// reading its pipes meanwhile; what a pipe holds when the child ends is read
// too. Closes the pipes; p->pid is 0 after. PAR_ERR_IO when waitpid fails.
par_status par_proc_wait(par_proc *p, const par_proc_wait_opts *w, par_proc_result *r);

// Whether the child has ended, without waiting: 1 (and *r filled as
// par_proc_wait fills it, no output; p->pid is 0 after) when it has, 0
// while it runs, -1 when there is no child or waitpid fails. For a child
// whose output goes to files or /dev/null (pipes want par_proc_wait).
int par_proc_poll(par_proc *p, par_proc_result *r);

// par_proc_start, then par_proc_wait.
par_status par_proc_run(const par_proc_spec *s, const par_proc_wait_opts *w,
                        par_proc_result *r);

void par_proc_result_free(par_proc_result *r);

// The child par_proc_wait is waiting for (0: none), for a signal handler that
// ends the child's group before this process exits.
pid_t par_proc_running(void);

#endif
