// par_model: spec parsing (views, offsets, sizes; every malformed spec is a
// PAR_ERR_CONFIG whose message names the spec), par_act_parse, and
// par_model_init (He/Xavier bounds, zero biases, determinism, f32 = rounded
// f64, per-layer independence, sample mean/variance/histogram of a big layer).
// Not a test of training. Run: ctest -R test_model (well under a second).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_model.h"
#include "par_test.h"

// The message of the last failure names the spec. The empty spec is looked
// for quoted ('') since every message contains the empty string.
static int message_names(const char *spec)
{
    const char *msg = par_last_error();
    if (spec[0] == '\0') return strstr(msg, "''") != NULL;
    return strstr(msg, spec) != NULL;
}

static void check_rejected(const char *spec)
{
    par_model m;
    char name[256];
    par_clear_error();
    const par_status st = par_model_parse(&m, spec, PAR_ACT_RELU);
    snprintf(name, sizeof name, "parse rejects \"%s\" with PAR_ERR_CONFIG naming it", spec);
    if (!par_check(st == PAR_ERR_CONFIG && message_names(spec), name))
        printf("  status %d, message \"%s\"\n", (int)st, par_last_error());
}

// "mlp:" followed by n_sizes sizes of 2.
static void spec_of_sizes(char *spec, size_t cap, size_t n_sizes)
{
    size_t len = (size_t)snprintf(spec, cap, "mlp:2");
    for (size_t k = 1; k < n_sizes && len < cap; k++)
        len += (size_t)snprintf(spec + len, cap - len, "-2");
}

