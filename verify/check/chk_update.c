// The optimizer update's part of the step check: the SGD, momentum,
// nesterov and adam updates of one parameter element recomputed in MPFR and
// bounded op by op (derivations below), and the coefficients they use.
// Called by chk_step.c (dense and conv layers) and chk_bn.c (batchnorm).
// Tests: tests/verify/test_check_optim.c (every optimizer, the obeta and oswap faults).
#include <math.h>
#include <mpfr.h>

#include "chk_update.h"


// The SGD update w' = fl(w - fl(lr g)) from the run's gradient g is two
// correctly rounded ops:
//   |fl(lr g) - lr g| <= u |lr g| + tiny;  w - fl(lr g) rounds by u |.| (a
//   subtraction: no tiny), so |w' - (w - lr g)| <= u |lr g| + tiny
//   + u (|w - lr g| + u |lr g| + tiny).
double chk_update_bound(const ctx *c, ws *w, double g, double wv)
{
    const double u = c->f.u, tiny = c->f.tiny, lr = c->st->lr, lg = fabs(lr * g);
    mpfr_set_d(w->y, g, MPFR_RNDN);
    mpfr_mul_d(w->y, w->y, lr, MPFR_RNDN);
    mpfr_d_sub(w->y, wv, w->y, MPFR_RNDN);
    const double ax = fabs(mpfr_get_d(w->y, MPFR_RNDN));
    return u * lg + tiny + u * (ax + u * lg + tiny) + ldexp(ax + lg, 8 - c->prec);
}


// ---- the optimizer update (momentum, nesterov, adam) --------------------------------
//
// The run evaluates par_kernels.h's formulas, one rounding per operation, no
// fma, from its own w, state (m, v) and g; the coefficients are dtype values:
// lr, mu, b1, b2, eps as given (rounded once), c1 = fl(1 - b1), c2 = fl(1 -
// b2), bc1 = fl(1 - p1), bc2 = fl(1 - p2) with p = b^t formed in double by t
// - 1 roundings (par_optim_coefs, par_optim_power). The exact update uses
// c1 = 1 - b1, c2 = 1 - b2, bc1 = 1 - b1^t, bc2 = 1 - b2^t exactly, so the
// coefficients' own roundings are part of the bound (ec*, below).
//
// LOCAL checks each new state from the run's state before the step and g,
// and the new weight from the run's own new state (the kernel keeps the
// stored m and v in registers and goes on from them), so a wrong state and a
// wrong weight step fail different rows. Errors are carried op by op, with
// the exact values x of the intermediate results (|x^ - x| <= E):
//   product fl(c^ x^), |c^ - c| <= ec:  D = |c| E + ec (|x| + E),
//                                       E' = D + u (|c x| + D) + tiny
//   sum fl(x^ + y^) (no tiny: a subnormal sum is exact):
//                                       E' = Ex + Ey + u (|x + y| + Ex + Ey)
//   quotient fl(x^ / y^), y > Ey:       D = (Ex + |x/y| Ey) / (|y| - Ey),
//                                       E' = D + u (|x/y| + D) + tiny
//   sqrt(x^), x >= 0: |sqrt(x^) - sqrt(x)| = |x^ - x| / (sqrt(x^) + sqrt(x))
//                                       D = min(E / sqrt(x), sqrt(E)),
//                                       E' = D + u (sqrt(x) + D) + tiny
// (the first from c^ x^ - c x = (c^ - c) x^ + c (x^ - x), the third from
// x^/y^ - x/y = ((x^ - x) - (x/y)(y^ - y)) / y^). Momentum and nesterov:
//   m' = mu m + g:              E = add(mul(mu, m), 0)
//   momentum w' = w - lr m'^:   add(mul(lr, m'^), 0)      (the SGD bound)
//   nesterov w' = w - lr (g + mu m'^): add(mul(lr, add(mul(mu, m'^), 0)), 0)
// Adam (c1, c2 with ec1, ec2; bc1, bc2 with ebc1, ebc2):
//   m' = b1 m + c1 g:           add(mul(b1, m), mul(c1^, g))
//   v' = b2 v + c2 g g:         add(mul(b2, v), mul(g, mul(c2^, g)))
//   w' = w - lr (m'^/bc1) / (sqrt(v'^/bc2) + eps):
//     mh: quot(m'^, bc1^), vh: quot(v'^, bc2^), d: add(sqrt(vh), 0 (eps)),
//     t: mul(lr, mh), q: quot(t, d), w': add(q, 0).
// Coefficients: fl64 then fl_dt of 1 - b (a subtraction: no tiny) gives
// ec = (u + 2^-53 + u 2^-53) |c|; p^ = b^t by t - 1 products in double is
// within gamma53_(t-1) p + (t - 1) 2^-1075 of b^t (underflow), and bc^ =
// fl_dt(fl64(1 - p^)) within |p^ - p| + (u + 2^-53 + u 2^-53)(|bc| + |p^ - p|).
// The exact values are computed in MPFR (a chain of at most 10 ops); MPFR's
// own error and the doubles used for |x| in the bounds add
// 2^(8 - prec) (|w| + |q|) (or the state's terms), as elsewhere.
static double e_mul(const fmt *f, double c, double ec, double x, double ex)
{
    const double d = c * ex + ec * (x + ex);
    return d + f->u * (c * x + d) + f->tiny;
}

