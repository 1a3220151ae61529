// Model spec parsing, the flat parameter layout and initialisation.
// Pure functions of the spec: the same spec always gives the same views in
// the same order, which is the .npz and checkpoint order.
#include "par_model.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_rng.h"

par_status par_act_parse(par_act *act, const char *name)
{
    static const char *names[] = {"none", "relu", "sigmoid", "tanh"};
    for (int i = 1; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *act = (par_act)i;
            return PAR_OK;
        }
    }
    return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                         "--act '%s': expected relu, sigmoid or tanh", name);
}

const char *par_act_name(par_act act)
{
    switch (act) {
    case PAR_ACT_RELU: return "relu";
    case PAR_ACT_SIGMOID: return "sigmoid";
    case PAR_ACT_TANH: return "tanh";
    case PAR_ACT_NONE: break;
    }
    return "none";
}

static void add_view(par_model *m, const char *name, int ndim, const size_t *shape)
{
    par_view *v = &m->views[m->n_views++];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->ndim = ndim;
    v->count = 1;
    for (int k = 0; k < ndim; k++) {
        v->shape[k] = shape[k];
        v->count *= shape[k];
    }
    v->offset = m->n_params;
    m->n_params += v->count;
}

// Appends layer L (its kind and shapes set) with its views, if it has parameters.
static void add_layer(par_model *m, par_layer L)
{
    const int l = m->n_layers++;
    L.w_view = L.b_view = L.stat_view = -1;
    if (L.kind == PAR_LAYER_BATCHNORM) {
        static const char *const names[] = {"weight", "bias", "running_mean", "running_var",
                                            "num_batches_tracked"};
        const size_t one = 1;
        for (int k = 0; k < 5; k++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%s", l, names[k]);
            add_view(m, name, 1, k < 4 ? &L.c_out : &one);
        }
        L.w_view = m->n_views - 5;
        L.b_view = m->n_views - 4;
        L.stat_view = m->n_views - 3;
    } else if (L.n_rows > 0) {
        char name[32];
        size_t shape[4] = {L.n_rows, L.row_len};
        int ndim = 2;
        if (L.kind == PAR_LAYER_CONV2D) {
            shape[1] = L.c_in;
            shape[2] = shape[3] = L.K;
            ndim = 4;
        }
        L.w_view = m->n_views;
        snprintf(name, sizeof name, "layer%d.weight", l);
        add_view(m, name, ndim, shape);
        L.b_view = m->n_views;
        snprintf(name, sizeof name, "layer%d.bias", l);
        add_view(m, name, 1, &L.n_rows);
    }
    if (L.n_in > m->max_width) m->max_width = L.n_in;
    if (L.n_out > m->max_width) m->max_width = L.n_out;
    m->layers[l] = L;
}

static par_layer dense_layer(size_t n_in, size_t n_out, par_act act)
{
    return (par_layer){.kind = PAR_LAYER_DENSE, .act = act, .n_in = n_in, .n_out = n_out,
                       .n_rows = n_out, .row_len = n_in, .c_in = n_in, .h_in = 1, .w_in = 1,
                       .c_out = n_out, .h_out = 1, .w_out = 1, .K = 1, .stride = 1};
}

// A decimal in [lo, hi] at *p; advances *p past it. 0 if there is none or
// it is out of range.
static int read_size(const char **p, size_t lo, size_t hi, size_t *v)
{
    if (!isdigit((unsigned char)**p)) return 0;
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(*p, &end, 10);
    if (errno || x < lo || x > hi) return 0;
    *v = (size_t)x;
    *p = end;
    return 1;
}

#define MAX_SIZE ((size_t)1 << 24)

static par_status parse_mlp(par_model *m, const char *spec, par_act act)
{
    size_t sizes[PAR_MAX_LAYERS + 1];
    int n = 0;
    const char *p = spec + 4;
    for (;;) {
        const char *tok = p;
        size_t v;
        const int ok = read_size(&p, 1, MAX_SIZE, &v);
        PAR_FAIL_IF(!ok, PAR_ERR_CONFIG,
                    "--model '%s': size '%.*s' (number %d): expected an integer in 1..16777216",
                    spec, (int)strcspn(tok, "-"), tok, n + 1);
        PAR_FAIL_IF(n > PAR_MAX_LAYERS, PAR_ERR_CONFIG, "--model '%s': at most %d layers", spec,
                    PAR_MAX_LAYERS);
        sizes[n++] = v;
        if (*p == '\0') break;
        PAR_FAIL_IF(*p != '-', PAR_ERR_CONFIG,
                    "--model '%s': unexpected '%c', sizes are separated by '-'", spec, *p);
        p++;
    }
    PAR_FAIL_IF(n < 2, PAR_ERR_CONFIG, "--model '%s': need at least an input and an output size",
                spec);
    m->n_inputs = sizes[0];
    for (int l = 0; l + 1 < n; l++)
        add_layer(m, dense_layer(sizes[l], sizes[l + 1], l + 2 < n ? act : PAR_ACT_NONE));
    return PAR_OK;
}

