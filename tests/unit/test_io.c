// Unit tests for src/io: .npz round trips, exact .npy headers, deflated and
// numpy-written archives, bad inputs, atomic writes, SHA-256 known answers and
// the JSONL log. Cross-checks with numpy.load when /usr/bin/python3 has numpy.
// Run: cmake --build build --target test_io && build/tests/unit/test_io
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "par_hash.h"
#include "par_log.h"
#include "par_npz.h"
#include "par_test.h"

static char dir[64];

// dir/name into a rotating static buffer (a few paths live at once).
static const char *tpath(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

// Number of files in dir whose name contains ".tmp.".
static int tmp_leftovers(void)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static int error_names(const char *a, const char *b)
{
    const char *msg = par_last_error();
    int ok = strstr(msg, a) && (!b || strstr(msg, b));
    if (!ok) printf("  message: %s\n", msg);
    return ok;
}

static void add_view(par_model *m, const char *name, int ndim, size_t d0, size_t d1)
{
    par_view *v = &m->views[m->n_views++];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->ndim = ndim;
    v->shape[0] = d0;
    v->shape[1] = d1;
    v->count = ndim == 1 ? d0 : d0 * d1;
    v->offset = m->n_params;
    m->n_params += v->count;
}

// mlp:3-4-2 laid out by hand (par_model_parse is not used here).
static void make_model(par_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->spec, sizeof m->spec, "mlp:3-4-2");
    m->n_layers = 2;
    size_t sizes[3] = {3, 4, 2};
    for (int l = 0; l < 2; l++) {
        char name[32];
        par_layer *L = &m->layers[l];
        L->kind = PAR_LAYER_DENSE;
        L->act = l == 0 ? PAR_ACT_RELU : PAR_ACT_NONE;
        L->n_in = sizes[l];
        L->n_out = sizes[l + 1];
        L->w_view = m->n_views;
        snprintf(name, sizeof name, "layer%d.weight", l);
        add_view(m, name, 2, L->n_out, L->n_in);
        L->b_view = m->n_views;
        snprintf(name, sizeof name, "layer%d.bias", l);
        add_view(m, name, 1, L->n_out, 0);
    }
    m->n_inputs = 3;
    m->n_classes = 2;
    m->max_width = 4;
}

// Parameter i is (i - 10) / 7 in f64, rounded once for f32
// (numpy: ((np.arange(n) - 10) / 7.0).astype(dtype)).
static void fill(void *p, par_dtype dt, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = ((double)i - 10) / 7.0;
        if (dt == PAR_F64) ((double *)p)[i] = x;
        else ((float *)p)[i] = (float)x;
    }
}

// A .npy member with the given dict and nbytes of data (a ramp of bytes),
// padded like numpy. Returns a malloc'd buffer of *len bytes.
static unsigned char *make_npy(size_t *len, const char *dict, size_t nbytes)
{
    size_t dl = strlen(dict);
    size_t total = 10 + dl + 1;
    total += (64 - total % 64) % 64;
    unsigned char *b = malloc(total + nbytes + 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)((total - 10) & 0xff);
    b[9] = (unsigned char)((total - 10) >> 8);
    memcpy(b + 10, dict, dl);
    memset(b + 10 + dl, ' ', total - 11 - dl);
    b[total - 1] = '\n';
    for (size_t i = 0; i < nbytes; i++) b[total + i] = (unsigned char)i;
    *len = total + nbytes;
    return b;
}

typedef struct member {
    const char *name;
    unsigned char *data;  // malloc'd, handed to libzip
    size_t len;
} member;

// Writes a zip of the members with compression method `method`; 1 on success.
static int write_zip(const char *path, member *ms, size_t n, zip_int32_t method)
{
    int err;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!za) return 0;
    for (size_t i = 0; i < n; i++) {
        zip_source_t *s = zip_source_buffer(za, ms[i].data, ms[i].len, 1);
        zip_int64_t idx = s ? zip_file_add(za, ms[i].name, s, 0) : -1;
        if (idx < 0 || zip_set_file_compression(za, (zip_uint64_t)idx, method, 9) != 0) {
            zip_discard(za);
            return 0;
        }
    }
    return zip_close(za) == 0;
}

