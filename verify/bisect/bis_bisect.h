// `parity bisect` as a library: two run configurations in lockstep (same
// batches, same initial weights, compared after every step), a replay of the
// first differing step with per-tensor comparison and MPFR's verdict on the
// first differing element; and the first differing step of two JSONL step
// logs. No printing (src/cli/cmd_bisect.c prints). Tests: tests/verify/test_bisect.c,
// tests/cli/test_bisect.sh.
#ifndef BIS_BISECT_H
#define BIS_BISECT_H

#include <stddef.h>
#include <stdint.h>

#include "par_data.h"
#include "par_trainer.h"

enum { BIS_MAX_TENSORS = 9 * PAR_MAX_LAYERS + 2 };

// One side of the comparison. cfg.model, cfg.dtype, cfg.batch and
// cfg.init_params must be those of the other side; trainer, mode, threads,
// chunk, lr and fault may differ. MPI trainers (PAR_CAP_RANKS) run over
// every rank of MPI_COMM_WORLD; single-process trainers run replicated on
// every rank (they are deterministic).
typedef struct bis_side {
    const par_trainer_ops *ops;
    par_run_cfg cfg;
} bis_side;

// bis_opts.atol: the floor derived from each tensor (see there).
#define BIS_ATOL_AUTO (-1.0)
#define BIS_AUTO_ULPS 4

typedef struct bis_opts {
    bis_side side[2];     // a, b
    const par_dataset *ds;
    uint64_t seed;              // shuffle seed: epoch e is par_epoch_order(seed, e)
    int epochs;                 // >= 1
    long max_steps;             // 0: every step of `epochs` epochs
    double tol;                 // 0: bitwise; else |a - b| <= tol * max(|a|, |b|) passes
    int prec;                   // MPFR bits of the exact value (>= 64)
    double atol;                // absolute floor: a and b differ only when |a - b| exceeds both
                                // tol * max(|a|, |b|) and the floor; >= 0: that floor;
                                // < 0 (BIS_ATOL_AUTO): BIS_AUTO_ULPS ulps of the
                                // largest |value| of the tensor on either side when tol > 0,
                                // else 0 (bitwise stays bitwise)
} bis_opts;

typedef enum bis_closer {
    BIS_CLOSER_NONE = -1,        // no verdict (nothing differs, or no exact value)
    BIS_CLOSER_A = 0,
    BIS_CLOSER_B = 1,
    BIS_CLOSER_TIE = 2,
} bis_closer;

// One tensor of the replay, in computation order. Per-chunk gradients are
// summarised in one row per layer and parameter ("layer1.weight.grad.chunk*").
typedef struct bis_tensor {
    char name[48];
    int layer;                  // -1: loss.sample and loss
    size_t n, n_diff;           // elements compared, elements that differ
    double max_ulps;            // largest difference in ulps of the dtype
    size_t first;               // flat index of the first differing element (n_diff > 0)
    long first_chunk;           // chunk rows: chunk of the first difference, else -1
} bis_tensor;

typedef struct bis_result {
    int diverged;               // a step differs in lockstep
    long steps;                 // steps run (the divergent one included)
    // The first differing step in lockstep (when diverged).
    long step;                  // 1-based over the whole run
    int epoch;                  // 0-based
    long batch;                 // 0-based index of the batch in its epoch
    size_t B;                   // samples of that batch
    int loss_differs, grad_differs, weights_differs;
    size_t grad_first, weights_first;   // first differing parameter (flat)
    double loss_a, loss_b;
    // The replay of that step from side a's weights before it (rank 0 only).
    int replayed;               // the replay ran and was compared
    int internals;              // activations and deltas were compared (else: from the gradients)
    int chunks;                 // per-chunk gradients were compared (same --chunk on both sides)
    int within_tol;             // --tol given and nothing in the replay exceeds it: bitwise instead
    int found;                  // a tensor of the replay differs
    char tensor[48];            // first differing tensor: "layer1.out", "layer0.weight.grad.chunk3"
    int layer;                  // its layer (-1 for the loss tensors)
    size_t index;               // flat index in the tensor
    long row, col;              // (row, col) of index; col = -1 for 1-D tensors
    size_t param;               // for gradients and new weights: flat parameter index
    double a, b;                // both values
    double ulps;                // |a - b| in ulps of the dtype
    int has_exact;
    double exact;               // MPFR's exact value (rounded to double)
    bis_closer closer;
    int chunk_fold_differs;     // per-chunk gradients agree, the folded gradient differs
    int fold_in_order[2];       // folded element == the in-order fold of that side's chunks
                                // (-1: not known)
    int n_tensors;
    bis_tensor tensors[BIS_MAX_TENSORS];
} bis_result;

