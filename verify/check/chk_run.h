// One `parity check` of a training step, start to end: the weights (and the
// optimizer state) before the step, the step's records, the trainer's step
// captured, checked in MPFR (LOCAL, END-TO-END) and, for an exact-mode
// trainer other than the reference, against the reference bitwise
// (CONTRACT). Library code: never prints; src/cli/cmd_check.c parses the
// flags and prints the report. Tests: tests/verify/test_check.c, tests/cli/test_check_cli.sh.
#ifndef CHK_RUN_H
#define CHK_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "chk_check.h"

typedef struct chk_run_cfg {
    const par_trainer_ops *tr;   // the trainer whose step is checked
    const par_dataset *ds;       // its training split gives the records
    const par_model *m;
    par_dtype dt;
    par_mode mode;
    const par_optim *optim;
    size_t batch, chunk;
    double lr;
    int threads;
    uint64_t seed;               // of the initial weights and of the records' order
    const char *weights;         // .npz of the weights before the step (NULL: those of seed);
                                 // with step > 1 and an optimizer with state, also its opt.*
    int step;                    // 1-based step of `parity train` whose batch is checked
    const char *samples;         // "i,j,k": these records instead (NULL: step's)
    int rank;                    // MPI trainers: every rank runs the step; rank 0 checks it
    chk_opts check;              // MPFR precision, threads, END-TO-END
} chk_run_cfg;

// Where a chk_run_step failure came from, for the caller's hint.
typedef enum chk_run_stage {
    CHK_RUN_OK = 0,
    CHK_RUN_WEIGHTS,       // the weights, the records or the step
    CHK_RUN_OPTIM_STATE,   // --step > 1 with state: the .npz has no opt.* members
    CHK_RUN_SAMPLES,       // samples is not a list of records below the split's size
} chk_run_stage;

typedef struct chk_run {
    chk_step run, ref;     // the trainer's step and (contract) the reference's
    chk_report rep;        // rank 0's report
    size_t *idx;           // the step's records (run.B of them)
    int epoch;             // the step's epoch (0-based; by step only)
    int contract;          // 1: the CONTRACT view was checked
    double t_run;          // seconds of the trainer's step
    chk_run_stage failed;  // after a failure: where it came from
} chk_run;

// Runs cfg's check into *r (zeroed first; chk_run_free it whatever the
// result). samples out of range or malformed: PAR_ERR_CONFIG, "--samples
// 'SPEC': expected record numbers below N, separated by commas".
par_status chk_run_step(chk_run *r, const chk_run_cfg *cfg);
void chk_run_free(chk_run *r);

// "i,j,k" -> records (each < n); *idx malloc'ed.
par_status chk_records_parse(const char *spec, size_t n, size_t **idx, size_t *B);

#endif