// The four arrays of the test model, as members; `over` replaces one of them
// (by name) or adds itself when its name is new. Data of layer arrays is f32.
static int write_model_zip(const char *path, const member *over, zip_int32_t method)
{
    static const char *names[4] = {"layer0.weight.npy", "layer0.bias.npy", "layer1.weight.npy",
                                   "layer1.bias.npy"};
    static const char *dicts[4] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"};
    static const size_t counts[4] = {12, 4, 8, 2};
    member ms[5];
    size_t n = 0;
    int replaced = 0;
    for (int i = 0; i < 4; i++) {
        if (over && !strcmp(over->name, names[i])) {
            ms[n++] = *over;
            replaced = 1;
            continue;
        }
        ms[n].name = names[i];
        ms[n].data = make_npy(&ms[n].len, dicts[i], 4 * counts[i]);
        n++;
    }
    if (over && !replaced) ms[n++] = *over;
    return write_zip(path, ms, n, method);
}

// ---- npz ----

static void test_header_bytes(void)
{
    float data[12];
    fill(data, PAR_F32, 12);
    par_array a = {.name = "a", .dtype = PAR_F32, .ndim = 2, .shape = {4, 3}, .count = 12,
                   .data = data};
    const char *p = tpath("header.npz");
    par_check(par_npz_write(p, &a, 1) == PAR_OK, "npz header: write");

    // What numpy.save writes, less its optional growth spaces: 128 bytes.
    static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }";
    unsigned char want[128];
    memcpy(want, "\x93NUMPY\x01\x00\x76\x00", 10);  // hlen 118 = 128 - 10
    memcpy(want + 10, dict, sizeof dict - 1);       // 59 bytes
    memset(want + 69, ' ', 58);
    want[127] = '\n';

    int err;
    zip_t *za = zip_open(p, ZIP_RDONLY, &err);
    zip_stat_t sb;
    int ok = za && zip_get_num_entries(za, 0) == 1 && zip_stat_index(za, 0, 0, &sb) == 0 &&
             !strcmp(sb.name, "a.npy") && sb.size == 128 + sizeof data;
    par_check(ok, "npz header: one member a.npy of 128 + 48 bytes");
    par_check(ok && sb.comp_method == ZIP_CM_STORE, "npz header: member stored uncompressed");
    unsigned char got[128 + sizeof data];
    zip_file_t *zf = ok ? zip_fopen_index(za, 0, 0) : NULL;
    ok = zf && zip_fread(zf, got, sizeof got) == (zip_int64_t)sizeof got;
    if (zf) zip_fclose(zf);
    if (za) zip_discard(za);
    par_check(ok && memcmp(got, want, sizeof want) == 0, "npz header: bytes as numpy expects");
    par_check(ok && memcmp(got + 128, data, sizeof data) == 0, "npz header: data little-endian");

    // Rank 0 and rank 1 shapes print as Python tuples.
    double s = 2.5;
    par_array b[2] = {{.name = "s", .dtype = PAR_F64, .ndim = 0, .count = 1, .data = &s},
                      {.name = "v", .dtype = PAR_F64, .ndim = 1, .shape = {1}, .count = 1,
                       .data = &s}};
    p = tpath("header01.npz");
    ok = par_npz_write(p, b, 2) == PAR_OK;
    za = ok ? zip_open(p, ZIP_RDONLY, &err) : NULL;
    char h0[129] = {0}, h1[129] = {0};
    for (int i = 0; za && i < 2; i++) {
        zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
        ok = ok && zf && zip_fread(zf, i ? h1 : h0, 128) == 128;
        if (zf) zip_fclose(zf);
    }
    if (za) zip_discard(za);
    par_check(ok && strstr(h0 + 10, "'shape': (), }") && strstr(h1 + 10, "'shape': (1,), }") &&
                  strstr(h0 + 10, "'<f8'") && h0[127] == '\n' && h1[127] == '\n',
              "npz header: shapes () and (1,), descr <f8");

    // Integers (a batch's labels and record numbers): '<i4' and '<i8', read
    // back by par_npz_read_ints only; par_npz_read, for weights, refuses them.
    int32_t lab[3] = {7, -1, 2147483647};
    int64_t rec[2] = {5, (int64_t)1 << 40};
    par_array ia[2] = {{.name = "labels", .int_bytes = 4, .ndim = 1, .shape = {3}, .count = 3,
                        .data = lab},
                       {.name = "records", .int_bytes = 8, .ndim = 1, .shape = {2}, .count = 2,
                        .data = rec}};
    par_npz zi;
    p = tpath("ints.npz");
    ok = par_npz_write(p, ia, 2) == PAR_OK && par_npz_read_ints(&zi, p) == PAR_OK;
    par_check(ok && zi.n == 2 && zi.arrays[0].int_bytes == 4 && zi.arrays[1].int_bytes == 8 &&
                  memcmp(zi.arrays[0].data, lab, sizeof lab) == 0 &&
                  memcmp(zi.arrays[1].data, rec, sizeof rec) == 0,
              "npz: <i4 and <i8 arrays round trip, values as written");
    if (ok) par_npz_free(&zi);
    par_check(par_npz_read(&zi, p) == PAR_ERR_FORMAT && strstr(par_last_error(), "'<i4'"),
              "npz: par_npz_read refuses an integer array, naming its dtype");

    // No arrays: numpy's empty archive, read back as empty.
    par_npz z;
    p = tpath("empty_archive.npz");
    ok = par_npz_write(p, NULL, 0) == PAR_OK && par_npz_read(&z, p) == PAR_OK && z.n == 0;
    if (ok) par_npz_free(&z);
    par_check(ok, "npz: empty archive round trip");
}

