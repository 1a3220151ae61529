// Checkpoints of a training run (format in par_ckpt.h): weights as .npz plus
// a JSON sidecar written last, both atomically, the last K kept; finding the
// newest valid one. The log's place in a checkpoint is par_ckpt_log.c's. Not
// a general store: one run per folder, guarded by flock. Tested by
// tests/cli/test_resume.sh and tests/cli/test_faults.sh; the JSON parser is fuzzed by
// tests/fuzz/fuzz_ckpt.c.
#define _DEFAULT_SOURCE  // flock, DT_* (with _POSIX_C_SOURCE 200809L)
#define _POSIX_C_SOURCE 200809L

#include "par_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "par_hash.h"
#include "par_npz.h"

#define CKPT_FORMAT "parity-checkpoint"

struct par_ckpt_dir {
    char path[1024];
    int lock_fd;
    int made_lock;   // this open created .lock: removed again if no checkpoint follows
};

// ---- config ----

static void config_text(char *buf, size_t cap, const par_ckpt_config *c)
{
    snprintf(buf, cap,
             "parity checkpoint config v1\nmodel=%s\nact=%s\ndtype=%s\noptimizer=%s\n"
             "batch=%ld\nchunk=%ld\nlr=%a\nseed=%" PRIu64 "\ninit_sha256=%s\n"
             "records=%" PRIu64 "+%" PRIu64 "\nsplit=%" PRIu64 "/%" PRIu64 "\nfeatures=%" PRIu64
             "\nclasses=%" PRIu64 "\ndata_sha256=%s\n",
             c->model, c->act, c->dtype, c->optimizer, c->batch, c->chunk, c->lr, c->seed,
             c->init_sha256, c->n_train_file, c->n_test, c->n_train, c->n_val, c->features,
             c->classes, c->data_sha256);
}

void par_ckpt_config_sha256(char out[65], const par_ckpt_config *c)
{
    char text[2048];
    config_text(text, sizeof text, c);
    par_sha256_hex(out, text, strlen(text));
}

int par_ckpt_config_diff(char *why, size_t cap, const par_ckpt_config *a,
                         const par_ckpt_config *b)
{
#define STR(field, flag)                                                                    \
    if (strcmp(a->field, b->field) != 0) {                                                  \
        snprintf(why, cap, "%s: checkpoint %s, this run %s", flag, a->field, b->field);     \
        return 1;                                                                           \
    }
#define NUM(field, flag, fmt)                                                               \
    if (a->field != b->field) {                                                             \
        snprintf(why, cap, "%s: checkpoint " fmt ", this run " fmt, flag, a->field, b->field); \
        return 1;                                                                           \
    }
    STR(model, "--model")
    STR(act, "--act")
    STR(dtype, "--dtype")
    STR(optimizer, "--optim")
    NUM(batch, "--batch", "%ld")
    NUM(chunk, "--chunk", "%ld")
    if (memcmp(&a->lr, &b->lr, sizeof a->lr) != 0) {
        snprintf(why, cap, "--lr: checkpoint %.17g, this run %.17g", a->lr, b->lr);
        return 1;
    }
    NUM(seed, "--seed", "%" PRIu64)
    if (strcmp(a->init_sha256, b->init_sha256) != 0) {
        snprintf(why, cap, "initial weights (--seed or --init-load): checkpoint SHA-256 %.16s..., "
                 "this run %.16s...", a->init_sha256, b->init_sha256);
        return 1;
    }
    NUM(n_train_file, "--dataset (training records)", "%" PRIu64)
    NUM(n_test, "--dataset (test records)", "%" PRIu64)
    NUM(n_train, "--dataset (training split)", "%" PRIu64)
    NUM(n_val, "--dataset (validation split)", "%" PRIu64)
    NUM(features, "--dataset (features)", "%" PRIu64)
    NUM(classes, "--dataset (classes)", "%" PRIu64)
    if (strcmp(a->data_sha256, b->data_sha256) != 0) {
        snprintf(why, cap, "--dataset: checkpoint %s (SHA-256 %.16s...), this run %s (%.16s...)",
                 a->dataset, a->data_sha256, b->dataset, b->data_sha256);
        return 1;
    }
#undef STR
#undef NUM
    return 0;
}

// ---- small file helpers ----

static par_status sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    PAR_FAIL_IF(fd < 0, PAR_ERR_IO, "cannot open folder %s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    // Some file systems cannot fsync a folder (EINVAL): the rename is all we have.
    PAR_FAIL_IF(rc != 0 && err != EINVAL && err != EROFS, PAR_ERR_IO, "cannot sync folder %s: %s",
                dir, strerror(err));
    return PAR_OK;
}

