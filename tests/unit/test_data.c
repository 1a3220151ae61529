// Unit tests for src/data: IDX loading (raw and gzip) from fixtures generated
// in a temp dir, every malformed-input error with the file named in the
// message, gather's pixel/255 in f32 and f64, name lookup and the split.
// The real Fashion-MNIST check runs only if /usr/share/datasets has it.
// Run: ctest -R test_data, or build-*/tests/unit/test_data.
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "par_data.h"
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

static void write_bytes(const char *path, const void *p, size_t n, int gz)
{
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g || (n && gzwrite(g, p, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(3);
        }
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(3);
    }
}

static size_t put_be32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
    return 4;
}

// Writes an IDX file: magic, dims[0..rank), then n_payload bytes of payload
// (may differ from the dims' product, to make bad files).
static void write_idx(const char *path, uint32_t magic, const uint32_t *dims, int rank,
                      const uint8_t *payload, size_t n_payload, int gz)
{
    size_t n = 4 + 4 * (size_t)rank + n_payload;
    unsigned char *b = malloc(n ? n : 1), *p = b;
    p += put_be32(p, magic);
    for (int d = 0; d < rank; d++) p += put_be32(p, dims[d]);
    if (n_payload) memcpy(p, payload, n_payload);
    write_bytes(path, b, n, gz);
    free(b);
}

// Fixture: n records of H x W; pixel (i, f) = (37 * i + 11 * f) % 256 with a
// few fixed values (0, 51, 255) at the start; label i = i % 10.
enum { NR = 20, H = 3, W = 4, NF = H * W };
static uint8_t pix[NR * NF], lab[NR];

static void make_values(void)
{
    for (int i = 0; i < NR; i++) {
        for (int f = 0; f < NF; f++) pix[i * NF + f] = (uint8_t)((37 * i + 11 * f) % 256);
        lab[i] = (uint8_t)(i % 10);
    }
    pix[0] = 0;
    pix[1] = 51;
    pix[2] = 255;
    pix[3] = 85;
}

static void write_images(const char *name, size_t n, int gz)
{
    uint32_t d[3] = {(uint32_t)n, H, W};
    write_idx(at(name), 0x803, d, 3, pix, n * NF, gz);
}

static void write_labels(const char *name, size_t n, int gz)
{
    uint32_t d[1] = {(uint32_t)n};
    write_idx(at(name), 0x801, d, 1, lab, n, gz);
}

static int same_images(const par_images *im, size_t n)
{
    return im->n == n && im->height == H && im->width == W && im->channels == 1 &&
           im->n_features == NF && memcmp(im->pixels, pix, n * NF) == 0 &&
           memcmp(im->labels, lab, n) == 0;
}

// Loads images/labels expecting failure with `code`; checks that the message
// names `who` and that the output was left empty.
static void expect_fail(const char *name, const char *img, const char *lbl, par_status code,
                        const char *who)
{
    par_images im;
    par_clear_error();
    par_status st = par_idx_load(&im, at(img), at(lbl), 10);
    int ok = st == code && strstr(par_last_error(), who) != NULL && im.pixels == NULL &&
             im.labels == NULL && im.n == 0;
    if (!par_check(ok, name))
        printf("  got %d (%s): %s\n", st, par_status_str(st), par_last_error());
    par_images_free(&im);
}

static void test_good(void)
{
    write_images("img.raw", NR, 0);
    write_labels("lbl.raw", NR, 0);
    write_images("img.gz", NR, 1);
    write_labels("lbl.gz", NR, 1);
    const char *pairs[3][2] = {{"img.raw", "lbl.raw"}, {"img.gz", "lbl.gz"}, {"img.gz", "lbl.raw"}};
    const char *names[3] = {"load raw", "load gzip", "load gzip images + raw labels"};
    for (int k = 0; k < 3; k++) {
        par_images im;
        par_status st = par_idx_load(&im, at(pairs[k][0]), at(pairs[k][1]), 10);
        if (!par_check(st == PAR_OK && same_images(&im, NR), names[k]))
            printf("  %s\n", par_last_error());
        par_images_free(&im);
    }

    // Two concatenated gzip members decode as one stream (as gunzip does).
    FILE *f = fopen(at("img2.gz"), "wb");
    for (int half = 0; half < 2; half++) {
        unsigned char hdr[16];
        size_t hn = 0;
        const uint8_t *p = pix + half * (NR / 2) * NF;
        size_t n = (size_t)(NR / 2) * NF;
        if (half == 0) {
            hn += put_be32(hdr, 0x803);
            hn += put_be32(hdr + hn, NR);
            hn += put_be32(hdr + hn, H);
            hn += put_be32(hdr + hn, W);
        }
        unsigned char *raw = malloc(hn + n);
        memcpy(raw, hdr, hn);
        memcpy(raw + hn, p, n);
        write_bytes(at("member.gz"), raw, hn + n, 1);
        free(raw);
        FILE *m = fopen(at("member.gz"), "rb");
        int c;
        while ((c = fgetc(m)) != EOF) fputc(c, f);
        fclose(m);
    }
    fclose(f);
    par_images im;
    par_status st = par_idx_load(&im, at("img2.gz"), at("lbl.raw"), 10);
    par_check(st == PAR_OK && same_images(&im, NR), "load multi-member gzip");
    par_images_free(&im);
}