// Runs both sides in lockstep: each step both get the same batch; after it
// the loss, the gradient (grad op) and the weights (params op) are compared
// (root: the gradient on rank 0 only, where it is complete). At the first
// differing step both sides are set to side a's weights before it and the
// step is replayed (engine trainers: their step counter is rewound, so a
// test fault of that step fires again); then, on rank 0, every tensor of
// the step is compared in computation order: layer<l>.out (l = 0..L-1),
// loss.sample, layer<l>.dz (l = L-1..0), per-chunk gradients recomputed
// from each side's own activations and deltas (layer<l>.{weight,bias}.grad
// .chunk<c>, top layer first), the folded gradients layer<l>.{weight,bias}
// .grad (top first), loss, layer<l>.{weight,bias}.new. For MPI trainers
// each rank's rows of the activations and deltas are gathered to rank 0.
// The first differing element gets its exact value in MPFR from the
// (common) inputs of its tensor and the verdict which side is closer.
// Collective over MPI_COMM_WORLD when MPI is initialised: every rank gets
// diverged/step/steps; the replay fields are filled on rank 0.
par_status bis_lockstep(bis_result *r, const bis_opts *o);

// What `parity bisect` opens for bis_lockstep: the dataset both sides train
// on and their initial weights (bis_run.c).
typedef struct bis_data {
    const char *dataset;        // a name or folder (par_dataset_open)
    int upscale;                // resample the images to upscale x upscale (0: off)
    int batch_full;             // 1: the batch is the whole training split
    const char *init_load;      // .npz of the initial weights (NULL: from o->seed)
} bis_data;

// Where bis_run failed, for the caller's hint.
typedef enum bis_run_stage {
    BIS_RUN_OK = 0,
    BIS_RUN_DATA,               // opening the dataset
    BIS_RUN_UPSCALE,            // resampling it
    BIS_RUN_BATCH,              // the batch is larger than the training split (PAR_ERR_CONFIG)
    BIS_RUN_INIT,               // the initial weights
    BIS_RUN_LOCKSTEP,           // bis_lockstep
} bis_run_stage;

// Opens d's dataset for o (o->ds), sets both sides' batch (the training
// split's size with batch_full) and initial weights (cfg.init_params; the
// sides' model and dtype are set), runs bis_lockstep(r, o), and frees what it
// opened: o->ds and the sides' init_params are NULL again after, the batch
// stays. *stage says where a failure came from.
par_status bis_run(bis_result *r, bis_opts *o, const bis_data *d, bis_run_stage *stage);

// ---- saved runs --------------------------------------------------------------

typedef struct bis_log_result {
    int diverged;
    long steps_a, steps_b;      // step lines in each log
    int digests;                // both logs carry weights_xxh128 and loss_xxh128
    long step;                  // first differing step (1-based), 0 if none
    int epoch;                  // its epoch (-1 when past the end of one log)
    const char *what;           // "loss", "weights", "loss and weights", "length" (static)
    double loss_a, loss_b;      // NaN where a log has no such step or a null loss
    char weights_a[33], weights_b[33];   // XXH3-128 digests at that step ("" when absent)
} bis_log_result;

// Compares the step lines of two `parity train --log` files step by step:
// loss_xxh128 and weights_xxh128 (XXH3-128) where both logs carry them, else
// the loss values bitwise. A log that ends first differs at the step after
// its last ("length"). PAR_ERR_IO when a file cannot be read, PAR_ERR_FORMAT
// for a line that is not a step log line or a step line of an older parity
// (SHA-256 digests, "weights_sha256"); the message names file and line.
par_status bis_logs(bis_log_result *r, const char *path_a, const char *path_b);

// One array of two .npz weight files compared element by element, bitwise.
typedef struct bis_array_diff {
    char name[64];              // "layer0.weight"
    char shape[48];             // "(256, 784)"
    size_t count, n_diff;       // elements, and how many differ
    size_t first;               // flat index of the first differing element (C order)
    char index[48];             // the same as "[3,17]" ("" when none differs)
    double a, b, ulps;          // its values and their distance in the array's dtype
} bis_array_diff;

typedef struct bis_weights_result {
    char xxh_a[33], xxh_b[33];  // XXH3-128 of each file's arrays, concatenated in order:
                                // the step log's weights_xxh128 of the same weights
    size_t n_arrays, n_differ;
    bis_array_diff *arrays;     // n_arrays, in the files' (the parameter buffer's) order
} bis_weights_result;

// Compares two .npz weight files (`parity train --save`) array by array: what
// `parity bisect --logs` adds when a log pair comes from two builds or
// machines that cannot be replayed in lockstep, with the weights each run
// saved after the first differing step. Both files must hold the same arrays
// (names, shapes, dtypes; else PAR_ERR_FORMAT naming the first mismatch).
// Free with bis_weights_free.
par_status bis_weights(bis_weights_result *r, const char *npz_a, const char *npz_b);
void bis_weights_free(bis_weights_result *r);

// ---- helpers (public for tests) -----------------------------------------------

// |a - b| in units in the last place of dtype dt (both representable in dt):
// the distance of their positions in the ordered set of dt values.
double bis_ulps(double a, double b, par_dtype dt);

// Name of a verdict: "a", "b", "tie", or "none".
const char *bis_closer_name(bis_closer c);

#endif
