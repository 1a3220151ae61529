// See chk_terms.h. The orders here are enumerations only: the checker's
// bounds hold for any order of the terms.
#include "chk_terms.h"

#include <assert.h>
#include <stdint.h>

size_t chk_max_terms(const par_layer *ly)
{
    const size_t n_pos = ly->h_out * ly->w_out;
    if (ly->kind == PAR_LAYER_DENSE) return ly->n_in > ly->n_out ? ly->n_in : ly->n_out;
    if (ly->kind != PAR_LAYER_CONV2D) return 1;
    const size_t a = ly->row_len, b = ly->c_out * ly->K * ly->K;
    const size_t m = a > b ? a : b;
    return m > n_pos ? m : n_pos;
}

size_t chk_forward_rounds(const par_layer *ly)
{
    // the chain from the bias over every input (conv: every tap, padding included)
    return ly->kind == PAR_LAYER_MAXPOOL ? 0 : ly->row_len + 1;
}

size_t chk_input_grad_rounds(const par_layer *ly)
{
    if (ly->kind == PAR_LAYER_DENSE) return ly->n_out;
    // conv: the chain over c_out, then the additions of at most K K taps
    return ly->kind == PAR_LAYER_CONV2D ? ly->c_out + ly->K * ly->K : 0;
}

size_t chk_grad_rounds(const par_layer *ly, size_t B)
{
    return ly->n_rows ? B * (ly->n_out / ly->n_rows) : 0;   // B x positions (dense: 1)
}

// Input pixel of tap (ci, kh, kw) at output (oh, ow), or 0 when in the padding.
static int tap_pixel(const par_layer *ly, size_t ci, size_t kh, size_t kw, size_t oh, size_t ow,
                     size_t *pix)
{
    const long iy = (long)(oh * ly->stride + kh) - (long)ly->pad;
    const long ix = (long)(ow * ly->stride + kw) - (long)ly->pad;
    if (iy < 0 || ix < 0 || (size_t)iy >= ly->h_in || (size_t)ix >= ly->w_in) return 0;
    *pix = (ci * ly->h_in + (size_t)iy) * ly->w_in + (size_t)ix;
    return 1;
}

size_t chk_forward_terms(const par_layer *ly, size_t j, size_t *xi, size_t *wi, size_t *o)
{
    size_t n = 0;
    if (ly->kind == PAR_LAYER_DENSE) {
        *o = j;
        for (size_t i = 0; i < ly->n_in; i++, n++) {
            xi[n] = i;
            wi[n] = j * ly->n_in + i;
        }
        return n;
    }
    assert(ly->kind == PAR_LAYER_CONV2D);
    const size_t n_pos = ly->h_out * ly->w_out, co = j / n_pos, p = j % n_pos, K = ly->K;
    *o = co;
    for (size_t ci = 0; ci < ly->c_in; ci++)
        for (size_t kh = 0; kh < K; kh++)
            for (size_t kw = 0; kw < K; kw++) {
                size_t pix;
                if (!tap_pixel(ly, ci, kh, kw, p / ly->w_out, p % ly->w_out, &pix)) continue;
                xi[n] = pix;
                wi[n++] = ((co * ly->c_in + ci) * K + kh) * K + kw;
            }
    return n;
}

size_t chk_input_grad_terms(const par_layer *ly, size_t i, size_t *zi, size_t *wi)
{
    size_t n = 0;
    if (ly->kind == PAR_LAYER_DENSE) {
        for (size_t o = 0; o < ly->n_out; o++, n++) {
            zi[n] = o;
            wi[n] = o * ly->n_in + i;
        }
        return n;
    }
    assert(ly->kind == PAR_LAYER_CONV2D);
    // Input element (ci, ih, iw): every output position whose window holds it.
    const size_t K = ly->K, n_pos = ly->h_out * ly->w_out, ci = i / (ly->h_in * ly->w_in);
    const size_t ih = i / ly->w_in % ly->h_in, iw = i % ly->w_in;
    for (size_t oh = 0; oh < ly->h_out; oh++)
        for (size_t ow = 0; ow < ly->w_out; ow++) {
            const long kh = (long)(ih + ly->pad) - (long)(oh * ly->stride);
            const long kw = (long)(iw + ly->pad) - (long)(ow * ly->stride);
            if (kh < 0 || kw < 0 || kh >= (long)K || kw >= (long)K) continue;
            for (size_t co = 0; co < ly->c_out; co++, n++) {
                zi[n] = co * n_pos + oh * ly->w_out + ow;
                wi[n] = ((co * ly->c_in + ci) * K + (size_t)kh) * K + (size_t)kw;
            }
        }
    return n;
}

size_t chk_grad_terms(const par_layer *ly, size_t o, size_t t, size_t *zi, size_t *xi)
{
    if (ly->kind == PAR_LAYER_DENSE) {
        zi[0] = o;
        xi[0] = t;
        return 1;
    }
    assert(ly->kind == PAR_LAYER_CONV2D);
    const size_t K = ly->K, n_pos = ly->h_out * ly->w_out;
    size_t n = 0;
    for (size_t p = 0; p < n_pos; p++) {
        size_t pix = 0;
        if (t < ly->row_len &&
            !tap_pixel(ly, t / (K * K), t / K % K, t % K, p / ly->w_out, p % ly->w_out, &pix))
            continue;
        zi[n] = o * n_pos + p;
        xi[n++] = pix;
    }
    return n;
}

size_t chk_pool_base(const par_layer *ly, size_t j)
{
    const size_t n_pos = ly->h_out * ly->w_out, c = j / n_pos, p = j % n_pos, K = ly->K;
    return (c * ly->h_in + p / ly->w_out * K) * ly->w_in + p % ly->w_out * K;
}

size_t chk_pool_window(const par_layer *ly, size_t i)
{
    const size_t K = ly->K, c = i / (ly->h_in * ly->w_in);
    const size_t oh = i / ly->w_in % ly->h_in / K, ow = i % ly->w_in / K;
    if (oh >= ly->h_out || ow >= ly->w_out) return SIZE_MAX;
    return (c * ly->h_out + oh) * ly->w_out + ow;
}

size_t chk_pool_arg(const par_layer *ly, size_t j, const void *x, par_dtype dt)
{
    const size_t base = chk_pool_base(ly, j);
    size_t arg = base;
    for (size_t kh = 0; kh < ly->K; kh++)
        for (size_t kw = 0; kw < ly->K; kw++)
            if (par_get_real(dt, x, base + kh * ly->w_in + kw) > par_get_real(dt, x, arg))
                arg = base + kh * ly->w_in + kw;
    return arg;
}
