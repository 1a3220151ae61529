// bench_layers: where a model's training step goes, layer by layer. One
// thread, exact mode (or fast: then only the weight gradients differ, one
// chain over the batch instead of a chain a chunk), the active kernel set:
// each layer's forward, input gradient and weight gradient kernels (the
// engine's own ops, par_layers.h) on a batch of random pixels, after one
// whole forward and backward pass has filled every layer's inputs and output
// gradients. R rounds, each of one timing of the FMA peak loop (peak.h;
// x86-64 with AVX2+FMA) and, for every op, one call that warms it and one
// timed call: a burst of load on a shared machine then slows one round of
// every op rather than all the calls of one. Per op the median over the
// rounds of its time, of its GFLOP/s (2 flops a multiply-add: dense and conv
// taps; pooling and batchnorm count none) and of its GFLOP/s over the same
// round's peak; and, as "best", its fastest round's GFLOP/s over the fastest
// round of the peak loop (load only ever adds time, so the best of each is
// what the kernel does undisturbed).
// Prints figures; it is a benchmark, not a test.
// Usage: bench_layers [MODEL [BATCH [REPEATS [f32|f64 [exact|fast]]]]]
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_engine.h"
#include "par_kernels.h"
#include "par_layers.h"
#include "par_model.h"
#include "par_sort.h"
#include "par_time.h"
#include "peak.h"

#define CIFAR_CNN "cnn:3x32x32-c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-c128k3p1-bn-r-m2-f-fc256-r-fc10"

enum { OP_FORWARD, OP_INPUT_GRAD, OP_WEIGHT_GRAD, OP_N };
static const char *const op_names[OP_N] = {"forward", "input gradient", "weight gradient"};

// Flops of one op of layer ly on B samples (0: none counted); forward, input
// and weight gradient each take every tap once.
static double flops(const par_layer *ly, size_t B)
{
    if (ly->kind != PAR_LAYER_DENSE && ly->kind != PAR_LAYER_CONV2D) return 0;
    // n_rows x row_len weights, each used once per output position and sample
    const double positions = ly->kind == PAR_LAYER_CONV2D ? (double)(ly->h_out * ly->w_out) : 1;
    return 2.0 * (double)B * positions * (double)ly->n_rows * (double)ly->row_len;
}

// The one-thread f32 FMA peak, GFLOP/s, over about 10 ms; 0 where the CPU
// or the build has no AVX2+FMA.
static double peak_gflops(void)
{
#ifdef PAR_HAVE_X86_64
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    const long iters = 4000000;
    volatile double sink;
    const double t0 = par_now();
    sink = peak_f32(iters);
    (void)sink;
    return 2.0 * 8 * 12 * (double)iters / (par_now() - t0) * 1e-9;
#else
    return 0;
#endif
}

// One call of op on layer l with every sample of the batch, one thread.
static void run_op(par_engine *e, const par_layer_ctx *c, int l, int op, size_t B)
{
    if (op == OP_FORWARD) e->ops[l]->forward(c, l, 0, B);
    else if (op == OP_INPUT_GRAD) e->ops[l]->backward(c, l, 0, B);
    else par_engine_layer_grads(e, l, B, 0, par_n_chunks(B, e->C), 0, e->m->layers[l].n_rows, 0);
}

