// Batchnorm in the MPFR step check (chk_step.c has the error model and the
// other layers). Per channel c of batchnorm layer l, over the N = B P values
// x[s][c][q] of its input (P = h w positions), the run computes, each op
// rounded once (src/train/layer_bn_impl.inc, reference/ref_impl.inc):
//   S = the chunk-folded sum of x;  mean = S / N;  d = x - mean;
//   Q = the chunk-folded fma(d, d, .);  var = Q / N;  inv = 1 / sqrt(var + eps);
//   xh = d * inv;  y = act(fma(xh, gamma, beta));
//   rm' = k rm + m mean;  rv' = k rv + m (Q / (N - 1))  (var when N = 1);  count + 1;
//   backward: G = dgamma = the chunk-folded fma(dz, xh, .), D = dbeta = the
//   chunk-folded dz + .;  a = gamma inv; a = a / N; t = N dz; t = t - D;
//   v = xh G; t = t - v; dx = a t.
// N, N - 1, eps, m and k = 1 - m are the run's dtype values. LOCAL checks
// every step from the run's own rounded inputs (its S, mean, Q, var, inv, G,
// D, captured): the four batch sums against the order-free reduction bound,
// everything else against the bound of its few correctly rounded ops,
// derived at each function below. So a statistic one ulp off fails the row
// of that statistic, and a reordered fold, which some order of the terms
// could give, passes LOCAL and fails the bitwise CONTRACT rows. END-TO-END
// propagates exact values (true N) from the layer's exact input.
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "chk_bn.h"
#include "chk_update.h"

size_t chk_bn_rounds(const par_layer *ly, size_t B, size_t C)
{
    if (C == 0 || C > B) C = B;
    return C * ly->h_out * ly->w_out + (B + C - 1) / C - 1;
}

// A batchnorm layer's shapes and the run's constants (dtype values).
typedef struct bn_k {
    size_t nc, P, N, n_red;
    double Nf, Nm1, eps, mom, keep;
    size_t w_off, b_off, rm_off, rv_off, cnt_off; // gamma, beta, the running statistics
} bn_k;

static bn_k bn_consts(const ctx *c, int l)
{
    const par_layer *ly = &c->m->layers[l];
    const par_view *v = c->m->views;
    bn_k k = {.nc = ly->c_out, .P = ly->h_out * ly->w_out};
    k.N = c->B * k.P;
    k.n_red = chk_bn_rounds(ly, c->B, c->st->C);
    // as layer_bn_impl.inc: N, eps, m rounded once; N - 1 and 1 - m in the dtype
    if (c->dt == PAR_F32) {
        const float N = (float)k.N, mom = (float)PAR_BN_MOMENTUM;
        k.Nf = N;
        k.Nm1 = (float)(N - 1);
        k.eps = (float)PAR_BN_EPS;
        k.mom = mom;
        k.keep = (float)(1 - mom);
    } else {
        const double N = (double)k.N, mom = PAR_BN_MOMENTUM;
        k.Nf = N;
        k.Nm1 = N - 1;
        k.eps = PAR_BN_EPS;
        k.mom = mom;
        k.keep = 1 - mom;
    }
    k.w_off = v[ly->w_view].offset;
    k.b_off = v[ly->b_view].offset;
    k.rm_off = v[ly->stat_view].offset;
    k.rv_off = v[ly->stat_view + 1].offset;
    k.cnt_off = v[ly->stat_view + 2].offset;
    return k;
}

// Flat index of x[s][ch][q] in a (B, nc, P) tensor.
static size_t ix(const bn_k *k, size_t s, size_t ch, size_t q)
{
    return (s * k->nc + ch) * k->P + q;
}

// The run's statistic k (CHK_BN_*) of channel ch.
static double stat(const ctx *c, int l, int k, size_t ch)
{
    return par_get_real(c->dt, c->st->bn[l], (size_t)k * c->m->layers[l].c_out + ch);
}

// w->va = the N values of channel ch of the run's (B, nc, P) tensor t.
static void gather_channel(const ctx *c, ws *w, const bn_k *k, const void *t, size_t ch)
{
    const size_t sz = par_dtype_size(c->dt);
    for (size_t s = 0; s < c->B; s++)
        memcpy((char *)w->va + s * k->P * sz, (const char *)t + ix(k, s, ch, 0) * sz, k->P * sz);
}