static void test_parse(void)
{
    par_model m;
    const par_status st = par_model_parse(&m, "mlp:784-256-128-10", PAR_ACT_RELU);
    if (!par_check(st == PAR_OK, "parse mlp:784-256-128-10")) {
        printf("  %s\n", par_last_error());
        return;
    }
    const size_t sizes[] = {784, 256, 128, 10};
    const size_t n_expected = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
    int ok = m.n_layers == 3 && m.n_views == 6 && m.n_inputs == 784 && m.n_classes == 10 &&
             m.max_width == 784 && m.n_params == n_expected &&
             strcmp(m.spec, "mlp:784-256-128-10") == 0;
    par_check(ok, "mlp:784-256-128-10: 3 layers, 6 views, n_params 235146, sizes");
    par_check(par_model_macs(&m) == 784.0 * 256 + 256.0 * 128 + 128.0 * 10,
              "mlp:784-256-128-10: 234752 multiply-adds per sample");
    par_model bn;
    // conv 4x8x8 outputs of 3x3x3 taps, batchnorm and max-pool one per input, fc 64x10
    par_check(par_model_parse(&bn, "cnn:3x8x8-c4k3p1-bn-r-m2-f-fc10", PAR_ACT_RELU) == PAR_OK &&
                  par_model_macs(&bn) == 4.0 * 64 * 27 + 256 + 256 + 64.0 * 10,
              "cnn:3x8x8-c4k3p1-bn-r-m2-f-fc10: 8064 multiply-adds per sample");

    // Views in order weight, bias per layer; each starts where the last ended.
    size_t offset = 0;
    ok = 1;
    for (int l = 0; l < 3; l++) {
        const par_layer *L = &m.layers[l];
        const par_act act = l < 2 ? PAR_ACT_RELU : PAR_ACT_NONE;
        ok = ok && L->kind == PAR_LAYER_DENSE && L->act == act && L->n_in == sizes[l] &&
             L->n_out == sizes[l + 1] && L->w_view == 2 * l && L->b_view == 2 * l + 1;
        char wname[32], bname[32];
        snprintf(wname, sizeof wname, "layer%d.weight", l);
        snprintf(bname, sizeof bname, "layer%d.bias", l);
        const par_view *w = &m.views[2 * l], *b = &m.views[2 * l + 1];
        ok = ok && strcmp(w->name, wname) == 0 && w->ndim == 2 && w->shape[0] == sizes[l + 1] &&
             w->shape[1] == sizes[l] && w->count == sizes[l] * sizes[l + 1] && w->offset == offset;
        offset += sizes[l] * sizes[l + 1];
        ok = ok && strcmp(b->name, bname) == 0 && b->ndim == 1 && b->shape[0] == sizes[l + 1] &&
             b->count == sizes[l + 1] && b->offset == offset;
        offset += sizes[l + 1];
        if (!ok) {
            printf("  layer %d: %s offset %zu count %zu, %s offset %zu count %zu\n", l, w->name,
                   w->offset, w->count, b->name, b->offset, b->count);
            break;
        }
    }
    par_check(ok && offset == m.n_params, "views layer<l>.weight (n_out,n_in), layer<l>.bias "
                                          "(n_out), contiguous in order; acts relu,relu,none");

    par_check(par_model_parse(&m, "mlp:784-10", PAR_ACT_TANH) == PAR_OK && m.n_layers == 1 &&
                  m.layers[0].act == PAR_ACT_NONE && m.n_params == 7850,
              "parse mlp:784-10: one layer, act none");

    const char *bad[] = {"",           "mlp:",      "mlp:784",     "mlp:784-",   "mlp:784--10",
                         "mlp:0-10",   "mlp:-5-10", "mlp:784-abc", "cnn:784-10", "mlp:784-10x",
                         "mlp:784-10-"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        check_rejected(bad[k]);

    // PAR_MAX_LAYERS layers is the most: PAR_MAX_LAYERS + 1 sizes parse, one more does not.
    char spec[128];
    spec_of_sizes(spec, sizeof spec, PAR_MAX_LAYERS + 1);
    par_check(par_model_parse(&m, spec, PAR_ACT_RELU) == PAR_OK && m.n_layers == PAR_MAX_LAYERS &&
                  m.n_views == 2 * PAR_MAX_LAYERS,
              "parse accepts PAR_MAX_LAYERS layers");
    spec_of_sizes(spec, sizeof spec, PAR_MAX_LAYERS + 2);
    check_rejected(spec);
}

// The cnn: grammar. Shapes and parameter counts worked by hand: the MNIST CNN
// has conv 1->32 3x3 (32*9 + 32 = 320), fc 32*28*28 = 25088 -> 128
// (25088*128 + 128 = 3211392), fc 128 -> 10 (1290): 3213002 in all.
static void test_parse_cnn(void)
{
    par_model m;
    par_status st = par_model_parse(&m, "cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10", PAR_ACT_TANH);
    if (!par_check(st == PAR_OK, "parse the MNIST CNN")) {
        printf("  %s\n", par_last_error());
        return;
    }
    const par_layer *c = &m.layers[0], *f1 = &m.layers[1], *f2 = &m.layers[2];
    // by hand: conv 32x28x28 outputs of 1x3x3 taps, fc 25088x128, fc 128x10
    par_check(par_model_macs(&m) == 225792.0 + 3211264.0 + 1280.0,
              "MNIST CNN: 3438336 multiply-adds per sample");
    par_check(m.is_cnn && m.n_layers == 3 && m.n_views == 6 && m.n_inputs == 784 &&
                  m.n_classes == 10 && m.n_params == 3213002,
              "MNIST CNN: 3 layers, 6 views, 784 inputs, 10 classes, 3213002 parameters");
    par_check(c->kind == PAR_LAYER_CONV2D && c->act == PAR_ACT_RELU && c->c_in == 1 &&
                  c->h_in == 28 && c->c_out == 32 && c->h_out == 28 && c->w_out == 28 &&
                  c->K == 3 && c->pad == 1 && c->stride == 1 && c->n_in == 784 &&
                  c->n_out == 25088 && c->n_rows == 32 && c->row_len == 9,
              "conv c32k3p1 on 1x28x28: 32x28x28 out, rows 32 of 9, relu (spec, not --act)");
    const par_view *w = &m.views[c->w_view];
    par_check(strcmp(w->name, "layer0.weight") == 0 && w->ndim == 4 && w->shape[0] == 32 &&
                  w->shape[1] == 1 && w->shape[2] == 3 && w->shape[3] == 3 && w->count == 288,
              "conv weight view layer0.weight (32, 1, 3, 3) like torch.nn.Conv2d");
    par_check(f1->kind == PAR_LAYER_DENSE && f1->n_in == 25088 && f1->n_out == 128 &&
                  f1->act == PAR_ACT_RELU && f2->n_in == 128 && f2->act == PAR_ACT_NONE,
              "fc128 after f takes 25088 inputs; the logits' fc has no activation");

    // Pools, strides, remainders: 3x32x32 -c8k5s2 -> 8x14x14 -m3 -> 8x4x4 -c1k1 -> 1x4x4.
    st = par_model_parse(&m, "cnn:3x32x32-c8k5s2-th-m3-c1k1-sg-f-fc10", PAR_ACT_RELU);
    par_check(st == PAR_OK && m.n_layers == 4 && m.layers[0].h_out == 14 &&
                  m.layers[0].act == PAR_ACT_TANH && m.layers[1].kind == PAR_LAYER_MAXPOOL &&
                  m.layers[1].h_out == 4 && m.layers[1].w_view == -1 &&
                  m.layers[2].n_out == 16 && m.layers[2].act == PAR_ACT_SIGMOID &&
                  m.n_views == 6 && strcmp(m.views[2].name, "layer2.weight") == 0 &&
                  m.n_params == 8 * 75 + 8 + 8 + 1 + 16 * 10 + 10,
              "stride 2, max-pool 3 with remainder, 1x1 conv; views skip the pool's index");

    // Batchnorm: five views named as PyTorch's state_dict, initialised to
    // weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0.
    st = par_model_parse(&m, "cnn:1x4x4-c3k3-bn-r-f-fc2", PAR_ACT_RELU);
    const char *bn_names[] = {"layer1.weight", "layer1.bias", "layer1.running_mean",
                              "layer1.running_var", "layer1.num_batches_tracked"};
    int names_ok = st == PAR_OK && m.n_layers == 3 && m.n_views == 9;
    for (int k = 0; k < 5 && names_ok; k++)
        names_ok = strcmp(m.views[2 + k].name, bn_names[k]) == 0 &&
                   m.views[2 + k].count == (k < 4 ? 3u : 1u);
    par_check(names_ok && m.layers[1].kind == PAR_LAYER_BATCHNORM &&
                  m.layers[1].act == PAR_ACT_RELU && m.layers[0].act == PAR_ACT_NONE &&
                  m.layers[1].n_in == 12 && m.layers[1].stat_view == 4,
              "bn after a conv: 3 channels of 2x2, five views as torch's BatchNorm2d");
    double bnw[128];
    par_model_init(&m, PAR_F64, 1, bnw);
    const double want[13] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0};
    par_check(m.n_params <= 128 && memcmp(bnw + m.views[2].offset, want, sizeof want) == 0,
              "bn init: weight 1, bias 0, running_mean 0, running_var 1, count 0");

    const char *bad[] = {
        "cnn:1x28x28-bn-f-fc10", "cnn:1x28x28-c4-r-bn-f-fc10", "cnn:1x28x28-c4-m2-bn-f-fc10",
        "cnn:",                  "cnn:28x28-c4-f-fc10",     "cnn:1x28x28",
        "cnn:1x28x28-f",         "cnn:1x28x28-c4-fc10",     "cnn:1x28x28-c4-f-fc10-r",
        "cnn:1x28x28-r-f-fc10",  "cnn:1x28x28-c4-r-r-f-fc10", "cnn:1x28x28-m2-r-f-fc10",
        "cnn:1x28x28-c4k0-f-fc10", "cnn:1x4x4-c4k7-f-fc10",   "cnn:1x4x4-m5-f-fc10",
        "cnn:1x28x28-c4q2-f-fc10", "cnn:1x28x28--f-fc10",     "cnn:1x28x28-f-f-fc10",
        "cnn:1x28x28-f-c4-fc10", "cnn:1x28x28-c4-f-fc0",    "cnn:1x28x28-x-f-fc10"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        check_rejected(bad[k]);
}

static void test_act(void)
{
    const char *names[] = {"relu", "sigmoid", "tanh"};
    const par_act acts[] = {PAR_ACT_RELU, PAR_ACT_SIGMOID, PAR_ACT_TANH};
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        par_act a = PAR_ACT_NONE;
        ok = ok && par_act_parse(&a, names[k]) == PAR_OK && a == acts[k] &&
             strcmp(par_act_name(a), names[k]) == 0;
    }
    par_check(ok, "par_act_parse relu, sigmoid, tanh (and par_act_name back)");

    const char *bad[] = {"", "none", "Relu", "relu ", "softmax", "sigm"};
    ok = 1;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        par_act a = PAR_ACT_RELU;
        par_clear_error();
        const par_status st = par_act_parse(&a, bad[k]);
        if (st != PAR_ERR_CONFIG || a != PAR_ACT_RELU || !message_names(bad[k])) {
            printf("  \"%s\": status %d, message \"%s\"\n", bad[k], (int)st, par_last_error());
            ok = 0;
        }
    }
    par_check(ok, "par_act_parse rejects \"\", none, Relu, \"relu \", softmax, sigm");
}

