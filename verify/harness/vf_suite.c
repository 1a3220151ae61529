// Suite file parser: `[case NAME]` sections, `key = value` lines, `#`
// comments, comma-separated lists. Every mistake is reported as
// "SUITE:LINE: key 'x': what was expected". Format: verify/suites/README.md.
// Tests: tests/verify/test_verify.sh (suite errors).
#define _POSIX_C_SOURCE 200809L
#include "vf_suite.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "par_engine.h"
#include "par_hash.h"
#include "par_model.h"
#include "par_trainer.h"

typedef enum key_id {
    K_DATASET, K_MODEL, K_ACT, K_DTYPE, K_BATCH, K_CHUNK, K_STEPS, K_EPOCHS, K_LR, K_SEED,
    K_TRAINERS, K_MODES, K_THREADS, K_RANKS, K_REPEATS, K_WARMUP, K_CHECK_STEPS, K_FAULT,
    K_PREDICT, K_OPTIM, K_MOMENTUM, K_BETA1, K_BETA2, K_EPS, K_UPSCALE, K_WINDOW, K_PRECISION,
    K_CHECK_CONFIGS, K_EXTERNAL, K_COMMAND, K_WORLD, K_N
} key_id;

static const char *const KEY_NAMES[K_N] = {
    "dataset", "model", "act", "dtype", "batch", "chunk", "steps", "epochs", "lr", "seed",
    "trainers", "modes", "threads", "ranks", "repeats", "warmup", "check_steps", "fault",
    "predict", "optim", "momentum", "beta1", "beta2", "eps", "upscale", "window", "precision",
    "check_configs", "external", "command", "world",
};

__attribute__((format(printf, 4, 5)))
static par_status fail(vf_suite *s, int line, const char *key, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (key) snprintf(s->error, sizeof s->error, "%.300s:%d: key '%.40s': %.240s", s->path, line, key, what);
    else snprintf(s->error, sizeof s->error, "%.300s:%d: %.280s", s->path, line, what);
    return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "%s", s->error);
}

