// The conv2d layer (par_conv.h):
//   forward: y[s][co][oh][ow] = b[co], then an fma chain over the taps
//            (ci, kh, kw) ascending, padding taps included with input +0;
//            stride 1 on the padded sample (conv_forward), others on the
//            sample's im2col rows (par_gemm_acc, then transposed); the
//            activation on each sample's outputs as soon as they are written.
//   input gradient: per output position and tap, t = 0, an fma chain over co
//            ascending; each input element adds its taps' t in ascending
//            output position, from 0: stride 1 on the padded output gradient
//            (conv_dgrad), others through col2im.
//   weight gradient: per chunk one fma chain over its samples ascending and,
//            within a sample, output positions ascending; chunks folded left.
// Threads split samples (forward, input gradient: par_engine_own_samples)
// and output channels (weight gradient). Scratch per thread (par_engine.c):
// one padded sample and the packed weights, or one sample's im2col rows and
// outputs by position, or one sample's padded output gradient and the
// weights by tap, or its tap gradients, or par_conv_backward_weights'
// working space.
#include <string.h>

#include "par_conv.h"
#include "par_layers.h"

static void forward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    const par_engine *e = c->e;
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const size_t n_pos = ly->h_out * ly->w_out;
    size_t lo, hi;
    par_engine_own_samples(s0, s1, c->t, c->T, &lo, &hi);
    if (hi <= lo) return;
    const void *b = par_at(e, e->w, m->views[ly->b_view].offset);
    if (ly->stride == 1) {   // direct: the weights packed, each sample padded, its chains
        void *Wp = par_at(e, c->scratch, par_conv_padded_elems(ly));
        KSET(c, conv_pack, Wp, e->wt[l], ly);
        for (size_t s = lo; s < hi; s++) {
            PAR_DT_CALL(e->dt, par_conv_pad, c->scratch, e->a[l], ly, s);
            void *y = par_at(e, e->a[l + 1], s * ly->n_out);
            KSET(c, conv_forward, y, c->scratch, Wp, b, ly);
            PAR_DT_CALL(e->dt, par_act_forward, y, ly->n_out, ly->act);   // while in cache
        }
    } else {   // on the sample's im2col rows, by position, then transposed
        const size_t ld = par_conv_ldcol(ly);
        void *col = c->scratch;   // one sample's im2col rows: (n_pos, ld)
        void *yT = par_at(e, c->scratch, n_pos * ld);   // its outputs by position: (n_pos, c_out)
        for (size_t s = lo; s < hi; s++) {
            PAR_DT_CALL(e->dt, par_im2col, col, par_at(e, e->a[l], s * ly->n_in), ly);
            PAR_DT_CALL(e->dt, par_fill_rows, yT, b, n_pos, ly->c_out);   // chains from the bias
            KSET(c, gemm_acc, yT, ly->c_out, col, ld, e->wt[l], par_dense_ldwt(ly->c_out), 0,
                 n_pos, ly->c_out, ly->row_len);
            void *y = par_at(e, e->a[l + 1], s * ly->n_out);
            PAR_DT_CALL(e->dt, par_transpose, y, yT, n_pos, ly->c_out);
            PAR_DT_CALL(e->dt, par_act_forward, y, ly->n_out, ly->act);
        }
    }
}

static void backward(const par_layer_ctx *c, int l, size_t s0, size_t s1)
{
    if (l == 0) return;   // the weight gradient reads d[l] as it is
    const par_engine *e = c->e;
    const par_layer *ly = &e->m->layers[l];
    const size_t n_pos = ly->h_out * ly->w_out;
    if (ly->stride == 1) {   // direct, on each sample's padded output gradient
        if (s1 <= s0) return;
        void *Wd = par_at(e, c->scratch, par_conv_dz_elems(ly));   // the weights by tap
        KSET(c, conv_dpack, Wd, par_at(e, e->w, e->m->views[ly->w_view].offset), ly);
        for (size_t s = s0; s < s1; s++) {
            PAR_DT_CALL(e->dt, par_conv_pad_dz, c->scratch, par_at(e, e->d[l], s * ly->n_out), ly);
            KSET(c, conv_dgrad, par_at(e, e->d[l - 1], s * ly->n_in), c->scratch, Wd, ly);
        }
        return;
    }
    void *dcolT = c->scratch;
    for (size_t s = s0; s < s1; s++) {
        memset(dcolT, 0, ly->row_len * n_pos * par_dtype_size(e->dt));
        KSET(c, gemm_acc, dcolT, n_pos, e->wt[l], par_dense_ldwt(ly->c_out),
             par_at(e, e->d[l], s * ly->n_out), n_pos, 0, ly->row_len, n_pos, ly->c_out);
        PAR_DT_CALL(e->dt, par_col2im_t, par_at(e, e->d[l - 1], s * ly->n_in), dcolT, ly);
    }
}

static void weight_grads(const par_layer_ctx *c, int l, const par_grad_range *r)
{
    const par_engine *e = c->e;
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    PAR_DT_CALL(e->dt, par_conv_backward_weights, par_at(e, e->g, m->views[ly->w_view].offset),
          par_at(e, e->g, m->views[ly->b_view].offset), r->dz,
          par_at(e, e->a[l], r->s_base * ly->n_in), ly, r->B, r->C, r->c0, r->c1, r->o0, r->o1,
          r->cont, c->scratch);
}

const par_layer_ops par_layer_conv2d = {.name = "conv2d",
                                        .per_sample = 1,
                                        .forward = forward,
                                        .backward = backward,
                                        .weight_grads = weight_grads};
