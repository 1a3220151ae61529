// The deterministic serial reference trainer: the readable specification of
// the arithmetic contract (docs/DESIGN.md, section 1). Plain loops, no threads, no
// blocking, no kernels: it shares only src/core (own math) and the parameter
// layout of src/model with the rest of parity, so that the fast trainers
// are checked against a second, independent implementation.
#ifndef REF_TRAIN_H
#define REF_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "par_dtype.h"
#include "par_model.h"
#include "par_status.h"

typedef struct ref_trainer ref_trainer;

// Copies the initial parameters (m->n_params elements of dt). lr is rounded
// to dt once. C is the chunk size (samples per chunk).
par_status ref_create(ref_trainer **t, const par_model *m, par_dtype dt, size_t C, double lr,
                      const void *init_params);

// The reference's own names for the optimizers (it includes nothing of
// src/train); the formulas are written out in ref_impl.inc.
typedef enum ref_optim_kind { REF_SGD = 0, REF_MOMENTUM, REF_NESTEROV, REF_ADAM } ref_optim_kind;

// Chooses the optimizer (default: SGD) before the first step: mu for
// momentum and nesterov, b1, b2, eps for adam, each rounded to dt once.
// Allocates its state, all zeros, and sets its step count to 0.
par_status ref_set_optimizer(ref_trainer *t, ref_optim_kind kind, double mu, double b1, double b2,
                             double eps);

// The optimizer state: returns the number of arrays (0, 1 or 2; velocity,
// or m and v), each n_params of dt, owned by t and writable (to restore a
// state), and in *steps the updates done so far.
int ref_optim_state(ref_trainer *t, void *arr[2], long *steps);
void ref_set_optim_steps(ref_trainer *t, long steps);

// One optimizer step on a batch: x is (B, n_inputs) of dt, labels (B). *loss is
// the batch mean cross-entropy, folded over chunks as the contract says.
par_status ref_step(ref_trainer *t, const void *x, const int32_t *labels, size_t B, double *loss);

// The current parameters (n_params elements of dt), and the gradient of the
// last step; both owned by t.
const void *ref_params(const ref_trainer *t);
const void *ref_grad(const ref_trainer *t);
size_t ref_n_params(const ref_trainer *t);
par_dtype ref_dtype(const ref_trainer *t);
void ref_set_params(ref_trainer *t, const void *w);

// From now on also record, per gradient element, S = sum over the samples
// of |term| (in f64): the scale of the a priori bound on any summation
// order, |fl(g) - g| <= gamma_n * S with n = B. Doubles the gradient cost.
par_status ref_track_abs(ref_trainer *t);
// S of the last step (n_params doubles), or NULL when not tracked.
const double *ref_grad_abs(const ref_trainer *t);

// Internals of the last step, for the MPFR checker (verify/): a[0] the input
// copy and a[l+1] layer l's output after its activation (l < n_layers),
// d[l] = dL/d(pre-activation of layer l), each (B, width) of dt, and the B
// per-sample losses. Owned by t, valid until the next ref_step; NULL before
// the first step or for l out of range.
const void *ref_act(const ref_trainer *t, int l);
const void *ref_delta(const ref_trainer *t, int l);
const void *ref_losses(const ref_trainer *t);

// Seconds spent so far in the forward pass (with the loss), the input
// gradients, the weight gradients and the update: out[0..3].
void ref_phase_seconds(const ref_trainer *t, double out[4]);
// Batchnorm layer l's statistics of the last step, (5, c_out) of dt: the
// batch sum S, mean, Q (the sum of squared deviations), var, inv per
// channel; NULL for other layers.
const void *ref_bn_stats(const ref_trainer *t, int l);

void ref_destroy(ref_trainer *t);

#endif