// Writes n bytes to path atomically: path.tmp.<pid>, fsync, rename.
static par_status write_atomic(const char *path, const char *data, size_t n)
{
    char tmp[1200];
    PAR_TRY(par_out_check(path));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    PAR_FAIL_IF(fd < 0, PAR_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    size_t done = 0;
    int err = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        done += (size_t)w;
    }
    if (!err && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot write %s: %s", path,
                             strerror(err));
    }
    return PAR_OK;
}

// Reads a whole small file (at most max bytes) into a NUL-terminated buffer.
static par_status read_small(char **out, size_t *len, const char *path, size_t max)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *buf = malloc(max + 1);
    if (!buf) {
        fclose(f);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, max + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > max) {
        free(buf);
        PAR_FAIL_IF(bad, PAR_ERR_IO, "cannot read %s", path);
        PAR_FAIL_IF(1, PAR_ERR_FORMAT, "%s: larger than %zu bytes", path, max);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return PAR_OK;
}

// "ckpt-" + 10 digits + suffix: the step, or -1.
static long ckpt_step(const char *name, const char *suffix)
{
    if (strncmp(name, "ckpt-", 5) != 0) return -1;
    long step = 0;
    int i = 5;
    for (; i < 15; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        step = 10 * step + (name[i] - '0');
    }
    return strcmp(name + i, suffix) == 0 ? step : -1;
}

static int cmp_desc(const void *a, const void *b)
{
    const long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

// Steps of the ckpt-*.json files in dir, newest first (malloc'd).
static par_status list_ckpts(long **steps, size_t *n, const char *dir)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    PAR_FAIL_IF(!d, PAR_ERR_IO, "cannot open checkpoint folder %s: %s", dir, strerror(errno));
    size_t k = 0, cap = 64;
    long *s = malloc(cap * sizeof *s);
    struct dirent *e;
    while (s && (e = readdir(d)) != NULL) {
        long step = ckpt_step(e->d_name, ".json");
        if (step < 0) continue;
        if (k == cap) {
            long *t = realloc(s, 2 * cap * sizeof *s);
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
            cap *= 2;
        }
        s[k++] = step;
    }
    closedir(d);
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "%s: out of memory listing checkpoints", dir);
    qsort(s, k, sizeof *s, cmp_desc);
    *steps = s;
    *n = k;
    return PAR_OK;
}

// ---- the folder ----

const char *par_ckpt_dir_path(const par_ckpt_dir *d) { return d->path; }

void par_ckpt_dir_close(par_ckpt_dir *d)
{
    if (!d) return;
    // A folder this run found without a .lock and leaves without a checkpoint
    // (a --resume of an empty folder, a run that failed before its first) is
    // left as it was found: the lock goes while it is still held.
    long *steps = NULL;
    size_t n = 1;
    if (d->made_lock && d->lock_fd >= 0 && list_ckpts(&steps, &n, d->path) == PAR_OK && n == 0) {
        char lock[1100];
        snprintf(lock, sizeof lock, "%s/.lock", d->path);
        unlink(lock);
    }
    free(steps);
    if (d->lock_fd >= 0) close(d->lock_fd);  // releases the flock
    free(d);
}