// Draws of every layer lie in (-a, a) with a from the header's rule, biases
// are +0, and the largest |w| comes within 1% of a. (For n uniform draws
// P(max |w| < 0.99 a) = 0.99^n; the smallest layer here has 1280 draws, so
// that is below 3e-6, and the seed is fixed anyway.)
static void check_bounds(const par_model *m, const double *w, const char *what)
{
    int ok = 1;
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *L = &m->layers[l];
        const double fan = L->act == PAR_ACT_RELU ? (double)L->n_in : (double)(L->n_in + L->n_out);
        const double a = sqrt(6.0 / fan);
        const par_view *wv = &m->views[L->w_view], *bv = &m->views[L->b_view];
        double amax = 0;
        for (size_t i = 0; i < wv->count; i++) {
            const double x = w[wv->offset + i];
            if (!(x > -a && x < a)) {
                printf("  %s %s[%zu] = %.17g outside (-%.17g, %.17g)\n", what, wv->name, i, x, a,
                       a);
                ok = 0;
                break;
            }
            if (fabs(x) > amax) amax = fabs(x);
        }
        if (amax < 0.99 * a) {
            printf("  %s %s: max |w| = %.6g, a = %.6g: the scale is off\n", what, wv->name, amax,
                   a);
            ok = 0;
        }
        for (size_t i = 0; i < bv->count; i++) {
            if (w[bv->offset + i] != 0 || signbit(w[bv->offset + i])) {
                printf("  %s %s[%zu] = %g, expected +0\n", what, bv->name, i, w[bv->offset + i]);
                ok = 0;
                break;
            }
        }
    }
    char name[160];
    snprintf(name, sizeof name, "init %s: weights in (-a, a) reaching 0.99 a, biases +0", what);
    par_check(ok, name);
}