// One correctly rounded op whose exact result is x: within half an ulp of
// the run's format at |x| (the ulp of x's own binade: x rounded toward zero
// never leaves it; subnormal spacing below), plus MPFR's error on x.
static double bound_cr(const ctx *c, mpfr_srcptr x)
{
    const double a = fabs(mpfr_get_d(x, MPFR_RNDZ));
    return 0.5 * chk_ulp_of(a, c->dt) + ldexp(a, 8 - c->prec);
}

// Per-thread partials of rows t[0..n) (NULL rows: none), and their merge.
static void blank_rows(chk_tensor *p, chk_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = t[i] ? chk_tensor_blank(t[i]) : (chk_tensor){0};
}

static void merge_rows(chk_tensor *const *t, const chk_tensor *p, int n)
{
#pragma omp critical(chk_merge)
    for (int i = 0; i < n; i++)
        if (t[i]) chk_tensor_merge(t[i], &p[i]);
}

// ---- forward ----------------------------------------------------------------------

// LOCAL statistics of channel ch into p[CHK_BN_*], each from the run's own
// inputs of its step:
//   S: a reduction of the N values x (chk_bound_dot, n = n_red: the chunk
//     chains and the fold of the chunks, in any order of the chunks);
//   mean = fl(S_run / N), var = fl(Q_run / N): one correctly rounded
//     division each (bound_cr: half an ulp);
//   Q: its terms are d = fl(x - mean_run) = (x - mean_run)(1 + e), |e| <= u
//     (a subtraction: no underflow term), summed by fma chains and the fold,
//     where a term goes through at most n roundings:
//       |Q_run - sum d^2| <= gamma_n sum d^2 + max(n, N) tiny,
//       sum d^2 <= (1 + u)^2 Q',  |sum d^2 - Q'| <= (2u + u^2) Q',
//     Q' = sum (x - mean_run)^2, which is also the sum of |terms| (all >= 0).
//     Q' = 0: every d is 0 and Q_run must be 0 (bound 0).
//   inv = fl(1 / fl(sqrt(fl(var_run + eps)))): nothing underflows (var + eps
//     >= eps), so inv = I (1 + e1)^(-1/2) (1 + e2)^(-1) (1 + e3), |ei| <= u,
//     I = 1 / sqrt(var_run + eps), and |inv - I| <= ((1 + u)(1 - u)^(-3/2) - 1) I
//     = (2.5u + 3.375u^2 + O(u^3)) I <= (2.5u + 4u^2) I.
static void stats_local(const ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    const par_dtype dt = c->dt;
    const double u = c->f.u, tiny = c->f.tiny;
    gather_channel(c, w, k, c->st->a[l], ch);
    const double aS = chk_dot_run(w, dt, w->va, 1, NULL, 0, k->N, 0);
    chk_record(&p[CHK_BN_S], w, ch, w->acc, stat(c, l, CHK_BN_S, ch), &c->f,
               chk_bound_dot(&c->f, dt, k->n_red, k->N, aS, c->prec));

    mpfr_set_d(w->y, stat(c, l, CHK_BN_S, ch), MPFR_RNDN);
    mpfr_div_d(w->y, w->y, k->Nf, MPFR_RNDN);
    chk_record(&p[CHK_BN_MEAN], w, ch, w->y, stat(c, l, CHK_BN_MEAN, ch), &c->f, bound_cr(c, w->y));

    const double mean = stat(c, l, CHK_BN_MEAN, ch);
    mpfr_set_zero(w->acc, 1);
    for (size_t i = 0; i < k->N; i++) {
        mpfr_set_d(w->q, par_get_real(dt, w->va, i), MPFR_RNDN);
        mpfr_sub_d(w->q, w->q, mean, MPFR_RNDN);
        mpfr_sqr(w->q, w->q, MPFR_RNDN);
        mpfr_add(w->acc, w->acc, w->q, MPFR_RNDN);
    }
    const double Qp = mpfr_get_d(w->acc, MPFR_RNDU), g = chk_gamma(k->n_red, dt);
    const double mx = (double)(k->n_red > k->N ? k->n_red : k->N);
    const double bQ = Qp == 0 ? 0
                              : (g * (1 + u) * (1 + u) + 2 * u + u * u) * Qp + mx * tiny +
                                    (double)(k->N + 4) * ldexp(Qp, 1 - c->prec);
    chk_record(&p[CHK_BN_Q], w, ch, w->acc, stat(c, l, CHK_BN_Q, ch), &c->f, bQ);

    mpfr_set_d(w->y, stat(c, l, CHK_BN_Q, ch), MPFR_RNDN);
    mpfr_div_d(w->y, w->y, k->Nf, MPFR_RNDN);
    chk_record(&p[CHK_BN_VAR], w, ch, w->y, stat(c, l, CHK_BN_VAR, ch), &c->f, bound_cr(c, w->y));

    mpfr_set_d(w->y, stat(c, l, CHK_BN_VAR, ch), MPFR_RNDN);
    mpfr_add_d(w->y, w->y, k->eps, MPFR_RNDN);
    mpfr_rec_sqrt(w->y, w->y, MPFR_RNDN);
    const double I = fabs(mpfr_get_d(w->y, MPFR_RNDU));
    chk_record(&p[CHK_BN_INV], w, ch, w->y, stat(c, l, CHK_BN_INV, ch), &c->f,
               (2.5 * u + 4 * u * u) * I + ldexp(I, 8 - c->prec));
}

