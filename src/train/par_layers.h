// The layer table: one entry per layer kind (par_layer_kind), each in its own
// file (layer_dense.c, layer_conv.c, layer_pool.c). The engine calls only
// these ops; adding a kind is one file and one line in par_layers.c. Every op
// computes each element exactly as in one thread, whatever the split, and
// states its summation order (the kernels' headers give the details).
//
// Layers with parameters split them by rows (par_layer.n_rows): threads and
// MPI segments take ranges of rows, so the chunk fold and the ring are the
// same for every kind.
#ifndef PAR_LAYERS_H
#define PAR_LAYERS_H

#include "par_engine.h"

typedef struct par_layer_ops {
    const char *name;
    // Forward of samples [s0, s1) into e->a[l + 1], activation included: the
    // share of thread t of T. Every thread calls it; a barrier follows unless
    // this layer and the next (or the loss) both split samples
    // (par_engine_splits_samples).
    void (*forward)(par_engine *e, int l, size_t s0, size_t s1, int t, int T);
    // 1: forward can compute thread t's own samples (par_engine_own_samples),
    // each from that sample's input alone, so a thread's samples go through
    // consecutive per_sample layers with no barrier between them. (A wide
    // dense layer splits rows instead: par_engine_splits_samples.)
    int per_sample;
    // For samples [s0, s1), all of them thread t's: d[l] is final for them.
    // If l > 0, writes d[l - 1] = dL/d(input) (the engine then applies layer
    // l-1's activation derivative). Every thread calls it, with or without
    // samples, so a kind that reduces over the batch may hold a barrier.
    void (*backward)(par_engine *e, int l, size_t s0, size_t s1, int t);
    // Layers with parameters (NULL: none), after backward: the weight and
    // bias gradient of rows [o0, o1) into e->g, over chunks [c0, c1) of C
    // samples of the batch's samples [s_base, s_base + B): per chunk a fresh
    // chain over its samples ascending, chunks folded left in order (cont:
    // continuing the fold already in e->g). Sample `skip` (relative to
    // s_base; >= B: none) is left out: the test-only skip fault.
    void (*weight_grads)(par_engine *e, int l, size_t s_base, size_t B, size_t C, size_t c0,
                         size_t c1, size_t o0, size_t o1, int cont, size_t skip);
} par_layer_ops;

extern const par_layer_ops par_layer_dense, par_layer_conv2d, par_layer_maxpool,
    par_layer_batchnorm;

// The entry for a kind.
const par_layer_ops *par_layer_ops_of(par_layer_kind kind);

#endif