static void test_round_trip(par_dtype dt)
{
    par_model m;
    make_model(&m);
    size_t es = par_dtype_size(dt);
    char *w = malloc(m.n_params * es), *r = malloc(m.n_params * es);
    fill(w, dt, m.n_params);
    memset(r, 0xab, m.n_params * es);
    const char *p = tpath(dt == PAR_F64 ? "rt64.npz" : "rt32.npz");
    char name[96];
    snprintf(name, sizeof name, "weights %s: save", par_dtype_name(dt));
    par_check(par_weights_save(p, &m, dt, w) == PAR_OK, name);
    snprintf(name, sizeof name, "weights %s: load", par_dtype_name(dt));
    par_check(par_weights_load(p, &m, dt, r) == PAR_OK, name);
    snprintf(name, sizeof name, "weights %s: round trip bitwise", par_dtype_name(dt));
    par_check(memcmp(w, r, m.n_params * es) == 0, name);

    par_npz z;
    int ok = par_npz_read(&z, p) == PAR_OK && z.n == (size_t)m.n_views;
    for (size_t i = 0; ok && i < z.n; i++) {
        const par_view *v = &m.views[i];
        const par_array *a = &z.arrays[i];
        ok = !strcmp(a->name, v->name) && a->dtype == dt && a->ndim == v->ndim &&
             a->count == v->count && !memcmp(a->shape, v->shape, sizeof(size_t) * 2) &&
             !memcmp(a->data, w + v->offset * es, v->count * es);
    }
    if (z.n) par_npz_free(&z);
    snprintf(name, sizeof name, "weights %s: arrays in view order, names, shapes",
             par_dtype_name(dt));
    par_check(ok, name);

    // The other dtype: widened exactly, or rounded once.
    par_dtype ot = dt == PAR_F64 ? PAR_F32 : PAR_F64;
    void *o = malloc(m.n_params * par_dtype_size(ot));
    ok = par_weights_load(p, &m, ot, o) == PAR_OK;
    for (size_t i = 0; ok && i < m.n_params; i++) {
        if (dt == PAR_F64) ok = ((float *)o)[i] == (float)((double *)w)[i];
        else ok = ((double *)o)[i] == (double)((float *)w)[i];
    }
    snprintf(name, sizeof name, "weights %s -> %s: converted", par_dtype_name(dt),
             par_dtype_name(ot));
    par_check(ok, name);
    free(o);
    free(w);
    free(r);
}

static void test_deflated(void)
{
    par_model m;
    make_model(&m);
    const char *p = tpath("deflate.npz");
    par_check(write_model_zip(p, NULL, ZIP_CM_DEFLATE), "deflated npz: written by libzip");
    int err;
    zip_t *za = zip_open(p, ZIP_RDONLY, &err);
    zip_stat_t sb;
    int ok = za && zip_stat_index(za, 0, 0, &sb) == 0 && sb.comp_method == ZIP_CM_DEFLATE;
    if (za) zip_discard(za);
    par_check(ok, "deflated npz: members are deflated");
    float r[26];
    ok = par_weights_load(p, &m, PAR_F32, r) == PAR_OK;
    // Each member's data is the byte ramp 0, 1, 2, ... of make_npy.
    unsigned char want[48];
    for (int i = 0; i < 48; i++) want[i] = (unsigned char)i;
    par_check(ok && !memcmp(r, want, 48) && !memcmp(r + 12, want, 16) &&
                  !memcmp(r + 16, want, 32) && !memcmp(r + 24, want, 8),
              "deflated npz: loads bitwise");
}

