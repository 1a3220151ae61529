// The layer table: one entry per layer kind (par_layer_kind), each in its own
// file (layer_dense.c, layer_conv.c, layer_pool.c, layer_bn.c). The engine
// calls only these ops, each with the same context; adding a kind is one file
// and one line in par_layers.c. Every op computes each element exactly as in
// one thread, whatever the split, and states its summation order (the
// kernels' headers give the details). Test faults are not the ops' business:
// engine_fault.c wraps an entry when a run has one. Tests: tests/unit/test_cnn.c,
// tests/unit/test_trainers.c.
//
// Layers with parameters split them by rows (par_layer.n_rows): threads and
// MPI segments take ranges of rows, so the chunk fold and the ring are the
// same for every kind.
#ifndef PAR_LAYERS_H
#define PAR_LAYERS_H

#include "par_engine.h"

// What every op gets: the engine, the calling thread with its scratch, and
// the kernel set of the pass.
typedef struct par_layer_ctx {
    par_engine *e;
    int t, T;                   // the calling thread, of T in the parallel region
    void *scratch;              // this thread's working space: e->scratch_elems elements
                                // (NULL when no layer needs any)
    const par_kernel_set *ks;   // the dense kernels' set (par_kernels.h), for KSET
} par_layer_ctx;

// Kernel fn of the context's set in the engine's dtype, (void *) arguments.
#define KSET(c, fn, ...)                                                                       \
    ((c)->e->dt == PAR_F32 ? (c)->ks->f32.fn(__VA_ARGS__) : (c)->ks->f64.fn(__VA_ARGS__))

// The weight gradient's work: parameter rows [o0, o1), over chunks [c0, c1)
// of C samples of the batch's samples [s_base, s_base + B).
typedef struct par_grad_range {
    size_t s_base, B, C;
    size_t c0, c1;
    size_t o0, o1;
    int cont;        // 1: continue the fold already in e->g; 0: start it
    const void *dz;  // the layer's output gradient from sample s_base on: e->d[l] there
                     // (the test-only skip fault passes a copy)
} par_grad_range;

typedef struct par_layer_ops {
    const char *name;
    // Forward of samples [s0, s1) into e->a[l + 1], activation included: the
    // share of thread c->t of c->T. Every thread calls it; a barrier follows
    // unless this layer and the next (or the loss) both split samples
    // (par_engine_splits_samples).
    void (*forward)(const par_layer_ctx *c, int l, size_t s0, size_t s1);
    // 1: forward can compute thread t's own samples (par_engine_own_samples),
    // each from that sample's input alone, so a thread's samples go through
    // consecutive per_sample layers with no barrier between them. (A wide
    // dense layer splits rows instead: par_engine_splits_samples.)
    int per_sample;
    // For samples [s0, s1), all of them thread c->t's: d[l] is final for them.
    // If l > 0, writes d[l - 1] = dL/d(input) (the engine then applies layer
    // l-1's activation derivative, unless applies_act). Every thread calls it, with or without
    // samples, so a kind that reduces over the batch may hold a barrier.
    void (*backward)(const par_layer_ctx *c, int l, size_t s0, size_t s1);
    // 1: backward applies layer l-1's activation derivative to d[l - 1] itself
    // (in the same pass, the same bits); the engine does not apply it again.
    int applies_act;
    // Layers with parameters (NULL: none), after backward: the weight and
    // bias gradient of r's rows into e->g, per chunk a fresh chain over its
    // samples ascending, chunks folded left in order.
    void (*weight_grads)(const par_layer_ctx *c, int l, const par_grad_range *r);
} par_layer_ops;

extern const par_layer_ops par_layer_dense, par_layer_conv2d, par_layer_maxpool,
    par_layer_batchnorm;

// The entry for a kind.
const par_layer_ops *par_layer_ops_of(par_layer_kind kind);

// TESTS ONLY: batchnorm's forward with fault f (BN_SWAP or BN_VAR_ULP,
// firing now) in its batch statistics; engine_fault.c's wrapper calls it.
void par_bn_forward_fault(const par_layer_ctx *c, int l, size_t s0, size_t s1, const par_fault *f);

#endif
