// MPFR high-precision checker (chk_): recomputes one training step (forward,
// loss, backward, gradient, the SGD, momentum, nesterov or adam update) in MPFR and compares a run with it,
// tensor by tensor, against a priori error bounds; also measures the project's
// own exp/log/tanh/sigmoid. Library code: returns par_status, never prints
// (`parity check`, src/cli/cmd_check.c, prints). Tests: tests/verify/test_check*.c.
#ifndef CHK_CHECK_H
#define CHK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "par_data.h"
#include "par_model.h"
#include "par_trainer.h"

// ---- one step of a run ------------------------------------------------------

// One step of a run: its inputs and every tensor it computed. All buffers
// are owned by the struct (chk_step_free); a[0] aliases x.
typedef struct chk_step {
    const par_model *m;
    par_dtype dt;
    par_mode mode;
    size_t B, C;
    double lr;                   // as the run uses it: rounded to dt once
    void *x;                     // (B, n_inputs) the batch
    int32_t *labels;             // (B)
    void *w;                     // (n_params) weights before the step
    void *a[PAR_MAX_LAYERS + 1]; // a[l+1]: (B, n_out of layer l), after the activation
    void *d[PAR_MAX_LAYERS];     // d[l]: (B, n_out of layer l), dL/d(pre-activation)
    void *loss_s;                // (B) per-sample losses
    double loss;                 // the batch mean the step returned
    void *g;                     // (n_params) the gradient of the step
    void *w_new;                 // (n_params) weights after the step
    void *bn[PAR_MAX_LAYERS];    // batchnorm layer l: (CHK_BN_N, c_out) statistics of the run
    par_optim optim;             // the run's optimizer as given (kind SGD: no state)
    long opt_t;                  // its update number in this step (1 from a fresh state)
    void *s[2], *s_new[2];       // its state before / after the step (n_params each;
                                 // velocity, or m and v; NULL beyond par_optim_n_state)
    const char *trainer;         // trainer name (static)
    const char *internals;       // where a, d and loss_s come from (static text)
} chk_step;

// The per-channel statistics a batchnorm layer computes, in that order:
// S = the batch sum of x, mean = S / N, Q = the sum of (x - mean)^2,
// var = Q / N, inv = 1 / sqrt(var + eps).
enum { CHK_BN_S = 0, CHK_BN_MEAN, CHK_BN_Q, CHK_BN_VAR, CHK_BN_INV, CHK_BN_N };

// Runs one step of `trainer` from cfg->init_params on `batch` (cfg->batch >=
// batch->B) and captures it. --trainer reference: its own internals (ref_act,
// ref_delta, ref_losses). Other trainers: the gradient, loss and new weights
// through the trainer table, the activations, deltas and per-sample losses
// from a par_engine of the same step (an engine computes them bit for bit
// like every exact trainer; fast mode reorders only the batch reductions).
// MPI trainers (mpi, hybrid, root): collective, every rank calls it with the
// same arguments; each captures its own view (rank 0's is the one checked).
par_status chk_capture(chk_step *out, const par_trainer_ops *trainer, const par_run_cfg *cfg,
                       const par_batch *batch);
// The same with the optimizer (cfg->optim) starting from `start` (NULL: a
// fresh state, all zeros, t = 0; else start->n arrays of n_params and
// start->t updates done, e.g. from a checkpoint's opt.* members); the state
// before and after the step is captured into s, s_new.
par_status chk_capture_state(chk_step *out, const par_trainer_ops *trainer,
                             const par_run_cfg *cfg, const par_batch *batch,
                             const par_optim_state *start);
void chk_step_free(chk_step *s);

// The records of step `step` (1-based) of `parity train` with this seed and
// batch size: epoch e = (step - 1) / steps_per_epoch, the batch is the
// slice [(step - 1 - e * steps_per_epoch) * batch, + B) of par_epoch_order
// (B < batch for an epoch's short last batch). *idx is malloc'ed.
par_status chk_step_records(size_t **idx, size_t *B, int *epoch, const par_dataset *ds,
                            uint64_t seed, size_t batch, long step);

// ---- the report -------------------------------------------------------------

typedef enum chk_view {
    CHK_LOCAL = 0,    // each op from the run's own rounded inputs; verdict by bound
    CHK_E2E = 1,      // exact propagation from the step's inputs; informational
    CHK_CONTRACT = 2, // exact mode: bitwise equal to the reference trainer
} chk_view;

typedef enum chk_verdict { CHK_PASS = 0, CHK_FAIL = 1, CHK_INFO = 2 } chk_verdict;

// One compared tensor. Errors are |run - exact| with the exact value in MPFR;
// ulps are of the run's dtype at the exact value; bound_ratio is the largest
// |err| / bound (LOCAL only). The worst element is the one with the largest
// ratio (LOCAL) or the most ulps (E2E, CONTRACT); ties: the smallest index.
typedef struct chk_tensor {
    chk_view view;
    char name[40]; // "layer0.out", "layer1.dz", "layer0.weight.grad", "loss"
    int ndim;
    size_t shape[2]; // row-major; flat index = i * shape[1] + j
    size_t n_red;    // n of gamma_n (0: elementwise op or no bound)
    int has_bound;
    size_t n;      // elements compared
    size_t n_over; // elements beyond their bound (LOCAL) or differing (CONTRACT)
    double max_abs, max_rel, max_ulp, bound_ratio;
    size_t worst; // flat index
    double worst_run, worst_exact, worst_err, worst_ulp, worst_bound, worst_key;
    chk_verdict verdict;
} chk_tensor;

