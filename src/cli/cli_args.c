// Flag parsing for all subcommands: "--name value" or "--name=value"; an
// unknown flag is answered with the nearest known one (cli_nearest). Not the
// checks of the values' meaning (each command's). Tests: tests/cli/test_cli.sh,
// tests/cli/test_first_hour.sh.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int bad(const char *cmd, const char *flag, const char *val, const char *expected)
{
    fprintf(stderr, "parity %s: %s '%s': expected %s\n", cmd, flag, val, expected);
    fprintf(stderr, "hint: run 'parity %s --help' for the list of flags\n", cmd);
    return EXIT_USAGE;
}

static int set_value(const char *cmd, const cli_opt *o, const char *val)
{
    char *end;
    errno = 0;
    switch (o->kind) {
    case CLI_STR:
        *(const char **)o->dst = val;
        return 0;
    case CLI_INT:
    case CLI_LONG:
    case CLI_SIZE: {
        long v = strtol(val, &end, 10);
        if (end == val || *end || errno || v < 0 || v > 1000000000L)
            return bad(cmd, o->name, val, "a non-negative integer");
        if (o->kind == CLI_INT) *(int *)o->dst = (int)v;
        else if (o->kind == CLI_LONG) *(long *)o->dst = v;
        else *(size_t *)o->dst = (size_t)v;
        return 0;
    }
    case CLI_U64: {
        if (val[0] == '-') return bad(cmd, o->name, val, "a non-negative integer");
        unsigned long long v = strtoull(val, &end, 10);
        if (end == val || *end || errno) return bad(cmd, o->name, val, "a non-negative integer");
        *(uint64_t *)o->dst = v;
        return 0;
    }
    case CLI_DOUBLE: {
        double v = strtod(val, &end);
        if (end == val || *end || errno || !(v == v) || v > 1e300 || v < -1e300)
            return bad(cmd, o->name, val, "a finite number");
        *(double *)o->dst = v;
        return 0;
    }
    case CLI_FLAG:
        break;
    }
    return 0;
}