// END-TO-END statistics of channel ch from the exact input c->ea[l] (true
// N), kept in c->ebn[l]; compared with the run's (no verdict).
static void stats_e2e(ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    mpfr_t *e = c->ebn[l], *x = c->ea[l];
    const size_t nc = k->nc;
    mpfr_ptr S = e[CHK_BN_S * nc + ch], mean = e[CHK_BN_MEAN * nc + ch];
    mpfr_ptr Q = e[CHK_BN_Q * nc + ch], var = e[CHK_BN_VAR * nc + ch];
    mpfr_ptr inv = e[CHK_BN_INV * nc + ch];
    mpfr_set_zero(S, 1);
    mpfr_set_zero(Q, 1);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++)
            mpfr_add(S, S, x[ix(k, s, ch, q)], MPFR_RNDN);
    mpfr_div_ui(mean, S, (unsigned long)k->N, MPFR_RNDN);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            mpfr_sub(w->q, x[ix(k, s, ch, q)], mean, MPFR_RNDN);
            mpfr_sqr(w->q, w->q, MPFR_RNDN);
            mpfr_add(Q, Q, w->q, MPFR_RNDN);
        }
    mpfr_div_ui(var, Q, (unsigned long)k->N, MPFR_RNDN);
    mpfr_add_d(inv, var, k->eps, MPFR_RNDN);
    mpfr_rec_sqrt(inv, inv, MPFR_RNDN);
    for (int j = 0; j < CHK_BN_N; j++)
        chk_record(&p[j], w, ch, e[j * nc + ch], stat(c, l, j, ch), &c->f, NAN);
}

// LOCAL outputs of channel ch, from the run's x, mean and inv: X = (x -
// mean) inv and Y = gamma X + beta exactly. The run's d = fl(x - mean) =
// (x - mean)(1 + e1) and xh = fl(d inv) = d inv (1 + e2) + t2 (|t2| <= tiny:
// the product may underflow), so |xh - X| <= Ex = (2u + u^2)|X| + tiny; the
// fma rounds once: |fma(xh, gamma, beta) - Y| <= Ez = |gamma| Ex + u (|Y| +
// |gamma| Ex) + tiny. Then the activation as in chk_step.c's stage_forward:
// relu, none: Ez; tanh, sigmoid (Lipschitz L = 1, 1/4): L Ez + 2u (|act(Y)|
// + L Ez) + 2 tiny.
static void out_local(const ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    const chk_step *st = c->st;
    const par_act act = c->m->layers[l].act;
    const double u = c->f.u, tiny = c->f.tiny, L = act == PAR_ACT_SIGMOID ? 0.25 : 1.0;
    const double mean = stat(c, l, CHK_BN_MEAN, ch), inv = stat(c, l, CHK_BN_INV, ch);
    const double gam = par_get_real(c->dt, st->w, k->w_off + ch),
                 bet = par_get_real(c->dt, st->w, k->b_off + ch);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            const size_t i = ix(k, s, ch, q);
            mpfr_set_d(w->q, par_get_real(c->dt, st->a[l], i), MPFR_RNDN);
            mpfr_sub_d(w->q, w->q, mean, MPFR_RNDN);
            mpfr_mul_d(w->q, w->q, inv, MPFR_RNDN);
            const double X = fabs(mpfr_get_d(w->q, MPFR_RNDU));
            mpfr_mul_d(w->acc, w->q, gam, MPFR_RNDN);
            mpfr_add_d(w->acc, w->acc, bet, MPFR_RNDN);
            const double Y = fabs(mpfr_get_d(w->acc, MPFR_RNDU));
            chk_act_mp(w, w->y, w->acc, act);
            const double Ex = (2 * u + u * u) * X + tiny;
            const double Ez = fabs(gam) * Ex + u * (Y + fabs(gam) * Ex) + tiny;
            double b = Ez;
            if (act == PAR_ACT_SIGMOID || act == PAR_ACT_TANH) {
                const double y = fabs(mpfr_get_d(w->y, MPFR_RNDU));
                b = L * Ez + 2 * u * (y + L * Ez) + 2 * tiny + ldexp(y, 8 - c->prec);
            }
            b += ldexp(X * fabs(gam) + fabs(bet) + Y, 8 - c->prec);
            chk_record(p, w, i, w->y, par_get_real(c->dt, st->a[l + 1], i), &c->f, b);
        }
}

