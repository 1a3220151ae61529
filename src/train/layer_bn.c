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
// too (the input gradient is built from them). The loops over samples and
// positions are the kernel set's (bn_sums, bn_normalize, bn_dx in
// par_kernels.h); this file keeps the chunks, the ring and the statistics.
// Tests: tests/unit/test_cnn.c, tests/mpi/test_mpi_cnn.c, test_kernels.
#include <math.h>
#include <stdint.h>

#include "par_layers.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SFX f32
#define SQRT sqrtf
#define NEXTUP(x) nextafterf(x, INFINITY)
#include "layer_bn_impl.inc"
#undef REAL
#undef SFX
#undef SQRT
#undef NEXTUP

#define REAL double
#define SFX f64
#define SQRT sqrt
#define NEXTUP(x) nextafter(x, INFINITY)
#include "layer_bn_impl.inc"

// The fold of a per-channel vector over every process's chunks: each thread
// computes its channels' chunk partials, then ring_recv (one thread talks to
// MPI), the threads add their partials in chunk order, ring_send. All
// threads call both.
static int ring_recv(par_engine *e, void *acc, size_t n)
{
    int have = 0;
#pragma omp barrier
    // (no thread still reads acc from the previous fold)
#pragma omp master
    if (e->ring.recv) have = e->ring.recv(e->ring.ctx, acc, n);
#pragma omp barrier
    // every thread needs the master's answer: broadcast it through the engine
#pragma omp master
    e->ring_have = have;
#pragma omp barrier
    return e->ring_have;
}

static void ring_send(par_engine *e, void *acc, size_t n)
{
#pragma omp barrier
#pragma omp master
    if (e->ring.send) e->ring.send(e->ring.ctx, acc, n);
#pragma omp barrier
}

// The forward with test fault f (NULL: none; par_bn_forward_fault): BN_SWAP
// reorders the mean's fold, BN_VAR_ULP moves one channel's variance.
static void forward_with(const par_layer_ctx *c, int l, const par_fault *f)
{
    par_engine *e = c->e;
    const size_t nc = e->m->layers[l].c_out;
    const int swap = f && f->kind == PAR_FAULT_BN_SWAP;
    const size_t ulp_c = f && f->kind == PAR_FAULT_BN_VAR_ULP ? f->index : SIZE_MAX;
    size_t lo, hi;
    par_split(nc, 1, c->t, c->T, &lo, &hi);
    if (e->bn_train) {   // the batch's mean, then its variance, each a fold over all chunks
        void *acc = par_at(e, e->bn[l], 3 * nc);
        for (int sq = 0; sq <= 1; sq++) {
            // before waiting for earlier ranks
            PAR_DT_CALL(e->dt, bn_parts, e, c->ks, l, sq, lo, hi);
            const int have = ring_recv(e, acc, nc);
            PAR_DT_CALL(e->dt, bn_fold, e, l, 1, acc, have, lo, hi, swap);
            ring_send(e, acc, nc);
            PAR_DT_CALL(e->dt, bn_stats, e, l, sq, lo, hi, ulp_c);
        }
        if (c->t == 0) PAR_DT_CALL(e->dt, bn_count, e, l);
    }
    PAR_DT_CALL(e->dt, bn_normalize, e, c->ks, l, lo, hi);
}

// The pass's samples [s0, s1) are e->fb_s0, e->fb_s1, which the statistics read.
static void forward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    (void)s0;
    (void)s1;
    forward_with(c, l, NULL);
}

void par_bn_forward_fault(const par_layer_ctx *c, int l, size_t s0, size_t s1, const par_fault *f)
{
    (void)s0;
    (void)s1;
    forward_with(c, l, f);
}

static void backward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    (void)s0;
    (void)s1;
    par_engine *e = c->e;
    // Every sample's dz must be there; dgamma and dbeta of the whole batch
    // (the fold over every process's chunks, into the layer's gradient), then
    // dx of every channel before the layer below goes on with its samples.
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    size_t lo, hi;
    par_split(ly->c_out, 1, c->t, c->T, &lo, &hi);
#pragma omp barrier
    void *g = par_at(e, e->g, m->views[ly->w_view].offset);   // dgamma, then dbeta
    PAR_DT_CALL(e->dt, bn_parts, e, c->ks, l, 2, lo, hi);   // before waiting for earlier ranks
    const int have = ring_recv(e, g, 2 * ly->c_out);
    PAR_DT_CALL(e->dt, bn_fold, e, l, 2, g, have, lo, hi, 0);
    ring_send(e, g, 2 * ly->c_out);
    if (l > 0) PAR_DT_CALL(e->dt, bn_dx, e, c->ks, l, lo, hi);
#pragma omp barrier
}

// 1: the backward pass has written these very sums into e->g already: it
// folded every chunk of the whole batch in this process (no ring: a serial
// or omp step), and r asks for that fold afresh, of the same chunks and the
// same dz. bn_parts then bn_fold there and bn_grads here evaluate the same
// chains and the same fold, so g keeps its values and the pass over x and dz
// is not repeated.
static int grads_done(const par_engine *e, int l, const par_grad_range *r)
{
    return e->bn_train && !e->ring.recv && !e->ring.send && e->fb_s0 == 0 &&
           e->fb_s1 == e->fb_B && r->s_base == 0 && r->B == e->fb_B && r->C == e->C &&
           r->c0 == 0 && r->c1 == par_n_chunks(r->B, r->C) && !r->cont && r->dz == e->d[l];
}

static void weight_grads(const par_layer_ctx *c, int l, const par_grad_range *r)
{
    if (grads_done(c->e, l, r)) return;
    PAR_DT_CALL(c->e->dt, bn_grads, c->e, c->ks, l, r);
}

const par_layer_ops par_layer_batchnorm = {.name = "batchnorm",
                                           .per_sample = 0,
                                           .forward = forward,
                                           .backward = backward,
                                           .weight_grads = weight_grads};
