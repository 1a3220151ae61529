// A trainer parity did not build, free-running (`parity bisect --external`;
// docs/external.md): its N steps on its own, from parity's weights on parity's
// batches, held to the spread of parity's runs under other reduction orders
// widened by each step's any-order bound; leaving it names the first step (loss,
// or snapshot and tensor) and narrows in lockstep. Also a timed run of it for
// `parity verify` (ext_time_fn). No printing. Tests:
// tests/external/test_free.sh, python/tests/test_examples_free.py.
#ifndef EXT_FREE_H
#define EXT_FREE_H

#include "ext_lockstep.h"

enum { EXT_FREE_MAX_MEMBERS = 6, EXT_FREE_MAX_SNAPS = 24 };

typedef struct ext_free_result {
    long steps;
    char name[64];                 // from the trainer's hello
    int world;
    int members;                   // parity's runs under other orders making the spread
    char member[EXT_FREE_MAX_MEMBERS][40];   // "serial fast", "omp fast T=2", ...
    int within;                    // every loss and every final tensor inside the spread
    // The loss: the first step outside its band [lo, hi] (0: none), and the
    // largest |trainer - reference| / the band's reach on that side.
    long first_step;
    double first_loss, first_ref, first_lo, first_hi;
    double worst_loss_ratio;
    long worst_loss_step;
    // The weights after steps 1, 2, 4, ..., N, per tensor: max |trainer -
    // reference| against the spread's max |run - reference| there plus that
    // step's any-order bound. The first step and tensor outside (0: none).
    long tensor_step;
    char first_tensor[64];
    double tensor_diff, tensor_limit;
    char worst_tensor[64];
    long worst_tensor_step;
    double worst_tensor_ratio;
    double worst_spread_ratio;     // the largest max |trainer - reference| / the spread alone
    double seconds_trainer;        // the sum of its log's seconds
    double seconds_parity;         // the reference and the spread
    int lockstep_ran;              // it left the spread: lockstep over steps 1..first
    ext_lockstep_result lockstep;
} ext_free_result;

// Runs the comparison on c (c->steps steps; ds and init set, as ext_job_run
// does). PAR_OK when it ran (r->within, and r->lockstep when it left);
// PAR_ERR_EXTERNAL when the trainer failed or broke the protocol (a short
// log, a loss that is not a finite number, a missing snapshot), one line.
par_status ext_free(ext_free_result *r, const ext_lockstep_cfg *c);

// ext_free for ext_job_run (the dataset by name, the initial weights);
// result: ext_free_result.
par_status ext_free_fn(void *result, const ext_lockstep_cfg *c);

// A timed free run for `parity verify`'s external rows: one launch of the
// trainer, one `run` of c->steps steps from c->init on parity's batches, no
// snapshots, nothing compared. seconds: the sum of its log's per-step
// seconds over the steps after the first `warmup` (the caller's).
typedef struct ext_time_result {
    long warmup;                   // in: steps trained, not timed (< c->steps)
    double seconds;                // out: the window's training seconds, by the trainer's log
    char name[64];                 // out: from its hello
    int world;
} ext_time_result;
// For ext_job_run; result: ext_time_result. PAR_ERR_EXTERNAL as ext_free.
par_status ext_time_fn(void *result, const ext_lockstep_cfg *c);

#endif
