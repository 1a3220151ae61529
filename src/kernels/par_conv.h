// Kernels of the image layers (conv2d, max-pool) under the arithmetic
// contract. Every element gets exactly the fma chain the contract states:
//   forward:         y[co][p] = b[co], then the chain over taps ascending.
//                    Stride 1: the kernel set's conv_forward on the padded
//                    sample (par_conv_pad) and its packed weights (the set's
//                    conv_pack), vectorised across positions;
//                    other strides: par_gemm_acc with C = yT (positions x
//                    c_out), A = col (par_im2col), B = W^T (the layer's
//                    transposed panel), then y = yT^T;
//   input gradient:  dcolT[tap][p] = 0, then the chain over co ascending;
//                    each input element the sum, from 0, of its taps' dcolT in
//                    ascending output position. Stride 1: the kernel set's
//                    conv_dgrad on the padded output gradient (par_conv_pad_dz)
//                    and the weights by tap (its conv_dpack), each chain added
//                    as soon as it ends; other strides: par_gemm_acc with C =
//                    dcolT, A = W^T (the layer's transposed panel), B = dz, then
//                    par_col2im_t;
//   weight gradient: per chunk a chain over its samples and, within a sample,
//                    positions ascending; chunks folded left
//                    (par_conv_backward_weights). Stride 1: the kernel set's
//                    conv_wgrad on the padded sample and dz by position;
//                    other strides: par_gemm_acc with C = g, A = dz, B = col.
// A tap is (ci, kh, kw), ascending as the weight's (c_in, K, K) layout.
// Images are (c, h, w) row-major per sample; shapes come from the layer
// (par_model.h). Kernels allocate nothing and do no I/O.
#ifndef PAR_CONV_H
#define PAR_CONV_H

#include <stddef.h>

#include "par_kernels.h"
#include "par_model.h"

// Row stride of im2col's rows: c_in K K rounded up to a multiple of 8, so
// that the chain kernel loads whole vectors (the padding is never read into
// a stored result). E.g. 9 -> 16, 27 -> 32, 288 -> 288.
static inline size_t par_conv_ldcol(const par_layer *ly) { return (ly->row_len + 7) / 8 * 8; }

// The padded sample of a stride-1 conv (par_conv_pad, the kernel sets'
// conv_forward): (c_in, h_in + 2 pad, w_in + 2 pad), the padding +0, and
// PAR_CONV_SLACK more values that vector loads past a row's end may read.
#define PAR_CONV_SLACK 16
static inline size_t par_conv_wp(const par_layer *ly) { return ly->w_in + 2 * ly->pad; }
static inline size_t par_conv_padded_elems(const par_layer *ly)
{
    return ly->c_in * (ly->h_in + 2 * ly->pad) * par_conv_wp(ly) + PAR_CONV_SLACK;
}

// The weights of a stride-1 conv packed for a kernel set's conv_forward
// (its conv_pack): per group of the set's tile rows (at most PAR_CONV_MR_MAX
// output channels), the group's weights tap by tap, so that a tile reads one
// contiguous run instead of a few values of every panel row.
#define PAR_CONV_MR_MAX 8
static inline size_t par_conv_pack_elems(const par_layer *ly)
{
    return (ly->c_out + PAR_CONV_MR_MAX - 1) * ly->row_len;
}

// The weights by tap of a stride-1 conv packed for a kernel set's conv_dgrad
// (its conv_dpack): per group of the set's tile rows of input channels.
static inline size_t par_conv_dpack_elems(const par_layer *ly)
{
    return (ly->c_in + PAR_CONV_MR_MAX - 1) * ly->K * ly->K * ly->c_out;
}

// The padded output gradient of a stride-1 conv (par_conv_pad_dz, the kernel
// sets' conv_dgrad): (c_out, h_out + 2 (K - 1), w_out + 2 (K - 1)), K - 1
// rows and columns of +0 on every side, and PAR_CONV_SLACK more values.
static inline size_t par_conv_dz_wp(const par_layer *ly) { return ly->w_out + 2 * (ly->K - 1); }
static inline size_t par_conv_dz_elems(const par_layer *ly)
{
    return ly->c_out * (ly->h_out + 2 * (ly->K - 1)) * par_conv_dz_wp(ly) + PAR_CONV_SLACK;
}

