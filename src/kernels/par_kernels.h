// Compute kernels of the dense MLP under the arithmetic contract
// (docs/DESIGN.md, section 1). Each kernel's comment gives its shapes and its
// summation order: that order is the API, and any variant (AVX2 or portable,
// any thread split) gives the same bits. Kernels allocate nothing, do no I/O
// and take element ranges so that callers can split work among threads.
// Suffix _f32 / _f64 is the dtype; REAL below means float or double.
#ifndef PAR_KERNELS_H
#define PAR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "par_dtype.h"
#include "par_model.h"

// Output-block width of the forward kernel: WT rows are padded to a multiple.
#define PAR_DENSE_OB 16

// Leading dimension of the transposed weight panel WT for n_out outputs.
static inline size_t par_dense_ldwt(size_t n_out)
{
    return (n_out + PAR_DENSE_OB - 1) / PAR_DENSE_OB * PAR_DENSE_OB;
}

// Elements to allocate for WT: n_in rows of ldwt, plus one block of slack so
// that a forward block starting at any column o0 may load PAR_DENSE_OB values
// of the last row (the portable kernel keeps its block width fixed).
static inline size_t par_dense_wt_elems(size_t n_in, size_t n_out)
{
    return n_in * par_dense_ldwt(n_out) + PAR_DENSE_OB;
}

// Coefficients of one optimizer update (par_optim_* below), every value
// exactly representable in the dtype (the caller rounds them once):
//   momentum:  lr, mu
//   nesterov:  lr, mu
//   adam:      lr, b1, b2, c1 = 1 - b1, c2 = 1 - b2 (both in the dtype),
//              bc1 = 1 - b1^t, bc2 = 1 - b2^t (the caller's method), eps.
typedef enum par_update_kind {
    PAR_UPDATE_MOMENTUM = 1,
    PAR_UPDATE_NESTEROV = 2,
    PAR_UPDATE_ADAM = 3,
} par_update_kind;
typedef struct par_optim_coef {
    par_update_kind kind;
    double lr, mu, b1, b2, c1, c2, bc1, bc2, eps;
} par_optim_coef;