// Removes the temp files a killed writer left (we hold the lock: no other
// writer can be using them).
static void remove_stale(const char *dir)
{
    DIR *dd = opendir(dir);
    if (!dd) return;
    struct dirent *e;
    char p[2048];
    while ((e = readdir(dd)) != NULL) {
        if (strncmp(e->d_name, "ckpt-", 5) == 0 && strstr(e->d_name, ".tmp.")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    closedir(dd);
}

static par_status dir_open(par_ckpt_dir *d, const char *path, int create, int fresh)
{
    struct stat sb;
    if (create && stat(path, &sb) != 0) {
        PAR_FAIL_IF(mkdir(path, 0777) != 0 && errno != EEXIST, PAR_ERR_IO,
                    "cannot create checkpoint folder %s: %s", path, strerror(errno));
    }
    PAR_FAIL_IF(stat(path, &sb) != 0, PAR_ERR_IO, "checkpoint folder %s: %s", path,
                strerror(errno));
    PAR_FAIL_IF(!S_ISDIR(sb.st_mode), PAR_ERR_IO, "checkpoint folder %s: not a folder", path);
    char lock[1100];
    snprintf(lock, sizeof lock, "%s/.lock", path);
    int made = 0;
    d->lock_fd = open(lock, O_RDWR | O_CLOEXEC);
    if (d->lock_fd < 0 && errno == ENOENT) {
        d->lock_fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        made = d->lock_fd >= 0;
        if (d->lock_fd < 0 && errno == EEXIST)   // another run made it just now
            d->lock_fd = open(lock, O_RDWR | O_CLOEXEC);
    }
    PAR_FAIL_IF(d->lock_fd < 0, PAR_ERR_IO, "cannot write in checkpoint folder %s: %s", path,
                strerror(errno));
    PAR_FAIL_IF(flock(d->lock_fd, LOCK_EX | LOCK_NB) != 0, PAR_ERR_IO,
                "checkpoint folder %s is in use by another run (%s is locked)", path, lock);
    d->made_lock = made;   // held: ours to remove
    remove_stale(path);
    // Fail now, not after hours of training, if nothing can be written here.
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/ckpt-probe.tmp.%ld", path, (long)getpid());
    PAR_TRY(write_atomic(probe, "", 0));
    unlink(probe);
    if (fresh) {
        long *steps;
        size_t n;
        PAR_TRY(list_ckpts(&steps, &n, path));
        long newest = n ? steps[0] : -1;
        free(steps);
        PAR_FAIL_IF(newest >= 0, PAR_ERR_CONFIG,
                    "checkpoint folder %s already holds checkpoints (newest: step %ld)", path,
                    newest);
    }
    return PAR_OK;
}

par_status par_ckpt_dir_open(par_ckpt_dir **out, const char *path, int create, int fresh)
{
    *out = NULL;
    PAR_FAIL_IF(!path || !*path, PAR_ERR_CONFIG, "no checkpoint folder given");
    PAR_FAIL_IF(strlen(path) >= sizeof((par_ckpt_dir *)0)->path - 32, PAR_ERR_CONFIG,
                "checkpoint folder %.64s...: path too long", path);
    par_ckpt_dir *d = calloc(1, sizeof *d);
    PAR_FAIL_IF(!d, PAR_ERR_ALLOC, "out of memory");
    snprintf(d->path, sizeof d->path, "%s", path);
    d->lock_fd = -1;
    par_status st = dir_open(d, path, create, fresh);
    if (st != PAR_OK) {
        par_ckpt_dir_close(d);
        return st;
    }
    *out = d;
    return PAR_OK;
}

// ---- JSON ----

static json_t *config_json(const par_ckpt_config *c)
{
    // Exact values as text: lr as a hex float, seed as a decimal string (u64).
    char hex[64], seed[32];
    snprintf(hex, sizeof hex, "%a", c->lr);
    snprintf(seed, sizeof seed, "%" PRIu64, c->seed);
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, "
                     "s:I, s:I, s:I, s:s}}",
                     "model", c->model, "act", c->act, "dtype", c->dtype, "optimizer",
                     c->optimizer, "batch", (json_int_t)c->batch, "chunk", (json_int_t)c->chunk,
                     "lr", c->lr, "lr_hex", hex, "seed", seed, "init_sha256", c->init_sha256,
                     "dataset", c->dataset, "data", "train_file_records",
                     (json_int_t)c->n_train_file, "test_records", (json_int_t)c->n_test,
                     "train_records", (json_int_t)c->n_train, "validation_records",
                     (json_int_t)c->n_val, "features", (json_int_t)c->features, "classes",
                     (json_int_t)c->classes, "sha256", c->data_sha256);
}

static char *meta_dump(const par_ckpt_meta *m)
{
    json_t *cfg = config_json(&m->cfg);
    if (!cfg) return NULL;
    json_t *log = json_null();
    if (m->has_log) {
        log = json_pack("{s:s, s:s, s:I, s:I, s:s}", "path", m->log.path, "tmp", m->log.tmp,
                        "lines", (json_int_t)m->log.lines, "bytes", (json_int_t)m->log.bytes,
                        "sha256", m->log.sha256);
    }
    json_t *os = json_array();
    for (int i = 0; os && i < m->optim_n; i++)
        json_array_append_new(os, json_string(m->optim_names[i]));
    json_t *j = json_pack(
        "{s:s, s:i, s:I, s:i, s:I, s:o, s:s, s:{s:s, s:s}, s:o, s:o, s:{s:s, s:s, s:i, s:i, "
        "s:I, s:i}}",
        "format", CKPT_FORMAT, "version", m->version, "step", (json_int_t)m->step, "epoch",
        m->epoch, "epoch_records_done", (json_int_t)m->pos, "config", cfg, "config_sha256",
        m->config_sha256, "weights", "file", m->npz, "sha256", m->npz_sha256, "optimizer_state",
        os, "log", log, "writer", "trainer", m->trainer, "mode", m->mode,
        "threads", m->threads, "ranks", m->ranks, "checkpoint_every", (json_int_t)m->every,
        "keep", m->keep);
    if (!j) return NULL;
    if (m->optim_n > 0) json_object_set_new(j, "optimizer_steps", json_integer(m->optim_t));
    if (m->has_run)
        json_object_set_new(j, "run", json_pack("{s:i, s:i, s:i, s:b}", "epochs", m->run_epochs,
                                                "steps", m->run_steps, "upscale", m->upscale,
                                                "no_digest", m->no_digest));
    if (m->select[0] && strcmp(m->select, "last") != 0) {
        json_object_set_new(j, "select", json_string(m->select));
        json_t *b = json_null();
        if (m->has_best) {   // exact values as hex floats, like lr_hex
            char h[4][64];
            snprintf(h[0], sizeof h[0], "%a", m->best_val_loss);
            snprintf(h[1], sizeof h[1], "%a", m->best_val_acc);
            snprintf(h[2], sizeof h[2], "%a", m->best_test_loss);
            snprintf(h[3], sizeof h[3], "%a", m->best_test_acc);
            b = json_pack("{s:i, s:s, s:s, s:s, s:s}", "epoch", m->best_epoch, "val_loss_hex",
                          h[0], "val_accuracy_hex", h[1], "test_loss_hex", h[2],
                          "test_accuracy_hex", h[3]);
        }
        json_object_set_new(j, "best", b ? b : json_null());
    }
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

// Field helpers for the parser: each sets *err on a missing or wrong field.
static const char *get_str(json_t *o, const char *key, const char **err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        if (!*err) *err = key;
        return "";
    }
    return json_string_value(v);
}

static int64_t get_int(json_t *o, const char *key, int64_t lo, int64_t hi, const char **err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        if (!*err) *err = key;
        return 0;
    }
    return (int64_t)json_integer_value(v);
}

