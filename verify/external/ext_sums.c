// The sums of a dense or conv2d layer in double (ext_sums.h): forward, input
// gradient, weight and bias gradient. Each takes `absw`: |W| (and |b|) for a
// bound, W for a value. Not contract arithmetic: the order is free (the
// callers bound the rounding of double), so the loops run on every thread
// and in vectors. A conv layer goes through its columns (im2col of one
// sample: P rows of c_in K K taps, padding 0), after which every sum is a
// dense one over contiguous rows.
#include "ext_sums.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The columns of sample xs: col[p][k], k = (ci, kh, kw), 0 for padding.
static void im2col(const par_layer *ly, double *col, const double *xs)
{
    const size_t K = ly->K, KK = ly->c_in * K * K;
    for (size_t oh = 0; oh < ly->h_out; oh++)
        for (size_t ow = 0; ow < ly->w_out; ow++) {
            double *row = col + (oh * ly->w_out + ow) * KK;
            for (size_t ci = 0; ci < ly->c_in; ci++)
                for (size_t kh = 0; kh < K; kh++)
                    for (size_t kw = 0; kw < K; kw++) {
                        const long iy = (long)(oh * ly->stride + kh) - (long)ly->pad;
                        const long ix = (long)(ow * ly->stride + kw) - (long)ly->pad;
                        const int in = iy >= 0 && ix >= 0 && iy < (long)ly->h_in &&
                                       ix < (long)ly->w_in;
                        *row++ = in ? xs[(ci * ly->h_in + (size_t)iy) * ly->w_in + (size_t)ix]
                                    : 0;
                    }
        }
}

// dxs[tap] += dcol[p][k] for every (p, k): col2im, adding.
static void col2im(const par_layer *ly, double *dxs, const double *dcol)
{
    const size_t K = ly->K;
    for (size_t oh = 0; oh < ly->h_out; oh++)
        for (size_t ow = 0; ow < ly->w_out; ow++) {
            const double *row = dcol + (oh * ly->w_out + ow) * ly->c_in * K * K;
            for (size_t ci = 0; ci < ly->c_in; ci++)
                for (size_t kh = 0; kh < K; kh++)
                    for (size_t kw = 0; kw < K; kw++, row++) {
                        const long iy = (long)(oh * ly->stride + kh) - (long)ly->pad;
                        const long ix = (long)(ow * ly->stride + kw) - (long)ly->pad;
                        if (iy >= 0 && ix >= 0 && iy < (long)ly->h_in && ix < (long)ly->w_in)
                            dxs[(ci * ly->h_in + (size_t)iy) * ly->w_in + (size_t)ix] += *row;
                    }
        }
}

// A conv layer as rows: P positions of KK taps per sample.
static size_t positions(const par_layer *ly) { return ly->h_out * ly->w_out; }

static size_t row_len(const par_layer *ly) { return ly->c_in * ly->K * ly->K; }

static double dot(const double *w, const double *x, size_t n, int absw)
{
    double acc = 0;
    if (absw) {
#pragma omp simd reduction(+ : acc)
        for (size_t i = 0; i < n; i++) acc += fabs(w[i]) * x[i];
    } else {
#pragma omp simd reduction(+ : acc)
        for (size_t i = 0; i < n; i++) acc += w[i] * x[i];
    }
    return acc;
}

static void axpy(double *y, const double *w, double a, size_t n, int absw)
{
    if (absw) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] += fabs(w[i]) * a;
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] += w[i] * a;
    }
}

// Dense layers as blocks of 4 outputs x 4 samples (a tail of either takes
// the one-at-a-time loops): a wide layer's weights are then read once for 4
// samples and its inputs once for 4 outputs, which is what bounds the time.
enum { BLK = 4 };

static double wt(double w, int absw) { return absw ? fabs(w) : w; }

