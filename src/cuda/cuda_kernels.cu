// The CUDA trainer's kernels (cuda_api.h): each thread runs the bodies of
// cuda_bodies.h for its indices, so every element is the CPU kernel's chain
// in the CPU's order. The tiled kernels (dense and conv forward, the conv
// gradients, batchnorm's chunk chains) first stage their operands in
// shared memory, the block's threads each a share, then run the chains on
// them after a __syncthreads; otherwise no thread reads what another writes
// in the same launch. Compiled with -fmad=false (no contraction of a*b + c):
// the only fmas are those the bodies write (ci/cuda_fma_check.py checks the
// compiled code). Tests: tests/unit/test_cuda_bodies.c (the bodies, CPU),
// tests/gpu/test_cuda.c (on the device, and on cuda_emu.c's host emulation
// of the same blocks).
#include "cuda_api.h"
#include "cuda_bodies.h"

enum { THREADS = 256 };
// The dense forward's tile: DF_S samples x DF_O outputs a block, one thread
// each, inputs staged DF_K at a time.
enum { DF_S = 8, DF_O = 8, DF_K = 128 };
enum { DF_NT = DF_S * DF_O, DF_L = DF_S * DF_K / DF_NT };   // threads; values a thread stages
// Batchnorm's chunk chains (bn_chain_): a block of BN_THREADS, values staged
// BN_T at a time; the chain's kind.
enum { BN_THREADS = 128, BN_T = 1024 };
enum { BN_SUM, BN_SQ, BN_GRAD };

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
                                 size_t nf)                                                    \
    {                                                                                          \
        EACH2(s, f, B, nf) cuda_gather_##SFX(x, labels, data, lab_all, idx, nf, s, f);         \
    }                                                                                          \
    /* Inputs k0 .. k0 + DF_K - 1 of the dense forward's tile (samples from s0, outputs        \
       from o0) into registers: thread t's elements e = t + j DF_NT of the DF_S x DF_K         \
       rows of x and of W (row e / DF_K), 0 outside the batch, the outputs or n_in. */         \
    __device__ static void df_fetch_##SFX(REAL *px, REAL *pw, const REAL *x, const REAL *W,    \
                                          size_t B, size_t n_in, size_t n_out, size_t s0,      \
                                          size_t o0, size_t k0)                                \
    {                                                                                          \
        for (unsigned j = 0; j < DF_L; j++) {                                                  \
            const unsigned e = threadIdx.x + j * DF_NT, r = e / DF_K, k = e % DF_K;            \
            px[j] = s0 + r < B && k0 + k < n_in ? x[(s0 + r) * n_in + k0 + k] : 0;             \
            pw[j] = o0 + r < n_out && k0 + k < n_in ? W[(o0 + r) * n_in + k0 + k] : 0;         \
        }                                                                                      \
    }                                                                                          \
    /* Block (blockIdx.y, blockIdx.x): samples DF_S by, outputs DF_O bx; thread (s, o) of      \
       the tile runs output (s0 + s, o0 + o)'s chain over tiles of DF_K inputs, which the      \
       block stages in shared memory (rows of x and of W), the next tile's values loaded       \
       into registers while the current one is used. Outside the batch or the outputs, a       \
       zero is staged and the chain is not stored. */                                          \
    __global__ void __launch_bounds__(DF_NT)                                                   \
        forward_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b, int act, size_t B, \
                      size_t n_in, size_t n_out)                                               \
    {                                                                                          \
        __shared__ REAL xs[DF_S][DF_K + 1], ws[DF_O][DF_K + 1];                                \
        const unsigned t = threadIdx.x, ts = t / DF_O, to = t % DF_O;                          \
        const size_t s0 = (size_t)blockIdx.y * DF_S, o0 = (size_t)blockIdx.x * DF_O;           \
        REAL px[DF_L], pw[DF_L];                                                               \
        df_fetch_##SFX(px, pw, x, W, B, n_in, n_out, s0, o0, 0);                               \
        REAL acc = o0 + to < n_out ? b[o0 + to] : 0;                                           \
        for (size_t k0 = 0; k0 < n_in; k0 += DF_K) {                                           \
            for (unsigned j = 0; j < DF_L; j++) {                                              \
                const unsigned e = t + j * DF_NT;                                              \
                xs[e / DF_K][e % DF_K] = px[j];                                                \
                ws[e / DF_K][e % DF_K] = pw[j];                                                \
            }                                                                                  \
            __syncthreads();                                                                   \
            const size_t k1 = k0 + DF_K;                                                       \
            if (k1 < n_in) df_fetch_##SFX(px, pw, x, W, B, n_in, n_out, s0, o0, k1);           \
            acc = cuda_dot_run_##SFX(acc, xs[ts], ws[to], k1 < n_in ? DF_K : n_in - k0);       \
            __syncthreads();                                                                   \
        }                                                                                      \
        if (s0 + ts < B && o0 + to < n_out)                                                    \
            y[(s0 + ts) * n_out + o0 + to] = cuda_act_##SFX(acc, act);                         \
    }                                                                                          \
    __global__ void softmax_##SFX(REAL *dz, REAL *loss, const REAL *z, const int32_t *labels,  \
                                  size_t B, size_t Bt, size_t K)                               \
    {                                                                                          \
        EACH2(r, s, 1, B) cuda_softmax_xent_##SFX(dz, loss, z, labels, K, Bt, s);              \
    }                                                                                          \
    __global__ void backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *W, const REAL *y, \
                                        int act, size_t B, size_t n_in, size_t n_out)          \
    {                                                                                          \
        EACH2(s, i, B, n_in) cuda_backward_data_##SFX(dx, dz, W, y, act, n_in, n_out, s, i);   \
    }                                                                                          \
    /* Thread (o, i): weight (o, i), and bias o where i = 0. */                                \
    __global__ void grad_update_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, const REAL *dz,      \
                                      const REAL *x, size_t wo, size_t bo, size_t B, size_t C, \
                                      size_t n_in, size_t n_out, cuda_coef_##SFX k)            \
    {                                                                                          \
        EACH2(o, i, n_out, n_in)                                                               \
        cuda_dense_grad_update_##SFX(w, g, m, v, dz, x, wo, bo, B, C, n_in, n_out, &k, o, i);  \
    }                                                                                          \
    __global__ void conv_forward_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b,   \
                                       int act, par_layer ly, size_t n)                        \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_conv_forward_##SFX(y, x, W, b, act, &ly, t);                    \
    }                                                                                          \
    /* Conv forward, one tile (cuda_conv_tile) a block: blockIdx (x, y, z) = (tile,            \
       output channels / CF_CO, sample); thread t runs position p0 + t. Each round             \
       stages CI input channels' patches and weights in shared memory, then continues          \
       the position's CF_CO chains over their taps (the bodies cf_stage, cf_run). */           \
    __global__ void __launch_bounds__(CF_TP)                                                   \
        conv_tile_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b, int act,         \
                        par_layer ly, cuda_conv_tile ct)                                       \
    {                                                                                          \
        extern __shared__ __align__(16) unsigned char cf_smem[];                               \
        REAL *xp = (REAL *)cf_smem, *wp = xp + ct.CI * ct.PH * ct.PW;                          \
        const size_t s = blockIdx.z, co0 = (size_t)blockIdx.y * CF_CO, P = ly.h_out * ly.w_out; \
        const size_t p0 = (size_t)blockIdx.x * ct.TP, p = p0 + threadIdx.x;                    \
        const size_t oh0 = p0 / ly.w_out;                                                      \
        const bool live = threadIdx.x < ct.TP && p < P;                                        \
        const size_t base = (p / ly.w_out - oh0) * ly.stride * ct.PW + p % ly.w_out * ly.stride; \
        REAL acc[CF_CO];                                                                       \
        cuda_cf_init_##SFX(acc, b, &ly, co0);                                                  \
        for (size_t ci0 = 0; ci0 < ly.c_in; ci0 += ct.CI) {                                    \
            const size_t nci = ly.c_in - ci0 < ct.CI ? ly.c_in - ci0 : ct.CI;                  \
            cuda_cf_stage_##SFX(xp, wp, x + s * ly.n_in, W, &ly, &ct, oh0, co0, ci0, nci,      \
                                threadIdx.x, blockDim.x);                                      \
            __syncthreads();                                                                   \
            if (live) cuda_cf_run_##SFX(acc, xp, wp, &ly, &ct, base, nci);                     \
            __syncthreads();                                                                   \
        }                                                                                      \
        if (live) cuda_cf_store_##SFX(y + s * ly.n_out, acc, act, &ly, co0, p);                \
    }                                                                                          \
    /* Conv weight gradient, chunk parts, one tile (cuda_conv_wtile_of) a block:               \
       blockIdx (x, y, z) = (input channels / CI, output channels / CF_CO, chunk k).           \
       Thread t < nci K K runs the CF_CO chains of tap t % (K K) of channel ci0 + t /          \
       (K K), and thread nci K K (where ci0 = 0) the biases', over the chunk's samples         \
       ascending and, TP at a time, their positions: each round stages the positions'          \
       patches and output gradient in shared memory (the bodies cw_stage, cw_run). */          \
    __global__ void __launch_bounds__(CF_TP)                                                   \
        conv_wtile_##SFX(REAL *part, size_t stride, size_t qw, size_t qb, const REAL *dz,      \
                         const REAL *x, par_layer ly, cuda_conv_tile ct, size_t B, size_t C)   \
    {                                                                                          \
        extern __shared__ __align__(16) unsigned char cf_smem[];                               \
        REAL *xp = (REAL *)cf_smem, *dzt = xp + ct.CI * ct.PH * ct.PW;                         \
        const size_t ci0 = (size_t)blockIdx.x * ct.CI, co0 = (size_t)blockIdx.y * CF_CO;       \
        const size_t k = blockIdx.z, t = threadIdx.x, K = ly.K, P = ly.h_out * ly.w_out;       \
        const size_t nci = ly.c_in - ci0 < ct.CI ? ly.c_in - ci0 : ct.CI;                      \
        const bool wt = t < nci * K * K, bias = t == nci * K * K && ci0 == 0;                  \
        const size_t tc = t / (K * K), tkh = t % (K * K) / K, tkw = t % K;   /* wt's tap */    \
        REAL g[CF_CO];                                                                         \
        for (int r = 0; r < CF_CO; r++) g[r] = 0;                                              \
        for (size_t s = k * C; s < cuda_chunk_end(k, C, B); s++)                               \
            for (size_t p0 = 0; p0 < P; p0 += ct.TP) {                                         \
                const size_t n = P - p0 < ct.TP ? P - p0 : ct.TP, oh0 = p0 / ly.w_out;         \
                cuda_cw_stage_##SFX(xp, dzt, x + s * ly.n_in, dz + s * ly.n_out, &ly, &ct,     \
                                    oh0, p0, n, co0, ci0, nci, threadIdx.x, blockDim.x);       \
                __syncthreads();                                                               \
                if (wt)                                                                        \
                    cuda_cw_run_##SFX(g, xp, dzt, &ly, &ct, oh0, p0, n, tc, tkh, tkw);         \
                else if (bias)                                                                 \
                    cuda_cw_bias_run_##SFX(g, dzt, n);                                         \
                __syncthreads();                                                               \
            }                                                                                  \
        if (wt || bias) cuda_cw_store_##SFX(part, stride, qw, qb, g, &ly, k, co0, ci0, nci, t); \
    }                                                                                          \
    __global__ void conv_grad_part_##SFX(REAL *part, size_t stride, size_t qw, size_t qb,      \
                                         const REAL *dz, const REAL *x, par_layer ly, size_t B, \
                                         size_t C, size_t nk, size_t n)                        \
    {                                                                                          \
        EACH2(k, p, nk, n)                                                                     \
        cuda_conv_grad_part_##SFX(part, stride, qw, qb, dz, x, &ly, B, C, k, p);               \
    }                                                                                          \
    __global__ void conv_backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *W,          \
                                             const REAL *y, int act, par_layer ly, size_t n)   \
    {                                                                                          \
        EACH2(r, t, 1, n) cuda_conv_backward_data_##SFX(dx, dz, W, y, act, &ly, t);            \
    }                                                                                          \
    /* Conv input gradient, one tile (cuda_conv_dtile_of) a block: blockIdx (x, y, z) =     \
       (input rows / TR, input channels / CD_G, sample); thread t runs input position t of    \
       the rows, CD_G chains, over the weights and output gradient the block staged in        \
       shared memory once (the bodies cd_stage, cd_run, cd_store). */                         \
    __global__ void __launch_bounds__(CD_TP)                                                   \
        conv_dtile_##SFX(REAL *dx, const REAL *dz, const REAL *W, const REAL *y, int act,      \
                         par_layer ly, cuda_conv_dtile dt)                                     \
    {                                                                                          \
        extern __shared__ __align__(16) unsigned char cf_smem[];                               \
        REAL *ws = (REAL *)cf_smem, *dp = ws + ly.K * ly.K * ly.c_out * CD_G;                  \
        const size_t s = blockIdx.z, ci0 = (size_t)blockIdx.y * CD_G;                          \
        const size_t ih0 = (size_t)blockIdx.x * dt.TR;                                         \
        const unsigned t = threadIdx.x, ir = t / (unsigned)ly.w_in, iw = t % (unsigned)ly.w_in; \
        cuda_cd_stage_##SFX(ws, dp, dz + s * ly.n_out, W, &ly, &dt, ih0, ci0, t, blockDim.x);  \
        __syncthreads();                                                                       \
        if (ir < dt.TR && ih0 + ir < ly.h_in) {                                                \
            REAL acc[CD_G];                                                                    \
            cuda_cd_run_##SFX(acc, ws, dp, &ly, &dt, ih0, ih0 + ir, iw);                       \
            cuda_cd_store_##SFX(dx + s * ly.n_in, y + s * ly.n_in, acc, act, &ly, ci0, ih0 + ir, \
                                iw);                                                           \
        }                                                                                      \
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
    /* Values j0 .. j0 + n - 1 of chunk k's values of channel c (samples from s0, then         \
       positions; P a sample) into v, and of dz into d where dz is not NULL: thread t of       \
       the nt from warp 1 on stages every (nt)th. */                                           \
    __device__ static void bn_stage_##SFX(REAL *v, REAL *d, const REAL *x, const REAL *dz,     \
                                          size_t nc, size_t c, size_t P, size_t s0,            \
                                          size_t j0, size_t n)                                 \
    {                                                                                          \
        const size_t nt = BN_THREADS - 32;                                                     \
        for (size_t e = threadIdx.x - 32; e < n; e += nt) {                                    \
            const size_t j = j0 + e, at = ((s0 + j / P) * nc + c) * P + j % P;                 \
            v[e] = x[at];                                                                      \
            if (dz) d[e] = dz[at];                                                             \
        }                                                                                      \
    }                                                                                          \
    /* Block (c, k): chunk k's chain of channel c of kind BN_SUM, BN_SQ or BN_GRAD (the        \
       bodies' sum_run, sq_run, grad_run) over the chunk's values in order (samples, then      \
       positions), BN_T at a time: warps 1.. stage the next values (x, and dz for the          \
       gradient) in shared memory while thread 0 continues the chain over the current          \
       ones. aux: the sums' parts (BN_SQ), the statistics st (BN_GRAD). Into p0[k nc + c]      \
       (and p1 for the gradient's dbeta part), as bn_sum_part, bn_sq_part, bn_grad_part. */    \
    __global__ void __launch_bounds__(BN_THREADS)                                              \
        bn_chain_##SFX(REAL *p0, REAL *p1, const REAL *x, const REAL *dz, const REAL *aux,     \
                       par_layer ly, size_t B, size_t Bt, size_t C, int kind)                  \
    {                                                                                          \
        __shared__ REAL vs[2][BN_T], ds[2][BN_T];                                              \
        const size_t c = blockIdx.x, k = blockIdx.y, nc = ly.c_out, P = ly.h_out * ly.w_out;   \
        const size_t s0 = k * C, m = (cuda_chunk_end(k, C, B) - s0) * P;                       \
        const size_t nt = (m + BN_T - 1) / BN_T;                                               \
        const REAL *dzk = kind == BN_GRAD ? dz : NULL;                                         \
        if (threadIdx.x >= 32)                                                                 \
            bn_stage_##SFX(vs[0], ds[0], x, dzk, nc, c, P, s0, 0, m < BN_T ? m : BN_T);        \
        REAL u = 0, ub = 0, mean = 0, inv = 0;                                                 \
        if (threadIdx.x == 0 && kind == BN_SQ) mean = cuda_bn_mean_##SFX(aux, &ly, Bt, C, c);  \
        if (threadIdx.x == 0 && kind == BN_GRAD) {                                             \
            mean = aux[nc + c];                                                                \
            inv = aux[4 * nc + c];                                                             \
        }                                                                                      \
        __syncthreads();                                                                       \
        for (size_t i = 0; i < nt; i++) {                                                      \
            const size_t j0 = i * BN_T, n = m - j0 < BN_T ? m - j0 : BN_T;                     \
            if (threadIdx.x == 0) {                                                            \
                const REAL *v = vs[i % 2];                                                     \
                if (kind == BN_SUM)                                                            \
                    u = cuda_sum_run_##SFX(u, v, n);                                           \
                else if (kind == BN_SQ)                                                        \
                    u = cuda_sq_run_##SFX(u, v, mean, n);                                      \
                else                                                                           \
                    cuda_grad_run_##SFX(&u, &ub, ds[i % 2], v, mean, inv, n);                  \
            } else if (threadIdx.x >= 32 && i + 1 < nt) {                                      \
                const size_t j1 = j0 + BN_T, n1 = m - j1 < BN_T ? m - j1 : BN_T;               \
                bn_stage_##SFX(vs[(i + 1) % 2], ds[(i + 1) % 2], x, dzk, nc, c, P, s0, j1, n1); \
            }                                                                                  \
            __syncthreads();                                                                   \
        }                                                                                      \
        if (threadIdx.x == 0) {                                                                \
            p0[k * nc + c] = u;                                                                \
            if (kind == BN_GRAD) p1[k * nc + c] = ub;                                          \
        }                                                                                      \
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
    __global__ void dense_grad_part_##SFX(REAL *part, size_t stride, size_t wo, size_t bo,     \
                                          const REAL *dz, const REAL *x, size_t B, size_t C,   \
                                          size_t n_in, size_t n_out, size_t nk)                \
    {                                                                                          \
        EACH2(r, t, nk * n_out, n_in)                                                          \
        cuda_dense_grad_part_##SFX(part, stride, wo, bo, dz, x, B, C, n_in, n_out, r / n_out,  \
                                   r % n_out, t);                                              \
    }                                                                                          \
    __global__ void loss_part_##SFX(REAL *part, size_t stride, size_t q, const REAL *loss,     \
                                    size_t B, size_t C, size_t nk)                             \
    {                                                                                          \
        EACH2(r, k, 1, nk) cuda_loss_part_##SFX(part, stride, q, loss, B, C, k);               \
    }                                                                                          \
    __global__ void fold_on_##SFX(REAL *run, const REAL *part, size_t nk, size_t stride,       \
                                  int cont, size_t n)                                          \
    {                                                                                          \
        EACH2(r, p, 1, n) cuda_fold_on_##SFX(run, part, nk, stride, cont, p);                  \
    }                                                                                          \
    __global__ void apply_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, const REAL *run, size_t lo, \
                                size_t hi, cuda_coef_##SFX k)                                  \
    {                                                                                          \
        EACH2(r, j, 1, hi - lo) cuda_apply_##SFX(w, g, m, v, lo + j, run[lo + j], &k);         \
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

void par_cuda_forward(par_dtype dt, void *y, const void *x, const void *W, const void *b,
                      par_act act, size_t B, size_t n_in, size_t n_out)
{
    const dim3 tiles((unsigned)((n_out + DF_O - 1) / DF_O), (unsigned)((B + DF_S - 1) / DF_S));
    if (dt == PAR_F32)
        forward_f32<<<tiles, DF_NT>>>(F32(y), CF32(x), CF32(W), CF32(b), (int)act, B, n_in,
                                            n_out);
    else
        forward_f64<<<tiles, DF_NT>>>(F64(y), CF64(x), CF64(W), CF64(b), (int)act, B, n_in,
                                            n_out);
}

void par_cuda_softmax_xent(par_dtype dt, void *dz, void *loss, const void *z,
                           const int32_t *labels, size_t B, size_t B_total, size_t K)
{
    if (dt == PAR_F32)
        softmax_f32<<<grid(1, B), THREADS>>>(F32(dz), F32(loss), CF32(z), labels, B, B_total, K);
    else
        softmax_f64<<<grid(1, B), THREADS>>>(F64(dz), F64(loss), CF64(z), labels, B, B_total, K);
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

void par_cuda_grad_update(par_dtype dt, void *w, void *g, void *m, void *v, const void *dz,
                          const void *x, size_t wo, size_t bo, size_t B, size_t C, size_t n_in,
                          size_t n_out, const par_cuda_update *u)
{
    if (dt == PAR_F32)
        grad_update_f32<<<grid(n_out, n_in), THREADS>>>(F32(w), F32(g), F32(m), F32(v), CF32(dz),
                                                        CF32(x), wo, bo, B, C, n_in, n_out,
                                                        cuda_coef_of_f32(u));
    else
        grad_update_f64<<<grid(n_out, n_in), THREADS>>>(F64(w), F64(g), F64(m), F64(v), CF64(dz),
                                                        CF64(x), wo, bo, B, C, n_in, n_out,
                                                        cuda_coef_of_f64(u));
}

void par_cuda_loss_fold(par_dtype dt, void *out, const void *loss, size_t B, size_t C)
{
    if (dt == PAR_F32)
        loss_fold_f32<<<1, 1>>>(F32(out), CF32(loss), B, C);
    else
        loss_fold_f64<<<1, 1>>>(F64(out), CF64(loss), B, C);
}

// The launches of the CNN layers and of the chunk parts, once per dtype
// (NAME_f32, NAME_f64; R the dtype's pointer cast); the public functions
// below pick theirs. A chunk parts' kernel runs a grid of nk rows.
#define LAUNCHES(REAL, SFX)                                                                    \
    static void conv_forward_go_##SFX(void *y, const void *x, const void *W, const void *b,    \
                                      par_act act, const par_layer *ly, size_t B)              \
    {                                                                                          \
        cuda_conv_tile ct;                                                                     \
        if (cuda_conv_tile_of(ly, sizeof(REAL), CF_SMEM, &ct)) {                               \
            const dim3 blocks((unsigned)ct.tiles, (unsigned)((ly->c_out + CF_CO - 1) / CF_CO), \
                              (unsigned)B);                                                    \
            const size_t smem = ct.CI * (ct.PH * ct.PW + ly->K * ly->K * CF_CO) * sizeof(REAL); \
            conv_tile_##SFX<<<blocks, (unsigned)ct.threads, smem>>>(                           \
                (REAL *)y, (const REAL *)x, (const REAL *)W, (const REAL *)b, (int)act, *ly, ct); \
            return;                                                                            \
        }                                                                                      \
        const size_t n = B * ly->n_out;     /* a patch past CF_SMEM: one thread an output */   \
        conv_forward_##SFX<<<grid(1, n), THREADS>>>((REAL *)y, (const REAL *)x,                \
                                                    (const REAL *)W, (const REAL *)b,          \
                                                    (int)act, *ly, n);                         \
    }                                                                                          \
    static void conv_grad_parts_go_##SFX(void *part, size_t stride, size_t qw, size_t qb,      \
                                         const void *dz, const void *x, const par_layer *ly,   \
                                         size_t B, size_t C)                                   \
    {                                                                                          \
        cuda_conv_tile ct;                                                                     \
        if (cuda_conv_wtile_of(ly, sizeof(REAL), CF_SMEM, &ct)) {                              \
            const dim3 blocks((unsigned)((ly->c_in + ct.CI - 1) / ct.CI),                      \
                              (unsigned)((ly->c_out + CF_CO - 1) / CF_CO),                     \
                              (unsigned)((B + C - 1) / C));                                    \
            const size_t smem = (ct.CI * ct.PH * ct.PW + ct.TP * CF_CO) * sizeof(REAL);        \
            conv_wtile_##SFX<<<blocks, (unsigned)ct.threads, smem>>>(                          \
                (REAL *)part, stride, qw, qb, (const REAL *)dz, (const REAL *)x, *ly, ct, B, C); \
            return;                                                                            \
        }                                                                                      \
        const size_t nk = (B + C - 1) / C, n = ly->n_rows * (ly->row_len + 1);                 \
        conv_grad_part_##SFX<<<grid(nk, n), THREADS>>>((REAL *)part, stride, qw, qb,           \
                                                       (const REAL *)dz, (const REAL *)x, *ly, \
                                                       B, C, nk, n);                           \
    }                                                                                          \
    static void conv_backward_data_go_##SFX(void *dx, const void *dz, const void *W,           \
                                            const void *x, par_act act, const par_layer *ly,   \
                                            size_t B)                                          \
    {                                                                                          \
        static size_t cap;   /* CD_SMEM or the device's most a block may take, past 48 KB */ \
        if (!cap) {                                                                            \
            int dev = 0, most = 0;                                                             \
            cudaGetDevice(&dev);                                                               \
            cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);       \
            cap = most > 0 && (size_t)most < CD_SMEM ? (size_t)most : (size_t)CD_SMEM;         \
            cudaFuncSetAttribute(conv_dtile_##SFX, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                 (int)cap);                                                    \
        }                                                                                      \
        cuda_conv_dtile dt;                                                                    \
        if (cuda_conv_dtile_of(ly, sizeof(REAL), cap, &dt)) {                                  \
            const dim3 blocks((unsigned)dt.tiles, (unsigned)((ly->c_in + CD_G - 1) / CD_G),    \
                              (unsigned)B);                                                    \
            const size_t per_co = ly->K * ly->K * CD_G + dt.DH * dt.DW;   /* weights, patch */ \
            const size_t smem = ly->c_out * per_co * sizeof(REAL);                             \
            conv_dtile_##SFX<<<blocks, (unsigned)dt.threads, smem>>>(                          \
                (REAL *)dx, (const REAL *)dz, (const REAL *)W, (const REAL *)x, (int)act, *ly,  \
                dt);                                                                           \
            return;                                                                            \
        }                                                                                      \
        const size_t n = B * ly->n_in;   /* one thread an input element */                     \
        conv_backward_data_##SFX<<<grid(1, n), THREADS>>>((REAL *)dx, (const REAL *)dz,        \
                                                          (const REAL *)W, (const REAL *)x,    \
                                                          (int)act, *ly, n);                   \
    }                                                                                          \
    static void conv_update_go_##SFX(void *w, void *g, void *m, void *v, const void *part,     \
                                     const par_layer *ly, size_t wo, size_t bo, size_t nk,     \
                                     const par_cuda_update *u)                                 \
    {                                                                                          \
        const size_t n = ly->n_rows * (ly->row_len + 1);                                       \
        conv_update_##SFX<<<grid(1, n), THREADS>>>((REAL *)w, (REAL *)g, (REAL *)m, (REAL *)v, \
                                                   (const REAL *)part, *ly, wo, bo, nk, n,     \
                                                   cuda_coef_of_##SFX(u));                     \
    }                                                                                          \
    static void pool_forward_go_##SFX(void *y, const void *x, const par_layer *ly, size_t B)   \
    {                                                                                          \
        const size_t n = B * ly->n_out;                                                        \
        pool_forward_##SFX<<<grid(1, n), THREADS>>>((REAL *)y, (const REAL *)x, *ly, n);       \
    }                                                                                          \
    static void pool_backward_go_##SFX(void *dx, const void *dz, const void *x, par_act act,   \
                                       const par_layer *ly, size_t B)                          \
    {                                                                                          \
        const size_t n = B * ly->n_in;                                                         \
        pool_backward_data_##SFX<<<grid(1, n), THREADS>>>((REAL *)dx, (const REAL *)dz,        \
                                                          (const REAL *)x, (int)act, *ly, n);  \
    }                                                                                          \
    static void bn_sum_parts_go_##SFX(void *part, const void *x, const par_layer *ly,          \
                                      size_t B, size_t C)                                      \
    {                                                                                          \
        const dim3 blocks((unsigned)ly->c_out, (unsigned)((B + C - 1) / C));                   \
        bn_chain_##SFX<<<blocks, BN_THREADS>>>((REAL *)part, NULL, (const REAL *)x, NULL, NULL, \
                                               *ly, B, B, C, BN_SUM);                          \
    }                                                                                          \
    static void bn_sq_parts_go_##SFX(void *part, const void *psum, const void *x,              \
                                     const par_layer *ly, size_t B, size_t Bt, size_t C)       \
    {                                                                                          \
        const dim3 blocks((unsigned)ly->c_out, (unsigned)((B + C - 1) / C));                   \
        bn_chain_##SFX<<<blocks, BN_THREADS>>>((REAL *)part, NULL, (const REAL *)x, NULL,      \
                                               (const REAL *)psum, *ly, B, Bt, C, BN_SQ);      \
    }                                                                                          \
    static void bn_finish_go_##SFX(void *y, const void *x, void *p, void *st, const void *psum, \
                                   const void *psq, par_act act, const par_layer *ly, size_t B, \
                                   size_t Bt, size_t C)                                        \
    {                                                                                          \
        const size_t n = B * ly->n_out;                                                        \
        bn_stats_##SFX<<<grid(1, ly->c_out), THREADS>>>((REAL *)st, (REAL *)p,                 \
                                                        (const REAL *)psum, (const REAL *)psq, \
                                                        *ly, Bt, C);                           \
        bn_out_##SFX<<<grid(1, n), THREADS>>>((REAL *)y, (const REAL *)x, (const REAL *)p,     \
                                              (const REAL *)st, (int)act, *ly, n);             \
    }                                                                                          \
    static void bn_grad_parts_go_##SFX(void *pg, void *pb, const void *dz, const void *x,      \
                                       const void *st, const par_layer *ly, size_t B, size_t C) \
    {                                                                                          \
        const dim3 blocks((unsigned)ly->c_out, (unsigned)((B + C - 1) / C));                   \
        bn_chain_##SFX<<<blocks, BN_THREADS>>>((REAL *)pg, (REAL *)pb, (const REAL *)x,        \
                                               (const REAL *)dz, (const REAL *)st, *ly, B, B, C, \
                                               BN_GRAD);                                       \
    }                                                                                          \
    static void bn_update_go_##SFX(void *w, void *g, void *m, void *v, void *st,               \
                                   const void *pg, const void *pb, const par_layer *ly,        \
                                   size_t wo, size_t bo, size_t Bt, size_t C,                  \
                                   const par_cuda_update *u)                                   \
    {                                                                                          \
        bn_update_##SFX<<<grid(1, ly->c_out), THREADS>>>(                                      \
            (REAL *)w, (REAL *)g, (REAL *)m, (REAL *)v, (REAL *)st, (const REAL *)pg,          \
            (const REAL *)pb, *ly, wo, bo, Bt, C, cuda_coef_of_##SFX(u));                      \
    }                                                                                          \
    static void bn_backward_data_go_##SFX(void *dx, const void *dz, const void *x,             \
                                          const void *st, par_act act, const par_layer *ly,    \
                                          size_t B, size_t Bt)                                 \
    {                                                                                          \
        const size_t n = B * ly->n_in;                                                         \
        bn_backward_data_##SFX<<<grid(1, n), THREADS>>>((REAL *)dx, (const REAL *)dz,          \
                                                        (const REAL *)x, (const REAL *)st,     \
                                                        (int)act, *ly, Bt, n);                 \
    }                                                                                          \
    static void dense_grad_parts_go_##SFX(void *part, size_t stride, size_t wo, size_t bo,     \
                                          const void *dz, const void *x, size_t B, size_t C,   \
                                          size_t n_in, size_t n_out)                           \
    {                                                                                          \
        const size_t nk = (B + C - 1) / C;                                                     \
        dense_grad_part_##SFX<<<grid(nk * n_out, n_in), THREADS>>>(                            \
            (REAL *)part, stride, wo, bo, (const REAL *)dz, (const REAL *)x, B, C, n_in, n_out, \
            nk);                                                                               \
    }                                                                                          \
    static void loss_parts_go_##SFX(void *part, size_t stride, size_t q, const void *loss,     \
                                    size_t B, size_t C)                                        \
    {                                                                                          \
        const size_t nk = (B + C - 1) / C;                                                     \
        loss_part_##SFX<<<grid(1, nk), THREADS>>>((REAL *)part, stride, q, (const REAL *)loss, \
                                                  B, C, nk);                                   \
    }                                                                                          \
    static void fold_go_##SFX(void *run, const void *part, size_t nk, size_t stride, size_t n, \
                              int cont)                                                        \
    {                                                                                          \
        fold_on_##SFX<<<grid(1, n), THREADS>>>((REAL *)run, (const REAL *)part, nk, stride,    \
                                               cont, n);                                       \
    }                                                                                          \
    static void apply_go_##SFX(void *w, void *g, void *m, void *v, const void *run, size_t lo, \
                               size_t hi, const par_cuda_update *u)                            \
    {                                                                                          \
        apply_##SFX<<<grid(1, hi - lo), THREADS>>>((REAL *)w, (REAL *)g, (REAL *)m, (REAL *)v, \
                                                   (const REAL *)run, lo, hi,                  \
                                                   cuda_coef_of_##SFX(u));                     \
    }

LAUNCHES(float, f32)
LAUNCHES(double, f64)

#include "cuda_launch.inc"   // the public functions: each calls its dtype's launch