// END-TO-END outputs of channel ch: act(gamma (x - mean) inv + beta) from the
// exact x and statistics, into c->ea[l + 1].
static void out_e2e(ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    const chk_step *st = c->st;
    mpfr_ptr mean = c->ebn[l][CHK_BN_MEAN * k->nc + ch], inv = c->ebn[l][CHK_BN_INV * k->nc + ch];
    const double gam = par_get_real(c->dt, st->w, k->w_off + ch),
                 bet = par_get_real(c->dt, st->w, k->b_off + ch);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            const size_t i = ix(k, s, ch, q);
            mpfr_sub(w->q, c->ea[l][i], mean, MPFR_RNDN);
            mpfr_mul(w->q, w->q, inv, MPFR_RNDN);
            mpfr_mul_d(w->acc, w->q, gam, MPFR_RNDN);
            mpfr_add_d(w->acc, w->acc, bet, MPFR_RNDN);
            chk_act_mp(w, c->ea[l + 1][i], w->acc, c->m->layers[l].act);
            chk_record(p, w, i, c->ea[l + 1][i], par_get_real(c->dt, st->a[l + 1], i), &c->f, NAN);
        }
}

void chk_bn_forward(ctx *c, ws *w, int l)
{
    const bn_k k = bn_consts(c, l);
    enum { R = CHK_BN_N + 1 }; // the statistics, then layer l's output
    chk_tensor *rows[2][R], p[2][R];
    for (int v = 0; v < 2; v++) {
        for (int j = 0; j < CHK_BN_N; j++)
            rows[v][j] = c->bst[v][l][j];
        rows[v][CHK_BN_N] = c->out[v][l];
        blank_rows(p[v], rows[v], R);
    }
#pragma omp for schedule(dynamic, 1)
    for (size_t ch = 0; ch < k.nc; ch++) {
        stats_local(c, w, l, &k, ch, p[0]);
        out_local(c, w, l, &k, ch, &p[0][CHK_BN_N]);
        if (!c->e2e) continue;
        stats_e2e(c, w, l, &k, ch, p[1]);
        out_e2e(c, w, l, &k, ch, &p[1][CHK_BN_N]);
    }
    merge_rows(rows[0], p[0], R);
    if (c->e2e) merge_rows(rows[1], p[1], R);
}

// ---- backward -----------------------------------------------------------------------