static char *trim(char *t)
{
    while (isspace((unsigned char)*t)) t++;
    size_t n = strlen(t);
    while (n > 0 && isspace((unsigned char)t[n - 1])) t[--n] = '\0';
    return t;
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

// Splits a comma-separated list in place; returns the count, -1 if an item
// is empty or there are more than max.
static int split(char *v, char **items, int max)
{
    int n = 0;
    for (char *p = v;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        char *it = trim(p);
        if (!*it || n == max) return -1;
        items[n++] = it;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

int vf_trainer_supports(const char *name, int threads, int ranks)
{
    const par_trainer_ops *t = par_trainer_find(name);
    if (!t || strcmp(name, "reference") == 0) return 0;
    return (threads == 1 || (t->caps & PAR_CAP_THREADS)) && (ranks == 1 || (t->caps & PAR_CAP_RANKS));
}

int vf_trainer_is_mpi(const char *name)
{
    const par_trainer_ops *t = par_trainer_find(name);
    return t && (t->caps & PAR_CAP_RANKS);
}

int vf_config_is_external(const vf_config *cf) { return strcmp(cf->trainer, VF_EXTERNAL) == 0; }

static void case_defaults(vf_case *c, const char *name, int line)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->line = line;
    strcpy(c->dataset, "fashion-mnist");
    strcpy(c->model, "mlp:784-256-128-10");
    strcpy(c->act, "relu");
    strcpy(c->dtype, "f32");
    c->batch = 64;
    c->chunk = 8;
    strcpy(c->optim, "sgd");
    c->momentum = c->beta1 = c->beta2 = c->eps = NAN;
    c->lr = 0.01;
    c->seed = 42;
    c->n_modes = 1;
    c->modes[0] = PAR_MODE_EXACT;
    c->n_threads = c->n_ranks = 1;
    c->threads[0] = c->ranks[0] = 1;
    c->repeats = 3;
    c->warmup = 1;
    c->window = 1.0;
    c->n_check_steps = 2;
    c->check_steps[0] = VF_STEP_FIRST;
    c->check_steps[1] = VF_STEP_LAST;
}

static par_status int_list(vf_suite *s, int line, const char *key, char *v, int *dst, int *n)
{
    char *items[VF_MAX_LIST + 1];
    int k = split(v, items, VF_MAX_LIST);
    if (k < 0) return fail(s, line, key, "expected a list of 1 to %d integers >= 1, comma-separated", VF_MAX_LIST);
    for (int i = 0; i < k; i++) {
        long x;
        if (!parse_long(items[i], 1, 1024, &x))
            return fail(s, line, key, "'%s': expected an integer from 1 to 1024", items[i]);
        dst[i] = (int)x;
    }
    *n = k;
    return PAR_OK;
}

// One `key = value` line of case c.
static par_status set_key(vf_suite *s, vf_case *c, key_id k, int line, char *v)
{
    const char *key = KEY_NAMES[k];
    long x;
    char *items[VF_MAX_LIST + 1];
    int n;
    switch (k) {
    case K_DATASET:
        if (strlen(v) >= sizeof c->dataset) return fail(s, line, key, "expected a name or a folder shorter than %zu characters", sizeof c->dataset);
        strcpy(c->dataset, v);
        return PAR_OK;
    case K_MODEL: {
        par_model m;
        if (strlen(v) >= sizeof c->model || par_model_parse(&m, v, PAR_ACT_RELU) != PAR_OK)
            return fail(s, line, key, "'%s': expected mlp:N0-N1-...-Nk or cnn:CxHxW-... (e.g. mlp:784-256-128-10)", v);
        strcpy(c->model, v);
        return PAR_OK;
    }
    case K_ACT: {
        par_act a;
        if (strlen(v) >= sizeof c->act || par_act_parse(&a, v) != PAR_OK)
            return fail(s, line, key, "'%s': expected relu, sigmoid or tanh", v);
        strcpy(c->act, v);
        return PAR_OK;
    }
    case K_DTYPE:
        if (strcmp(v, "f32") != 0 && strcmp(v, "f64") != 0)
            return fail(s, line, key, "'%s': expected f32 or f64", v);
        strcpy(c->dtype, v);
        return PAR_OK;
    case K_BATCH:
        if (strcmp(v, "full") == 0) {
            c->batch = 0;
            return PAR_OK;
        }
        if (!parse_long(v, 1, 1000000, &x))
            return fail(s, line, key, "'%s': expected an integer from 1 to 1000000 or full", v);
        c->batch = (int)x;
        return PAR_OK;
    case K_UPSCALE:
        if (!parse_long(v, 1, 1024, &x))
            return fail(s, line, key, "'%s': expected an image side from 1 to 1024 (28 -> 784 inputs, 57 -> 3249, 112 -> 12544)", v);
        c->upscale = (int)x;
        return PAR_OK;
    case K_OPTIM: {
        par_optim_kind o;
        if (strlen(v) >= sizeof c->optim || par_optim_parse(&o, v) != PAR_OK)
            return fail(s, line, key, "'%s': expected sgd, momentum, nesterov or adam", v);
        strcpy(c->optim, v);
        return PAR_OK;
    }
    case K_MOMENTUM:
    case K_BETA1:
    case K_BETA2:
    case K_EPS: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        const int ok = end != v && !*end && !errno && isfinite(d) && (k == K_EPS ? d > 0 : d >= 0 && d < 1);
        if (!ok) return fail(s, line, key, "'%s': expected %s", v, k == K_EPS ? "a finite number > 0" : "a number from 0 to below 1");
        *(k == K_MOMENTUM ? &c->momentum : k == K_BETA1 ? &c->beta1 : k == K_BETA2 ? &c->beta2 : &c->eps) = d;
        return PAR_OK;
    }
    case K_CHUNK:
    case K_EPOCHS:
        if (!parse_long(v, 1, 1000000, &x))
            return fail(s, line, key, "'%s': expected an integer from 1 to 1000000", v);
        if (k == K_CHUNK) c->chunk = (int)x;
        else c->epochs = (int)x;
        return PAR_OK;
    case K_STEPS:
        if (!parse_long(v, 1, 100000000, &x))
            return fail(s, line, key, "'%s': expected an integer from 1 to 100000000", v);
        c->steps = x;
        return PAR_OK;
    case K_REPEATS:
    case K_WARMUP:
        if (!parse_long(v, 0, 1000, &x))
            return fail(s, line, key, "'%s': expected an integer from 0 to 1000", v);
        if (k == K_REPEATS) c->repeats = (int)x;
        else c->warmup = (int)x;
        return PAR_OK;
    case K_WINDOW: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (end == v || *end || errno || !(d >= 0 && d <= 600))
            return fail(s, line, key, "'%s': expected seconds from 0 to 600 (0: the case's steps)",
                        v);
        c->window = d;
        return PAR_OK;
    }
    case K_CHECK_CONFIGS:
        if (strcmp(v, "all") != 0 && strcmp(v, "fast") != 0)
            return fail(s, line, key, "'%s': expected all (the reference and every config) or "
                        "fast (the reference and the fast configs; an exact config inherits "
                        "the reference's checks, whose bits it has)", v);
        c->check_fast_only = strcmp(v, "fast") == 0;
        return PAR_OK;
    case K_PRECISION: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (end == v || *end || errno || !(d >= 0 && d <= 1))
            return fail(s, line, key, "'%s': expected a relative half-width from 0 to 1 (e.g. "
                        "0.05; 0: every round runs)", v);
        c->precision = d;
        return PAR_OK;
    }
    case K_LR: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(d) || !(d > 0))
            return fail(s, line, key, "'%s': expected a finite number > 0", v);
        c->lr = d;
        return PAR_OK;
    }
    case K_SEED: {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 10);
        if (v[0] == '-' || end == v || *end || errno)
            return fail(s, line, key, "'%s': expected a non-negative integer", v);
        c->seed = u;
        return PAR_OK;
    }
    case K_TRAINERS:
        n = split(v, items, VF_MAX_LIST);
        if (n < 0) return fail(s, line, key, "expected a comma-separated list of trainers (serial, omp, mpi, hybrid, root)");
        for (int i = 0; i < n; i++) {
            if (strcmp(items[i], "reference") == 0)
                return fail(s, line, key, "'reference' is always run as the baseline: list serial, omp, mpi, hybrid or root");
            if (!par_trainer_find(items[i]) || strlen(items[i]) >= sizeof c->trainers[0]) {
                char avail[200] = "";
                for (int t = 0; par_trainers[t]; t++)
                    if (strcmp(par_trainers[t]->name, "reference") != 0) {
                        strcat(avail, avail[0] ? ", " : "");
                        strcat(avail, par_trainers[t]->name);
                    }
                return fail(s, line, key, "'%s': expected one of %s (the trainers of this build)", items[i], avail);
            }
            strcpy(c->trainers[i], items[i]);
        }
        c->n_trainers = n;
        return PAR_OK;
    case K_MODES:
        n = split(v, items, VF_MAX_LIST);
        if (n < 0) return fail(s, line, key, "expected exact, fast or both, comma-separated");
        for (int i = 0; i < n; i++) {
            par_mode mode;
            if (par_mode_parse(&mode, items[i]) != PAR_OK)
                return fail(s, line, key, "'%s': expected exact or fast", items[i]);
            c->modes[i] = (int)mode;
        }
        c->n_modes = n;
        return PAR_OK;
    case K_THREADS:
        return int_list(s, line, key, v, c->threads, &c->n_threads);
    case K_RANKS:
        return int_list(s, line, key, v, c->ranks, &c->n_ranks);
    case K_PREDICT:
        return int_list(s, line, key, v, c->predict, &c->n_predict);
    case K_CHECK_STEPS:
        if (strcmp(v, "none") == 0) {   // no MPFR check: the table says "not covered"
            c->n_check_steps = 0;
            return PAR_OK;
        }
        n = split(v, items, VF_MAX_CHECKS);
        if (n < 0) return fail(s, line, key, "expected none or a list of 1 to %d steps (numbers >= 1, first, last), comma-separated", VF_MAX_CHECKS);
        for (int i = 0; i < n; i++) {
            if (strcmp(items[i], "first") == 0) c->check_steps[i] = VF_STEP_FIRST;
            else if (strcmp(items[i], "last") == 0) c->check_steps[i] = VF_STEP_LAST;
            else if (parse_long(items[i], 1, 100000000, &x)) c->check_steps[i] = x;
            else return fail(s, line, key, "'%s': expected a step number >= 1, first or last (or none alone)", items[i]);
        }
        c->n_check_steps = n;
        return PAR_OK;
    case K_EXTERNAL: {
        int ok = strlen(v) < sizeof c->external;
        for (const char *p = v; ok && *p; p++)
            ok = isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.';
        if (!ok)
            return fail(s, line, key, "'%s': expected a label of letters, digits, '-', '_', '.' "
                        "(at most %zu; e.g. my-ddp)", v, sizeof c->external - 1);
        strcpy(c->external, v);
        return PAR_OK;
    }
    case K_COMMAND:
        if (strlen(v) >= sizeof c->command)
            return fail(s, line, key, "expected a command line shorter than %zu characters",
                        sizeof c->command);
        strcpy(c->command, v);
        return PAR_OK;
    case K_WORLD:
        return int_list(s, line, key, v, c->ranks, &c->n_ranks);
    case K_FAULT: {
        par_fault f;
        if (strlen(v) >= sizeof c->fault || par_fault_parse(&f, v) != PAR_OK)
            return fail(s, line, key, "'%s': expected ulp:STEP:INDEX, skip:STEP:LAYER:SAMPLE, half:STEP:LAYER or swap:STEP:LAYER (tests only)", v);
        strcpy(c->fault, v);
        return PAR_OK;
    }
    case K_N:
        break;
    }
    return PAR_OK;
}

