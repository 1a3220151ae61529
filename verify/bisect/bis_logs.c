// `parity bisect --logs`: the first differing step of two JSONL step logs of
// `parity train --log`, by their per-step XXH3-128 digests (or the loss
// values when a log has none); see bis_bisect.h. Epoch lines are skipped. A
// log of an older parity (SHA-256 step digests) is refused, never compared
// with XXH3 digests. Not a replay: a log holds no tensors.
// Tests: tests/test_bisect.c, tests/test_bisect.sh.
#define _POSIX_C_SOURCE 200809L
#include "bis_bisect.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_io.h"

typedef struct log_step {
    long step;
    int epoch;
    double loss; // NaN for null
    char weights[33], loss_xxh[33];
} log_step;

typedef struct step_log {
    log_step *s;
    long n, cap;
    int digests; // every step line has both digests
} step_log;

static par_status copy_hex(char dst[33], json_t *v, const char *path, long line, const char *key)
{
    const char *s = json_string_value(v);
    PAR_FAIL_IF(!s || strlen(s) != 32 || strspn(s, "0123456789abcdef") != 32, PAR_ERR_FORMAT,
                "%s:%ld: \"%s\": expected 32 lowercase hex characters (XXH3-128)", path, line,
                key);
    memcpy(dst, s, 33);
    return PAR_OK;
}

static par_status parse_line(step_log *lg, const char *text, const char *path, long line)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    PAR_FAIL_IF(!j || !json_is_object(j), PAR_ERR_FORMAT, "%s:%ld: not a JSON object (%s)", path,
                line, j ? "other value" : err.text);
    const char *type = json_string_value(json_object_get(j, "type"));
    par_status st = PAR_OK;
    if (!type || strcmp(type, "step") != 0) {
        if (!type)
            st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__,
                               "%s:%ld: no \"type\": not a parity step log", path, line);
        json_decref(j);
        return st;
    }
    json_t *step = json_object_get(j, "step"), *loss = json_object_get(j, "loss");
    json_t *epoch = json_object_get(j, "epoch");
    if (!json_is_integer(step) || !(json_is_number(loss) || json_is_null(loss))) {
        json_decref(j);
        PAR_FAIL_IF(1, PAR_ERR_FORMAT, "%s:%ld: a step line needs integer \"step\" and a \"loss\"",
                    path, line);
    }
    if (lg->n == lg->cap) {
        const long cap = lg->cap ? 2 * lg->cap : 1024;
        log_step *s = realloc(lg->s, (size_t)cap * sizeof *s);
        if (!s) {
            json_decref(j);
            PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory reading %s", path);
        }
        lg->s = s;
        lg->cap = cap;
    }
    log_step *s = &lg->s[lg->n];
    memset(s, 0, sizeof *s);
    s->step = (long)json_integer_value(step);
    s->epoch = json_is_integer(epoch) ? (int)json_integer_value(epoch) : -1;
    s->loss = json_is_null(loss) ? NAN : json_number_value(loss);
    json_t *w = json_object_get(j, "weights_xxh128"), *l = json_object_get(j, "loss_xxh128");
    if (json_object_get(j, "weights_sha256") || json_object_get(j, "loss_sha256")) {
        st = par_log_old_digests(path, line);
    } else if (w && l) {
        st = copy_hex(s->weights, w, path, line, "weights_xxh128");
        if (st == PAR_OK) st = copy_hex(s->loss_xxh, l, path, line, "loss_xxh128");
    } else {
        lg->digests = 0;
    }
    json_decref(j);
    if (st == PAR_OK) lg->n++;
    return st;
}

static par_status read_log(step_log *lg, const char *path)
{
    memset(lg, 0, sizeof *lg);
    lg->digests = 1;
    FILE *f = fopen(path, "r");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open log %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t cap = 0;
    long line = 0;
    par_status st = PAR_OK;
    while (st == PAR_OK && getline(&text, &cap, f) > 0) {
        line++;
        const char *p = text;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (*p) st = parse_line(lg, p, path, line);
    }
    if (st == PAR_OK && ferror(f))
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot read log %s", path);
    free(text);
    fclose(f);
    if (st != PAR_OK) {
        free(lg->s);
        lg->s = NULL;
    }
    return st;
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

par_status bis_logs(bis_log_result *r, const char *path_a, const char *path_b)
{
    memset(r, 0, sizeof *r);
    r->loss_a = r->loss_b = NAN;
    r->epoch = -1;
    step_log la, lb;
    PAR_TRY(read_log(&la, path_a));
    par_status st = read_log(&lb, path_b);
    if (st != PAR_OK) {
        free(la.s);
        return st;
    }
    r->steps_a = la.n;
    r->steps_b = lb.n;
    r->digests = la.digests && lb.digests && la.n > 0 && lb.n > 0;
    const long n = la.n < lb.n ? la.n : lb.n;
    for (long k = 0; k < n && !r->diverged; k++) {
        const log_step *a = &la.s[k], *b = &lb.s[k];
        if (a->step != b->step) {
            st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__,
                               "line %ld of the step lines: step %ld in %s but %ld in %s", k + 1,
                               a->step, path_a, b->step, path_b);
            break;
        }
        int dl, dw = 0;
        if (r->digests) {
            dl = strcmp(a->loss_xxh, b->loss_xxh) != 0;
            dw = strcmp(a->weights, b->weights) != 0;
        } else {
            dl = !same_bits(a->loss, b->loss) && !(isnan(a->loss) && isnan(b->loss));
        }
        if (!dl && !dw) continue;
        r->diverged = 1;
        r->step = a->step;
        r->epoch = a->epoch;
        r->what = dl && dw ? "loss and weights" : dl ? "loss" : "weights";
        r->loss_a = a->loss;
        r->loss_b = b->loss;
        memcpy(r->weights_a, a->weights, 33);
        memcpy(r->weights_b, b->weights, 33);
    }
    if (st == PAR_OK && !r->diverged && la.n != lb.n) {
        // Equal as far as both go: the shorter log ends first.
        const step_log *longer = la.n > lb.n ? &la : &lb;
        const log_step *s = &longer->s[n];
        r->diverged = 1;
        r->step = s->step;
        r->epoch = -1;
        r->what = "length";
        if (longer == &la) {
            r->loss_a = s->loss;
            memcpy(r->weights_a, s->weights, 33);
        } else {
            r->loss_b = s->loss;
            memcpy(r->weights_b, s->weights, 33);
        }
    }
    free(la.s);
    free(lb.s);
    return st;
}
