// The JSONL log at a checkpoint (par_ckpt_log.h): tracking where the log
// stands (bytes, lines, a running SHA-256) so that a checkpoint can record
// it, and finding and writing again those lines for a resumed run, so that
// its log equals an uninterrupted run's. Tested by tests/cli/test_resume.sh and
// tests/unit/test_session.c.
#define _POSIX_C_SOURCE 200809L

#include "par_ckpt_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "par_hash.h"

struct par_ckpt_logtrack {
    char path[1024], tmp[1100];
    uint64_t bytes;
    long lines;
    crypto_hash_sha256_state sha;
};

par_status par_ckpt_log_track(par_ckpt_logtrack **out, const char *log_path)
{
    *out = NULL;
    PAR_FAIL_IF(strlen(log_path) >= sizeof((par_ckpt_logtrack *)0)->path, PAR_ERR_CONFIG,
                "--log %.64s...: path too long", log_path);
    par_ckpt_logtrack *t = calloc(1, sizeof *t);
    PAR_FAIL_IF(!t, PAR_ERR_ALLOC, "out of memory");
    // Absolute, so that a run resumed from another folder finds the log.
    char cwd[512] = "";
    if (log_path[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    snprintf(t->path, sizeof t->path, "%s%s%s", cwd, cwd[0] ? "/" : "", log_path);
    snprintf(t->tmp, sizeof t->tmp, "%s", t->path);   // par_log writes in place
    crypto_hash_sha256_init(&t->sha);
    *out = t;
    return PAR_OK;
}

void par_ckpt_log_untrack(par_ckpt_logtrack *t) { free(t); }

par_status par_ckpt_log_sync(par_ckpt_logtrack *t, par_ckpt_log *out)
{
    int fd = open(t->tmp, O_RDONLY);
    PAR_FAIL_IF(fd < 0, PAR_ERR_IO, "cannot open log %s: %s", t->tmp, strerror(errno));
    int err = fsync(fd) != 0 ? errno : 0;
    unsigned char buf[1 << 15];
    while (!err) {
        ssize_t r = pread(fd, buf, sizeof buf, (off_t)t->bytes);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) err = errno;
        if (r <= 0) break;
        crypto_hash_sha256_update(&t->sha, buf, (size_t)r);
        for (ssize_t i = 0; i < r; i++) t->lines += buf[i] == '\n';
        t->bytes += (uint64_t)r;
    }
    close(fd);
    PAR_FAIL_IF(err, PAR_ERR_IO, "cannot sync log %s: %s", t->tmp, strerror(err));
    snprintf(out->path, sizeof out->path, "%s", t->path);
    snprintf(out->tmp, sizeof out->tmp, "%s", t->tmp);
    out->lines = t->lines;
    out->bytes = t->bytes;
    crypto_hash_sha256_state copy = t->sha;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&copy, h);
    sodium_bin2hex(out->sha256, sizeof out->sha256, h, sizeof h);
    return PAR_OK;
}

// The first n bytes of path if they have SHA-256 sha (malloc'd), else NULL.
static char *read_prefix(const char *path, uint64_t n, const char *sha)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < n ||
        n > ((uint64_t)1 << 34))
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    char have[65];
    if (!buf || got != n) {
        free(buf);
        return NULL;
    }
    par_sha256_hex(have, buf, (size_t)n);
    if (strcmp(have, sha) != 0) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

// A log of parity before XXH3-128 step digests: its step lines, written
// again, would change, so it cannot be continued.
static par_status old_digests(const char *src)
{
    return par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: its step lines carry "
                         "\"weights_sha256\" (a log of parity before XXH3-128 step digests); "
                         "expected \"weights_xxh128\": cannot continue it", src);
}

static double num_or_nan(json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

// One line of the log again through par_log.
static par_status replay_line(par_log *log, const char *line, size_t len, const char *src)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    PAR_FAIL_IF(!j, PAR_ERR_FORMAT, "%s: a log line is not JSON (%s)", src, je.text);
    const char *type = json_string_value(json_object_get(j, "type"));
    json_t *ep = json_object_get(j, "epoch"), *st = json_object_get(j, "step");
    par_status s = PAR_OK;
    if (!type || !json_is_integer(ep) || !json_is_integer(st)) {
        s = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: a log line has no type, "
                          "epoch or step", src);
    } else if (strcmp(type, "step") == 0 && json_object_get(j, "weights_sha256")) {
        s = old_digests(src);   // par_ckpt_log_find refused it already, for prefixes it read
    } else if (strcmp(type, "step") == 0) {
        const char *w = json_string_value(json_object_get(j, "weights_xxh128"));
        s = par_log_step(log, (int)json_integer_value(ep), (long)json_integer_value(st),
                         num_or_nan(json_object_get(j, "loss")), w);
    } else if (strcmp(type, "epoch") == 0) {
        s = par_log_epoch(log, (int)json_integer_value(ep), (long)json_integer_value(st),
                          num_or_nan(json_object_get(j, "val_loss")),
                          num_or_nan(json_object_get(j, "val_accuracy")),
                          num_or_nan(json_object_get(j, "test_loss")),
                          num_or_nan(json_object_get(j, "test_accuracy")));
    } else {
        s = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: log line of unknown type '%s'",
                          src, type);
    }
    json_decref(j);
    return s;
}

par_status par_ckpt_log_find(char **prefix, char *used, size_t cap, const par_ckpt_log *from,
                             const char *also_path)
{
    *prefix = NULL;
    const char *cands[3] = {from->tmp, from->path, also_path};
    for (int i = 0; i < 3 && !*prefix; i++) {
        if (!cands[i] || !*cands[i]) continue;
        *prefix = read_prefix(cands[i], from->bytes, from->sha256);
        if (*prefix) snprintf(used, cap, "%s", cands[i]);
    }
    // Refused here, before the log is opened (and truncated) to be written
    // again. par_log writes compact JSON whose only strings are type names
    // and hex digests, so this key text is a step line's SHA-256 digest.
    if (*prefix && strstr(*prefix, "\"weights_sha256\":")) {
        free(*prefix);
        *prefix = NULL;
        return old_digests(used);
    }
    PAR_FAIL_IF(!*prefix, PAR_ERR_IO,
                "cannot continue log %s: none of %s, %s%s%s holds its first %" PRIu64
                " bytes (SHA-256 %.16s...) as of the checkpoint", from->path, from->tmp,
                from->path, also_path ? ", " : "", also_path ? also_path : "", from->bytes,
                from->sha256);
    return PAR_OK;
}

par_status par_ckpt_log_replay(par_log *log, par_ckpt_logtrack *t, const par_ckpt_log *from,
                               const char *prefix, const char *src)
{
    par_status st = PAR_OK;
    const char *p = prefix, *end = prefix + from->bytes;
    while (st == PAR_OK && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        PAR_FAIL_IF(!nl, PAR_ERR_FORMAT, "%s: the log prefix does not end with a full line", src);
        st = replay_line(log, p, (size_t)(nl - p), src);
        p = nl + 1;
    }
    PAR_TRY(st);
    par_ckpt_log now;
    PAR_TRY(par_ckpt_log_sync(t, &now));
    PAR_FAIL_IF(now.bytes != from->bytes || strcmp(now.sha256, from->sha256) != 0, PAR_ERR_FORMAT,
                "log %s: its lines written again differ from %s (%" PRIu64 " bytes, expected %"
                PRIu64 ")", t->tmp, src, now.bytes, from->bytes);
    return PAR_OK;
}