#define PAR_DECLARE_KERNELS(REAL, SFX)                                                          \
    /* Columns o in [o0, o1) of WT: WT[i][o] = W[o][i]. W: (n_out, n_in), WT: (n_in, ldwt);   \
       the padding columns n_out <= o < ldwt are the caller's (zero them once). */            \
    void par_dense_transpose_##SFX(REAL *restrict WT, const REAL *restrict W, size_t n_in,     \
                                   size_t n_out, size_t o0, size_t o1);                         \
    /* y[s][o] = b[o]; for i ascending: y[s][o] = fma(x[s][i], W[o][i], y[s][o]),             \
       for s in [s0, s1), o in [o0, o1). x: (B, n_in), WT as above, y: (B, n_out). */         \
    void par_dense_forward_##SFX(REAL *restrict y, const REAL *restrict x,                     \
                                 const REAL *restrict WT, const REAL *restrict b, size_t s0,    \
                                 size_t s1, size_t o0, size_t o1, size_t n_in, size_t n_out);   \
    /* The general chain: for s in [s0, s1), j < N, k ascending from 0 to K - 1:               \
         C[s][j] = fma(A[s][k], B[k][j], C[s][j]), continuing from C's values.                 \
       A: (.., lda), B: (K, ldb), C: (.., ldc); none may overlap. */                            \
    void par_gemm_acc_##SFX(REAL *restrict C, size_t ldc, const REAL *restrict A, size_t lda,  \
                            const REAL *restrict B, size_t ldb, size_t s0, size_t s1, size_t N, \
                            size_t K);                                                          \
    /* dx[s][i] = 0; for o ascending: dx[s][i] = fma(dz[s][o], W[o][i], dx[s][i]),            \
       for s in [s0, s1). dz: (B, n_out), W: (n_out, n_in), dx: (B, n_in). */                  \
    void par_dense_backward_data_##SFX(REAL *restrict dx, const REAL *restrict dz,             \
                                       const REAL *restrict W, size_t s0, size_t s1,            \
                                       size_t n_in, size_t n_out);                              \
    /* Weight and bias gradient of rows o in [o0, o1) of a layer with n_out outputs,          \
       folded over chunks c in                                                                 \
       [c0, c1) of C samples (chunk c = samples [cC, min(cC + C, B))):                          \
         g_c[o][i] = 0; for s in chunk c ascending: g_c = fma(dz[s][o], x[s][i], g_c)          \
         gb_c[o]   = 0; for s in chunk c ascending: gb_c = gb_c + dz[s][o]                     \
       cont = 0: dW = g_c0, then dW = dW + g_c for c = c0+1 .. c1-1 (same for db);            \
       cont = 1: dW = dW + g_c for every c, continuing a fold begun elsewhere. */              \
    void par_dense_backward_weights_##SFX(REAL *restrict dW, REAL *restrict db,                \
                                          const REAL *restrict dz, const REAL *restrict x,      \
                                          size_t B, size_t C, size_t c0, size_t c1,             \
                                          size_t o0, size_t o1, size_t n_in, size_t n_out,     \
                                          int cont);                                            \
    /* y = act(z) elementwise, in place on n elements: relu z > 0 ? z : 0,                     \
       sigmoid par_sigmoid, tanh par_tanh, none: identity. */                                  \
    void par_act_forward_##SFX(REAL *restrict y, size_t n, par_act act);                       \
    /* dz = dy * act'(z) from y = act(z), in place on dy: relu y > 0 ? dy : 0;                 \
       sigmoid dy * (y * (1 - y)); tanh dy * (1 - y * y); none dy. */                          \
    void par_act_backward_##SFX(REAL *restrict dy, const REAL *restrict y, size_t n,          \
                                par_act act);                                                   \
    /* Softmax + cross-entropy of samples s in [s0, s1): z: (B, K) logits.                    \
       m = max_j z[j]; e_j = exp(z_j - m); sum = 0, sum = sum + e_j (j ascending);           \
       loss[s] = log(sum) - (z_label - m); dz_j = (e_j / sum - [j == label]) / B_total.       \
       dz may alias nothing. Returns the number of argmax hits (correct predictions). */      \
    size_t par_softmax_xent_##SFX(REAL *restrict dz, REAL *restrict loss,                      \
                                  const REAL *restrict z, const int32_t *restrict labels,      \
                                  size_t s0, size_t s1, size_t K, size_t B_total);             \
    /* SGD on n elements: t = lr * g; w = w - t. */                                            \
    void par_sgd_##SFX(REAL *restrict w, const REAL *restrict g, size_t n, REAL lr);           \
    /* SGD on rows [o0, o1) of a dense weight W (n_out, n_in), as par_sgd, also writing       \
       the new values into columns [o0, o1) of its transposed panel WT (n_in, ldwt): one      \
       pass instead of an update and a transpose. */                                           \
    void par_sgd_dense_##SFX(REAL *restrict W, REAL *restrict WT, const REAL *restrict g,     \
                             size_t n_in, size_t n_out, size_t o0, size_t o1, REAL lr);        \
    /* Optimizer update of n elements with state m (and v for adam), every                \
       operation rounded to REAL, no fma, in exactly this order:                             \
         momentum:  m = mu*m; m = m + g; t = lr*m; w = w - t                                  \
         nesterov:  m = mu*m; m = m + g; t = mu*m; t = g + t; t = lr*t; w = w - t            \
         adam:      m = b1*m; t = c1*g; m = m + t;                                            \
                    v = b2*v; t = c2*g; t = t*g; v = v + t;                                   \
                    mh = m/bc1; vh = v/bc2; d = sqrt(vh); d = d + eps;                        \
                    t = lr*mh; t = t/d; w = w - t                                             \
       (sqrt: IEEE correctly rounded). v may be NULL except for adam. */                      \
    void par_optim_##SFX(REAL *restrict w, REAL *restrict m, REAL *restrict v,                 \
                         const REAL *restrict g, size_t n, const par_optim_coef *k);           \
    /* The same on rows [o0, o1) of a dense weight W (n_out, n_in) with its state rows,        \
       also writing the new values into columns [o0, o1) of WT (as par_sgd_dense). */          \
    void par_optim_dense_##SFX(REAL *restrict W, REAL *restrict WT, REAL *restrict M,          \
                               REAL *restrict V, const REAL *restrict g, size_t n_in,          \
                               size_t n_out, size_t o0, size_t o1, const par_optim_coef *k);   \
    /* Per-sample losses folded like the gradient: l_c = 0, l_c = l_c + loss[s] over chunk c; \
       cont = 0: acc = l_c0, then acc = acc + l_c; cont = 1: acc = acc + l_c for every c. */  \
    REAL par_loss_fold_##SFX(const REAL *loss, size_t B, size_t C, size_t c0, size_t c1,       \
                             REAL acc, int cont);                                              \
    /* The active set's conv_wgrad (below). */                                                \
    void par_conv_wgrad_##SFX(REAL *restrict g, REAL *restrict gb, const REAL *restrict xp,    \
                              const REAL *restrict dzT, size_t ld, const par_layer *ly,        \
                              size_t no, size_t ns, int first, REAL *restrict fold);

