// Synthetic CIFAR-10 binary files for tests (`parity data make-cifar`): the
// real set is not packaged here. Content is a pure function of (seed, file,
// record, byte) through Philox (definition in par_data.h), with a per-class
// pattern of coloured 8 x 8 blocks over noise, so a model can beat chance.
// Not a model of real CIFAR-10 images. Tests: tests/unit/test_cifar.c.
#define _POSIX_C_SOURCE 200809L
#include "par_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_rng.h"

static const char *const NAMES[6] = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
    "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
};

static void make_record(uint8_t *rec, uint64_t seed, uint32_t k, uint64_t r)
{
    const uint64_t base = r * PAR_CIFAR_RECORD;
    const unsigned label = (unsigned)(par_rng_bits(seed, PAR_RNG_DATA, 100 + k, base) % 10);
    rec[0] = (uint8_t)label;
    for (unsigned f = 0; f < PAR_CIFAR_FEATURES; f++) {
        const unsigned c = f / 1024, y = f % 1024 / 32, x = f % 32;
        const int on = ((y / 8) * 4 + x / 8 + 5 * c) % 10 == label;
        const uint64_t bits = par_rng_bits(seed, PAR_RNG_DATA, 100 + k, base + 1 + f);
        const unsigned noise = (unsigned)(bits >> 57);
        rec[1 + f] = (uint8_t)(noise + (on ? 128u : 0u));
    }
}

par_status par_cifar_make(const char *dir, size_t n_records, uint64_t seed)
{
    PAR_FAIL_IF(n_records < 1 || n_records > 1000000, PAR_ERR_CONFIG,
                "--records %zu: expected 1..1000000", n_records);
    uint8_t rec[PAR_CIFAR_RECORD];
    for (uint32_t k = 0; k < 6; k++) {
        char path[1024];
        int len = snprintf(path, sizeof path, "%s/%s", dir, NAMES[k]);
        PAR_FAIL_IF(len < 0 || (size_t)len >= sizeof path, PAR_ERR_CONFIG, "%s: path too long",
                    dir);
        errno = 0;
        FILE *f = fopen(path, "wb");
        PAR_FAIL_IF(!f, PAR_ERR_IO, "%s: cannot create (%s)", path,
                    errno ? strerror(errno) : "unknown error");
        int ok = 1;
        for (size_t r = 0; r < n_records && ok; r++) {
            make_record(rec, seed, k, r);
            ok = fwrite(rec, 1, sizeof rec, f) == sizeof rec;
        }
        int err = errno;
        if (fclose(f) != 0) ok = 0;
        if (!ok) remove(path);
        PAR_FAIL_IF(!ok, PAR_ERR_IO, "%s: write failed (%s)", path,
                    err ? strerror(err) : "disk full?");
    }
    return PAR_OK;
}
