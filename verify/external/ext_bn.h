// Batchnorm under the any-order bound (docs/external.md, "Batchnorm"): one
// training-mode layer's centre in double and, beside each value, a bound on
// how far any conforming evaluation in the run's dtype can lie from it, from
// an input known to +-Ex. Used by the step's bound (ext_bound.c, Ex carried)
// and by the checks of a trainer's own intermediates (ext_local.c, Ex = 0).
// The formula bounded is the two-pass one, in any order and arrangement:
// mean = sum x / N, var = sum (x - mean)^2 / N, y = gamma (x - mean) /
// sqrt(var + eps) + beta (or x a + (beta - mean a), a = gamma / sqrt(..)).
// Tests: tests/external/test_ext_bound.c.
#ifndef EXT_BN_H
#define EXT_BN_H

#include <stddef.h>

#include "par_model.h"
#include "par_status.h"

typedef struct ext_bn {
    const par_layer *ly;
    size_t B;
    double u, tiny;                 // the run's dtype
    const double *gamma, *beta;     // (c) each, the layer's weights
    // Set by ext_bn_forward, read by the others: per channel the mean, the
    // sum of squared deviations Q and 1 / sqrt(Q / N + eps), each +- its E;
    // per element the normalised input xh +- Exh, (B, c, P).
    double *mean, *Emean, *Q, *EQ, *inv, *Einv;
    double *xh, *Exh;
} ext_bn;

// Scratch for layer ly at batch size Bmax; *s's other fields are the caller's.
par_status ext_bn_alloc(ext_bn *s, const par_layer *ly, size_t Bmax);
void ext_bn_free(ext_bn *s);

// The layer's output before its activation, z +- Ez, from x +- Ex, all
// (B, c, P) with B = s->B.
void ext_bn_forward(ext_bn *s, const double *x, const double *Ex, double *z, double *Ez);

// The running statistics after the forward, from rm and rv before it: the
// new running_mean and running_var, centre and bound, (c) each.
void ext_bn_running(const ext_bn *s, const double *rm, const double *rv, double *rm_c,
                    double *rm_E, double *rv_c, double *rv_E);

// From dz +- Edz (the gradient of z): the gradients of gamma (dg) and beta
// (db), (c) each, and dx +- Edx, the gradient of the input (dx NULL: not
// wanted).
void ext_bn_backward(const ext_bn *s, const double *dz, const double *Edz, double *dg,
                     double *Edg, double *db, double *Edb, double *dx, double *Edx);

#endif