PAR_DECLARE_KERNELS(float, f32)
PAR_DECLARE_KERNELS(double, f64)

// --- Kernel variants ---------------------------------------------------------
// The kernels with more than one implementation, per dtype. Every entry of
// every set evaluates the same operations in the same order as the public
// kernel it stands behind (par_dense_forward_* etc., above), so all sets give
// the same bits; they differ only in speed and in the CPU they need.
//   conv_pack: Wp = the layer's transposed panel WT (c_in K K rows of
//              par_dense_ldwt(c_out)) packed for this set's conv_forward:
//              for each group of the set's MR tile rows (1 for the portable
//              set), the group's MR channels' weights, tap by tap; channels
//              past c_out +0. Wp: par_conv_pack_elems(ly) values (par_conv.h);
//   conv_forward: one sample of a stride-1 conv2d layer ly, from its padded
//              input xp (par_conv_pad, par_conv.h): y[co][oh][ow] = b[co], then
//              for taps t = (ci, kh, kw) ascending: y = fma(W[co][t],
//              xp[ci][oh + kh][ow + kw], y), the weights read from Wp (the
//              same set's conv_pack). y: (c_out, h_out, w_out). The chain the
//              contract gives the conv forward (par_conv.h), read without
//              im2col;
//   conv_wgrad: ns samples' part of a stride-1 conv2d's weight gradient,
//              channels [0, no) of the gradient dzT (positions x ld, channel
//              i of position p at dzT[p ld + i]; sample k's padded input at
//              xp + k par_conv_padded_elems(ly), its dzT at dzT + k h_out
//              w_out ld): for taps t = (ci, kh, kw) and i < no, g[t][i] = 0
//              (first) or g's own value, then for the samples in order and
//              p = (oh, ow) ascending: g[t][i] = fma(xp[ci][oh + kh][ow + kw],
//              dzT[p][i], g[t][i]); and the bias's, gb[i] = 0 (first) or its
//              own value, then likewise gb[i] = gb[i] + dzT[p][i]. With
//              fold (not NULL), g[t][i] goes to fold[t][i] = fold[t][i] +
//              g[t][i] instead (g is read when not first, never written): the
//              last samples of a chunk end its chains in the chunks' fold.
//              g, fold: (c_in K K, ld); ld >= no rounded up to PAR_DENSE_OB,
//              dzT read (never stored) up to there;
//   conv_dgrad: one sample's input gradient of a stride-1 conv2d, from its
//              padded output gradient dzp (par_conv_pad_dz): dx[ci][ih][iw] =
//              0, then for the taps (kh, kw) that reach an output position
//              (oh, ow) = (ih + pad - kh, iw + pad - kw), in ascending output
//              position: t = 0, for co ascending t = fma(W[co][(ci K + kh) K +
//              kw], dz[co][oh][ow], t); dx = dx + t, the weights read from Wd
//              (the same set's conv_dpack). The contract's chain and col2im
//              order (par_conv.h), without dcolT;
//   conv_dpack: Wd = the layer's weights W (c_out, c_in K K) by tap for this
//              set's conv_dgrad: for each group of the set's MR tile rows of
//              input channels (1 for the portable set) and each tap k = kh K +
//              kw, the c_out x MR values W[co][(ci K + kh) K + kw], channels
//              past c_in +0. Wd: par_conv_dpack_elems(ly) values (par_conv.h);
//   relu_forward / relu_backward: the PAR_ACT_RELU case of par_act_*;
//   adam_head: Adam (par_optim_*'s order) on the first elements of [0, n),
//              c = {b1, c1, b2, c2, bc1, bc2, eps, lr}; returns how many it did
//              (the caller does the rest with the scalar loop; may be 0);
//   transpose: WT[i][o] = W[o][i] for o in [o0, o1), i in [i0, i1), W (n_out,
//              n_in), WT rows ld apart: data movement, no arithmetic (the
//              transposed panels of par_dense_transpose, par_sgd_dense and
//              par_optim_dense).
//   pool2_forward: a 2 x 2 max-pool on a plane of n_rows x w_out windows (x:
//              2 n_rows rows of 2 w_out, y: n_rows rows of w_out): each
//              window's first maximum in scan order, m = x00, then x01, x10,
//              x11 each taken where > m (par_maxpool_forward's);
//   pool2_backward: the input gradient of a 2 x 2 max-pool on a plane of
//              n_rows x w_out windows (x and dx: 2 n_rows rows of 2 w_out, dy:
//              n_rows rows of w_out), with the derivative of relu (relu 1) or
//              none (0) of the layer below: each window's first maximum in
//              scan order (the forward's comparisons: m = x00, then x01, x10,
//              x11 each taken where > m) gets its dy, or +0 where relu and
//              !(m > 0); the other three +0. par_maxpool_backward followed by
//              par_act_backward, in one pass;
//   bn_sums, bn_normalize, bn_dx: batchnorm's loops (src/train/layer_bn.c)
//              on n samples of (n, nc, P) tensors x, dz, y, dx (pointing at
//              their first sample), channels c in [c0, c1), mean, inv, gamma,
//              beta, G, D indexed by channel:
//     bn_sums: per channel one chain a0 (and a1) from 0, over samples, then
//              positions, ascending:
//                what 0: a0 = a0 + x
//                what 1: d = x - mean; a0 = fma(d, d, a0)
//                what 2: h = (x - mean) * inv; a0 = fma(dz, h, a0); a1 = a1 + dz
//              add = 0: p0[c] = a0 (what 2: p1[c] = a1); add = 1: p0[c] = p0[c] + a0
//              (p1[c] = p1[c] + a1), continuing a fold. dz may be NULL unless what 2;
//              p1 is written only for what 2;
//     bn_normalize: y = fma((x - mean) * inv, gamma, beta) elementwise, then
//              with relu 1 y = y > 0 ? y : 0 (relu_forward's, in the same pass);
//     bn_dx:   a = gamma * inv; a = a / N; then elementwise h = (x - mean) * inv;
//              t = N * dz; t = t - D; u = h * G; t = t - u; dx = a * t.
#define PAR_KERNEL_SET_DTYPE(REAL)                                                              \
    struct {                                                                                    \
        void (*forward)(REAL *restrict y, const REAL *restrict x, const REAL *restrict WT,      \
                        const REAL *restrict b, size_t s0, size_t s1, size_t o0, size_t o1,     \
                        size_t n_in, size_t n_out);                                             \
        void (*gemm_acc)(REAL *restrict C, size_t ldc, const REAL *restrict A, size_t lda,      \
                         const REAL *restrict B, size_t ldb, size_t s0, size_t s1, size_t N,    \
                         size_t K);                                                             \
        void (*backward_data)(REAL *restrict dx, const REAL *restrict dz,                       \
                              const REAL *restrict W, size_t s0, size_t s1, size_t n_in,        \
                              size_t n_out);                                                    \
        void (*backward_weights)(REAL *restrict dW, REAL *restrict db, const REAL *restrict dz, \
                                 const REAL *restrict x, size_t B, size_t C, size_t c0,         \
                                 size_t c1, size_t o0, size_t o1, size_t n_in, size_t n_out,    \
                                 int cont);                                                     \
        void (*conv_pack)(REAL *restrict Wp, const REAL *restrict WT, const par_layer *ly);     \
        void (*conv_forward)(REAL *restrict y, const REAL *restrict xp, const REAL *restrict Wp, \
                             const REAL *restrict b, const par_layer *ly);                      \
        void (*conv_wgrad)(REAL *restrict g, REAL *restrict gb, const REAL *restrict xp,        \
                           const REAL *restrict dzT, size_t ld, const par_layer *ly, size_t no, \
                           size_t ns, int first, REAL *restrict fold);                          \
        void (*conv_dpack)(REAL *restrict Wd, const REAL *restrict W, const par_layer *ly);     \
        void (*conv_dgrad)(REAL *restrict dx, const REAL *restrict dzp, const REAL *restrict Wd, \
                           const par_layer *ly);                                                \
        void (*relu_forward)(REAL *restrict y, size_t n);                                       \
        void (*relu_backward)(REAL *restrict dy, const REAL *restrict y, size_t n);             \
        void (*pool2_forward)(REAL *restrict y, const REAL *restrict x, size_t n_rows,          \
                              size_t w_out);                                                    \
        void (*pool2_backward)(REAL *restrict dx, const REAL *restrict dy,                      \
                               const REAL *restrict x, size_t n_rows, size_t w_out, int relu);  \
        size_t (*adam_head)(REAL *restrict w, REAL *restrict m, REAL *restrict v,               \
                            const REAL *restrict g, size_t n, const REAL c[8]);                 \
        void (*transpose)(REAL *restrict WT, size_t ld, const REAL *restrict W, size_t n_in,    \
                          size_t o0, size_t o1, size_t i0, size_t i1);                          \
        void (*bn_sums)(REAL *restrict p0, REAL *restrict p1, const REAL *restrict x,           \
                        const REAL *restrict dz, const REAL *restrict mean,                     \
                        const REAL *restrict inv, size_t n, size_t nc, size_t P, size_t c0,     \
                        size_t c1, int what, int add);                                          \
        void (*bn_normalize)(REAL *restrict y, const REAL *restrict x, const REAL *restrict mean, \
                             const REAL *restrict inv, const REAL *restrict gamma,              \
                             const REAL *restrict beta, size_t n, size_t nc, size_t P,          \
                             size_t c0, size_t c1, int relu);                                   \
        void (*bn_dx)(REAL *restrict dx, const REAL *restrict x, const REAL *restrict dz,       \
                      const REAL *restrict mean, const REAL *restrict inv,                      \
                      const REAL *restrict gamma, const REAL *restrict G,                       \
                      const REAL *restrict D, REAL N, size_t n, size_t nc, size_t P, size_t c0, \
                      size_t c1);                                                               \
    }

