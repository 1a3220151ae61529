// bench_layers: where a model's training step goes, layer by layer. One
// thread, exact mode, the active kernel set: each layer's forward, input
// gradient and weight gradient kernels (the engine's own ops, par_layers.h)
// on a batch of random pixels, after one whole forward and backward pass has
// filled every layer's inputs and output gradients. Per op the median of R
// timed calls and its GFLOP/s (2 multiply-adds' flops per tap: dense and
// conv; pooling and batchnorm count none). bench/layers.sh sets them against
// the FMA peak bench_peak measures in the same run. Prints figures; it is a
// benchmark, not a test.
// Usage: bench_layers [MODEL [BATCH [REPEATS [f32|f64]]]]
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
    par_model m;
    if (B < 1 || R < 1) {
        fprintf(stderr, "usage: bench_layers [MODEL [BATCH >= 1 [REPEATS >= 1 [f32|f64]]]]\n");
        return 2;
    }
    if (par_model_parse(&m, spec, PAR_ACT_RELU) != PAR_OK) {
        fprintf(stderr, "bench_layers: %s\n", par_last_error());
        return 2;
    }
    const size_t sz = par_dtype_size(dt);
    void *w = malloc(m.n_params * sz), *x = malloc(B * m.n_inputs * sz);
    int32_t *labels = malloc(B * sizeof *labels);
    double *t = malloc((size_t)R * sizeof *t);
    if (!w || !x || !labels || !t) return 1;
    par_model_init(&m, dt, 42, w);
    for (size_t i = 0; i < B * m.n_inputs; i++)   // pixels in [0, 1], a fixed pattern
        par_put_real(dt, x, i, (double)((i * 2654435761u) % 256) / 255.0);
    for (size_t s = 0; s < B; s++) labels[s] = (int32_t)(s % m.n_classes);
    const par_run_cfg cfg = {.model = &m, .dtype = dt, .mode = PAR_MODE_EXACT, .batch = B,
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
    printf("# model %s, batch %zu, %s, exact, 1 thread, kernels %s, median of %d\n", spec, B,
           par_dtype_name(dt), par_kernels_active()->name, R);
    printf("layer\tkind\top\tms\tGFLOP/s\n");
    double total = 0, total_flops = 0;
    for (int l = 0; l < m.n_layers; l++) {
        const par_layer *ly = &m.layers[l];
        for (int op = 0; op < OP_N; op++) {
            if (op == OP_WEIGHT_GRAD && ly->n_rows == 0) continue;
            if (op == OP_INPUT_GRAD && l == 0) continue;   // no gradient of the pixels
            run_op(&e, &c, l, op, B);   // warm: caches, first touches
            for (int r = 0; r < R; r++) {
                const double t0 = par_now();
                run_op(&e, &c, l, op, B);
                t[r] = par_now() - t0;
            }
            const double med = par_median_sort(t, R), f = flops(ly, B);
            total += med;
            total_flops += f;
            printf("%d\t%s\t%s\t%.3f\t", l, e.ops[l]->name, op_names[op], 1e3 * med);
            if (f > 0) printf("%.2f\n", f / med * 1e-9);
            else printf("-\n");
        }
    }
    printf("all\t-\t-\t%.3f\t%.2f\n", 1e3 * total, total_flops / total * 1e-9);
    par_engine_free(&e);
    free(w);
    free(x);
    free(labels);
    free(t);
    return 0;
}
