// The session API (src/train/par_session.h) driven directly, below the CLI:
// a run stopped by its stop flag writes a checkpoint, and a session resumed
// from it ends with weights and a log bitwise equal to an uninterrupted
// session's (momentum, so the optimizer state travels too). A config that
// differs from the checkpoint's is refused. Small model, 1000 records.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "par_fixtures.h"
#include "par_session.h"

extern const par_trainer_ops par_trainer_serial;

static volatile sig_atomic_t stop_flag;

typedef struct stopper {
    long at;   // raise the stop flag after this step (0: never)
    long progress_steps;
} stopper;

static void on_progress(void *ctx, const par_session_progress *p)
{
    stopper *sp = ctx;
    if (p->epoch_end) return;
    sp->progress_steps++;
    if (sp->at && p->step == sp->at) stop_flag = 2;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    *n = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

// One session of cfg; its final weights into w (bytes). Returns its status.
static par_status session(const par_session_cfg *cfg, void *w, size_t bytes,
                          par_session_result *out)
{
    par_session *s = NULL;
    stop_flag = 0;
    par_status st = par_session_open(&s, cfg);
    if (st == PAR_OK) st = par_session_run(s, &stop_flag);
    if (s) {
        *out = *par_session_result_get(s);
        if (st == PAR_OK || st == PAR_RUN_STOP) memcpy(w, out->weights, bytes);
        out->weights = NULL;   // freed with the session
        out->skipped = out->hint = out->ckpt_dir = NULL;
    }
    par_session_close(s);
    return st;
}

int main(void)
{
    par_dataset ds;
    fixture_dataset(&ds, 1000);   // batch 64: 16 steps per epoch
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-24-10", PAR_ACT_RELU));
    const size_t bytes = m.n_params * sizeof(float);
    float *full = malloc(3 * bytes), *part = full + m.n_params, *res = part + m.n_params;
    PAR_REQUIRE(full ? PAR_OK : PAR_ERR_ALLOC);
    char dir[] = "/tmp/test_session_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char ck[256], log_full[256], log_res[256];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(log_full, sizeof log_full, "%s/full.jsonl", dir);
    snprintf(log_res, sizeof log_res, "%s/resumed.jsonl", dir);

    stopper sp = {0, 0};
    par_optim op = par_optim_default(PAR_OPTIM_MOMENTUM);
    const par_session_cfg base = {
        .run = {.trainer = &par_trainer_serial,
                .cfg = {.model = &m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT, .batch = 64,
                        .chunk = 8, .lr = 0.05, .threads = 1, .optim = &op},
                .ds = &ds, .seed = 7, .epochs = 2, .max_steps = 24, .check_every = 5},
        .act = PAR_ACT_RELU, .rank = 0, .ranks = 1, .ctx = &sp, .progress = on_progress,
    };
    par_session_result r;

    // Uninterrupted: 24 steps (one epoch and a half), a log, no checkpoints.
    par_session_cfg c = base;
    c.log = log_full;
    par_status st = session(&c, full, bytes, &r);
    par_check(st == PAR_OK && r.steps == 24 && r.resumed_from == -1 && r.last_ckpt == -1,
              "uninterrupted session: 24 steps");
    par_check(sp.progress_steps == 24, "progress told after every step");

    // Stopped by the flag after step 9: a checkpoint of step 9 (every 4: 4, 8, 9).
    c = base;
    c.ckpt_dir = ck;
    c.ckpt_every = 4;
    c.log = log_res;
    sp.at = 9;
    st = session(&c, part, bytes, &r);
    par_check(st == PAR_RUN_STOP && r.stop_sig == 2 && r.steps == 9 && r.last_ckpt == 9 &&
              r.ckpt_open, "the stop flag stops after step 9 with its checkpoint");
    sp.at = 0;

    // Resumed from the folder (checkpoints go on there): the uninterrupted weights.
    c = base;
    c.resume = ck;
    c.log = log_res;
    st = session(&c, res, bytes, &r);
    par_check(st == PAR_OK && r.resumed_from == 9 && r.steps == 24 && r.last_ckpt == 24,
              "resumed at step 9, 24 steps in all, last checkpoint at 24");
    par_check(st == PAR_OK && memcmp(res, full, bytes) == 0,
              "resumed session: final weights bitwise equal to the uninterrupted session's");
    size_t n1 = 0, n2 = 0;
    char *a = slurp(log_full, &n1), *b = slurp(log_res, &n2);
    par_check(a && b && n1 > 0 && n1 == n2 && memcmp(a, b, n1) == 0,
              "resumed session: its log equals the uninterrupted session's byte for byte");
    free(a);
    free(b);

    // Another learning rate is another run: refused with a hint.
    c = base;
    c.resume = ck;
    c.run.cfg.lr = 0.1;
    par_session *s = NULL;
    st = par_session_open(&s, &c);
    par_check(st == PAR_ERR_CONFIG && strstr(par_last_error(), "is from another run: --lr") &&
              s && par_session_result_get(s)->hint,
              "a resume with another --lr is refused, with a hint");
    par_session_close(s);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("  could not remove %s\n", dir);
    free(full);
    par_dataset_free(&ds);
    return par_test_exit();
}
