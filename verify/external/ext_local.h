// The checks of a trainer's own intermediates (docs/external.md, "What is
// checked"): each op of its step recomputed in double from ITS inputs —
// each layer's output from its own previous output, each output gradient
// from its own next gradient, its weight gradient from its own output
// gradient and inputs, its per-sample losses from its own logits — and held
// to that op's any-order bound alone (gamma_n over the op's |terms|, the
// ulps of its function), so a violation names the layer and the op. Also
// sizes each layer's rounding against an f32 (f64) sequential sum of the
// same op: a narrower arithmetic (TF32, bf16) shows as thousands there.
// Tests: tests/external/test_external.sh.
#ifndef EXT_LOCAL_H
#define EXT_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "ext_bound.h"
#include "par_npz.h"

// The array `name` of z with the given shape and dtype dt, every value
// finite: else PAR_ERR_EXTERNAL with one line naming the step, `file` and
// the array. *out NULL when `optional` and it is not there.
par_status ext_get_array(const par_array **out, const par_npz *z, const char *name, int ndim,
                         const size_t *shape, par_dtype dt, long step, const char *file,
                         int optional);

// One comparison of a check: which tensor and op, its shape (for the
// element's index), the element, the trainer's value, the centre, the bound.
typedef struct ext_cmp {
    const char *tensor, *op;
    int ndim;
    const size_t *shape;
    size_t i;
    double got, centre, bound;
} ext_cmp;

typedef struct ext_local_in {
    const par_model *m;
    par_dtype dt;
    size_t B;
    const void *w;              // the weights the step started from (dt)
    const void *x;              // the batch (B, n_inputs) of dt
    const int32_t *labels;
    const par_npz *inter;       // the trainer's intermediates
    double loss;                // the loss it reported
    const ext_ulps *ulps;
    long step;
    void (*note)(void *ctx, const ext_cmp *c);   // every comparison
    void *ctx;
} ext_local_in;

// The per-layer checks when the intermediates hold layer<l>.out and
// layer<l>.dz (all of them, or none: then *checked = 0 and nothing is
// compared). *sig: the largest ratio over layers of median |out - centre|
// over the trainer's outputs to the same over an f32 (f64) sequential sum,
// its tensor in sig_tensor. PAR_ERR_EXTERNAL for a missing or malformed
// array, PAR_ERR_CONFIG for batchnorm.
par_status ext_local_check(const ext_local_in *in, int *checked, double *sig, char *sig_tensor,
                           size_t sig_n);

#endif
