// The step protocol, parity's side (ext_proto.h; docs/external.md): the
// private folder and its FIFOs, the trainer as a child in its own process
// group (src/io/par_proc.h), JSON lines with a timeout on every answer and
// a look at the child between reads, the folder removed at the end.
#define _XOPEN_SOURCE 700   // nftw
#include "ext_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "par_time.h"
#include "par_proc.h"

enum { LINE_MAX_BYTES = 1 << 20 };

struct ext_trainer {
    char dir[512];
    int to_fd, from_fd;        // the FIFOs' ends parity holds
    par_proc proc;
    int ended;                 // the child was reaped
    par_proc_result res;       // its status once ended
    double timeout_s;
    volatile int *interrupted; // the CLI's Ctrl-C flag (NULL: none)
    char *line;                // bytes read past the last answer
    size_t line_len;
};

void ext_path(const ext_trainer *t, char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", t->dir, name);
}

const char *ext_dir(const ext_trainer *t) { return t->dir; }

// The command's words as a shell splits them: blanks separate words; '...'
// keeps everything; "..." keeps everything but \" \\ \$ \` (escaped); a
// backslash outside quotes keeps the next character. Nothing is expanded.
static par_status split_command(par_argv *a, const char *cmd)
{
    size_t n = strlen(cmd);
    char *word = malloc(n + 1);
    PAR_FAIL_IF(!word, PAR_ERR_ALLOC, "out of memory");
    size_t k = 0;
    int in_word = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = cmd[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) {
                word[k] = '\0';
                par_argv_add(a, "%s", word);
                k = 0;
                in_word = 0;
            }
            continue;
        }
        in_word = 1;
        if (c == '\\' && i + 1 < n) {
            word[k++] = cmd[++i];
        } else if (c == '\'' || c == '"') {
            size_t j = i + 1;
            for (; j < n && cmd[j] != c; j++) {
                if (c == '"' && cmd[j] == '\\' && j + 1 < n && strchr("\"\\$`", cmd[j + 1])) j++;
                word[k++] = cmd[j];
            }
            if (j == n) {
                free(word);
                return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                                     "--external '%s': a %s quote is not closed", cmd,
                                     c == '\'' ? "single" : "double");
            }
            i = j;
        } else {
            word[k++] = c;
        }
    }
    if (in_word) {
        word[k] = '\0';
        par_argv_add(a, "%s", word);
    }
    free(word);
    PAR_FAIL_IF(a->n == 0, PAR_ERR_CONFIG, "--external: expected a command, got '%s'", cmd);
    return PAR_OK;
}

// Whether the trainer has ended (reaped into t->res).
static int child_ended(ext_trainer *t)
{
    if (!t->ended && t->proc.pid > 0 && par_proc_poll(&t->proc, &t->res) == 1) t->ended = 1;
    return t->ended;
}

void ext_log_tail(const ext_trainer *t, char *buf, size_t n, int lines)
{
    buf[0] = '\0';
    char path[600];
    ext_path(t, path, sizeof path, "trainer.log");
    FILE *f = fopen(path, "r");
    if (!f) return;
    static char data[65536];
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, size > (long)sizeof data - 1 ? size - (long)sizeof data + 1 : 0, SEEK_SET);
    const size_t got = fread(data, 1, sizeof data - 1, f);
    fclose(f);
    data[got] = '\0';
    while (got && (data[strlen(data) - 1] == '\n')) data[strlen(data) - 1] = '\0';
    const char *p = data + strlen(data);
    for (int k = 0; k < lines && p > data; k++) {
        --p;
        while (p > data && p[-1] != '\n') p--;
    }
    snprintf(buf, n, "%s", p);
}

// One-line reason the trainer is gone, with what it printed last.
static par_status gone(ext_trainer *t, const char *waiting_for)
{
    char tail[400];
    ext_log_tail(t, tail, sizeof tail, 1);
    if (t->res.signal)
        return par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                             "the trainer ended by signal %d while parity waited for %s%s%s",
                             t->res.signal, waiting_for, tail[0] ? "; it last printed: " : "",
                             tail);
    return par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                         "the trainer exited with status %d while parity waited for %s%s%s",
                         t->res.code, waiting_for, tail[0] ? "; it last printed: " : "", tail);
}

