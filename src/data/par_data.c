// IDX and CIFAR-10 binary loaders (raw or gzip, detected by the 1f 8b magic),
// dataset lookup by name or folder, the train/validation split and batch
// gathering. It is strict on
// purpose: any header, length or label inconsistency is an error naming the
// file, never a guess. It does not shuffle (that is the trainer's, by RNG).
// Tests: tests/unit/test_data.c (ctest -R test_data).
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE   // madvise's MADV_HUGEPAGE

#include "par_data.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

enum { IN_BUF = 1 << 16 };
#define FIRST_ALLOC ((size_t)1 << 24) // payload buffers grow from here up to the header's size

// A byte source over one file: raw bytes, or the inflated gzip stream
// (concatenated members allowed, as gunzip does).
typedef struct reader {
    const char *path;
    FILE *f;
    unsigned char *in;
    size_t in_pos, in_len; // raw mode: unread bytes are in[in_pos, in_len)
    int eof;
    int gz;
    int z_live;      // inflateInit2 succeeded
    int member_done; // the current gzip member ended (Z_STREAM_END)
    long long raw_size; // file size for raw files, -1 for gzip
    int cifar;          // set before reader_open: a CIFAR-10 file (for messages)
    z_stream z;
} reader;

static par_status fill(reader *r)
{
    size_t n = fread(r->in, 1, IN_BUF, r->f);
    PAR_FAIL_IF(n == 0 && ferror(r->f), PAR_ERR_IO, "%s: read failed (%s)", r->path,
                strerror(errno));
    if (n < IN_BUF) r->eof = 1;
    r->in_pos = 0;
    r->in_len = n;
    if (r->gz) {
        r->z.next_in = r->in;
        r->z.avail_in = (uInt)n;
    }
    return PAR_OK;
}

static void reader_close(reader *r)
{
    if (r->z_live) inflateEnd(&r->z);
    if (r->f) fclose(r->f);
    free(r->in);
    memset(r, 0, sizeof *r);
}

// On failure the reader holds nothing (reader_close is still safe to call).
static par_status reader_open(reader *r, const char *path)
{
    const int cifar = r->cifar;
    memset(r, 0, sizeof *r);
    r->cifar = cifar;
    r->path = path;
    r->raw_size = -1;
    errno = 0;
    r->f = fopen(path, "rb");
    PAR_FAIL_IF(!r->f, PAR_ERR_IO, "%s: cannot open (%s)", path,
                errno ? strerror(errno) : "unknown error");
    r->in = malloc(IN_BUF);
    PAR_FAIL_IF(!r->in, PAR_ERR_ALLOC, "%s: out of memory for the read buffer", path);
    PAR_TRY(fill(r));
    PAR_FAIL_IF(r->in_len == 0, PAR_ERR_FORMAT, "%s: empty file, expected %s", path,
                r->cifar ? "CIFAR-10 records of 3073 bytes" : "an IDX header");
    if (r->in_len >= 2 && r->in[0] == 0x1f && r->in[1] == 0x8b) {
        r->gz = 1;
        int zr = inflateInit2(&r->z, 16 + MAX_WBITS); // gzip wrapper only
        PAR_FAIL_IF(zr != Z_OK, PAR_ERR_ALLOC, "%s: inflateInit2 failed (%d)", path, zr);
        r->z_live = 1;
        r->z.next_in = r->in;
        r->z.avail_in = (uInt)r->in_len;
    } else {
        struct stat st;
        if (fstat(fileno(r->f), &st) == 0 && S_ISREG(st.st_mode)) r->raw_size = st.st_size;
    }
    return PAR_OK;
}