static double e_add(const fmt *f, double ex, double ey, double s)
{
    return ex + ey + f->u * (s + ex + ey);
}

// No finite bound when Ey >= y: 0 then (the element must be exact).
static double e_div(const fmt *f, double x, double ex, double y, double ey)
{
    if (!(ey < y)) return 0;
    const double q = x / y, d = (ex + q * ey) / (y - ey);
    return d + f->u * (q + d) + f->tiny;
}

static double e_sqrt(const fmt *f, double x, double ex)
{
    const double r = sqrt(x), d = r > 0 ? fmin(ex / r, sqrt(ex)) : sqrt(ex);
    return d + f->u * (r + d) + f->tiny;
}

// w->us[0] = b m + c g (c exact in mc, NULL: 1), from dtype values m, g.
static void state_first(ws *w, double b, double m, mpfr_srcptr mc, mpfr_srcptr g)
{
    if (mc)
        mpfr_mul(w->ua, mc, g, MPFR_RNDN);
    else
        mpfr_set(w->ua, g, MPFR_RNDN);
    mpfr_set_d(w->us[0], m, MPFR_RNDN);
    mpfr_mul_d(w->us[0], w->us[0], b, MPFR_RNDN);
    mpfr_add(w->us[0], w->us[0], w->ua, MPFR_RNDN);
}

