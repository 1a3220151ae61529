// cuda_api.h run on the host, for tests without a GPU: memory is malloc'd,
// copies are memcpy, and each launch calls its kernel's body
// (cuda_bodies.h) for every index in turn, as the device's threads do. So
// the cuda trainer's orchestration (which kernel, in which order, on which
// buffers) runs in every build and is held to the reference bit for bit by
// test_cuda_emu, and a build with -DPARITY_CUDA=EMU runs every CLI path of
// --trainer cuda (scripts such as ci/gpu.sh, tried before a GPU is at hand).
// The device's own kernels and their compiled code are test_cuda's (label
// gpu) and test_cuda_fma's. Not a model of the device's speed or memory.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "cuda_bodies.h"

par_status par_cuda_open(int index, char *name, size_t cap)
{
    (void)index;
    if (name && cap) snprintf(name, cap, "host emulation (src/cuda/cuda_emu.c)");
    return PAR_OK;
}

par_status par_cuda_alloc(void **p, size_t bytes)
{
    *p = calloc(1, bytes ? bytes : 1);
    PAR_FAIL_IF(!*p, PAR_ERR_ALLOC, "emulated device: out of memory (%zu bytes)", bytes);
    return PAR_OK;
}

void par_cuda_free(void *p) { free(p); }
par_status par_cuda_host_alloc(void **p, size_t bytes) { return par_cuda_alloc(p, bytes); }
void par_cuda_host_free(void *p) { free(p); }

par_status par_cuda_put(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return PAR_OK;
}

par_status par_cuda_get(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return PAR_OK;
}

par_status par_cuda_sync(void) { return PAR_OK; }
int par_cuda_prof_begin(void) { return 0; }
void par_cuda_prof_end(const char *label, double flops) { (void)label, (void)flops; }

