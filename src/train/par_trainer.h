// Trainers plug in through one table (docs/DESIGN.md, section 3). The CLI and the
// harness see only par_trainer_ops; adding a trainer is one file and one
// line in par_trainers.c. A trainer reads no environment and no argv:
// par_run_cfg carries everything.
#ifndef PAR_TRAINER_H
#define PAR_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "par_dtype.h"
#include "par_model.h"
#include "par_status.h"

typedef enum par_mode { PAR_MODE_EXACT = 0, PAR_MODE_FAST = 1 } par_mode;

// Parameters per segment of the exact MPI ring (train_mpi.c; the scaling model uses it).
#define PAR_RING_SEG_PARAMS 16384

// Exact mpi/hybrid on more than one rank, batch B: 1 when the ranks gather
// layer l's per-sample inputs and output gradients, so that the owner of
// each row computes its weight gradient over every chunk alone; 0 when the
// layer's gradient is folded along the ordered chain (train_mpi.c).
int par_ring_gathers(const par_model *m, int l, size_t B);
// Over all layers at batch B: the parameters whose gradient runs along the
// chain, and the values per sample the gathered layers all-gather.
void par_ring_split(const par_model *m, size_t B, size_t *chain_params, size_t *gather_values);

enum {
    PAR_CAP_THREADS = 1u << 0,  // honours cfg.threads
    PAR_CAP_RANKS = 1u << 1,    // runs one process per MPI rank
    PAR_CAP_FILLS_BATCH = 1u << 2,   // assembles the batch itself (par_batch.fill)
    PAR_CAP_LAZY_PARAMS = 1u << 3,   // params copies them (from a device): par_run asks for
                                     // them only at steps where a hook wants them
    PAR_CAP_RANKS_ASKED = 1u << 4,   // one process alone, or one per MPI rank when `parity
                                     // train --ranks R` (R > 1) or a launcher asks (cuda)
};

// Test-only faults: deliberately wrong arithmetic, so that tests can show
// the checks catch it (negative controls). Never set by `parity train`
// unless the hidden --fault flag is given.
typedef enum par_fault_kind {
    PAR_FAULT_NONE = 0,
    PAR_FAULT_GRAD_ULP,     // gradient element `index` of the batch gradient + 1 ulp
    PAR_FAULT_SKIP_SAMPLE,  // layer `layer`'s weight gradient ignores sample `index` of the batch
    PAR_FAULT_HALF_FWD,     // layer `layer`'s forward outputs rounded to 11 significant bits
    PAR_FAULT_CHUNK_SWAP,   // layer `layer` folds ((g1 + g2) + g0) + g3 ...: out of order
    PAR_FAULT_BN_SWAP,      // batchnorm layer `layer` folds its batch statistics' chunk
                            //   partials ((p1 + p2) + p0) + p3 ...: out of order
    PAR_FAULT_BN_VAR_ULP,   // batchnorm layer `layer`: var of channel `index` + 1 ulp
    PAR_FAULT_OPT_BETA,     // the optimizer update uses mu (momentum, nesterov) or beta1
                            //   (adam) + 2^-10: a hyperparameter other than the one given
    PAR_FAULT_OPT_SWAP,     // the optimizer takes its weight step before its state update
                            //   (from the state before the step): two operations swapped
} par_fault_kind;

typedef struct par_fault {
    par_fault_kind kind;
    long step;              // 1-based step it fires at; 0 = every step
    int layer;
    size_t index;
} par_fault;

// The optimizer (docs/DESIGN.md, section 1, rule 6): an elementwise update of every
// parameter from its gradient g, in the formula order written at the update
// kernels (par_kernels.h, par_optim_*). Its state lives with the parameters:
// arrays of n_params elements in the parameter layout.
typedef enum par_optim_kind {
    PAR_OPTIM_SGD = 0,        // w = w - lr*g (no state)
    PAR_OPTIM_MOMENTUM,       // v = mu*v + g; w = w - lr*v            (state: velocity)
    PAR_OPTIM_NESTEROV,       // v = mu*v + g; w = w - lr*(g + mu*v)   (state: velocity)
    PAR_OPTIM_ADAM,           // Kingma & Ba with bias correction     (state: m, v, step t)
} par_optim_kind;