// Layer 0 of mlp:784-256-128-10 (n = 200704 draws of U(-a, a)):
//   E w = 0, Var w = a^2/3, E w^4 = a^4/5, so Var(w^2) = a^4/5 - a^4/9 = 4a^4/45.
//   Standard errors: mean  sqrt(a^2/3 / n)      = a / sqrt(3n),
//                    variance sqrt(4a^4/45 / n) = 2a^2 / sqrt(45n)
//   (the sample mean's own error changes the variance only at O(1/n)).
//   Histogram of 10 equal bins: each count/n has p = 0.1, SE sqrt(p(1-p)/n).
// Each statistic must be within 5 standard errors (two-sided P ~ 6e-7 each).
static void check_moments(const par_model *m, const double *w)
{
    const par_view *v = &m->views[m->layers[0].w_view];
    const double a = sqrt(6.0 / (double)m->layers[0].n_in);
    const size_t n = v->count;
    const double *x = w + v->offset;
    double sum = 0;
    size_t bins[10] = {0};
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        int b = (int)floor((x[i] + a) / (2 * a) * 10);
        bins[b < 0 ? 0 : b > 9 ? 9 : b]++;
    }
    const double mean = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    const double var = ss / (double)(n - 1);
    const double se_mean = a / sqrt(3.0 * (double)n);
    const double se_var = 2 * a * a / sqrt(45.0 * (double)n);
    printf("  layer0.weight: n %zu, mean %.3g (%.2f SE), var %.6g vs a^2/3 %.6g (%.2f SE)\n", n,
           mean, mean / se_mean, var, a * a / 3, (var - a * a / 3) / se_var);
    par_check(fabs(mean) < 5 * se_mean, "init layer0.weight sample mean within 5 SE of 0");
    par_check(fabs(var - a * a / 3) < 5 * se_var, "init layer0.weight sample variance within 5 SE "
                                                  "of a^2/3");
    const double se_bin = sqrt(0.1 * 0.9 / (double)n);
    double worst = 0;
    for (int b = 0; b < 10; b++) {
        const double z = fabs((double)bins[b] / (double)n - 0.1) / se_bin;
        if (z > worst) worst = z;
    }
    printf("  layer0.weight: worst of 10 histogram bins %.2f SE from n/10\n", worst);
    par_check(worst < 5, "init layer0.weight histogram: every tenth of (-a, a) within 5 SE");
}

static int same_view(const par_model *ma, const double *wa, const par_model *mb, const double *wb,
                     int view, size_t n)
{
    return memcmp(wa + ma->views[view].offset, wb + mb->views[view].offset, n * sizeof(double)) ==
           0;
}