static void test_bad(void)
{
    uint32_t d3[3] = {NR, H, W}, d1[1] = {NR};

    // truncated: header cut, payload short by one byte (raw and gz), gz stream cut
    write_idx(at("short-hdr"), 0x803, d3, 2, NULL, 0, 0);
    expect_fail("truncated header", "short-hdr", "lbl.raw", PAR_ERR_FORMAT, "short-hdr");
    write_idx(at("trunc.raw"), 0x803, d3, 3, pix, NR * NF - 1, 0);
    expect_fail("truncated payload raw", "trunc.raw", "lbl.raw", PAR_ERR_FORMAT, "trunc.raw");
    write_idx(at("trunc.gz"), 0x803, d3, 3, pix, NR * NF - 1, 1);
    expect_fail("truncated payload gz", "trunc.gz", "lbl.raw", PAR_ERR_FORMAT, "trunc.gz");
    write_idx(at("trunc-lbl"), 0x801, d1, 1, lab, NR - 3, 0);
    expect_fail("truncated labels", "img.raw", "trunc-lbl", PAR_ERR_FORMAT, "trunc-lbl");
    {
        FILE *f = fopen(at("img.gz"), "rb");
        unsigned char b[4096];
        size_t n = fread(b, 1, sizeof b, f);
        fclose(f);
        write_bytes(at("cut.gz"), b, n - 6, 0); // drops most of the CRC/size trailer
        expect_fail("truncated gzip stream", "cut.gz", "lbl.raw", PAR_ERR_FORMAT, "cut.gz");
        b[n / 2] ^= 0x55; // corrupt deflate data or CRC mismatch
        write_bytes(at("flip.gz"), b, n, 0);
        expect_fail("corrupt gzip body", "flip.gz", "lbl.raw", PAR_ERR_FORMAT, "flip.gz");
    }

    // wrong magic: labels given as images, images as labels, float data type
    expect_fail("magic: labels file as images", "lbl.raw", "lbl.raw", PAR_ERR_FORMAT, "lbl.raw");
    expect_fail("magic: images file as labels", "img.raw", "img.raw", PAR_ERR_FORMAT,
                "img.raw: bad magic 0x00000803, expected 0x00000801");
    write_idx(at("float-type"), 0x0D03, d3, 3, pix, NR * NF, 0);
    expect_fail("magic: data type 0x0D", "float-type", "lbl.raw", PAR_ERR_FORMAT, "float-type");
    write_idx(at("rank4"), 0x804, d3, 3, pix, NR * NF, 0);
    expect_fail("magic: rank 4", "rank4", "lbl.raw", PAR_ERR_FORMAT, "rank4");

    // dimensions vs length
    uint32_t more[3] = {NR + 1, H, W}, zero[3] = {NR, 0, W}, huge[3] = {0xFFFFFFFFu, 0xFFFF, 0xFFFF};
    write_idx(at("dims-more"), 0x803, more, 3, pix, NR * NF, 0);
    expect_fail("dims claim more records than present", "dims-more", "lbl.raw", PAR_ERR_FORMAT,
                "dims-more");
    write_idx(at("dims-more.gz"), 0x803, more, 3, pix, NR * NF, 1);
    expect_fail("dims claim more records (gz)", "dims-more.gz", "lbl.raw", PAR_ERR_FORMAT,
                "dims-more.gz");
    write_idx(at("dims-zero"), 0x803, zero, 3, pix, NR * NF, 0);
    expect_fail("zero dimension", "dims-zero", "lbl.raw", PAR_ERR_FORMAT, "dims-zero");
    write_idx(at("dims-huge.gz"), 0x803, huge, 3, pix, NR * NF, 1);
    expect_fail("huge dims in a small gz", "dims-huge.gz", "lbl.raw", PAR_ERR_FORMAT,
                "dims-huge.gz");

    // trailing bytes
    uint8_t big[NR * NF + 3];
    memcpy(big, pix, NR * NF);
    big[NR * NF] = big[NR * NF + 1] = big[NR * NF + 2] = 7;
    write_idx(at("trail.raw"), 0x803, d3, 3, big, NR * NF + 3, 0);
    expect_fail("trailing bytes raw", "trail.raw", "lbl.raw", PAR_ERR_FORMAT, "trail.raw");
    write_idx(at("trail.gz"), 0x803, d3, 3, big, NR * NF + 1, 1);
    expect_fail("trailing bytes gz", "trail.gz", "lbl.raw", PAR_ERR_FORMAT, "trail.gz");
    {
        FILE *f = fopen(at("img.gz"), "rb");
        unsigned char b[4096];
        size_t n = fread(b, 1, sizeof b - 4, f);
        fclose(f);
        memcpy(b + n, "junk", 4);
        write_bytes(at("junk-after.gz"), b, n + 4, 0);
        expect_fail("garbage after gzip stream", "junk-after.gz", "lbl.raw", PAR_ERR_FORMAT,
                    "junk-after.gz");
    }

    // labels out of range and count mismatch
    uint8_t bad_lab[NR];
    memcpy(bad_lab, lab, NR);
    bad_lab[NR - 1] = 10;
    write_idx(at("lbl-range"), 0x801, d1, 1, bad_lab, NR, 0);
    expect_fail("label out of range", "img.raw", "lbl-range", PAR_ERR_FORMAT,
                "lbl-range: label 10 at record 19");
    write_labels("lbl-fewer", NR - 1, 0);
    expect_fail("image/label count mismatch", "img.raw", "lbl-fewer", PAR_ERR_FORMAT, "lbl-fewer");
    expect_fail("count mismatch names images file", "img.raw", "lbl-fewer", PAR_ERR_FORMAT,
                "img.raw");

    // empty, gzip garbage, missing
    write_bytes(at("empty"), "", 0, 0);
    expect_fail("empty file", "empty", "lbl.raw", PAR_ERR_FORMAT, "empty");
    expect_fail("empty labels file", "img.raw", "empty", PAR_ERR_FORMAT, "empty");
    unsigned char garbage[64] = {0x1f, 0x8b};
    for (int i = 2; i < 64; i++) garbage[i] = (unsigned char)(i * 97 + 13);
    write_bytes(at("garbage.gz"), garbage, sizeof garbage, 0);
    expect_fail("gzip garbage", "garbage.gz", "lbl.raw", PAR_ERR_FORMAT, "garbage.gz");
    write_bytes(at("gz-magic-only.gz"), garbage, 2, 0);
    expect_fail("gzip magic only", "gz-magic-only.gz", "lbl.raw", PAR_ERR_FORMAT,
                "gz-magic-only.gz");
    expect_fail("missing file", "no-such-file", "lbl.raw", PAR_ERR_IO, "no-such-file");
    expect_fail("missing labels file", "img.raw", "no-such-labels", PAR_ERR_IO, "no-such-labels");
    expect_fail("directory as file", ".", "lbl.raw", PAR_ERR_IO, tmp);

    par_images im;
    par_check(par_idx_load(&im, at("img.raw"), at("lbl.raw"), 0) == PAR_ERR_CONFIG,
              "n_classes 0 rejected");
    par_check(par_idx_load(&im, at("img.raw"), at("lbl.raw"), 9) == PAR_ERR_FORMAT,
              "label 9 rejected with n_classes 9");
}

