// Kernels of the image layers (conv2d, max-pool) under the arithmetic
// contract. conv2d runs on the general chain par_gemm_acc (par_kernels.h),
// with each sample's receptive fields laid out by im2col, so that every
// element gets exactly the fma chain the contract states:
//   forward:         y[co][p] = b[co], then the chain over taps ascending:
//                    C = yT (positions x c_out), A = col (positions x taps),
//                    B = W^T (the layer's transposed panel); then y = yT^T;
//   input gradient:  dcolT[tap][p] = 0, then the chain over co ascending:
//                    C = dcolT, A = W^T (the layer's transposed panel), B = dz;
//                    then col2im adds each input element's taps in ascending
//                    output position;
//   weight gradient: per chunk a chain over its samples and, within a sample,
//                    positions ascending (C = g, A = dz, B = col); chunks
//                    folded left (par_conv_backward_weights).
// A tap is (ci, kh, kw), ascending as the weight's (c_in, K, K) layout.
// Images are (c, h, w) row-major per sample; shapes come from the layer
// (par_model.h). Kernels allocate nothing and do no I/O.
#ifndef PAR_CONV_H
#define PAR_CONV_H

#include <stddef.h>

#include "par_model.h"

// Row stride of im2col's rows: c_in K K rounded up to a multiple of 8, so
// that the chain kernel loads whole vectors (the padding is never read into
// a stored result). E.g. 9 -> 16, 27 -> 32, 288 -> 288.
static inline size_t par_conv_ldcol(const par_layer *ly) { return (ly->row_len + 7) / 8 * 8; }

#define PAR_DECLARE_CONV_KERNELS(REAL, SFX)                                                     \
    /* col[s][p][(ci K + kh) K + kw] = x[s][ci][oh S + kh - pad][ow S + kw - pad], +0 in the  \
       padding, p = oh w_out + ow, for s in [s0, s1). col: (B, h_out w_out, ldcol); the       \
       columns c_in K K .. ldcol - 1 are +0. */                                                 \
    void par_im2col_##SFX(REAL *restrict col, const REAL *restrict x, const par_layer *ly,     \
                          size_t s0, size_t s1);                                               \
    /* y[r][j] = v[j] for r < rows, j < n: y (rows, n). */                                    \
    void par_fill_rows_##SFX(REAL *restrict y, const REAL *restrict v, size_t rows, size_t n); \
    /* y[j][i] = yT[i][j] for i < rows, j < cols: yT (rows, cols), y (cols, rows). */          \
    void par_transpose_##SFX(REAL *restrict y, const REAL *restrict yT, size_t rows,           \
                             size_t cols);                                                     \
    /* One sample: dx[ci][ih][iw] = 0, then for p ascending, for every tap (ci, kh, kw) of     \
       position p that lies inside the image: dx[ci][ih][iw] = dx[ci][ih][iw] + dcolT[tap][p]. \
       So each input element is the sum of its taps in ascending output position. */          \
    void par_col2im_t_##SFX(REAL *restrict dx, const REAL *restrict dcolT, const par_layer *ly); \
    /* Weight and bias gradient of output channels o in [o0, o1), folded over chunks c in      \
       [c0, c1) of C samples (chunk c = samples [cC, min(cC + C, B))):                         \
         g_c[o][t] = 0; for s in chunk c ascending, for p ascending:                           \
                        g_c[o][t] = fma(dz[s][o][p], col[s][p][t], g_c[o][t])                  \
         gb_c[o]   = 0; for s in chunk c ascending, for p ascending: gb_c = gb_c + dz[s][o][p] \
       cont = 0: dW = g_c0, then dW = dW + g_c for c = c0+1 .. c1-1 (same for db);            \
       cont = 1: dW = dW + g_c for every c. dz: (B, c_out, positions), col as par_im2col.      \
       g: scratch of (o1 - o0) c_in K K values, and 64 more. */                                \
    void par_conv_backward_weights_##SFX(REAL *restrict dW, REAL *restrict db,                 \
                                         const REAL *restrict dz, const REAL *restrict col,     \
                                         const par_layer *ly, size_t B, size_t C, size_t c0,   \
                                         size_t c1, size_t o0, size_t o1, int cont,            \
                                         REAL *restrict g);                                    \
    /* y[s][c][oh][ow] = the first maximum in scan order (kh, then kw ascending; a later       \
       equal value does not replace it) of the K x K window at (oh K, ow K), s in [s0, s1). */ \
    void par_maxpool_forward_##SFX(REAL *restrict y, const REAL *restrict x,                   \
                                   const par_layer *ly, size_t s0, size_t s1);                 \
    /* dx[s] = 0, then dx[s][first maximum of each window] = dy[s][window], s in [s0, s1):    \
       windows do not overlap, so nothing is summed. x is the forward input. */               \
    void par_maxpool_backward_##SFX(REAL *restrict dx, const REAL *restrict dy,                \
                                    const REAL *restrict x, const par_layer *ly, size_t s0,    \
                                    size_t s1);

PAR_DECLARE_CONV_KERNELS(float, f32)
PAR_DECLARE_CONV_KERNELS(double, f64)

#endif
