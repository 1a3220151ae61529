// What `parity model` measures for the scaling model (sm_model.h), and the
// validation of its predictions: serial steps timed in this process
// (sm_compute.c), the network probed by `parity model --probe-comm` under
// mpirun (sm_probe.c), real `parity train` runs as child processes
// (par_proc.h; sm_runs.c), the cores' distance (sm_cores.c), and the rows
// that put it together (sm_measure.c). Never prints; the CLI
// (src/cli/cmd_model.c) parses the flags and prints the figures.
// Tests: tests/verify/test_scaling.c, tests/verify/test_timing.c, tests/cli/test_check_cli.sh.
#ifndef SM_MEASURE_H
#define SM_MEASURE_H

#include <stddef.h>

#include "par_data.h"
#include "par_model.h"
#include "par_proc.h"
#include "par_status.h"
#include "par_trainer.h"
#include "sm_model.h"

// ---- the setup ------------------------------------------------------------------------

// What is measured, and how this binary runs the probes and training runs
// it measures (its children get the flags below, as given).
typedef struct sm_setup {
    const char *exe;          // the parity binary (children run it)
    const char *launcher;     // NULL: the runs on R ranks are `exe ... --ranks R`; else a
                              // command's words (split at blanks; no shell), {R} -> R,
                              // followed by exe and its flags
    const par_model *m;
    par_dtype dt;
    const par_optim *optim;   // timed with the steps; the runs get it as flags
    const par_dataset *ds;    // resampled as --upscale says
    const void *w;            // initial weights of the timed steps (m->n_params of dt)
    const char *dataset, *model, *act, *dtype;   // the flags as given
    int upscale;              // --upscale (0: off)
    int batch, chunk, steps;  // of the validation runs (and weak scaling)
    int cores;                // --cores (0: this machine's online CPUs)
} sm_setup;

// How a probe's launches met this machine's cores (sm_core_round_trip_ns
// before and after each launch).
typedef struct sm_probe_info {
    int launches;             // launches run
    int used;                 // launches whose medians make the probe
    int near;                 // 1: the used launches met the nearest placement of the cores
                              // seen (or the distance was not measured)
    double min_ns, max_ns;    // round trips over the used launches (NAN: not measured)
} sm_probe_info;

// ---- calibration and validation (sm_measure.c) ----------------------------------------

enum { SM_N_POINTS = 6 };     // serial steps at b = 8, 16, 32, 64, 128, 256

typedef struct sm_calibration {
    sm_costs c;               // every cost; point_b / point_t the timed steps
    int cores;                // the cores of the predictions (--cores, else this machine's)
    int have_comm;            // 0: the 2-rank probe failed: no alpha, beta or allreduce
    sm_probe_info probe;      // its launches (have_comm)
    int have_run;             // 0: the serial run failed: no t_run or contention
    double run_engine_s;      // that run's seconds per step inside the engine
    int shared_threads;       // threads of the shared update's measurement (0: none)
} sm_calibration;

// 1. compute: serial steps at b = 8 .. 256 (40 each, medians), t(b) = t0 +
// b t_sample fitted by least squares, the update and panels at b = 64, the
// update shared by the cores' threads; 2. alpha, beta and the allreduce from
// the probe on 2 ranks; 3. a real serial run's seconds outside the engine
// (t_run) and the contention of `cores` such runs at once. A failed probe or
// run leaves its costs out (have_comm, have_run); a failed timing fails.
par_status sm_calibrate(sm_calibration *cal, const sm_setup *s);

// One validation row: a design's measured seconds per step on R ranks (the
// median of 3 runs) against the prediction with the costs re-measured just
// before (the probe on R ranks, the compute scaled to a serial run now).
typedef struct sm_validation_row {
    sm_design design;
    int ranks;
    size_t batch;
    double measured_s, predicted_s;   // per step
    sm_costs here;            // the costs of the prediction
    int probed;               // 1: alpha, beta and allreduce from a probe on R ranks
    sm_probe_info probe;      // (probed)
    double compute_scale;     // the serial run's engine time now over calibration's
    double round_trip_ns, round_trip_after_ns;   // the cores' distance before and after
                                                 // the runs (NAN: not measured)
    int cores_moved;          // one of the two over twice the other
} sm_validation_row;

// Rows for each rank count of ranks[0..n_ranks) (< 1 skipped): mpi exact,
// then mpi fast; a design whose 3 runs did not all succeed has no row.
// *rows (malloc'd, the caller frees) and *n_rows.
par_status sm_validate(sm_validation_row **rows, int *n_rows, const sm_calibration *cal,
                       const sm_setup *s, const int *ranks, int n_ranks);

// One predicted row: an epoch of n_train samples on R ranks (a core each).
typedef struct sm_prediction {
    int weak;                 // 0: strong (global batch fixed), 1: weak (B per rank)
    sm_design design;
    int ranks;
    size_t batch;             // the global batch
    double epoch_s, speedup, efficiency;
} sm_prediction;