// Is q the correctly rounded value of p / 255? Checked through the residual
// q * 255 - p (fma: a single rounding of the exact residual) against both
// neighbours of q.
static int is_rounded_div(double q, int p)
{
    double r = fabs(fma(q, 255.0, -p));
    double lo = fabs(fma(nextafter(q, -INFINITY), 255.0, -p));
    double hi = fabs(fma(nextafter(q, INFINITY), 255.0, -p));
    return r <= lo && r <= hi;
}

static void test_gather(void)
{
    par_images im;
    if (!par_check(par_idx_load(&im, at("img.raw"), at("lbl.raw"), 10) == PAR_OK,
                   "gather fixture loads"))
        return;
    enum { B = 4 };
    size_t idx[B] = {0, 7, 3, 19};
    float xf[B * NF];
    double xd[B * NF], want[B * NF], got[B * NF];
    int32_t lf[B], ld[B];
    par_data_gather(&im, idx, B, PAR_F32, xf, lf);
    par_data_gather(&im, idx, B, PAR_F64, xd, ld);

    // Fixed values: 0 -> 0, 51 -> 0.2, 85 -> 1/3, 255 -> 1 (pixels 0..3 of record 0).
    par_check(xf[0] == 0.0f && !signbit(xf[0]) && xf[1] == 0.2f && xf[2] == 1.0f &&
                  xf[3] == 1.0f / 3.0f,
              "gather f32: 0, 51, 255, 85 -> 0, 0.2f, 1, 1/3f");
    par_check(xd[0] == 0.0 && !signbit(xd[0]) && xd[1] == 0.2 && xd[2] == 1.0 &&
                  xd[3] == 1.0 / 3.0,
              "gather f64: 0, 51, 255, 85 -> 0, 0.2, 1, 1/3");

    // f32: the f64 quotient rounded to f32 equals the correctly rounded f32
    // quotient (53 >= 2*24 + 2, so double rounding is innocuous for division).
    for (int s = 0; s < B; s++)
        for (int f = 0; f < NF; f++) {
            int p = pix[idx[s] * NF + f];
            want[s * NF + f] = (float)((double)p / 255.0);
            got[s * NF + f] = xf[s * NF + f];
        }
    par_check_close("gather f32 = correctly rounded p/255 (bitwise)", got, want, B * NF, 0, 0);

    int all = 1;
    for (int s = 0; s < B; s++)
        for (int f = 0; f < NF; f++) {
            int p = pix[idx[s] * NF + f];
            double q = xd[s * NF + f];
            all &= is_rounded_div(q, p) && fabsl(q - p / 255.0L) < 1e-15L;
        }
    par_check(all, "gather f64 = correctly rounded p/255 (fma residual check)");

    int all256 = 1;
    uint8_t ramp[256];
    uint8_t ramp_lab[1] = {0};
    for (int p = 0; p < 256; p++) ramp[p] = (uint8_t)p;
    par_images r = {1, 16, 16, 1, 256, ramp, ramp_lab, NULL, PAR_F32, 0};
    size_t z = 0;
    float rf[256];
    double rd[256];
    par_data_gather(&r, &z, 1, PAR_F32, rf, NULL);
    par_data_gather(&r, &z, 1, PAR_F64, rd, NULL);
    for (int p = 0; p < 256; p++)
        all256 &= rf[p] == (float)((double)p / 255.0) && is_rounded_div(rd[p], p) &&
                  rf[p] >= 0.0f && rf[p] <= 1.0f;
    par_check(all256, "gather all 256 pixel values, f32 and f64");

    int labs = 1;
    for (int s = 0; s < B; s++) labs &= lf[s] == lab[idx[s]] && ld[s] == lab[idx[s]];
    par_check(labs, "gather labels follow idx");
    par_images_free(&im);
}

