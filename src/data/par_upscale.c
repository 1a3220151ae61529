// --upscale S: bilinear resampling of every image to S x S, once at load time,
// in double, rounded once to the run's dtype (formula in par_data.h), so every
// trainer, thread count and rank count sees the same inputs bit for bit. Not
// an image library: no antialiasing when S is smaller than the source.
// Tests: tests/unit/test_cifar.c (ctest -R test_cifar).
#include "par_data.h"

#include <stdlib.h>
#include <string.h>

// Source indices and weights along one axis of N pixels, for S outputs.
static void axis(size_t S, size_t N, size_t *i0, size_t *i1, double *f)
{
    for (size_t o = 0; o < S; o++) {
        double s = ((double)o + 0.5) * (double)N / (double)S - 0.5;
        if (s < 0) s = 0;
        if (s > (double)(N - 1)) s = (double)(N - 1);
        size_t a = (size_t)s;   // floor, s >= 0
        if (a > N - 1) a = N - 1;
        i0[o] = a;
        i1[o] = a + 1 < N ? a + 1 : a;
        f[o] = s - (double)a;
    }
}

par_status par_images_upscale(par_images *im, size_t S, par_dtype dt)
{
    PAR_FAIL_IF(S < 1 || S > 1024, PAR_ERR_CONFIG, "--upscale %zu: expected a side of 1..1024",
                S);
    PAR_FAIL_IF(!im->pixels || im->values, PAR_ERR_CONFIG,
                "--upscale %zu: the images were already resampled", S);
    const size_t H = im->height, W = im->width, C = im->channels, n = im->n;
    const size_t sz = par_dtype_size(dt), nf = C * S * S;
    PAR_FAIL_IF(H < 1 || W < 1 || C < 1 || H * W * C != im->n_features, PAR_ERR_CONFIG,
                "--upscale: images of %zu x %zu x %zu do not match %zu features", H, W, C,
                im->n_features);
    PAR_FAIL_IF(n > 0 && nf > SIZE_MAX / sz / n, PAR_ERR_ALLOC,
                "--upscale %zu: %zu records of %zu features overflow the address space", S, n,
                nf);
    size_t *ix = malloc(4 * S * sizeof *ix);
    double *fw = malloc((2 * S + H * S) * sizeof *fw);
    void *val = malloc(n * nf * sz > 0 ? n * nf * sz : 1);
    if (!ix || !fw || !val) {
        free(ix);
        free(fw);
        free(val);
        return par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__,
                             "--upscale %zu: out of memory for %zu records of %zu features "
                             "(%.1f GB)", S, n, nf, (double)(n * nf * sz) / 1e9);
    }
    size_t *x0 = ix, *x1 = ix + S, *y0 = ix + 2 * S, *y1 = ix + 3 * S;
    double *fx = fw, *fy = fw + S, *h = fw + 2 * S;
    axis(S, W, x0, x1, fx);
    axis(S, H, y0, y1, fy);
    for (size_t r = 0; r < n; r++) {
        for (size_t c = 0; c < C; c++) {
            const uint8_t *p = im->pixels + r * H * W * C + c * H * W;
            // h[j][x] = (1 - fx) * p00 + fx * p01 along source row j: "top" for
            // the output rows with y0 = j, "bot" for those with y1 = j.
            for (size_t j = 0; j < H; j++)
                for (size_t x = 0; x < S; x++)
                    h[j * S + x] = (1 - fx[x]) * p[j * W + x0[x]] + fx[x] * p[j * W + x1[x]];
            const size_t base = r * nf + c * S * S;
            for (size_t y = 0; y < S; y++) {
                const double *top = h + y0[y] * S, *bot = h + y1[y] * S, a = 1 - fy[y], b = fy[y];
                if (dt == PAR_F64) {
                    double *out = (double *)val + base + y * S;
                    for (size_t x = 0; x < S; x++) out[x] = (a * top[x] + b * bot[x]) / 255.0;
                } else {
                    float *out = (float *)val + base + y * S;
                    for (size_t x = 0; x < S; x++)
                        out[x] = (float)((a * top[x] + b * bot[x]) / 255.0);
                }
            }
        }
    }
    free(ix);
    free(fw);
    free(im->pixels);
    im->pixels = NULL;
    im->values = val;
    im->values_dt = dt;
    im->upscale = S;
    im->height = im->width = S;
    im->n_features = nf;
    return PAR_OK;
}

par_status par_dataset_upscale(par_dataset *ds, size_t S, par_dtype dt)
{
    PAR_TRY(par_images_upscale(&ds->train, S, dt));
    return par_images_upscale(&ds->test, S, dt);
}

const void *par_images_bytes(const par_images *im, size_t *n_bytes)
{
    if (im->values) {
        *n_bytes = im->n * im->n_features * par_dtype_size(im->values_dt);
        return im->values;
    }
    *n_bytes = im->n * im->n_features;
    return im->pixels;
}