static void copy_str(char *dst, size_t cap, const char *src, const char *key, const char **err)
{
    const size_t n = strlen(src);
    if (n >= cap && !*err) *err = key;
    const size_t k = n < cap ? n : cap - 1;
    memcpy(dst, src, k);
    dst[k] = '\0';
}

static int is_hex64(const char *s)
{
    if (strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

par_status par_ckpt_meta_parse(par_ckpt_meta *m, const char *text, size_t len, const char *path)
{
    memset(m, 0, sizeof *m);
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    PAR_FAIL_IF(!j, PAR_ERR_FORMAT, "%s: not JSON (line %d: %s)", path, je.line, je.text);
    const char *err = NULL;
    const int64_t BIG = INT64_C(1) << 53;
    if (!json_is_object(j)) err = "(top level is not an object)";
    else if (strcmp(get_str(j, "format", &err), CKPT_FORMAT) != 0 && !err) err = "format";
    m->version = (int)get_int(j, "version", 1, 1000, &err);
    if (!err && m->version != PAR_CKPT_VERSION) {
        json_decref(j);
        return par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__,
                             "%s: checkpoint version %d, this parity reads version %d", path,
                             m->version, PAR_CKPT_VERSION);
    }
    m->step = (long)get_int(j, "step", 0, BIG, &err);
    m->epoch = (int)get_int(j, "epoch", 0, 1000000000, &err);
    m->pos = (uint64_t)get_int(j, "epoch_records_done", 0, BIG, &err);
    json_t *c = json_object_get(j, "config");
    if (!json_is_object(c) && !err) err = "config";
    par_ckpt_config *cf = &m->cfg;
    copy_str(cf->model, sizeof cf->model, get_str(c, "model", &err), "model", &err);
    copy_str(cf->act, sizeof cf->act, get_str(c, "act", &err), "act", &err);
    copy_str(cf->dtype, sizeof cf->dtype, get_str(c, "dtype", &err), "dtype", &err);
    copy_str(cf->optimizer, sizeof cf->optimizer, get_str(c, "optimizer", &err), "optimizer",
             &err);
    cf->batch = (long)get_int(c, "batch", 1, 1000000000, &err);
    cf->chunk = (long)get_int(c, "chunk", 1, 1000000000, &err);
    const char *hex = get_str(c, "lr_hex", &err), *seed = get_str(c, "seed", &err);
    char *end = NULL;
    cf->lr = strtod(hex, &end);
    if ((!end || *end || end == hex || !isfinite(cf->lr)) && !err) err = "lr_hex";
    errno = 0;
    cf->seed = strtoull(seed, &end, 10);
    if ((*seed < '0' || *seed > '9' || *end || errno) && !err) err = "seed";
    copy_str(cf->init_sha256, sizeof cf->init_sha256, get_str(c, "init_sha256", &err),
             "init_sha256", &err);
    copy_str(cf->dataset, sizeof cf->dataset, get_str(c, "dataset", &err), "dataset", &err);
    json_t *d = json_object_get(c, "data");
    if (!json_is_object(d) && !err) err = "data";
    cf->n_train_file = (uint64_t)get_int(d, "train_file_records", 0, BIG, &err);
    cf->n_test = (uint64_t)get_int(d, "test_records", 0, BIG, &err);
    cf->n_train = (uint64_t)get_int(d, "train_records", 0, BIG, &err);
    cf->n_val = (uint64_t)get_int(d, "validation_records", 0, BIG, &err);
    cf->features = (uint64_t)get_int(d, "features", 0, BIG, &err);
    cf->classes = (uint64_t)get_int(d, "classes", 0, BIG, &err);
    copy_str(cf->data_sha256, sizeof cf->data_sha256, get_str(d, "sha256", &err), "data.sha256",
             &err);
    copy_str(m->config_sha256, sizeof m->config_sha256, get_str(j, "config_sha256", &err),
             "config_sha256", &err);
    json_t *w = json_object_get(j, "weights");
    if (!json_is_object(w) && !err) err = "weights";
    copy_str(m->npz, sizeof m->npz, get_str(w, "file", &err), "weights.file", &err);
    copy_str(m->npz_sha256, sizeof m->npz_sha256, get_str(w, "sha256", &err), "weights.sha256",
             &err);
    json_t *os = json_object_get(j, "optimizer_state");
    if ((!json_is_array(os) || json_array_size(os) > 2) && !err) err = "optimizer_state";
    m->optim_n = json_is_array(os) ? (int)json_array_size(os) : 0;
    for (int i = 0; i < m->optim_n && !err; i++) {
        const char *nm = json_string_value(json_array_get(os, (size_t)i));
        if (!nm || !*nm || strchr(nm, '.')) err = "optimizer_state";
        else copy_str(m->optim_names[i], sizeof m->optim_names[i], nm, "optimizer_state", &err);
    }
    if (m->optim_n > 0) m->optim_t = (long)get_int(j, "optimizer_steps", 0, BIG, &err);
    snprintf(m->select, sizeof m->select, "last");
    if (json_object_get(j, "select")) {
        copy_str(m->select, sizeof m->select, get_str(j, "select", &err), "select", &err);
        json_t *b = json_object_get(j, "best");
        if (json_is_object(b)) {
            m->has_best = 1;
            m->best_epoch = (int)get_int(b, "epoch", 0, 1000000000, &err);
            double *dst[4] = {&m->best_val_loss, &m->best_val_acc, &m->best_test_loss,
                              &m->best_test_acc};
            const char *keys[4] = {"val_loss_hex", "val_accuracy_hex", "test_loss_hex",
                                   "test_accuracy_hex"};
            for (int i = 0; i < 4; i++) {
                const char *hx = get_str(b, keys[i], &err);
                char *e2 = NULL;
                *dst[i] = strtod(hx, &e2);
                if ((!e2 || *e2 || e2 == hx) && !err) err = keys[i];
            }
        } else if (!json_is_null(b) && !err) {
            err = "best";
        }
    }
    json_t *lg = json_object_get(j, "log");
    if (json_is_object(lg)) {
        m->has_log = 1;
        copy_str(m->log.path, sizeof m->log.path, get_str(lg, "path", &err), "log.path", &err);
        copy_str(m->log.tmp, sizeof m->log.tmp, get_str(lg, "tmp", &err), "log.tmp", &err);
        m->log.lines = (long)get_int(lg, "lines", 0, BIG, &err);
        m->log.bytes = (uint64_t)get_int(lg, "bytes", 0, BIG, &err);
        copy_str(m->log.sha256, sizeof m->log.sha256, get_str(lg, "sha256", &err), "log.sha256",
                 &err);
        if (!err && !is_hex64(m->log.sha256)) err = "log.sha256";
    } else if (!json_is_null(lg) && !err) {
        err = "log";
    }
    json_t *rn = json_object_get(j, "run");
    if (json_is_object(rn)) {   // optional: older checkpoints have none
        m->has_run = 1;
        m->run_epochs = (int)get_int(rn, "epochs", 1, 1000000000, &err);
        m->run_steps = (int)get_int(rn, "steps", 0, 1000000000, &err);
        m->upscale = (int)get_int(rn, "upscale", 0, 1024, &err);
        json_t *nd = json_object_get(rn, "no_digest");
        if (!json_is_boolean(nd) && !err) err = "run.no_digest";
        m->no_digest = json_is_true(nd);
    } else if (rn && !err) {
        err = "run";
    }
    json_t *wr = json_object_get(j, "writer");
    if (json_is_object(wr)) {   // information only
        snprintf(m->trainer, sizeof m->trainer, "%s", get_str(wr, "trainer", &err));
        snprintf(m->mode, sizeof m->mode, "%s", get_str(wr, "mode", &err));
        m->threads = (int)get_int(wr, "threads", 0, 1 << 20, &err);
        m->ranks = (int)get_int(wr, "ranks", 0, 1 << 24, &err);
        m->every = (long)get_int(wr, "checkpoint_every", 0, BIG, &err);
        m->keep = (int)get_int(wr, "keep", 0, 1 << 20, &err);
    } else if (!err) {
        err = "writer";
    }
    if (!err && (!is_hex64(m->npz_sha256) || !is_hex64(m->config_sha256) ||
                 !is_hex64(cf->data_sha256) || !is_hex64(cf->init_sha256)))
        err = "a SHA-256 field (64 lowercase hex digits)";
    if (!err && ckpt_step(m->npz, ".npz") != m->step) err = "weights.file (ckpt-<step>.npz)";
    json_decref(j);
    PAR_FAIL_IF(err, PAR_ERR_FORMAT, "%s: field '%s' missing or malformed", path, err);
    char want[65];
    par_ckpt_config_sha256(want, cf);
    PAR_FAIL_IF(strcmp(want, m->config_sha256) != 0, PAR_ERR_FORMAT,
                "%s: config_sha256 does not match its config (edited or damaged)", path);
    return PAR_OK;
}

// ---- writing ----

// Deletes checkpoint `step`: the .json first, so it stops existing at once.
static void remove_ckpt(const char *dir, long step)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/ckpt-%010ld.json", dir, step);
    unlink(p);
    snprintf(p, sizeof p, "%s/ckpt-%010ld.npz", dir, step);
    unlink(p);
}

