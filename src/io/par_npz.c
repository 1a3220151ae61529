// Weights as NumPy .npz: a zip of ".npy" members (format 1.0, little-endian,
// C order), written uncompressed with libzip; stored or deflated members are
// read, as numpy.savez and numpy.savez_compressed write them. Not a general
// .npy reader: '<f4'/'<f8' (and, for par_npz_read_ints, '<i4'/'<i8'), rank
// 0..4, C order.
// Tested by tests/unit/test_io.c (cross-checked with numpy.load when it is there).
#define _POSIX_C_SOURCE 200809L

#include "par_npz.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "par_hash.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "par_npz.c copies array data as little-endian bytes"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64        // numpy >= 1.24 aligns the data to 64 bytes
#define NPY_HEADER_MAX 384  // our own headers: dict < 256 bytes, padded to 64
#define MAX_RANK 4
#define SHAPE_STR 128       // "(" + 4 x 20 digits + separators + ")"
// Fixed member time (2000-01-01 12:00 UTC) so equal weights give equal files.
#define MEMBER_MTIME ((time_t)946728000)

// Python's repr of a shape tuple: "(256, 784)", "(4,)", "()".
static void format_shape(char buf[SHAPE_STR], const size_t *shape, int ndim)
{
    int k = snprintf(buf, SHAPE_STR, "(");
    for (int d = 0; d < ndim; d++) {
        k += snprintf(buf + k, SHAPE_STR - (size_t)k, d ? ", %zu" : "%zu", shape[d]);
    }
    snprintf(buf + k, SHAPE_STR - (size_t)k, ndim == 1 ? ",)" : ")");
}

// Product of the shape into *count; 0 if it overflows size_t.
static int shape_count(size_t *count, const size_t *shape, int ndim)
{
    size_t c = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] != 0 && c > SIZE_MAX / shape[d]) return 0;
        c *= shape[d];
    }
    *count = c;
    return 1;
}

static char *tmp_path(const char *path)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (tmp) snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    return tmp;
}

// Makes tmp durable, then moves it over path in one step.
static par_status commit(const char *tmp, const char *path)
{
    int fd = open(tmp, O_RDONLY);
    PAR_FAIL_IF(fd < 0, PAR_ERR_IO, "cannot reopen %s: %s", tmp, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    PAR_FAIL_IF(rc != 0, PAR_ERR_IO, "cannot sync %s: %s", tmp, strerror(err));
    PAR_FAIL_IF(rename(tmp, path) != 0, PAR_ERR_IO, "cannot rename %s to %s: %s", tmp, path,
                strerror(errno));
    return PAR_OK;
}

// ---- writing ----

// The .npy 1.0 preamble of a: magic, version, header length, the dict padded
// with spaces and ended by '\n' so that the data starts at a multiple of
// NPY_ALIGN. Returns its length.
static size_t npy_header(char buf[NPY_HEADER_MAX], const par_array *a)
{
    char shape[SHAPE_STR];
    format_shape(shape, a->shape, a->ndim);
    char dict[256];
    const char *descr = a->int_bytes == 8 ? "<i8" : a->int_bytes == 4 ? "<i4"
                        : a->dtype == PAR_F64 ? "<f8" : "<f4";
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    assert(n > 0 && (size_t)n < sizeof dict);
    size_t pre = NPY_MAGIC_LEN + 2 + 2;
    size_t total = pre + (size_t)n + 1;
    total += (NPY_ALIGN - total % NPY_ALIGN) % NPY_ALIGN;
    assert(total <= NPY_HEADER_MAX);
    size_t hlen = total - pre;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + pre, dict, (size_t)n);
    memset(buf + pre + n, ' ', total - 1 - pre - (size_t)n);
    buf[total - 1] = '\n';
    return total;
}