int main(int argc, char **argv)
{
    const char *spec = argc > 1 ? argv[1] : CIFAR_CNN;
    const size_t B = argc > 2 ? (size_t)atol(argv[2]) : 64;
    const int R = argc > 3 ? atoi(argv[3]) : 15;
    const par_dtype dt = argc > 4 && strcmp(argv[4], "f64") == 0 ? PAR_F64 : PAR_F32;
    const par_mode mode = argc > 5 && strcmp(argv[5], "fast") == 0 ? PAR_MODE_FAST : PAR_MODE_EXACT;
    par_model m;
    const int bad_dt = argc > 4 && strcmp(argv[4], "f32") != 0 && strcmp(argv[4], "f64") != 0;
    const int bad_mode = argc > 5 && strcmp(argv[5], "exact") != 0 && strcmp(argv[5], "fast") != 0;
    if (B < 1 || R < 1 || bad_dt || bad_mode) {
        fprintf(stderr, "usage: bench_layers [MODEL [BATCH >= 1 [REPEATS >= 1 [f32|f64 "
                        "[exact|fast]]]]]\n");
        return 2;
    }
    if (par_model_parse(&m, spec, PAR_ACT_RELU) != PAR_OK) {
        fprintf(stderr, "bench_layers: %s\n", par_last_error());
        return 2;
    }
    const size_t sz = par_dtype_size(dt);
    void *w = malloc(m.n_params * sz), *x = malloc(B * m.n_inputs * sz);
    int32_t *labels = malloc(B * sizeof *labels);
    if (!w || !x || !labels) return 1;
    par_model_init(&m, dt, 42, w);
    for (size_t i = 0; i < B * m.n_inputs; i++)   // pixels in [0, 1], a fixed pattern
        par_put_real(dt, x, i, (double)((i * 2654435761u) % 256) / 255.0);
    for (size_t s = 0; s < B; s++) labels[s] = (int32_t)(s % m.n_classes);
    const par_run_cfg cfg = {.model = &m, .dtype = dt, .mode = mode, .batch = B,
                             .chunk = 8, .lr = 0.01, .threads = 1, .init_params = w};
    par_engine e;
    if (par_engine_init(&e, &cfg) != PAR_OK) {
        fprintf(stderr, "bench_layers: %s\n", par_last_error());
        return 1;
    }
    const par_batch batch = {x, labels, B, NULL, NULL};
    par_engine_forward_backward(&e, &batch, 0, B, 1);   // every a[l] and d[l] filled
    const par_layer_ctx c = {.e = &e, .t = 0, .T = 1, .scratch = e.scratch,
                             .ks = par_kernels_active()};
    // The ops (each run once: first touches), then R rounds.
    enum { MAX_OPS = 3 * PAR_MAX_LAYERS };
    int op_l[MAX_OPS], op_k[MAX_OPS], n_ops = 0;
    for (int l = 0; l < m.n_layers; l++)
        for (int op = 0; op < OP_N; op++) {
            if (op == OP_WEIGHT_GRAD && m.layers[l].n_rows == 0) continue;
            if (op == OP_INPUT_GRAD && l == 0) continue;   // no gradient of the pixels
            run_op(&e, &c, l, op, B);
            op_l[n_ops] = l, op_k[n_ops++] = op;
        }
    double *t = malloc((size_t)R * n_ops * sizeof *t);
    double *frac = malloc((size_t)R * n_ops * sizeof *frac);
    double *peak = malloc((size_t)R * sizeof *peak), *col = malloc((size_t)R * sizeof *col);
    if (!t || !frac || !peak || !col) return 1;
    for (int r = 0; r < R; r++) {
        peak[r] = peak_gflops();
        for (int i = 0; i < n_ops; i++) {
            run_op(&e, &c, op_l[i], op_k[i], B);   // warm again: the op's own data in cache
            const double t0 = par_now();
            run_op(&e, &c, op_l[i], op_k[i], B);
            t[i * R + r] = par_now() - t0;
            const double f = flops(&m.layers[op_l[i]], B);
            frac[i * R + r] = peak[r] > 0 && f > 0 ? f / t[i * R + r] * 1e-9 / peak[r] : 0;
        }
    }
    const double peak_med = par_median_sort(peak, R);   // peak sorted ascending
    const double peak_best = peak[R - 1];
    printf("# model %s, batch %zu, %s, %s, 1 thread, kernels %s, medians of %d rounds; "
           "peak f32 1 thread %.1f GFLOP/s (best %.1f)\n",
           spec, B, par_dtype_name(dt), mode == PAR_MODE_FAST ? "fast" : "exact",
           par_kernels_active()->name, R, peak_med, peak_best);
    printf("layer\tkind\top\tms\tGFLOP/s\t%% peak\tbest %% peak\n");
    double total = 0, total_best = 0, total_flops = 0;
    for (int i = 0; i < n_ops; i++) {
        const int l = op_l[i];
        const double f = flops(&m.layers[l], B);
        for (int r = 0; r < R; r++) col[r] = t[i * R + r];
        const double med = par_median_sort(col, R), best = col[0];   // col sorted ascending
        total += med;
        total_best += best;
        total_flops += f;
        printf("%d\t%s\t%s\t%.3f\t", l, e.ops[l]->name, op_names[op_k[i]], 1e3 * med);
        for (int r = 0; r < R; r++) col[r] = f / t[i * R + r] * 1e-9;
        if (f > 0) printf("%.2f\t", par_median_sort(col, R));
        else printf("-\t");
        for (int r = 0; r < R; r++) col[r] = frac[i * R + r];
        if (f > 0 && peak_med > 0) printf("%.0f%%\t", 100 * par_median_sort(col, R));
        else printf("-\t");
        if (f > 0 && peak_best > 0) printf("%.0f%%\n", 100 * f / best * 1e-9 / peak_best);
        else printf("-\n");
    }
    printf("all\t-\t-\t%.3f\t%.2f\t", 1e3 * total, total_flops / total * 1e-9);
    if (peak_med > 0) printf("%.0f%%\t", 100 * total_flops / total * 1e-9 / peak_med);
    else printf("-\t");
    if (peak_best > 0) printf("%.0f%%\n", 100 * total_flops / total_best * 1e-9 / peak_best);
    else printf("-\n");
    free(frac);
    free(peak);
    free(col);
    par_engine_free(&e);
    free(w);
    free(x);
    free(labels);
    free(t);
    return 0;
}