// One bad member (or file) -> PAR_ERR_FORMAT naming the file and `what`.
static void check_bad(const char *label, const member *over, const char *what)
{
    par_model m;
    make_model(&m);
    char file[64];
    snprintf(file, sizeof file, "bad_%s.npz", label);
    for (char *c = file; *c; c++) {
        if (*c == ' ') *c = '_';
    }
    const char *p = tpath(file);
    float r[26];
    for (int i = 0; i < 26; i++) r[i] = 7.0f;
    int ok = write_model_zip(p, over, ZIP_CM_STORE);
    par_clear_error();
    ok = ok && par_weights_load(p, &m, PAR_F32, r) == PAR_ERR_FORMAT && error_names(p, what);
    for (int i = 0; i < 26; i++) ok = ok && r[i] == 7.0f;
    char name[128];
    snprintf(name, sizeof name, "bad npz: %s -> format error naming file and %s", label, what);
    par_check(ok, name);
}

static member npy_member(const char *name, const char *dict, size_t nbytes)
{
    member mb = {name, NULL, 0};
    mb.data = make_npy(&mb.len, dict, nbytes);
    return mb;
}

static void test_bad_inputs(void)
{
    par_model m;
    make_model(&m);
    float r[26];

    const char *p = tpath("text.npz");
    FILE *f = fopen(p, "w");
    fputs("this is not a zip archive\n", f);
    fclose(f);
    par_check(par_weights_load(p, &m, PAR_F32, r) == PAR_ERR_FORMAT && error_names(p, "zip"),
              "bad npz: not a zip -> format error naming the file");
    p = tpath("empty.npz");
    fclose(fopen(p, "w"));
    par_check(par_weights_load(p, &m, PAR_F32, r) == PAR_ERR_FORMAT && error_names(p, "empty"),
              "bad npz: empty file -> format error");
    p = tpath("absent.npz");
    par_check(par_weights_load(p, &m, PAR_F32, r) == PAR_ERR_IO && error_names(p, NULL),
              "bad npz: missing file -> i/o error naming the file");

    const char *f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }";
    // Missing member: three of the model's four arrays.
    member ms[3];
    ms[0] = npy_member("layer0.weight.npy", f4, 48);
    ms[1] = npy_member("layer0.bias.npy",
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16);
    ms[2] = npy_member("layer1.weight.npy",
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", 32);
    p = tpath("bad_missing.npz");
    int ok = write_zip(p, ms, 3, ZIP_CM_STORE);
    ok = ok && par_weights_load(p, &m, PAR_F32, r) == PAR_ERR_FORMAT &&
         error_names(p, "'layer1.bias' missing") && error_names("(2,)", NULL);
    par_check(ok, "bad npz: missing member -> format error naming file, array, shape");

    member mb;
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48);
    check_bad("wrong shape", &mb, "'layer0.weight' has shape (3, 4), expected (4, 3)");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (12,), }", 48);
    check_bad("wrong rank", &mb, "has shape (12,), expected (4, 3)");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<i4', 'fortran_order': False, 'shape': (4, 3), }", 48);
    check_bad("descr i4", &mb, "'<i4'");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '>f4', 'fortran_order': False, 'shape': (4, 3), }", 48);
    check_bad("descr big endian", &mb, "'>f4'");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f2', 'fortran_order': False, 'shape': (4, 3), }", 24);
    check_bad("descr f2", &mb, "'<f2'");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 3), }", 48);
    check_bad("fortran order", &mb, "fortran_order True");
    mb = npy_member("layer0.weight.npy", f4, 44);
    check_bad("truncated data", &mb, "44 data bytes, expected 48");
    mb = npy_member("layer0.weight.npy", f4, 52);
    check_bad("extra data", &mb, "52 data bytes, expected 48");
    mb = npy_member("layer0.weight.npy", f4, 48);
    mb.len = 40;  // cut inside the header
    check_bad("truncated header", &mb, "layer0.weight.npy");
    mb = npy_member("layer0.weight.npy", f4, 48);
    mb.data[0] = 'X';
    check_bad("bad magic", &mb, "magic");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 12), }", 48);
    check_bad("rank 5", &mb, "more than 4 dimensions");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (12), }", 48);
    check_bad("shape not a tuple", &mb, "not a tuple");
    mb = npy_member("layer0.weight.npy",
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), 'x': 1, }", 48);
    check_bad("unknown key", &mb, "unexpected key 'x'");
    mb = npy_member("layer0.weight.npy", "{'descr': '<f4', 'shape': (4, 3), }", 48);
    check_bad("missing key", &mb, "missing key 'fortran_order'");
    mb = npy_member("layer0.weight.npy", "[1, 2]", 48);
    check_bad("header not a dict", &mb, "not a dict");
    mb = npy_member("layer2.weight.npy",
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
    check_bad("extra array", &mb, "extra array 'layer2.weight'");
    mb = npy_member("notes.txt", "{}", 0);
    check_bad("member not npy", &mb, "'notes.txt' is not a .npy");
}