// The .npz of a checkpoint: the views (as par_weights_save) and the
// optimizer state as "opt.<state>.<view>".
static par_status write_npz(const char *path, const par_model *m, par_dtype dt,
                            const void *params, const par_ckpt_optim *os, const void *best)
{
    const int n_os = os ? os->n : 0;
    if (n_os == 0 && !best) return par_weights_save(path, m, dt, params);
    par_array *arrays = calloc((size_t)m->n_views * (size_t)(2 + n_os), sizeof *arrays);
    PAR_FAIL_IF(!arrays, PAR_ERR_ALLOC, "out of memory");
    const size_t esize = par_dtype_size(dt);
    size_t k = 0;
    for (int s = -1; s <= n_os; s++) {   // the weights, the optimizer state, the best weights
        if (s == n_os && !best) break;
        const char *base = s < 0 ? params : s < n_os ? os->arr[s] : best;
        for (int v = 0; v < m->n_views; v++, k++) {
            const par_view *w = &m->views[v];
            par_array *a = &arrays[k];
            if (s < 0) snprintf(a->name, sizeof a->name, "%s", w->name);
            else if (s == n_os) snprintf(a->name, sizeof a->name, "best.%s", w->name);
            else snprintf(a->name, sizeof a->name, "opt.%s.%s", os->names[s], w->name);
            a->dtype = dt;
            a->ndim = w->ndim;
            memcpy(a->shape, w->shape, sizeof a->shape);
            a->count = w->count;
            a->data = (void *)(base + w->offset * esize);   // only read
        }
    }
    par_status st = par_npz_write(path, arrays, k);
    free(arrays);
    return st;
}

