// Fast mode against the reference, one step at a time from the same weights
// (lockstep with re-sync), under the derived per-element bound. Used by
// `parity lockstep`, the harness (`parity verify`) and tests/unit/test_trainers.c,
// tests/mpi/test_mpi.c. No printing; MPI trainers run it on every rank.
#ifndef VF_LOCKSTEP_H
#define VF_LOCKSTEP_H

#include <stddef.h>
#include <stdint.h>

#include "par_data.h"
#include "par_trainer.h"

typedef struct vf_lockstep_result {
    long steps;                 // steps checked
    size_t violations;          // elements over their bound plus losses over theirs, all steps
    double worst_ratio;         // largest |w_fast - w_ref| / tol over all elements and steps
    long worst_step;            // 1-based step of worst_ratio (0: every diff was 0)
    size_t worst_index;         // flat parameter index of worst_ratio
    double worst_loss_ratio;    // largest |l_fast - l_ref| / tol_loss
    long first_violation_step;  // 1-based; 0 when there is none
    // Which array worst_ratio and the first violation are in: 0 the weights,
    // 1 + i optimizer state array i (par_optim_state_name); and the flat index
    // of the first violating element (0 when there is none, or it is the loss).
    int worst_array, first_violation_array;
    size_t first_violation_index;
} vf_lockstep_result;

// The bound of one step, per element (u: unit roundoff of the dtype,
// gB = gamma_B = B u / (1 - B u) where B is the number of terms of the
// element's gradient (the batch size for dense layers, batch x output
// positions for conv2d: vf_terms_per_sample), S_i = sum of |term| (|dz_s x_s|)
// recorded by the reference, w_i the weights before the step, lr rounded
// to the dtype):
//   tol_i = lr S_i (2 gB + 4u (1 + gB)(1 + u)) + 2u |w_i|
// because any summation order of B terms is within gB * S of the exact sum
// (Higham, Accuracy and Stability, 3.4), on both sides, and t = fl(lr g),
// w' = fl(w - t) add at most 2u(1 + gB)(1 + u) lr S + 2u |w|. From identical
// weights fast mode's forward pass and input gradients equal exact mode's
// (it reorders only the batch reductions), so the bound applies exactly.
// Batchnorm's batch sums keep the chunk order in fast mode too (they build
// its input gradient), so its gamma and beta gradients equal exact mode's
// and their S is 0: the bound is the update's rounding alone.
// The batch loss, B positive terms in any order then / B:
//   |l_f - l_e| <= (2 gB + 3u) l_e.
double vf_lockstep_tol(double lr, double S, double w, size_t B, double u);

// Momentum, nesterov and adam (cfg_fast->optim): before each step the trainer
// also gets the reference's optimizer state (arrays and update count), so
// both sides evaluate the same update (par_kernels.h, par_optim_*: same
// dtype coefficients, same w, m, v) from gradients that differ by at most
// Eg_i = 2 gB S_i. The new weights and every new state array are checked,
// each element under a bound carried op by op through the update:
//   each rounded op maps a difference D of its inputs (exact results
//   differing by at most Delta) to Delta (1 + u) + 2u R + 2 eta, with R
//   >= |the reference's exact result| from its rounded one x,
//   R = (|x| + eta)(1 + 2u), eta >= the underflow error (2^-150 in f32,
//   2^-1074 in f64) for products and quotients, 0 for sums and sqrt (exact
//   when subnormal; sqrt does not underflow); ops on the shared w, m, v
//   alone (mu m, b1 m, b2 v) are identical on both sides (D = 0).
// The reference's intermediates are recomputed in its formula order from
// its state before the step and its gradient (they must give its new
// weights and state bit for bit; else PAR_ERR_NUMERIC). Data-dependent
// steps (verify/harness/vf_lockstep.c has them all):
//   fl(x g) with x = fl(c2 g):  Delta = Dx (|g| + Eg) + |x| Eg
//   sqrt(vh):  Delta = min(Dvh / sqrt(vh), sqrt(Dvh))
//   t / d (adam, d = sqrt(vh) + eps >= eps on both sides):
//              Delta = (Dt + |t/d| Dd) / max(d - Dd, eps)
// (x, vh, t, d the reference's values). Not a first-order estimate: it holds
// for any Eg, and grows without limit only as d - Dd falls to eps (tiny v).
// Every such bound is multiplied by 1 + 2^-40 for its own evaluation in double.

// Terms per sample in the gradient of parameter element i: dense 1, conv2d
// the layer's output positions (each position adds one term per sample).
size_t vf_terms_per_sample(const par_model *m, size_t i);

// How the processes of an MPI trainer share the work: only rank 0 runs the
// reference and the checks, and broadcasts the weights entering each step.
// Without it (NULL) every process runs everything on its own.
typedef struct vf_lockstep_comm {
    int rank;
    void *ctx;
    // Collective: buf (bytes) of rank 0 copied to every process.
    par_status (*bcast)(void *ctx, void *buf, size_t bytes);
} vf_lockstep_comm;

// Runs `steps` steps (0: every step of `epochs` epochs) of `ops` with
// cfg_fast (its mode, threads, lr, optimizer) and of the reference (learning
// rate lr_ref, chunk cfg_fast->chunk, the same optimizer and initial
// parameters) on the batches
// `parity train` uses: epoch e shuffled by par_epoch_order(seed, e), batches
// of cfg_fast->batch, the last one of an epoch short. Before each step the
// trainer gets the reference's weights (and optimizer state); after it every
// element (of the weights and of each state array) is checked against its
// bound. Collective for MPI trainers; with comm, r is filled on
// rank 0 only (zero elsewhere).
par_status vf_lockstep(vf_lockstep_result *r, const par_trainer_ops *ops,
                       const par_run_cfg *cfg_fast, double lr_ref, const par_dataset *ds,
                       uint64_t seed, int epochs, long steps, const vf_lockstep_comm *comm);

// `parity lockstep` as one call (vf_lockstep_run.c): the dataset and the
// initial weights prepared, the flags checked against them, vf_lockstep run.
typedef struct vf_lockstep_job {
    const par_trainer_ops *ops;
    par_run_cfg cfg;            // the trainer's; batch 0 with batch_full, init_params unset
    int batch_full;             // 1: the batch is the whole training split
    const char *dataset;        // a name or folder (par_dataset_open)
    int upscale;                // resample the images to upscale x upscale (0: off)
    const char *init_load;      // .npz of the initial weights (NULL: from seed)
    uint64_t seed;
    int epochs;
    long steps;                 // 0: every step of `epochs` epochs
    const vf_lockstep_comm *comm;   // as vf_lockstep's
} vf_lockstep_job;

// Opens job's dataset (resampled), checks that the model takes its images,
// that the batch fits in its training split and that `steps` fit in
// `epochs` (PAR_ERR_CONFIG, naming the flag), makes or loads the initial
// weights and runs vf_lockstep; releases what it opened. *opening is 1 when
// the dataset could not be opened (the caller's hint: fetch it), else 0.
par_status vf_lockstep_run(vf_lockstep_result *r, const vf_lockstep_job *job, int *opening);

#endif
