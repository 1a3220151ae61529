// Unit tests for the CIFAR-10 binary loader, the synthetic set of
// `parity data make-cifar` and --upscale resampling (src/data): record
// counts, labels and pixels checked against the generator's definition and
// against the raw file bytes, every malformed-file error naming the file,
// lookup by name and folder, and bilinear golden values worked out by hand.
// Run: ctest -R test_cifar, or build-*/tests/unit/test_cifar.
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "par_data.h"
#include "par_rng.h"
#include "par_test.h"

static char tmp[256];

static const char *at(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
    return buf[k];
}

static const char *const NAMES[6] = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
    "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
};

// The generator's definition (par_data.h), written out again here.
static unsigned gen_label(uint64_t seed, unsigned k, uint64_t r)
{
    return (unsigned)(par_rng_bits(seed, PAR_RNG_DATA, 100 + k, r * 3073) % 10);
}

static unsigned gen_pixel(uint64_t seed, unsigned k, uint64_t r, unsigned f)
{
    unsigned label = gen_label(seed, k, r);
    unsigned c = f / 1024, y = f % 1024 / 32, x = f % 32;
    unsigned block = (y / 8) * 4 + x / 8;
    uint64_t bits = par_rng_bits(seed, PAR_RNG_DATA, 100 + k, r * 3073 + 1 + f);
    unsigned noise = (unsigned)(bits >> 57);
    return noise + ((block + 5 * c) % 10 == label ? 128 : 0);
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0) {
        fprintf(stderr, "cannot create %s\n", path);
        exit(3);
    }
}

static long file_bytes(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n) n = -1;
    fclose(f);
    return n;
}

static void write_file(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(3);
    }
}

static void copy_file(const char *from, const char *to)
{
    unsigned char *b = NULL;
    long n = file_bytes(from, &b);
    if (n < 0) {
        fprintf(stderr, "cannot read %s\n", from);
        exit(3);
    }
    write_file(to, b, (size_t)n);
    free(b);
}

enum { NREC = 3, SEED = 5 };

static void test_generated(void)
{
    make_dir(at("gen"));
    par_check(par_cifar_make(at("gen"), NREC, SEED) == PAR_OK, "make-cifar writes six files");
    unsigned char *b = NULL;
    long n = file_bytes(at("gen/data_batch_1.bin"), &b);
    par_check(n == NREC * 3073, "data_batch_1.bin is 3 records of 3073 bytes");
    // Byte-level: file 0 record 0 as the definition says.
    int def_ok = n == NREC * 3073 && b[0] == gen_label(SEED, 0, 0);
    for (unsigned f = 0; def_ok && f < 3072; f++) def_ok = b[1 + f] == gen_pixel(SEED, 0, 0, f);
    par_check(def_ok, "make-cifar record 0 matches the definition byte for byte");
    // The signal: the lit blocks are exactly the class's, every lit pixel >= 128.
    int lit = 0, dark = 0;
    for (unsigned f = 0; n > 0 && f < 3072; f++) {
        unsigned c = f / 1024, y = f % 1024 / 32, x = f % 32;
        if (((y / 8) * 4 + x / 8 + 5 * c) % 10 == b[0]) lit += b[1 + f] >= 128;
        else dark += b[1 + f] < 128;
    }
    // Per channel 1 or 2 of the 16 blocks (64 pixels each) are lit.
    par_check(lit >= 3 * 64 && lit + dark == 3072, "make-cifar lights the class's blocks only");

    par_dataset ds;
    par_status st = par_dataset_open(&ds, at("gen"), 10);
    if (!par_check(st == PAR_OK, "open a folder of CIFAR-10 files")) {
        printf("  %s\n", par_last_error());
        free(b);
        return;
    }
    const par_images *tr = &ds.train, *te = &ds.test;
    par_check(tr->n == 5 * NREC && te->n == NREC && ds.n_val == 1 && ds.n_train == 14,
              "5 x 3 training records, 3 test, last 10% (1) for validation");
    par_check(tr->height == 32 && tr->width == 32 && tr->channels == 3 &&
                  tr->n_features == 3072 && te->n_features == 3072 && ds.n_classes == 10,
              "32 x 32 x 3 = 3072 features, 10 classes");
    par_check(n > 0 && memcmp(tr->pixels, b + 1, 3072) == 0 && tr->labels[0] == b[0],
              "first training record equals the file's bytes (channel-major as stored)");
    // Last training record: file 4 (data_batch_5), record 2; last test record.
    int last_ok =
        tr->labels[14] == gen_label(SEED, 4, 2) && te->labels[2] == gen_label(SEED, 5, 2);
    for (unsigned f = 0; f < 3072; f++)
        last_ok &= tr->pixels[14 * 3072 + f] == gen_pixel(SEED, 4, 2, f) &&
                   te->pixels[2 * 3072 + f] == gen_pixel(SEED, 5, 2, f);
    par_check(last_ok, "last training and test records match the definition");
    int mid_ok = 1;   // record 4 of the training set is file 1 (data_batch_2) record 1
    for (unsigned f = 0; f < 3072; f += 97)
        mid_ok &= tr->pixels[4 * 3072 + f] == gen_pixel(SEED, 1, 1, f);
    par_check(mid_ok && tr->labels[4] == gen_label(SEED, 1, 1),
              "files are concatenated in order 1..5");
    // Gather scales like MNIST: pixel / 255.
    size_t idx = 14;
    float x[3072];
    int32_t lab;
    par_data_gather(tr, &idx, 1, PAR_F32, x, &lab);
    par_check(x[0] == (float)gen_pixel(SEED, 4, 2, 0) / 255.0f &&
                  x[3071] == (float)gen_pixel(SEED, 4, 2, 3071) / 255.0f &&
                  lab == (int32_t)gen_label(SEED, 4, 2),
              "gather: pixel / 255 in f32, label");
    par_dataset_free(&ds);
    free(b);

    // A gzip-compressed batch reads the same.
    make_dir(at("gz"));
    for (int k = 0; k < 6; k++) {
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/gen/%s", tmp, NAMES[k]);
        snprintf(to, sizeof to, "%s/gz/%s%s", tmp, NAMES[k], k == 2 ? ".gz" : "");
        if (k != 2) {
            copy_file(from, to);
            continue;
        }
        unsigned char *raw = NULL;
        long m = file_bytes(from, &raw);
        gzFile g = gzopen(to, "wb");
        if (!g || m < 0 || gzwrite(g, raw, (unsigned)m) != (int)m || gzclose(g) != Z_OK) exit(3);
        free(raw);
    }
    par_dataset a, z;
    st = par_dataset_open(&a, at("gen"), 10);
    par_status st2 = par_dataset_open(&z, at("gz"), 10);
    par_check(st == PAR_OK && st2 == PAR_OK && z.train.n == a.train.n &&
                  memcmp(z.train.pixels, a.train.pixels, a.train.n * 3072) == 0,
              "data_batch_3.bin.gz reads as the raw file");
    par_dataset_free(&a);
    par_dataset_free(&z);
}