par_status par_ckpt_write(par_ckpt_dir *d, par_ckpt_meta *meta, const par_model *m, par_dtype dt,
                          const void *params, int keep)
{
    return par_ckpt_write_ex(d, meta, m, dt, params, NULL, NULL, keep);
}

par_status par_ckpt_write_ex(par_ckpt_dir *d, par_ckpt_meta *meta, const par_model *m,
                             par_dtype dt, const void *params, const par_ckpt_optim *os,
                             const void *best, int keep)
{
    PAR_FAIL_IF(meta->has_best && !best, PAR_ERR_CONFIG, "best-epoch weights missing");
    PAR_FAIL_IF(os && (os->n < 0 || os->n > 2), PAR_ERR_CONFIG, "%d optimizer state arrays",
                os->n);
    meta->optim_n = os ? os->n : 0;
    meta->optim_t = os ? os->t : 0;
    memset(meta->optim_names, 0, sizeof meta->optim_names);
    for (int i = 0; i < meta->optim_n; i++)
        snprintf(meta->optim_names[i], sizeof meta->optim_names[i], "%s", os->names[i]);
    PAR_FAIL_IF(keep < 1, PAR_ERR_CONFIG, "--keep %d: expected >= 1", keep);
    PAR_FAIL_IF(meta->step < 0 || meta->step > 9999999999L, PAR_ERR_CONFIG,
                "step %ld cannot be checkpointed", meta->step);
    meta->version = PAR_CKPT_VERSION;
    par_ckpt_config_sha256(meta->config_sha256, &meta->cfg);
    snprintf(meta->npz, sizeof meta->npz, "ckpt-%010ld.npz", meta->step);
    char npz[1200], js[1200];
    snprintf(npz, sizeof npz, "%s/%s", d->path, meta->npz);
    snprintf(js, sizeof js, "%s/ckpt-%010ld.json", d->path, meta->step);
    // A checkpoint of this step already there (a resumed run passing it
    // again) is replaced: invalidate it first.
    unlink(js);
    par_status st = write_npz(npz, m, dt, params, os, meta->has_best ? best : NULL);
    if (st == PAR_OK) st = par_sha256_file(meta->npz_sha256, npz);
    char *text = NULL;
    if (st == PAR_OK) {
        text = meta_dump(meta);
        if (!text) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "%s: cannot encode", js);
    }
    if (st == PAR_OK) st = write_atomic(js, text, strlen(text));
    free(text);
    if (st == PAR_OK) st = sync_dir(d->path);
    if (st != PAR_OK) {
        unlink(npz);
        return st;
    }
    long *steps;
    size_t n;
    if (list_ckpts(&steps, &n, d->path) == PAR_OK) {
        for (size_t i = (size_t)keep; i < n; i++) remove_ckpt(d->path, steps[i]);
        free(steps);
    }
    return PAR_OK;
}