static par_status check_array(const char *path, const par_array *a, size_t i)
{
    PAR_FAIL_IF(a->name[0] == '\0' || !memchr(a->name, '\0', sizeof a->name), PAR_ERR_CONFIG,
                "%s: array %zu has an empty or unterminated name", path, i);
    PAR_FAIL_IF(a->dtype != PAR_F32 && a->dtype != PAR_F64, PAR_ERR_CONFIG,
                "%s: array '%s' has an unknown dtype %d", path, a->name, (int)a->dtype);
    PAR_FAIL_IF(a->int_bytes != 0 && a->int_bytes != 4 && a->int_bytes != 8, PAR_ERR_CONFIG,
                "%s: array '%s' has integers of %d bytes (4 or 8)", path, a->name, a->int_bytes);
    PAR_FAIL_IF(a->ndim < 0 || a->ndim > MAX_RANK, PAR_ERR_CONFIG,
                "%s: array '%s' has rank %d (0..%d supported)", path, a->name, a->ndim, MAX_RANK);
    size_t count = 0;
    char shape[SHAPE_STR];
    format_shape(shape, a->shape, a->ndim);
    PAR_FAIL_IF(!shape_count(&count, a->shape, a->ndim) || count > SIZE_MAX / 8, PAR_ERR_CONFIG,
                "%s: array '%s': shape %s is too large", path, a->name, shape);
    PAR_FAIL_IF(count != a->count, PAR_ERR_CONFIG,
                "%s: array '%s': count %zu does not match shape %s", path, a->name, a->count,
                shape);
    PAR_FAIL_IF(count > 0 && !a->data, PAR_ERR_CONFIG, "%s: array '%s' has no data", path,
                a->name);
    return PAR_OK;
}

static par_status add_member(zip_t *za, const char *path, const par_array *a)
{
    char head[NPY_HEADER_MAX];
    size_t hlen = npy_header(head, a);
    size_t nbytes = a->count * par_array_elem_size(a);
    char *buf = malloc(hlen + nbytes);
    PAR_FAIL_IF(!buf, PAR_ERR_ALLOC, "%s: out of memory for array '%s' (%zu bytes)", path, a->name,
                hlen + nbytes);
    memcpy(buf, head, hlen);
    if (nbytes) memcpy(buf + hlen, a->data, nbytes);
    zip_source_t *src = zip_source_buffer(za, buf, hlen + nbytes, 1);  // frees buf
    if (!src) {
        free(buf);
        return par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "%s: array '%s': %s", path,
                             a->name, zip_strerror(za));
    }
    char member[sizeof a->name + 4];
    snprintf(member, sizeof member, "%s.npy", a->name);
    zip_int64_t idx = zip_file_add(za, member, src, ZIP_FL_ENC_GUESS);
    if (idx < 0) {
        zip_source_free(src);
        int dup = zip_error_code_zip(zip_get_error(za)) == ZIP_ER_EXISTS;
        return par_set_error(dup ? PAR_ERR_CONFIG : PAR_ERR_IO, __FILE__, __LINE__,
                             "%s: cannot add array '%s': %s", path, a->name,
                             dup ? "duplicate name" : zip_strerror(za));
    }
    PAR_FAIL_IF(zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0 ||
                    zip_file_set_mtime(za, (zip_uint64_t)idx, MEMBER_MTIME, 0) != 0,
                PAR_ERR_IO, "%s: array '%s': %s", path, a->name, zip_strerror(za));
    return PAR_OK;
}

static par_status write_zip(const char *tmp, const char *path, const par_array *arrays, size_t n)
{
    int err = 0;
    zip_t *za = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        par_status st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot create %s: %s", tmp,
                                      zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        par_status st = add_member(za, path, &arrays[i]);
        if (st != PAR_OK) {
            zip_discard(za);
            return st;
        }
    }
    if (zip_close(za) != 0) {
        par_status st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot write %s: %s", path,
                                      zip_strerror(za));
        zip_discard(za);
        return st;
    }
    return PAR_OK;
}