static void make_dataset_dir(const char *dir, size_t n_train, size_t n_test, int gz)
{
    char p[512];
    mkdir(at(dir), 0755);
    const char *sfx = gz ? ".gz" : "";
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte%s", dir, sfx);
    write_images(p, n_train, gz);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte%s", dir, sfx);
    write_labels(p, n_train, gz);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte%s", dir, sfx);
    write_images(p, n_test, gz);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte%s", dir, sfx);
    write_labels(p, n_test, gz);
}

static void test_dataset(void)
{
    make_dataset_dir("tiny", 20, 7, 0);
    make_dataset_dir("tinygz", 20, 7, 1);
    make_dataset_dir("both", 20, 7, 1);
    make_dataset_dir("both", 20, 7, 0);

    struct { const char *dir; int pct; size_t n_train, n_val; } cases[] = {
        {"tiny", 10, 18, 2}, {"tinygz", 10, 18, 2}, {"tiny", 0, 20, 0},
        {"tiny", 25, 15, 5}, {"tiny", 33, 14, 6},   {"both", 99, 1, 19},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        par_dataset ds;
        char name[128];
        snprintf(name, sizeof name, "split %s %d%%: n_train %zu, n_val %zu", cases[k].dir,
                 cases[k].pct, cases[k].n_train, cases[k].n_val);
        par_status st = par_dataset_open(&ds, at(cases[k].dir), cases[k].pct);
        int ok = st == PAR_OK && ds.n_train == cases[k].n_train && ds.n_val == cases[k].n_val &&
                 ds.train.n == 20 && ds.test.n == 7 && ds.n_classes == 10 &&
                 same_images(&ds.train, 20) && same_images(&ds.test, 7);
        if (!par_check(ok, name)) printf("  %s\n", par_last_error());
        par_dataset_free(&ds);
    }

    par_dataset ds;
    par_check(par_dataset_open(&ds, at("tiny"), 100) == PAR_ERR_CONFIG, "split 100% rejected");
    par_check(par_dataset_open(&ds, at("tiny"), -1) == PAR_ERR_CONFIG, "split -1% rejected");

    // By name through $PARITY_DATA.
    setenv("PARITY_DATA", tmp, 1);
    par_status st = par_dataset_open(&ds, "tinygz", 10);
    par_check(st == PAR_OK && ds.n_train == 18 && strcmp(ds.name, "tinygz") == 0 &&
                  strcmp(ds.dir, at("tinygz")) == 0,
              "open by name via $PARITY_DATA");
    par_dataset_free(&ds);
    st = par_dataset_open(&ds, "nonexistent-set", 10);
    if (!par_check(st == PAR_ERR_IO && strstr(par_last_error(), "nonexistent-set") &&
                       strstr(par_last_error(), at("nonexistent-set")) &&
                       strstr(par_last_error(), ".cache/parity/data/nonexistent-set"),
                   "missing dataset lists places searched"))
        printf("  %s\n", par_last_error());
    par_check(ds.train.pixels == NULL && ds.test.pixels == NULL, "missing dataset leaves ds empty");

    // Incomplete folders: missing one file, or a bad file inside.
    make_dataset_dir("partial", 20, 7, 0);
    remove(at("partial/t10k-labels-idx1-ubyte"));
    st = par_dataset_open(&ds, at("partial"), 10);
    par_check(st == PAR_ERR_IO && strstr(par_last_error(), "t10k-labels-idx1-ubyte"),
              "folder missing a file names it");
    st = par_dataset_open(&ds, "partial", 10);
    par_check(st == PAR_ERR_IO && strstr(par_last_error(), "no t10k-labels-idx1-ubyte"),
              "name lookup skips an incomplete folder and says why");
    make_dataset_dir("badtest", 20, 7, 0);
    write_labels("badtest/t10k-labels-idx1-ubyte", 6, 0);
    st = par_dataset_open(&ds, at("badtest"), 10);
    par_check(st == PAR_ERR_FORMAT && strstr(par_last_error(), "badtest/t10k-labels-idx1-ubyte") &&
                  ds.train.pixels == NULL,
              "bad test file fails and frees the loaded training set");
    st = par_dataset_open(&ds, at("no-such-dir"), 10);
    par_check(st == PAR_ERR_IO && strstr(par_last_error(), "no-such-dir"), "missing folder");
    unsetenv("PARITY_DATA");
}

static void test_fashion_mnist(void)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat st;
    if (stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", &st) != 0) {
        printf("real fashion-mnist ... skipped (not installed at %s)\n", dir);
        return;
    }
    par_dataset ds;
    par_status s = par_dataset_open(&ds, dir, 10);
    int ok = s == PAR_OK && ds.train.n == 60000 && ds.test.n == 10000 && ds.train.height == 28 &&
             ds.train.width == 28 && ds.test.height == 28 && ds.test.width == 28 &&
             ds.train.n_features == 784 && ds.n_val == 6000 && ds.n_train == 54000;
    if (!par_check(ok, "real fashion-mnist: 60000/10000, 28x28, n_val 6000"))
        printf("  %s\n", par_last_error());
    par_dataset_free(&ds);
    s = par_dataset_open(&ds, "fashion-mnist", 10);
    if (!par_check(s == PAR_OK && ds.train.n == 60000 && ds.n_val == 6000,
                   "real fashion-mnist by name"))
        printf("  %s\n", par_last_error());
    par_dataset_free(&ds);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/parity-test-data-XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 3;
    }
    make_values();
    test_good();
    test_bad();
    test_gather();
    test_dataset();
    test_fashion_mnist();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
    return par_test_exit();
}