// ---- finding and loading ----

static par_status read_meta(par_ckpt_meta *meta, const char *dir, long step)
{
    char js[1200], npz[1200], sha[65];
    snprintf(js, sizeof js, "%s/ckpt-%010ld.json", dir, step);
    char *text = NULL;
    size_t len = 0;
    PAR_TRY(read_small(&text, &len, js, 1 << 20));
    par_status st = par_ckpt_meta_parse(meta, text, len, js);
    free(text);
    PAR_TRY(st);
    PAR_FAIL_IF(meta->step != step, PAR_ERR_FORMAT, "%s: says step %ld", js, meta->step);
    snprintf(npz, sizeof npz, "%s/%s", dir, meta->npz);
    PAR_TRY(par_sha256_file(sha, npz));
    PAR_FAIL_IF(strcmp(sha, meta->npz_sha256) != 0, PAR_ERR_FORMAT,
                "%s: SHA-256 differs from the one recorded in %s (damaged)", npz, js);
    return PAR_OK;
}

par_status par_ckpt_find(par_ckpt_meta *meta, const char *dir, char *skipped, size_t cap)
{
    if (skipped && cap) skipped[0] = '\0';
    long *steps;
    size_t n;
    PAR_TRY(list_ckpts(&steps, &n, dir));
    char why[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (read_meta(meta, dir, steps[i]) == PAR_OK) {
            free(steps);
            return PAR_OK;
        }
        const char *msg = par_last_error();
        if (skipped && cap) {
            size_t k = strlen(skipped);
            if (k < cap) snprintf(skipped + k, cap - k, "%s%s", k ? "; " : "", msg);
        }
        size_t k = strlen(why);
        if (k < sizeof why)
            snprintf(why + k, sizeof why - k, "%s%s", k ? "; " : "", msg);
    }
    free(steps);
    PAR_FAIL_IF(n == 0, PAR_ERR_IO, "no checkpoint in %s (no ckpt-*.json)", dir);
    return par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "no valid checkpoint in %s: %s", dir,
                         why);
}