static par_status read_raw(reader *r, unsigned char *dst, size_t n, size_t *got)
{
    size_t done = 0;
    while (done < n) {
        if (r->in_pos == r->in_len) {
            if (r->eof) break;
            if (n - done >= IN_BUF) {   // a long span: straight into dst, no copy
                const size_t k = fread(dst + done, 1, n - done, r->f);
                PAR_FAIL_IF(k == 0 && ferror(r->f), PAR_ERR_IO, "%s: read failed (%s)",
                            r->path, strerror(errno));
                r->eof = k < n - done;
                done += k;
                continue;
            }
            PAR_TRY(fill(r));
            continue;
        }
        size_t k = r->in_len - r->in_pos;
        if (k > n - done) k = n - done;
        memcpy(dst + done, r->in + r->in_pos, k);
        r->in_pos += k;
        done += k;
    }
    *got = done;
    return PAR_OK;
}

// Inflates up to n bytes (n fits in uInt). Stops early only at a clean end of
// the last gzip member; a cut-off or corrupt stream is an error.
static par_status read_gz(reader *r, unsigned char *dst, size_t n, size_t *got)
{
    z_stream *z = &r->z;
    z->next_out = dst;
    z->avail_out = (uInt)n;
    while (z->avail_out > 0) {
        if (z->avail_in == 0 && !r->eof) {
            PAR_TRY(fill(r));
            continue;
        }
        if (r->member_done) {
            if (z->avail_in == 0) break; // clean end of the file
            PAR_FAIL_IF(z->next_in[0] != 0x1f, PAR_ERR_FORMAT,
                        "%s: unexpected bytes after the end of the gzip stream", r->path);
            inflateReset(z);
            r->member_done = 0;
        }
        int zr = inflate(z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            r->member_done = 1;
            continue;
        }
        PAR_FAIL_IF(zr == Z_MEM_ERROR, PAR_ERR_ALLOC, "%s: out of memory in inflate", r->path);
        PAR_FAIL_IF(zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR,
                    PAR_ERR_FORMAT, "%s: corrupt gzip data (%s)", r->path,
                    z->msg ? z->msg : "inflate error");
        // Z_BUF_ERROR: no progress possible, i.e. input exhausted mid-stream.
        PAR_FAIL_IF(zr == Z_BUF_ERROR && z->avail_in == 0 && r->eof, PAR_ERR_FORMAT,
                    "%s: gzip stream is truncated (ends before its trailer)", r->path);
        PAR_FAIL_IF(zr != Z_OK && !(zr == Z_BUF_ERROR && z->avail_in == 0), PAR_ERR_FORMAT,
                    "%s: corrupt gzip data (inflate returned %d)", r->path, zr);
    }
    *got = n - z->avail_out;
    return PAR_OK;
}

// Reads up to n bytes; *got < n only at the end of the data.
static par_status reader_read(reader *r, void *dst, size_t n, size_t *got)
{
    unsigned char *p = dst;
    size_t done = 0;
    while (done < n) {
        size_t want = n - done, k = 0;
        if (want > (size_t)1 << 30) want = (size_t)1 << 30;
        PAR_TRY(r->gz ? read_gz(r, p + done, want, &k) : read_raw(r, p + done, want, &k));
        done += k;
        if (k < want) break;
    }
    *got = done;
    return PAR_OK;
}