// LOCAL dgamma and dbeta of channel ch (p[0], p[1]), from the run's dz, x,
// mean and inv. dbeta: a reduction of the dz (chk_bound_dot, n = n_red).
// dgamma: the run sums terms dz fl(fl(x - mean) inv) = dz (X (1 + th) + t),
// |th| <= 2u + u^2, |t| <= tiny (out_local), X = (x - mean) inv exact, by
// fma chains and the fold (n roundings a term at most), so with
// A = sum |dz X| and Dz = sum |dz|:
//   |G_run - sum dz X| <= gamma_n (A (1 + 2u + u^2) + Dz tiny)
//                         + (2u + u^2) A + Dz tiny + max(n, N) tiny.
// Every dz 0: each fma returns its addend, G_run = 0 (bound 0).
static void grads_local(const ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const double u = c->f.u, tiny = c->f.tiny;
    const double mean = stat(c, l, CHK_BN_MEAN, ch), inv = stat(c, l, CHK_BN_INV, ch);
    double A = 0, Dz = 0;
    mpfr_set_zero(w->acc, 1);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            const size_t i = ix(k, s, ch, q);
            const double dz = par_get_real(dt, st->d[l], i);
            if (dz == 0) continue;
            mpfr_set_d(w->q, par_get_real(dt, st->a[l], i), MPFR_RNDN);
            mpfr_sub_d(w->q, w->q, mean, MPFR_RNDN);
            mpfr_mul_d(w->q, w->q, inv, MPFR_RNDN);
            mpfr_mul_d(w->q, w->q, dz, MPFR_RNDN);
            mpfr_add(w->acc, w->acc, w->q, MPFR_RNDN);
            A += fabs(mpfr_get_d(w->q, MPFR_RNDU));
            Dz += fabs(dz);
        }
    A *= 1 + (double)(k->N + 2) * 0x1p-52; // its own roundings in double
    Dz *= 1 + (double)(k->N + 2) * 0x1p-52;
    const double g = chk_gamma(k->n_red, dt), t = 2 * u + u * u;
    const double mx = (double)(k->n_red > k->N ? k->n_red : k->N);
    const double bG = Dz == 0 ? 0
                              : g * (A * (1 + t) + Dz * tiny) + t * A + Dz * tiny + mx * tiny +
                                    (double)(k->N + 6) * ldexp(A, 1 - c->prec);
    chk_record(&p[0], w, ch, w->acc, par_get_real(dt, st->g, k->w_off + ch), &c->f, bG);
    gather_channel(c, w, k, st->d[l], ch);
    const double aD = chk_dot_run(w, dt, w->va, 1, NULL, 0, k->N, 0);
    chk_record(&p[1], w, ch, w->acc, par_get_real(dt, st->g, k->b_off + ch), &c->f,
               chk_bound_dot(&c->f, dt, k->n_red, k->N, aD, c->prec));
}

// LOCAL input gradient of channel ch (into p, layer l-1's dz), from the
// run's dz, x, mean, inv, gamma, G and D: exactly DX = A0 T with A0 = gamma
// inv / N and T = N dz - D - X G, X = (x - mean) inv. The run's ops:
//   a = fl(fl(gamma inv) / N):  |a - A0| <= Ea = (2u + u^2)|A0| + 2 tiny;
//   t1 = fl(N dz):              |t1 - N dz| <= e1 = u N |dz| + tiny;
//   t2 = fl(t1 - D):            |t2 - (N dz - D)| <= e2 = e1 + u (|N dz - D| + e1);
//   v = fl(xh G), |xh - X| <= Ex (out_local):
//                               |v - X G| <= ev = |G| Ex + u (|X G| + |G| Ex) + tiny;
//   t3 = fl(t2 - v):            |t3 - T| <= Et = e2 + ev + u (|T| + e2 + ev);
//   dx = fl(a t3):              |dx - DX| <= |A0| Et + Ea (|T| + Et)
//                                            + u (|A0| + Ea)(|T| + Et) + tiny.
// (Subtractions add no underflow term.) Layer l-1 has no activation, so dx
// is its dz.
static void dx_local(const ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p,
                     mpfr_ptr a0)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const double u = c->f.u, tiny = c->f.tiny, t = 2 * u + u * u;
    const double mean = stat(c, l, CHK_BN_MEAN, ch), inv = stat(c, l, CHK_BN_INV, ch);
    const double gam = par_get_real(dt, st->w, k->w_off + ch);
    const double G = par_get_real(dt, st->g, k->w_off + ch),
                 D = par_get_real(dt, st->g, k->b_off + ch);
    mpfr_set_d(a0, gam, MPFR_RNDN);
    mpfr_mul_d(a0, a0, inv, MPFR_RNDN);
    mpfr_div_d(a0, a0, k->Nf, MPFR_RNDN);
    const double aA = fabs(mpfr_get_d(a0, MPFR_RNDU)), Ea = t * aA + 2 * tiny;
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            const size_t i = ix(k, s, ch, q);
            const double dz = par_get_real(dt, st->d[l], i), ndz = fabs(k->Nf * dz);
            mpfr_set_d(w->q, par_get_real(dt, st->a[l], i), MPFR_RNDN);
            mpfr_sub_d(w->q, w->q, mean, MPFR_RNDN);
            mpfr_mul_d(w->q, w->q, inv, MPFR_RNDN); // X
            const double X = fabs(mpfr_get_d(w->q, MPFR_RNDU));
            mpfr_set_d(w->acc, dz, MPFR_RNDN);
            mpfr_mul_d(w->acc, w->acc, k->Nf, MPFR_RNDN);
            mpfr_sub_d(w->acc, w->acc, D, MPFR_RNDN); // N dz - D
            const double nD = fabs(mpfr_get_d(w->acc, MPFR_RNDU));
            mpfr_mul_d(w->q, w->q, G, MPFR_RNDN);
            mpfr_sub(w->acc, w->acc, w->q, MPFR_RNDN); // T
            const double T = fabs(mpfr_get_d(w->acc, MPFR_RNDU));
            mpfr_mul(w->y, w->acc, a0, MPFR_RNDN);
            const double Ex = t * X + tiny, e1 = u * ndz + tiny, e2 = e1 + u * (nD + e1);
            const double ev = fabs(G) * Ex + u * (X * fabs(G) + fabs(G) * Ex) + tiny;
            const double Et = e2 + ev + u * (T + e2 + ev);
            const double b = aA * Et + Ea * (T + Et) + u * (aA + Ea) * (T + Et) + tiny +
                             ldexp(aA * (ndz + fabs(D) + X * fabs(G)), 8 - c->prec);
            chk_record(p, w, i, w->y, par_get_real(dt, st->d[l - 1], i), &c->f, b);
        }
}