#define CNN_FAIL(cond, ...) PAR_FAIL_IF(cond, PAR_ERR_CONFIG, "--model '%s': " __VA_ARGS__)

// One cnn token [tok, tok + len) applied to the running shape (c, h, w);
// *flat: the shape has been flattened (only fc and activations may follow).
static par_status cnn_token(par_model *m, const char *spec, const char *tok, int len, size_t *c,
                            size_t *h, size_t *w, int *flat)
{
    const char *p = tok, *end = tok + len;
    size_t v;
    par_layer *prev = m->n_layers > 0 ? &m->layers[m->n_layers - 1] : NULL;
    if ((len == 1 && *p == 'r') || (len == 2 && (strncmp(p, "sg", 2) == 0 || strncmp(p, "th", 2) == 0))) {
        CNN_FAIL(!prev || prev->n_rows == 0 || prev->act != PAR_ACT_NONE,
                 "'%.*s' must follow a conv (c...) or fc layer, once", spec, len, tok);
        prev->act = *p == 'r' ? PAR_ACT_RELU : *p == 's' ? PAR_ACT_SIGMOID : PAR_ACT_TANH;
        return PAR_OK;
    }
    if (len == 1 && *p == 'f') {
        CNN_FAIL(*flat, "'f' given twice", spec);
        *c = *c * *h * *w;
        *h = *w = 1;
        *flat = 1;
        return PAR_OK;
    }
    CNN_FAIL(m->n_layers >= PAR_MAX_LAYERS, "at most %d layers", spec, PAR_MAX_LAYERS);
    const size_t n_in = *c * *h * *w;
    if (len == 2 && strncmp(p, "bn", 2) == 0) {
        CNN_FAIL(!prev || (prev->kind != PAR_LAYER_CONV2D && prev->kind != PAR_LAYER_DENSE) ||
                     prev->act != PAR_ACT_NONE,
                 "'bn' must follow a conv (c...) or fc layer, before its activation", spec);
        par_layer L = {.kind = PAR_LAYER_BATCHNORM, .act = PAR_ACT_NONE, .c_in = *c, .h_in = *h,
                       .w_in = *w, .c_out = *c, .h_out = *h, .w_out = *w, .K = 1, .stride = 1,
                       .n_in = n_in, .n_out = n_in, .n_rows = *c, .row_len = 1};
        add_layer(m, L);
        return PAR_OK;
    }
    if (len > 2 && strncmp(p, "fc", 2) == 0) {
        p += 2;
        CNN_FAIL(!read_size(&p, 1, MAX_SIZE, &v) || p != end,
                 "'%.*s': expected fcN with N in 1..16777216", spec, len, tok);
        CNN_FAIL(!*flat, "'%.*s': an fc after an image needs 'f' (flatten) first", spec, len, tok);
        add_layer(m, dense_layer(n_in, v, PAR_ACT_NONE));
        *c = v;
        return PAR_OK;
    }
    CNN_FAIL(*flat, "'%.*s': only fc layers and activations may follow 'f'", spec, len, tok);
    if (*p == 'm') {
        p++;
        CNN_FAIL(!read_size(&p, 1, 64, &v) || p != end,
                 "'%.*s': expected mK (K x K max-pool, K in 1..64)", spec, len, tok);
        CNN_FAIL(v > *h || v > *w, "'%.*s': a %zux%zu window does not fit a %zux%zu image", spec,
                 len, tok, v, v, *h, *w);
        par_layer L = {.kind = PAR_LAYER_MAXPOOL, .act = PAR_ACT_NONE, .c_in = *c, .h_in = *h,
                       .w_in = *w, .c_out = *c, .h_out = *h / v, .w_out = *w / v, .K = v,
                       .stride = v};
        L.n_in = n_in;
        L.n_out = L.c_out * L.h_out * L.w_out;
        add_layer(m, L);
        *h = L.h_out;
        *w = L.w_out;
        return PAR_OK;
    }
    if (*p == 'c') {
        size_t co, K = 3, pad = 0, stride = 1;
        p++;
        int ok = read_size(&p, 1, MAX_SIZE, &co);
        while (ok && p < end) {
            const char opt = *p++;
            if (opt == 'k') ok = read_size(&p, 1, 64, &K);
            else if (opt == 'p') ok = read_size(&p, 0, 64, &pad);
            else if (opt == 's') ok = read_size(&p, 1, 64, &stride);
            else ok = 0;
        }
        CNN_FAIL(!ok || p != end,
                 "'%.*s': expected cN[kK][pP][sS] (N channels, K x K kernel, padding P, stride S)",
                 spec, len, tok);
        CNN_FAIL(*h + 2 * pad < K || *w + 2 * pad < K,
                 "'%.*s': a %zux%zu kernel does not fit a %zux%zu image padded by %zu", spec, len,
                 tok, K, K, *h, *w, pad);
        par_layer L = {.kind = PAR_LAYER_CONV2D, .act = PAR_ACT_NONE, .c_in = *c, .h_in = *h,
                       .w_in = *w, .c_out = co, .K = K, .stride = stride, .pad = pad};
        L.h_out = (*h + 2 * pad - K) / stride + 1;
        L.w_out = (*w + 2 * pad - K) / stride + 1;
        L.n_in = n_in;
        L.n_out = co * L.h_out * L.w_out;
        L.n_rows = co;
        L.row_len = *c * K * K;
        CNN_FAIL(L.n_out > MAX_SIZE || L.row_len > MAX_SIZE, "'%.*s': layer too large", spec,
                 len, tok);
        add_layer(m, L);
        *c = co;
        *h = L.h_out;
        *w = L.w_out;
        return PAR_OK;
    }
    CNN_FAIL(1, "unknown token '%.*s' (expected cN[kK][pP][sS], mK, r, sg, th, f or fcN)", spec,
             len, tok);
}