// libzip writes no file for an archive without members; numpy.savez writes
// the end-of-central-directory record alone. So do we.
static par_status write_empty_zip(const char *tmp, const char *path)
{
    static const unsigned char eocd[22] = {0x50, 0x4b, 0x05, 0x06};
    FILE *f = fopen(tmp, "wb");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    size_t w = fwrite(eocd, 1, sizeof eocd, f);
    int rc = fclose(f);
    PAR_FAIL_IF(w != sizeof eocd || rc != 0, PAR_ERR_IO, "cannot write %s", path);
    return PAR_OK;
}

par_status par_npz_write(const char *path, const par_array *arrays, size_t n)
{
    PAR_TRY(par_out_check(path));
    for (size_t i = 0; i < n; i++) PAR_TRY(check_array(path, &arrays[i], i));
    char *tmp = tmp_path(path);
    PAR_FAIL_IF(!tmp, PAR_ERR_ALLOC, "%s: out of memory", path);
    par_status st = n ? write_zip(tmp, path, arrays, n) : write_empty_zip(tmp, path);
    if (st == PAR_OK) st = commit(tmp, path);
    if (st != PAR_OK) remove(tmp);
    free(tmp);
    return st;
}

// ---- reading ----

typedef struct npy_dict {
    char descr[16];
    int fortran_order;
    int ndim;
    size_t shape[MAX_RANK];
} npy_dict;

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

static int eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int eat_word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
    c->p += n;
    return 1;
}

// A quoted Python string without escapes, into buf; 0 if none or too long.
static int parse_string(cursor *c, char *buf, size_t cap)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap) return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int parse_size(cursor *c, size_t *v)
{
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
    size_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        size_t d = (size_t)(*c->p - '0');
        if (x > (SIZE_MAX - d) / 10) return 0;
        x = 10 * x + d;
        c->p++;
    }
    if (c->p < c->end && *c->p == 'L') c->p++;  // Python 2 long
    *v = x;
    return 1;
}

// A tuple of non-negative ints with Python's rules: "(4,)" is rank 1, "(4)" no tuple.
static const char *parse_shape(cursor *c, npy_dict *h)
{
    if (!eat(c, '(')) return "shape is not a tuple";
    h->ndim = 0;
    if (eat(c, ')')) return NULL;
    for (;;) {
        size_t v;
        if (!parse_size(c, &v)) return "shape is not a tuple of non-negative integers";
        if (h->ndim == MAX_RANK) return "shape has more than 4 dimensions (rank 0..4 supported)";
        h->shape[h->ndim++] = v;
        int comma = eat(c, ',');
        if (eat(c, ')')) return h->ndim == 1 && !comma ? "shape is not a tuple" : NULL;
        if (!comma) return "shape is not a tuple of non-negative integers";
    }
}

// The header dict: exactly the keys 'descr', 'fortran_order', 'shape'.
// Returns 0, or -1 with the reason in why.
static int parse_dict(npy_dict *h, const char *s, size_t len, char *why, size_t why_cap)
{
    cursor c = {s, s + len};
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    const char *err = NULL;
    char key[32];
    if (!eat(&c, '{')) {
        snprintf(why, why_cap, "header is not a dict");
        return -1;
    }
    while (!err && !eat(&c, '}')) {
        if (!parse_string(&c, key, sizeof key) || !eat(&c, ':')) {
            err = "header is not a dict with string keys";
        } else if (!strcmp(key, "descr")) {
            if (seen_descr++) err = "duplicate key 'descr'";
            else if (!parse_string(&c, h->descr, sizeof h->descr)) err = "descr is no dtype string";
        } else if (!strcmp(key, "fortran_order")) {
            if (seen_fortran++) err = "duplicate key 'fortran_order'";
            else if (eat_word(&c, "True")) h->fortran_order = 1;
            else if (eat_word(&c, "False")) h->fortran_order = 0;
            else err = "fortran_order is not True or False";
        } else if (!strcmp(key, "shape")) {
            if (seen_shape++) err = "duplicate key 'shape'";
            else err = parse_shape(&c, h);
        } else {
            snprintf(why, why_cap, "unexpected key '%s'", key);
            return -1;
        }
        if (!err && !eat(&c, ',')) {
            if (!eat(&c, '}')) err = "header is not a dict";
            break;
        }
    }
    skip_space(&c);
    if (!err && c.p != c.end) err = "characters after the header dict";
    if (!err && !seen_descr) err = "missing key 'descr'";
    if (!err && !seen_fortran) err = "missing key 'fortran_order'";
    if (!err && !seen_shape) err = "missing key 'shape'";
    if (!err) return 0;
    snprintf(why, why_cap, "%s", err);
    return -1;
}

