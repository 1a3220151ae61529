// Internals of the suite runner shared by verify/harness/vf_run*.c (not a public
// header): the runner's state, a case being run, child argument lists and
// the helpers every step of a case uses. The public API is vf_harness.h.
#ifndef VF_RUN_H
#define VF_RUN_H

#include "par_proc.h"
#include "vf_harness.h"

enum { VF_T_REF, VF_T_RUN, VF_T_LOCKSTEP, VF_T_CHECK, VF_T_TIME, VF_T_KINDS };

// Work of the progress estimate: tasks and units (training steps x step_work)
// of each kind, and the seconds of timed runs sized by a window of seconds
// (vf_case.window) whose steps are not known before the case's calibration.
typedef struct vf_work {
    double tasks[VF_T_KINDS], units[VF_T_KINDS];
    double window_s;
} vf_work;

typedef struct vf_runner {
    const vf_suite *s;
    const vf_run_opts *o;
    json_t *cache;              // reference runs, saved weights and checks shared by cases
    int check_available;
    // progress: done/total tasks and seconds per unit of work, per kind
    const char *case_name;
    int i_case;
    char what[300];             // the task running now
    long done, total;
    double t0;
    vf_work left;               // every task not yet run
    vf_work later;              // the tasks of the cases not yet started (a floor)
    // per kind, the tasks done: count, sum of units, of seconds, of units^2, of units x seconds
    double fit[VF_T_KINDS][5];
    // CPU ticks of /proc/stat during the timings, all cases together (steal in provenance)
    unsigned long long ticks_total, ticks_steal;
} vf_runner;

// A case being run.
typedef struct vf_case_run {
    const vf_case *c;
    char dir[1024];             // OUT/runs/<case>
    char ref_key[600];          // settings that determine the reference's run
    long per_epoch, N;          // steps per epoch, total steps
    size_t n_train;             // training records of the dataset (the batch of `batch = full`)
    int upscale_identity;       // upscale S leaves the images as they are (S = their side)
    int epochs;                 // --epochs passed to train
    long check_steps[VF_MAX_CHECKS];
    double step_work;           // multiply-adds of one training step (batch x par_model_macs):
                                //   the progress estimate's unit, so a full-batch step of
                                //   study 1 and a batch-64 step of study 3 weigh what they cost
    vf_work plan;               // its work as planned (vf_plan_add), for r->later
    int started;                // vf_case_start: its work is no longer r->later's
    json_t *res;                // the case's result object
    long time_warmup, time_steps;   // a timed run: warm-up steps, then the timed window's
                                    //   steps (0, 0: not timed)
} vf_case_run;

// ---- helpers (vf_run_util.c) ----------------------------------------------------

