// The shared compute of the kernel-based trainers (serial, omp, mpi, hybrid,
// root): buffers for one batch, forward + loss + input gradients of a range
// of samples, and the weight gradient of a range of chunks, each split among
// `threads` OpenMP threads so that every element is computed exactly as in a
// single thread. The trainers differ only in how chunk folds are combined.
// The engine walks the model's layers through the layer table (par_layers.h);
// what a layer kind computes, and in which order, lives in its own file.
#ifndef PAR_ENGINE_H
#define PAR_ENGINE_H

#include "par_kernels.h"
#include "par_trainer.h"

// Sets (or with kind NONE clears) the test-only fault of the engines this
// process creates from now on without a cfg.fault of their own.
void par_fault_set(const par_fault *f);
// "ulp:STEP:INDEX", "skip:STEP:LAYER:SAMPLE", "half:STEP:LAYER", "swap:STEP:LAYER",
// "bnswap:STEP:LAYER", "bnvar:STEP:LAYER:CHANNEL".
par_status par_fault_parse(par_fault *f, const char *spec);

// An ordered fold across processes, for batch statistics inside a pass
// (batchnorm). Called by one thread. recv: acc = the fold of the chunks of
// every earlier process (returns 1), or nothing to continue (returns 0: the
// first process). send: acc holds the fold including this process's chunks;
// passes it on and leaves in acc the fold of all chunks, on every process.
typedef struct par_batch_ring {
    int (*recv)(void *ctx, void *acc, size_t n);
    void (*send)(void *ctx, void *acc, size_t n);
    void *ctx;
} par_batch_ring;

struct par_layer_ops;
typedef struct par_fault_state par_fault_state;   // engine_fault.c

typedef struct par_engine {
    const par_model *m;
    const struct par_layer_ops *ops[PAR_MAX_LAYERS];   // layer l's ops (par_layers.h)
    par_dtype dt;
    par_mode mode;
    size_t C, B_cap;
    double lr;
    int threads;
    int samples_only;                    // 1: every per_sample forward splits samples, as the
                                         // MPI ranks' passes do (parity model times that)
    void *w;                             // parameters (n_params)
    void *g;                             // gradient (n_params)
    void *loss;                          // per-sample loss (B_cap)
    void *wt[PAR_MAX_LAYERS];            // transposed weights, (row_len, ldwt(n_rows))
    void *a[PAR_MAX_LAYERS + 1];         // a[0] input copy, a[l+1] = output of layer l
    void *d[PAR_MAX_LAYERS];             // dL/d(pre-activation) of layer l
    void *scratch;                       // conv2d: working space, scratch_elems per thread
    size_t scratch_elems;                // elements of scratch per thread
    void *bn[PAR_MAX_LAYERS];            // batchnorm: mean, inv, var, (fold), S, Q per channel
    int bn_train;                        // this forward pass: batch statistics (1) or running (0)
    size_t fb_s0, fb_s1, fb_B;           // samples of this forward/backward pass, of the batch
    par_batch_ring ring;                 // MPI trainers; recv NULL: one process
    int ring_have;                       // ring.recv's answer, shared with the threads
    size_t hits;                         // correct predictions of the last forward
    long steps;                          // steps begun (par_engine_begin_step)
    par_fault fault;                     // TESTS ONLY: cfg.fault, else the process-wide one, as
                                         // at init; kind PAR_FAULT_NONE: none
    par_fault_state *fs;                 // what that fault installed (engine_fault.c); NULL: none
    par_optim optim;                     // cfg.optim, or SGD
    void *os[2];                         // optimizer state (n_params each), NULL when unused
    long opt_t;                          // optimizer updates done
    long pow_t;                          // p1 = b1^pow_t, p2 = b2^pow_t (cache; -1: none)
    double p1, p2;
    double phase[PAR_PHASE_N];           // seconds per phase (par_phase), the caller's thread
} par_engine;

// b^t as every path computes it: p = 1, then t times p = p * b, in double.
double par_optim_power(double b, long t);