static par_status parse_cnn(par_model *m, const char *spec)
{
    const char *p = spec + 4;
    size_t c, h, w;
    int ok = read_size(&p, 1, 4096, &c) && *p++ == 'x' && read_size(&p, 1, 65536, &h) &&
             *p++ == 'x' && read_size(&p, 1, 65536, &w);
    CNN_FAIL(!ok || (*p != '-' && *p != '\0') || c * h * w > MAX_SIZE,
             "expected an input shape CxHxW first (e.g. cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10)",
             spec);
    m->is_cnn = 1;
    m->n_inputs = c * h * w;
    int flat = 0;
    while (*p == '-') {
        const char *tok = ++p;
        const int len = (int)strcspn(tok, "-");
        CNN_FAIL(len == 0, "empty token at offset %d", spec, (int)(tok - spec));
        PAR_TRY(cnn_token(m, spec, tok, len, &c, &h, &w, &flat));
        p = tok + len;
    }
    const par_layer *last = m->n_layers > 0 ? &m->layers[m->n_layers - 1] : NULL;
    CNN_FAIL(!last || last->kind != PAR_LAYER_DENSE || last->act != PAR_ACT_NONE,
             "must end with an fc layer without activation (the logits)", spec);
    return PAR_OK;
}

par_status par_model_parse(par_model *m, const char *spec, par_act act)
{
    memset(m, 0, sizeof *m);
    PAR_FAIL_IF(strlen(spec) >= sizeof m->spec, PAR_ERR_CONFIG, "--model: spec too long");
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    if (strncmp(spec, "cnn:", 4) == 0) PAR_TRY(parse_cnn(m, spec));
    else if (strncmp(spec, "mlp:", 4) == 0) PAR_TRY(parse_mlp(m, spec, act));
    else
        PAR_FAIL_IF(1, PAR_ERR_CONFIG,
                    "--model '%s': expected mlp:N0-N1-...-Nk (e.g. mlp:784-256-128-10) or "
                    "cnn:CxHxW-... (e.g. cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10)", spec);
    m->n_classes = m->layers[m->n_layers - 1].n_out;
    return PAR_OK;
}

void par_model_init(const par_model *m, par_dtype dt, uint64_t seed, void *params)
{
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *L = &m->layers[l];
        if (L->n_rows == 0) continue;
        const par_view *w = &m->views[L->w_view], *b = &m->views[L->b_view];
        if (L->kind == PAR_LAYER_BATCHNORM) {   // gamma 1, beta 0, mean 0, var 1, count 0
            const par_view *st = &m->views[L->stat_view];
            for (size_t i = 0; i < w->count + b->count + 2 * st->count + 1; i++) {
                const size_t rv = m->views[L->stat_view + 1].offset;
                const size_t j = w->offset + i;
                const double v = j < b->offset || (j >= rv && j < rv + st->count) ? 1.0 : 0.0;
                par_put_real(dt, params, j, v);
            }
            continue;
        }
        const double fan_in = (double)L->row_len, fan_out = (double)(L->n_rows * L->K * L->K);
        double fan = L->act == PAR_ACT_RELU ? fan_in : fan_in + fan_out;
        double a = sqrt(6.0 / fan);   // sqrt is correctly rounded (IEEE 754)
        for (size_t i = 0; i < w->count; i++) {
            double u = par_rng_uniform(seed, PAR_RNG_INIT, (uint32_t)l, i);
            double v = (2.0 * u - 1.0) * a;
            par_put_real(dt, params, w->offset + i, v);
        }
        size_t sz = par_dtype_size(dt);
        memset((char *)params + b->offset * sz, 0, b->count * sz);
    }
}

double par_model_macs(const par_model *m)
{
    double macs = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *L = &m->layers[l];
        switch (L->kind) {
        case PAR_LAYER_DENSE: macs += (double)L->n_in * (double)L->n_out; break;
        case PAR_LAYER_CONV2D: macs += (double)L->n_out * (double)(L->c_in * L->K * L->K); break;
        case PAR_LAYER_MAXPOOL:
        case PAR_LAYER_BATCHNORM: macs += (double)L->n_in; break;
        }
    }
    return macs;
}
