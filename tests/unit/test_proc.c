// The process layer (src/io/par_proc.h): argv passed word for word (no
// shell), exit codes and signals as a shell reports them, the timeout that
// ends a whole process group, files, pipes (more than a pipe holds), extra
// environment, exec failures named, and the wait's callbacks.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "par_proc.h"
#include "par_test.h"
#include "par_time.h"

// Runs argv with stdout (and stderr) into pipes; the result in *r.
static par_status run_piped(const char *const *argv, const char *const *env, double timeout_s,
                            par_proc_result *r)
{
    const par_proc_spec s = {.argv = argv, .env = env, .out = PAR_PROC_PIPE,
                             .err = PAR_PROC_PIPE, .group = PAR_PROC_OWN_GROUP};
    const par_proc_wait_opts w = {.timeout_s = timeout_s};
    return par_proc_run(&s, &w, r);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 4096);
    if (buf) fread(buf, 1, 4095, f);
    fclose(f);
    return buf;
}

static void test_argv(void)
{
    par_argv a = {0};
    par_argv_add(&a, "%s-%d", "x", 3);
    par_argv_words(&a, "  one\ttwo  three\n");
    par_argv_add(&a, "with space");
    par_argv_opt(&a, "--lr", "%.17g", 0.5);
    par_check(a.n == 7 && !a.oom && strcmp(a.v[0], "x-3") == 0 && strcmp(a.v[1], "one") == 0 &&
                  strcmp(a.v[2], "two") == 0 && strcmp(a.v[3], "three") == 0 &&
                  strcmp(a.v[4], "with space") == 0 && strcmp(a.v[5], "--lr") == 0 &&
                  strcmp(a.v[6], "0.5") == 0 && a.v[7] == NULL,
              "par_argv: a formatted word, blank-split words, a word with a space, a flag and "
              "its value, NULL last");
    par_argv_free(&a);
    par_check(a.n == 0 && a.v == NULL, "par_argv_free empties the list");

    // printf found on PATH; its arguments reach it as given: no shell.
    const char *argv[] = {"printf", "%s|", "a b", "c'd", "$HOME", "*", NULL};
    par_proc_result r;
    if (par_ran(run_piped(argv, NULL, 10, &r), "argv word for word"))
        par_check(r.code == 0 && r.out && strcmp(r.out, "a b|c'd|$HOME|*|") == 0,
                  "argv word for word: no quoting, no variables, no globbing");
    par_proc_result_free(&r);
}