// END-TO-END dgamma, dbeta (kept in c->ebn[l]) and input gradient (into
// c->ed[l - 1]) of channel ch, from the exact dz c->ed[l], x and statistics.
static void back_e2e(ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p, mpfr_ptr a0)
{
    const chk_step *st = c->st;
    const size_t nc = k->nc;
    mpfr_ptr mean = c->ebn[l][CHK_BN_MEAN * nc + ch], inv = c->ebn[l][CHK_BN_INV * nc + ch];
    mpfr_ptr G = c->ebn[l][5 * nc + ch], D = c->ebn[l][6 * nc + ch];
    mpfr_set_zero(G, 1);
    mpfr_set_zero(D, 1);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            const size_t i = ix(k, s, ch, q);
            mpfr_sub(w->q, c->ea[l][i], mean, MPFR_RNDN);
            mpfr_mul(w->q, w->q, inv, MPFR_RNDN);
            mpfr_fma(G, c->ed[l][i], w->q, G, MPFR_RNDN);
            mpfr_add(D, D, c->ed[l][i], MPFR_RNDN);
        }
    chk_record(&p[0], w, ch, G, par_get_real(c->dt, st->g, k->w_off + ch), &c->f, NAN);
    chk_record(&p[1], w, ch, D, par_get_real(c->dt, st->g, k->b_off + ch), &c->f, NAN);
    mpfr_mul_d(a0, inv, par_get_real(c->dt, st->w, k->w_off + ch), MPFR_RNDN);
    mpfr_div_ui(a0, a0, (unsigned long)k->N, MPFR_RNDN);
    for (size_t s = 0; s < c->B; s++)
        for (size_t q = 0; q < k->P; q++) {
            const size_t i = ix(k, s, ch, q);
            mpfr_sub(w->q, c->ea[l][i], mean, MPFR_RNDN);
            mpfr_mul(w->q, w->q, inv, MPFR_RNDN);
            mpfr_mul(w->q, w->q, G, MPFR_RNDN);
            mpfr_mul_ui(w->acc, c->ed[l][i], (unsigned long)k->N, MPFR_RNDN);
            mpfr_sub(w->acc, w->acc, D, MPFR_RNDN);
            mpfr_sub(w->acc, w->acc, w->q, MPFR_RNDN);
            mpfr_mul(c->ed[l - 1][i], w->acc, a0, MPFR_RNDN);
            chk_record(&p[2], w, i, c->ed[l - 1][i], par_get_real(c->dt, st->d[l - 1], i), &c->f,
                       NAN);
        }
}