// An external case's configs, one per world count (in c->ranks), after its
// own checks: a command, none of the keys of parity's own trainers.
static par_status external_configs(vf_suite *s, vf_case *c, const int *seen)
{
    static const key_id own[] = {K_TRAINERS, K_MODES, K_THREADS, K_RANKS, K_FAULT, K_PREDICT,
                                 K_UPSCALE, K_CHECK_CONFIGS};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (seen[own[i]])
            return fail(s, seen[own[i]], KEY_NAMES[own[i]], "not with external = %s (line %d): "
                        "an external case runs its command at each world, not parity's trainers",
                        c->external, seen[K_EXTERNAL]);
    if (!seen[K_COMMAND])
        return fail(s, c->line, "command", "missing in [case %s]: external = %s needs the "
                    "trainer's command line ({world} for its process count)", c->name,
                    c->external);
    if (c->n_ranks > 1 && !strstr(c->command, "{world}"))
        return fail(s, seen[K_COMMAND], "command", "has no {world}, so each of the %d world "
                    "counts would run the same command", c->n_ranks);
    c->n_configs = 0;
    for (int r = 0; r < c->n_ranks; r++) {
        const vf_config cf = {VF_EXTERNAL, PAR_MODE_EXACT, 1, c->ranks[r]};
        int dup = 0;
        for (int k = 0; k < c->n_configs && !dup; k++) dup = c->configs[k].ranks == cf.ranks;
        if (!dup) c->configs[c->n_configs++] = cf;
    }
    return PAR_OK;
}

