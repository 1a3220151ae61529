// libFuzzer: the IDX loader (raw and gzip, detected by content) through
// par_idx_load, and the CIFAR-10 loader through par_cifar_load. Byte 0 % 3
// picks what gets the rest of the input: 0 the IDX images (the labels file a
// valid 2-record one), 1 the IDX labels (with valid images), 2 the second of
// two CIFAR-10 files (the first a valid one-record file).
// Run: ci/fuzz.sh. Any crash, leak, UB or hang is a bug.
#include "fuzz_common.h"
#include "par_data.h"

static const uint8_t IMAGES[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2,
                                 1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t LABELS[] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 9};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (data[0] % 3 == 2) {
        static uint8_t rec[PAR_CIFAR_RECORD];   // label 7, pixels 0..255 repeating
        rec[0] = 7;
        for (size_t i = 1; i < sizeof rec; i++) rec[i] = (uint8_t)i;
        const char *paths[2] = {fuzz_file("c1", rec, sizeof rec), NULL};
        paths[1] = fuzz_file("c2", data + 1, size - 1);
        par_images out;
        if (par_cifar_load(&out, paths, 2, 10) == PAR_OK) {
            if (out.n_features != PAR_CIFAR_FEATURES || out.n < 2) abort();
            for (size_t i = 0; i < out.n; i++)
                if (out.labels[i] >= 10) abort();
            volatile uint8_t sink = out.pixels[out.n * out.n_features - 1];
            (void)sink;
            par_images_free(&out);
        }
        return 0;
    }
    const int fuzz_labels = data[0] % 3 == 1;
    const char *im = fuzz_labels ? fuzz_file("im", IMAGES, sizeof IMAGES)
                                 : fuzz_file("im", data + 1, size - 1);
    const char *lb = fuzz_labels ? fuzz_file("lb", data + 1, size - 1)
                                 : fuzz_file("lb", LABELS, sizeof LABELS);
    par_images out;
    if (par_idx_load(&out, im, lb, 10) == PAR_OK) {
        // A loaded set is consistent: every label in range, pixels all there.
        if (out.n_features != out.height * out.width) abort();
        for (size_t i = 0; i < out.n; i++)
            if (out.labels[i] >= 10) abort();
        volatile uint8_t sink = out.n ? out.pixels[out.n * out.n_features - 1] : 0;
        (void)sink;
        par_images_free(&out);
    }
    return 0;
}