// Edit distance of a[0..na) and b[0..nb), nb < 64 (longer: na + nb): insertions,
// deletions, substitutions and swaps of two neighbours ("--kye" is 1 from "--key").
static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    size_t r0[64], r1[64], r2[64];   // rows i - 2, i - 1, i
    size_t *pp = r0, *p = r1, *c = r2;
    if (nb >= 64) return na + nb;
    for (size_t j = 0; j <= nb; j++) p[j] = j;
    for (size_t i = 1; i <= na; i++) {
        c[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t d = p[j - 1] + (a[i - 1] != b[j - 1]);
            if (p[j] + 1 < d) d = p[j] + 1;
            if (c[j - 1] + 1 < d) d = c[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1;
            c[j] = d;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    return p[nb];
}

const char *cli_nearest(const char *word, size_t len, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = 0;
    for (size_t k = 0; k < n; k++) {
        const size_t d = edit_distance(word, len, names[k], strlen(names[k]));
        if (!best || d < best_d) {
            best = names[k];
            best_d = d;
        }
    }
    // A suggestion only when it is near: at most a third of the word's length
    // past a leading "--" (at least 1, at most 3) edits, not a guess at an
    // unrelated name.
    size_t limit = (len > 2 && word[0] == '-' && word[1] == '-' ? len - 2 : len) / 3;
    limit = limit < 1 ? 1 : limit > 3 ? 3 : limit;
    return best && best_d <= limit ? best : NULL;
}

// "parity CMD: unknown flag '--x'" and the nearest flag of opts, if one is near.
static int unknown_flag(const char *cmd, const char *a, size_t len, const cli_opt *opts)
{
    const char *names[128];
    size_t n = 0;
    for (int k = 0; opts[k].name && n < sizeof names / sizeof names[0]; k++)
        names[n++] = opts[k].name;
    const char *near = cli_nearest(a, len, names, n);
    if (near)
        fprintf(stderr, "parity %s: unknown flag '%.*s'; did you mean %s?\n", cmd, (int)len, a,
                near);
    else
        fprintf(stderr, "parity %s: unknown flag '%.*s'\n", cmd, (int)len, a);
    fprintf(stderr, "hint: run 'parity %s --help' for the list of flags\n", cmd);
    return EXIT_USAGE;
}

int cli_parse(const char *cmd, int argc, char **argv, int first, const cli_opt *opts,
              const char **pos, int max_pos, int *n_pos)
{
    *n_pos = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0) {
            // -h: --help, where the command has it
            const cli_opt *h = NULL;
            for (int k = 0; opts[k].name; k++)
                if (strcmp(opts[k].name, "--help") == 0 && opts[k].kind == CLI_FLAG) h = &opts[k];
            if (h) {
                *(int *)h->dst = 1;
                continue;
            }
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (*n_pos >= max_pos) {
                fprintf(stderr, "parity %s: unexpected argument '%s'\n", cmd, a);
                fprintf(stderr, "hint: run 'parity %s --help'\n", cmd);
                return EXIT_USAGE;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        const size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = NULL;
        for (int k = 0; opts[k].name; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, a, len) == 0) o = &opts[k];
        if (!o) return unknown_flag(cmd, a, len, opts);
        if (o->kind == CLI_FLAG) {
            if (eq) return bad(cmd, o->name, eq + 1, "no value (it is a switch)");
            *(int *)o->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            fprintf(stderr, "parity %s: %s needs a value\n", cmd, o->name);
            fprintf(stderr, "hint: run 'parity %s --help'\n", cmd);
            return EXIT_USAGE;
        }
        int rc = set_value(cmd, o, val);
        if (rc) return rc;
    }
    return 0;
}

int cli_flags(const char *cmd, int argc, char **argv, const cli_opt *opts, const int *help,
              const char *synopsis)
{
    const char *pos[1];
    int n_pos;
    const int rc = cli_parse(cmd, argc, argv, 2, opts, pos, 0, &n_pos);
    if (rc) return rc;
    if (!*help) return -1;
    cli_usage(synopsis, opts);
    return EXIT_OK;
}

void cli_usage(const char *synopsis, const cli_opt *opts)
{
    printf("usage: %s\n\n", synopsis);
    int fault = 0;
    for (int k = 0; opts[k].name; k++) {
        printf("  %-16s %s\n", opts[k].name, opts[k].help);
        fault |= strcmp(opts[k].name, "--fault") == 0;
    }
    if (fault)
        printf("\n--fault SPEC (tests only; engine trainers serial, omp, mpi, hybrid, root; cuda\n"
               "ulp and obeta; never the reference), STEP counted from 1 (0: every step):\n"
               "  ulp:STEP:INDEX           gradient element INDEX of the batch gradient + 1 ulp\n"
               "  skip:STEP:LAYER:SAMPLE   LAYER's weight gradient ignores batch sample SAMPLE\n"
               "  half:STEP:LAYER          LAYER's forward outputs rounded to 11 significant bits\n"
               "  swap:STEP:LAYER          LAYER folds its chunk gradients out of order\n"
               "  bnswap:STEP:LAYER        batchnorm LAYER folds its statistics out of order\n"
               "  bnvar:STEP:LAYER:CHANNEL batchnorm LAYER's variance of CHANNEL + 1 ulp\n"
               "  obeta:STEP               the optimizer uses mu (or adam's beta1) + 2^-10\n"
               "  oswap:STEP               the optimizer's weight step before its state update\n"
               "e.g. --fault ulp:3:100, --fault skip:2:0:5, --fault half:4:1, --fault swap:2:1\n");
}

const char *cli_error_text(void)
{
    static char buf[640];
    const char *msg = par_last_error(), *at = par_last_error_origin();
    const char *dbg = getenv("PARITY_DEBUG");
    if (!at[0] || !dbg || strcmp(dbg, "1") != 0) return msg;
    snprintf(buf, sizeof buf, "%s: %s", at, msg);
    return buf;
}

int cli_fail(const char *cmd, par_status st, const char *hint)
{
    const char *msg = cli_error_text();
    fprintf(stderr, "parity %s: %s\n", cmd, msg[0] ? msg : par_status_str(st));
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    return st == PAR_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;
}

int cli_optim_resolve(const char *cmd, const cli_optim_flags *f, par_optim *out)
{
    par_optim_kind kind;
    if (par_optim_parse(&kind, f->name) != PAR_OK) {
        fprintf(stderr, "parity %s: --optim '%s': expected sgd, momentum, nesterov or adam\n", cmd,
                f->name);
        return EXIT_USAGE;
    }
    *out = par_optim_default(kind);
    const int mom = kind == PAR_OPTIM_MOMENTUM || kind == PAR_OPTIM_NESTEROV;
    const int adam = kind == PAR_OPTIM_ADAM;
    const struct {
        const char *flag;
        double v;
        int applies;
        double *dst;
        int ok;
    } hp[] = {
        {"--momentum", f->momentum, mom, &out->momentum, f->momentum >= 0 && f->momentum < 1},
        {"--beta1", f->beta1, adam, &out->beta1, f->beta1 >= 0 && f->beta1 < 1},
        {"--beta2", f->beta2, adam, &out->beta2, f->beta2 >= 0 && f->beta2 < 1},
        {"--eps", f->eps, adam, &out->eps, f->eps > 0 && isfinite(f->eps)},
    };
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        if (isnan(hp[i].v)) continue;   // not given: the default
        if (!hp[i].applies) {
            fprintf(stderr, "parity %s: %s does not apply to --optim %s\n", cmd, hp[i].flag,
                    f->name);
            fprintf(stderr, "hint: --momentum goes with momentum or nesterov; --beta1, --beta2 "
                            "and --eps with adam\n");
            return EXIT_USAGE;
        }
        if (!hp[i].ok) {
            fprintf(stderr, "parity %s: %s %g: expected %s\n", cmd, hp[i].flag, hp[i].v,
                    i == 3 ? "a finite number > 0" : "a number in [0, 1)");
            return EXIT_USAGE;
        }
        *hp[i].dst = hp[i].v;
    }
    return 0;
}

int cli_batch_parse(const char *cmd, const char *s, int *batch, int *full)
{
    *full = strcmp(s, "full") == 0;
    if (*full) {
        *batch = 1;   // the training split's size, once the dataset is open
        return 0;
    }
    char *end = NULL;
    errno = 0;
    const long b = strtol(s, &end, 10);
    if (s[0] == '-' || end == s || *end || errno || b > 1000000000) {
        fprintf(stderr, "parity %s: --batch '%s': expected a non-negative integer or 'full'\n",
                cmd, s);
        return EXIT_USAGE;
    }
    *batch = (int)b;
    return 0;
}