void chk_update_check(const ctx *c, ws *w, size_t p, size_t flat, mpfr_srcptr ge, chk_tensor *tw,
                      chk_tensor *ts)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const fmt *f = &c->f;
    const double lr = st->lr, g = par_get_real(dt, st->g, p), wv = par_get_real(dt, st->w, p);
    const double wn = par_get_real(dt, st->w_new, p);
    const int local = ge == NULL;
    if (c->opt == PAR_OPTIM_SGD) {
        double b = c->eb ? c->eb->w_new[p] : NAN;
        if (local) {
            b = chk_update_bound(c, w, g, wv);
        } else {
            mpfr_mul_d(w->y, ge, lr, MPFR_RNDN);
            mpfr_d_sub(w->y, wv, w->y, MPFR_RNDN);
        }
        chk_record(tw, w, flat, w->y, wn, f, b);
        return;
    }
    const double m = par_get_real(dt, st->s[0], p), mn = par_get_real(dt, st->s_new[0], p);
    const double v = c->n_state > 1 ? par_get_real(dt, st->s[1], p) : 0;
    const double vn = c->n_state > 1 ? par_get_real(dt, st->s_new[1], p) : 0;
    const double mp = ldexp(1, 8 - c->prec);
    if (local) {   // the exact gradient is the run's own
        mpfr_set_d(w->q, g, MPFR_RNDN);
        ge = w->q;
    }
    // The new state (LOCAL and END-TO-END alike, from ge).
    double bs[2] = {NAN, NAN};
    for (int i = 0; c->eb && !local && i < c->n_state; i++) bs[i] = c->eb->s_new[i][p];
    if (c->opt != PAR_OPTIM_ADAM) {
        state_first(w, c->mu, m, NULL, ge);   // m' = mu m + g
        if (local) {
            const double x1 = fabs(c->mu * m);
            const double am = fabs(mpfr_get_d(w->us[0], MPFR_RNDN));
            bs[0] = e_add(f, e_mul(f, c->mu, 0, fabs(m), 0), 0, am) +
                    mp * (x1 + fabs(g));
        }
    } else {
        state_first(w, c->b1, m, c->mc1, ge);   // m' = b1 m + c1 g
        mpfr_mul(w->ua, c->mc2, ge, MPFR_RNDN); // v' = b2 v + (c2 g) g
        mpfr_mul(w->ua, w->ua, ge, MPFR_RNDN);
        mpfr_set_d(w->us[1], v, MPFR_RNDN);
        mpfr_mul_d(w->us[1], w->us[1], c->b2, MPFR_RNDN);
        mpfr_add(w->us[1], w->us[1], w->ua, MPFR_RNDN);
        if (local) {
            const double ag = fabs(g), am = fabs(mpfr_get_d(w->us[0], MPFR_RNDN));
            const double av = fabs(mpfr_get_d(w->us[1], MPFR_RNDN));
            const double e1 = e_mul(f, c->b1, 0, fabs(m), 0), e2 = e_mul(f, c->dc1, c->ec1, ag, 0);
            bs[0] = e_add(f, e1, e2, am) + mp * (c->b1 * fabs(m) + c->dc1 * ag);
            const double e3 = e_mul(f, c->b2, 0, fabs(v), 0), e4 = e_mul(f, c->dc2, c->ec2, ag, 0);
            const double e5 = e_mul(f, ag, 0, c->dc2 * ag, e4);
            bs[1] = e_add(f, e3, e5, av) + mp * (c->b2 * fabs(v) + c->dc2 * ag * ag);
        }
    }
    for (int i = 0; i < c->n_state; i++)
        chk_record(&ts[i], w, flat, w->us[i], i ? vn : mn, f, bs[i]);
    // The new weight: LOCAL from the run's new state, END-TO-END from the exact one.
    if (local) {
        mpfr_set_d(w->us[0], mn, MPFR_RNDN);
        if (c->n_state > 1) mpfr_set_d(w->us[1], vn, MPFR_RNDN);
    }
    double bw = c->eb && !local ? c->eb->w_new[p] : NAN;
    if (c->opt == PAR_OPTIM_MOMENTUM) {   // w' = w - lr m'
        mpfr_mul_d(w->y, w->us[0], lr, MPFR_RNDN);
        mpfr_d_sub(w->y, wv, w->y, MPFR_RNDN);
        if (local) bw = chk_update_bound(c, w, mn, wv);   // leaves the same w->y
    } else if (c->opt == PAR_OPTIM_NESTEROV) {   // w' = w - lr (g + mu m')
        mpfr_mul_d(w->ua, w->us[0], c->mu, MPFR_RNDN);
        mpfr_add(w->ua, w->ua, ge, MPFR_RNDN);
        const double x2 = fabs(mpfr_get_d(w->ua, MPFR_RNDN));
        mpfr_mul_d(w->ua, w->ua, lr, MPFR_RNDN);
        mpfr_d_sub(w->y, wv, w->ua, MPFR_RNDN);
        if (local) {
            const double e2 = e_add(f, e_mul(f, c->mu, 0, fabs(mn), 0), 0, x2);
            const double e3 = e_mul(f, lr, 0, x2, e2);
            bw = e_add(f, e3, 0, fabs(mpfr_get_d(w->y, MPFR_RNDN))) + mp * (fabs(wv) + lr * x2);
        }
    } else {   // w' = w - lr (m'/bc1) / (sqrt(v'/bc2) + eps)
        mpfr_div(w->ua, w->us[0], c->mbc1, MPFR_RNDN);   // mh
        const double mh = fabs(mpfr_get_d(w->ua, MPFR_RNDN));
        mpfr_div(w->us[1], w->us[1], c->mbc2, MPFR_RNDN);   // vh
        const double vh = mpfr_get_d(w->us[1], MPFR_RNDN);
        mpfr_sqrt(w->us[1], w->us[1], MPFR_RNDN);
        mpfr_add_d(w->us[1], w->us[1], c->eps, MPFR_RNDN);   // d
        const double d = mpfr_get_d(w->us[1], MPFR_RNDN);
        mpfr_mul_d(w->ua, w->ua, lr, MPFR_RNDN);
        mpfr_div(w->ua, w->ua, w->us[1], MPFR_RNDN);   // q
        const double q = fabs(mpfr_get_d(w->ua, MPFR_RNDN));
        mpfr_d_sub(w->y, wv, w->ua, MPFR_RNDN);
        if (local) {
            const double emh = e_div(f, fabs(mn), 0, c->dbc1, c->ebc1);
            const double evh = e_div(f, fabs(vn), 0, c->dbc2, c->ebc2);
            const double ed = e_add(f, e_sqrt(f, vh, evh), 0, d);
            const double et = e_mul(f, lr, 0, mh, emh);
            const double eq = e_div(f, lr * mh, et, d, ed);
            bw = e_add(f, eq, 0, fabs(mpfr_get_d(w->y, MPFR_RNDN))) + mp * (fabs(wv) + q);
        }
    }
    chk_record(tw, w, flat, w->y, wn, f, bw);
}