// Checks a finished case and expands its configs. set[k]: the line that set
// key k (negative: the [defaults] section's line), 0 when none did.
static par_status finish_case(vf_suite *s, vf_case *c, const int *set)
{
    int seen[K_N];
    for (int k = 0; k < K_N; k++) seen[k] = abs(set[k]);
    if (seen[K_COMMAND] && !seen[K_EXTERNAL])
        return fail(s, seen[K_COMMAND], "command", "goes with external = NAME (the label of the "
                    "trainer it runs)");
    if (seen[K_WORLD] && !seen[K_EXTERNAL])
        return fail(s, seen[K_WORLD], "world", "goes with external = NAME and command (use "
                    "ranks for parity's own trainers)");
    if (!seen[K_TRAINERS] && !seen[K_EXTERNAL])
        return fail(s, c->line, "trainers", "missing in [case %s] (e.g. trainers = serial, omp)", c->name);
    if (!seen[K_STEPS] && !seen[K_EPOCHS])
        return fail(s, c->line, "steps", "missing in [case %s]: give steps or epochs", c->name);
    if (seen[K_STEPS] && seen[K_EPOCHS])
        return fail(s, seen[K_EPOCHS], "epochs", "give steps or epochs, not both (steps is on line %d)", seen[K_STEPS]);
    const int mom = strcmp(c->optim, "momentum") == 0 || strcmp(c->optim, "nesterov") == 0;
    const int adam = strcmp(c->optim, "adam") == 0;
    if (seen[K_MOMENTUM] && !mom)
        return fail(s, seen[K_MOMENTUM], "momentum", "goes with optim = momentum or nesterov (optim is %s)", c->optim);
    for (int k = K_BETA1; k <= K_EPS; k++)
        if (seen[k] && !adam)
            return fail(s, seen[k], KEY_NAMES[k], "goes with optim = adam (optim is %s)", c->optim);
    if (seen[K_PREDICT] && (c->upscale > 0 || c->batch == 0 || strcmp(c->optim, "sgd") != 0))
        return fail(s, seen[K_PREDICT], "predict", "the scaling model (parity model) predicts SGD steps of a "
                    "numbered batch on the dataset's own images, this case has %s",
                    c->upscale > 0 ? "upscale" : c->batch == 0 ? "batch = full" : "optim other than sgd");
    if (c->batch > 0 && c->chunk > c->batch)
        return fail(s, seen[K_CHUNK] ? seen[K_CHUNK] : c->line, "chunk", "%d: expected at most batch (%d)", c->chunk, c->batch);
    for (int i = 0; i < c->n_check_steps; i++)
        if (c->steps > 0 && c->check_steps[i] > c->steps)
            return fail(s, seen[K_CHECK_STEPS], "check_steps", "%ld: expected a step from 1 to steps (%ld)", c->check_steps[i], c->steps);
    if (seen[K_EXTERNAL]) return external_configs(s, c, seen);
    c->n_configs = 0;
    for (int t = 0; t < c->n_trainers; t++)
        for (int m = 0; m < c->n_modes; m++)
            for (int r = 0; r < c->n_ranks; r++)
                for (int h = 0; h < c->n_threads; h++) {
                    vf_config cf = {"", c->modes[m], c->threads[h], c->ranks[r]};
                    strcpy(cf.trainer, c->trainers[t]);
                    if (!vf_trainer_supports(cf.trainer, cf.threads, cf.ranks)) continue;
                    int dup = 0;
                    for (int k = 0; k < c->n_configs && !dup; k++)
                        dup = memcmp(&c->configs[k], &cf, sizeof cf) == 0;
                    if (dup) continue;
                    if (c->n_configs == VF_MAX_CONFIGS)
                        return fail(s, c->line, "trainers", "[case %s] expands to more than %d configs", c->name, VF_MAX_CONFIGS);
                    c->configs[c->n_configs++] = cf;
                }
    if (c->n_configs == 0)
        return fail(s, seen[K_TRAINERS], "trainers", "no trainer of [case %s] runs with these threads and ranks "
                    "(serial: T=1,R=1; omp: R=1; mpi: T=1; hybrid, root: any)", c->name);
    return PAR_OK;
}

