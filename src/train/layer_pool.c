// The max-pool layer (K x K windows, stride K; no parameters):
//   forward: the first maximum of each window in scan order (kh, then kw).
//   input gradient: each output's gradient goes to that first maximum; every
//            other input gets 0 (windows do not overlap: nothing is summed);
//            the activation derivative of the layer below in the same pass
//            (applies_act: a 2 x 2 window's four elements are written once).
// Threads split samples (par_engine_own_samples).
#include "par_conv.h"
#include "par_layers.h"

static void forward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    const par_engine *e = c->e;
    const par_layer *ly = &e->m->layers[l];
    size_t lo, hi;
    par_engine_own_samples(s0, s1, c->t, c->T, &lo, &hi);
    if (hi > lo) PAR_DT_CALL(e->dt, par_maxpool_forward, e->a[l + 1], e->a[l], ly, lo, hi);
}

static void backward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    const par_engine *e = c->e;
    if (l > 0 && s1 > s0)
        PAR_DT_CALL(e->dt, par_maxpool_backward, e->d[l - 1], e->d[l], e->a[l], &e->m->layers[l],
                    s0, s1, e->m->layers[l - 1].act);
}

const par_layer_ops par_layer_maxpool = {.name = "maxpool",
                                         .per_sample = 1,
                                         .applies_act = 1,
                                         .forward = forward,
                                         .backward = backward,
                                         .weight_grads = NULL};