// Copies gen/ to name/, then lets `spoil` damage it; opening must fail with
// code, the message naming `who` and containing `what`.
static void expect_bad(const char *check, const char *name, const char *file,
                       const unsigned char *bytes, long n_bytes, par_status code,
                       const char *what)
{
    make_dir(at(name));
    for (int k = 0; k < 6; k++) {
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/gen/%s", tmp, NAMES[k]);
        snprintf(to, sizeof to, "%s/%s/%s", tmp, name, NAMES[k]);
        if (strcmp(NAMES[k], file) != 0) copy_file(from, to);
        else if (n_bytes >= 0) write_file(to, bytes, (size_t)n_bytes);
    }
    par_dataset ds;
    par_clear_error();
    par_status st = par_dataset_open(&ds, at(name), 10);
    const char *msg = par_last_error();
    int ok = st == code && strstr(msg, file) && strstr(msg, what) && ds.train.pixels == NULL &&
             ds.test.pixels == NULL;
    if (!par_check(ok, check)) printf("  got %d (%s): %s\n", st, par_status_str(st), msg);
    par_dataset_free(&ds);
}

static void test_bad(void)
{
    unsigned char *b = NULL;
    long n = file_bytes(at("gen/data_batch_3.bin"), &b);
    if (n != NREC * 3073) exit(3);
    expect_bad("truncated file: error names it and the 3073-byte record", "trunc",
               "data_batch_3.bin", b, n - 5, PAR_ERR_FORMAT, "expected a multiple of 3073");
    unsigned char *longer = malloc((size_t)n + 1);
    memcpy(longer, b, (size_t)n);
    longer[n] = 0;
    expect_bad("one trailing byte: not a whole number of records", "long2", "data_batch_3.bin",
               longer, n + 1, PAR_ERR_FORMAT, "9220 bytes, expected a multiple of 3073");
    free(longer);
    expect_bad("empty file", "empty", "data_batch_3.bin", b, 0, PAR_ERR_FORMAT, "empty file");
    b[3073] = 10;   // record 1's label
    expect_bad("label 10: error names the file and the record", "label", "data_batch_3.bin", b,
               n, PAR_ERR_FORMAT, "label 10 at record 1 is out of range, expected < 10");
    expect_bad("bad label in test_batch.bin", "label_t", "test_batch.bin", b, n, PAR_ERR_FORMAT,
               "label 10 at record 1");
    expect_bad("missing data_batch_5.bin: error names it", "missing", "data_batch_5.bin", NULL, -1,
               PAR_ERR_IO, "not found");
    expect_bad("missing test_batch.bin: error names it", "missing_t", "test_batch.bin", NULL, -1,
               PAR_ERR_IO, "expected the CIFAR-10 binary files");
    free(b);

    par_images im;
    const char *none[1] = {at("no-such-file.bin")};
    par_clear_error();
    par_status st = par_cifar_load(&im, none, 1, 10);
    par_check(st == PAR_ERR_IO && strstr(par_last_error(), "no-such-file.bin") && im.pixels == NULL,
              "par_cifar_load of a missing file: PAR_ERR_IO naming it");
}

