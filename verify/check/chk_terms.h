// The terms of one element of a layer's sums, as index lists, for the MPFR
// checker (chk_step.c) and bisect's exact verdicts (bis_exact.c): the same
// enumeration serves the run's values and the exact ones. Indices are
// relative to one sample's slice of the tensor (x: n_in values, z and dz:
// n_out) and to the layer's weight view. Not for max-pool (no sums).
#ifndef CHK_TERMS_H
#define CHK_TERMS_H

#include <stddef.h>

#include "par_dtype.h"
#include "par_model.h"

// Most terms any call below writes for layer ly (for chk_grad_terms: per
// sample; the caller multiplies by the samples).
size_t chk_max_terms(const par_layer *ly);

// The n of gamma_n (chk_step.c's error model derives them): the most
// roundings a term goes through in layer ly's forward sums, in its input
// gradient's sums, and in its weight and bias gradients at batch B. 0 for
// max-pool (a copy: no rounding).
size_t chk_forward_rounds(const par_layer *ly);
size_t chk_input_grad_rounds(const par_layer *ly);
size_t chk_grad_rounds(const par_layer *ly, size_t B);

// Pre-activation output j of a sample: z = b[*o] + sum_k x[xi[k]] W[wi[k]]
// (padding taps are left out: their input is +0). Returns the number of
// terms.
size_t chk_forward_terms(const par_layer *ly, size_t j, size_t *xi, size_t *wi, size_t *o);

// Input gradient element i of a sample, before the activation derivative:
// sum_k dz[zi[k]] W[wi[k]]. Returns the number of terms.
size_t chk_input_grad_terms(const par_layer *ly, size_t i, size_t *zi, size_t *wi);

// One sample's terms of weight-gradient element (o, t) of the layer's rows
// (t < row_len), or of bias o (t == row_len): sum_k dz[zi[k]] x[xi[k]]
// (bias: dz[zi[k]] alone, xi unused). Padding taps are left out. Per sample;
// the run sums n_pos terms per sample and B samples.
size_t chk_grad_terms(const par_layer *ly, size_t o, size_t t, size_t *zi, size_t *xi);

// Max-pool output j's window: the index of its top-left input in the
// sample's input; the window's inputs are base + kh w_in + kw, kh, kw < K.
size_t chk_pool_base(const par_layer *ly, size_t j);

// The max-pool output whose window holds input i of a sample, or SIZE_MAX
// when i lies in the rows or columns the windows leave out.
size_t chk_pool_window(const par_layer *ly, size_t i);

// The window of max-pool output j: the index (in the sample's input x, of
// dtype dt) of its first maximum in scan order.
size_t chk_pool_arg(const par_layer *ly, size_t j, const void *x, par_dtype dt);

#endif
