// The batchnorm layer (per channel, PyTorch's BatchNorm1d/2d in training and
// evaluation mode), in the order reference/ref_impl.inc writes out:
//   training: S = the chunk-folded sum of x (per chunk, samples then
//     positions ascending), mean = S / N; Q = the chunk-folded fma(d, d, .)
//     of d = x - mean, var = Q / N; inv = 1 / sqrt(var + eps);
//     y = act(fma((x - mean) inv, gamma, beta)); running statistics
//     rm = k rm + m mean, rv = k rv + m Q / (N - 1), k = 1 - m, and
//     num_batches_tracked + 1.
//   evaluation: y = act(fma((x - rm) (1 / sqrt(rv + eps)), gamma, beta)).
//   backward: dgamma, dbeta chunk-folded (fma(dz, xhat, .), dz + .); then
//     dx = (gamma inv / N) (N dz - dbeta - xhat dgamma), in that order.
// Threads split channels: every statistic of a channel is one thread's, so
// no element depends on the split. The batch sums are reductions inside
// the forward and backward passes; they keep the chunk order in fast mode
// too (the input gradient is built from them).
#include <math.h>
#include <omp.h>

#include "par_layers.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SFX f32
#define FMA fmaf
#define SQRT sqrtf
#include "layer_bn_impl.inc"
#undef REAL
#undef SFX
#undef FMA
#undef SQRT

#define REAL double
#define SFX f64
#define FMA fma
#define SQRT sqrt
#include "layer_bn_impl.inc"

static void forward(par_engine *e, int l, size_t s0, size_t s1, int t, int T)
{
    size_t lo, hi;
    par_split(e->m->layers[l].c_out, 1, t, T, &lo, &hi);
    if (e->dt == PAR_F32) bn_forward_f32(e, l, s0, s1, lo, hi);
    else bn_forward_f64(e, l, s0, s1, lo, hi);
    if (par_engine_fault_on(e, PAR_FAULT_HALF_FWD, l)) {
        const par_layer *ly = &e->m->layers[l];
        const size_t P = ly->h_out * ly->w_out;
        for (size_t s = s0; s < s1; s++)
            par_engine_round_to_half(e, e->a[l + 1], (s * ly->c_out + lo) * P,
                                     (s * ly->c_out + hi) * P);
    }
}

static void backward(par_engine *e, int l, size_t s0, size_t s1, int t)
{
    (void)s0;
    (void)s1;
    // Every sample's dz must be there, and dx of every channel before the
    // layer below goes on with this thread's own samples.
    const int T = omp_get_num_threads();
    size_t lo, hi;
    par_split(e->m->layers[l].c_out, 1, t, T, &lo, &hi);
#pragma omp barrier
    if (e->dt == PAR_F32) bn_backward_f32(e, l, lo, hi);
    else bn_backward_f64(e, l, lo, hi);
#pragma omp barrier
}

static void weight_grads(par_engine *e, int l, size_t s_base, size_t B, size_t C, size_t c0,
                         size_t c1, size_t o0, size_t o1, int cont, size_t skip)
{
    if (e->dt == PAR_F32) bn_grads_f32(e, l, s_base, B, C, c0, c1, o0, o1, cont, skip);
    else bn_grads_f64(e, l, s_base, B, C, c0, c1, o0, o1, cont, skip);
}

const par_layer_ops par_layer_batchnorm = {
    .name = "batchnorm", .forward = forward, .backward = backward, .weight_grads = weight_grads};
