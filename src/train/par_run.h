// The training loop (par_session.h runs it for `parity train`): epochs of
// shuffled mini-batches (order = f(seed, epoch)), one trainer step per
// batch, hooks after every step and every epoch. It can start from a saved
// point (resume), stop cleanly when a hook asks, and check every step for
// NaN/Inf. Also evaluation. Tests: tests/unit/test_resume.c, tests/unit/test_optim.c.
#ifndef PAR_RUN_H
#define PAR_RUN_H

#include "par_data.h"
#include "par_trainer.h"

// Where a run stands after `step` steps: `pos` records of epoch `epoch`'s
// order consumed (pos == n_train: that epoch's batches are all done, its
// on_epoch not yet run). With the parameters and the optimizer state (none
// for SGD) this is the whole state of a run: the order of an epoch is a pure
// function of (seed, epoch), so the RNG position is (epoch, pos).
typedef struct par_run_point {
    int epoch;
    size_t pos;
    long step;
} par_run_point;

// A hook returns PAR_RUN_STOP (par_status.h; not an error: it is positive)
// to end the run cleanly after the current step: no on_epoch, final
// parameters copied as usual, and par_run returns PAR_RUN_STOP.

// The trainer of a running loop, as after_step sees it.
typedef struct par_run_now {
    const par_trainer_ops *trainer;
    void *state;
    par_optim_kind optim;
    const double *run_phase;   // par_run's own phases so far (batch, log; par_phase)
} par_run_now;

// Hooks of the loop (all optional); ctx is passed to each.
typedef struct par_run_hooks {
    void *ctx;
    // After every step, with the parameters after it; a non-OK return stops
    // the run with that status.
    par_status (*on_step)(void *ctx, int epoch, long step, size_t B, double loss,
                          const void *params);
    // After every epoch, and after the last step if the run stops mid-epoch.
    par_status (*on_epoch)(void *ctx, int epoch, long step, const void *params);
    // After on_step, with the point reached (what a checkpoint records) and
    // the trainer (par_run_optim). May return PAR_RUN_STOP.
    par_status (*after_step)(void *ctx, const par_run_point *pt, const void *params,
                             const par_run_now *now);
    // Optional. For a trainer with PAR_CAP_LAZY_PARAMS: 1 when on_step or
    // after_step of step `step` read their params; otherwise they get NULL
    // (after_step can still ask now->trainer). NULL: every step.
    int (*wants_params)(void *ctx, long step);
} par_run_hooks;

// The loop's settings: what the trainer gets (cfg, embedded) and what the
// loop itself reads. Zero-initialise what is not wanted.
typedef struct par_run_opts {
    const par_trainer_ops *trainer;
    par_run_cfg cfg;               // the trainer's settings; cfg.batch is the batch size
    const par_dataset *ds;         // its training split is what the loop trains on
    uint64_t seed;                 // shuffle seed: epoch e's order is a function of (seed, e)
    int epochs;                    // >= 1
    long max_steps;                // 0: no limit; else stop after this many steps in all
    // NULL: from the start. Else resume at this point; cfg.init_params are
    // the parameters at that point. Must be consistent with the dataset and
    // batch: step = epoch * ceil(n_train / batch) + ceil(pos / batch).
    const par_run_point *start;
    // With start: the optimizer state at that point (NULL: a fresh state,
    // right for SGD only). Given to every rank alike.
    const par_optim_state *start_optim;
    // 1: after every step check the loss for NaN/Inf, and every weight (O(N))
    // every check_every steps and after the run's last step (and after any
    // step whose loss is not finite; check_every 0: the loss only); on NaN/Inf
    // fail with PAR_ERR_NUMERIC naming the step, the tensor (view) and the
    // element, and the first non-finite gradient element if any. The check
    // reads only values that are equal on every rank, so MPI ranks stop
    // together.
    int check_finite;
    int check_every;
} par_run_opts;

// The trainer's optimizer state now (pointers into the trainer, valid during
// the hook; n = 0 for SGD), so that a checkpoint can store it. Collective for
// the MPI trainers, whose ranks each keep the state of their own parameters
// current (the sharded update): call it on every rank or on none.
par_status par_run_optim(const par_run_now *now, par_optim_state *out);

// Runs the loop with hooks h (may be NULL); copies the final parameters into
// final_params (n_params of dtype) if it is not NULL. *steps_done = the step
// count reached (counting the steps before o->start). Returns PAR_OK,
// PAR_RUN_STOP or an error. If stats is not NULL it receives the trainer's
// communication counters (zero for trainers without them; collective for
// MPI trainers).
par_status par_run(const par_run_opts *o, const par_run_hooks *h, void *final_params,
                   long *steps_done, par_trainer_stats *stats);

// Mean loss and accuracy of records [first, first + count) of `im`, forward
// pass only, `threads` threads, in batches of up to 500. The loss is summed
// in f64 in record order.
par_status par_evaluate(const par_model *m, par_dtype dt, const void *params,
                        const par_images *im, size_t first, size_t count, int threads,
                        double *loss, double *accuracy);

// The training order of epoch e: a permutation of [0, n_train).
par_status par_epoch_order(size_t **order, size_t n_train, uint64_t seed, int epoch);

// The first non-finite element of params (n elements of dt) laid out as m's
// views: returns 0 if all are finite, else 1 with "view[i][j] = value" in
// where (cap bytes).
int par_find_nonfinite(char *where, size_t cap, const par_model *m, par_dtype dt,
                       const void *params);

#endif
