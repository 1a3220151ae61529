// Batchnorm's centre and any-order bound (ext_bn.h). The derivation is
// docs/external.md, "Batchnorm"; the notation here is its: per channel N =
// B P values x_i +- Ex_i, u the dtype's unit roundoff, gam(n) = gamma_n(u)
// + gamma_n(2^-53) (the trainer's sums and the centre's), every rounding
// fl(a) = a (1 + d) + e, |d| <= u, |e| <= tiny. Each bound, a sum of
// nonnegative doubles, is multiplied by SLACK for its own evaluation.
#include "ext_bn.h"

#include <math.h>
#include <stdlib.h>

#define SLACK (1 + 0x1p-30)
static const double UD = 0x1p-53;

static double gamma_n(double n, double u) { return n * u / (1 - n * u); }

par_status ext_bn_alloc(ext_bn *s, const par_layer *ly, size_t Bmax)
{
    const size_t nc = ly->c_out, n = Bmax * ly->n_out;
    s->ly = ly;
    s->mean = malloc(6 * nc * sizeof(double));
    s->xh = malloc(2 * n * sizeof(double));
    if (!s->mean || !s->xh) {
        ext_bn_free(s);
        return par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    s->Emean = s->mean + nc;
    s->Q = s->Emean + nc;
    s->EQ = s->Q + nc;
    s->inv = s->EQ + nc;
    s->Einv = s->inv + nc;
    s->Exh = s->xh + n;
    return PAR_OK;
}

void ext_bn_free(ext_bn *s)
{
    free(s->mean);
    free(s->xh);
    s->mean = s->xh = NULL;
}

// Channel c's mean +- Emean: a sum of N terms in any order, then a division
// by N (or a product with 1/N rounded: two roundings):
//   Emean = (sum Ex + gam(N) sum (|x| + Ex)) / N, plus 2 (u + u_d) of what it is.
// Q = sum d^2, d = x - mean: the trainer's d' = d + eta - e, e = mean' -
// mean the same for every element, |eta| <= Eeta = Ex + (u + u_d)(|d| + Ex +
// Emean) (its input's error and the subtraction's rounding). With sum d = 0
// the common shift enters Q only through 2 e sum eta and N e^2:
//   EQ = 2 sum |d| Eeta + 2 Emean |sum d| + sum (Eeta + Emean)^2
//        + gam(N) sum (|d| + Eeta + Emean)^2   (the trainer's sum of squares)
// inv = 1 / sqrt(v), v = Q / N + eps: |v' - v| <= Ev, and by the mean value
// theorem |inv' - inv| <= Ev / 2 vlo^-3/2, vlo the least v' can be; the
// square root and the division add four roundings.
static void channel_stats(ext_bn *s, size_t c, const double *x, const double *Ex)
{
    const par_layer *ly = s->ly;
    const size_t P = ly->h_out * ly->w_out, nc = ly->c_out;
    const double N = (double)(s->B * P), u = s->u, uu = u + UD;
    const double g = gamma_n(N, u) + gamma_n(N, UD);
    double S = 0, A = 0, SE = 0;
    for (size_t b = 0; b < s->B; b++)
        for (size_t q = 0; q < P; q++) {
            const size_t i = (b * nc + c) * P + q;
            S += x[i];
            A += fabs(x[i]) + Ex[i];
            SE += Ex[i];
        }
    const double mean = S / N;
    double Em = (SE + g * A) / N;
    Em = (Em + 2 * uu * (fabs(mean) + Em) + s->tiny) * SLACK;
    double Q = 0, sd = 0, sad = 0, t1 = 0, t2 = 0, t3 = 0;
    for (size_t b = 0; b < s->B; b++)
        for (size_t q = 0; q < P; q++) {
            const size_t i = (b * nc + c) * P + q;
            const double d = x[i] - mean, ad = fabs(d);
            const double Eeta = Ex[i] + uu * (ad + Ex[i] + Em) + s->tiny;
            Q += d * d;
            sd += d;
            sad += ad;
            t1 += ad * Eeta;
            t2 += (Eeta + Em) * (Eeta + Em);
            t3 += (ad + Eeta + Em) * (ad + Eeta + Em);
        }
    // |sum d| of the exact deviations: the centre's own sum, plus its error.
    const double EQ = (2 * t1 + 2 * Em * (fabs(sd) + gamma_n(N, UD) * sad) + t2 + g * t3 +
                       N * s->tiny) * SLACK;
    const double eps = PAR_BN_EPS, var = Q / N;
    const double Evar = EQ / N + 2 * uu * (var + EQ / N) + s->tiny;
    const double v = var + eps, Ev = (Evar + u * eps + uu * (v + Evar)) * SLACK;
    const double vlo = (fmax(var - Evar, 0) + eps) * (1 - 4 * uu);
    const double inv = 1 / sqrt(v), dinv = Ev / 2 / (vlo * sqrt(vlo));
    s->mean[c] = mean;
    s->Emean[c] = Em;
    s->Q[c] = Q;
    s->EQ[c] = EQ;
    s->inv[c] = inv;
    s->Einv[c] = (dinv + 4 * uu * (inv + dinv) + s->tiny) * SLACK;
}

// Per element, with m = |mean| + Emean and I = inv + Einv:
//   xh = d inv,   Exh = (Ex + Emean) I + |d| Einv + 4 (u + u_d)(|x| + Ex + m) I
//   z = gamma xh + beta,  Ez = |gamma| ((Ex + Emean) I + |d| Einv) + 8 (u + u_d) M,
// M = |gamma| I (|x| + Ex + m) + |beta|: every intermediate of either
// arrangement ((x - mean) inv gamma + beta, or x a + (beta - mean a) with a =
// gamma inv) is at most M, and it takes at most six roundings.
void ext_bn_forward(ext_bn *s, const double *x, const double *Ex, double *z, double *Ez)
{
    const par_layer *ly = s->ly;
    const size_t P = ly->h_out * ly->w_out, nc = ly->c_out;
    const double uu = s->u + UD;
    for (size_t c = 0; c < nc; c++) channel_stats(s, c, x, Ex);
    for (size_t b = 0; b < s->B; b++)
        for (size_t c = 0; c < nc; c++) {
            const double mean = s->mean[c], Em = s->Emean[c], inv = s->inv[c];
            const double Einv = s->Einv[c], I = inv + Einv, m = fabs(mean) + Em;
            const double ga = s->gamma[c], be = s->beta[c];
            for (size_t q = 0; q < P; q++) {
                const size_t i = (b * nc + c) * P + q;
                const double d = x[i] - mean, e = (Ex[i] + Em) * I + fabs(d) * Einv;
                const double M = fabs(ga) * I * (fabs(x[i]) + Ex[i] + m) + fabs(be);
                s->xh[i] = d * inv;
                s->Exh[i] = (e + 4 * uu * (fabs(x[i]) + Ex[i] + m) * I + s->tiny) * SLACK;
                z[i] = ga * s->xh[i] + be;
                Ez[i] = (fabs(ga) * e + 8 * uu * M + s->tiny) * SLACK;
            }
        }
}

// rm' = (1 - mo) rm + mo mean, rv' = (1 - mo) rv + mo Q / (N - 1) (Q / N
// when N = 1): the momentum and 1 - mo exact or rounded, two products, a
// sum, the division: six or seven roundings on the sizes they combine.
void ext_bn_running(const ext_bn *s, const double *rm, const double *rv, double *rm_c,
                    double *rm_E, double *rv_c, double *rv_E)
{
    const size_t P = s->ly->h_out * s->ly->w_out;
    const double N = (double)(s->B * P), Nu = N > 1 ? N - 1 : 1;
    const double mo = PAR_BN_MOMENTUM, k = 1 - mo, uu = s->u + UD;
    for (size_t c = 0; c < s->ly->c_out; c++) {
        const double unb = s->Q[c] / Nu, Eunb = s->EQ[c] / Nu;
        rm_c[c] = k * rm[c] + mo * s->mean[c];
        rm_E[c] = (mo * s->Emean[c] + 6 * uu * (k * fabs(rm[c]) + mo * (fabs(s->mean[c]) +
                                                                      s->Emean[c])) +
                   s->tiny) * SLACK;
        rv_c[c] = k * rv[c] + mo * unb;
        rv_E[c] = (mo * Eunb + 7 * uu * (k * fabs(rv[c]) + mo * (unb + Eunb)) + s->tiny) * SLACK;
    }
}

// Per channel, sums of N terms in any order (gam(N) on their |terms|) and
// the errors carried in: db = sum dz, dg = sum dz xh (also as inv sum dz d);
// each then 3 (u + u_d) of itself (a scale such as DDP's 1 / world).
// Per element, T = dz - db / N - xh dg / N and dx = gamma inv T:
//   ET = Edz + Edb / N + (Exh |dg| + (|xh| + Exh) Edg) / N
//   Edx = |gamma| (I ET + Einv |T|) + 10 (u + u_d) M', M' = |gamma| I (|dz| +
//   Edz + (|db| + Edb) / N + (|xh| + Exh)(|dg| + Edg) / N),
// the largest intermediate of any arrangement (parity's, or torch's (dz -
// db / N - d dot inv^2 / N) inv gamma) taking at most eight roundings.
void ext_bn_backward(const ext_bn *s, const double *dz, const double *Edz, double *dg,
                     double *Edg, double *db, double *Edb, double *dx, double *Edx)
{
    const par_layer *ly = s->ly;
    const size_t P = ly->h_out * ly->w_out, nc = ly->c_out;
    const double N = (double)(s->B * P), u = s->u, uu = u + UD;
    const double g = gamma_n(N, u) + gamma_n(N, UD);
    for (size_t c = 0; c < nc; c++) {
        double sb = 0, sg = 0, Ab = 0, Ag = 0, Sb = 0, Sg = 0;
        for (size_t b = 0; b < s->B; b++)
            for (size_t q = 0; q < P; q++) {
                const size_t i = (b * nc + c) * P + q;
                const double XH = fabs(s->xh[i]) + s->Exh[i];
                sb += dz[i];
                sg += dz[i] * s->xh[i];
                Ab += fabs(dz[i]) + Edz[i];
                Ag += (fabs(dz[i]) + Edz[i]) * XH;
                Sb += Edz[i];
                Sg += Edz[i] * XH + fabs(dz[i]) * s->Exh[i];
            }
        const double eb = Sb + g * Ab + N * s->tiny, eg = Sg + g * Ag + N * s->tiny;
        db[c] = sb;
        dg[c] = sg;
        Edb[c] = (eb + 3 * uu * (fabs(sb) + eb)) * SLACK;
        Edg[c] = (eg + 3 * uu * (fabs(sg) + eg)) * SLACK;
    }
    if (!dx) return;
    for (size_t b = 0; b < s->B; b++)
        for (size_t c = 0; c < nc; c++) {
            const double ga = s->gamma[c], inv = s->inv[c], Einv = s->Einv[c];
            const double I = inv + Einv;
            for (size_t q = 0; q < P; q++) {
                const size_t i = (b * nc + c) * P + q;
                const double xh = s->xh[i], Exh = s->Exh[i];
                const double T = dz[i] - db[c] / N - xh * dg[c] / N;
                const double ET = Edz[i] + Edb[c] / N + (Exh * fabs(dg[c]) +
                                                         (fabs(xh) + Exh) * Edg[c]) / N;
                const double M = fabs(ga) * I * (fabs(dz[i]) + Edz[i] + (fabs(db[c]) + Edb[c]) / N +
                                                 (fabs(xh) + Exh) * (fabs(dg[c]) + Edg[c]) / N);
                dx[i] = ga * inv * T;
                Edx[i] = (fabs(ga) * (I * ET + Einv * fabs(T)) + 10 * uu * M + s->tiny) * SLACK;
            }
        }
}