static void test_atomic_writes(void)
{
    par_model m;
    make_model(&m);
    float w[26], r[26];
    fill(w, PAR_F32, 26);

    const char *p = tpath("no_such_dir/w.npz");
    par_clear_error();
    int ok = par_weights_save(p, &m, PAR_F32, w) == PAR_ERR_IO && error_names(p, NULL);
    par_check(ok, "atomic: save into a missing directory -> i/o error naming the file");
    par_check(!exists(tpath("no_such_dir")) && tmp_leftovers() == 0,
              "atomic: nothing left behind");

    // A target that is not a regular file (here a directory) is refused before
    // anything is written (a rename would replace it): nothing left behind.
    p = tpath("a_directory.npz");
    mkdir(p, 0755);
    ok = par_weights_save(p, &m, PAR_F32, w) == PAR_ERR_IO && error_names(p, "rename");
    par_check(ok && tmp_leftovers() == 0, "atomic: failed rename -> i/o error, no temp left");

    // Overwrite: a new file takes the name in one step.
    p = tpath("over.npz");
    struct stat s0, s1;
    ok = par_weights_save(p, &m, PAR_F32, w) == PAR_OK && stat(p, &s0) == 0;
    for (int i = 0; i < 26; i++) w[i] = -w[i];
    ok = ok && par_weights_save(p, &m, PAR_F32, w) == PAR_OK && stat(p, &s1) == 0;
    ok = ok && par_weights_load(p, &m, PAR_F32, r) == PAR_OK && !memcmp(w, r, sizeof w);
    par_check(ok && s0.st_ino != s1.st_ino && tmp_leftovers() == 0,
              "atomic: overwrite replaces the file (new inode), no temp left");

    // A failed write leaves the existing file as it was.
    char h0[65], h1[65];
    par_array bad = {.name = "x", .dtype = PAR_F32, .ndim = 2, .shape = {2, 2}, .count = 5,
                     .data = w};
    par_array dup[2] = {{.name = "x", .dtype = PAR_F32, .ndim = 1, .shape = {1}, .count = 1,
                         .data = w},
                        {.name = "x", .dtype = PAR_F32, .ndim = 1, .shape = {1}, .count = 1,
                         .data = w}};
    ok = par_sha256_file(h0, p) == PAR_OK;
    ok = ok && par_npz_write(p, &bad, 1) == PAR_ERR_CONFIG && error_names(p, "count 5");
    ok = ok && par_npz_write(p, dup, 2) == PAR_ERR_CONFIG && error_names(p, "duplicate");
    ok = ok && par_sha256_file(h1, p) == PAR_OK && !strcmp(h0, h1);
    par_check(ok && tmp_leftovers() == 0, "atomic: failed write leaves the old file untouched");

    // Equal weights give equal bytes (fixed member times).
    ok = par_weights_save(tpath("same1.npz"), &m, PAR_F32, w) == PAR_OK &&
         par_weights_save(tpath("same2.npz"), &m, PAR_F32, w) == PAR_OK &&
         par_sha256_file(h0, tpath("same1.npz")) == PAR_OK &&
         par_sha256_file(h1, tpath("same2.npz")) == PAR_OK && !strcmp(h0, h1);
    par_check(ok, "npz: equal weights give byte-identical files");
}

