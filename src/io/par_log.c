// JSONL step log via jansson: one compact object per line, reals with 17
// significant digits so they read back bitwise, null for NaN/Inf. Lines go
// to the path itself as they come (one write(2) each; a failed write is cut
// back to the last whole line), so that `tail -f` follows the run and a
// stopped run leaves the lines of the steps it did. Not a
// general JSON writer. Tested by tests/unit/test_io.c.
#define _POSIX_C_SOURCE 200809L

#include "par_log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "par_hash.h"

#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

struct par_log {
    int fd;
    char *path;
    off_t good;        // bytes of whole lines written
    par_status first;  // first error seen, PAR_OK if none
    char why[400];     // its message, without origin
};

static void free_log(par_log *lg)
{
    free(lg->path);
    free(lg);
}

// Records st as the last error, and as lg's first error if it is one.
__attribute__((format(printf, 3, 4)))
static par_status fail(par_log *lg, par_status st, const char *fmt, ...)
{
    char msg[sizeof lg->why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (lg->first == PAR_OK) {
        lg->first = st;
        memcpy(lg->why, msg, sizeof msg);
    }
    return par_set_error(st, __FILE__, __LINE__, "%s", msg);
}

par_status par_log_open(par_log **log, const char *path)
{
    *log = NULL;
    PAR_TRY(par_out_check(path));
    par_log *lg = calloc(1, sizeof *lg);
    PAR_FAIL_IF(!lg, PAR_ERR_ALLOC, "log %s: out of memory", path);
    lg->path = strdup(path);
    if (!lg->path) {
        free_log(lg);
        return par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "log %s: out of memory", path);
    }
    lg->fd = open(lg->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (lg->fd < 0) {
        par_status st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot create log %s: %s",
                                      lg->path, strerror(errno));
        free_log(lg);
        return st;
    }
    *log = lg;
    return PAR_OK;
}

static json_t *real_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

// Writes obj as one line and drops it.
static par_status write_line(par_log *lg, json_t *obj)
{
    if (lg->first != PAR_OK) {
        json_decref(obj);
        return par_set_error(lg->first, __FILE__, __LINE__, "%s", lg->why);
    }
    if (!obj) return fail(lg, PAR_ERR_ALLOC, "log %s: out of memory", lg->path);
    char *s = json_dumps(obj, DUMP_FLAGS);
    json_decref(obj);
    if (!s) return fail(lg, PAR_ERR_ALLOC, "log %s: cannot encode a line", lg->path);
    size_t n = strlen(s);
    s[n] = '\n';   // over the NUL: the line is written in one piece
    size_t done = 0;
    int err = 0;
    while (done < n + 1) {
        ssize_t w = write(lg->fd, s + done, n + 1 - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        done += (size_t)w;
    }
    free(s);
    if (err) {   // no half line is left behind
        if (ftruncate(lg->fd, lg->good) == 0) (void)lseek(lg->fd, lg->good, SEEK_SET);
        return fail(lg, PAR_ERR_IO, "cannot write log %s: %s", lg->path, strerror(err));
    }
    lg->good += (off_t)done;
    return PAR_OK;
}

par_status par_log_step(par_log *log, int epoch, long step, double loss,
                        const char *weights_xxh128)
{
    assert(log);
    json_t *j = json_pack("{s:s, s:i, s:I, s:o}", "type", "step", "epoch", epoch, "step",
                          (json_int_t)step, "loss", real_or_null(loss));
    if (j && weights_xxh128) {
        // The loss digest: XXH3-128 of the 8 bytes of the f64 value, so two
        // logs can be compared without parsing decimals.
        char loss_xxh[33];
        par_xxh128_hex(loss_xxh, &loss, sizeof loss);
        json_object_set_new(j, "weights_xxh128", json_string(weights_xxh128));
        json_object_set_new(j, "loss_xxh128", json_string(loss_xxh));
    }
    return write_line(log, j);
}

par_status par_log_epoch(par_log *log, int epoch, long step, double val_loss, double val_acc,
                         double test_loss, double test_acc)
{
    assert(log);
    return write_line(log, json_pack("{s:s, s:i, s:I, s:o, s:o, s:o, s:o}", "type", "epoch",
                                     "epoch", epoch, "step", (json_int_t)step, "val_loss",
                                     real_or_null(val_loss), "val_accuracy",
                                     real_or_null(val_acc), "test_loss", real_or_null(test_loss),
                                     "test_accuracy", real_or_null(test_acc)));
}

par_status par_log_close(par_log *log)
{
    assert(log);
    par_status st = log->first;
    if (st == PAR_OK && fsync(log->fd) != 0) {
        st = fail(log, PAR_ERR_IO, "cannot write log %s: %s", log->path, strerror(errno));
    }
    if (close(log->fd) != 0 && st == PAR_OK) {
        st = fail(log, PAR_ERR_IO, "cannot write log %s: %s", log->path, strerror(errno));
    }
    if (st != PAR_OK)   // the lines written before the error stay
        par_set_error(st, __FILE__, __LINE__, "log %s incomplete: %s", log->path, log->why);
    free_log(log);
    return st;
}

void par_log_discard(par_log *log)
{
    if (!log) return;
    close(log->fd);   // the lines written stay: they are the steps done
    free_log(log);
}

par_status par_log_old_digests(const char *path, long line)
{
    return par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__,
                         "%s:%ld: \"weights_sha256\": a log of parity before XXH3-128 step "
                         "digests; expected \"weights_xxh128\" (write the log again)",
                         path, line);
}