// Asks Linux for transparent huge pages under a large buffer about to be
// filled: a 47 MB training file then costs a hundred page faults, not
// eleven thousand (most of a short run's start-up on a virtual machine).
// Only a hint: nothing changes where the kernel declines.
static void huge_pages(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t page = 4096, a = ((uintptr_t)p + page - 1) & ~(page - 1);
    if (n >= ((size_t)4 << 20) && a < (uintptr_t)p + n)
        (void)madvise((void *)a, ((uintptr_t)p + n - a) & ~(page - 1), MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

static void dims_str(char *buf, size_t cap, const size_t *dims, int rank)
{
    int n = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank && n >= 0 && (size_t)n < cap; d++)
        n += snprintf(buf + n, cap - (size_t)n, d ? " x %zu" : "%zu", dims[d]);
}

// Parses one IDX file of unsigned bytes with `rank` dimensions into dims and
// *data (malloc'd; the caller frees it, also on error).
static par_status parse_idx(reader *r, int rank, size_t *dims, uint8_t **data)
{
    const char *path = r->path;
    const char *kind = rank == 3 ? "images" : "labels";
    unsigned char hdr[16];
    size_t got = 0;
    PAR_TRY(reader_read(r, hdr, 4, &got));
    PAR_FAIL_IF(got < 4, PAR_ERR_FORMAT, "%s: file is %zu bytes, too short for an IDX header",
                path, got);
    uint32_t magic = be32(hdr), want = 0x0800u | (uint32_t)rank;
    PAR_FAIL_IF(magic != want, PAR_ERR_FORMAT,
                "%s: bad magic 0x%08X, expected 0x%08X (%s, ubyte, %d dims)%s", path,
                (unsigned)magic, (unsigned)want, kind, rank,
                (magic >> 16) == 0 && hdr[2] != 0x08 ? "; only data type 0x08 is supported" : "");
    PAR_TRY(reader_read(r, hdr, 4 * (size_t)rank, &got));
    PAR_FAIL_IF(got < 4 * (size_t)rank, PAR_ERR_FORMAT,
                "%s: header truncated: %zu of %d dimension bytes", path, got, 4 * rank);
    size_t total = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = be32(hdr + 4 * d);
        PAR_FAIL_IF(dims[d] == 0, PAR_ERR_FORMAT, "%s: dimension %d is 0, expected > 0", path, d);
        PAR_FAIL_IF(total > SIZE_MAX / dims[d], PAR_ERR_FORMAT,
                    "%s: dimensions overflow the address space", path);
        total *= dims[d];
    }
    char ds[96];
    dims_str(ds, sizeof ds, dims, rank);
    long long hdr_len = 4 + 4 * (long long)rank;
    PAR_FAIL_IF(r->raw_size >= 0 && (unsigned long long)(r->raw_size - hdr_len) < total,
                PAR_ERR_FORMAT, "%s: truncated: payload is %lld bytes, expected %zu (%s)", path,
                r->raw_size - hdr_len, total, ds);
    PAR_FAIL_IF(r->raw_size >= 0 && (unsigned long long)(r->raw_size - hdr_len) > total,
                PAR_ERR_FORMAT, "%s: %lld trailing bytes: payload is %lld bytes, expected %zu (%s)",
                path, r->raw_size - hdr_len - (long long)total, r->raw_size - hdr_len, total, ds);

    // A raw file's size was checked against the header above: its payload is
    // allocated at once. A gzip stream's grows toward `total` as bytes arrive,
    // so a lying header in a small file cannot make us allocate gigabytes.
    size_t cap = r->raw_size >= 0 || total < FIRST_ALLOC ? total : FIRST_ALLOC, have = 0;
    *data = malloc(cap);
    PAR_FAIL_IF(!*data, PAR_ERR_ALLOC, "%s: out of memory for %zu bytes", path, cap);
    huge_pages(*data, cap);
    for (;;) {
        PAR_TRY(reader_read(r, *data + have, cap - have, &got));
        have += got;
        if (have < cap || cap == total) break;
        size_t ncap = cap > total / 2 ? total : 2 * cap;
        uint8_t *p = realloc(*data, ncap);
        PAR_FAIL_IF(!p, PAR_ERR_ALLOC, "%s: out of memory for %zu bytes", path, ncap);
        *data = p;
        cap = ncap;
    }
    PAR_FAIL_IF(have < total, PAR_ERR_FORMAT,
                "%s: truncated: payload is %zu bytes, expected %zu (%s)", path, have, total, ds);
    unsigned char extra;
    PAR_TRY(reader_read(r, &extra, 1, &got));
    PAR_FAIL_IF(got != 0, PAR_ERR_FORMAT,
                "%s: trailing bytes: payload is longer than the %zu bytes expected (%s)", path,
                total, ds);
    return PAR_OK;
}