void chk_bn_backward(ctx *c, ws *w, int l)
{
    const bn_k k = bn_consts(c, l);
    chk_tensor *rows[2][3], p[2][3]; // dgamma, dbeta, layer l-1's dz
    for (int v = 0; v < 2; v++) {
        rows[v][0] = c->gw[v][l];
        rows[v][1] = c->gb[v][l];
        rows[v][2] = c->dz[v][l - 1];
        blank_rows(p[v], rows[v], 3);
    }
    mpfr_t a0;
    mpfr_init2(a0, c->prec);
#pragma omp for schedule(dynamic, 1)
    for (size_t ch = 0; ch < k.nc; ch++) {
        grads_local(c, w, l, &k, ch, p[0]);
        dx_local(c, w, l, &k, ch, &p[0][2], a0);
        if (c->e2e) back_e2e(c, w, l, &k, ch, p[1], a0);
    }
    mpfr_clear(a0);
    merge_rows(rows[0], p[0], 3);
    if (c->e2e) merge_rows(rows[1], p[1], 3);
}

// ---- update -----------------------------------------------------------------------

// LOCAL running statistics of channel ch after the step (p[0], p[1]), from
// the run's old values and its mean, Q (var when N = 1):
//   rm' = fl(fl(k rm) + fl(m mean)): exactly RM = k rm + m mean;
//     |rm' - RM| <= u (|k rm| + |m mean|) + 2 tiny
//                   + u (|RM| + u (|k rm| + |m mean|) + 2 tiny);
//   rv' = fl(fl(k rv) + fl(m vu)), vu = fl(Q / (N - 1)): exactly RV = k rv
//     + m VU, VU = Q / (N - 1) (vu = VU = var when N = 1: eq = 0);
//     |fl(m vu) - m VU| <= eq2 = eq + u (|m VU| + eq) + tiny, eq = m (u |VU| + tiny);
//     |rv' - RV| <= ep + eq2 + u (|RV| + ep + eq2), ep = u |k rv| + tiny.
// The SGD step after it subtracts fl(lr 0) = 0: no change. And
// num_batches_tracked + 1: one correctly rounded addition.
static void stats_update(const ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const double u = c->f.u, tiny = c->f.tiny, mp = ldexp(1.0, 8 - c->prec);
    const double rm = par_get_real(dt, st->w, k->rm_off + ch),
                 rv = par_get_real(dt, st->w, k->rv_off + ch);
    mpfr_set_d(w->y, rm, MPFR_RNDN);
    mpfr_mul_d(w->y, w->y, k->keep, MPFR_RNDN);
    mpfr_set_d(w->q, stat(c, l, CHK_BN_MEAN, ch), MPFR_RNDN);
    mpfr_mul_d(w->q, w->q, k->mom, MPFR_RNDN);
    const double pk = fabs(k->keep * rm), pm = fabs(mpfr_get_d(w->q, MPFR_RNDU));
    mpfr_add(w->y, w->y, w->q, MPFR_RNDN);
    const double RM = fabs(mpfr_get_d(w->y, MPFR_RNDU));
    const double bm =
        u * (pk + pm) + 2 * tiny + u * (RM + u * (pk + pm) + 2 * tiny) + mp * (pk + pm + RM);
    chk_record(&p[0], w, ch, w->y, par_get_real(dt, st->w_new, k->rm_off + ch), &c->f, bm);

    const int many = k->N > 1;
    mpfr_set_d(w->q, stat(c, l, many ? CHK_BN_Q : CHK_BN_VAR, ch), MPFR_RNDN);
    if (many) mpfr_div_d(w->q, w->q, k->Nm1, MPFR_RNDN);
    const double VU = fabs(mpfr_get_d(w->q, MPFR_RNDU));
    mpfr_mul_d(w->q, w->q, k->mom, MPFR_RNDN);
    mpfr_set_d(w->y, rv, MPFR_RNDN);
    mpfr_mul_d(w->y, w->y, k->keep, MPFR_RNDN);
    mpfr_add(w->y, w->y, w->q, MPFR_RNDN);
    const double RV = fabs(mpfr_get_d(w->y, MPFR_RNDU));
    const double eq = many ? k->mom * (u * VU + tiny) : 0;
    const double eq2 = eq + u * (k->mom * VU + eq) + tiny, ep = u * fabs(k->keep * rv) + tiny;
    const double bv = ep + eq2 + u * (RV + ep + eq2) + mp * (fabs(k->keep * rv) + VU + RV);
    chk_record(&p[1], w, ch, w->y, par_get_real(dt, st->w_new, k->rv_off + ch), &c->f, bv);
    if (ch != 0) return;
    mpfr_set_d(w->y, par_get_real(dt, st->w, k->cnt_off), MPFR_RNDN);
    mpfr_add_ui(w->y, w->y, 1, MPFR_RNDN);
    chk_record(&p[2], w, 0, w->y, par_get_real(dt, st->w_new, k->cnt_off), &c->f,
               bound_cr(c, w->y));
}