// Every launch of cuda_kernels.cu, per dtype: the same bodies over the same indices.
#define EMU(REAL, SFX)                                                                         \
    static void gather_##SFX(REAL *x, int32_t *labels, const REAL *data, const int32_t *lab,   \
                             const int32_t *idx, size_t B, size_t nf)                          \
    {                                                                                          \
        for (size_t s = 0; s < B; s++)                                                         \
            for (size_t f = 0; f < nf; f++)                                                    \
                cuda_gather_##SFX(x, labels, data, lab, idx, nf, s, f);                        \
    }                                                                                          \
    static void forward_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b, int act,   \
                              size_t B, size_t n_in, size_t n_out)                             \
    {                                                                                          \
        for (size_t s = 0; s < B; s++)                                                         \
            for (size_t o = 0; o < n_out; o++)                                                 \
                cuda_forward_##SFX(y, x, W, b, act, n_in, n_out, s, o);                        \
    }                                                                                          \
    static void backward_data_##SFX(REAL *dx, const REAL *dz, const REAL *W, const REAL *y,    \
                                    int act, size_t B, size_t n_in, size_t n_out)              \
    {                                                                                          \
        for (size_t s = 0; s < B; s++)                                                         \
            for (size_t i = 0; i < n_in; i++)                                                  \
                cuda_backward_data_##SFX(dx, dz, W, y, act, n_in, n_out, s, i);                \
    }                                                                                          \
    static void grad_update_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, const REAL *dz,          \
                                  const REAL *x, size_t wo, size_t bo, size_t B, size_t C,     \
                                  size_t n_in, size_t n_out, const par_cuda_update *u)         \
    {                                                                                          \
        const cuda_coef_##SFX c = cuda_coef_of_##SFX(u);                                       \
        for (size_t o = 0; o < n_out; o++)                                                     \
            for (size_t i = 0; i < n_in; i++)                                                  \
                cuda_dense_grad_update_##SFX(w, g, m, v, dz, x, wo, bo, B, C, n_in, n_out,     \
                                             &c, o, i);                                        \
    }                                                                                          \
    /* The kernels' tiles (conv_tile_), block by block and thread by thread, each round's      \
       staging before its chains; one output at a time where the kernels do that. */           \
    static void conv_forward_go_##SFX(REAL *y, const REAL *x, const REAL *W, const REAL *b,    \
                                      par_act act, const par_layer *ly, size_t B)              \
    {                                                                                          \
        cuda_conv_tile ct;                                                                     \
        if (!cuda_conv_tile_of(ly, sizeof(REAL), CF_SMEM, &ct)) {                              \
            for (size_t t = 0; t < B * ly->n_out; t++)                                         \
                cuda_conv_forward_##SFX(y, x, W, b, (int)act, ly, t);                          \
            return;                                                                            \
        }                                                                                      \
        static REAL sm[CF_SMEM / sizeof(REAL)], acc[CF_TP][CF_CO];                             \
        const size_t P = ly->h_out * ly->w_out, np = ct.PH * ct.PW;                            \
        const size_t S = ly->stride, wo = ly->w_out;                                           \
        REAL *xp = sm, *wp = sm + ct.CI * np;                                                  \
        for (size_t s = 0; s < B; s++)                                                         \
            for (size_t co0 = 0; co0 < ly->c_out; co0 += CF_CO)                                \
                for (size_t p0 = 0; p0 < P; p0 += ct.TP) {                                     \
                    const size_t oh0 = p0 / wo, n = P - p0 < ct.TP ? P - p0 : ct.TP;           \
                    for (size_t t = 0; t < n; t++) cuda_cf_init_##SFX(acc[t], b, ly, co0);     \
                    for (size_t ci0 = 0; ci0 < ly->c_in; ci0 += ct.CI) {                       \
                        const size_t nci = ly->c_in - ci0 < ct.CI ? ly->c_in - ci0 : ct.CI;    \
                        for (unsigned t = 0; t < ct.threads; t++)                              \
                            cuda_cf_stage_##SFX(xp, wp, x + s * ly->n_in, W, ly, &ct, oh0, co0, \
                                                ci0, nci, t, (unsigned)ct.threads);            \
                        for (size_t t = 0; t < n; t++) {                                       \
                            const size_t p = p0 + t;                                           \
                            const size_t base = (p / wo - oh0) * S * ct.PW + p % wo * S;       \
                            cuda_cf_run_##SFX(acc[t], xp, wp, ly, &ct, base, nci);             \
                        }                                                                      \
                    }                                                                          \
                    for (size_t t = 0; t < n; t++)                                             \
                        cuda_cf_store_##SFX(y + s * ly->n_out, acc[t], (int)act, ly, co0, p0 + t); \
                }                                                                              \
    }                                                                                          \
    /* The kernels' tiles (conv_wtile_) block by block, as conv_forward_go. */                 \
    static void conv_grad_parts_go_##SFX(REAL *part, size_t stride, size_t qw, size_t qb,      \
                                         const REAL *dz, const REAL *x, const par_layer *ly,   \
                                         size_t B, size_t C)                                   \
    {                                                                                          \
        cuda_conv_tile ct;                                                                     \
        if (cuda_conv_wtile_of(ly, sizeof(REAL), CF_SMEM, &ct)) {                              \
            static REAL sm[CF_SMEM / sizeof(REAL)], g[CF_TP][CF_CO];                           \
            const size_t P = ly->h_out * ly->w_out, np = ct.PH * ct.PW, KK = ly->K * ly->K;    \
            REAL *xp = sm, *dzt = sm + ct.CI * np;                                             \
            for (size_t k = 0; k * C < B; k++)                                                 \
                for (size_t co0 = 0; co0 < ly->c_out; co0 += CF_CO)                            \
                    for (size_t ci0 = 0; ci0 < ly->c_in; ci0 += ct.CI) {                       \
                        const size_t nci = ly->c_in - ci0 < ct.CI ? ly->c_in - ci0 : ct.CI;    \
                        memset(g, 0, sizeof g);                                                \
                        for (size_t s = k * C; s < cuda_chunk_end(k, C, B); s++)               \
                            for (size_t p0 = 0; p0 < P; p0 += ct.TP) {                         \
                                const size_t n = P - p0 < ct.TP ? P - p0 : ct.TP;              \
                                const size_t oh0 = p0 / ly->w_out;                             \
                                for (unsigned t = 0; t < ct.threads; t++)                      \
                                    cuda_cw_stage_##SFX(xp, dzt, x + s * ly->n_in,             \
                                                        dz + s * ly->n_out, ly, &ct, oh0, p0, n, \
                                                        co0, ci0, nci, t, (unsigned)ct.threads); \
                                for (size_t t = 0; t < nci * KK; t++)                          \
                                    cuda_cw_run_##SFX(g[t], xp, dzt, ly, &ct, oh0, p0, n, t / KK, \
                                                      t % KK / ly->K, t % ly->K);              \
                                if (ci0 == 0) cuda_cw_bias_run_##SFX(g[nci * KK], dzt, n);     \
                            }                                                                  \
                        for (size_t t = 0; t < nci * KK + (ci0 == 0); t++)                     \
                            cuda_cw_store_##SFX(part, stride, qw, qb, g[t], ly, k, co0, ci0, nci, \
                                                t);                                            \
                    }                                                                          \
            return;                                                                            \
        }                                                                                      \
        const size_t nk = (B + C - 1) / C, n = ly->n_rows * (ly->row_len + 1);                 \
        for (size_t k = 0; k < nk; k++)                                                        \
            for (size_t p = 0; p < n; p++)                                                     \
                cuda_conv_grad_part_##SFX(part, stride, qw, qb, dz, x, ly, B, C, k, p);        \
    }                                                                                          \
    static void conv_backward_data_go_##SFX(REAL *dx, const REAL *dz, const REAL *W,           \
                                            const REAL *x, par_act act, const par_layer *ly,   \
                                            size_t B)                                          \
    {                                                                                          \
        cuda_conv_dtile dt;                                                                    \
        if (!cuda_conv_dtile_of(ly, sizeof(REAL), CD_SMEM, &dt)) {                             \
            for (size_t t = 0; t < B * ly->n_in; t++)                                          \
                cuda_conv_backward_data_##SFX(dx, dz, W, x, (int)act, ly, t);                  \
            return;                                                                            \
        }                                                                                      \
        static REAL sm[CD_SMEM / sizeof(REAL)];   /* the kernels' tiles (conv_dtile_) */       \
        REAL *ws = sm, *dp = sm + ly->K * ly->K * ly->c_out * CD_G, acc[CD_G];                 \
        for (size_t s = 0; s < B; s++)                                                         \
            for (size_t ci0 = 0; ci0 < ly->c_in; ci0 += CD_G)                                  \
                for (size_t ih0 = 0; ih0 < ly->h_in; ih0 += dt.TR) {                           \
                    for (unsigned t = 0; t < dt.threads; t++)                                  \
                        cuda_cd_stage_##SFX(ws, dp, dz + s * ly->n_out, W, ly, &dt, ih0, ci0, t, \
                                            (unsigned)dt.threads);                             \
                    for (size_t ih = ih0; ih < ih0 + dt.TR && ih < ly->h_in; ih++)             \
                        for (size_t iw = 0; iw < ly->w_in; iw++) {                             \
                            cuda_cd_run_##SFX(acc, ws, dp, ly, &dt, ih0, ih, iw);              \
                            cuda_cd_store_##SFX(dx + s * ly->n_in, x + s * ly->n_in, acc,      \
                                                (int)act, ly, ci0, ih, iw);                    \
                        }                                                                      \
                }                                                                              \
    }                                                                                          \
    static void conv_update_go_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, const REAL *part,     \
                                     const par_layer *ly, size_t wo, size_t bo, size_t nk,     \
                                     const par_cuda_update *u)                                 \
    {                                                                                          \
        const cuda_coef_##SFX c = cuda_coef_of_##SFX(u);                                       \
        for (size_t p = 0; p < ly->n_rows * (ly->row_len + 1); p++)                            \
            cuda_conv_update_##SFX(w, g, m, v, part, ly, wo, bo, nk, &c, p);                   \
    }                                                                                          \
    static void pool_forward_go_##SFX(REAL *y, const REAL *x, const par_layer *ly, size_t B)   \
    {                                                                                          \
        for (size_t t = 0; t < B * ly->n_out; t++) cuda_pool_forward_##SFX(y, x, ly, t);       \
    }                                                                                          \
    static void pool_backward_go_##SFX(REAL *dx, const REAL *dz, const REAL *x, par_act act,   \
                                       const par_layer *ly, size_t B)                          \
    {                                                                                          \
        for (size_t t = 0; t < B * ly->n_in; t++)                                              \
            cuda_pool_backward_data_##SFX(dx, dz, x, (int)act, ly, t);                         \
    }                                                                                          \
    static void bn_sum_parts_go_##SFX(REAL *part, const REAL *x, const par_layer *ly,          \
                                      size_t B, size_t C)                                      \
    {                                                                                          \
        for (size_t k = 0; k < (B + C - 1) / C; k++)                                           \
            for (size_t c = 0; c < ly->c_out; c++) cuda_bn_sum_part_##SFX(part, x, ly, B, C, k, c); \
    }                                                                                          \
    static void bn_sq_parts_go_##SFX(REAL *part, const REAL *psum, const REAL *x,              \
                                     const par_layer *ly, size_t B, size_t Bt, size_t C)       \
    {                                                                                          \
        for (size_t k = 0; k < (B + C - 1) / C; k++)                                           \
            for (size_t c = 0; c < ly->c_out; c++)                                             \
                cuda_bn_sq_part_##SFX(part, psum, x, ly, B, Bt, C, k, c);                      \
    }                                                                                          \
    static void bn_finish_go_##SFX(REAL *y, const REAL *x, REAL *p, REAL *st, const REAL *psum, \
                                   const REAL *psq, par_act act, const par_layer *ly, size_t B, \
                                   size_t Bt, size_t C)                                        \
    {                                                                                          \
        for (size_t c = 0; c < ly->c_out; c++) cuda_bn_stats_##SFX(st, p, psum, psq, ly, Bt, C, c); \
        for (size_t t = 0; t < B * ly->n_out; t++) cuda_bn_out_##SFX(y, x, p, st, (int)act, ly, t); \
    }                                                                                          \
    static void bn_grad_parts_go_##SFX(REAL *pg, REAL *pb, const REAL *dz, const REAL *x,      \
                                       const REAL *st, const par_layer *ly, size_t B, size_t C) \
    {                                                                                          \
        for (size_t k = 0; k < (B + C - 1) / C; k++)                                           \
            for (size_t c = 0; c < ly->c_out; c++)                                             \
                cuda_bn_grad_part_##SFX(pg, pb, dz, x, st, ly, B, C, k, c);                    \
    }                                                                                          \
    static void bn_update_go_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, REAL *st,               \
                                   const REAL *pg, const REAL *pb, const par_layer *ly,        \
                                   size_t wo, size_t bo, size_t Bt, size_t C,                  \
                                   const par_cuda_update *u)                                   \
    {                                                                                          \
        const cuda_coef_##SFX k = cuda_coef_of_##SFX(u);                                       \
        for (size_t c = 0; c < ly->c_out; c++)                                                 \
            cuda_bn_update_##SFX(w, g, m, v, st, pg, pb, ly, wo, bo, Bt, C, &k, c);            \
    }                                                                                          \
    static void bn_backward_data_go_##SFX(REAL *dx, const REAL *dz, const REAL *x,             \
                                          const REAL *st, par_act act, const par_layer *ly,    \
                                          size_t B, size_t Bt)                                 \
    {                                                                                          \
        for (size_t t = 0; t < B * ly->n_in; t++)                                              \
            cuda_bn_backward_data_##SFX(dx, dz, x, st, (int)act, ly, Bt, t);                   \
    }                                                                                          \
    static void dense_grad_parts_go_##SFX(REAL *part, size_t stride, size_t wo, size_t bo,     \
                                          const REAL *dz, const REAL *x, size_t B, size_t C,   \
                                          size_t n_in, size_t n_out)                           \
    {                                                                                          \
        for (size_t k = 0; k < (B + C - 1) / C; k++)                                           \
            for (size_t o = 0; o < n_out; o++)                                                 \
                for (size_t i = 0; i < n_in; i++)                                              \
                    cuda_dense_grad_part_##SFX(part, stride, wo, bo, dz, x, B, C, n_in, n_out, \
                                               k, o, i);                                       \
    }                                                                                          \
    static void loss_parts_go_##SFX(REAL *part, size_t stride, size_t q, const REAL *loss,     \
                                    size_t B, size_t C)                                        \
    {                                                                                          \
        for (size_t k = 0; k < (B + C - 1) / C; k++)                                           \
            cuda_loss_part_##SFX(part, stride, q, loss, B, C, k);                              \
    }                                                                                          \
    static void fold_go_##SFX(REAL *run, const REAL *part, size_t nk, size_t stride, size_t n, \
                              int cont)                                                        \
    {                                                                                          \
        for (size_t p = 0; p < n; p++) cuda_fold_on_##SFX(run, part, nk, stride, cont, p);     \
    }                                                                                          \
    static void apply_go_##SFX(REAL *w, REAL *g, REAL *m, REAL *v, const REAL *run, size_t lo, \
                               size_t hi, const par_cuda_update *u)                            \
    {                                                                                          \
        const cuda_coef_##SFX k = cuda_coef_of_##SFX(u);                                       \
        for (size_t p = lo; p < hi; p++) cuda_apply_##SFX(w, g, m, v, p, run[p], &k);          \
    }

