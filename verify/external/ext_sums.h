// The sums of a dense or conv2d layer in double, for the any-order bound
// (ext_bound.c) and the checks of a trainer's own intermediates
// (ext_local.c); PAR_ERR_ALLOC when a conv's columns do not fit in memory.
// Shapes as par_layer says: x (B, n_in), y and dz (B, n_out),
// W (c_out, c_in, K, K), b (c_out); zero padding. Tests: test_ext_bound.
#ifndef EXT_SUMS_H
#define EXT_SUMS_H

#include <stddef.h>

#include "par_model.h"
#include "par_status.h"

// y[s][co][p] = b[co] + sum over (ci, kh, kw) of W x[s][tap] (b NULL: no
// bias); absw: |W| and |b|.
par_status ext_conv_fwd(const par_layer *ly, double *y, const double *x, const double *W,
                  const double *bias, size_t B, int absw);
// dx[s][tap] = sum over the (co, p, kh, kw) reaching it of W dz[s][co][p].
par_status ext_conv_bwd(const par_layer *ly, double *dx, const double *dz, const double *W, size_t B,
                  int absw);
// g[co][ci][kh][kw] += sum_s sum_p dz[s][co][p] x[s][tap]; gb[co] += sum dz.
par_status ext_conv_grad(const par_layer *ly, double *g, double *gb, const double *dz, const double *x,
                   size_t B);

#endif
