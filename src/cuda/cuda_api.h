// The CUDA room's C interface (library par_cuda, built with -DPARITY_CUDA):
// the device, its memory, and the launches of the kernels (dense, conv2d,
// max-pool, batchnorm) whose bodies are cuda_bodies.h's. cuda_emu.c runs the
// same interface on the host (tests). Every launch is asynchronous on the default
// stream and checks nothing; a launch or kernel failure surfaces as an
// error of the next par_cuda_get or par_cuda_sync. The trainer
// (src/train/train_cuda.c) is the only user. Tests: tests/gpu/test_cuda.c.
#ifndef CUDA_API_H
#define CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define restrict __restrict__   // the C headers below, read by nvcc as C++
extern "C" {
#endif

#include "par_dtype.h"
#include "par_kernels.h"
#include "par_model.h"
#include "par_status.h"

// One step's update: the optimizer's coefficients (k NULL: SGD with lr), and
// the parameter whose gradient gets one ulp more (--fault ulp:STEP:INDEX;
// SIZE_MAX: none) before its update.
typedef struct par_cuda_update {
    const par_optim_coef *k;
    double lr;
    size_t ulp_at;
} par_cuda_update;

// Opens device `index` modulo the number visible (CUDA_VISIBLE_DEVICES: an MPI
// rank's round robin); PAR_ERR_CONFIG, with the runtime's reason, when there
// is none. name: its name (cap bytes).
par_status par_cuda_open(int index, char *name, size_t cap);
// Device memory of `bytes` (zeroed) into *p, and its release (NULL: nothing).
par_status par_cuda_alloc(void **p, size_t bytes);
void par_cuda_free(void *p);
// Page-locked host memory (for the per-step copies), and its release.
par_status par_cuda_host_alloc(void **p, size_t bytes);
void par_cuda_host_free(void *p);
// Per-layer timing, when PARITY_CUDA_PROFILE is set (begin returns 1; else 0
// and both do nothing): end adds the time of what was launched since begin to
// label's total, with the flops given; at exit a table goes to stderr: per
// label the calls, milliseconds, microseconds a call and TFLOP/s. Each end
// waits for the device.
int par_cuda_prof_begin(void);
void par_cuda_prof_end(const char *label, double flops);
// Host to device, queued after the launches before it (src must stay valid
// and unchanged until the next par_cuda_get or par_cuda_sync).
par_status par_cuda_put(void *dst, const void *src, size_t bytes);
// Device to host, after everything queued before it; reports their errors.
par_status par_cuda_get(void *dst, const void *src, size_t bytes);
// Waits for everything queued; reports their errors.
par_status par_cuda_sync(void);

// x[s][f] = data[idx[s]][f] and labels[s] = lab_all[idx[s]] for s < B.
void par_cuda_gather(par_dtype dt, void *x, int32_t *labels, const void *data,
                     const int32_t *lab_all, const int32_t *idx, size_t B, size_t nf);
// y = act(x W^T + b) for B samples (par_dense_forward's order); W (n_out, n_in).
void par_cuda_forward(par_dtype dt, void *y, const void *x, const void *W, const void *b,
                      par_act act, size_t B, size_t n_in, size_t n_out);
// par_softmax_xent of B samples of K logits, dz divided by B_total (the batch's size).
void par_cuda_softmax_xent(par_dtype dt, void *dz, void *loss, const void *z,
                           const int32_t *labels, size_t B, size_t B_total, size_t K);
// dx = (dz W) * act'(y) for B samples (par_dense_backward_data, par_act_backward).
void par_cuda_backward_data(par_dtype dt, void *dx, const void *dz, const void *W,
                            const void *y, par_act act, size_t B, size_t n_in, size_t n_out);
// A dense layer's weight and bias gradient in chunks of C (par_dense_backward_weights
// over every chunk) into g, then its update u (par_optim's formulas with the
// state m, v) of w. w, g, m, v are the whole parameter arrays; the layer's
// weights start at wo, its biases at bo.
void par_cuda_grad_update(par_dtype dt, void *w, void *g, void *m, void *v,
                          const void *dz, const void *x, size_t wo, size_t bo, size_t B,
                          size_t C, size_t n_in, size_t n_out, const par_cuda_update *u);
// *out (one element of dt) = par_loss_fold of B losses in chunks of C.
void par_cuda_loss_fold(par_dtype dt, void *out, const void *loss, size_t B, size_t C);

// conv2d layer ly: y = act(conv(x, W) + b) for B samples (the reference's order).
void par_cuda_conv_forward(par_dtype dt, void *y, const void *x, const void *W, const void *b,
                           par_act act, const par_layer *ly, size_t B);
// Its gradient's chunk parts for the ceil(B / C) chunks of the B samples:
// parameter p's (weights first, then biases) to part[k stride + q], q = qw +
// p for a weight, qb + p - nw for a bias (nw = n_rows row_len).
void par_cuda_conv_grad_parts(par_dtype dt, void *part, size_t stride, size_t qw, size_t qb,
                              const void *dz, const void *x, const par_layer *ly, size_t B,
                              size_t C);
// Its input gradient through act_below', the activation of the layer below,
// whose output is x.
void par_cuda_conv_backward_data(par_dtype dt, void *dx, const void *dz, const void *W,
                                 const void *x, par_act act_below, const par_layer *ly, size_t B);
// Each parameter's gradient, the left fold of its nk parts (stride: the
// layer's parameter count, qw 0), into g and its update; weights at wo, biases at bo.
void par_cuda_conv_update(par_dtype dt, void *w, void *g, void *m, void *v, const void *part,
                          const par_layer *ly, size_t wo, size_t bo, size_t nk,
                          const par_cuda_update *u);
// Max-pool layer ly: forward, and its input gradient through act_below'.
void par_cuda_pool_forward(par_dtype dt, void *y, const void *x, const par_layer *ly, size_t B);
void par_cuda_pool_backward(par_dtype dt, void *dx, const void *dz, const void *x,
                            par_act act_below, const par_layer *ly, size_t B);
// Batchnorm layer ly in training mode over a batch of Bt samples, of which
// these B (whole chunks, from a chunk boundary) are here. p: its five views
// (gamma, beta, running_mean, running_var, num_batches_tracked, one after the
// other); st: its statistics (8 c_out values, kept for the backward pass);
// parts: c_out values a chunk, chunk k at k c_out. Forward: the sums' parts of
// the chunks here; the squares' parts, given the sums' parts of every chunk
// (psum); then the statistics, the running statistics and the output, given
// every chunk's parts. Backward: the gradients' parts of the chunks here;
// given every chunk's, the gradients of gamma (at wo) and beta (at bo) into
// g and their update; the input gradient through act_below'.
void par_cuda_bn_sum_parts(par_dtype dt, void *part, const void *x, const par_layer *ly,
                           size_t B, size_t C);
void par_cuda_bn_sq_parts(par_dtype dt, void *part, const void *psum, const void *x,
                          const par_layer *ly, size_t B, size_t Bt, size_t C);
void par_cuda_bn_finish(par_dtype dt, void *y, const void *x, void *p, void *st,
                        const void *psum, const void *psq, par_act act, const par_layer *ly,
                        size_t B, size_t Bt, size_t C);
void par_cuda_bn_grad_parts(par_dtype dt, void *pg, void *pb, const void *dz, const void *x,
                            const void *st, const par_layer *ly, size_t B, size_t C);
void par_cuda_bn_update(par_dtype dt, void *w, void *g, void *m, void *v, void *st,
                        const void *pg, const void *pb, const par_layer *ly, size_t wo,
                        size_t bo, size_t Bt, size_t C, const par_cuda_update *u);
void par_cuda_bn_backward_data(par_dtype dt, void *dx, const void *dz, const void *x,
                               const void *st, par_act act_below, const par_layer *ly, size_t B,
                               size_t Bt);
// Several ranks: a dense layer's gradient's chunk parts (each parameter's at
// its own index q in part[k stride + q]), the losses' chunk sums (at q), the
// left fold of nk chunks' parts of n elements into run (continuing run's own
// values when cont), and the update of parameters [lo, hi) from gradients in run.
void par_cuda_dense_grad_parts(par_dtype dt, void *part, size_t stride, size_t wo, size_t bo,
                               const void *dz, const void *x, size_t B, size_t C, size_t n_in,
                               size_t n_out);
void par_cuda_loss_parts(par_dtype dt, void *part, size_t stride, size_t q, const void *loss,
                         size_t B, size_t C);
void par_cuda_fold(par_dtype dt, void *run, const void *part, size_t nk, size_t stride, size_t n,
                   int cont);
void par_cuda_apply(par_dtype dt, void *w, void *g, void *m, void *v, const void *run, size_t lo,
                    size_t hi, const par_cuda_update *u);

#ifdef __cplusplus
}
#endif

#endif