static par_status load_idx(const char *path, int rank, size_t *dims, uint8_t **data)
{
    reader r;
    *data = NULL;
    par_status st = reader_open(&r, path);
    if (st == PAR_OK) st = parse_idx(&r, rank, dims, data);
    reader_close(&r);
    if (st != PAR_OK) {
        free(*data);
        *data = NULL;
    }
    return st;
}

static par_status check_pair(const char *images_path, const char *labels_path, size_t n_images,
                             size_t n_labels, const uint8_t *labels, size_t n_classes)
{
    PAR_FAIL_IF(n_images != n_labels, PAR_ERR_FORMAT,
                "%s: %zu labels, but %s has %zu images; expected equal counts", labels_path,
                n_labels, images_path, n_images);
    for (size_t i = 0; i < n_labels; i++)
        PAR_FAIL_IF(labels[i] >= n_classes, PAR_ERR_FORMAT,
                    "%s: label %u at record %zu is out of range, expected < %zu", labels_path,
                    (unsigned)labels[i], i, n_classes);
    return PAR_OK;
}

par_status par_idx_load(par_images *out, const char *images_path, const char *labels_path,
                        size_t n_classes)
{
    memset(out, 0, sizeof *out);
    PAR_FAIL_IF(!images_path || !labels_path, PAR_ERR_CONFIG, "par_idx_load: no file path given");
    PAR_FAIL_IF(n_classes < 1 || n_classes > 256, PAR_ERR_CONFIG,
                "%s: n_classes = %zu, expected 1..256 for ubyte labels", labels_path, n_classes);
    size_t idims[3], ldims[1];
    uint8_t *px = NULL, *lb = NULL;
    par_status st = load_idx(images_path, 3, idims, &px);
    if (st == PAR_OK) st = load_idx(labels_path, 1, ldims, &lb);
    if (st == PAR_OK) st = check_pair(images_path, labels_path, idims[0], ldims[0], lb, n_classes);
    if (st != PAR_OK) {
        free(px);
        free(lb);
        return st;
    }
    out->n = idims[0];
    out->height = idims[1];
    out->width = idims[2];
    out->channels = 1;
    out->n_features = idims[1] * idims[2];
    out->pixels = px;
    out->labels = lb;
    return PAR_OK;
}

// ---- CIFAR-10 binary files ----

// Reads a whole CIFAR-10 file into *data (malloc'd; the caller frees it, also
// on error): a non-empty whole number of 3073-byte records.
static par_status parse_cifar(reader *r, uint8_t **data, size_t *n_bytes)
{
    const char *path = r->path;
    const size_t rec = PAR_CIFAR_RECORD;
    PAR_FAIL_IF(r->raw_size >= 0 && r->raw_size % (long long)rec != 0, PAR_ERR_FORMAT,
                "%s: %lld bytes, expected a multiple of %zu (CIFAR-10 records of 1 label byte "
                "+ %d pixel bytes); truncated or not a CIFAR-10 binary file", path, r->raw_size,
                rec, PAR_CIFAR_FEATURES);
    size_t cap = r->raw_size > 0 ? (size_t)r->raw_size : 64 * rec, have = 0, got = 0;
    *data = malloc(cap);
    PAR_FAIL_IF(!*data, PAR_ERR_ALLOC, "%s: out of memory for %zu bytes", path, cap);
    huge_pages(*data, cap);
    for (;;) {
        PAR_TRY(reader_read(r, *data + have, cap - have, &got));
        have += got;
        if (have < cap) break;
        if (r->raw_size >= 0) {   // all there: anything more is a changed file
            unsigned char extra;
            PAR_TRY(reader_read(r, &extra, 1, &got));
            PAR_FAIL_IF(got != 0, PAR_ERR_FORMAT, "%s: the file grew while being read", path);
            break;
        }
        PAR_FAIL_IF(cap > SIZE_MAX / 2, PAR_ERR_FORMAT, "%s: too large", path);
        uint8_t *p = realloc(*data, 2 * cap);
        PAR_FAIL_IF(!p, PAR_ERR_ALLOC, "%s: out of memory for %zu bytes", path, 2 * cap);
        *data = p;
        cap *= 2;
    }
    PAR_FAIL_IF(have == 0, PAR_ERR_FORMAT, "%s: no records, expected CIFAR-10 records of %zu "
                "bytes", path, rec);
    PAR_FAIL_IF(have % rec != 0, PAR_ERR_FORMAT,
                "%s: %zu bytes, expected a multiple of %zu (CIFAR-10 records of 1 label byte "
                "+ %d pixel bytes); truncated or not a CIFAR-10 binary file", path, have, rec,
                PAR_CIFAR_FEATURES);
    *n_bytes = have;
    return PAR_OK;
}

