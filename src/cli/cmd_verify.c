// `parity verify SUITE [--out DIR]`: runs a verify suite (verify/suites/)
// through the harness (verify/harness/vf_harness.h): every config against the
// reference, MPFR checks, timings of what passed, table.md, table.csv,
// results.json, plots, and a signature when every verdict passed. Exit 0
// passed and signed, 1 a verdict failed (not signed), 2 usage or suite
// error, 3 runtime error. Tests: tests/verify/test_verify.sh.
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_sign.h"
#include "par_io.h"
#include "par_proc.h"
#include "vf_harness.h"
#include "vf_sign.h"

#ifndef PARITY_SOURCE_DIR
#define PARITY_SOURCE_DIR ""
#endif
#ifndef PARITY_C_COMPILER
#define PARITY_C_COMPILER "unknown"
#endif
#ifndef PARITY_C_FLAGS
#define PARITY_C_FLAGS "unknown"
#endif
#ifndef PARITY_BUILD_TYPE
#define PARITY_BUILD_TYPE "unknown"
#endif

static void fmt_time(char *buf, size_t n, double s)
{
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

// Elapsed time and "about M:SS left" (or none_yet when there is no estimate).
static void times_text(const vf_progress *p, char el[32], char left[48], const char *none_yet,
                       const char *sep)
{
    fmt_time(el, 32, p->elapsed_s);
    snprintf(left, 48, "%s", none_yet);
    if (p->left_s >= 0) {
        char t[32];
        fmt_time(t, sizeof t, p->left_s);
        snprintf(left, 48, "%sabout %s left", sep, t);
    }
}

// One status line on a terminal: case, task, elapsed and an estimate of the rest.
static void show_progress(void *ctx, const vf_progress *p)
{
    (void)ctx;
    char el[32], left[48];
    times_text(p, el, left, "estimating", "");
    fprintf(stderr, "\r\033[K[case %d/%d %s] %ld/%ld %s  (%s, %s)", p->i_case, p->n_cases,
            p->case_name, p->done + 1, p->total, p->what, el, left);
    fflush(stderr);
}

// Off a terminal (a log file, CI): one plain line per config, when the task's
// subject (the text before its first ':') changes, and one every *ctx
// seconds (--every) while a long task runs, so a log never goes quiet for long.
static void show_progress_plain(void *ctx, const vf_progress *p)
{
    const int every = *(const int *)ctx;
    static char last[320];
    static double last_at;
    char key[320];
    snprintf(key, sizeof key, "%d %s", p->i_case, p->what);
    key[strcspn(key, ":")] = '\0';
    if (p->running_s > 0 ? p->elapsed_s < last_at + every : strcmp(key, last) == 0) return;
    snprintf(last, sizeof last, "%s", key);
    last_at = p->elapsed_s;
    char el[32], left[48], still[64] = "";
    times_text(p, el, left, "", ", ");
    if (p->running_s > 0) {
        char t[32];
        fmt_time(t, sizeof t, p->running_s);
        snprintf(still, sizeof still, ", still running after %s", t);
    }
    fprintf(stderr, "parity verify: case %d/%d %s: task %ld/%ld %s (%s%s%s)\n", p->i_case,
            p->n_cases, p->case_name, p->done + 1, p->total, p->what, el, left, still);
    fflush(stderr);
}

// Ctrl-C or a kill: end the running child's process group (mpirun and its
// ranks run in their own session), then die of the same signal. With no
// child running (an external trainer's protocol runs in this process), only
// note it: the protocol ends its trainer and removes its folder, the harness
// starts nothing more, and run_suite dies of the signal once it returns. A
// second signal dies at once.
static volatile int stop_sig;

static void on_signal(int sig)
{
    const pid_t p = par_proc_running();
    if (p <= 0 && !stop_sig) {
        stop_sig = sig;
        return;
    }
    if (p > 0) kill(-p, SIGTERM);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

// Creates dir (and parents) if missing; fails if it holds anything.
static int prepare_out(const char *dir)
{
    if (strlen(dir) > 600) {
        fprintf(stderr, "parity verify: --out %.60s...: expected a path of at most 600 characters\n", dir);
        return EXIT_USAGE;
    }
    if (par_mkdirs(dir, 0755) != PAR_OK) {
        fprintf(stderr, "parity verify: --out: %s\n", par_last_error());
        return EXIT_RUNTIME;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "parity verify: cannot open --out %s: %s\n", dir, strerror(errno));
        return EXIT_RUNTIME;
    }
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = 0;
    closedir(d);
    if (!empty) {
        fprintf(stderr, "parity verify: --out %s is not empty\nhint: give a new folder (or leave "
                        "--out out: results/<time>-<suite>/)\n", dir);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

// The names of the suites in verify/suites/ of the source tree, comma-separated
// (quick, default and full first; then the others as the folder lists them, sorted).
static void suite_names(char *buf, size_t n)
{
    snprintf(buf, n, "quick, default, full");
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/verify/suites", PARITY_SOURCE_DIR);
    struct dirent **e = NULL;
    const int k = PARITY_SOURCE_DIR[0] ? scandir(dir, &e, NULL, alphasort) : -1;
    for (int i = 0; i < k; i++) {
        const char *f = e[i]->d_name;
        const int shown = strcmp(f, "quick") == 0 || strcmp(f, "default") == 0 ||
                          strcmp(f, "full") == 0;
        if (!shown && f[0] != '.' && !strchr(f, '.'))   // README.md, ., ..
            snprintf(buf + strlen(buf), n - strlen(buf), ", %s", f);
        free(e[i]);
    }
    free(e);
}

// The suite: a file, else a name under verify/suites/ of the source tree.
// 0, or the exit code (after one line when the suite is wrong).
static int load_suite(vf_suite **out, const char *name)
{
    char path[1024];
    vf_suite_path(path, sizeof path, name, PARITY_SOURCE_DIR);   // "" built without CMake
    vf_suite *s = *out = malloc(sizeof *s);
    if (!s) return EXIT_RUNTIME;
    if (vf_suite_load(s, path) == PAR_OK) return 0;
    fprintf(stderr, "parity verify: %s\n", s->error[0] ? s->error : cli_error_text());
    fprintf(stderr, "hint: the suite format is in verify/suites/README.md\n");
    free(s);
    *out = NULL;
    return EXIT_USAGE;
}

// The signing key (--key, else the default one), which must be there before
// hours of work; 0 or EXIT_USAGE after one line.
static int find_key(const char **key, char def[1024])
{
    if (!*key) {
        cli_default_key(def, 1024, 0);
        *key = def;
    }
    if (is_file(*key)) return 0;
    fprintf(stderr, "parity verify: no signing key %s\nhint: make one with 'parity table keygen'"
                    " (or give --key FILE)\n", (*key)[0] ? *key : "(HOME is not set)");
    return EXIT_USAGE;
}

// --out, else results/<UTC time>-<suite> (into def), made and checked empty.
static int make_out(const char **out, char def[1200], const char *suite_name)
{
    if (!*out) {
        char stamp[32];
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(def, 1200, "results/%s-%s", stamp, suite_name);
        *out = def;
    }
    return prepare_out(*out);
}

typedef struct verify_run {   // what run_suite needs besides the suite
    const char *out, *key;
    int timeout, quiet, every;
} verify_run;

// Writes the report of a finished suite (signed when every verdict passed);
// the exit code.
static int report(json_t *res, const char *out, const char *key)
{
    const int pass = vf_results_verdict(res) == PAR_OK;
    char why[600], note[1400];
    snprintf(why, sizeof why, "%s", json_string_value(json_object_get(res, "verdict_reason")));
    if (pass)
        snprintf(note, sizeof note, "signed, Ed25519 in the minisign format: `" CLI_SIG_NAME "` "
                 "(check with `parity table verify %s`)", out);
    else snprintf(note, sizeof note, "**NOT signed**: %s", why);
    const par_status st = vf_report_write(res, out, note);
    if (st != PAR_OK) {
        fprintf(stderr, "parity verify: %s\n", cli_error_text());
        return EXIT_RUNTIME;
    }
    printf("%s: %s\ntable: %s/table.md\n", pass ? "PASS" : "FAIL", why, out);
    if (!pass) {
        printf("not signed: a table is signed only when every verdict passed\n");
        return EXIT_VERIFY;
    }
    return cli_sign_dir("verify", out, key);
}

// Runs the suite through the harness, with progress on stderr; the exit code.
static int run_suite(int argc, char **argv, const vf_suite *s, const verify_run *v)
{
    char exe[4096], cmdline[4096] = "";
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "parity verify: cannot find its own executable\n");
        return EXIT_RUNTIME;
    }
    exe[n] = '\0';
    for (int i = 0; i < argc; i++) {
        const size_t used = strlen(cmdline);
        snprintf(cmdline + used, sizeof cmdline - used, "%s%s", i ? " " : "", argv[i]);
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int tty = isatty(STDERR_FILENO);
    const vf_run_opts ro = {
        .parity = exe, .out_dir = v->out,
        .build = {PARITY_SOURCE_DIR[0] ? PARITY_SOURCE_DIR : NULL, PARITY_C_COMPILER,
                  PARITY_C_FLAGS, PARITY_BUILD_TYPE, PARITY_MPIEXEC},
        .command_line = cmdline, .cores = cores > 0 ? (int)cores : 1,
        .timeout_s = v->timeout > 0 ? v->timeout : 3600, .interrupted = &stop_sig,
        .ctx = (void *)&v->every,
        .progress = v->quiet ? NULL : tty ? show_progress : show_progress_plain,
    };
    if (!v->quiet) {   // what the suite itself says of its time, before anything runs
        long runs, configs = 0;
        const double win = vf_suite_window_s(s, ro.cores, &runs);
        for (int i = 0; i < s->n_cases; i++) configs += s->cases[i].n_configs;
        char t[32];
        fmt_time(t, sizeof t, win);
        if (runs > 0)
            fprintf(stderr, "parity verify: suite %s: %d cases, %ld configs; its %ld timed runs "
                            "take about %s (their windows); the rest is estimated from the first "
                            "runs of each kind\n", s->name, s->n_cases, configs, runs, t);
        else
            fprintf(stderr, "parity verify: suite %s: %d cases, %ld configs; the time left is "
                            "estimated from the first runs of each kind\n", s->name, s->n_cases,
                    configs);
    }
    json_t *res = NULL;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    const par_status st = vf_run_suite(&res, s, &ro);
    if (tty && !v->quiet) fprintf(stderr, "\r\033[K");
    if (stop_sig) {   // everything it started has ended and cleaned up
        json_decref(res);
        signal(stop_sig, SIG_DFL);
        raise(stop_sig);
    }
    if (st != PAR_OK) {
        fprintf(stderr, "parity verify: %s\n", cli_error_text());
        if (strstr(par_last_error(), "fetch") || st == PAR_ERR_IO)
            fprintf(stderr, "hint: run data/fetch.sh (or ci/setup.sh) if a dataset is missing; "
                            "the run's logs are in %s/runs/\n", v->out);
        if (res) vf_results_save(res, v->out);
        json_decref(res);
        return st == PAR_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;
    }
    const int rc = report(res, v->out, v->key);
    json_decref(res);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    verify_run v = {.timeout = 3600, .every = 60};
    int help = 0;
    const cli_opt opts[] = {
        {"--out", CLI_STR, &v.out, "DIR       output folder, new or empty (results/<UTC time>-<suite>/)"},
        {"--key", CLI_STR, &v.key, "FILE      signing key (~/.config/parity/parity.key; make one with 'parity table keygen')"},
        {"--timeout", CLI_INT, &v.timeout, "S         limit of each run in seconds (3600)"},
        {"--every", CLI_INT, &v.every, "S         off a terminal: a 'still running' line every S s of a long task (60)"},
        {"--quiet", CLI_FLAG, &v.quiet, "          no progress (on a terminal a status line, off one a line per config)"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos, rc = cli_parse("verify", argc, argv, 2, opts, pos, 1, &n_pos);
    if (rc) return rc;
    char names[400], synopsis[600];
    suite_names(names, sizeof names);
    if (help) {
        snprintf(synopsis, sizeof synopsis, "parity verify SUITE [--out DIR] [--key FILE]\n\n"
                 "SUITE is a suite file, or the name of one in verify/suites/:\n  %s\n"
                 "Format and what each holds: verify/suites/README.md", names);
        cli_usage(synopsis, opts);
        return EXIT_OK;
    }
    if (v.every < 1) {
        fprintf(stderr, "parity verify: --every %d: expected seconds >= 1\n", v.every);
        return EXIT_USAGE;
    }
    if (n_pos != 1) {
        fprintf(stderr, "parity verify: expected one SUITE (a file, or one of %s)\n"
                        "hint: run 'parity verify --help'\n", names);
        return EXIT_USAGE;
    }
    vf_suite *s;
    if ((rc = load_suite(&s, pos[0]))) return rc;
    char def_key[1024], def_out[1200];
    rc = find_key(&v.key, def_key);
    if (!rc) rc = make_out(&v.out, def_out, s->name);
    if (!rc) rc = run_suite(argc, argv, s, &v);
    free(s);
    return rc;
}
