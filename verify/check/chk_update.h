// The optimizer update's part of the step check (chk_update.c): one
// element's SGD, momentum, nesterov or adam update against its bound, and
// the coefficients those bounds use. Not a public header: chk_step.c and
// chk_bn.c include it.
#ifndef CHK_UPDATE_H
#define CHK_UPDATE_H

#include "chk_mpfr.h"

// The bound of the SGD update w' = fl(w - fl(lr g)) of one element from the
// run's own g (derived in chk_update.c); exact w - lr g left in w->y.
double chk_update_bound(const ctx *c, ws *w, double g, double wv);
// The optimizer update of parameter element p, recorded as element `flat`
// of the rows: ge NULL: LOCAL, from the run's own gradient, state and new
// state, against the bounds derived in chk_update.c; else END-TO-END
// from the exact gradient ge and the run's state before the step. tw: the
// new weight's row, ts[i]: new state i's row (i < c->n_state).
void chk_update_check(const ctx *c, ws *w, size_t p, size_t flat, mpfr_srcptr ge, chk_tensor *tw,
                      chk_tensor *ts);

// c's optimizer coefficients: the dtype-rounded hyperparameters, the exact
// c1, c2, bc1, bc2 (MPFR, freed by chk_update_consts_clear) and the bounds
// on the run's roundings of them.
void chk_update_consts(ctx *c);
void chk_update_consts_clear(ctx *c);

#endif
