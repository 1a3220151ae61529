// The any-order bound of one training step (docs/external.md, "The bound"):
// how far the gradient, the loss and the new weights of ANY trainer that
// computes the step's mathematics can lie from the exact values, whatever
// order it sums in (blocked, pairwise, tree, fma or not) and whatever
// elementwise library it uses within declared ulps. A foreign trainer's step
// and parity's reference are both such trainers, so each of their results
// lies within the bound of the exact one, and they lie within twice it of
// each other. Batchnorm's part is ext_bn.c. Tests:
// tests/external/test_ext_bound.c.
#ifndef EXT_BOUND_H
#define EXT_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include "par_dtype.h"
#include "par_model.h"
#include "par_status.h"

// Ulps a foreign elementwise function may be off by, per function. glibc's
// and Sleef's u10 functions document 1 ulp; parity's own are within 0.55
// (`parity check --math`). A trainer's softmax and log-softmax are bounded
// as formulas (a max, exps, a sum, a log, a few roundings), not as one call.
typedef struct ext_ulps {
    double exp, log, tanh, sigmoid;
} ext_ulps;

// The defaults, 1 ulp each.
ext_ulps ext_ulps_default(void);

// An activation of z known to +-Ez, in double, and (into *Ea) how far any
// conforming evaluation in a dtype of unit roundoff u can lie from it: relu
// is exact and 1-Lipschitz; sigmoid (Lipschitz 1/4) and tanh (1) add their
// ulps on the result (ulp(y) <= 2u |y|), and the centre's libm call a few
// units of 2^-53.
double ext_act_bound(par_act act, double z, double Ez, double u, double tiny,
                     const ext_ulps *ulps, double *Ea);

// Parses "FUNC=U" (FUNC exp, log, tanh or sigmoid; U a number >= 0) into u.
// PAR_ERR_CONFIG naming what was expected.
par_status ext_ulps_parse(ext_ulps *u, const char *spec);

typedef struct ext_bound ext_bound;

// Scratch for the model at batch size Bmax (allocations once).
par_status ext_bound_create(ext_bound **b, const par_model *m, par_dtype dt, size_t Bmax);
void ext_bound_destroy(ext_bound *b);

// One step's bound from the weights w before it (n_params of dt) and the
// batch x (B, n_inputs) of dt with its labels. A centre is computed in double
// beside every value: gc[i] the batch gradient of the mean cross-entropy,
// *lc the batch loss. Eg[i] >= |g_any - gc[i]| for any conforming evaluation
// g_any in dt (the exact gradient among them), G[i] >= |g_any|, and
// *El >= |loss_any - *lc|. Batchnorm's running statistics have no gradient:
// for them (ext_view_is_stat) gc and Eg hold their new values' centre and
// bound, which the step's forward sets.
typedef struct ext_step_bound {
    double *gc, *Eg, *G;   // n_params each, the caller's
    double lc, El;
} ext_step_bound;
par_status ext_bound_step(ext_bound *b, const void *w, const void *x, const int32_t *labels,
                          size_t B, const ext_ulps *ulps, ext_step_bound *out);

// The optimizer of a step, as the user gave it (not rounded to the dtype:
// a trainer may use the hyperparameters in double or rounded, both pass).
typedef struct ext_optim {
    int kind;                      // 0 sgd, 1 momentum, 2 nesterov, 3 adam (par_optim_kind)
    double lr, mu, b1, b2, eps;
} ext_optim;

// One element's update (ext_update_init once for the step's optimizer, dtype
// and update number t, 1 for the first) from its state before the step (w;
// m: velocity or adam's m; v: adam's v), and a
// gradient known only as gc +- Eg: the centre of the new w, m, v (in double,
// c[0..2]) and E[0..2], bounds on how far any conforming evaluation of the
// update in dt can lie from them: any arrangement of the formula (torch's
// lerp or addcdiv, parity's order) with a few roundings each, the
// hyperparameters exact or rounded to dt (adam's 1 - b^t then differs by up
// to t u b^t: 1 - 0.999 in f32 is 1.3e-5 away from the double's, relatively).
// Entries beyond the optimizer's state are 0. docs/external.md derives each.
typedef struct ext_update {
    ext_optim o;
    par_dtype dt;
    long t;                       // the update's number, 1 for the first
    double p1, p2;                // b1^t and b2^t (adam)
} ext_update;
void ext_update_init(ext_update *u, const ext_optim *o, par_dtype dt, long t);
void ext_update_bound(const ext_update *up, double w, double m, double v, double gc, double Eg,
                      double c[3], double E[3]);

// Whether view v of m is one of batchnorm's running statistics
// (running_mean, running_var, num_batches_tracked).
int ext_view_is_stat(const par_model *m, int v);

// Element i after the step, from w and its optimizer state s0, s1 before
// it: ext_update_bound of the step's gradient bound e, or for a running
// statistic (stat: ext_view_is_stat of its view) the forward's new value,
// its state unchanged (bound 0).
void ext_new_bound(const ext_update *up, int stat, const ext_step_bound *e, size_t i, double w,
                   double s0, double s1, double c[3], double E[3]);

#endif
