// libFuzzer: .npz/.npy reading (par_npz_read, par_weights_load). Byte 0:
// even: the rest is the .npz file itself; odd: the rest is one .npy member
// "layer0.weight.npy" of a stored zip made here (reaches the .npy header
// parser past the zip layer). Run: ci/fuzz.sh.
#include <zip.h>

#include "fuzz_common.h"
#include "par_model.h"
#include "par_npz.h"

static par_model model;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (par_model_parse(&model, "mlp:3-2", PAR_ACT_RELU) != PAR_OK) abort();
    return 0;
}

static const char *as_member(const uint8_t *data, size_t n)
{
    const char *path = fuzz_file("npz", (const uint8_t *)"", 0);
    unlink(path);
    int err = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!za) abort();
    // libzip does not free a zero-length buffer it was told to free.
    void *copy = n ? malloc(n) : NULL;
    if (n && !copy) abort();
    if (n) memcpy(copy, data, n);
    zip_source_t *src = zip_source_buffer(za, copy, n, n > 0);
    zip_int64_t i = src ? zip_file_add(za, "layer0.weight.npy", src, 0) : -1;
    if (i < 0 || zip_set_file_compression(za, (zip_uint64_t)i, ZIP_CM_STORE, 0) != 0 ||
        zip_close(za) != 0)
        abort();
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *path = data[0] & 1 ? as_member(data + 1, size - 1)
                                   : fuzz_file("npz", data + 1, size - 1);
    par_npz z;
    if (par_npz_read(&z, path) == PAR_OK) {
        for (size_t i = 0; i < z.n; i++) {
            const par_array *a = &z.arrays[i];
            size_t es = a->dtype == PAR_F64 ? 8 : 4;
            if (a->count) {
                volatile char sink = ((const char *)a->data)[a->count * es - 1];
                (void)sink;
            }
        }
        par_npz_free(&z);
    }
    float w[8];
    (void)par_weights_load(path, &model, PAR_F32, w);
    return 0;
}