// Checks the .npy bytes b[0..size) and fills a's dtype (int_bytes when ints
// are taken), shape and count. *data_off receives where the data starts.
static par_status parse_npy(par_array *a, size_t *data_off, const unsigned char *b, size_t size,
                            const char *path, const char *member, int ints)
{
    PAR_FAIL_IF(size < NPY_MAGIC_LEN + 4 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0,
                PAR_ERR_FORMAT, "%s: member '%s' is not a .npy array (no NUMPY magic)", path,
                member);
    unsigned major = b[6], minor = b[7];
    size_t pre, hlen;
    if (major == 1) {
        pre = 10;
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else {
        PAR_FAIL_IF(major != 2 && major != 3, PAR_ERR_FORMAT,
                    "%s: member '%s': .npy format version %u.%u not supported", path, member,
                    major, minor);
        PAR_FAIL_IF(size < 12, PAR_ERR_FORMAT, "%s: member '%s': header is truncated", path,
                    member);
        pre = 12;
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    }
    PAR_FAIL_IF(minor != 0, PAR_ERR_FORMAT,
                "%s: member '%s': .npy format version %u.%u not supported", path, member, major,
                minor);
    PAR_FAIL_IF(hlen > size - pre, PAR_ERR_FORMAT,
                "%s: member '%s': header length %zu runs past the end of the member", path, member,
                hlen);
    npy_dict h = {0};
    char why[96];
    PAR_FAIL_IF(parse_dict(&h, (const char *)b + pre, hlen, why, sizeof why) != 0,
                PAR_ERR_FORMAT, "%s: member '%s': bad .npy header: %s", path, member, why);
    a->int_bytes = 0;
    if (!strcmp(h.descr, "<f4")) {
        a->dtype = PAR_F32;
    } else if (ints && (!strcmp(h.descr, "<i4") || !strcmp(h.descr, "<i8"))) {
        a->dtype = PAR_F32;
        a->int_bytes = h.descr[2] == '8' ? 8 : 4;
    } else {
        PAR_FAIL_IF(strcmp(h.descr, "<f8") != 0, PAR_ERR_FORMAT,
                    "%s: member '%s': dtype '%s' not supported (only '<f4' and '<f8'%s)", path,
                    member, h.descr, ints ? ", '<i4' and '<i8'" : "");
        a->dtype = PAR_F64;
    }
    PAR_FAIL_IF(h.fortran_order, PAR_ERR_FORMAT,
                "%s: member '%s': fortran_order True not supported (save in C order)", path,
                member);
    char shape[SHAPE_STR];
    format_shape(shape, h.shape, h.ndim);
    size_t count = 0;
    size_t esize = par_array_elem_size(a);
    PAR_FAIL_IF(!shape_count(&count, h.shape, h.ndim) || count > SIZE_MAX / esize,
                PAR_ERR_FORMAT, "%s: member '%s': shape %s is too large", path, member, shape);
    size_t have = size - pre - hlen;
    PAR_FAIL_IF(have != count * esize, PAR_ERR_FORMAT,
                "%s: member '%s': %zu data bytes, expected %zu for shape %s of '%s'", path,
                member, have, count * esize, shape, h.descr);
    a->ndim = h.ndim;
    memcpy(a->shape, h.shape, sizeof a->shape);
    a->count = count;
    *data_off = pre + hlen;
    return PAR_OK;
}

// Reads member i whole into a freshly allocated *out of *size bytes.
static par_status read_bytes(unsigned char **out, zip_t *za, zip_uint64_t i, size_t size,
                             const char *path, const char *member)
{
    unsigned char *buf = malloc(size ? size : 1);
    PAR_FAIL_IF(!buf, PAR_ERR_ALLOC, "%s: member '%s': out of memory (%zu bytes)", path, member,
                size);
    zip_file_t *zf = zip_fopen_index(za, i, 0);
    if (!zf) {
        free(buf);
        return par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: member '%s': %s", path,
                             member, zip_strerror(za));
    }
    size_t got = 0;
    zip_int64_t r = 1;
    while (got < size && (r = zip_fread(zf, buf + got, size - got)) > 0) got += (size_t)r;
    // One more read reaches the end, where libzip checks the size and CRC.
    unsigned char extra;
    if (r > 0) r = zip_fread(zf, &extra, 1);
    if (r != 0 || got != size) {
        par_status st = par_set_error(
            PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: member '%s': %s", path, member,
            r < 0 ? zip_file_strerror(zf) : "size differs from the zip directory's");
        zip_fclose(zf);
        free(buf);
        return st;
    }
    zip_fclose(zf);
    *out = buf;
    return PAR_OK;
}