static par_status load_cifar(const char *path, uint8_t **data, size_t *n_bytes)
{
    reader r;
    r.cifar = 1;
    *data = NULL;
    *n_bytes = 0;
    par_status st = reader_open(&r, path);
    if (st == PAR_OK) st = parse_cifar(&r, data, n_bytes);
    reader_close(&r);
    if (st != PAR_OK) {
        free(*data);
        *data = NULL;
    }
    return st;
}

// Appends the records of buf (n of them, from path) to out.
static par_status append_cifar(par_images *out, const char *path, const uint8_t *buf, size_t n,
                               size_t n_classes)
{
    const size_t nf = PAR_CIFAR_FEATURES, rec = PAR_CIFAR_RECORD;
    for (size_t i = 0; i < n; i++)
        PAR_FAIL_IF(buf[i * rec] >= n_classes, PAR_ERR_FORMAT,
                    "%s: label %u at record %zu is out of range, expected < %zu", path,
                    (unsigned)buf[i * rec], i, n_classes);
    PAR_FAIL_IF(out->n + n > SIZE_MAX / nf, PAR_ERR_FORMAT, "%s: too many records", path);
    uint8_t *px = realloc(out->pixels, (out->n + n) * nf);
    PAR_FAIL_IF(!px, PAR_ERR_ALLOC, "%s: out of memory for %zu records", path, out->n + n);
    out->pixels = px;
    uint8_t *lb = realloc(out->labels, out->n + n);
    PAR_FAIL_IF(!lb, PAR_ERR_ALLOC, "%s: out of memory for %zu records", path, out->n + n);
    out->labels = lb;
    for (size_t i = 0; i < n; i++) {
        out->labels[out->n + i] = buf[i * rec];
        memcpy(out->pixels + (out->n + i) * nf, buf + i * rec + 1, nf);
    }
    out->n += n;
    return PAR_OK;
}