// numpy reads our files, and we read numpy's (savez and savez_compressed).
static void test_numpy(void)
{
    if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        printf("numpy check skipped\n");
        return;
    }
    par_model m;
    make_model(&m);
    double w64[26];
    float w32[26];
    fill(w64, PAR_F64, 26);
    fill(w32, PAR_F32, 26);
    par_check(par_weights_save(tpath("np64.npz"), &m, PAR_F64, w64) == PAR_OK &&
                  par_weights_save(tpath("np32.npz"), &m, PAR_F32, w32) == PAR_OK,
              "numpy: files written");
    const char *script = tpath("check.py");
    FILE *f = fopen(script, "w");
    fputs("import sys\n"
          "import numpy as np\n"
          "d = sys.argv[1]\n"
          "names = ['layer0.weight', 'layer0.bias', 'layer1.weight', 'layer1.bias']\n"
          "shapes = [(4, 3), (4,), (2, 4), (2,)]\n"
          "for tag, dt in (('64', np.float64), ('32', np.float32)):\n"
          "    want = ((np.arange(26) - 10) / 7.0).astype(dt)\n"
          "    with np.load(d + '/np' + tag + '.npz') as z:\n"
          "        assert z.files == names, z.files\n"
          "        arrs = [z[k] for k in names]\n"
          "    assert [a.shape for a in arrs] == shapes, [a.shape for a in arrs]\n"
          "    assert all(a.dtype == dt for a in arrs), [a.dtype for a in arrs]\n"
          "    assert all(a.flags['C_CONTIGUOUS'] for a in arrs)\n"
          "    flat = np.concatenate([a.ravel() for a in arrs])\n"
          "    assert flat.tobytes() == want.tobytes(), (flat, want)\n"
          "    assert arrs[0][1, 2] == want[5] and arrs[3][1] == want[25]\n"
          "    parts = np.split(want, [12, 16, 24])\n"
          "    kw = {k: p.reshape(s) for k, p, s in zip(names, parts, shapes)}\n"
          "    np.savez(d + '/by_numpy' + tag + '.npz', **kw)\n"
          "    np.savez_compressed(d + '/by_numpy_z' + tag + '.npz', **kw)\n",
          f);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", script, dir);
    par_check(system(cmd) == 0, "numpy: numpy.load reads names, shapes, dtypes, values");

    const char *files[4] = {"by_numpy64.npz", "by_numpy_z64.npz", "by_numpy32.npz",
                            "by_numpy_z32.npz"};
    for (int i = 0; i < 4; i++) {
        par_dtype dt = i < 2 ? PAR_F64 : PAR_F32;
        double r[26];
        int ok = par_weights_load(tpath(files[i]), &m, dt, r) == PAR_OK &&
                 !memcmp(r, dt == PAR_F64 ? (void *)w64 : (void *)w32, 26 * par_dtype_size(dt));
        if (!ok) printf("  %s\n", par_last_error());
        char name[96];
        snprintf(name, sizeof name, "numpy: we read numpy's %s bitwise", files[i]);
        par_check(ok, name);
    }
}

// ---- sha256 ----

static void test_sha256(void)
{
    char h[65];
    par_sha256_hex(h, "", 0);
    par_check(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
              "sha256: empty string");
    par_sha256_hex(h, "abc", 3);
    par_check(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
              "sha256: abc");

    // A file larger than the read buffer hashes like its bytes.
    size_t n = 100003;
    unsigned char *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 2654435761u >> 13);
    const char *p = tpath("blob.bin");
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    char hf[65];
    par_sha256_hex(h, b, n);
    par_check(par_sha256_file(hf, p) == PAR_OK && !strcmp(h, hf), "sha256: file equals memory");
    free(b);
    p = tpath("abc.txt");
    f = fopen(p, "wb");
    fputs("abc", f);
    fclose(f);
    par_check(par_sha256_file(hf, p) == PAR_OK &&
                  !strcmp(hf, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
              "sha256: file abc");
    p = tpath("absent.bin");
    par_check(par_sha256_file(hf, p) == PAR_ERR_IO && error_names(p, NULL) && hf[0] == '\0',
              "sha256: missing file -> i/o error naming it");
}

// ---- xxh128 ----