static void test_status(void)
{
    par_proc_result r;
    const char *seven[] = {"/bin/sh", "-c", "exit 7", NULL};
    if (par_ran(run_piped(seven, NULL, 10, &r), "exit code"))
        par_check(r.code == 7 && r.signal == 0 && !r.timed_out, "exit 7: code 7, no signal");
    par_proc_result_free(&r);
    const char *term[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
    if (par_ran(run_piped(term, NULL, 10, &r), "killed by a signal"))
        par_check(r.code == 128 + SIGTERM && r.signal == SIGTERM,
                  "killed by SIGTERM: code 143, signal 15");
    par_proc_result_free(&r);
    const char *missing[] = {"/nonexistent/parity-test-prog", NULL};
    const par_status st = run_piped(missing, NULL, 10, &r);
    par_check(st == PAR_ERR_IO && strcmp(par_last_error(), "cannot run /nonexistent/parity-test-"
                                                          "prog: No such file or directory") == 0,
              "a program that cannot run: PAR_ERR_IO, named with the reason");
    par_proc_result_free(&r);
}

// The timeout ends the child and what it started (its process group).
static void test_timeout(void)
{
    par_proc_result r;
    const char *argv[] = {"/bin/sh", "-c", "sleep 30 & echo $!; wait", NULL};
    const double t0 = par_now();
    if (!par_ran(run_piped(argv, NULL, 0.5, &r), "timeout")) return;
    const double took = par_now() - t0;
    par_check(r.code == 124 && r.timed_out && took >= 0.5 && took < 5,
              "timeout 0.5 s: code 124, ended within SIGTERM's grace");
    const long child = r.out ? strtol(r.out, NULL, 10) : 0;
    int gone = 0;
    for (int i = 0; i < 100 && child > 0 && !gone; i++) {
        char path[64], state = 0;
        snprintf(path, sizeof path, "/proc/%ld/stat", child);
        FILE *f = fopen(path, "r");
        gone = !f || (fscanf(f, "%*d %*s %c", &state) == 1 && state == 'Z');
        if (f) fclose(f);
        if (!gone) nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    par_check(child > 0 && gone, "timeout: the child's own child (same group) ended too");
    par_proc_result_free(&r);
}

static void test_files_env(void)
{
    char out[] = "/tmp/par_proc_outXXXXXX", err[] = "/tmp/par_proc_errXXXXXX";
    const int fo = mkstemp(out), fe = mkstemp(err);
    if (fo >= 0) close(fo);
    if (fe >= 0) close(fe);
    setenv("PAR_PROC_OLD", "old", 1);
    const char *env[] = {"PAR_PROC_OLD=new", "PAR_PROC_NEW=x y", NULL};
    const char *argv[] = {"/bin/sh", "-c", "echo \"$PAR_PROC_OLD|$PAR_PROC_NEW\"; echo e >&2",
                          NULL};
    const par_proc_spec s = {.argv = argv, .env = env, .out = PAR_PROC_FILE, .out_path = out,
                             .err = PAR_PROC_FILE, .err_path = err,
                             .group = PAR_PROC_OWN_SESSION};
    par_proc_result r;
    if (par_ran(par_proc_run(&s, NULL, &r), "files and environment")) {
        char *o = slurp(out), *e = slurp(err);
        par_check(r.code == 0 && o && strcmp(o, "new|x y\n") == 0 && e && strcmp(e, "e\n") == 0,
                  "stdout and stderr to files; env entries set over the environment");
        par_check(r.out == NULL && r.err == NULL, "no pipes: nothing collected");
        free(o);
        free(e);
    }
    par_check(strcmp(getenv("PAR_PROC_OLD"), "old") == 0, "the parent's environment unchanged");
    par_proc_result_free(&r);
    unlink(out);
    unlink(err);
}

// One path for stdout and stderr: one file, both streams in it, in order;
// par_proc_poll says 0 while the child runs, then 1 with its status.
static void test_one_file_poll(void)
{
    char log[] = "/tmp/par_proc_logXXXXXX";
    const int fd = mkstemp(log);
    if (fd >= 0) close(fd);
    const char *argv[] = {"/bin/sh", "-c", "echo a; echo b >&2; echo c; sleep 0.3; exit 3", NULL};
    const par_proc_spec s = {.argv = argv, .out = PAR_PROC_FILE, .out_path = log,
                             .err = PAR_PROC_FILE, .err_path = log};
    par_proc p;
    par_proc_result r = {0};
    if (!par_ran(par_proc_start(&p, &s), "one file for both streams")) return;
    const int first = par_proc_poll(&p, &r);
    int ended = 0, polls = 0;
    while (!ended && polls++ < 500) {
        ended = par_proc_poll(&p, &r) == 1;
        if (!ended) nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    char *o = slurp(log);
    par_check(first == 0 && ended && r.code == 3 && r.signal == 0 && p.pid == 0,
              "par_proc_poll: 0 while it runs, then 1 with its exit status 3; pid cleared");
    par_check(o && strcmp(o, "a\nb\nc\n") == 0, "one path for stdout and stderr: a, b, c in order");
    par_check(par_proc_poll(&p, &r) == -1, "par_proc_poll after it ended: -1");
    free(o);
    unlink(log);
}

typedef struct seen {
    size_t bytes[3];
    int ticks;
    int running_was_child;
} seen;

static void on_output(void *ctx, int stream, const char *buf, size_t n)
{
    (void)buf;
    ((seen *)ctx)->bytes[stream] += n;
}

static void on_tick(void *ctx, const par_proc *p, double waited_s)
{
    (void)waited_s;
    seen *s = ctx;
    s->ticks++;
    s->running_was_child += par_proc_running() == p->pid;
}

static void test_pipes(void)
{
    // More than a pipe holds (64 KiB on Linux), on both streams.
    const char *argv[] = {"/bin/sh", "-c",
                          "head -c 200000 /dev/zero | tr '\\0' x; head -c 70000 /dev/zero >&2",
                          NULL};
    par_proc_result r;
    if (par_ran(run_piped(argv, NULL, 30, &r), "pipes collected")) {
        size_t xs = 0;
        for (size_t i = 0; r.out && i < r.out_len; i++) xs += r.out[i] == 'x';
        par_check(r.code == 0 && r.out_len == 200000 && xs == 200000 && r.err_len == 70000,
                  "pipes: 200000 bytes of stdout and 70000 of stderr collected whole");
    }
    par_proc_result_free(&r);

    const char *slow[] = {"/bin/sh", "-c", "echo abc; sleep 0.4; echo de >&2", NULL};
    const par_proc_spec s = {.argv = slow, .out = PAR_PROC_PIPE, .err = PAR_PROC_PIPE};
    seen sn = {{0}, 0, 0};
    const par_proc_wait_opts w = {.on_output = on_output, .on_tick = on_tick, .tick_s = 0.1,
                                  .ctx = &sn};
    if (par_ran(par_proc_run(&s, &w, &r), "callbacks")) {
        par_check(sn.bytes[1] == 4 && sn.bytes[2] == 3 && r.out == NULL && r.err == NULL,
                  "on_output: 4 bytes of stdout, 3 of stderr, nothing collected");
        par_check(sn.ticks >= 2 && sn.ticks <= 6 && sn.running_was_child == sn.ticks,
                  "on_tick: every 0.1 s of a 0.4 s wait, par_proc_running() the child");
    }
    par_check(par_proc_running() == 0, "par_proc_running: 0 once the wait is over");
    par_proc_result_free(&r);
}

// A signal to the group (a started child, stopped from outside its wait).
static void test_signal(void)
{
    const char *argv[] = {"sleep", "30", NULL};
    const par_proc_spec s = {.argv = argv, .group = PAR_PROC_OWN_GROUP};
    par_proc p;
    par_proc_result r;
    if (!par_ran(par_proc_start(&p, &s), "par_proc_signal")) return;
    par_check(par_proc_signal(&p, SIGINT, 1) == 0, "par_proc_signal to the group: sent");
    if (par_ran(par_proc_wait(&p, NULL, &r), "par_proc_signal wait"))
        par_check(r.code == 128 + SIGINT && r.signal == SIGINT && p.pid == 0,
                  "the group's SIGINT ended it: code 130; pid cleared");
    par_check(par_proc_signal(&p, SIGINT, 0) == -1 && errno == ESRCH,
              "par_proc_signal after the wait: ESRCH");
}

int main(void)
{
    test_argv();
    test_status();
    test_timeout();
    test_files_env();
    test_one_file_poll();
    test_pipes();
    test_signal();
    return par_test_exit();
}