par_status par_cifar_load(par_images *out, const char *const *paths, size_t n_paths,
                          size_t n_classes)
{
    memset(out, 0, sizeof *out);
    PAR_FAIL_IF(!paths || n_paths == 0, PAR_ERR_CONFIG, "par_cifar_load: no file path given");
    PAR_FAIL_IF(n_classes < 1 || n_classes > 256, PAR_ERR_CONFIG,
                "%s: n_classes = %zu, expected 1..256 for ubyte labels", paths[0], n_classes);
    par_status st = PAR_OK;
    for (size_t k = 0; k < n_paths && st == PAR_OK; k++) {
        uint8_t *buf = NULL;
        size_t nb = 0;
        st = load_cifar(paths[k], &buf, &nb);
        if (st == PAR_OK) st = append_cifar(out, paths[k], buf, nb / PAR_CIFAR_RECORD, n_classes);
        free(buf);
    }
    if (st != PAR_OK) {
        free(out->pixels);
        free(out->labels);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->height = out->width = PAR_CIFAR_SIDE;
    out->channels = 3;
    out->n_features = PAR_CIFAR_FEATURES;
    return PAR_OK;
}

void par_images_free(par_images *im)
{
    if (!im) return;
    free(im->pixels);
    free(im->labels);
    free(im->values);
    memset(im, 0, sizeof *im);
}

void par_dataset_free(par_dataset *ds)
{
    if (!ds) return;
    par_images_free(&ds->train);
    par_images_free(&ds->test);
    memset(ds, 0, sizeof *ds);
}

// The files of a dataset folder, by format.
enum { FMT_IDX = 0, FMT_CIFAR = 1 };
static const char *const IDX_FILES[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
};
static const char *const CIFAR_FILES[6] = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
    "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
};
static const char *const *const FMT_FILES[2] = {IDX_FILES, CIFAR_FILES};
static const int FMT_N[2] = {4, 6};
static const char CIFAR_SUB[] = "cifar-10-batches-bin"; // as the CIFAR-10 archive unpacks

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Finds dir/base or dir/base.gz (raw preferred). Returns 0 if neither exists.
static int find_file(char *out, size_t cap, const char *dir, const char *base)
{
    int n = snprintf(out, cap, "%s/%s", dir, base);
    if (n > 0 && (size_t)n < cap && is_file(out)) return 1;
    n = snprintf(out, cap, "%s/%s.gz", dir, base);
    return n > 0 && (size_t)n < cap && is_file(out);
}

// Index of the first file of format fmt missing from dir, or -1 if all exist.
static int first_missing(const char *dir, int fmt)
{
    char path[1024];
    for (int i = 0; i < FMT_N[fmt]; i++)
        if (!find_file(path, sizeof path, dir, FMT_FILES[fmt][i])) return i;
    return -1;
}

// The format of a folder given by path: IDX if its four files are there, else
// CIFAR-10 if any CIFAR-10 file is (a missing one is then named), else IDX.
static int folder_format(const char *dir)
{
    if (first_missing(dir, FMT_IDX) < 0) return FMT_IDX;
    char path[1024];
    for (int i = 0; i < FMT_N[FMT_CIFAR]; i++)
        if (find_file(path, sizeof path, dir, CIFAR_FILES[i])) return FMT_CIFAR;
    return FMT_IDX;
}

// Appends "place (why)" to the search log.
static void note(char *log, size_t cap, const char *place, const char *why)
{
    size_t len = strlen(log);
    if (len + 1 < cap)   // place cut at 500 bytes: a log line, not a path to use
        snprintf(log + len, cap - len, "%s%.500s (%s)", len ? ", " : "", place, why);
}

// Resolves a dataset name to a folder, trying the places par_data.h lists.
static par_status resolve_name(char *dir, size_t cap, const char *name)
{
    char places[5][1024], log[600] = "";
    int n_places = 0;
    const int fmt = strcmp(name, "cifar10") == 0 ? FMT_CIFAR : FMT_IDX;
    const char *env = getenv("PARITY_DATA");
    if (env && *env) snprintf(places[n_places++], sizeof places[0], "%s/%s", env, name);
    else note(log, sizeof log, "$PARITY_DATA", "unset");
    if (env && *env && fmt == FMT_CIFAR)
        snprintf(places[n_places++], sizeof places[0], "%s/%s/%s", env, name, CIFAR_SUB);
    const char *home = getenv("HOME");
    if (home && *home)
        snprintf(places[n_places++], sizeof places[0], "%s/.cache/parity/data/%s", home, name);
    else note(log, sizeof log, "$HOME", "unset");
    if (home && *home && fmt == FMT_CIFAR)
        snprintf(places[n_places++], sizeof places[0], "%s/.cache/parity/data/%s/%s", home,
                 name, CIFAR_SUB);
    if (strcmp(name, "fashion-mnist") == 0)
        snprintf(places[n_places++], sizeof places[0], "/usr/share/datasets/fashion-mnist");
    for (int i = 0; i < n_places; i++) {
        if (!is_dir(places[i])) {
            note(log, sizeof log, places[i], "no such folder");
            continue;
        }
        int miss = first_missing(places[i], fmt);
        if (miss >= 0) {
            char why[64];
            snprintf(why, sizeof why, "no %s[.gz]", FMT_FILES[fmt][miss]);
            note(log, sizeof log, places[i], why);
            continue;
        }
        PAR_FAIL_IF(strlen(places[i]) >= cap, PAR_ERR_CONFIG, "%s: path too long", places[i]);
        memcpy(dir, places[i], strlen(places[i]) + 1);
        return PAR_OK;
    }
    return par_set_error(PAR_ERR_IO, __FILE__, __LINE__,
                         "dataset '%s' not found; searched: %s", name, log);
}