// Golden values computed independently with the xxh128sum CLI (Debian's
// xxhash 0.8.1), not by parity: each input written to a file with printf or
// python3 and hashed, e.g.
//   printf '' >e.bin; printf 'abc' >abc.bin
//   python3 -c "import sys; sys.stdout.buffer.write(bytes(range(37)))" >r37.bin
//   python3 -c "import sys; sys.stdout.buffer.write(bytes(range(256))*4)" >r1024.bin
//   python3 -c "import sys; sys.stdout.buffer.write(bytes((i*7)%251 for i in range(N)))" >mN.bin
//   python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<3f', 1.0, -2.5, 0.1))" >f3.bin
//   xxh128sum e.bin abc.bin r37.bin r1024.bin m200.bin m1000.bin f3.bin
// The lengths cover each of XXH3's length classes (0, 1-3, 9-16, 17-128,
// 129-240, > 240), lengths that are not multiples of 16 among them.
static void test_xxh128(void)
{
    char h[33];
    unsigned char b[1024];
    par_xxh128_hex(h, NULL, 0);
    par_check(!strcmp(h, "99aa06d3014798d86001c324468d497f"), "xxh128: empty input (NULL, 0)");
    par_xxh128_hex(h, "", 0);
    par_check(!strcmp(h, "99aa06d3014798d86001c324468d497f"), "xxh128: empty string");
    par_xxh128_hex(h, "abc", 3);
    par_check(!strcmp(h, "06b05ab6733a618578af5f94892f3950"), "xxh128: abc (3 bytes)");
    for (int i = 0; i < 37; i++) b[i] = (unsigned char)i;
    par_xxh128_hex(h, b, 37);
    par_check(!strcmp(h, "cc6e83c764fa520307489954a096ebe6"), "xxh128: bytes 0..36 (37 bytes)");
    for (int i = 0; i < 1024; i++) b[i] = (unsigned char)(i % 256);
    par_xxh128_hex(h, b, 1024);
    par_check(!strcmp(h, "83885e853bb6640ca870f92984398d22"), "xxh128: 0..255 four times (1024)");
    for (int i = 0; i < 1000; i++) b[i] = (unsigned char)(i * 7 % 251);
    par_xxh128_hex(h, b, 200);
    par_check(!strcmp(h, "5451071ed36ad47079ad90815b45bbd9"), "xxh128: i*7 mod 251 (200 bytes)");
    par_xxh128_hex(h, b, 1000);
    par_check(!strcmp(h, "5ed35fc6b4f0ef20d1eb8367bf3294e7"), "xxh128: i*7 mod 251 (1000 bytes)");
    // A weight buffer as it lies in memory: three little-endian f32 (12 bytes).
    const float w[3] = {1.0f, -2.5f, 0.1f};
    par_xxh128_hex(h, w, sizeof w);
    par_check(!strcmp(h, "ac0b8302e4cbe4860b7a70f9f88ce992"),
              "xxh128: f32 {1, -2.5, 0.1} as in memory (12 bytes)");
    b[999] ^= 1;
    par_xxh128_hex(h, b, 1000);
    par_check(strcmp(h, "5ed35fc6b4f0ef20d1eb8367bf3294e7") != 0 && strlen(h) == 32,
              "xxh128: one flipped bit changes the digest");
}

// ---- log ----

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

// Field k of obj is the real x bitwise, or null when x is not finite.
static int field_is(const json_t *obj, const char *k, double x)
{
    const json_t *v = json_object_get(obj, k);
    if (!isfinite(x)) return json_is_null(v);
    return json_is_real(v) && same_bits(json_real_value(v), x);
}