// The optimizer's coefficients (derivation at chk_update_check): the
// dtype-rounded hyperparameters, the exact c1, c2, bc1, bc2 and the bounds
// on the run's roundings of them.
void chk_update_consts(ctx *c)
{
    const chk_step *st = c->st;
    const double u = c->f.u, r = u + 0x1p-53 + u * 0x1p-53;   // fl64 then fl_dt
    c->mu = par_round_real(c->dt, st->optim.momentum);
    c->b1 = par_round_real(c->dt, st->optim.beta1);
    c->b2 = par_round_real(c->dt, st->optim.beta2);
    c->eps = par_round_real(c->dt, st->optim.eps);
    mpfr_inits2(c->prec, c->mc1, c->mc2, c->mbc1, c->mbc2, (mpfr_ptr)0);
    const long t = st->opt_t > 0 ? st->opt_t : 1;
    const double g53 = (double)(t - 1) * 0x1p-53 / (1 - (double)(t - 1) * 0x1p-53);
    mpfr_ptr mc[2] = {c->mc1, c->mc2}, mbc[2] = {c->mbc1, c->mbc2};
    const double b[2] = {c->b1, c->b2};
    double *dc[2] = {&c->dc1, &c->dc2}, *ec[2] = {&c->ec1, &c->ec2};
    double *dbc[2] = {&c->dbc1, &c->dbc2}, *ebc[2] = {&c->ebc1, &c->ebc2};
    for (int k = 0; k < 2; k++) {
        mpfr_set_d(mc[k], b[k], MPFR_RNDN);
        mpfr_ui_sub(mc[k], 1, mc[k], MPFR_RNDN);
        *dc[k] = mpfr_get_d(mc[k], MPFR_RNDN);
        *ec[k] = r * *dc[k];
        mpfr_set_d(mbc[k], b[k], MPFR_RNDN);
        mpfr_pow_si(mbc[k], mbc[k], t, MPFR_RNDN);
        const double p = mpfr_get_d(mbc[k], MPFR_RNDN) * (1 + 0x1p-52);
        mpfr_ui_sub(mbc[k], 1, mbc[k], MPFR_RNDN);
        *dbc[k] = mpfr_get_d(mbc[k], MPFR_RNDN);
        const double ep = g53 * p + (double)(t - 1) * 0x1p-1074;
        *ebc[k] = ep + r * (*dbc[k] + ep);
    }
}

void chk_update_consts_clear(ctx *c) { mpfr_clears(c->mc1, c->mc2, c->mbc1, c->mbc2, (mpfr_ptr)0); }