// The optimizer as given; every hyperparameter is rounded to the dtype
// once by the trainer, like lr.
typedef struct par_optim {
    par_optim_kind kind;
    double momentum;            // mu of momentum and nesterov (0.9)
    double beta1, beta2, eps;   // adam (0.9, 0.999, 1e-8)
} par_optim;

// The defaults above for kind.
par_optim par_optim_default(par_optim_kind kind);
// "sgd" | "momentum" | "nesterov" | "adam" -> kind.
par_status par_optim_parse(par_optim_kind *kind, const char *name);
const char *par_optim_name(par_optim_kind kind);
// State arrays of n_params elements: sgd 0, momentum/nesterov 1, adam 2.
int par_optim_n_state(par_optim_kind kind);
// Name of state array i: "velocity"; "m", "v".
const char *par_optim_state_name(par_optim_kind kind, int i);

// A trainer's optimizer state: n arrays of n_params elements of the dtype
// (the parameter layout) and t, the number of updates done.
typedef struct par_optim_state {
    int n;
    void *arr[2];
    long t;
} par_optim_state;

// How `omp`, `hybrid` and `root` use their cfg.threads threads per process
// (par_governor.h; docs/performance.md, "Threads on a busy machine"). Any choice gives the same bits: exact mode computes
// every element as one thread does.
typedef enum par_threads_policy {
    PAR_THREADS_ADAPT = 0,      // a step runs on one thread while that is measured faster
    PAR_THREADS_FIXED,          // every step on cfg.threads threads
    PAR_THREADS_ALTERNATE,      // TESTS ONLY: one thread and cfg.threads on alternate steps
} par_threads_policy;

typedef struct par_run_cfg {
    const par_model *model;
    par_dtype dtype;
    par_mode mode;
    size_t batch;               // largest batch the trainer will be given
    size_t chunk;               // C: samples per chunk (contract rule 3)
    double lr;                  // rounded to dtype once
    int threads;                // OpenMP threads per process (>= 1)
    const void *init_params;    // model->n_params elements of dtype; copied
    const par_fault *fault;     // TESTS ONLY: this run's fault; NULL: the process-wide one
    const par_optim *optim;     // NULL: plain SGD; copied
    par_threads_policy threads_policy;   // omp, hybrid, root (the others: one thread)
    int weights_by_messages;    // exact mpi/hybrid: new weights round the ring even when
                                // every rank is on one host (0: one shared copy there)
} par_run_cfg;

// A batch: every process gets the whole batch (or fills what it reads, below);
// MPI trainers use their chunks.
typedef struct par_batch {
    const void *x;              // (B, n_inputs) of cfg.dtype
    const int32_t *labels;      // (B)
    size_t B;                   // 1 <= B <= cfg.batch
    // NULL, or samples [0, B) of x and labels are not there yet: the trainer
    // (PAR_CAP_FILLS_BATCH) calls fill(fill_ctx, lo, hi, x, labels) for every
    // sample before it reads it, so that each thread assembles the samples it
    // computes (the same values as assembled beforehand). fill writes samples
    // [lo, hi) at their places in x and labels: the batch's own buffers
    // (writable; const for the trainer's reads) or a trainer's own of the
    // same layout (exact MPI on one host: one shared copy of x).
    void (*fill)(void *fill_ctx, size_t lo, size_t hi, void *x, int32_t *labels);
    void *fill_ctx;
} par_batch;

// Samples [lo, hi) of b assembled into b's own x and labels (b->fill set).
static inline void par_batch_fill(const par_batch *b, size_t lo, size_t hi)
{
    b->fill(b->fill_ctx, lo, hi, (void *)b->x, (int32_t *)b->labels);
}