// Samples a stride-1 conv's weight gradient hands conv_wgrad at once: as
// many padded samples and output gradients by position (of all c_out
// channels, so that fewer channels need no more scratch) as fit 64 Ki
// values, 1 to 8. A tile of the kernel then runs over all their positions
// before it stores: on 8 x 8 images one sample's 64 positions left the
// tile's loads, stores and set-up a fifth of its time.
static inline size_t par_conv_wgrad_group(const par_layer *ly)
{
    const size_t per =
        par_conv_padded_elems(ly) + ly->h_out * ly->w_out * par_dense_ldwt(ly->c_out);
    const size_t n = 65536 / per;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}

// Scratch of par_conv_backward_weights for no output channels. Stride 1:
// par_conv_wgrad_group padded samples and their output gradients by
// position, a chunk's partial gradients by tap and of the bias, and the
// chunks' fold by tap (rows of par_dense_ldwt(no)); other strides: one
// sample's im2col rows, a chunk's partial gradient and 8 bias chains.
static inline size_t par_conv_wgrad_elems(const par_layer *ly, size_t no)
{
    const size_t n_pos = ly->h_out * ly->w_out, rl = ly->row_len;
    if (ly->stride == 1)
        return par_conv_wgrad_group(ly) *
                   (par_conv_padded_elems(ly) + n_pos * par_dense_ldwt(no)) +
               (2 * rl + 1) * par_dense_ldwt(no);
    return n_pos * par_conv_ldcol(ly) + no * rl + 8;
}

#define PAR_DECLARE_CONV_KERNELS(REAL, SFX)                                                     \
    /* One sample img: col[p][(ci K + kh) K + kw] = img[ci][oh S + kh - pad][ow S + kw - pad], \
       +0 in the padding, p = oh w_out + ow. col: (h_out w_out, ldcol); the columns           \
       c_in K K .. ldcol - 1 are +0. */                                                         \
    void par_im2col_##SFX(REAL *restrict col, const REAL *restrict img, const par_layer *ly);  \
    /* xp = sample s of x padded (par_conv_padded_elems values): the padding and slack +0. */ \
    void par_conv_pad_##SFX(REAL *restrict xp, const REAL *restrict x, const par_layer *ly,    \
                            size_t s);                                                         \
    /* dzp = one sample's output gradient dz padded (par_conv_dz_elems values). */            \
    void par_conv_pad_dz_##SFX(REAL *restrict dzp, const REAL *restrict dz, const par_layer *ly); \
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
       cont = 1: dW = dW + g_c for every c. dz: (B, c_out, positions), x: (B, c_in, h_in,  \
       w_in), col[s] = par_im2col of x[s]. scratch: par_conv_wgrad_elems(ly, o1 - o0) values. */ \
    void par_conv_backward_weights_##SFX(REAL *restrict dW, REAL *restrict db,                 \
                                         const REAL *restrict dz, const REAL *restrict x,       \
                                         const par_layer *ly, size_t B, size_t C, size_t c0,   \
                                         size_t c1, size_t o0, size_t o1, int cont,            \
                                         REAL *restrict scratch);                              \
    /* y[s][c][oh][ow] = the first maximum in scan order (kh, then kw ascending; a later       \
       equal value does not replace it) of the K x K window at (oh K, ow K), s in [s0, s1). */ \
    void par_maxpool_forward_##SFX(REAL *restrict y, const REAL *restrict x,                   \
                                   const par_layer *ly, size_t s0, size_t s1);                 \
    /* dx[s] = 0, then dx[s][first maximum of each window] = dy[s][window], s in [s0, s1):    \
       windows do not overlap, so nothing is summed; then par_act_backward(dx, x, act): the    \
       derivative of act, the activation whose output x is (the forward input). Same bits as  \
       the two passes; relu and none are applied inside the one pass over each window. */      \
    void par_maxpool_backward_##SFX(REAL *restrict dx, const REAL *restrict dy,                \
                                    const REAL *restrict x, const par_layer *ly, size_t s0,    \
                                    size_t s1, par_act act);

PAR_DECLARE_CONV_KERNELS(float, f32)
PAR_DECLARE_CONV_KERNELS(double, f64)

#endif
