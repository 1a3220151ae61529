// Internal to verify/bisect/bis_*.c: one step's tensors as seen by the replay of
// `parity bisect`, and the exact value (MPFR) of one element of one of them
// from the step's inputs, with the verdict which of two values is closer.
// Not a checker: one element, no bounds (chk_check.h is the checker).
#ifndef BIS_EXACT_H
#define BIS_EXACT_H

#include "bis_bisect.h"

typedef enum bis_kind {
    BIS_OUT,          // layer l's output after the activation, (B, n_out)
    BIS_LOSS_SAMPLE,  // per-sample loss, (B)
    BIS_DZ,           // dL/d(pre-activation) of layer l, (B, n_out)
    BIS_WGRAD_CHUNK,  // weight gradient of one chunk, (n_out, n_in)
    BIS_BGRAD_CHUNK,  // bias gradient of one chunk, (n_out)
    BIS_WGRAD,        // folded weight gradient, (n_out, n_in)
    BIS_BGRAD,        // folded bias gradient, (n_out)
    BIS_LOSS,         // the batch mean loss, (1)
    BIS_WNEW,         // new weights, (n_out, n_in)
    BIS_BNEW,         // new biases, (n_out)
} bis_kind;

// Borrowed pointers to the tensors of one step (elements of dt).
typedef struct bis_step_view {
    const par_model *m;
    par_dtype dt;
    size_t B, C;
    double lr;                              // as the run uses it (rounded to dt)
    const int32_t *labels;                  // (B)
    const void *w;                          // weights before the step
    const void *a[PAR_MAX_LAYERS + 1];      // a[0] the batch, a[l+1] layer l's output
    const void *d[PAR_MAX_LAYERS];          // d[l] layer l's dz
    const void *loss_s;                     // (B) per-sample losses
    const void *g;                          // the folded gradient
} bis_step_view;

// The exact value of element `index` of tensor (kind, layer, chunk) computed
// at prec bits from the inputs of that tensor in v (for a forward output:
// bias + sum x W, then the activation; a delta: the formulas of
// par_kernels.h; a gradient: the sum over the samples of dz x; a new
// weight: w - lr g), and the verdict: which of a, b is closer to it.
void bis_exact_verdict(const bis_step_view *v, bis_kind kind, int layer, size_t chunk,
                       size_t index, double a, double b, int prec, double *exact,
                       bis_closer *closer);

#endif