// snprintf for paths and keys (folder names are checked to be short first).
void vf_fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
const char *vf_mode_name(int mode);
// "serial exact T=1 R=1"
void vf_config_label(char *buf, size_t n, const vf_config *cf);
// Reports progress ("what") with the time left estimated from the work done.
void vf_note(vf_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Work accounting of the estimate: a task of `kind` done (its training steps
// of the case, each weighing cr->step_work; seconds it took), or n tasks that
// will not run.
void vf_task_done(vf_runner *r, const vf_case_run *cr, int kind, double steps, double seconds);
void vf_task_skip(vf_runner *r, const vf_case_run *cr, int kind, double steps, long n);
// Planning: n tasks of `kind` of the case, `units` in all, and window_s seconds of
// window-sized timed runs, added to the work left and, before the case starts,
// to the later cases' and the case's plan (negative: planned work taken back off).
void vf_plan_add(vf_runner *r, vf_case_run *cr, int kind, double n, double units,
                 double window_s);
// The case starts: its plan is no longer the later cases' work.
void vf_case_start(vf_runner *r, vf_case_run *cr);
// First non-empty, non-hint line of a file ("" if none).
void vf_first_line(char *buf, size_t n, const char *path);
// Runs `parity` with b (b->v[0] is replaced by the binary's path) in a
// session of its own (par_proc.h), stdout and stderr to files (NULL:
// /dev/null), ended after the suite's timeout, the running task's progress
// reported again every second; *json = stdout parsed as a JSON object when
// json is not NULL (NULL when it is not one). Oversubscribed runs get
// passive OpenMP waiting unless OMP_WAIT_POLICY is set.
par_status vf_run_parity(vf_runner *r, par_argv *b, const char *out_path, const char *err_path,
                         int oversubscribed, int *code, double *wall, json_t **json);
// Training flags of the case for `steps` steps; trainer, mode, threads (and
// --ranks for MPI trainers when with_ranks) of a config.
void vf_case_flags(par_argv *b, const vf_case_run *cr, long steps);
void vf_config_flags(par_argv *b, const vf_config *cf, int with_ranks);
// The model and data flags alone (dataset, upscale, model, act, dtype,
// batch (a number or full), chunk), for commands that take no training
// length (`parity model`; the suite refuses `predict` with upscale or batch
// full); --optim and its hyperparameters (nothing for sgd); the case's
// test-only fault (`--fault SPEC`, configs only), if it has one.
void vf_setting_flags(par_argv *b, const vf_case *c);
void vf_optim_flags(par_argv *b, const vf_case *c);
void vf_fault_flag(par_argv *b, const vf_case_run *cr);
json_t *vf_jnum(double x);                                  // null for NaN/Inf
json_t *vf_losses_json(const double *l, long n);
// Copies the fields of a `parity train --json` summary that results keep.
void vf_copy_train_fields(json_t *dst, const json_t *tj);
// o["verdict"] = verdict, o["detail"] = the formatted text.
void vf_set_verdict(json_t *o, const char *verdict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// threads x ranks above the machine's cores.
int vf_oversubscribed(const vf_runner *r, const vf_config *cf);

// ---- the steps of a case ------------------------------------------------------------

// The reference run of the case (or the same setting's earlier one): log,
// final and initial weights; *ref is owned by the runner's cache.
par_status vf_run_reference(vf_runner *r, vf_case_run *cr, json_t **ref);
// One config: its run and its comparison with the reference (vf_run_config.c).
par_status vf_run_config(vf_runner *r, vf_case_run *cr, const vf_config *cf, const json_t *ref,
                         json_t *cres);
// An external case's config (vf_run_external.c): its world's command in
// lockstep over the case's steps into cres ("correctness": a FAIL row with
// the trainer's one line when it broke the protocol; "losses": its loss of
// each step it was handed; "command"). One timed run of it: K warm-up steps
// then the W-step window in one launch, *sec the window's seconds by the
// trainer's log (0 when the run failed: why says how). PAR_OK unless the run
// could not be made.
par_status vf_run_external(vf_runner *r, vf_case_run *cr, const vf_config *cf, const json_t *ref,
                           json_t *cres);
par_status vf_time_external(vf_runner *r, vf_case_run *cr, const vf_config *cf, long K, long W,
                            double *sec, double *wall, char *why, size_t why_n);
// Whether cf is its case's timing baseline: serial exact, or an external
// case's world 1.
int vf_config_is_base(const vf_case *c, const vf_config *cf);
// MPFR (vf_run_check.c): the configs that `parity check` runs for a case
// (the reference first, then each config: MPI trainers under mpirun, rank
// 0's view); one check, appended to checks; a config's MPFR verdict from
// the checks.
int vf_check_keys(const vf_case *c, vf_config *keys);
par_status vf_run_check(vf_runner *r, vf_case_run *cr, const json_t *ref, const vf_config *k, long S,
                        json_t *checks);
void vf_config_mpfr(json_t *cres, const vf_case *c, const vf_config *cf, const json_t *checks,
                    int available);
// Timing (vf_run_time.c): the configs i of the case with todo[i] set (they
// passed and are not oversubscribed), whose results are configs[i] (each
// with a "timing" object): a calibration run when the case has a window,
// then `warmup` untimed and `repeats` timed rounds, round-robin; their
// statistics (vf_stats.h) into each "timing", the window and the machine's
// load and steal into cr->res["timing"]. A config whose timing run fails
// is not timed and its verdict becomes "error".
par_status vf_time_case(vf_runner *r, vf_case_run *cr, json_t *configs, const int *todo);
// Whether a case makes a calibration run (for the plan's task count): a
// window, repeats and a config that can be timed.
int vf_case_calibrates(const vf_runner *r, const vf_case *c);
// The seconds a timed run of a window-sized case is planned at: its warm-up steps
// (a tenth of the window's) and the window, at the calibrated config's speed.
double vf_window_run_s(const vf_case *c);
// A config's timed runs that will not run (it failed, or is oversubscribed)
// come off the plan, as steps or as window seconds.
void vf_time_row_skip(vf_runner *r, vf_case_run *cr, const vf_config *cf);
// Speedup, efficiency and the speedup's 95% interval against the case's
// serial exact T=1 R=1 median.
void vf_speedups(json_t *configs, json_t *cres_case);
// Predicted rows of the scaling model (vf_run_predict.c): cres["predicted"]
// for a case with `predict` rank counts, after its timings.
par_status vf_predict_case(vf_runner *r, vf_case_run *cr, json_t *cres);

#endif
