// The CUDA trainer's kernels (cuda_api.h): each thread runs one body of
// cuda_bodies.h for its indices, so every element is the CPU kernel's chain
// in the CPU's order; no thread reads what another writes in the same launch.
// Compiled with -fmad=false (no contraction of a*b + c): the only fmas are
// those the bodies write (ci/cuda_fma_check.sh checks the compiled code).
// Tests: tests/unit/test_cuda_bodies.c (the bodies, CPU), tests/gpu/test_cuda.c.
#include "cuda_api.h"
#include "cuda_bodies.h"

enum { THREADS = 256 };

// A grid of rows x cols threads: THREADS columns a block, one row a block
// row, both strided when the grid is smaller (no index division: the
// contraction check compares the kernels' fma counts, and a division's
// expansion would bring its own).
static dim3 grid(size_t rows, size_t cols)
{
    const size_t bx = (cols + THREADS - 1) / THREADS, by = rows;
    return dim3((unsigned)(bx < 1 ? 1 : bx > 65535 ? 65535 : bx),
                (unsigned)(by < 1 ? 1 : by > 65535 ? 65535 : by));
}

#define EACH2(r, c, rows, cols)                                                                \
    for (size_t r = blockIdx.y; r < (rows); r += gridDim.y)                                    \
        for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < (cols);             \
             c += (size_t)gridDim.x * blockDim.x)