static void test_log(void)
{
    const double losses[] = {0.5, 0.1, 1.0 / 3, -0.0, 5e-324, 1e300, DBL_MAX, 2.0,
                             NAN, INFINITY, -INFINITY, 2.718281828459045};
    const size_t n = sizeof losses / sizeof losses[0];
    const char *p = tpath("run.jsonl");
    par_log *lg = NULL;
    int ok = par_log_open(&lg, p) == PAR_OK;
    for (size_t i = 0; ok && i < n; i++) {
        ok = par_log_step(lg, (int)(i / 4), i == 3 ? (1L << 40) : (long)i, losses[i], NULL) == PAR_OK;
    }
    ok = ok && par_log_epoch(lg, 2, 12, 0.25, 0.9, NAN, 1.0 / 3) == PAR_OK;
    long before = -1;
    FILE *g = fopen(p, "r");   // written in place as it goes, whole lines
    if (g) {
        fseek(g, 0, SEEK_END);
        before = ftell(g);
        fclose(g);
    }
    par_check(ok && before > 0 && tmp_leftovers() == 0, "log: lines go to the path as they come");
    par_check(ok && par_log_close(lg) == PAR_OK && exists(p) && tmp_leftovers() == 0,
              "log: close leaves the file in place");

    FILE *f = fopen(p, "r");
    char line[512];
    size_t k = 0;
    int parsed = f != NULL, fields = f != NULL;
    while (f && fgets(line, sizeof line, f)) {
        if (k == 0) {
            par_check(!strcmp(line, "{\"type\":\"step\",\"epoch\":0,\"step\":0,\"loss\":0.5}\n"),
                      "log: first line exact and compact");
        }
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        parsed = parsed && o && json_is_object(o) && line[strlen(line) - 1] == '\n';
        if (o && k < n) {
            long want_step = k == 3 ? (1L << 40) : (long)k;
            fields = fields && json_object_size(o) == 4 &&
                     !strcmp(json_string_value(json_object_get(o, "type")), "step") &&
                     json_integer_value(json_object_get(o, "epoch")) == (json_int_t)(k / 4) &&
                     json_integer_value(json_object_get(o, "step")) == want_step &&
                     field_is(o, "loss", losses[k]);
        } else if (o) {
            fields = fields && json_object_size(o) == 7 &&
                     !strcmp(json_string_value(json_object_get(o, "type")), "epoch") &&
                     json_integer_value(json_object_get(o, "epoch")) == 2 &&
                     json_integer_value(json_object_get(o, "step")) == 12 &&
                     field_is(o, "val_loss", 0.25) && field_is(o, "val_accuracy", 0.9) &&
                     field_is(o, "test_loss", NAN) && field_is(o, "test_accuracy", 1.0 / 3);
        }
        if (!fields || !parsed) printf("  line %zu: %s", k + 1, line);
        json_decref(o);
        k++;
    }
    if (f) fclose(f);
    par_check(parsed && k == n + 1, "log: every line is one JSON object");
    par_check(fields, "log: fields round-trip bitwise, non-finite -> null");

    // With a weights digest: the line carries it as "weights_xxh128" and the
    // loss's XXH3-128 as "loss_xxh128" (golden: `xxh128sum` of the 8 bytes
    // python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<d', 0.25))"
    // writes), and no SHA-256 field.
    const char *w = "0123456789abcdef0123456789abcdef";
    ok = par_log_open(&lg, tpath("digest.jsonl")) == PAR_OK &&
         par_log_step(lg, 0, 1, 0.25, w) == PAR_OK && par_log_close(lg) == PAR_OK;
    f = ok ? fopen(tpath("digest.jsonl"), "r") : NULL;
    ok = f && fgets(line, sizeof line, f);
    if (f) fclose(f);
    par_check(ok && !strcmp(line, "{\"type\":\"step\",\"epoch\":0,\"step\":1,\"loss\":0.25,"
                                  "\"weights_xxh128\":\"0123456789abcdef0123456789abcdef\","
                                  "\"loss_xxh128\":\"2558257cbc896adb3cc8d20217661d61\"}\n"),
              "log: step line with weights_xxh128 and the loss's XXH3-128 (xxh128sum's value)");

    ok = par_log_open(&lg, tpath("dropped.jsonl")) == PAR_OK &&
         par_log_step(lg, 0, 0, 1.0, NULL) == PAR_OK;
    if (ok) par_log_discard(lg);
    par_check(ok && exists(tpath("dropped.jsonl")) && tmp_leftovers() == 0,
              "log: discard keeps the lines written");

    p = tpath("no_such_dir/run.jsonl");
    lg = NULL;
    par_check(par_log_open(&lg, p) == PAR_ERR_IO && !lg && error_names(p, NULL),
              "log: open in a missing directory -> i/o error naming it");
}

// An error wrapping the one beneath it, through par_last_error() itself.
static void test_error_wrap(void)
{
    par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "inner %d", 7);
    const par_status st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__, "outer: %s",
                                        par_last_error());
    par_check(st == PAR_ERR_EXTERNAL && strcmp(par_last_error(), "outer: inner 7") == 0,
              "par_set_error wraps par_last_error() once: 'outer: inner 7'");
    par_clear_error();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_io.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_header_bytes();
    test_round_trip(PAR_F32);
    test_round_trip(PAR_F64);
    test_deflated();
    test_bad_inputs();
    test_atomic_writes();
    test_numpy();
    test_sha256();
    test_xxh128();
    test_log();
    test_error_wrap();
    int rc = par_test_exit();
    if (rc == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("could not remove %s\n", dir);
    } else {
        printf("files kept in %s\n", dir);
    }
    return rc;
}
