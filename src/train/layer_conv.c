// The conv2d layer as an implicit GEMM on the dense kernels (par_conv.h):
//   forward: y[s][co][oh][ow] = b[co], then an fma chain over the taps
//            (ci, kh, kw) ascending, padding taps included with input +0:
//            im2col, par_dense_forward on rows (s, position), then the
//            (position, co) result transposed to (co, position). Threads
//            split samples.
//   input gradient: per row (s, position) and tap, t = 0, an fma chain over
//            co ascending (par_dense_backward_data); then col2im adds each
//            input element's taps in ascending output position, from 0.
//   weight gradient: rows (s, position) in order, so a chunk of C samples is
//            C * positions rows: per chunk one fma chain over its samples and,
//            within a sample, positions ascending; chunks folded left.
#include "par_conv.h"
#include "par_layers.h"

static void forward(par_engine *e, int l, size_t s0, size_t s1, int t, int T)
{
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const size_t n_pos = ly->h_out * ly->w_out;
    size_t lo, hi;
    par_split(s1 - s0, 1, t, T, &lo, &hi);
    lo += s0;
    hi += s0;
    if (hi <= lo) return;
    const void *b = par_at(e, e->w, m->views[ly->b_view].offset);
    KCALL(e->dt, par_im2col, e->col[l], e->a[l], ly, lo, hi);
    KCALL(e->dt, par_dense_forward, e->dzt[l], e->col[l], e->wt[l], b, lo * n_pos, hi * n_pos, 0,
          ly->c_out, ly->row_len, ly->c_out);
    KCALL(e->dt, par_transpose, e->a[l + 1], e->dzt[l], n_pos, ly->c_out, lo, hi);
    KCALL(e->dt, par_act_forward, par_at(e, e->a[l + 1], lo * ly->n_out), (hi - lo) * ly->n_out,
          ly->act);
    if (par_engine_fault_on(e, PAR_FAULT_HALF_FWD, l))
        par_engine_round_to_half(e, e->a[l + 1], lo * ly->n_out, hi * ly->n_out);
}

static void backward(par_engine *e, int l, size_t s0, size_t s1, int t)
{
    const par_model *m = e->m;
    const par_layer *ly = &m->layers[l];
    const size_t n_pos = ly->h_out * ly->w_out;
    // dz as rows (s, position) of c_out values, for the dense kernels.
    KCALL(e->dt, par_transpose, e->dzt[l], e->d[l], ly->c_out, n_pos, s0, s1);
    if (l == 0) return;
    const void *W = par_at(e, e->w, m->views[ly->w_view].offset);
    void *dcol = par_at(e, e->scratch, (size_t)t * e->scratch_elems);
    for (size_t s = s0; s < s1; s++) {
        KCALL(e->dt, par_dense_backward_data, dcol, par_at(e, e->dzt[l], s * n_pos * ly->c_out), W,
              0, n_pos, ly->row_len, ly->c_out);
        KCALL(e->dt, par_col2im, par_at(e, e->d[l - 1], s * ly->n_in), dcol, ly);
    }
}

static void grad_rows(const par_engine *e, int l, const void **dz, const void **x,
                      size_t *per_sample)
{
    const par_layer *ly = &e->m->layers[l];
    *dz = e->dzt[l];
    *x = e->col[l];
    *per_sample = ly->h_out * ly->w_out;
}

const par_layer_ops par_layer_conv2d = {
    .name = "conv2d", .forward = forward, .backward = backward, .grad_rows = grad_rows};