// One variant: a static const table per variant in par_dense.c ("portable";
// "avx512vl" and "avx2+fma" on x86-64, "neon" on aarch64). Resolved once: the first kernel
// call picks the best set the CPU runs (thread-safe); each dispatched public
// kernel is then one indirect call through the active set (docs/DESIGN.md,
// section 4).
typedef struct par_kernel_set {
    const char *name;
    PAR_KERNEL_SET_DTYPE(float) f32;
    PAR_KERNEL_SET_DTYPE(double) f64;
} par_kernel_set;

// The active set (resolving it on first use). Never NULL.
const par_kernel_set *par_kernels_active(void);
// Writes up to max pointers to the sets this CPU can run, best first, into
// sets (may be NULL when max is 0); returns how many there are (at least 1:
// the portable set, always last).
size_t par_kernels_available(const par_kernel_set **sets, size_t max);
// Tests and tools: make k (one of par_kernels_available's) the active set;
// NULL goes back to the best. Not while kernels run on other threads.
void par_kernels_use(const par_kernel_set *k);
// The set called name that this CPU runs: a set's name ("avx512vl",
// "avx2+fma", "neon", "portable") or the part of it before '+' ("avx2"); NULL when there is none
// (unknown name, a set not compiled in or one this CPU cannot run). For a
// caller that lets the user force a set (the CLI's PARITY_KERNELS).
const par_kernel_set *par_kernels_find(const char *name);
// Name of the active set: the best the CPU runs ("avx512vl" on x86-64 with
// AVX-512F and VL, else "avx2+fma" with both, "neon" on aarch64, else
// "portable") unless par_kernels_use chose one.
const char *par_kernels_variant(void);

#endif