// y[s][co] for s in [s0, s0 + 4), co in [c0, c0 + 4).
static void dense_fwd_tile(const par_layer *ly, double *y, const double *x, const double *W,
                           size_t s0, size_t c0, int absw)
{
    const size_t n = ly->n_in;
    const double *x0 = x + s0 * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
    double acc[BLK][BLK];
    for (size_t c = 0; c < BLK; c++) {
        const double *w = W + (c0 + c) * n;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (absw) {
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (size_t i = 0; i < n; i++) {
                const double v = fabs(w[i]);
                a0 += v * x0[i], a1 += v * x1[i], a2 += v * x2[i], a3 += v * x3[i];
            }
        } else {
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (size_t i = 0; i < n; i++)
                a0 += w[i] * x0[i], a1 += w[i] * x1[i], a2 += w[i] * x2[i], a3 += w[i] * x3[i];
        }
        acc[c][0] = a0, acc[c][1] = a1, acc[c][2] = a2, acc[c][3] = a3;
    }
    for (size_t k = 0; k < BLK; k++)
        for (size_t c = 0; c < BLK; c++) y[(s0 + k) * ly->n_out + c0 + c] += acc[c][k];
}

static void dense_fwd(const par_layer *ly, double *y, const double *x, const double *W,
                      const double *bias, size_t B, int absw)
{
    const size_t n = ly->n_in, m = ly->n_out, sb = B / BLK * BLK, cb = m / BLK * BLK;
    for (size_t s = 0; s < B; s++)
        for (size_t co = 0; co < m; co++) y[s * m + co] = bias ? wt(bias[co], absw) : 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t co = 0; co < m; co += BLK)
        for (size_t s = 0; s < B; s += BLK) {
            if (co < cb && s < sb) {
                dense_fwd_tile(ly, y, x, W, s, co, absw);
                continue;
            }
            for (size_t c = co; c < m && c < co + BLK; c++)
                for (size_t k = s; k < B && k < s + BLK; k++)
                    y[k * m + c] += dot(W + c * n, x + k * n, n, absw);
        }
}

// dx[s][i] = sum over co of dz[s][co] W[co][i], 4 samples at a time.
static void dense_bwd(const par_layer *ly, double *dx, const double *dz, const double *W,
                      size_t B, int absw)
{
    const size_t n = ly->n_in, m = ly->n_out;
    memset(dx, 0, B * n * sizeof *dx);
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t s = 0; s < B; s += BLK) {
        if (s + BLK > B) {
            for (size_t k = s; k < B; k++)
                for (size_t co = 0; co < m; co++)
                    if (dz[k * m + co] != 0) axpy(dx + k * n, W + co * n, dz[k * m + co], n, absw);
            continue;
        }
        double *d0 = dx + s * n, *d1 = d0 + n, *d2 = d1 + n, *d3 = d2 + n;
        for (size_t co = 0; co < m; co++) {
            const double *w = W + co * n, *z = dz + s * m + co;
            const double z0 = z[0], z1 = z[m], z2 = z[2 * m], z3 = z[3 * m];
            if (z0 == 0 && z1 == 0 && z2 == 0 && z3 == 0) continue;
#pragma omp simd
            for (size_t i = 0; i < n; i++) {
                const double v = wt(w[i], absw);
                d0[i] += z0 * v, d1[i] += z1 * v, d2[i] += z2 * v, d3[i] += z3 * v;
            }
        }
    }
}

// g[co][i] += sum over s of dz[s][co] x[s][i]: 4 rows a thread, 4 samples
// into them at a time; gb[co] += sum over s of dz[s][co].
static void dense_grad(const par_layer *ly, double *g, double *gb, const double *dz,
                       const double *x, size_t B)
{
    const size_t n = ly->n_in, m = ly->n_out, sb = B / BLK * BLK;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t co = 0; co < m; co += BLK) {
        const size_t nc = co + BLK <= m ? BLK : m - co;
        for (size_t c = co; c < co + nc; c++)
            for (size_t s = 0; s < B; s++) gb[c] += dz[s * m + c];
        for (size_t s = 0; s < B; s++) {   // the tails: one row and one sample at a time
            if (nc == BLK && s < sb) continue;
            for (size_t c = co; c < co + nc; c++)
                if (dz[s * m + c] != 0) axpy(g + c * n, x + s * n, dz[s * m + c], n, 0);
        }
        if (nc < BLK) continue;
        double *g0 = g + co * n, *g1 = g0 + n, *g2 = g1 + n, *g3 = g2 + n;
        for (size_t s = 0; s < sb; s += BLK) {
            const double *x0 = x + s * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
            const double *z = dz + s * m + co;
            const double a0 = z[0], a1 = z[m], a2 = z[2 * m], a3 = z[3 * m];
            const double b0 = z[1], b1 = z[m + 1], b2 = z[2 * m + 1], b3 = z[3 * m + 1];
            const double c0 = z[2], c1 = z[m + 2], c2 = z[2 * m + 2], c3 = z[3 * m + 2];
            const double d0 = z[3], d1 = z[m + 3], d2 = z[2 * m + 3], d3 = z[3 * m + 3];
#pragma omp simd
            for (size_t i = 0; i < n; i++) {
                const double v0 = x0[i], v1 = x1[i], v2 = x2[i], v3 = x3[i];
                g0[i] += a0 * v0 + a1 * v1 + a2 * v2 + a3 * v3;
                g1[i] += b0 * v0 + b1 * v1 + b2 * v2 + b3 * v3;
                g2[i] += c0 * v0 + c1 * v1 + c2 * v2 + c3 * v3;
                g3[i] += d0 * v0 + d1 * v1 + d2 * v2 + d3 * v3;
            }
        }
    }
}

