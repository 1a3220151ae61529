// bench_blas: would fast mode gain from a BLAS? parity's dense kernels
// (src/kernels, f32, one thread) against cblas_sgemm of the BLAS that
// libblas.so.3 points to (OpenBLAS when installed), on the layer shapes of
// the default MLP and of a wide one, batch 64: forward y = x W^T + b,
// input gradient dx = dz W, weight gradient dW = dz^T x (parity folds it in
// chunks of 8 as exact mode does; fast mode's single chain costs the same).
// Best of R repeats, GFLOP/s = 2 B n_in n_out / time. Prints figures; not a test.
// Usage: bench_blas [REPEATS]   (run with OPENBLAS_NUM_THREADS=1)
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "par_kernels.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *filled(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof *p);
    if (!p) exit(3);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

// out = seconds per call, the best of `reps` timed batches of `inner` calls.
#define BEST(out, reps, inner, call)                                                            \
    do {                                                                                        \
        out = 1e30;                                                                             \
        for (int r_ = 0; r_ < (reps); r_++) {                                                   \
            const double t0_ = now();                                                           \
            for (int k_ = 0; k_ < (inner); k_++) { call; }                                      \
            const double dt_ = (now() - t0_) / (inner);                                         \
            if (dt_ < out) out = dt_;                                                           \
        }                                                                                       \
    } while (0)

static void shape(size_t B, size_t n_in, size_t n_out, int reps)
{
    const size_t C = 8;
    float *x = filled(B * n_in, 1), *W = filled(n_out * n_in, 2), *b = filled(n_out, 3);
    float *dz = filled(B * n_out, 4), *y = filled(B * n_out, 5), *dx = filled(B * n_in, 6);
    float *dW = filled(n_out * n_in, 7), *db = filled(n_out, 8);
    float *WT = calloc(par_dense_wt_elems(n_in, n_out), sizeof *WT);
    if (!WT) exit(3);
    par_dense_transpose_f32(WT, W, n_in, n_out, 0, n_out);
    const double flop = 2.0 * (double)B * (double)n_in * (double)n_out;
    const int inner = (int)(2e8 / flop) + 1;
    const size_t n_chunks = (B + C - 1) / C;

    double pf, bf, pd, bd, pw, bw;
    BEST(pf, reps, inner, par_dense_forward_f32(y, x, WT, b, 0, B, 0, n_out, n_in, n_out));
    BEST(bf, reps, inner, {
        for (size_t s = 0; s < B; s++)
            for (size_t o = 0; o < n_out; o++) y[s * n_out + o] = b[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)n_out, (int)n_in, 1.0f,
                    x, (int)n_in, W, (int)n_in, 1.0f, y, (int)n_out);
    });
    BEST(pd, reps, inner, par_dense_backward_data_f32(dx, dz, W, 0, B, n_in, n_out));
    BEST(bd, reps, inner,
         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)n_in, (int)n_out,
                     1.0f, dz, (int)n_out, W, (int)n_in, 0.0f, dx, (int)n_in));
    BEST(pw, reps, inner,
         par_dense_backward_weights_f32(dW, db, dz, x, B, C, 0, n_chunks, 0, n_out, n_in, n_out,
                                        0));
    BEST(bw, reps, inner,
         cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n_out, (int)n_in, (int)B,
                     1.0f, dz, (int)n_out, x, (int)n_in, 0.0f, dW, (int)n_in));
    printf("%5zu -> %-5zu  forward %6.1f vs %6.1f   input grad %6.1f vs %6.1f   "
           "weight grad %6.1f vs %6.1f\n",
           n_in, n_out, flop / pf * 1e-9, flop / bf * 1e-9, flop / pd * 1e-9, flop / bd * 1e-9,
           flop / pw * 1e-9, flop / bw * 1e-9);
    free(x), free(W), free(b), free(dz), free(y), free(dx), free(dW), free(db), free(WT);
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    printf("GFLOP/s, f32, batch 64, one thread, best of %d: parity kernel vs cblas_sgemm\n", reps);
    shape(64, 784, 256, reps);
    shape(64, 256, 128, reps);
    shape(64, 128, 10, reps);
    shape(64, 1024, 1024, reps);
    return 0;
}