static par_status read_member(par_array *a, zip_t *za, zip_uint64_t i, const char *path,
                              zip_uint64_t file_size, int ints)
{
    zip_stat_t sb;
    zip_stat_init(&sb);
    PAR_FAIL_IF(zip_stat_index(za, i, 0, &sb) != 0, PAR_ERR_FORMAT, "%s: member %llu: %s", path,
                (unsigned long long)i, zip_strerror(za));
    const char *member = (sb.valid & ZIP_STAT_NAME) ? sb.name : "?";
    size_t len = strlen(member);
    PAR_FAIL_IF(len <= 4 || strcmp(member + len - 4, ".npy") != 0, PAR_ERR_FORMAT,
                "%s: member '%s' is not a .npy array", path, member);
    PAR_FAIL_IF(len - 4 >= sizeof a->name, PAR_ERR_FORMAT,
                "%s: member '%s': name longer than %zu characters", path, member,
                sizeof a->name - 1);
    PAR_FAIL_IF(!(sb.valid & ZIP_STAT_SIZE) || !(sb.valid & ZIP_STAT_COMP_METHOD) ||
                    sb.size > SIZE_MAX,
                PAR_ERR_FORMAT, "%s: member '%s': size or method unknown", path, member);
    PAR_FAIL_IF(sb.comp_method != ZIP_CM_STORE && sb.comp_method != ZIP_CM_DEFLATE,
                PAR_ERR_FORMAT,
                "%s: member '%s': compression method %d not supported (stored or deflated only)",
                path, member, (int)sb.comp_method);
    PAR_FAIL_IF((sb.valid & ZIP_STAT_ENCRYPTION_METHOD) && sb.encryption_method != ZIP_EM_NONE,
                PAR_ERR_FORMAT, "%s: member '%s' is encrypted", path, member);
    // Sizes from the zip directory are claims: before allocating, check them
    // against the file (found by fuzzing: a 4 GiB claim in a 200-byte file).
    // Deflate expands at most 1032:1.
    PAR_FAIL_IF(!(sb.valid & ZIP_STAT_COMP_SIZE) || sb.comp_size > file_size ||
                    (sb.comp_method == ZIP_CM_STORE ? sb.size != sb.comp_size
                                                    : sb.size / 1032 > sb.comp_size),
                PAR_ERR_FORMAT, "%s: member '%s': size %llu impossible for %llu stored bytes",
                path, member, (unsigned long long)sb.size, (unsigned long long)sb.comp_size);

    size_t size = (size_t)sb.size;
    unsigned char *buf = NULL;
    PAR_TRY(read_bytes(&buf, za, i, size, path, member));
    size_t off = 0;
    par_status st = parse_npy(a, &off, buf, size, path, member, ints);
    if (st != PAR_OK) {
        free(buf);
        return st;
    }
    // Keep only the data: move it to the front and shrink the block.
    size_t nbytes = size - off;
    memmove(buf, buf + off, nbytes);
    unsigned char *shrunk = realloc(buf, nbytes ? nbytes : 1);
    a->data = shrunk ? shrunk : buf;
    memcpy(a->name, member, len - 4);
    a->name[len - 4] = '\0';
    return PAR_OK;
}

