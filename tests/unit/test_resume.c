// Resume and fault checks of the library, below the CLI (tests/cli/test_resume.sh
// covers the CLI): par_run_ex resumed from any point equals the uninterrupted
// run bit for bit (mid-epoch, at an epoch's end, after a short last batch);
// PAR_RUN_STOP stops cleanly; the NaN/Inf check names the step, tensor and
// element when only a weight is bad; checkpoints round-trip, prune to K and
// reject damage. Synthetic data (1000 records), small model: well under 1 s.
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "par_ckpt.h"
#include "par_fixtures.h"

extern const par_trainer_ops par_trainer_serial;

typedef struct grab {
    long at;              // capture the point and weights after this step
    par_run_point pt;
    void *w;
    size_t bytes;
    long stop_at;         // return PAR_RUN_STOP after this step (0: never)
} grab;

static par_status after(void *ctx, const par_run_point *pt, const void *params,
                        const par_run_now *now)
{
    (void)now;
    grab *g = ctx;
    if (pt->step == g->at) {
        g->pt = *pt;
        memcpy(g->w, params, g->bytes);
    }
    return g->stop_at && pt->step == g->stop_at ? PAR_RUN_STOP : PAR_OK;
}

int main(void)
{
    par_dataset ds;
    fixture_dataset(&ds, 1000);   // 1000 records, batch 64: 15 full batches + 40
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-24-10", PAR_ACT_RELU));
    const size_t N = m.n_params, bytes = N * sizeof(float);
    float *w0 = malloc(bytes), *full = malloc(bytes), *part = malloc(bytes), *res = malloc(bytes);
    par_model_init(&m, PAR_F32, 3, w0);
    par_run_opts o = {.trainer = &par_trainer_serial,
                      .cfg = {.model = &m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT, .batch = 64,
                              .chunk = 8, .lr = 0.05, .threads = 1, .init_params = w0},
                      .ds = &ds, .seed = 11, .epochs = 3};
    long done = 0;
    par_check(par_run(&o, NULL, full, &done, NULL) == PAR_OK && done == 48,
              "uninterrupted: 3 epochs of 16 steps");

    // Resume from every kind of point: mid-epoch, after the short batch that
    // ends epoch 0 (pos == n_train), first step of an epoch, the very last.
    const long points[] = {5, 16, 17, 30, 47, 48};
    for (size_t k = 0; k < sizeof points / sizeof points[0]; k++) {
        grab g = {points[k], {0, 0, 0}, part, bytes, 0};
        const par_run_hooks h = {.ctx = &g, .after_step = after};
        par_status st = par_run(&o, &h, NULL, &done, NULL);
        par_run_opts o2 = o;
        o2.cfg.init_params = part;
        o2.start = &g.pt;
        o2.check_finite = 1;
        o2.check_every = 1;
        if (st == PAR_OK) st = par_run(&o2, NULL, res, &done, NULL);
        char name[128];
        snprintf(name, sizeof name, "resumed at step %ld (epoch %d, record %zu): bitwise equal",
                 g.pt.step, g.pt.epoch, g.pt.pos);
        par_check(st == PAR_OK && done == 48 && memcmp(res, full, bytes) == 0, name);
    }
    {
        par_run_point bad = {1, 64, 5};   // says step 5, is step 17
        par_run_opts ob = o;
        ob.start = &bad;
        par_status st = par_run(&ob, NULL, res, &done, NULL);
        par_check(st == PAR_ERR_CONFIG && strstr(par_last_error(), "is step 17"),
                  "an inconsistent resume point is refused");
    }

    // A clean stop: PAR_RUN_STOP after step 7, final weights are step 7's.
    {
        grab g = {7, {0, 0, 0}, part, bytes, 7};
        const par_run_hooks h = {.ctx = &g, .after_step = after};
        par_run_opts oc = o;
        oc.check_finite = 1;
        oc.check_every = 1;
        par_status st = par_run(&oc, &h, res, &done, NULL);
        par_check(st == PAR_RUN_STOP && done == 7 && memcmp(res, part, bytes) == 0,
                  "PAR_RUN_STOP: stops after the step, final weights of that step");
    }

    // Only a weight is bad (-inf in a bias: ReLU(-inf) = 0, loss and gradient
    // stay finite): named after step 1.
    {
        float *wb = malloc(bytes);
        memcpy(wb, w0, bytes);
        wb[m.views[1].offset + 5] = -INFINITY;
        par_run_opts ob = o;
        ob.cfg.init_params = wb;
        ob.check_finite = 1;
        ob.check_every = 1;
        par_status st = par_run(&ob, NULL, res, &done, NULL);
        const char *e = par_last_error();
        par_check(st == PAR_ERR_NUMERIC && done == 1 &&
                      strstr(e, "step 1 (epoch 0): weight layer0.bias[5] = -inf after the update") &&
                      !strstr(e, "loss ="),
                  "NaN/Inf check: a bad weight named by step, tensor and element");
        if (st != PAR_ERR_NUMERIC) printf("  got: %s\n", e);
        wb[m.views[1].offset + 5] = NAN;
        wb[m.views[2].offset + 3 * 24 + 7] = INFINITY;   // layer1.weight[3][7]
        char where[160];
        par_check(par_find_nonfinite(where, sizeof where, &m, PAR_F32, wb) &&
                      strcmp(where, "layer0.bias[5] = nan") == 0,
                  "par_find_nonfinite: the first bad element, by view");
        free(wb);
    }

    // Checkpoints: write 5, keep 2, find the newest, reject a damaged one.
    {
        char dir[] = "/tmp/parity-test-resume-XXXXXX";
        par_check(mkdtemp(dir) != NULL, "temp folder");
        par_ckpt_dir *d = NULL;
        par_status st = par_ckpt_dir_open(&d, dir, 0, 1);
        par_ckpt_meta mt;
        memset(&mt, 0, sizeof mt);
        snprintf(mt.cfg.model, sizeof mt.cfg.model, "%s", m.spec);
        snprintf(mt.cfg.act, sizeof mt.cfg.act, "relu");
        snprintf(mt.cfg.dtype, sizeof mt.cfg.dtype, "f32");
        snprintf(mt.cfg.optimizer, sizeof mt.cfg.optimizer, "sgd");
        mt.cfg.batch = 64;
        mt.cfg.chunk = 8;
        mt.cfg.lr = 0.05;
        mt.cfg.seed = 11;
        memset(mt.cfg.init_sha256, 'a', 64);
        memset(mt.cfg.data_sha256, 'b', 64);
        snprintf(mt.trainer, sizeof mt.trainer, "serial");
        snprintf(mt.mode, sizeof mt.mode, "exact");
        for (long s = 1; st == PAR_OK && s <= 5; s++) {
            mt.step = s;
            mt.pos = (uint64_t)s * 64;
            full[0] = (float)s;
            st = par_ckpt_write(d, &mt, &m, PAR_F32, full, 2);
        }
        par_check(st == PAR_OK, "five checkpoints written");
        par_ckpt_meta f;
        char skipped[256];
        st = par_ckpt_find(&f, dir, skipped, sizeof skipped);
        par_check(st == PAR_OK && f.step == 5 && !skipped[0] && f.cfg.lr == 0.05 &&
                      !par_ckpt_config_diff(skipped, sizeof skipped, &f.cfg, &mt.cfg),
                  "the newest is found, its config equal");
        st = par_ckpt_load(dir, &f, &m, PAR_F32, res);
        par_check(st == PAR_OK && res[0] == 5.0f && memcmp(res + 1, full + 1, bytes - 4) == 0,
                  "its weights load");
        char p[512];
        snprintf(p, sizeof p, "%s/ckpt-0000000003.json", dir);
        par_check(access(p, F_OK) != 0, "--keep 2: older ones deleted");
        snprintf(p, sizeof p, "%s/ckpt-0000000005.npz", dir);
        FILE *fp = fopen(p, "r+b");
        if (fp) {
            fseek(fp, 200, SEEK_SET);
            fputc('Z', fp);
            fclose(fp);
        }
        st = par_ckpt_find(&f, dir, skipped, sizeof skipped);
        par_check(st == PAR_OK && f.step == 4 && strstr(skipped, "SHA-256 differs"),
                  "a damaged newest one is skipped, the older one found");
        mt.cfg.batch = 32;
        par_check(par_ckpt_config_diff(p, sizeof p, &f.cfg, &mt.cfg) &&
                      strcmp(p, "--batch: checkpoint 64, this run 32") == 0,
                  "config diff names the flag");
        par_ckpt_meta g;
        par_check(par_ckpt_meta_parse(&g, "{}", 2, "x.json") == PAR_ERR_FORMAT &&
                      par_ckpt_meta_parse(&g, "[1", 2, "x.json") == PAR_ERR_FORMAT,
                  "malformed metadata rejected");
        par_ckpt_dir *d2 = NULL;
        par_check(par_ckpt_dir_open(&d2, dir, 0, 0) == PAR_ERR_IO &&
                      strstr(par_last_error(), "in use by another run"),
                  "a second writer is locked out");
        par_ckpt_dir_close(d);
        par_check(par_ckpt_dir_open(&d2, dir, 0, 1) == PAR_ERR_CONFIG &&
                      strstr(par_last_error(), "already holds checkpoints (newest: step 5)"),
                  "a fresh run refuses a used folder");
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("  could not remove %s\n", dir);
    }
    free(w0);
    free(full);
    free(part);
    free(res);
    par_dataset_free(&ds);
    return par_test_exit();
}