// The keys of the [defaults] section, kept as written: every case starts
// from them, then its own keys (a case may set a key [defaults] set).
typedef struct defaults {
    int n;
    int line[K_N];
    key_id key[K_N];
    char val[K_N][4096];
} defaults;

// A new case: the built-in defaults, then the [defaults] section's keys
// (seen[] holds their lines, negative: set by [defaults], not the case).
static par_status start_case(vf_suite *s, vf_case *c, const char *name, int line,
                             const defaults *d, int *seen)
{
    case_defaults(c, name, line);
    memset(seen, 0, K_N * sizeof *seen);
    for (int i = 0; i < d->n; i++) {
        char v[4096];
        snprintf(v, sizeof v, "%s", d->val[i]);
        PAR_TRY(set_key(s, c, d->key[i], d->line[i], v));
        seen[d->key[i]] = -d->line[i];
    }
    return PAR_OK;
}

// A section header: [case NAME] (the case before it finished) or
// [defaults] (once, before every case).
static par_status section(vf_suite *s, char *t, int line, vf_case **c, int *seen,
                          defaults *d, int *in_defaults, int (*named)[2])
{
    size_t n = strlen(t);
    if (strcmp(t, "[defaults]") == 0) {
        if (*c || *in_defaults)
            return fail(s, line, NULL, "[defaults]: expected once, before the first [case NAME]");
        *in_defaults = 1;
        memset(seen, 0, K_N * sizeof *seen);
        return PAR_OK;
    }
    if (t[n - 1] != ']' || strncmp(t, "[case ", 6) != 0)
        return fail(s, line, NULL, "'%s': expected a section header [case NAME] or [defaults]", t);
    t[n - 1] = '\0';
    char name[128];
    snprintf(name, sizeof name, "%s", trim(t + 6));
    int ok = name[0] != '\0' && strlen(name) < sizeof (*c)->name;
    for (const char *p = name; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.';
    if (!ok)
        return fail(s, line, NULL, "[case %s]: expected a NAME of letters, digits, '-', '_', '.' "
                    "(at most 63)", name);
    if (*c) PAR_TRY(finish_case(s, *c, seen));
    for (int i = 0; i < s->n_cases; i++)
        if (strcmp(s->cases[i].name, name) == 0)
            return fail(s, line, NULL, "[case %s]: duplicate case name (first on line %d)", name,
                        s->cases[i].line);
    if (s->n_cases == VF_MAX_CASES) return fail(s, line, NULL, "more than %d cases", VF_MAX_CASES);
    *in_defaults = 0;
    *c = &s->cases[s->n_cases++];
    PAR_TRY(start_case(s, *c, name, line, d, seen));
    for (int i = 0; i < d->n; i++) {
        named[*c - s->cases][0] |= d->key[i] == K_MODEL;
        named[*c - s->cases][1] |= d->key[i] == K_DATASET;
    }
    return PAR_OK;
}

// A case that sets no model (or dataset) while another does runs the
// built-in default under a name that may say otherwise: refused, naming
// both cases. [defaults] counts as setting it for every case.
static par_status check_named(vf_suite *s, const int (*set)[2])
{
    static const char *const what[2] = {"model", "dataset"};
    for (int k = 0; k < 2; k++) {
        int by = -1;
        for (int i = 0; i < s->n_cases && by < 0; i++)
            if (set[i][k]) by = i;
        for (int i = 0; by >= 0 && i < s->n_cases; i++)
            if (!set[i][k])
                return fail(s, s->cases[i].line, what[k], "missing in [case %s] while [case %s] "
                            "sets it (%s = %s): set it here too, or in a [defaults] section for "
                            "every case", s->cases[i].name, s->cases[by].name, what[k],
                            k ? s->cases[by].dataset : s->cases[by].model);
    }
    return PAR_OK;
}

static par_status parse(vf_suite *s, FILE *f)
{
    char buf[4096];
    int line = 0, seen[K_N] = {0}, in_defaults = 0;
    int (*named)[2] = calloc(VF_MAX_CASES, sizeof *named);   // case i sets model, dataset
    defaults *d = calloc(1, sizeof *d);
    par_status st = named && d ? PAR_OK : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__,
                                                       "out of memory");
    vf_case *c = NULL;
    while (st == PAR_OK && fgets(buf, sizeof buf, f)) {
        line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            st = fail(s, line, NULL, "line longer than %zu characters", sizeof buf - 2);
            break;
        }
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *t = trim(buf);
        if (!*t) continue;
        if (*t == '[') {
            st = section(s, t, line, &c, seen, d, &in_defaults, named);
            continue;
        }
        char *eq = strchr(t, '=');
        if (!eq) {
            st = fail(s, line, NULL, "'%s': expected 'key = value', '[case NAME]', '[defaults]' "
                      "or a # comment", t);
            break;
        }
        *eq = '\0';
        char *key = trim(t), *val = trim(eq + 1);
        int k = 0;
        while (k < K_N && strcmp(KEY_NAMES[k], key) != 0) k++;
        if (k == K_N) {
            char names[400] = "";
            for (int i = 0; i < K_N; i++) {
                strcat(names, i ? ", " : "");
                strcat(names, KEY_NAMES[i]);
            }
            st = fail(s, line, key, "unknown key (expected one of %s)", names);
        } else if (!c && !in_defaults) {
            st = fail(s, line, key, "outside a section: put it under a [case NAME] header (or "
                      "[defaults], for every case)");
        } else if (seen[k] > 0) {
            st = fail(s, line, key, "duplicate key in %s%s%s (first set on line %d)",
                      in_defaults ? "[defaults" : "[case ", in_defaults ? "" : c->name, "]",
                      seen[k]);
        } else if (!*val) {
            st = fail(s, line, key, "empty value");
        } else if (in_defaults && (k == K_TRAINERS || k == K_FAULT || k == K_EXTERNAL ||
                                   k == K_COMMAND || k == K_WORLD)) {
            st = fail(s, line, key, "belongs to a case, not to [defaults]");
        } else if (in_defaults) {
            // Checked now, on a scratch case, so a bad value is reported at its line.
            vf_case scratch;
            case_defaults(&scratch, "defaults", line);
            char v[4096];
            snprintf(v, sizeof v, "%s", val);
            seen[k] = line;
            st = set_key(s, &scratch, (key_id)k, line, v);
            d->line[d->n] = line;
            d->key[d->n] = (key_id)k;
            snprintf(d->val[d->n++], sizeof d->val[0], "%s", val);
        } else {
            if ((k == K_STEPS || k == K_EPOCHS) && seen[K_STEPS] <= 0 && seen[K_EPOCHS] <= 0) {
                seen[K_STEPS] = seen[K_EPOCHS] = 0;   // the case's length replaces [defaults]'
                c->steps = 0;
                c->epochs = 0;
            }
            seen[k] = line;
            named[c - s->cases][0] |= k == K_MODEL;
            named[c - s->cases][1] |= k == K_DATASET;
            st = set_key(s, c, (key_id)k, line, val);
        }
    }
    if (st == PAR_OK && ferror(f))
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot read suite %s", s->path);
    if (st == PAR_OK && !c)
        st = fail(s, line > 0 ? line : 1, NULL, "no [case NAME] section: a suite needs at least "
                  "one case");
    if (st == PAR_OK) st = finish_case(s, c, seen);
    if (st == PAR_OK) st = check_named(s, (const int(*)[2])named);
    free(named);
    free(d);
    return st;
}

par_status vf_suite_load(vf_suite *s, const char *path)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    const char *base = strrchr(path, '/');
    snprintf(s->name, sizeof s->name, "%s", base ? base + 1 : path);
    FILE *f = fopen(path, "r");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open suite %s: %s", path, strerror(errno));
    par_status st = parse(s, f);
    fclose(f);
    if (st == PAR_OK) st = par_sha256_file(s->sha256, path);
    return st;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

void vf_suite_path(char *path, size_t n, const char *name, const char *src_dir)
{
    snprintf(path, n, "%s", name);
    if (is_file(path) || strchr(name, '/') || !src_dir || !src_dir[0]) return;
    snprintf(path, n, "%s/verify/suites/%s", src_dir, name);
    if (!is_file(path)) snprintf(path, n, "%s", name);
}