static par_status open_error(const char *path, int code)
{
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    int io = code == ZIP_ER_OPEN || code == ZIP_ER_NOENT || code == ZIP_ER_READ ||
             code == ZIP_ER_SEEK;
    par_status st = par_set_error(
        io ? PAR_ERR_IO : code == ZIP_ER_MEMORY ? PAR_ERR_ALLOC : PAR_ERR_FORMAT, __FILE__,
        __LINE__, "%s: %s", path,
        code == ZIP_ER_NOZIP ? "not a zip archive (an .npz is one)" : zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return st;
}

static par_status npz_read(par_npz *out, const char *path, int ints)
{
    out->n = 0;
    out->arrays = NULL;
    struct stat fs;
    PAR_FAIL_IF(stat(path, &fs) != 0, PAR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    PAR_FAIL_IF(!S_ISREG(fs.st_mode), PAR_ERR_IO, "cannot read %s: not a regular file", path);
    // libzip takes an empty file for an empty archive; numpy.load rejects it.
    PAR_FAIL_IF(fs.st_size == 0, PAR_ERR_FORMAT, "%s: not a zip archive (empty file)", path);
    int err = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &err);
    if (!za) return open_error(path, err);

    par_status st = PAR_OK;
    par_npz z = {0, NULL};
    zip_int64_t n = zip_get_num_entries(za, 0);
    if (n > 0) {
        z.arrays = calloc((size_t)n, sizeof *z.arrays);
        if (!z.arrays) {
            st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "%s: out of memory", path);
        }
    }
    for (zip_int64_t i = 0; st == PAR_OK && i < n; i++) {
        st = read_member(&z.arrays[i], za, (zip_uint64_t)i, path, (zip_uint64_t)fs.st_size,
                         ints);
        if (st == PAR_OK) z.n++;
    }
    zip_discard(za);
    if (st != PAR_OK) {
        par_npz_free(&z);
        return st;
    }
    *out = z;
    return PAR_OK;
}

par_status par_npz_read(par_npz *out, const char *path) { return npz_read(out, path, 0); }

par_status par_npz_read_ints(par_npz *out, const char *path) { return npz_read(out, path, 1); }

void par_npz_free(par_npz *z)
{
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) free(z->arrays[i].data);
    free(z->arrays);
    z->n = 0;
    z->arrays = NULL;
}

// ---- weights ----

static par_status check_views(const char *path, const par_model *m)
{
    PAR_FAIL_IF(m->n_views < 0 || m->n_views > PAR_MAX_VIEWS, PAR_ERR_CONFIG,
                "%s: model '%s' has %d views", path, m->spec, m->n_views);
    for (int v = 0; v < m->n_views; v++) {
        const par_view *w = &m->views[v];
        PAR_FAIL_IF(w->offset > m->n_params || w->count > m->n_params - w->offset,
                    PAR_ERR_CONFIG, "%s: view '%s' lies outside the %zu parameters of '%s'",
                    path, w->name, m->n_params, m->spec);
        PAR_FAIL_IF(w->ndim < 0 || w->ndim > MAX_RANK, PAR_ERR_CONFIG,
                    "%s: view '%s' has rank %d", path, w->name, w->ndim);
        size_t count = 0;
        PAR_FAIL_IF(!shape_count(&count, w->shape, w->ndim) || count != w->count, PAR_ERR_CONFIG,
                    "%s: view '%s': count %zu does not match its shape", path, w->name, w->count);
    }
    return PAR_OK;
}