// Where a run's time goes: seconds per phase, summed over the run. A trainer
// times its own phases on its calling thread (OpenMP: the master thread,
// waits at barriers included; MPI: each rank its own, rank 0's reported);
// par_run adds the batch assembly and its hooks. What no phase holds (the
// loss fold, the trainer's bookkeeping) is the rest of the run's seconds.
typedef enum par_phase {
    PAR_PHASE_BATCH,      // gathering the batch from the dataset (par_run)
    PAR_PHASE_FORWARD,    // forward pass, softmax and loss
    PAR_PHASE_BACKWARD,   // input gradients
    PAR_PHASE_WGRAD,      // weight gradients (the chunk folds)
    PAR_PHASE_COMM,       // MPI: messages, collectives and the waits for them
    PAR_PHASE_UPDATE,     // the optimizer update and the transposed panels
    PAR_PHASE_LOG,        // par_run's hooks: step log, digests, checks, checkpoints
    PAR_PHASE_N
} par_phase;

// The phases' names in --json ("batch", "forward", ...).
extern const char *const par_phase_names[PAR_PHASE_N];

// Communication counters of an MPI trainer, for benchmarks and reports; and
// how many steps ran on one thread (cfg.threads_policy); the phases.
typedef struct par_trainer_stats {
    long steps;                 // MPI trainers: steps counted (0: no communication figures)
    double bytes_sent_max;      // largest bytes sent by one rank, per step
    double comm_seconds_max;    // largest time one rank spent in communication, per step
    int threads_adaptive;       // threads > 1 under PAR_THREADS_ADAPT
    long steps_one_thread;      // steps run on one thread (rank 0's under MPI)
    double phase[PAR_PHASE_N];  // seconds per phase (par_phase), summed over the run
} par_trainer_stats;

typedef struct par_trainer_ops {
    const char *name;
    const char *summary;        // one line for `parity train --help`
    unsigned caps;
    // Sets *state to a new trainer; on failure frees whatever it made, sets
    // *state to NULL and returns the error: the caller owns nothing then.
    par_status (*create)(const par_run_cfg *cfg, void **state);
    // One optimizer step; *loss = batch mean loss (the same on every rank).
    par_status (*step)(void *state, const par_batch *batch, double *loss);
    // Current parameters (n_params elements of dtype), owned by the state.
    par_status (*params)(void *state, const void **w, size_t *n);
    void (*destroy)(void *state);
    // Replaces the parameters (n_params elements of dtype), e.g. to replay a
    // step from given weights (fast-mode checks, bisect, resume).
    par_status (*set_params)(void *state, const void *w);
    // The gradient of the last step (n_params of dtype), owned by the state.
    // MPI trainers: complete on every rank, except root fast (rank 0 only);
    // collective for mpi and hybrid (exact mode gathers the segments other
    // ranks updated): call it on every rank or on none.
    par_status (*grad)(void *state, const void **g);
    // Optional (NULL: no figures). MPI trainers: collective over the ranks.
    par_status (*stats)(void *state, par_trainer_stats *out);
    // The optimizer state (par_optim_state: pointers into the trainer, valid
    // until its next step). root: current on rank 0 only (it updates there);
    // mpi, hybrid: collective, like grad (each rank updates its own segments).
    par_status (*get_optim)(void *state, par_optim_state *out);
    // Replaces the optimizer state (copies in; resume). Every rank must be
    // given the same state; in->n must be the optimizer's.
    par_status (*set_optim)(void *state, const par_optim_state *in);
    // Optional (NULL: the trainer has no step count): sets the count of steps
    // taken, which a --fault fires by (bisect replays step S after setting S - 1).
    par_status (*set_step)(void *state, long steps);
} par_trainer_ops;

// The table, NULL-terminated; and lookup by name (NULL if unknown).
extern const par_trainer_ops *const par_trainers[];
const par_trainer_ops *par_trainer_find(const char *name);

// "exact" | "fast" -> mode.
par_status par_mode_parse(par_mode *mode, const char *name);
const char *par_mode_name(par_mode mode);

#endif