// The coefficients of an optimizer update (par_kernels.h) for dtype dt: lr
// and every hyperparameter rounded to dt once; adam: c1 = 1 - b1, c2 = 1 - b2
// in dt, bc1 = 1 - p1 and bc2 = 1 - p2 in double rounded to dt once, with
// p1 = b1^t, p2 = b2^t from par_optim_power (b1, b2 the dt-rounded values).
// o->kind must not be SGD.
void par_optim_coefs(par_optim_coef *k, const par_optim *o, par_dtype dt, double lr, double p1,
                     double p2);

// Marks the start of a step (for faults that fire at a given step).
void par_engine_begin_step(par_engine *e);

par_status par_engine_init(par_engine *e, const par_run_cfg *cfg);
void par_engine_free(par_engine *e);

// Forward, softmax + xent and (if backward) input gradients of samples
// [s0, s1) of the batch (of B samples in all: the loss gradient is divided
// by B). Sets e->hits to the number of correct predictions in [s0, s1).
void par_engine_forward_backward(par_engine *e, const par_batch *batch, size_t s0, size_t s1,
                                 int backward);

// Weight and bias gradients of chunks [c0, c1) into e->g, for the parameter
// rows of every layer; cont as in par_dense_backward_weights. In fast mode
// the chunks are one fma chain (the chunk boundaries are ignored).
void par_engine_weight_grads(par_engine *e, size_t B, size_t c0, size_t c1, int cont);

// Same for the parameter rows [o0, o1) of layer l only (for pipelined
// reductions); layer l must have parameters (n_rows > 0).
void par_engine_layer_grads(par_engine *e, int l, size_t B, size_t c0, size_t c1, size_t o0,
                            size_t o1, int cont);

// Per-sample losses of chunks [c0, c1) folded onto acc (see par_loss_fold).
double par_engine_loss_fold(const par_engine *e, size_t B, size_t c0, size_t c1, double acc,
                            int cont);

// The batch mean from the folded loss sum: sum / B rounded in the dtype.
double par_engine_loss_mean(const par_engine *e, double sum, size_t B);

// Trainer-table helpers for engine-based states whose first member is the engine.
par_status par_engine_params_op(void *state, const void **w, size_t *n);
par_status par_engine_set_params_op(void *state, const void *w);
par_status par_engine_grad_op(void *state, const void **g);
par_status par_engine_get_optim_op(void *state, par_optim_state *out);
par_status par_engine_set_optim_op(void *state, const par_optim_state *in);
par_status par_engine_set_step_op(void *state, long steps);

// Recomputes the transposed weight panels from e->w: after e->w was replaced
// other than by par_engine_update (init, set_params, a broadcast).
void par_engine_sync_wt(par_engine *e);

// Rows [o0, o1) of layer `layer` (which has parameters): its weight rows,
// their bias entries, optimizer state and transposed panel columns.
typedef struct par_rows {
    int layer;
    size_t o0, o1;
} par_rows;

// Recomputes the panel columns of rows r[0..n) from e->w (rows received from
// another rank).
void par_engine_sync_rows(par_engine *e, const par_rows *r, int n);

// The optimizer update elementwise (and the transposed panels kept in
// step): SGD w = w - lr * g, or e->optim with its state.
void par_engine_update(par_engine *e);

// The same update in pieces (the sharded MPI update): begin counts the update
// and rounds its coefficients, once per step; then every row is updated
// exactly once, by par_engine_update_rows calls in any order. The update is
// elementwise, so the pieces give the bits of par_engine_update.
typedef struct par_update {
    int sgd;
    par_optim_coef k;
} par_update;
void par_engine_update_begin(par_engine *e, par_update *u);
void par_engine_update_rows(par_engine *e, const par_update *u, const par_rows *r, int n);