// A conv layer's columns for B samples (B P KK doubles), or NULL.
static double *columns(const par_layer *ly, size_t B)
{
    return malloc(B * positions(ly) * row_len(ly) * sizeof(double));
}

par_status ext_conv_fwd(const par_layer *ly, double *y, const double *x, const double *W,
                        const double *bias, size_t B, int absw)
{
    if (ly->kind == PAR_LAYER_DENSE) {
        dense_fwd(ly, y, x, W, bias, B, absw);
        return PAR_OK;
    }
    const size_t P = positions(ly), KK = row_len(ly);
    double *cols = columns(ly, B);
    PAR_FAIL_IF(!cols, PAR_ERR_ALLOC, "out of memory");
#pragma omp parallel for schedule(static)
    for (size_t s = 0; s < B; s++) {
        double *col = cols + s * P * KK;
        im2col(ly, col, x + s * ly->n_in);
        for (size_t co = 0; co < ly->c_out; co++)
            for (size_t p = 0; p < P; p++)
                y[s * ly->n_out + co * P + p] = (bias ? (absw ? fabs(bias[co]) : bias[co]) : 0) +
                                                dot(W + co * KK, col + p * KK, KK, absw);
    }
    free(cols);
    return PAR_OK;
}

par_status ext_conv_bwd(const par_layer *ly, double *dx, const double *dz, const double *W,
                        size_t B, int absw)
{
    if (ly->kind == PAR_LAYER_DENSE) {
        dense_bwd(ly, dx, dz, W, B, absw);
        return PAR_OK;
    }
    const size_t P = positions(ly), KK = row_len(ly);
    double *dcols = columns(ly, B);
    PAR_FAIL_IF(!dcols, PAR_ERR_ALLOC, "out of memory");
#pragma omp parallel for schedule(static)
    for (size_t s = 0; s < B; s++) {
        double *dcol = dcols + s * P * KK, *dxs = dx + s * ly->n_in;
        memset(dcol, 0, P * KK * sizeof *dcol);
        for (size_t co = 0; co < ly->c_out; co++)
            for (size_t p = 0; p < P; p++) {
                const double d = dz[s * ly->n_out + co * P + p];
                if (d != 0) axpy(dcol + p * KK, W + co * KK, d, KK, absw);
            }
        memset(dxs, 0, ly->n_in * sizeof *dxs);
        col2im(ly, dxs, dcol);
    }
    free(dcols);
    return PAR_OK;
}

par_status ext_conv_grad(const par_layer *ly, double *g, double *gb, const double *dz,
                         const double *x, size_t B)
{
    if (ly->kind == PAR_LAYER_DENSE) {
        dense_grad(ly, g, gb, dz, x, B);
        return PAR_OK;
    }
    const size_t P = positions(ly), KK = row_len(ly);
    double *cols = columns(ly, B);
    PAR_FAIL_IF(!cols, PAR_ERR_ALLOC, "out of memory");
#pragma omp parallel for schedule(static)
    for (size_t s = 0; s < B; s++) im2col(ly, cols + s * P * KK, x + s * ly->n_in);
    const double *rows = cols;
    // One output channel's row a thread: no two threads write one element.
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t co = 0; co < ly->c_out; co++)
        for (size_t s = 0; s < B; s++)
            for (size_t p = 0; p < P; p++) {
                const double d = dz[s * ly->n_out + co * P + p];
                gb[co] += d;
                if (d != 0) axpy(g + co * KK, rows + (s * P + p) * KK, d, KK, 0);
            }
    free(cols);
    return PAR_OK;
}