// Lookup of the name cifar10 under $PARITY_DATA (also in cifar-10-batches-bin,
// as the archive unpacks), and a folder holding cifar-10-batches-bin.
static void test_lookup(void)
{
    make_dir(at("root"));
    make_dir(at("root/cifar10"));
    make_dir(at("root/cifar10/cifar-10-batches-bin"));
    for (int k = 0; k < 6; k++) {
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/gen/%s", tmp, NAMES[k]);
        snprintf(to, sizeof to, "%s/root/cifar10/cifar-10-batches-bin/%s", tmp, NAMES[k]);
        copy_file(from, to);
    }
    setenv("PARITY_DATA", at("root"), 1);
    par_dataset ds;
    par_status st = par_dataset_open(&ds, "cifar10", 10);
    par_check(st == PAR_OK && strcmp(ds.name, "cifar10") == 0 && ds.train.n == 15 &&
                  strstr(ds.dir, "cifar-10-batches-bin"),
              "name cifar10 found in $PARITY_DATA/cifar10/cifar-10-batches-bin");
    par_dataset_free(&ds);
    st = par_dataset_open(&ds, at("root/cifar10"), 10);
    par_check(st == PAR_OK && ds.test.n == 3, "a folder holding cifar-10-batches-bin");
    par_dataset_free(&ds);
    setenv("PARITY_DATA", at("nowhere"), 1);
    const char *home = getenv("HOME");
    char *saved = home ? strdup(home) : NULL;
    setenv("HOME", at("nohome"), 1);
    par_clear_error();
    st = par_dataset_open(&ds, "cifar10", 10);
    par_check(st == PAR_ERR_IO && strstr(par_last_error(), "dataset 'cifar10' not found") &&
                  strstr(par_last_error(), "nowhere/cifar10 (no such folder)"),
              "cifar10 not found: the places searched are listed");
    if (saved) setenv("HOME", saved, 1);
    free(saved);
    unsetenv("PARITY_DATA");
}

// Bilinear 2 x 2 -> 4 x 4, worked out by hand. Source columns of the four
// outputs: (x + 0.5) * 2 / 4 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25
// (clamped to 1); rows alike. Pixels [[0, 204], [100, 52]]; the table holds
// 255 * value (exact: all weights are quarters).
static const double GOLD[16] = {
    0,   51,    153,    204,
    25,  60.25, 130.75, 166,
    75,  78.75, 86.25,  90,
    100, 88,    64,     52,
};