typedef struct chk_report {
    size_t n, cap;
    chk_tensor *t;
    int n_fail;     // tensors with verdict FAIL
    double seconds; // wall time of chk_check_step (MPFR work)
    int threads, prec;
} chk_report;

// Bounds on |run - exact| of a step parity did not compute (`parity check
// --external`, verify/external/ext_check.c): per element of the new weights
// (n_params), of each new optimizer state array, and of the loss. With them
// the END-TO-END rows of the new weights, the new state and the loss get a
// verdict; without (NULL) every END-TO-END row is information only.
typedef struct chk_e2e_bounds {
    const double *w_new;
    const double *s_new[2];
    double loss;
} chk_e2e_bounds;

typedef struct chk_opts {
    int prec;       // MPFR bits, >= 64 (256 by default in the CLI)
    int threads;    // OpenMP threads; 0 = omp_get_max_threads()
    int end_to_end; // also the END-TO-END view
} chk_opts;

// LOCAL rows (and E2E rows if o->end_to_end) of one step, appended to r
// (zero-initialise r before the first call). PAR_ERR_CONFIG for prec < 64.
par_status chk_check_step(chk_report *r, const chk_step *s, const chk_opts *o);
// The same with END-TO-END bounds b (NULL: as chk_check_step; ignored
// without o->end_to_end).
par_status chk_check_step_bounded(chk_report *r, const chk_step *s, const chk_opts *o,
                                  const chk_e2e_bounds *b);

// CONTRACT rows: batchnorm statistics (layer<l>.bn.sum, .mean, .sqdev, .var,
// .inv), gradient, new weights (one row per parameter view each) and the
// loss of `run`, bitwise against `ref` (the reference on the same step).
par_status chk_check_contract(chk_report *r, const chk_step *run, const chk_step *ref);

void chk_report_free(chk_report *r);
// "sum", "mean", "sqdev", "var", "inv": row names of the CHK_BN_* statistics.
const char *chk_bn_stat_name(int k);
const char *chk_view_name(chk_view v);       // "LOCAL", "E2E", "CONTRACT"
const char *chk_verdict_name(chk_verdict v); // "PASS", "FAIL", "info"
// "[s,o]" / "[o,i]" / "[i]" / "-" (n == 0) of a flat index of t.
void chk_format_index(char *buf, size_t size, const chk_tensor *t, size_t flat);

// ---- the project's own math against MPFR ------------------------------------

enum { CHK_EXP = 0, CHK_LOG, CHK_TANH, CHK_SIGMOID, CHK_N_FN };

typedef struct chk_math_row {
    int fn; // CHK_EXP ..
    par_dtype dt;
    size_t points;
    double max_ulp; // largest |f(x) - exact| / ulp(exact)
    double worst_x;
    double seconds;
} chk_math_row;

typedef struct chk_math_report {
    chk_math_row rows[2 * CHK_N_FN]; // f32 then f64, exp, log, tanh, sigmoid
    int n_rows;
    double seconds;
    int threads;
} chk_math_report;

// Dense deterministic samples over each function's useful range (`points`
// log-spaced over the bit patterns and points/2 uniform, per function and
// dtype, f32 and f64), values around every threshold of the implementation,
// and, for f64, known hard-to-round arguments; exact values by MPFR at 128
// bits. threads 0 = omp_get_max_threads().
par_status chk_math_check(chk_math_report *r, size_t points_f32, size_t points_f64, int threads);
const char *chk_fn_name(int fn);

// ---- primitives (shared by verify/check/chk_*.c; public for tests) -----------------

double chk_unit_roundoff(par_dtype dt);    // u = 2^-24 or 2^-53
double chk_gamma(size_t n, par_dtype dt);  // n u / (1 - n u)
double chk_ulp_of(double x, par_dtype dt); // ulp in dt at |x| (subnormal spacing below)

// One reduction checked exactly like every dot product of a step: exact =
// init + sum_k a[k] * b[k] (b NULL: init + sum a[k]) of n values of dtype dt
// (passed as doubles; each must be representable in dt), in MPFR at prec
// bits; S = |init| + sum |terms| (rounded up); bound = the a priori bound
// on |fl - exact| for any order of n_red roundings (gamma_{n_red} S plus
// underflow terms; 0 when every term is 0); err and ulp of `run`.
typedef struct chk_elem {
    double run, exact, err, ulp, S, bound;
} chk_elem;
par_status chk_check_reduction(chk_elem *e, par_dtype dt, const double *a, const double *b,
                               size_t n, double init, size_t n_red, double run, int prec);

// ---- report building (shared by verify/check/chk_*.c) -------------------------------

// Appends a row with zeroed statistics; NULL when out of memory.
chk_tensor *chk_report_add(chk_report *r, chk_view v, const char *name, int ndim, size_t d0,
                           size_t d1, size_t n_red, int has_bound);
// Records one element: err = |run - exact| (MPFR), ulp = err in ulps, bound
// (ignored unless t->has_bound). A non-finite err counts as over its bound.
void chk_tensor_record(chk_tensor *t, size_t idx, double run, double exact, double err, double ulp,
                       double bound);
// Folds a partial (same row, other elements) into dst.
void chk_tensor_merge(chk_tensor *dst, const chk_tensor *part);
// A copy of t's identity with zeroed statistics, for per-thread partials.
chk_tensor chk_tensor_blank(const chk_tensor *t);
// Sets every row's verdict and r->n_fail.
void chk_report_finish(chk_report *r);

#endif
