// A training session: one run of the training loop (par_run.h) with what
// `parity train` adds around it: initial weights (seed or a file), the JSONL
// log written as it goes, checkpoints every N steps and on a clean stop,
// resume from a folder's newest valid checkpoint (bit for bit), --select
// best-val, agreement of MPI ranks on stops and failures, the final weights.
// The CLI parses flags, prints and chooses exit codes; the session executes
// and never prints (progress goes to a callback). Tests: tests/unit/test_session.c
// and, through the CLI, tests/cli/test_resume.sh and tests/cli/test_faults.sh.
#ifndef PAR_SESSION_H
#define PAR_SESSION_H

#include <signal.h>

#include "par_run.h"

typedef struct par_session par_session;

// What the progress callback is told, on rank 0 only.
typedef struct par_session_progress {
    int epoch_end;            // 0: after a step; 1: after an epoch's evaluation
    int epoch;                // 0-based
    long step, total_steps;
    double loss;              // the step's (epoch_end: the last step's)
    size_t samples;           // trained by this process so far
    double now;               // CLOCK_MONOTONIC seconds
    double t_start;           // when the run started (same clock)
    double train_seconds;     // since then, evaluation excluded
    double val_acc, test_acc; // epoch_end only
} par_session_progress;

// What a session runs: the loop's and the trainer's settings (run, embedded:
// par_run.h, par_trainer.h) and the session's own. `parity train`'s flags
// land in these fields (src/cli/train_args.c).
typedef struct par_session_cfg {
    // The loop and its trainer: trainer, cfg (model, dtype, mode, batch <=
    // ds->n_train, chunk, lr, threads, optim (NULL: SGD), threads_policy,
    // weights_by_messages, fault), ds (opened by the caller; read only,
    // outlives the session), seed (initialisation and shuffling), epochs,
    // max_steps, check_every. The session sets the rest: cfg.init_params,
    // start and start_optim (a resume), check_finite (always on). The
    // TESTS-ONLY cfg.fault (NULL: none) counts the steps of the whole run:
    // the session moves it past a resume point.
    par_run_opts run;
    par_act act;                   // recorded in the checkpoint config
    const char *dataset;           // run.ds's name as given (checkpoint config); NULL: its name
    long warmup_steps;             // the first K steps this run trains are not timed: `seconds`
                                   // starts after them (0: every step is timed); < the steps
    const char *init_load;         // initial weights (.npz); NULL: from run.seed
    const char *init_save;         // rank 0 writes the initial weights there (not with resume)
    const char *save;              // rank 0 writes the final weights there
    const char *log;               // JSONL step log (rank 0)
    int no_digest;                 // no per-step weight digests in the log
    const char *ckpt_dir;          // checkpoints there (one run per folder); NULL: none
    const char *resume;            // continue the run of this folder (and, without
                                   // ckpt_dir, write checkpoints there)
    long ckpt_every;               // 0: the resumed run's, else once per epoch
    int keep;                      // newest checkpoints kept; 0: the resumed run's, else 3
    int best_val;                  // --select best-val (needs validation records)
    int no_eval;                   // no validation or test evaluation after an epoch (their
                                   //   figures are NaN); not with best_val
    int upscale;                   // recorded in checkpoints (the caller resampled run.ds)
    int rank, ranks;               // this process and the world size (1: no MPI)
    void *ctx;                     // for progress
    void (*progress)(void *ctx, const par_session_progress *p);   // optional
} par_session_cfg;

// What a session did, for the caller to print. Valid from par_session_open
// (even when it failed) until par_session_close.
typedef struct par_session_result {
    long steps;                    // counting the steps before a resume point
    double seconds;                // training time, evaluation excluded; with warmup_steps K,
                                   // of the steps after the first K only (0 if it stopped before)
    size_t samples;                // trained by this process
    long timed_steps;              // steps and samples `seconds` covers (without warm-up: every
    size_t timed_samples;          //   step this process trained)
    double last_loss;              // the last step's loss
    double val_loss, val_acc, test_loss, test_acc;   // best-val: the best epoch's
    int best_epoch;                // 0-based; -1: none (or not best-val)
    long resumed_from;             // step resumed at; -1: a fresh run
    long last_ckpt;                // step of the newest checkpoint; -1: none
    int ckpt_open;                 // this process writes checkpoints (rank 0)
    const char *ckpt_dir;          // where they go (ckpt_dir, else resume); NULL: none
    int stop_sig;                  // the stop flag's value the ranks agreed on (0: none)
    int peer_failed;               // another rank failed (and says why): stop quietly
    const char *skipped;           // damaged checkpoints the resume passed over ("": none)
    const char *hint;              // how to fix the failure of open; NULL: none
    par_trainer_stats stats;
    const void *weights;           // final weights (best-val: the best epoch's); NULL before
} par_session_result;

// Prepares a session (collective: every rank calls it): initial weights,
// checkpoint folder (rank 0 locks it), the resume point shared by rank 0, the
// log (replayed up to the resume point). *s is set even when it fails (NULL
// only when out of memory) so that its result says what happened; close it.
// Returns PAR_OK, an error, or PAR_RUN_STOP when another rank failed
// (result.peer_failed).
par_status par_session_open(par_session **s, const par_session_cfg *cfg);

// Trains (collective). *stop, read after every step, asks for a clean stop
// when non-zero (a signal handler sets it): a checkpoint is written and
// PAR_RUN_STOP returned (result.stop_sig). Then the final weights are saved
// and the log closed. Returns PAR_OK, PAR_RUN_STOP or an error.
par_status par_session_run(par_session *s, const volatile sig_atomic_t *stop);

const par_session_result *par_session_result_get(const par_session *s);

// Closes the log (kept with checkpoints, else discarded when the run did not
// finish), unlocks the checkpoint folder and frees s. NULL is a no-op.
void par_session_close(par_session *s);

// MPI: all ranks learn whether any failed (collective when ranks > 1). The
// rank that failed gets its local status, the others PAR_RUN_STOP with
// *peer_failed set.
par_status par_session_agree(int ranks, par_status local, int *peer_failed);

// MPI: every rank gets rank 0's *v (collective when ranks > 1; a no-op for
// one process), e.g. the verdict of a check only rank 0 makes.
void par_session_share(int ranks, int *v);

#endif