// Opens to-trainer for writing once the trainer has opened it for reading.
static par_status open_writer(ext_trainer *t, const char *path)
{
    const double t0 = par_now();
    for (;;) {
        t->to_fd = open(path, O_WRONLY | O_NONBLOCK);
        if (t->to_fd >= 0) break;
        PAR_FAIL_IF(errno != ENXIO, PAR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        if (child_ended(t)) return gone(t, "it to open its end of the protocol's FIFOs");
        PAR_FAIL_IF(t->interrupted && *t->interrupted, PAR_ERR_EXTERNAL, "interrupted");
        PAR_FAIL_IF(par_now() - t0 > t->timeout_s, PAR_ERR_EXTERNAL,
                    "the trainer did not open %s within %.0f s (--timeout): does it speak the "
                    "step protocol (PARITY_EXTERNAL)?", path, t->timeout_s);
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    // Writes block from now on (answers are short; the trainer reads them).
    const int fl = fcntl(t->to_fd, F_GETFL);
    PAR_FAIL_IF(fl < 0 || fcntl(t->to_fd, F_SETFL, fl & ~O_NONBLOCK) < 0, PAR_ERR_IO,
                "%s: %s", path, strerror(errno));
    return PAR_OK;
}

static par_status send_line(ext_trainer *t, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "out of memory");
    const size_t n = strlen(s);
    s[n] = '\n';   // json_dumps's NUL becomes the line's end; written as n + 1 bytes
    size_t done = 0;
    par_status st = PAR_OK;
    // A closed reader gives EPIPE, not SIGPIPE, while this write runs.
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    while (done < n + 1) {
        const ssize_t w = write(t->to_fd, s + done, n + 1 - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            st = child_ended(t) ? gone(t, "it to read a message")
                                : par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                                                "writing to the trainer: %s", strerror(errno));
            break;
        }
        done += (size_t)w;
    }
    sigaction(SIGPIPE, &old, NULL);
    free(s);
    return st;
}

// Reads one line (an answer to `op`) into a JSON object.
static par_status read_line(ext_trainer *t, const char *op, json_t **out)
{
    *out = NULL;
    char what[80];
    snprintf(what, sizeof what, "its answer to '%s'", op);
    const double t0 = par_now();
    for (;;) {
        char *nl = t->line_len ? memchr(t->line, '\n', t->line_len) : NULL;
        if (nl) {
            const size_t len = (size_t)(nl - t->line);
            json_error_t je;
            json_t *j = json_loadb(t->line, len, 0, &je);
            memmove(t->line, nl + 1, t->line_len - len - 1);
            t->line_len -= len + 1;
            PAR_FAIL_IF(!json_is_object(j), PAR_ERR_EXTERNAL,
                        "the trainer's answer to '%s' is not a JSON object%s%s", op,
                        j ? "" : ": ", j ? "" : je.text);
            *out = j;
            return PAR_OK;
        }
        PAR_FAIL_IF(t->line_len >= LINE_MAX_BYTES, PAR_ERR_EXTERNAL,
                    "the trainer's answer to '%s' is longer than %d bytes with no newline", op,
                    LINE_MAX_BYTES);
        struct pollfd pf = {t->from_fd, POLLIN, 0};
        const int r = poll(&pf, 1, 50);
        if (r > 0 && (pf.revents & POLLIN)) {
            char *grown = realloc(t->line, t->line_len + 65536);
            PAR_FAIL_IF(!grown, PAR_ERR_ALLOC, "out of memory");
            t->line = grown;
            const ssize_t got = read(t->from_fd, t->line + t->line_len, 65536);
            if (got > 0) t->line_len += (size_t)got;
            continue;
        }
        PAR_FAIL_IF(r < 0 && errno != EINTR, PAR_ERR_IO, "poll: %s", strerror(errno));
        if (child_ended(t)) return gone(t, what);
        PAR_FAIL_IF(t->interrupted && *t->interrupted, PAR_ERR_EXTERNAL, "interrupted");
        PAR_FAIL_IF(par_now() - t0 > t->timeout_s, PAR_ERR_EXTERNAL,
                    "the trainer gave no answer to '%s' within %.0f s (--timeout)", op,
                    t->timeout_s);
    }
}

par_status ext_send(ext_trainer *t, json_t *msg) { return send_line(t, msg); }

par_status ext_request(ext_trainer *t, json_t *msg, json_t **reply)
{
    PAR_TRY(send_line(t, msg));
    return ext_receive(t, json_string_value(json_object_get(msg, "op")), reply);
}

par_status ext_receive(ext_trainer *t, const char *op, json_t **reply)
{
    *reply = NULL;
    json_t *j;
    PAR_TRY(read_line(t, op, &j));
    const char *got = json_string_value(json_object_get(j, "op"));
    if (got && strcmp(got, "error") == 0) {
        const char *m = json_string_value(json_object_get(j, "message"));
        par_status st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                                      "the trainer reported an error at '%s': %s", op,
                                      m ? m : "(no message)");
        json_decref(j);
        return st;
    }
    if (!got || strcmp(got, op) != 0) {
        par_status st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                                      "the trainer answered '%s' with op '%s', expected '%s'", op,
                                      got ? got : "(none)", op);
        json_decref(j);
        return st;
    }
    *reply = j;
    return PAR_OK;
}

// Removes the folder and everything in it (the trainer's TMPDIR included).
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)f;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;   // on with the rest whatever one removal did
}