// END-TO-END running statistics: from the exact mean and Q (true N - 1).
static void stats_update_e2e(ctx *c, ws *w, int l, const bn_k *k, size_t ch, chk_tensor *p)
{
    const chk_step *st = c->st;
    const par_dtype dt = c->dt;
    const size_t nc = k->nc;
    mpfr_mul_d(w->y, c->ebn[l][CHK_BN_MEAN * nc + ch], k->mom, MPFR_RNDN);
    mpfr_set_d(w->q, par_get_real(dt, st->w, k->rm_off + ch), MPFR_RNDN);
    mpfr_mul_d(w->q, w->q, k->keep, MPFR_RNDN);
    mpfr_add(w->y, w->y, w->q, MPFR_RNDN);
    chk_record(&p[0], w, ch, w->y, par_get_real(dt, st->w_new, k->rm_off + ch), &c->f, NAN);
    if (k->N > 1)
        mpfr_div_ui(w->y, c->ebn[l][CHK_BN_Q * nc + ch], (unsigned long)(k->N - 1), MPFR_RNDN);
    else
        mpfr_set(w->y, c->ebn[l][CHK_BN_VAR * nc + ch], MPFR_RNDN);
    mpfr_mul_d(w->y, w->y, k->mom, MPFR_RNDN);
    mpfr_set_d(w->q, par_get_real(dt, st->w, k->rv_off + ch), MPFR_RNDN);
    mpfr_mul_d(w->q, w->q, k->keep, MPFR_RNDN);
    mpfr_add(w->y, w->y, w->q, MPFR_RNDN);
    chk_record(&p[1], w, ch, w->y, par_get_real(dt, st->w_new, k->rv_off + ch), &c->f, NAN);
    if (ch != 0) return;
    mpfr_set_d(w->y, par_get_real(dt, st->w, k->cnt_off), MPFR_RNDN);
    mpfr_add_ui(w->y, w->y, 1, MPFR_RNDN);
    chk_record(&p[2], w, 0, w->y, par_get_real(dt, st->w_new, k->cnt_off), &c->f, NAN);
}

// gamma and beta after the optimizer step (LOCAL: from the run's own
// gradient and state, the bounds of chk_update_check; END-TO-END: from the
// exact dgamma, dbeta), then the running statistics.
void chk_bn_update(ctx *c, ws *w, int l)
{
    const bn_k k = bn_consts(c, l);
    // weight.new, bias.new, running_mean, running_var, count, then the
    // optimizer's new state of gamma (n_state rows) and of beta
    enum { R = 9 };
    chk_tensor *rows[2][R], p[2][R];
    const int nr = 5 + 2 * c->n_state;
    for (int v = 0; v < 2; v++) {
        rows[v][0] = c->nw[v][l];
        rows[v][1] = c->nb[v][l];
        for (int j = 0; j < 3; j++)
            rows[v][2 + j] = c->brs[v][l][j];
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < c->n_state; i++) rows[v][5 + j * c->n_state + i] = c->ns[v][l][j][i];
        blank_rows(p[v], rows[v], nr);
    }
#pragma omp for schedule(dynamic, 1)
    for (size_t ch = 0; ch < k.nc; ch++) {
        for (int j = 0; j < 2; j++) {
            const size_t o = (j ? k.b_off : k.w_off) + ch;
            chk_update_check(c, w, o, ch, NULL, &p[0][j], &p[0][5 + j * c->n_state]);
            if (!c->e2e) continue;
            chk_update_check(c, w, o, ch, c->ebn[l][(5 + (size_t)j) * k.nc + ch], &p[1][j],
                             &p[1][5 + j * c->n_state]);
        }
        stats_update(c, w, l, &k, ch, &p[0][2]);
        if (c->e2e) stats_update_e2e(c, w, l, &k, ch, &p[1][2]);
    }
    merge_rows(rows[0], p[0], nr);
    if (c->e2e) merge_rows(rows[1], p[1], nr);
}