par_status par_ckpt_load(const char *dir, const par_ckpt_meta *meta, const par_model *m,
                         par_dtype dt, void *params)
{
    char npz[1200], sha[65];
    snprintf(npz, sizeof npz, "%s/%s", dir, meta->npz);
    PAR_TRY(par_sha256_file(sha, npz));
    PAR_FAIL_IF(strcmp(sha, meta->npz_sha256) != 0, PAR_ERR_FORMAT,
                "%s: SHA-256 differs from its checkpoint's record (damaged)", npz);
    return par_weights_load(npz, m, dt, params);
}

// Members "<prefix><view>" of a checkpoint's .npz into dst (n_params of dt).
static par_status load_members(const char *npz, const par_npz *z, const par_model *m,
                               par_dtype dt, const char *prefix, void *dst)
{
    const size_t esize = par_dtype_size(dt);
    for (int v = 0; v < m->n_views; v++) {
        const par_view *w = &m->views[v];
        char want[96];
        snprintf(want, sizeof want, "%s%s", prefix, w->name);
        const par_array *a = NULL;
        for (size_t k = 0; k < z->n && !a; k++)
            if (strcmp(z->arrays[k].name, want) == 0) a = &z->arrays[k];
        PAR_FAIL_IF(!a || a->dtype != dt || a->count != w->count, PAR_ERR_FORMAT,
                    "%s: array '%s' missing or not %zu elements of %s", npz, want, w->count,
                    par_dtype_name(dt));
        memcpy((char *)dst + w->offset * esize, a->data, w->count * esize);
    }
    return PAR_OK;
}

par_status par_ckpt_load_best(const char *dir, const par_ckpt_meta *meta, const par_model *m,
                              par_dtype dt, void *best)
{
    char npz[1200], sha[65];
    snprintf(npz, sizeof npz, "%s/%s", dir, meta->npz);
    PAR_FAIL_IF(!meta->has_best, PAR_ERR_CONFIG, "%s: holds no best-epoch weights", npz);
    PAR_TRY(par_sha256_file(sha, npz));
    PAR_FAIL_IF(strcmp(sha, meta->npz_sha256) != 0, PAR_ERR_FORMAT,
                "%s: SHA-256 differs from its checkpoint's record (damaged)", npz);
    par_npz z;
    PAR_TRY(par_npz_read(&z, npz));
    const par_status st = load_members(npz, &z, m, dt, "best.", best);
    par_npz_free(&z);
    return st;
}

par_status par_ckpt_load_optim(const char *dir, const par_ckpt_meta *meta, const par_model *m,
                               par_dtype dt, int n, const char *const names[2],
                               par_ckpt_optim *os)
{
    char npz[1200], sha[65];
    snprintf(npz, sizeof npz, "%s/%s", dir, meta->npz);
    int same = meta->optim_n == n;
    for (int i = 0; same && i < n; i++) same = strcmp(meta->optim_names[i], names[i]) == 0;
    PAR_FAIL_IF(!same, PAR_ERR_CONFIG,
                "%s: holds %d optimizer state arrays (%s%s%s), this run's optimizer has %d "
                "(%s%s%s)", npz, meta->optim_n, meta->optim_n > 0 ? meta->optim_names[0] : "",
                meta->optim_n > 1 ? ", " : "", meta->optim_n > 1 ? meta->optim_names[1] : "", n,
                n > 0 ? names[0] : "", n > 1 ? ", " : "", n > 1 ? names[1] : "");
    os->n = n;
    os->t = meta->optim_t;
    if (n == 0) return PAR_OK;
    PAR_TRY(par_sha256_file(sha, npz));
    PAR_FAIL_IF(strcmp(sha, meta->npz_sha256) != 0, PAR_ERR_FORMAT,
                "%s: SHA-256 differs from its checkpoint's record (damaged)", npz);
    par_npz z;
    PAR_TRY(par_npz_read(&z, npz));
    par_status st = PAR_OK;
    for (int i = 0; i < n && st == PAR_OK; i++) {
        os->names[i] = names[i];
        char prefix[32];
        snprintf(prefix, sizeof prefix, "opt.%s.", names[i]);
        st = load_members(npz, &z, m, dt, prefix, os->arr[i]);
    }
    par_npz_free(&z);
    return st;
}

par_status par_npz_load_optim(const char *npz, const par_model *m, par_dtype dt, int n,
                              const char *const names[2], void *arr[2])
{
    if (n == 0) return PAR_OK;
    par_npz z;
    PAR_TRY(par_npz_read(&z, npz));
    par_status st = PAR_OK;
    for (int i = 0; i < n && st == PAR_OK; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "opt.%s.", names[i]);
        st = load_members(npz, &z, m, dt, prefix, arr[i]);
    }
    par_npz_free(&z);
    return st;
}