// CIFAR-10: data_batch_1..5 in order are the training file, test_batch the test file.
static par_status open_cifar_dir(par_dataset *ds, int val_fraction_pct)
{
    char path[6][1024];
    const char *p[6];
    for (int i = 0; i < 6; i++) {
        PAR_FAIL_IF(!find_file(path[i], sizeof path[i], ds->dir, CIFAR_FILES[i]), PAR_ERR_IO,
                    "%s/%s: not found (nor %s.gz); expected the CIFAR-10 binary files "
                    "data_batch_1.bin .. data_batch_5.bin and test_batch.bin", ds->dir,
                    CIFAR_FILES[i], CIFAR_FILES[i]);
        p[i] = path[i];
    }
    PAR_TRY(par_cifar_load(&ds->train, p, 5, ds->n_classes));
    PAR_TRY(par_cifar_load(&ds->test, p + 5, 1, ds->n_classes));
    ds->n_val = ds->train.n * (size_t)val_fraction_pct / 100;
    ds->n_train = ds->train.n - ds->n_val;
    return PAR_OK;
}

static par_status open_dir(par_dataset *ds, int val_fraction_pct, int fmt)
{
    if (fmt == FMT_CIFAR) return open_cifar_dir(ds, val_fraction_pct);
    char path[4][1024];
    for (int i = 0; i < 4; i++)
        PAR_FAIL_IF(!find_file(path[i], sizeof path[i], ds->dir, IDX_FILES[i]), PAR_ERR_IO,
                    "%s/%s: not found (nor %s.gz)", ds->dir, IDX_FILES[i], IDX_FILES[i]);
    PAR_TRY(par_idx_load(&ds->train, path[0], path[1], ds->n_classes));
    PAR_TRY(par_idx_load(&ds->test, path[2], path[3], ds->n_classes));
    PAR_FAIL_IF(ds->test.height != ds->train.height || ds->test.width != ds->train.width,
                PAR_ERR_FORMAT, "%s: images are %zux%zu, but %s has %zux%zu; expected equal",
                path[2], ds->test.height, ds->test.width, path[0], ds->train.height,
                ds->train.width);
    ds->n_val = ds->train.n * (size_t)val_fraction_pct / 100;
    ds->n_train = ds->train.n - ds->n_val;
    return PAR_OK;
}

