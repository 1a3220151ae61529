// Comparisons of the harness: step losses read back from JSONL logs
// (written with 17 significant digits, so they round-trip bit for bit) and
// the logs' per-step weight digests (XXH3-128), and .npz weights array by
// array, bitwise, naming the first differing element.
#define _POSIX_C_SOURCE 200809L
#include "vf_harness.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_log.h"
#include "par_npz.h"

void vf_log_free(vf_log *log)
{
    free(log->loss);
    free(log->wxxh);
    memset(log, 0, sizeof *log);
}

// Appends step n + 1 of one log line.
static par_status add_step(vf_log *l, size_t *cap, const json_t *j)
{
    if ((size_t)l->n == *cap) {
        const size_t c = *cap ? 2 * *cap : 256;
        double *w = realloc(l->loss, c * sizeof *w);
        PAR_FAIL_IF(!w, PAR_ERR_ALLOC, "out of memory");
        l->loss = w;
        char(*h)[33] = realloc(l->wxxh, c * sizeof *h);
        PAR_FAIL_IF(!h, PAR_ERR_ALLOC, "out of memory");
        l->wxxh = h;
        *cap = c;
    }
    const json_t *v = json_object_get(j, "loss");
    const char *xxh = json_string_value(json_object_get(j, "weights_xxh128"));
    l->loss[l->n] = json_is_number(v) ? json_number_value(v) : NAN;   // null: NaN/Inf
    snprintf(l->wxxh[l->n], 33, "%s", xxh ? xxh : "");
    l->n++;
    return PAR_OK;
}

par_status vf_log_read(vf_log *l, const char *path)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "r");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open log %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t line_cap = 0, cap = 0;
    long lineno = 0;
    int all_xxh = 1;
    par_status st = PAR_OK;
    while (st == PAR_OK && getline(&line, &line_cap, f) > 0) {
        lineno++;
        json_error_t err;
        json_t *j = json_loads(line, JSON_DECODE_ANY, &err);
        const char *type = json_string_value(json_object_get(j, "type"));
        if (!json_is_object(j))
            st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s:%ld: not a JSON object",
                               path, lineno);
        else if (type && strcmp(type, "step") == 0) {
            const json_int_t step = json_integer_value(json_object_get(j, "step"));
            if (json_object_get(j, "weights_sha256")) st = par_log_old_digests(path, lineno);
            else if (step != (json_int_t)l->n + 1)
                st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__,
                                   "%s:%ld: step %lld, expected %ld", path, lineno,
                                   (long long)step, l->n + 1);
            else st = add_step(l, &cap, j);
            if (st == PAR_OK && !l->wxxh[l->n - 1][0]) all_xxh = 0;
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (st != PAR_OK) {
        vf_log_free(l);
        return st;
    }
    if (!all_xxh || l->n == 0) {
        free(l->wxxh);
        l->wxxh = NULL;
    }
    return PAR_OK;
}

long vf_losses_first_diff(const vf_log *a, const vf_log *b)
{
    const long n = a->n < b->n ? a->n : b->n;
    for (long k = 0; k < n; k++)
        if (memcmp(&a->loss[k], &b->loss[k], sizeof(double)) != 0) return k + 1;
    return a->n == b->n ? 0 : n + 1;
}

long vf_weights_first_diff(const vf_log *a, const vf_log *b)
{
    if (!a->wxxh || !b->wxxh) return 0;
    const long n = a->n < b->n ? a->n : b->n;
    for (long k = 0; k < n; k++)
        if (strcmp(a->wxxh[k], b->wxxh[k]) != 0) return k + 1;
    return a->n == b->n ? 0 : n + 1;
}

static void index_name(char *buf, size_t size, const par_array *x, size_t i)
{
    if (x->ndim == 2) snprintf(buf, size, "%s[%zu,%zu]", x->name, i / x->shape[1], i % x->shape[1]);
    else snprintf(buf, size, "%s[%zu]", x->name, i);
}

par_status vf_weights_compare(vf_weight_diff *d, const char *a_path, const char *b_path)
{
    memset(d, 0, sizeof *d);
    par_npz a = {0}, b = {0};
    PAR_TRY(par_npz_read(&a, a_path));
    par_status st = par_npz_read(&b, b_path);
    if (st != PAR_OK) {
        par_npz_free(&a);
        return st;
    }
    d->equal = a.n == b.n;
    if (a.n != b.n) {
        snprintf(d->first, sizeof d->first, "%zu arrays vs %zu", a.n, b.n);
        d->max_abs = INFINITY;
    }
    for (size_t k = 0; k < a.n && k < b.n; k++) {
        const par_array *x = &a.arrays[k], *y = &b.arrays[k];
        int same_shape = strcmp(x->name, y->name) == 0 && x->dtype == y->dtype &&
                         x->ndim == y->ndim && x->count == y->count;
        for (int i = 0; same_shape && i < x->ndim; i++) same_shape = x->shape[i] == y->shape[i];
        if (!same_shape) {
            if (d->equal) snprintf(d->first, sizeof d->first, "%s: name/shape/dtype differ", x->name);
            d->equal = 0;
            d->max_abs = INFINITY;
            continue;
        }
        const size_t sz = par_dtype_size(x->dtype);
        d->n_elements += x->count;
        for (size_t i = 0; i < x->count; i++) {
            if (memcmp((const char *)x->data + i * sz, (const char *)y->data + i * sz, sz) == 0)
                continue;
            const double p = par_get_real(x->dtype, x->data, i),
                         q = par_get_real(y->dtype, y->data, i);
            if (d->equal) {
                index_name(d->first, sizeof d->first, x, i);
                d->first_a = p;
                d->first_b = q;
            }
            d->equal = 0;
            d->n_diff++;
            const double e = isfinite(p) && isfinite(q) ? fabs(p - q) : INFINITY;
            if (!(e <= d->max_abs)) d->max_abs = e;
        }
    }
    par_npz_free(&a);
    par_npz_free(&b);
    return PAR_OK;
}
