// The sums of a dense or conv2d layer in double, as plain loops (ext_sums.h):
// forward, input gradient, weight and bias gradient. A dense layer is a conv
// of 1 x 1 images with K = 1. Each takes `absw`: |W| (and |b|) for a bound,
// W for a value. Not contract arithmetic: the order is free, the callers
// bound the rounding of double.
#include "ext_sums.h"

#include <math.h>
#include <string.h>

// A dense layer is a conv of 1 x 1 images with K = 1. Each function takes
// `absw`: use |W| (and |b|) for a bound, W for a centre.

// Input element (ci, iy, ix) of a sample for output position (oh, ow) and
// tap (kh, kw); -1 for a padding tap.
static long tap(const par_layer *ly, size_t ci, size_t oh, size_t ow, size_t kh, size_t kw)
{
    const long iy = (long)(oh * ly->stride + kh) - (long)ly->pad;
    const long ix = (long)(ow * ly->stride + kw) - (long)ly->pad;
    if (iy < 0 || ix < 0 || iy >= (long)ly->h_in || ix >= (long)ly->w_in) return -1;
    return (long)((ci * ly->h_in + (size_t)iy) * ly->w_in + (size_t)ix);
}

// y[s][co][p] = b[co] + sum W[co][ci][kh][kw] x[s][tap] (b NULL: no bias).
void ext_conv_fwd(const par_layer *ly, double *y, const double *x, const double *W,
                     const double *bias, size_t B, int absw)
{
    const size_t K = ly->K, P = ly->h_out * ly->w_out;
    for (size_t s = 0; s < B; s++) {
        const double *xs = x + s * ly->n_in;
        for (size_t co = 0; co < ly->c_out; co++)
            for (size_t oh = 0; oh < ly->h_out; oh++)
                for (size_t ow = 0; ow < ly->w_out; ow++) {
                    double acc = bias ? (absw ? fabs(bias[co]) : bias[co]) : 0;
                    for (size_t ci = 0; ci < ly->c_in; ci++)
                        for (size_t kh = 0; kh < K; kh++)
                            for (size_t kw = 0; kw < K; kw++) {
                                const long t = tap(ly, ci, oh, ow, kh, kw);
                                if (t < 0) continue;
                                const double wv = W[((co * ly->c_in + ci) * K + kh) * K + kw];
                                acc += (absw ? fabs(wv) : wv) * xs[t];
                            }
                    y[s * ly->n_out + co * P + oh * ly->w_out + ow] = acc;
                }
    }
}

// dx[s][tap] = sum over (co, p, kh, kw) reaching it of W dz[s][co][p].
void ext_conv_bwd(const par_layer *ly, double *dx, const double *dz, const double *W, size_t B,
                     int absw)
{
    const size_t K = ly->K, P = ly->h_out * ly->w_out;
    memset(dx, 0, B * ly->n_in * sizeof *dx);
    for (size_t s = 0; s < B; s++) {
        double *dxs = dx + s * ly->n_in;
        const double *dzs = dz + s * ly->n_out;
        for (size_t co = 0; co < ly->c_out; co++)
            for (size_t oh = 0; oh < ly->h_out; oh++)
                for (size_t ow = 0; ow < ly->w_out; ow++) {
                    const double d = dzs[co * P + oh * ly->w_out + ow];
                    if (d == 0) continue;
                    for (size_t ci = 0; ci < ly->c_in; ci++)
                        for (size_t kh = 0; kh < K; kh++)
                            for (size_t kw = 0; kw < K; kw++) {
                                const long t = tap(ly, ci, oh, ow, kh, kw);
                                if (t < 0) continue;
                                const double wv = W[((co * ly->c_in + ci) * K + kh) * K + kw];
                                dxs[t] += (absw ? fabs(wv) : wv) * d;
                            }
                }
    }
}

// g[co][ci][kh][kw] += sum_s sum_p dz[s][co][p] x[s][tap]; gb[co] += sum dz.
void ext_conv_grad(const par_layer *ly, double *g, double *gb, const double *dz,
                      const double *x, size_t B)
{
    const size_t K = ly->K, P = ly->h_out * ly->w_out;
    for (size_t s = 0; s < B; s++) {
        const double *dzs = dz + s * ly->n_out, *xs = x + s * ly->n_in;
        for (size_t co = 0; co < ly->c_out; co++)
            for (size_t oh = 0; oh < ly->h_out; oh++)
                for (size_t ow = 0; ow < ly->w_out; ow++) {
                    const double d = dzs[co * P + oh * ly->w_out + ow];
                    gb[co] += d;
                    if (d == 0) continue;
                    double *gr = g + co * ly->row_len;
                    for (size_t ci = 0; ci < ly->c_in; ci++)
                        for (size_t kh = 0; kh < K; kh++)
                            for (size_t kw = 0; kw < K; kw++) {
                                const long t = tap(ly, ci, oh, ow, kh, kw);
                                if (t >= 0) gr[(ci * K + kh) * K + kw] += d * xs[t];
                            }
                }
    }
}