par_status par_dataset_open(par_dataset *ds, const char *what, int val_fraction_pct)
{
    memset(ds, 0, sizeof *ds);
    PAR_FAIL_IF(!what || !*what, PAR_ERR_CONFIG, "no dataset name or folder given");
    PAR_FAIL_IF(val_fraction_pct < 0 || val_fraction_pct >= 100, PAR_ERR_CONFIG,
                "%s: validation fraction %d%%, expected 0..99", what, val_fraction_pct);
    ds->n_classes = 10;
    snprintf(ds->name, sizeof ds->name, "%s", what);
    int fmt = FMT_IDX;
    if (strchr(what, '/') || is_dir(what)) {   // a path, or a folder here: a folder
        PAR_FAIL_IF(strlen(what) >= sizeof ds->dir, PAR_ERR_CONFIG,
                    "%s: folder path longer than %zu bytes", what, sizeof ds->dir - 1);
        PAR_FAIL_IF(!is_dir(what), PAR_ERR_IO, "%s: no such folder", what);
        memcpy(ds->dir, what, strlen(what) + 1);
        fmt = folder_format(ds->dir);
        char sub[1024];
        int n = snprintf(sub, sizeof sub, "%s/%s", what, CIFAR_SUB);
        if (fmt == FMT_IDX && first_missing(ds->dir, FMT_IDX) >= 0 && n > 0 &&
            (size_t)n < sizeof ds->dir && is_dir(sub)) {   // the unpacked archive's parent
            memcpy(ds->dir, sub, (size_t)n + 1);
            fmt = FMT_CIFAR;
        }
    } else {
        PAR_TRY(resolve_name(ds->dir, sizeof ds->dir, what));
        fmt = strcmp(what, "cifar10") == 0 ? FMT_CIFAR : FMT_IDX;
    }
    par_status st = open_dir(ds, val_fraction_pct, fmt);
    if (st != PAR_OK) {
        par_dataset_free(ds);
        return st;
    }
    return PAR_OK;
}

// The records of a batch are scattered over the dataset (tens of MB): each
// row's first cache lines would miss. The row AHEAD records on is requested
// while this one is converted.
enum { AHEAD = 2 };
static void prefetch_row(const uint8_t *p, size_t n)
{
    for (size_t k = 0; k < n; k += 64) __builtin_prefetch(p + k);
}

void par_data_gather(const par_images *im, const size_t *idx, size_t B, par_dtype dt, void *x,
                     int32_t *labels)
{
    const size_t nf = im->n_features;
    if (im->values) {   // resampled: the values were rounded to the dtype at load time
        assert(im->values_dt == dt || im->values_dt == PAR_F64);
        const size_t sz = par_dtype_size(dt);
        for (size_t s = 0; s < B; s++) {
            assert(idx[s] < im->n);
            if (im->values_dt == dt) {
                memcpy((char *)x + s * nf * sz, (const char *)im->values + idx[s] * nf * sz,
                       nf * sz);
            } else {
                const double *v = (const double *)im->values + idx[s] * nf;
                float *y = (float *)x + s * nf;
                for (size_t f = 0; f < nf; f++) y[f] = (float)v[f];
            }
        }
    } else if (dt == PAR_F64) {
        double lut[256], *y = x;
        for (int p = 0; p < 256; p++) lut[p] = (double)p / 255.0;
        for (size_t s = 0; s < B; s++) {
            assert(idx[s] < im->n);
            if (s + AHEAD < B) prefetch_row(im->pixels + idx[s + AHEAD] * nf, nf);
            const uint8_t *px = im->pixels + idx[s] * nf;
            for (size_t f = 0; f < nf; f++) y[s * nf + f] = lut[px[f]];
        }
    } else {
        float lut[256], *y = x;
        for (int p = 0; p < 256; p++) lut[p] = (float)p / 255.0f;
        for (size_t s = 0; s < B; s++) {
            assert(idx[s] < im->n);
            if (s + AHEAD < B) prefetch_row(im->pixels + idx[s + AHEAD] * nf, nf);
            const uint8_t *px = im->pixels + idx[s] * nf;
            for (size_t f = 0; f < nf; f++) y[s * nf + f] = lut[px[f]];
        }
    }
    if (labels)
        for (size_t s = 0; s < B; s++) labels[s] = im->labels[idx[s]];
}

void par_data_batch_fill(void *batch, size_t lo, size_t hi, void *x, int32_t *labels)
{
    const par_data_batch *b = batch;
    const size_t row = b->im->n_features * par_dtype_size(b->dt);
    if (hi > lo)
        par_data_gather(b->im, b->idx + lo, hi - lo, b->dt, (char *)x + lo * row, labels + lo);
}