EMU(float, f32)
EMU(double, f64)

#include "cuda_launch.inc"   // the CNN layers' and the parts' public launches, and BY_DT

void par_cuda_gather(par_dtype dt, void *x, int32_t *labels, const void *data,
                     const int32_t *lab_all, const int32_t *idx, size_t B, size_t nf)
{
    BY_DT(dt, gather, x, labels, data, lab_all, idx, B, nf);
}

void par_cuda_forward(par_dtype dt, void *y, const void *x, const void *W, const void *b,
                      par_act act, size_t B, size_t n_in, size_t n_out)
{
    BY_DT(dt, forward, y, x, W, b, (int)act, B, n_in, n_out);
}

void par_cuda_softmax_xent(par_dtype dt, void *dz, void *loss, const void *z,
                           const int32_t *labels, size_t B, size_t B_total, size_t K)
{
    for (size_t s = 0; s < B; s++)
        BY_DT(dt, cuda_softmax_xent, dz, loss, z, labels, K, B_total, s);
}

void par_cuda_backward_data(par_dtype dt, void *dx, const void *dz, const void *W,
                            const void *y, par_act act, size_t B, size_t n_in, size_t n_out)
{
    BY_DT(dt, backward_data, dx, dz, W, y, (int)act, B, n_in, n_out);
}

void par_cuda_grad_update(par_dtype dt, void *w, void *g, void *m, void *v, const void *dz,
                          const void *x, size_t wo, size_t bo, size_t B, size_t C, size_t n_in,
                          size_t n_out, const par_cuda_update *u)
{
    BY_DT(dt, grad_update, w, g, m, v, dz, x, wo, bo, B, C, n_in, n_out, u);
}

void par_cuda_loss_fold(par_dtype dt, void *out, const void *loss, size_t B, size_t C)
{
    if (dt == PAR_F32)
        *(float *)out = cuda_loss_fold_f32(loss, B, C);
    else
        *(double *)out = cuda_loss_fold_f64(loss, B, C);
}
