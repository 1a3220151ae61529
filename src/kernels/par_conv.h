// Kernels of the image layers (conv2d as an implicit GEMM, max-pool) under
// the arithmetic contract. conv2d runs on the dense kernels of par_kernels.h:
// im2col lays each output position's receptive field out as one row, so
//   forward         = par_dense_forward over rows (sample, position),
//   weight gradient = par_dense_backward_weights over the same rows (a chunk
//                     of C samples is C * positions rows, so chunks align),
//   input gradient  = par_dense_backward_data per row, then col2im,
// and each element gets exactly the fma chain the contract states (see each
// kernel). Images are (c, h, w) row-major per sample; shapes come from the
// layer (par_model.h). Kernels allocate nothing and do no I/O.
#ifndef PAR_CONV_H
#define PAR_CONV_H

#include <stddef.h>

#include "par_model.h"

#define PAR_DECLARE_CONV_KERNELS(REAL, SFX)                                                     \
    /* col[s][p][(ci K + kh) K + kw] = x[s][ci][oh S + kh - pad][ow S + kw - pad], +0 in the  \
       padding, p = oh w_out + ow, for s in [s0, s1). col: (B, h_out w_out, c_in K K). */     \
    void par_im2col_##SFX(REAL *restrict col, const REAL *restrict x, const par_layer *ly,     \
                          size_t s0, size_t s1);                                               \
    /* One sample: dx[ci][ih][iw] = 0, then for p ascending, for every tap (ci, kh, kw) of     \
       row p that lies inside the image: dx[ci][ih][iw] = dx[ci][ih][iw] + dcol[p][tap].       \
       So each input element is the sum of its taps in ascending output position. */          \
    void par_col2im_##SFX(REAL *restrict dx, const REAL *restrict dcol, const par_layer *ly);  \
    /* out[s][j][i] = in[s][i][j] for s in [s0, s1): in (B, rows, cols), out (B, cols, rows). */ \
    void par_transpose_##SFX(REAL *restrict out, const REAL *restrict in, size_t rows,         \
                             size_t cols, size_t s0, size_t s1);                               \
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