// For mpi exact then mpi fast, global batches 64 .. 8192 (doubling), R = 1 ..
// max_ranks (doubling): the strong row, then the weak row of batch B per
// rank against one rank's epoch at batch B. Returns the rows written (at
// most cap; sm_n_predictions(max_ranks) is all of them).
int sm_predictions(sm_prediction *rows, int cap, const sm_costs *c, const par_model *m,
                   size_t n_train, size_t B, int max_ranks);
int sm_n_predictions(int max_ranks);

// ---- the pieces -----------------------------------------------------------------------

// The round trip of one cache line between two cores, in ns: two threads
// pinned to the first two CPUs of the calling thread's affinity mask pass
// it back and forth (C11 atomics, acquire/release) 200 times untimed, then
// 5 x 2000 times timed (a few ms in all); the median of the 5. Cores that
// share a cache pass it several times faster than cores far apart: on a VM
// whose host moves its virtual CPUs it tells which placement the timings
// met. NAN when the mask holds fewer than two CPUs or a thread cannot be
// pinned. (sm_cores.c)
double sm_core_round_trip_ns(void);

// Which of n measurements met near cores, when rt[k] holds the round trips
// read just before and just after measurement k: near[k] = 0 when either
// is over twice the fastest of all 2n readings; NAN readings tell nothing
// and count as near. Returns how many are near. (sm_cores.c)
int sm_near_probes(const double (*rt)[2], int n, int near[]);

// The network as `parity model --probe-comm` measures it, on every rank of
// MPI_COMM_WORLD (collective; MPI initialised, 2 ranks or more): alpha,
// half a ping-pong of 8 bytes between ranks 0 and 1; beta, from every rank
// sending n bytes to the next on a ring while it receives from the one
// before (MPI_Sendrecv), as the ring, the all-gather and allreduce move
// data, at 1 and 4 MB; allreduce, MPI_Allreduce (sum) of n_values values of
// dt (0: a rank had no memory for it). Medians of 21 repeats: a training
// step meets typical transfers, not the best one. The calling rank's
// figures (rank 0's are the probe's). Without MPI: PAR_ERR_MPI. (sm_probe.c)
typedef struct sm_comm_figures {
    int ranks;
    double alpha, beta, allreduce_s;
} sm_comm_figures;
par_status sm_probe_comm(sm_comm_figures *f, size_t n_values, par_dtype dt);

// The probe on R ranks through s's launcher, each figure the median of 3
// launches that met the nearest placement of the cores seen (up to 9
// launches; failing 3, every launch counts and pc->near is 0): sets
// c->alpha, beta, t_allreduce and allreduce_ranks. -1 when a launch failed
// or ran on another rank count. (sm_probe.c)
int sm_probe_network(const sm_setup *s, int R, sm_costs *c, sm_probe_info *pc);

// Appends the command that runs this binary on R ranks up to its flags: the
// launcher's words with every {R} replaced by R, then exe; without a
// launcher exe alone (sm_launch_end then adds --ranks R). (sm_runs.c)
void sm_launch_argv(par_argv *a, const char *launcher, const char *exe, int R);
void sm_launch_end(par_argv *a, const char *launcher, int R);

// Runs a; out[i] = the number field keys[i] of the JSON lines of its stdout,
// for the n keys (n <= 8); 0 when it exited 0 and printed them all.
// timeout_s > 0 ends it (and its group) after that long. (sm_runs.c)
int sm_run_json(const par_argv *a, int n, const char *const keys[], double out[],
                double timeout_s);

// A serial `parity train` of s's setting: its engine and outside seconds per
// step, and the contention of `cores` such runs at once (their engine time
// over the one run's; 1 when cores is 1 or the runs at once failed). -1
// when the run failed. (sm_runs.c)
int sm_run_costs(const sm_setup *s, int cores, double *engine, double *outside,
                 double *contention);

// Two serial runs taking turns on CPU 0 (as ranks beyond the cores do):
// their engine seconds over twice one run's alone there; 1 when it cannot be
// measured (taskset missing, CPU 0 not ours). (sm_runs.c)
double sm_turns_cost(const sm_setup *s);

// Appends the flags of s's `parity train` run with trainer and mode (json,
// quiet, no digest), after the launch command. (sm_runs.c)
void sm_train_argv(par_argv *a, const sm_setup *s, const char *trainer, const char *mode);

// Serial engine seconds per step at batch b: the median of `reps` steps
// (after 3 warm-up steps); the medians of the update and of recomputing
// every panel (not a part of the step: what a rank of the sharded update
// does for weights it receives). (sm_compute.c)
par_status sm_time_steps(const sm_setup *s, size_t b, int reps, int threads, double *sec,
                         double *upd, double *pan);

// One of k threads' share of the update right after all of them read every
// weight, each then updating its own rows (mpi exact on one host writes its
// shared window so): the least of 3 medians; 0 when k < 2 or it failed.
// (sm_compute.c)
double sm_shared_update(const sm_setup *s, int k);

#endif