par_status par_weights_save(const char *path, const par_model *m, par_dtype dt, const void *params)
{
    PAR_TRY(check_views(path, m));
    par_array arrays[PAR_MAX_VIEWS];
    size_t esize = par_dtype_size(dt);
    for (int v = 0; v < m->n_views; v++) {
        const par_view *w = &m->views[v];
        par_array *a = &arrays[v];
        memset(a, 0, sizeof *a);
        snprintf(a->name, sizeof a->name, "%s", w->name);
        a->dtype = dt;
        a->ndim = w->ndim;
        memcpy(a->shape, w->shape, sizeof a->shape);
        a->count = w->count;
        // par_npz_write only reads the data.
        a->data = (void *)((const char *)params + w->offset * esize);
    }
    return par_npz_write(path, arrays, (size_t)m->n_views);
}

static int same_shape(const par_array *a, const par_view *w)
{
    if (a->ndim != w->ndim) return 0;
    for (int d = 0; d < w->ndim; d++) {
        if (a->shape[d] != w->shape[d]) return 0;
    }
    return 1;
}

// found[v] = the array of view v; fails on a missing, misshapen or extra array.
static par_status match_views(const par_array **found, const par_npz *z, const par_model *m,
                              const char *path)
{
    char want[SHAPE_STR], have[SHAPE_STR];
    for (int v = 0; v < m->n_views; v++) {
        const par_view *w = &m->views[v];
        format_shape(want, w->shape, w->ndim);
        found[v] = NULL;
        for (size_t i = 0; i < z->n && !found[v]; i++) {
            if (!strcmp(z->arrays[i].name, w->name)) found[v] = &z->arrays[i];
        }
        PAR_FAIL_IF(!found[v], PAR_ERR_FORMAT,
                    "%s: array '%s' missing (expected shape %s for model '%s')", path, w->name,
                    want, m->spec);
        format_shape(have, found[v]->shape, found[v]->ndim);
        PAR_FAIL_IF(!same_shape(found[v], w), PAR_ERR_FORMAT,
                    "%s: array '%s' has shape %s, expected %s for model '%s'", path, w->name,
                    have, want, m->spec);
    }
    for (size_t i = 0; i < z->n; i++) {
        const par_array *a = &z->arrays[i];
        // A checkpoint's optimizer state and best-epoch weights.
        if (strncmp(a->name, "opt.", 4) == 0 || strncmp(a->name, "best.", 5) == 0) continue;
        int v = 0;
        while (v < m->n_views && strcmp(a->name, m->views[v].name) != 0) v++;
        format_shape(have, a->shape, a->ndim);
        PAR_FAIL_IF(v == m->n_views, PAR_ERR_FORMAT,
                    "%s: extra array '%s' with shape %s is not a parameter of model '%s'", path,
                    a->name, have, m->spec);
        PAR_FAIL_IF(found[v] != a, PAR_ERR_FORMAT, "%s: array '%s' appears twice", path, a->name);
    }
    return PAR_OK;
}

static void convert(void *dst, par_dtype dt, const void *src, par_dtype st, size_t n)
{
    if (n == 0) return;
    if (dt == st) {
        memcpy(dst, src, n * par_dtype_size(dt));
    } else if (dt == PAR_F32) {
        float *d = dst;
        const double *s = src;
        for (size_t i = 0; i < n; i++) d[i] = (float)s[i];
    } else {
        double *d = dst;
        const float *s = src;
        for (size_t i = 0; i < n; i++) d[i] = (double)s[i];
    }
}

par_status par_weights_load(const char *path, const par_model *m, par_dtype dt, void *params)
{
    PAR_TRY(check_views(path, m));
    par_npz z;
    PAR_TRY(par_npz_read(&z, path));
    const par_array *found[PAR_MAX_VIEWS];
    par_status st = match_views(found, &z, m, path);
    if (st == PAR_OK) {
        size_t esize = par_dtype_size(dt);
        for (int v = 0; v < m->n_views; v++) {
            const par_view *w = &m->views[v];
            convert((char *)params + w->offset * esize, dt, found[v]->data, found[v]->dtype,
                    w->count);
        }
    }
    par_npz_free(&z);
    return st;
}
