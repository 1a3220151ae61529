// One step of a trainer parity did not build, checked against MPFR
// (`parity check --external CMD --step S`; docs/external.md): parity's own
// trajectory to the state before step S, the trainer handed that state and
// the step's batch (intermediates asked for), and its answer checked in the
// views of `parity check`: END-TO-END, its new weights, state and loss
// against the MPFR step within twice the step's any-order bound
// (ext_bound.h); LOCAL, each of its ops from its own values (ext_local.h)
// and its update from its own gradient. No printing. Tests:
// tests/external/test_ext_check.sh.
#ifndef EXT_CHECK_H
#define EXT_CHECK_H

#include "chk_check.h"
#include "ext_lockstep.h"

typedef struct ext_check_result {
    chk_step step;                // the step checked: parity's state and batch, the trainer's
                                  //   results (and its intermediates, when it sent them)
    chk_report rep;               // LOCAL rows (its own ops), then END-TO-END rows
    char name[64];                // from the trainer's hello
    int world;
    int intermediates;            // it sent its gradient
    int layers_checked;           // ... and every layer's output and output gradient
    const char *local_skipped;    // why LOCAL was not checked, in part or at all (NULL: it was)
    ext_worst local_first;        // its first op over the op's bound (step 0: none)
    double signature;             // its rounding over parity's (ext_lockstep_result)
    char signature_tensor[64];
    int signature_flagged;
    double seconds_wait, seconds_parity;   // waiting for the trainer; parity's side before MPFR
} ext_check_result;

// Runs the check of job->cfg.steps (the step S; cfg.first, cfg.hooks and
// cfg.want_intermediates are set here) with the MPFR options o (the
// END-TO-END view always). PAR_OK when it ran (r->rep.n_fail and
// r->signature_flagged say whether the trainer passed); PAR_ERR_EXTERNAL
// when the trainer failed or broke the protocol; PAR_ERR_CONFIG for a model
// with batchnorm. *opening: set when the dataset did not open.
par_status ext_check_run(ext_check_result *r, ext_lockstep_job *job, const chk_opts *o,
                         int *opening);
void ext_check_free(ext_check_result *r);

// "exp=2,log=1.5": ext_ulps_parse on each FUNC=U in turn.
par_status ext_ulps_parse_list(ext_ulps *u, const char *list);

#endif
