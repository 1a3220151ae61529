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
        EACH2(o, i, n_out, n_in)                                                               \
        cuda_dense_grad_update_##SFX(w, g, m, v, WT, dz, x, wo, bo, B, C, n_in, n_out, &k, o,  \
                                     i);                                                       \
    }                                                                                          \
    __global__ void transpose_##SFX(REAL *WT, const REAL *W, size_t n_in, size_t n_out)        \
    {                                                                                          \
        EACH2(o, i, n_out, n_in) WT[i * n_out + o] = W[o * n_in + i];                          \
    }                                                                                          \
    __global__ void conv_forward_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b,   \
                                       int act, par_layer ly, size_t n)                        \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_conv_forward_##SFX(y, x, W, b, act, &ly, t);                    \
    }                                                                                          \
    __global__ void conv_grad_part_##SFX(REAL *part, const REAL *dz, const REAL *x,            \
                                         par_layer ly, size_t B, size_t C, size_t nk, size_t n) \
    {                                                                                          \
        EACH2(k, p, nk, n) cuda_conv_grad_part_##SFX(part, dz, x, &ly, B, C, k, p);            \
    }                                                                                          \
    __global__ void conv_backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *W,          \
                                             const REAL *y, int act, par_layer ly, size_t n)   \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_conv_backward_data_##SFX(dx, dz, W, y, act, &ly, t);            \
    }                                                                                          \
    __global__ void conv_update_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, const REAL *part,    \
                                      par_layer ly, size_t wo, size_t bo, size_t nk, size_t n, \
                                      cuda_coef_##SFX k)                                       \
    {                                                                                          \
        EACH2(r, p, 1, n) cuda_conv_update_##SFX(w, g, m, v, part, &ly, wo, bo, nk, &k, p);    \
    }                                                                                          \
    __global__ void pool_forward_##SFX(REAL *y, const REAL *x, par_layer ly, size_t n)         \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_pool_forward_##SFX(y, x, &ly, t);                               \
    }                                                                                          \
    __global__ void pool_backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *y, int act, \
                                             par_layer ly, size_t n)                           \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_pool_backward_data_##SFX(dx, dz, y, act, &ly, t);               \
    }                                                                                          \
    __global__ void bn_sum_part_##SFX(REAL *part, const REAL *x, par_layer ly, size_t B,       \
                                      size_t C, size_t nk)                                     \
    {                                                                                          \
        EACH2(k, c, nk, ly.c_out) cuda_bn_sum_part_##SFX(part, x, &ly, B, C, k, c);            \
    }                                                                                          \
    __global__ void bn_sq_part_##SFX(REAL *part, const REAL *psum, const REAL *x, par_layer ly, \
                                     size_t B, size_t C, size_t nk)                            \
    {                                                                                          \
        EACH2(k, c, nk, ly.c_out) cuda_bn_sq_part_##SFX(part, psum, x, &ly, B, C, k, c);       \
    }                                                                                          \
    __global__ void bn_stats_##SFX(REAL *st, REAL *p, const REAL *psum, const REAL *psq,       \
                                   par_layer ly, size_t B, size_t C)                           \
    {                                                                                          \
        EACH2(r, c, 1, ly.c_out) cuda_bn_stats_##SFX(st, p, psum, psq, &ly, B, C, c);          \
    }                                                                                          \
    __global__ void bn_out_##SFX(REAL *y, const REAL *x, const REAL *p, const REAL *st,        \
                                 int act, par_layer ly, size_t n)                              \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_bn_out_##SFX(y, x, p, st, act, &ly, t);                         \
    }                                                                                          \
    __global__ void bn_grad_part_##SFX(REAL *pg, REAL *pb, const REAL *dz, const REAL *x,      \
                                       const REAL *st, par_layer ly, size_t B, size_t C,       \
                                       size_t nk)                                              \
    {                                                                                          \
        EACH2(k, c, nk, ly.c_out) cuda_bn_grad_part_##SFX(pg, pb, dz, x, st, &ly, B, C, k, c); \
    }                                                                                          \
    __global__ void bn_update_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, REAL *st,              \
                                    const REAL *pg, const REAL *pb, par_layer ly, size_t wo,   \
                                    size_t bo, size_t B, size_t C, cuda_coef_##SFX k)          \
    {                                                                                          \
        EACH2(r, c, 1, ly.c_out)                                                               \
        cuda_bn_update_##SFX(w, g, m, v, st, pg, pb, &ly, wo, bo, B, C, &k, c);                \
    }                                                                                          \
    __global__ void bn_backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *x,            \
                                           const REAL *st, int act, par_layer ly, size_t B,    \
                                           size_t n)                                           \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_bn_backward_data_##SFX(dx, dz, x, st, act, &ly, B, t);          \
    }                                                                                          \
    __global__ void loss_fold_##SFX(REAL *out, const REAL *loss, size_t B, size_t C)           \
    {                                                                                          \
        if (blockIdx.x == 0 && threadIdx.x == 0) *out = cuda_loss_fold_##SFX(loss, B, C);      \
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
                          size_t C, size_t n_in, size_t n_out, const par_cuda_update *u)
{
    if (dt == PAR_F32)
        grad_update_f32<<<grid(n_out, n_in), THREADS>>>(F32(w), F32(g), F32(m), F32(v), F32(WT),
                                                        CF32(dz), CF32(x), wo, bo, B, C, n_in,
                                                        n_out, cuda_coef_of_f32(u));
    else
        grad_update_f64<<<grid(n_out, n_in), THREADS>>>(F64(w), F64(g), F64(m), F64(v), F64(WT),
                                                        CF64(dz), CF64(x), wo, bo, B, C, n_in,
                                                        n_out, cuda_coef_of_f64(u));
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

// The CNN layers: each launch picks its dtype's kernel; the chunk parts' kernels
// run a grid of ceil(B / C) rows.
void par_cuda_conv_forward(par_dtype dt, void *y, const void *x, const void *W, const void *b,
                           par_act act, const par_layer *ly, size_t B)
{
    const size_t n = B * ly->n_out;
    if (dt == PAR_F32)
        conv_forward_f32<<<grid(1, n), THREADS>>>(F32(y), CF32(x), CF32(W), CF32(b), (int)act,
                                                  *ly, n);
    else
        conv_forward_f64<<<grid(1, n), THREADS>>>(F64(y), CF64(x), CF64(W), CF64(b), (int)act,
                                                  *ly, n);
}

void par_cuda_conv_backward(par_dtype dt, void *w, void *g, void *m, void *v, void *part,
                            void *dx, const void *dz, const void *x, par_act act_below,
                            const par_layer *ly, size_t wo, size_t bo, size_t B, size_t C,
                            const par_cuda_update *u)
{
    const size_t nk = (B + C - 1) / C, np = ly->n_rows * (ly->row_len + 1), n = B * ly->n_in;
    const void *W = (const char *)w + wo * par_dtype_size(dt);
    if (dt == PAR_F32) {
        conv_grad_part_f32<<<grid(nk, np), THREADS>>>(F32(part), CF32(dz), CF32(x), *ly, B, C,
                                                      nk, np);
        if (dx)
            conv_backward_data_f32<<<grid(1, n), THREADS>>>(F32(dx), CF32(dz), CF32(W), CF32(x),
                                                            (int)act_below, *ly, n);
        conv_update_f32<<<grid(1, np), THREADS>>>(F32(w), F32(g), F32(m), F32(v), CF32(part), *ly,
                                                  wo, bo, nk, np, cuda_coef_of_f32(u));
    } else {
        conv_grad_part_f64<<<grid(nk, np), THREADS>>>(F64(part), CF64(dz), CF64(x), *ly, B, C,
                                                      nk, np);
        if (dx)
            conv_backward_data_f64<<<grid(1, n), THREADS>>>(F64(dx), CF64(dz), CF64(W), CF64(x),
                                                            (int)act_below, *ly, n);
        conv_update_f64<<<grid(1, np), THREADS>>>(F64(w), F64(g), F64(m), F64(v), CF64(part), *ly,
                                                  wo, bo, nk, np, cuda_coef_of_f64(u));
    }
}

void par_cuda_pool_forward(par_dtype dt, void *y, const void *x, const par_layer *ly, size_t B)
{
    const size_t n = B * ly->n_out;
    if (dt == PAR_F32)
        pool_forward_f32<<<grid(1, n), THREADS>>>(F32(y), CF32(x), *ly, n);
    else
        pool_forward_f64<<<grid(1, n), THREADS>>>(F64(y), CF64(x), *ly, n);
}

void par_cuda_pool_backward(par_dtype dt, void *dx, const void *dz, const void *x,
                            par_act act_below, const par_layer *ly, size_t B)
{
    const size_t n = B * ly->n_in;
    if (dt == PAR_F32)
        pool_backward_data_f32<<<grid(1, n), THREADS>>>(F32(dx), CF32(dz), CF32(x),
                                                        (int)act_below, *ly, n);
    else
        pool_backward_data_f64<<<grid(1, n), THREADS>>>(F64(dx), CF64(dz), CF64(x),
                                                        (int)act_below, *ly, n);
}

void par_cuda_bn_forward(par_dtype dt, void *y, const void *x, void *p, void *st, void *part,
                         par_act act, const par_layer *ly, size_t B, size_t C)
{
    const size_t nk = (B + C - 1) / C, nc = ly->c_out, n = B * ly->n_out;
    if (dt == PAR_F32) {
        float *ps = F32(part), *pq = ps + nk * nc;
        bn_sum_part_f32<<<grid(nk, nc), THREADS>>>(ps, CF32(x), *ly, B, C, nk);
        bn_sq_part_f32<<<grid(nk, nc), THREADS>>>(pq, ps, CF32(x), *ly, B, C, nk);
        bn_stats_f32<<<grid(1, nc), THREADS>>>(F32(st), F32(p), ps, pq, *ly, B, C);
        bn_out_f32<<<grid(1, n), THREADS>>>(F32(y), CF32(x), CF32(p), CF32(st), (int)act, *ly,
                                            n);
    } else {
        double *ps = F64(part), *pq = ps + nk * nc;
        bn_sum_part_f64<<<grid(nk, nc), THREADS>>>(ps, CF64(x), *ly, B, C, nk);
        bn_sq_part_f64<<<grid(nk, nc), THREADS>>>(pq, ps, CF64(x), *ly, B, C, nk);
        bn_stats_f64<<<grid(1, nc), THREADS>>>(F64(st), F64(p), ps, pq, *ly, B, C);
        bn_out_f64<<<grid(1, n), THREADS>>>(F64(y), CF64(x), CF64(p), CF64(st), (int)act, *ly,
                                            n);
    }
}

void par_cuda_bn_backward(par_dtype dt, void *w, void *g, void *m, void *v, void *st, void *part,
                          void *dx, const void *dz, const void *x, par_act act_below,
                          const par_layer *ly, size_t wo, size_t bo, size_t B, size_t C,
                          const par_cuda_update *u)
{
    const size_t nk = (B + C - 1) / C, nc = ly->c_out, n = B * ly->n_in;
    if (dt == PAR_F32) {
        float *pg = F32(part), *pb = pg + nk * nc;
        bn_grad_part_f32<<<grid(nk, nc), THREADS>>>(pg, pb, CF32(dz), CF32(x), CF32(st), *ly, B,
                                                    C, nk);
        bn_update_f32<<<grid(1, nc), THREADS>>>(F32(w), F32(g), F32(m), F32(v), F32(st), pg, pb,
                                                *ly, wo, bo, B, C, cuda_coef_of_f32(u));
        if (dx)
            bn_backward_data_f32<<<grid(1, n), THREADS>>>(F32(dx), CF32(dz), CF32(x), CF32(st),
                                                          (int)act_below, *ly, B, n);
    } else {
        double *pg = F64(part), *pb = pg + nk * nc;
        bn_grad_part_f64<<<grid(nk, nc), THREADS>>>(pg, pb, CF64(dz), CF64(x), CF64(st), *ly, B,
                                                    C, nk);
        bn_update_f64<<<grid(1, nc), THREADS>>>(F64(w), F64(g), F64(m), F64(v), F64(st), pg, pb,
                                                *ly, wo, bo, B, C, cuda_coef_of_f64(u));
        if (dx)
            bn_backward_data_f64<<<grid(1, n), THREADS>>>(F64(dx), CF64(dz), CF64(x), CF64(st),
                                                          (int)act_below, *ly, B, n);
    }
}
