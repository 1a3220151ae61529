// The dense layer: y = act(x W^T + b).
//   forward: y[s][o] = b[o], then an fma chain over i ascending (par_dense_forward);
//            threads split the outputs (parameter rows), each for every sample.
//   input gradient: dx[s][i] = 0, then an fma chain over o ascending.
//   weight gradient: rows = samples; per chunk an fma chain over its samples
//            ascending, chunks folded left in order (par_dense_backward_weights).
#include "par_layers.h"

static void forward(par_engine *e, int l, size_t s0, size_t s1, int t, int T)
{
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const void *b = par_at(e, e->w, m->views[ly->b_view].offset);
    size_t o0, o1;
    par_engine_own_rows(ly, t, T, &o0, &o1);
    if (o1 <= o0) return;
    KCALL(e->dt, par_dense_forward, e->a[l + 1], e->a[l], e->wt[l], b, s0, s1, o0, o1, ly->n_in,
          ly->n_out);
    for (size_t s = s0; s < s1; s++)
        KCALL(e->dt, par_act_forward, par_at(e, e->a[l + 1], s * ly->n_out + o0), o1 - o0, ly->act);
    if (par_engine_fault_on(e, PAR_FAULT_HALF_FWD, l))
        for (size_t s = s0; s < s1; s++)
            par_engine_round_to_half(e, e->a[l + 1], s * ly->n_out + o0, s * ly->n_out + o1);
}

static void backward(par_engine *e, int l, size_t s0, size_t s1, int t)
{
    (void)t;
    if (l == 0) return;
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const void *W = par_at(e, e->w, m->views[ly->w_view].offset);
    KCALL(e->dt, par_dense_backward_data, e->d[l - 1], e->d[l], W, s0, s1, ly->n_in, ly->n_out);
}

static void grad_rows(const par_engine *e, int l, const void **dz, const void **x,
                      size_t *per_sample)
{
    *dz = e->d[l];
    *x = e->a[l];
    *per_sample = 1;
}

const par_layer_ops par_layer_dense = {
    .name = "dense", .forward = forward, .backward = backward, .grad_rows = grad_rows};