static void remove_dir(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

void ext_stop(ext_trainer *t)
{
    if (!t) return;
    if (t->to_fd >= 0 && !child_ended(t)) {
        json_t *q = json_pack("{s:s}", "op", "quit");
        if (q && send_line(t, q) == PAR_OK) {
            const double t0 = par_now();
            while (!child_ended(t) && par_now() - t0 < 3)
                nanosleep(&(struct timespec){0, 20000000}, NULL);
        }
        json_decref(q);
    }
    if (t->to_fd >= 0) close(t->to_fd);
    if (t->from_fd >= 0) close(t->from_fd);
    if (!child_ended(t) && t->proc.pid > 0) {
        par_proc_signal(&t->proc, SIGTERM, 1);
        const par_proc_wait_opts w = {.timeout_s = 5};
        par_proc_wait(&t->proc, &w, &t->res);
        t->ended = 1;
    }
    par_proc_result_free(&t->res);
    remove_dir(t->dir);
    free(t->line);
    free(t);
}

par_status ext_start(ext_trainer **out, const ext_opts *o, json_t *hello, json_t **reply)
{
    *out = NULL;
    *reply = NULL;
    ext_trainer *t = calloc(1, sizeof *t);
    PAR_FAIL_IF(!t, PAR_ERR_ALLOC, "out of memory");
    t->to_fd = t->from_fd = -1;
    t->timeout_s = o->timeout_s > 0 ? o->timeout_s : 120;
    t->interrupted = o->interrupted;
    // The folder's files are rewritten every step (tens of MB for a CNN):
    // $TMPDIR when set, else /dev/shm (memory: 38 MB written in 0.045 s
    // there, 0.12-0.40 s on a disk-backed /tmp here), else /tmp.
    const char *tmpdir_env = getenv("TMPDIR");
    const int set = tmpdir_env && *tmpdir_env;
    const char *where[2] = {set ? tmpdir_env : "/dev/shm", "/tmp"};
    const int tries = set ? 1 : 2;
    int k = 0;
    do snprintf(t->dir, sizeof t->dir, "%s/parity-ext.XXXXXX", where[k]);
    while (!mkdtemp(t->dir) && ++k < tries);
    if (k == tries) {
        const int e = errno;
        free(t);
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__,
                             "cannot make a private folder in %s: %s", where[k - 1], strerror(e));
    }
    char to[600], from[600], log[600], tmpdir[600], env_dir[700], env_tmp[700];
    ext_path(t, to, sizeof to, "to-trainer");
    ext_path(t, from, sizeof from, "from-trainer");
    ext_path(t, log, sizeof log, "trainer.log");
    ext_path(t, tmpdir, sizeof tmpdir, "tmp");
    snprintf(env_dir, sizeof env_dir, "PARITY_EXTERNAL=%s", t->dir);
    // The trainer's temporary files (torchrun's among them) go with the folder.
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmpdir);
    par_argv argv = {0};
    par_status st = split_command(&argv, o->command);
    if (st == PAR_OK && (mkfifo(to, 0600) != 0 || mkfifo(from, 0600) != 0 ||
                         mkdir(tmpdir, 0700) != 0))
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__,
                           "cannot make the FIFOs and tmp/ in %s: %s", t->dir, strerror(errno));
    // Read end first, O_RDWR: it holds a writer of its own, so reads never see
    // an end of file before the trainer opens its end.
    if (st == PAR_OK && (t->from_fd = open(from, O_RDWR | O_NONBLOCK)) < 0)
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot open %s: %s", from,
                           strerror(errno));
    if (st == PAR_OK) {
        const char *env[] = {env_dir, "PARITY_PROTOCOL=1", env_tmp, NULL};
        const par_proc_spec spec = {.argv = (const char *const *)argv.v,
                                    .env = env,
                                    .out = PAR_PROC_FILE,
                                    .err = PAR_PROC_FILE,
                                    .out_path = log,
                                    .err_path = log,
                                    .group = PAR_PROC_OWN_GROUP,
                                    .die_with_parent = 1};
        st = par_proc_start(&t->proc, &spec);
        if (st != PAR_OK)
            st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__, "--external: %s",
                               par_last_error());
    }
    par_argv_free(&argv);
    if (st == PAR_OK) st = open_writer(t, to);
    if (st == PAR_OK) {
        json_object_set_new(hello, "op", json_string("hello"));
        json_object_set_new(hello, "protocol", json_integer(1));
        st = ext_request(t, hello, reply);
    }
    if (st == PAR_OK) {
        const json_int_t pv = json_integer_value(json_object_get(*reply, "protocol"));
        if (pv != 1)
            st = par_set_error(PAR_ERR_EXTERNAL, __FILE__, __LINE__,
                               "the trainer speaks protocol %lld, parity speaks 1", (long long)pv);
    }
    if (st != PAR_OK) {
        char keep[600];
        snprintf(keep, sizeof keep, "%s", par_last_error());
        json_decref(*reply);
        *reply = NULL;
        ext_stop(t);
        return par_set_error(st, __FILE__, __LINE__, "%s", keep);
    }
    *out = t;
    return PAR_OK;
}