#define KERNELS(REAL, SFX)                                                                     \
    __global__ void gather_##SFX(REAL *x, int32_t *labels, const REAL *data,                   \
                                 const int32_t *lab_all, const int32_t *idx, size_t B,         \
                                 size_t nf)                                                     \
    {                                                                                          \
        EACH2(s, f, B, nf) cuda_gather_##SFX(x, labels, data, lab_all, idx, nf, s, f);         \
    }                                                                                          \
    __global__ void forward_##SFX(REAL *y, const REAL *x, const REAL *WT, const REAL *b,       \
                                  int act, size_t B, size_t n_in, size_t n_out)                \
    {                                                                                          \
        EACH2(s, o, B, n_out) cuda_forward_##SFX(y, x, WT, b, act, n_in, n_out, s, o);         \
    }                                                                                          \
    __global__ void softmax_##SFX(REAL *dz, REAL *loss, const REAL *z, const int32_t *labels,  \
                                  size_t B, size_t K)                                          \
    {                                                                                          \
        EACH2(r, s, 1, B) cuda_softmax_xent_##SFX(dz, loss, z, labels, K, B, s);               \
    }                                                                                          \
    __global__ void backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *W, const REAL *y, \
                                        int act, size_t B, size_t n_in, size_t n_out)          \
    {                                                                                          \
        EACH2(s, i, B, n_in) cuda_backward_data_##SFX(dx, dz, W, y, act, n_in, n_out, s, i);   \
    }                                                                                          \
    /* Thread (o, i): weight (o, i), and bias o where i = 0. */                                \
    __global__ void grad_update_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, REAL *WT,            \
                                      const REAL *dz, const REAL *x, size_t wo, size_t bo,     \
                                      size_t B, size_t C, size_t n_in, size_t n_out,           \
                                      cuda_coef_##SFX k)                                       \
    {                                                                                          \
        EACH2(o, i, n_out, n_in) {                                                             \
            const size_t p = wo + o * n_in + i;                                                \
            const REAL gv = cuda_wgrad_##SFX(dz, x, B, C, n_in, n_out, o, i);                  \
            g[p] = gv;                                                                         \
            cuda_update_##SFX(w + p, m ? m + p : NULL, v ? v + p : NULL, gv, &k);              \
            WT[i * n_out + o] = w[p];                                                          \
            if (i == 0) {                                                                      \
                const size_t q = bo + o;                                                       \
                const REAL gb = cuda_bgrad_##SFX(dz, B, C, n_out, o);                          \
                g[q] = gb;                                                                     \
                cuda_update_##SFX(w + q, m ? m + q : NULL, v ? v + q : NULL, gb, &k);          \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    __global__ void transpose_##SFX(REAL *WT, const REAL *W, size_t n_in, size_t n_out)        \
    {                                                                                          \
        EACH2(o, i, n_out, n_in) WT[i * n_out + o] = W[o * n_in + i];                          \
    }                                                                                          \
    __global__ void loss_fold_##SFX(REAL *out, const REAL *loss, size_t B, size_t C)           \
    {                                                                                          \
        if (blockIdx.x == 0 && threadIdx.x == 0) *out = cuda_loss_fold_##SFX(loss, B, C);      \
    }                                                                                          \
    static cuda_coef_##SFX coef_##SFX(const par_optim_coef *k, double lr)                      \
    {                                                                                          \
        cuda_coef_##SFX c = {0, (REAL)lr, 0, 0, 0, 0, 0, 0, 0, 0};                             \
        if (k) {                                                                               \
            c.kind = (int)k->kind;                                                             \
            c.lr = (REAL)k->lr;                                                                \
            c.mu = (REAL)k->mu;                                                                \
            c.b1 = (REAL)k->b1;                                                                \
            c.b2 = (REAL)k->b2;                                                                \
            c.c1 = (REAL)k->c1;                                                                \
            c.c2 = (REAL)k->c2;                                                                \
            c.bc1 = (REAL)k->bc1;                                                              \
            c.bc2 = (REAL)k->bc2;                                                              \
            c.eps = (REAL)k->eps;                                                              \
        }                                                                                      \
        return c;                                                                              \
    }

KERNELS(float, f32)
KERNELS(double, f64)

// A launch of kernel NAME_f32 or NAME_f64 by dt, with the arguments cast to REAL *.
#define F32(p) ((float *)(p))
#define F64(p) ((double *)(p))
#define CF32(p) ((const float *)(p))
#define CF64(p) ((const double *)(p))

void par_cuda_gather(par_dtype dt, void *x, int32_t *labels, const void *data,
                     const int32_t *lab_all, const int32_t *idx, size_t B, size_t nf)
{
    if (dt == PAR_F32)
        gather_f32<<<grid(B, nf), THREADS>>>(F32(x), labels, CF32(data), lab_all, idx, B, nf);
    else
        gather_f64<<<grid(B, nf), THREADS>>>(F64(x), labels, CF64(data), lab_all, idx, B, nf);
}

void par_cuda_forward(par_dtype dt, void *y, const void *x, const void *WT, const void *b,
                      par_act act, size_t B, size_t n_in, size_t n_out)
{
    if (dt == PAR_F32)
        forward_f32<<<grid(B, n_out), THREADS>>>(F32(y), CF32(x), CF32(WT), CF32(b), (int)act, B,
                                                 n_in, n_out);
    else
        forward_f64<<<grid(B, n_out), THREADS>>>(F64(y), CF64(x), CF64(WT), CF64(b), (int)act, B,
                                                 n_in, n_out);
}

void par_cuda_softmax_xent(par_dtype dt, void *dz, void *loss, const void *z,
                           const int32_t *labels, size_t B, size_t K)
{
    if (dt == PAR_F32)
        softmax_f32<<<grid(1, B), THREADS>>>(F32(dz), F32(loss), CF32(z), labels, B, K);
    else
        softmax_f64<<<grid(1, B), THREADS>>>(F64(dz), F64(loss), CF64(z), labels, B, K);
}

void par_cuda_backward_data(par_dtype dt, void *dx, const void *dz, const void *W,
                            const void *y, par_act act, size_t B, size_t n_in, size_t n_out)
{
    if (dt == PAR_F32)
        backward_data_f32<<<grid(B, n_in), THREADS>>>(F32(dx), CF32(dz), CF32(W), CF32(y),
                                                      (int)act, B, n_in, n_out);
    else
        backward_data_f64<<<grid(B, n_in), THREADS>>>(F64(dx), CF64(dz), CF64(W), CF64(y),
                                                      (int)act, B, n_in, n_out);
}

void par_cuda_grad_update(par_dtype dt, void *w, void *g, void *m, void *v, void *WT,
                          const void *dz, const void *x, size_t wo, size_t bo, size_t B,
                          size_t C, size_t n_in, size_t n_out, const par_optim_coef *k,
                          double lr)
{
    if (dt == PAR_F32)
        grad_update_f32<<<grid(n_out, n_in), THREADS>>>(F32(w), F32(g), F32(m), F32(v), F32(WT),
                                                        CF32(dz), CF32(x), wo, bo, B, C, n_in,
                                                        n_out, coef_f32(k, lr));
    else
        grad_update_f64<<<grid(n_out, n_in), THREADS>>>(F64(w), F64(g), F64(m), F64(v), F64(WT),
                                                        CF64(dz), CF64(x), wo, bo, B, C, n_in,
                                                        n_out, coef_f64(k, lr));
}

void par_cuda_transpose(par_dtype dt, void *WT, const void *W, size_t n_in, size_t n_out)
{
    if (dt == PAR_F32)
        transpose_f32<<<grid(n_out, n_in), THREADS>>>(F32(WT), CF32(W), n_in, n_out);
    else
        transpose_f64<<<grid(n_out, n_in), THREADS>>>(F64(WT), CF64(W), n_in, n_out);
}

void par_cuda_loss_fold(par_dtype dt, void *out, const void *loss, size_t B, size_t C)
{
    if (dt == PAR_F32)
        loss_fold_f32<<<1, 1>>>(F32(out), CF32(loss), B, C);
    else
        loss_fold_f64<<<1, 1>>>(F64(out), CF64(loss), B, C);
}
