// The checks `parity table sign` and `parity table verify` make on a results
// folder (vf_harness.h): every verdict in results.json passed, and the
// files it names have the SHA-256 it records. Tests: tests/test_verify.sh.
#define _POSIX_C_SOURCE 200809L
#include "vf_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "par_hash.h"
#include "vf_report_json.h"

// ---- checks of a results folder -----------------------------------------------------------

__attribute__((format(printf, 1, 2)))
static par_status bad(const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return par_set_error(PAR_ERR_NUMERIC, __FILE__, __LINE__, "%s", buf);
}

// The first member named "verdict" under x (document order) that is not
// "pass", "info" (an MPFR tensor without a bound; any case) or "not
// covered" (an MPFR check `parity check` cannot run for the case's
// settings, shown as such in the table), its path appended to path; NULL
// when every one passes.
static const json_t *failing_verdict(const json_t *x, char *path, size_t n)
{
    const size_t len = strlen(path);
    if (json_is_object(x)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)x, k, v) {
            snprintf(path + len, n - len, "%s%s", len ? "." : "", k);
            if (strcmp(k, "verdict") == 0) {
                const char *sv = json_string_value(v);
                if (!sv || (strcasecmp(sv, "pass") != 0 && strcasecmp(sv, "info") != 0 &&
                            strcasecmp(sv, "not covered") != 0))
                    return v;
            }
            const json_t *f = failing_verdict(v, path, n);
            if (f) return f;
        }
    } else if (json_is_array(x)) {
        size_t i;
        json_t *v;
        json_array_foreach(x, i, v) {
            snprintf(path + len, n - len, "[%zu]", i);
            const json_t *f = failing_verdict(v, path, n);
            if (f) return f;
        }
    }
    path[len] = '\0';
    return NULL;
}

par_status vf_results_verdict(const json_t *res)
{
    if (!json_is_object(res)) return bad("results.json: not a JSON object");
    const char *v = json_string_value(json_object_get(res, "verdict"));
    if (!v) return bad("results.json: no overall verdict");
    if (strcmp(v, "pass") != 0)
        return bad("results.json: verdict is '%s' (%s)", v, str(res, "verdict_reason"));
    const json_t *cases = json_object_get(res, "cases");
    if (json_array_size(cases) == 0) return bad("results.json: no cases");
    size_t i, j;
    json_t *cs, *e;
    // What every verdict is recomputed from must be there: each config's
    // correctness verdict, each MPFR check's verdict.
    json_array_foreach(cases, i, cs) {
        const json_t *configs = json_object_get(cs, "configs");
        if (json_array_size(configs) == 0) return bad("results.json: case %s has no configs", str(cs, "name"));
        json_array_foreach(configs, j, e) {
            char l[128];
            label(l, sizeof l, e);
            if (!json_string_value(json_object_get(e, "verdict")))
                return bad("results.json: config %s of case has no verdict (%s)", l, str(cs, "name"));
            if (!json_string_value(json_object_get(json_object_get(e, "correctness"), "verdict")))
                return bad("results.json: cases[%zu].configs[%zu].correctness.verdict is missing "
                           "(config %s)", i, j, l);
        }
        const json_t *checks = json_object_get(cs, "checks");
        if (json_array_size(checks) == 0) return bad("results.json: case %s has no MPFR checks", str(cs, "name"));
        json_array_foreach(checks, j, e) {
            if (!json_string_value(json_object_get(e, "verdict")))
                return bad("results.json: cases[%zu].checks[%zu].verdict is missing", i, j);
        }
    }
    // Recomputed: the overall, per-config and per-check verdicts pass only
    // when every verdict under them does (correctness, lockstep, mpfr, the
    // MPFR report and its tensors), whatever the stored ones say.
    char path[512] = "";
    const json_t *f = failing_verdict(res, path, sizeof path);
    if (f) {
        const char *fv = json_string_value(f);
        if (fv) return bad("results.json: %s is '%s'", path, fv);
        return bad("results.json: %s is not a string", path);
    }
    return PAR_OK;
}

par_status vf_results_check(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/results.json", dir);
    json_error_t err;
    json_t *res = json_load_file(path, 0, &err);
    if (!res)
        return par_set_error(access(path, R_OK) == 0 ? PAR_ERR_NUMERIC : PAR_ERR_IO, __FILE__,
                             __LINE__, "%s: %s (line %d)", path, err.text, err.line);
    par_status st = vf_results_verdict(res);
    const json_t *files = json_object_get(res, "files");
    if (st == PAR_OK && !json_is_object(files))
        st = bad("results.json lists no files");
    const char *name;
    json_t *sha;
    json_object_foreach((json_t *)files, name, sha) {
        if (st != PAR_OK) break;
        char got[65], p[1300];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        if (strchr(name, '/') || par_sha256_file(got, p) != PAR_OK)
            st = bad("%s is missing (listed in results.json)", name);
        else if (strcmp(got, json_string_value(sha) ? json_string_value(sha) : "") != 0)
            st = bad("%s was changed after results.json was written (SHA-256 differs)", name);
    }
    json_decref(res);
    return st;
}
