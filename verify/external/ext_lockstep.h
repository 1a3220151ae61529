// A trainer parity did not build, checked step by step (`parity lockstep
// --external`; docs/external.md): before each step it gets the state of
// parity's own trajectory (serial exact, which is the reference bit for
// bit), trains one step on the step's batch, and hands back its new weights,
// optimizer state and loss; each is held to the any-order bound of that step
// (ext_bound.h). When the trainer also hands back its gradient and
// intermediates, parity checks its update op by op from its own gradient
// (tight: a few roundings) and compares the size of its gradient's rounding
// with parity's own (a signature of arithmetic narrower than the dtype:
// TF32, bf16). No printing. Tests: tests/external/test_external.sh.
#ifndef EXT_LOCKSTEP_H
#define EXT_LOCKSTEP_H

#include <stddef.h>
#include <stdint.h>

#include "ext_bound.h"
#include "ext_local.h"
#include "ext_proto.h"
#include "par_data.h"
#include "par_model.h"

// A checked step's answer, as the loop read and checked it (every array of
// the shape and dtype it must have), for a caller that checks more of it
// (`parity check --external`, ext_check.h). Valid during the call only.
typedef struct ext_answer {
    long step;
    size_t B;
    const void *w, *s[2];         // the state the step started from (dt; s: n_state arrays)
    long opt_t;                   // updates done before it
    const void *x;                // the batch (B, n_inputs) of dt
    const int32_t *labels;
    const ext_step_bound *e;      // the step's centre and any-order bound
    double loss;                  // the trainer's
    const par_array *const *wa;   // its new weights, one per view
    const par_array *const *sa;   // its new state: [j * n_views + v]
    const par_array *const *ga;   // its gradient, one per view (NULL: not sent)
    const par_npz *inter;         // its intermediates (NULL: none)
} ext_answer;

typedef struct ext_hooks {
    // Every comparison: of the step's bound (local 0) or of its own ops (1).
    void (*cmp)(void *ctx, long step, int local, const ext_cmp *c);
    // Each checked step's answer, after the loop's own checks of it.
    par_status (*answer)(void *ctx, const ext_answer *a);
    void *ctx;
} ext_hooks;

typedef struct ext_lockstep_cfg {
    const par_model *m;
    par_act act;                  // the hidden activation of an mlp: spec
    par_dtype dt;
    const par_dataset *ds;
    size_t batch, chunk;
    ext_optim optim;
    uint64_t seed;                // the batch order's (par_epoch_order)
    long steps;                   // >= 1
    long first;                   // steps before it are parity's own, without the trainer
                                  //   (0 or 1: the trainer takes every step)
    const ext_hooks *hooks;       // NULL: none
    const void *init;             // initial weights, n_params of dt
    ext_ulps ulps;
    int want_intermediates;       // ask the trainer for them (it may decline)
    ext_opts proto;
} ext_lockstep_cfg;

// One element's comparison: the trainer's value, the centre, the bound.
typedef struct ext_worst {
    long step;                    // 0: none
    char tensor[64];              // "layer0.weight", "opt.m.layer1.bias", "loss", ...
    char index[48];               // "[3,17]"; "" for a scalar
    char op[112];                 // the op a local check recomputed ("" for the step's bound)
    double got, centre, bound, ratio;
} ext_worst;

// Where parity's side of a step goes: writing the state and batch and
// reading the answer (the protocol); the step's bound; parity's own step
// from the same state; comparing and the op-by-op checks (in --json:
// seconds_parity_parts {files, bound, step, checks}).
typedef enum ext_part { EXT_PART_FILES, EXT_PART_BOUND, EXT_PART_STEP, EXT_PART_CHECKS,
                        EXT_PART_N } ext_part;

typedef struct ext_lockstep_result {
    long steps;                   // steps checked
    size_t violations;            // elements (and losses) over their bound, all steps
    ext_worst worst, first;       // the largest |got - centre| / bound; the first violation
    double worst_loss_ratio;
    int intermediates;            // the trainer sent its gradients
    int layers_checked;           // ... and every layer's output and output gradient
    size_t local_violations;      // its ops from its own values (its update from its own
                                  //   gradient; with the layers, every op) over their bounds
    ext_worst local_worst, local_first;
    double signature;             // largest over steps and views of median |g - centre| over
                                  //   the trainer's gradient / over parity's (0: no gradients)
    char signature_tensor[64];
    long signature_step;
    int signature_flagged;        // signature > EXT_SIGNATURE_LIMIT
    char name[64];                // from the trainer's hello
    int world;
    double seconds_wait;          // waiting for the trainer
    double seconds_part[EXT_PART_N];       // parity's own work by part (ext_part)
    double seconds_parity;        // ... and in all: their sum
    double seconds_trainer;       // the trainer's own step seconds, summed over the
    long steps_trainer_timed;     //   steps whose answer gave them (an optional field)
} ext_lockstep_result;

// A gradient whose rounding is this many times parity's own, at the median
// element, was not summed in the dtype (TF32's 10-bit mantissa gives ~2^13).
#define EXT_SIGNATURE_LIMIT 64.0

// A check as one call (ext_job_run): the dataset by name or folder
// (opening: set when that failed, for the CLI's hint), the batch checked
// against it, the initial weights drawn from the seed or loaded, then the
// check (ext_lockstep_fn: ext_lockstep). c->ds and c->init are filled there.
typedef struct ext_lockstep_job {
    ext_lockstep_cfg cfg;
    const char *dataset;
    const char *init_load;        // NULL: par_model_init(seed)
} ext_lockstep_job;
typedef par_status (*ext_job_fn)(void *result, const ext_lockstep_cfg *c);
par_status ext_job_run(ext_lockstep_job *job, int *opening, ext_job_fn fn, void *result);
// result: an ext_lockstep_result
par_status ext_lockstep_fn(void *result, const ext_lockstep_cfg *c);

// Pieces the free-running comparison shares: the hello message of a cfg
// (a new object, NULL when out of memory), and a state file: the weights w
// and the optimizer's state arrays s (n_params of dt each), parity's names.
json_t *ext_hello_json(const ext_lockstep_cfg *c);
par_status ext_write_state(const ext_lockstep_cfg *c, const char *path, const void *w,
                           void *const s[2]);

// Runs the check. PAR_OK when it ran (r->violations, local_violations and
// signature_flagged say whether the trainer passed); PAR_ERR_EXTERNAL when
// the trainer failed or broke the protocol (a wrong shape, a NaN, a missing
// array, a wrong step), with one line naming the step and the array.
par_status ext_lockstep(ext_lockstep_result *r, const ext_lockstep_cfg *c);

// Whether a check that ran passed: no element over its bound, no op over
// its own, no rounding narrower than the dtype's.
int ext_lockstep_pass(const ext_lockstep_result *r);
// Its result as a JSON object (new; NULL when out of memory): trainer, world,
// steps, violations, worst (and first_violation, local_worst,
// local_first_violation: {step, tensor, index, op, trainer, centre, bound,
// ratio} or null), signature, seconds and verdict ("pass", "fail").
json_t *ext_lockstep_json(const ext_lockstep_result *r);

#endif
