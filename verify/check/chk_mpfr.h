// The MPFR building blocks of the step check (chk_mpfr.c): the run's format,
// per-thread workspaces, the check's shared state, exact dot products with
// their reduction bound, activations in MPFR, recording an element. Not a
// public header: only the step check's files (chk_step.c, chk_bn.c,
// chk_update.c) include it.
#ifndef CHK_MPFR_H
#define CHK_MPFR_H

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

// The state of one step check, shared by its stages (chk_step.c, chk_bn.c)
// and the update check (chk_update.c).
typedef struct ctx {
    const chk_step *st;
    const par_model *m;
    par_dtype dt;
    fmt f;
    int prec, e2e;
    const chk_e2e_bounds *eb;   // END-TO-END bounds of the new weights, state, loss (or NULL)
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
    // The optimizer (chk_update.c): its state rows after the step,
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

// A thread's workspace: prec-bit temporaries and K logits' worth (init),
// buffers for T terms of one element, exact ones too when e2e (terms); clear
// frees both. Allocation failure aborts, like MPFR's own.
void chk_ws_init(ws *w, int prec, size_t K);
void chk_ws_terms(ws *w, int prec, size_t T, int e2e);
void chk_ws_clear(ws *w);

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
// w->acc = init + sum_k a[k sa] b[k sb]: a exact, b dtype values or NULL (1).
void chk_dot_md(ws *w, mpfr_t *a, size_t sa, par_dtype dt, const void *b, size_t sb, size_t n,
                double init);
// w->acc = sum_k a[k sa] b[k sb], both exact.
void chk_dot_mm(ws *w, mpfr_t *a, size_t sa, mpfr_t *b, size_t sb, size_t n);
// dst = act(z) exactly (to prec bits); uses w->q (sigmoid).
void chk_act_mp(ws *w, mpfr_ptr dst, mpfr_srcptr z, par_act act);
// dst = act'(z) through the output y = act(z), exactly, by the kernels' formulas.
void chk_act_deriv_mp(mpfr_ptr dst, mpfr_srcptr y, par_act act);
// Folds per-thread partials into the rows (dst1 NULL: none), under a lock.
void chk_merge2(chk_tensor *dst0, const chk_tensor *p0, chk_tensor *dst1, const chk_tensor *p1);

#endif
