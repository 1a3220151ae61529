// The any-order bound of one training step (docs/external.md, "The bound"):
// how far the gradient, the loss and the new weights of ANY trainer that
// computes the step's mathematics can lie from the exact values, whatever
// order it sums in (blocked, pairwise, tree, fma or not) and whatever
// elementwise library it uses within declared ulps. A foreign trainer's step
// and parity's reference are both such trainers, so each of their results
// lies within the bound of the exact one, and they lie within twice it of
// each other. Not for batchnorm (its statistics are a division by a
// computed variance: the LOCAL check of the trainer's own intermediates
// covers it). Tests: tests/external/test_ext_bound.c.
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
// *El >= |loss_any - *lc|. PAR_ERR_CONFIG for a model with batchnorm.
typedef struct ext_step_bound {
    double *gc, *Eg, *G;   // n_params each, the caller's
    double lc, El;
} ext_step_bound;
par_status ext_bound_step(ext_bound *b, const void *w, const void *x, const int32_t *labels,
                          size_t B, const ext_ulps *ulps, ext_step_bound *out);

#endif
