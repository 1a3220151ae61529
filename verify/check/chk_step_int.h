// Internals of the MPFR step check shared by verify/check/chk_step.c (the error
// model, dense, conv, max-pool, softmax, loss, update) and verify/check/chk_bn.c
// (batchnorm). Not a public header: only those two include it.
#ifndef CHK_STEP_INT_H
#define CHK_STEP_INT_H

#include <mpfr.h>
#include <stddef.h>

#include "chk_check.h"

// Bounds are computed in double and multiplied by SLACK, which covers their
// own ~20 roundings (chk_step.c, error model).
#define SLACK (1 + 0x1p-40)

// The run's format: unit roundoff u, smallest subnormal tiny, precision p,
// smallest normal exponent emin.
typedef struct fmt {
    double u, tiny;
    int p, emin;
} fmt;

fmt chk_fmt_of(par_dtype dt);

// Per-thread MPFR temporaries, initialised once per thread.
typedef struct ws {
    mpfr_t acc, y, q, e, t53, tp; // tp: exact products of a double and a double
    mpfr_t us[2], ua;             // the optimizer update: new state, a temporary
    mpfr_t *Z, *E, *D;            // K each: logits, exp terms, dz of one sample
    double *rho;                  // K: relative error bounds of the exp terms
    size_t K;
    // One element's terms (chk_terms.h): indices, the run's values (dtype), and
    // exact values for END-TO-END; T of each (0 when unused).
    size_t T, *ia, *ib;
    void *va, *vb;
    mpfr_t *ma, *mb;
} ws;

typedef struct ctx {
    const chk_step *st;
    const par_model *m;
    par_dtype dt;
    fmt f;
    int prec, e2e;
    size_t B, K;
    // rows, [0] LOCAL, [1] E2E (NULL without e2e)
    chk_tensor *out[2][PAR_MAX_LAYERS], *dz[2][PAR_MAX_LAYERS];
    chk_tensor *gw[2][PAR_MAX_LAYERS], *gb[2][PAR_MAX_LAYERS];
    chk_tensor *nw[2][PAR_MAX_LAYERS], *nb[2][PAR_MAX_LAYERS];
    chk_tensor *ls[2], *loss[2];
    // batchnorm layers: the CHK_BN_* statistics, and running_mean,
    // running_var, num_batches_tracked after the step
    chk_tensor *bst[2][PAR_MAX_LAYERS][CHK_BN_N], *brs[2][PAR_MAX_LAYERS][3];
    // END-TO-END exact values: ea[l+1] = layer l's output, ed[l] its dz, eloss;
    // ebn[l] (batchnorm): CHK_BN_* statistics, then dgamma, dbeta (7 c_out)
    mpfr_t *ea[PAR_MAX_LAYERS + 1], *ed[PAR_MAX_LAYERS], *eloss, *ebn[PAR_MAX_LAYERS];
    // The optimizer (chk_step.c, update): its state rows after the step,
    // ns[v][l][0 weight, 1 bias][i] for i < n_state; its coefficients as the
    // dtype values the run is given (lr in st, mu, b1, b2, eps) and, exactly,
    // c1 = 1 - b1, c2 = 1 - b2, bc1 = 1 - b1^t, bc2 = 1 - b2^t (mc*, to prec
    // bits; dc* to double), with bounds ec* on |the run's value - exact|.
    chk_tensor *ns[2][PAR_MAX_LAYERS][2][2];
    int n_state;
    par_optim_kind opt;
    double mu, b1, b2, eps;
    double dc1, dc2, dbc1, dbc2, ec1, ec2, ebc1, ebc2;
    mpfr_t mc1, mc2, mbc1, mbc2;
} ctx;

// w->acc = init + sum_{k<n} a[k sa] b[k sb] (b NULL: + a[k sa]) of dtype
// values, exactly (to prec); returns S = |init| + sum |terms|, rounded up.
double chk_dot_run(ws *w, par_dtype dt, const void *a, size_t sa, const void *b, size_t sb,
                   size_t n, double init);
// The reduction bound: gamma_{n_red} S + max(n_red, n_terms) tiny + MPFR's part.
double chk_bound_dot(const fmt *f, par_dtype dt, size_t n_red, size_t n_terms, double S, int prec);
// Records |run - exact| of element idx against bound * SLACK (NAN: no bound).
// Uses w->e.
void chk_record(chk_tensor *t, ws *w, size_t idx, mpfr_srcptr exact, double run, const fmt *f,
                double bound);
// dst = act(z) exactly (to prec bits); uses w->q (sigmoid).
void chk_act_mp(ws *w, mpfr_ptr dst, mpfr_srcptr z, par_act act);
// Folds per-thread partials into the rows (dst1 NULL: none), under a lock.
void chk_merge2(chk_tensor *dst0, const chk_tensor *p0, chk_tensor *dst1, const chk_tensor *p1);
// The SGD update w' = fl(w - fl(lr g)) of one element from the run's own g
// (bound in chk_step.c, stage_grads); exact w - lr g left in w->y. Returns
// the bound.
double chk_update_bound(const ctx *c, ws *w, double g, double wv);
// The optimizer update of parameter element p, recorded as element `flat`
// of the rows: ge NULL: LOCAL, from the run's own gradient, state and new
// state, against the derived bounds (chk_step.c, update); else END-TO-END
// from the exact gradient ge and the run's state before the step. tw: the
// new weight's row, ts[i]: new state i's row (i < c->n_state).
void chk_update_check(const ctx *c, ws *w, size_t p, size_t flat, mpfr_srcptr ge, chk_tensor *tw,
                      chk_tensor *ts);

// Batchnorm (chk_bn.c): statistics and outputs of layer l, its dgamma,
// dbeta and input gradient (l >= 1), and the update of its parameters and
// running statistics. Called by every thread of the check's parallel region.
void chk_bn_forward(ctx *c, ws *w, int l);
void chk_bn_backward(ctx *c, ws *w, int l);
void chk_bn_update(ctx *c, ws *w, int l);
// The n of gamma_n of a batchnorm batch sum: a term goes through at most
// min(B, C) P - 1 roundings in its chunk's chain and ceil(B / C) - 1 in the
// fold of the chunks; counted as min(B, C) P + ceil(B / C) - 1.
size_t chk_bn_rounds(const par_layer *ly, size_t B, size_t C);

#endif
