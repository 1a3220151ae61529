// The dense layer: y = act(x W^T + b).
//   forward: y[s][o] = b[o], then an fma chain over i ascending (par_dense_forward);
//            threads split the samples (par_engine_own_samples), each computing
//            every output of its samples: no barrier between dense layers; a
//            layer with more outputs than samples splits its rows instead, each
//            thread reading the panel it updated (par_engine_splits_samples).
//   input gradient: dx[s][i] = 0, then an fma chain over o ascending.
//   weight gradient: rows = samples; per chunk an fma chain over its samples
//            ascending, chunks folded left in order (par_dense_backward_weights).
#include "par_layers.h"

static void forward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    const par_engine *e = c->e;
    const int t = c->t, T = c->T;
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const void *b = par_at(e, e->w, m->views[ly->b_view].offset);
    size_t o0 = 0, o1 = ly->n_out;
    if (par_engine_splits_samples(e, l, s1 - s0, T))
        par_engine_own_samples(s0, s1, t, T, &s0, &s1);
    else
        par_engine_own_rows(ly, t, T, &o0, &o1);
    if (s1 <= s0 || o1 <= o0) return;
    KSET(c, forward, e->a[l + 1], e->a[l], e->wt[l], b, s0, s1, o0, o1, ly->n_in, ly->n_out);
    for (size_t s = s0; s < s1; s++)
        PAR_DT_CALL(e->dt, par_act_forward, par_at(e, e->a[l + 1], s * ly->n_out + o0), o1 - o0, ly->act);
}

static void backward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    if (l == 0) return;
    const par_engine *e = c->e;
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const void *W = par_at(e, e->w, m->views[ly->w_view].offset);
    KSET(c, backward_data, e->d[l - 1], e->d[l], W, s0, s1, ly->n_in, ly->n_out);
}

static void weight_grads(const par_layer_ctx *c, int l, const par_grad_range *r)
{
    const par_engine *e = c->e;
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    void *dW = par_at(e, e->g, m->views[ly->w_view].offset);
    void *db = par_at(e, e->g, m->views[ly->b_view].offset);
    const void *x = par_at(e, e->a[l], r->s_base * ly->n_in);
    KSET(c, backward_weights, dW, db, r->dz, x, r->B, r->C, r->c0, r->c1, r->o0, r->o1, ly->n_in,
         ly->n_out, r->cont);
}

const par_layer_ops par_layer_dense = {.name = "dense",
                                       .per_sample = 1,
                                       .forward = forward,
                                       .backward = backward,
                                       .weight_grads = weight_grads};