// One whole local step in one parallel region: par_engine_forward_backward
// of every sample, par_engine_weight_grads of every chunk, then
// par_engine_update, with the same arithmetic; the threads meet at one
// barrier inside instead of three regions' starts and ends (a waiting
// thread costs a core: docs/performance.md, "Threads on a busy machine").
// The loss is left in e->loss for par_engine_loss_fold.
void par_engine_step(par_engine *e, const par_batch *batch);

static inline size_t par_n_chunks(size_t B, size_t C) { return (B + C - 1) / C; }

// ---- Engine internals, for the layer files (par_layers.h) -----------------------

// Batchnorm's engine state e->bn[l]: PAR_BN_SLOTS per-channel vectors (mean,
// inv, var, the fold's accumulator, S, Q; layer_bn_impl.inc), then two per
// chunk of the batch.
#define PAR_BN_SLOTS 6

// Element i of an array of the engine's dtype.
static inline void *par_at(const par_engine *e, const void *base, size_t i)
{
    return (char *)base + i * par_dtype_size(e->dt);
}

// The work split (engine_split.c): who computes which elements, never how.
// [lo, hi) of n items for thread t of T, in multiples of `quantum` items.
void par_split(size_t n, size_t quantum, int t, int T, size_t *lo, size_t *hi);
// Thread t of T's share of [a, b), in multiples of 4 items.
void par_split_range(size_t a, size_t b, int t, int T, size_t *lo, size_t *hi);
// The chunks [c0, c1) of n_chunks that rank r of P owns (the MPI trainers, cuda
// --ranks): balanced, lower ranks get the extra ones, so rank 0 owns chunk 0;
// and the samples [s0, s1) they hold of a batch of B in chunks of C.
void par_own_chunks(size_t n_chunks, int r, int P, size_t *c0, size_t *c1);
void par_own_samples(size_t B, size_t C, int r, int P, size_t *s0, size_t *s1);
// The samples of [s0, s1) that thread t of T owns in a pass: forward of the
// per_sample layers, the loss and the input gradients.
void par_engine_own_samples(size_t s0, size_t s1, int t, int T, size_t *lo, size_t *hi);
// 1: layer l's forward of n samples on T threads splits the samples, with no
// barrier needed before a next layer that does too; 0: it splits otherwise.
int par_engine_splits_samples(const par_engine *e, int l, size_t n, int T);
// The parameter rows of layer l that thread t of T owns in every phase
// (weight gradient, update, transposed panels).
void par_engine_own_rows(const par_layer *ly, int t, int T, size_t *lo, size_t *hi);

// ---- Test-only faults (engine_fault.c) --------------------------------------------
// The engine calls these only when e->fault is in force, so a run without a
// fault has no fault branch in its passes, layer ops or updates.

// The process-wide fault (par_fault_set).
const par_fault *par_fault_process(void);
// Installs what e->fault needs: a wrapper around its layer's ops in e->ops
// (HALF_FWD, SKIP_SAMPLE, CHUNK_SWAP; BN_SWAP, BN_VAR_ULP on a batchnorm
// layer) and its buffers. PAR_ERR_ALLOC; par_fault_free frees it all.
par_status par_fault_install(par_engine *e);
void par_fault_free(par_engine *e);
// 1: e->fault is of kind `kind` and fires at this step.
int par_fault_fires(const par_engine *e, par_fault_kind kind);
// OPT_BETA, when it fires: mu and b1 of an update's coefficients + 2^-10.
void par_fault_coefs(const par_engine *e, par_optim_coef *k);
// GRAD_ULP: gradient element `index` + 1 ulp, if it lies in rows r.
void par_fault_grad_ulp(par_engine *e, const par_rows *r);
// OPT_SWAP around the update of rows r: save keeps w and the state of r as
// the update finds them; apply then sets w = w0 - lr * step(state before), in
// double, the state kept as the update left it. The caller then brings r's
// transposed panels up to date (par_engine_sync_rows).
void par_fault_swap_save(par_engine *e, const par_rows *r);
void par_fault_swap_apply(par_engine *e, const par_optim_coef *k, const par_rows *r);

#endif
