// `parity lockstep --external`: the flags cmd_lockstep.c resolved for it.
#ifndef CMD_LOCKSTEP_EXT_H
#define CMD_LOCKSTEP_EXT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ext_lockstep.h"
#include "par_model.h"
#include "par_trainer.h"

typedef struct lockstep_ext_flags {
    const char *command;          // --external
    const char *ulps;             // --ulps FUNC=U[,FUNC=U...] (NULL: 1 ulp each)
    double timeout_s;             // --timeout
    int intermediates;            // --intermediates: ask the trainer for its gradients
    const par_model *m;
    par_act act;
    par_dtype dt;
    const char *dataset, *init_load;
    size_t batch, chunk;
    double lr;
    const par_optim *optim;
    uint64_t seed;
    long steps;
    int json;
} lockstep_ext_flags;

// Runs it; the exit code.
int cmd_lockstep_external(const lockstep_ext_flags *f);

// The pieces `parity bisect --external` shares. f as a job (0, or the exit
// code of a bad --ulps); fn(result, cfg) through ext_job_run with Ctrl-C
// ending the trainer cleanly (0, or one line for cmd and the exit code); the
// lockstep's lines (its verdict and JSON object: ext_lockstep.h).
int cmd_lockstep_ext_job(ext_lockstep_job *job, const lockstep_ext_flags *f);
int cmd_lockstep_ext_run(const char *cmd, ext_lockstep_job *job, ext_job_fn fn, void *result);
void cmd_lockstep_ext_print(const ext_lockstep_result *r, par_dtype dt);

#endif