static void test_init(void)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-256-128-10", PAR_ACT_RELU));
    const size_t N = m.n_params;
    double *w = malloc(N * sizeof *w), *w2 = malloc(N * sizeof *w2);
    float *f = malloc(N * sizeof *f), *f2 = malloc(N * sizeof *f2);

    par_model_init(&m, PAR_F64, 1, w);
    check_bounds(&m, w, "relu f64");
    check_moments(&m, w);

    par_model_init(&m, PAR_F64, 1, w2);
    par_check(memcmp(w, w2, N * sizeof *w) == 0, "init f64: same seed, identical bytes");
    par_model_init(&m, PAR_F64, 2, w2);
    size_t n_same = 0, n_w = 0; // weights only: biases are 0 for every seed
    for (int l = 0; l < m.n_layers; l++) {
        const par_view *v = &m.views[m.layers[l].w_view];
        for (size_t i = v->offset; i < v->offset + v->count; i++)
            n_same += w[i] == w2[i];
        n_w += v->count;
    }
    par_check(n_same < n_w / 1000, "init f64: another seed changes (almost) every weight");

    // f32: the f64 draw rounded once, element by element (biases too).
    par_model_init(&m, PAR_F32, 1, f);
    par_model_init(&m, PAR_F32, 1, f2);
    par_check(memcmp(f, f2, N * sizeof *f) == 0, "init f32: same seed, identical bytes");
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < N; i++) {
        const float r = (float)w[i];
        if (memcmp(&r, &f[i], sizeof r) != 0 && bad++ == 0) first = i;
    }
    if (!par_check(bad == 0, "init f32 == (float) init f64, every element bitwise"))
        printf("  %zu differ, first [%zu]: %.9g vs %.9g\n", bad, first, (double)f[first],
               (double)(float)w[first]);

    // Not ReLU: Xavier on every layer.
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-256-128-10", PAR_ACT_TANH));
    par_model_init(&m, PAR_F64, 1, w2);
    check_bounds(&m, w2, "tanh f64");

    // Element i of layer l depends on (seed, l, i) only: the layer after, or
    // the row count, must not move it.
    par_model ma, mb;
    PAR_REQUIRE(par_model_parse(&ma, "mlp:10-5-3", PAR_ACT_RELU));
    PAR_REQUIRE(par_model_parse(&mb, "mlp:10-5-7", PAR_ACT_RELU));
    par_model_init(&ma, PAR_F64, 3, w);
    par_model_init(&mb, PAR_F64, 3, w2);
    par_check(same_view(&ma, w, &mb, w2, 0, 50), "init: mlp:10-5-3 and mlp:10-5-7 have the same "
                                                 "layer0.weight");
    PAR_REQUIRE(par_model_parse(&mb, "mlp:10-6-3", PAR_ACT_RELU)); // a = sqrt(6/10) still
    par_model_init(&mb, PAR_F64, 3, w2);
    par_check(same_view(&ma, w, &mb, w2, 0, 50), "init: mlp:10-5-3 and mlp:10-6-3 share the first "
                                                 "50 elements of layer0.weight");
    // Same shape and same bound on layers 0 and 1: still different draws.
    PAR_REQUIRE(par_model_parse(&ma, "mlp:10-10-10-4", PAR_ACT_RELU));
    par_model_init(&ma, PAR_F64, 3, w);
    n_same = 0;
    for (size_t i = 0; i < 100; i++)
        n_same += w[ma.views[0].offset + i] == w[ma.views[2].offset + i];
    par_check(n_same == 0, "init: layers 0 and 1 of mlp:10-10-10-4 (same shape) are different "
                           "draws");
    free(w);
    free(w2);
    free(f);
    free(f2);
}

// The message is what a user reads, with no source location: that is kept
// apart ("par_model.c:123"), for the CLI to show with PARITY_DEBUG=1.
static void test_error_origin(void)
{
    par_model m;
    par_clear_error();
    const par_status st = par_model_parse(&m, "mlp:784-", PAR_ACT_RELU);
    const char *msg = par_last_error(), *at = par_last_error_origin();
    const char *colon = strchr(at, ':');
    if (!par_check(st == PAR_ERR_CONFIG && strstr(msg, "mlp:784-") && !strstr(msg, ".c:") &&
                       colon && colon - at > 2 && strncmp(colon - 2, ".c", 2) == 0 &&
                       colon[1] >= '1' && colon[1] <= '9',
                   "an error's message has no file:line; par_last_error_origin has it"))
        printf("  message \"%s\", origin \"%s\"\n", msg, at);
    par_clear_error();
    par_check(!par_last_error()[0] && !par_last_error_origin()[0], "par_clear_error clears both");
}

int main(void)
{
    test_error_origin();
    test_parse();
    test_parse_cnn();
    test_act();
    test_init();
    return par_test_exit();
}