static void test_upscale(void)
{
    // Two records of 2 x 2 x 3: channel 0 the hand case, 1 all 255, 2 all 0.
    uint8_t px[2 * 12] = {0, 204, 100, 52, 255, 255, 255, 255, 0, 0, 0, 0,
                          52, 100, 204, 0, 9, 9, 9, 9, 1, 2, 3, 4};
    uint8_t lb[2] = {3, 7};
    par_dtype dts[2] = {PAR_F32, PAR_F64};
    for (int d = 0; d < 2; d++) {
        par_images im = {2, 2, 2, 3, 12, malloc(24), malloc(2), NULL, PAR_F32, 0};
        memcpy(im.pixels, px, 24);
        memcpy(im.labels, lb, 2);
        par_status st = par_images_upscale(&im, 4, dts[d]);
        par_check(st == PAR_OK && im.n_features == 48 && im.height == 4 && im.width == 4 &&
                      im.channels == 3 && im.pixels == NULL && im.upscale == 4,
                  d ? "upscale 2x2x3 -> 4x4x3 (f64)" : "upscale 2x2x3 -> 4x4x3 (f32)");
        size_t idx[2] = {0, 1};
        double y[96];
        float yf[96];
        int32_t l[2];
        if (d) par_data_gather(&im, idx, 2, PAR_F64, y, l);
        else par_data_gather(&im, idx, 2, PAR_F32, yf, l);
        for (int i = 0; !d && i < 96; i++) y[i] = yf[i];
        double want[48];
        for (int i = 0; i < 16; i++) {
            want[i] = d ? GOLD[i] / 255.0 : (double)(float)(GOLD[i] / 255.0);
            want[16 + i] = d ? 1.0 : 1.0f;
            want[32 + i] = 0.0;
        }
        par_check_close(d ? "bilinear golden values f64 (bitwise)"
                          : "bilinear golden values f32 (bitwise)",
                        y, want, 48, 0, 0);
        // Record 1, channel 0 is record 0's mirrored in both axes.
        int mirror = 1;
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) mirror &= y[48 + r * 4 + c] == y[(3 - r) * 4 + (3 - c)];
        par_check(mirror && l[0] == 3 && l[1] == 7, "mirrored image, mirrored output; labels kept");
        par_check(par_images_upscale(&im, 8, dts[d]) == PAR_ERR_CONFIG,
                  "resampling twice is refused");
        par_images_free(&im);
    }

    // The identity: S = 28 on 28 x 28 gives pixel / 255 bitwise, f32 and f64.
    enum { N = 3, F = 784 };
    par_images src = {N, 28, 28, 1, F, malloc(N * F), malloc(N), NULL, PAR_F32, 0};
    for (int i = 0; i < N * F; i++)
        src.pixels[i] = (uint8_t)(par_rng_bits(9, PAR_RNG_DATA, 0, (uint64_t)i) >> 56);
    for (int i = 0; i < N; i++) src.labels[i] = (uint8_t)i;
    size_t idx[N] = {0, 1, 2};
    static float a32[N * F], b32[N * F];
    static double a64[N * F], b64[N * F];
    par_data_gather(&src, idx, N, PAR_F32, a32, NULL);
    par_data_gather(&src, idx, N, PAR_F64, a64, NULL);
    for (int d = 0; d < 2; d++) {
        par_images im = src;
        im.pixels = malloc(N * F);
        im.labels = malloc(N);
        memcpy(im.pixels, src.pixels, N * F);
        memcpy(im.labels, src.labels, N);
        par_status st = par_images_upscale(&im, 28, dts[d]);
        if (d) par_data_gather(&im, idx, N, PAR_F64, b64, NULL);
        else par_data_gather(&im, idx, N, PAR_F32, b32, NULL);
        int same = st == PAR_OK && im.n_features == F &&
                   (d ? memcmp(a64, b64, sizeof a64) : memcmp(a32, b32, sizeof a32)) == 0;
        par_check(same, d ? "upscale 28 -> 28 is the identity, bitwise (f64)"
                          : "upscale 28 -> 28 is the identity, bitwise (f32)");
        par_images_free(&im);
    }

    // Sizes of the granularity study: 57 -> 3249 features, 112 -> 12544; f64
    // values gathered as f32 equal the f32 resampling.
    const size_t sides[2] = {57, 112}, feats[2] = {3249, 12544};
    for (int k = 0; k < 2; k++) {
        par_images i32 = src, i64 = src;
        i32.pixels = malloc(N * F);
        i64.pixels = malloc(N * F);
        i32.labels = malloc(N);
        i64.labels = malloc(N);
        memcpy(i32.pixels, src.pixels, N * F);
        memcpy(i64.pixels, src.pixels, N * F);
        memcpy(i32.labels, src.labels, N);
        memcpy(i64.labels, src.labels, N);
        int ok = par_images_upscale(&i32, sides[k], PAR_F32) == PAR_OK &&
                 par_images_upscale(&i64, sides[k], PAR_F64) == PAR_OK &&
                 i32.n_features == feats[k];
        size_t nb = 0;
        ok = ok && par_images_bytes(&i32, &nb) == i32.values && nb == N * feats[k] * 4;
        float *g = malloc(N * feats[k] * sizeof *g);
        par_data_gather(&i64, idx, N, PAR_F32, g, NULL);
        ok = ok && memcmp(g, i32.values, N * feats[k] * sizeof *g) == 0;
        // Values stay in [0, 1] (a convex combination of pixel / 255).
        for (size_t i = 0; ok && i < N * feats[k]; i++) ok = g[i] >= 0 && g[i] <= 1;
        char name[96];
        snprintf(name, sizeof name,
                 "upscale 28 -> %zu: %zu features, f64 rounds to the f32 values", sides[k],
                 feats[k]);
        par_check(ok, name);
        free(g);
        par_images_free(&i32);
        par_images_free(&i64);
    }
    par_images bad = src;
    par_check(par_images_upscale(&bad, 0, PAR_F32) == PAR_ERR_CONFIG &&
                  par_images_upscale(&bad, 1025, PAR_F32) == PAR_ERR_CONFIG &&
                  bad.pixels == src.pixels,
              "--upscale 0 and 1025 refused, images unchanged");
    par_images_free(&src);
}

int main(void)
{
    const char *td = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/parity-test-cifar-XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 3;
    }
    test_generated();
    test_bad();
    test_lookup();
    test_upscale();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
    return par_test_exit();
}
