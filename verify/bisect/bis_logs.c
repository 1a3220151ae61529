// `parity bisect --logs`: the first differing step of two JSONL step logs of
// `parity train --log`, by their per-step XXH3-128 digests (or the loss
// values when a log has none); see bis_bisect.h. Epoch lines are skipped. A
// log of an older parity (SHA-256 step digests) is refused, never compared
// with XXH3 digests. Not a replay: a log holds no tensors; bis_weights
// compares the .npz weights two runs saved after the step array by array.
// Tests: tests/verify/test_bisect.c, tests/cli/test_bisect.sh.
#define _POSIX_C_SOURCE 200809L
#include "bis_bisect.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_hash.h"
#include "par_log.h"
#include "par_npz.h"

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

// The XXH3-128 of an archive's arrays in order, as the step log digests the
// parameter buffer (par_weights_save writes one array per view, in order).
static par_status npz_digest(char out[33], const par_npz *z)
{
    size_t n = 0;
    for (size_t k = 0; k < z->n; k++) n += z->arrays[k].count * par_dtype_size(z->arrays[k].dtype);
    char *buf = malloc(n ? n : 1);
    PAR_FAIL_IF(!buf, PAR_ERR_ALLOC, "out of memory");
    size_t off = 0;
    for (size_t k = 0; k < z->n; k++) {
        const size_t sz = z->arrays[k].count * par_dtype_size(z->arrays[k].dtype);
        memcpy(buf + off, z->arrays[k].data, sz);
        off += sz;
    }
    par_xxh128_hex(out, buf, n);
    free(buf);
    return PAR_OK;
}

// "[i,j,...]" of flat index i in array x (C order).
static void index_text(char *buf, size_t cap, const par_array *x, size_t i)
{
    size_t idx[4];
    for (int d = x->ndim - 1; d >= 0; d--) {
        idx[d] = x->shape[d] ? i % x->shape[d] : 0;
        i = x->shape[d] ? i / x->shape[d] : 0;
    }
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < x->ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, d ? ",%zu" : "%zu", idx[d]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

static void shape_text(char *buf, size_t cap, const par_array *x)
{
    size_t len = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < x->ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, d ? ", %zu" : "%zu", x->shape[d]);
    if (len < cap) snprintf(buf + len, cap - len, x->ndim == 1 ? ",)" : ")");   // as numpy
}

static par_status compare_arrays(bis_weights_result *r, const par_npz *a, const par_npz *b,
                                 const char *path_a, const char *path_b)
{
    PAR_FAIL_IF(a->n != b->n, PAR_ERR_FORMAT, "%s holds %zu arrays, %s %zu: not the same model",
                path_a, a->n, path_b, b->n);
    r->arrays = calloc(a->n ? a->n : 1, sizeof *r->arrays);
    PAR_FAIL_IF(!r->arrays, PAR_ERR_ALLOC, "out of memory");
    r->n_arrays = a->n;
    for (size_t k = 0; k < a->n; k++) {
        const par_array *x = &a->arrays[k], *y = &b->arrays[k];
        int same = strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim &&
                   x->count == y->count;
        for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == y->shape[d];
        PAR_FAIL_IF(!same, PAR_ERR_FORMAT,
                    "array %zu: %s in %s, %s in %s, not the same name, shape and dtype", k + 1,
                    x->name, path_a, y->name, path_b);
        bis_array_diff *t = &r->arrays[k];
        snprintf(t->name, sizeof t->name, "%s", x->name);
        shape_text(t->shape, sizeof t->shape, x);
        t->count = x->count;
        const size_t sz = par_dtype_size(x->dtype);
        for (size_t i = 0; i < x->count; i++) {
            if (memcmp((const char *)x->data + i * sz, (const char *)y->data + i * sz, sz) == 0)
                continue;
            if (t->n_diff++ == 0) {
                t->first = i;
                index_text(t->index, sizeof t->index, x, i);
                t->a = par_get_real(x->dtype, x->data, i);
                t->b = par_get_real(y->dtype, y->data, i);
                t->ulps = bis_ulps(t->a, t->b, x->dtype);
            }
        }
        r->n_differ += t->n_diff > 0;
    }
    return PAR_OK;
}

par_status bis_weights(bis_weights_result *r, const char *npz_a, const char *npz_b)
{
    memset(r, 0, sizeof *r);
    par_npz a = {0}, b = {0};
    PAR_TRY(par_npz_read(&a, npz_a));
    par_status st = par_npz_read(&b, npz_b);
    if (st == PAR_OK) st = npz_digest(r->xxh_a, &a);
    if (st == PAR_OK) st = npz_digest(r->xxh_b, &b);
    if (st == PAR_OK) st = compare_arrays(r, &a, &b, npz_a, npz_b);
    par_npz_free(&a);
    par_npz_free(&b);
    if (st != PAR_OK) bis_weights_free(r);
    return st;
}

void bis_weights_free(bis_weights_result *r)
{
    free(r->arrays);
    r->arrays = NULL;
    r->n_arrays = r->n_differ = 0;
}
