// libFuzzer: the IDX loader (raw and gzip, detected by content) through
// par_idx_load. Byte 0 picks which file of the pair gets the rest of the
// input (even: images, odd: labels); the other file is a valid 2-record one.
// Run: ci/fuzz.sh. Any crash, leak, UB or hang is a bug.
#include "fuzz_common.h"
#include "par_data.h"

static const uint8_t IMAGES[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2,
                                 1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t LABELS[] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 9};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int fuzz_labels = data[0] & 1;
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
