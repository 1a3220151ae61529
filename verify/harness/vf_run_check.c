// MPFR checks of a case (vf_run.h): `parity check` on the weights entering
// each checked step (initial weights, or the reference's saved after step
// S-1), for the reference and every single-process config's trainer; MPI
// configs are covered through the reference. Cached across cases.
#define _POSIX_C_SOURCE 200809L
#include "vf_run.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "par_data.h"
#include "par_io.h"
#include "par_trainer.h"

// ---- MPFR checks -------------------------------------------------------------------

// Weights entering step S: the initial weights for S = 1, else the
// reference's weights after S - 1 steps (run once, shared by cases).
static par_status weights_before(vf_runner *r, vf_case_run *cr, const json_t *ref, long S,
                                 char *path, size_t size)
{
    if (S == 1) {
        vf_fmt(path, size, "%s", json_string_value(json_object_get(ref, "init_weights")));
        return PAR_OK;
    }
    char key[700];
    vf_fmt(key, sizeof key, "%s|%ld", cr->ref_key, S - 1);
    json_t *saved = json_object_get(r->cache, "saved");
    const char *p = json_string_value(json_object_get(saved, key));
    if (p) {
        vf_fmt(path, size, "%s", p);
        return PAR_OK;
    }
    // SGD: the weights after step S - 1. Momentum, nesterov, adam: the
    // checkpoint after it, whose .npz also holds the optimizer state.
    const int sgd = strcmp(cr->c->optim, "sgd") == 0;
    char err[1200], ckdir[1100];
    vf_fmt(ckdir, sizeof ckdir, "%s/reference-step%ld.ckpt", cr->dir, S - 1);
    if (sgd) vf_fmt(path, size, "%s/reference-step%ld.npz", cr->dir, S - 1);
    else vf_fmt(path, size, "%s/ckpt-%010ld.npz", ckdir, S - 1);
    vf_fmt(err, sizeof err, "%s/reference-step%ld.err", cr->dir, S - 1);
    vf_note(r, "reference to step %ld (weights for the MPFR check of step %ld)", S - 1, S);
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "train");
    vf_case_flags(&b, cr, S - 1);
    par_argv_opt(&b, "--trainer", "reference");
    par_argv_add(&b, sgd ? "--save" : "--checkpoint-dir");
    par_argv_add(&b, "%s", sgd ? path : ckdir);
    if (!sgd) {
        par_argv_opt(&b, "--checkpoint-every", "%ld", S - 1);
    }
    par_argv_add(&b, "--quiet");
    int code;
    double wall;
    par_status st = vf_run_parity(r, &b, NULL, err, 0, &code, &wall, NULL);
    par_argv_free(&b);
    PAR_TRY(st);
    vf_task_done(r, cr, VF_T_REF, (double)(S - 1), wall);
    if (code != 0) {
        char why[600];
        vf_first_line(why, sizeof why, err);
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__,
                             "[case %s] the reference run to step %ld failed (exit %d): %s",
                             cr->c->name, S - 1, code, why);
    }
    if (!saved) {
        saved = json_object();
        json_object_set_new(r->cache, "saved", saved);
    }
    json_object_set_new(saved, key, json_string(path));
    return PAR_OK;
}

// One `parity check` of config k's trainer (cached across cases by
// settings, config and step); MPI trainers run it under mpirun, rank 0's
// view of the step is checked.
par_status vf_run_check(vf_runner *r, vf_case_run *cr, const json_t *ref, const vf_config *k, long S,
                        json_t *checks)
{
    const char *trainer = k->trainer;
    const int mode = k->mode, threads = k->threads, ranks = k->ranks;
    char key[800];
    vf_fmt(key, sizeof key, "%s|%s|%s|%d|%d|%ld", cr->ref_key, trainer, vf_mode_name(mode), threads,
           ranks, S);
    json_t *done = json_object_get(r->cache, "checks");
    json_t *prev = json_object_get(done, key);
    if (prev) {
        json_array_append(checks, prev);
        vf_task_skip(r, cr, VF_T_CHECK, 1, 1);
        return PAR_OK;
    }
    const vf_case *c = cr->c;
    char w[1200], out[1200], err[1200];
    PAR_TRY(weights_before(r, cr, ref, S, w, sizeof w));
    vf_fmt(out, sizeof out, "%s/check-%s-%s-T%d-R%d-step%ld.json", cr->dir, trainer,
           vf_mode_name(mode), threads, ranks, S);
    vf_fmt(err, sizeof err, "%s/check-%s-%s-T%d-R%d-step%ld.err", cr->dir, trainer,
           vf_mode_name(mode), threads, ranks, S);
    vf_note(r, "MPFR check: %s %s T=%d R=%d, step %ld", trainer, vf_mode_name(mode), threads, ranks,
            S);
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "check");
    par_argv_opt(&b, "--dataset", "%s", c->dataset);
    if (c->upscale > 0 && !cr->upscale_identity) {
        par_argv_opt(&b, "--upscale", "%d", c->upscale);
    }
    par_argv_opt(&b, "--weights", "%s", w);
    par_argv_opt(&b, "--step", "%ld", S);
    par_argv_opt(&b, "--seed", "%llu", (unsigned long long)c->seed);
    par_argv_opt(&b, "--model", "%s", c->model);
    if (strcmp(c->act, "relu") != 0) {
        par_argv_opt(&b, "--act", "%s", c->act);
    }
    par_argv_add(&b, "--batch");   // batch = full: the whole training split, numbered
    par_argv_add(&b, "%zu", c->batch > 0 ? (size_t)c->batch : cr->n_train);
    par_argv_opt(&b, "--chunk", "%d", c->chunk);
    par_argv_opt(&b, "--lr", "%.17g", c->lr);
    vf_optim_flags(&b, c);
    par_argv_opt(&b, "--dtype", "%s", c->dtype);
    par_argv_opt(&b, "--trainer", "%s", trainer);
    par_argv_opt(&b, "--mode", "%s", vf_mode_name(mode));
    par_argv_opt(&b, "--threads", "%d", threads);
    if (vf_trainer_is_mpi(trainer)) {
        par_argv_opt(&b, "--ranks", "%d", ranks);
    }
    par_argv_words(&b, "--no-e2e --json");
    int code;
    double wall;
    json_t *cj = NULL;
    par_status st = vf_run_parity(r, &b, out, err, vf_oversubscribed(r, k), &code, &wall, &cj);
    par_argv_free(&b);
    PAR_TRY(st);
    vf_task_done(r, cr, VF_T_CHECK, 1, wall);
    json_t *e = json_object();
    json_object_set_new(e, "trainer", json_string(trainer));
    json_object_set_new(e, "mode", json_string(vf_mode_name(mode)));
    json_object_set_new(e, "threads", json_integer(threads));
    json_object_set_new(e, "ranks", json_integer(ranks));
    json_object_set_new(e, "step", json_integer(S));
    json_object_set_new(e, "weights", json_string(S == 1 ? "initial" : "reference after step"));
    json_object_set_new(e, "weights_step", json_integer(S - 1));
    json_object_set_new(e, "exit_code", json_integer(code));
    json_object_set_new(e, "seconds", json_real(wall));
    const char *cv = json_string_value(json_object_get(cj, "verdict"));
    if (code == 0 && cj && cv && strcasecmp(cv, "pass") == 0) {
        vf_set_verdict(e, "pass", "MPFR: every tensor within its bound%s",
                    mode == PAR_MODE_EXACT && strcmp(trainer, "reference") != 0
                        ? ", bitwise equal to the reference" : "");
    } else if (code == 1 && cj) {
        vf_set_verdict(e, "fail", "MPFR: %lld tensors fail (%s)",
                    (long long)json_integer_value(json_object_get(cj, "n_fail")), out);
    } else {
        char why[600];
        vf_first_line(why, sizeof why, err);
        vf_set_verdict(e, "error", "parity check failed (exit %d): %s", code, why);
    }
    if (cj) json_object_set_new(e, "report", cj);
    if (!done) {
        done = json_object();
        json_object_set_new(r->cache, "checks", done);
    }
    json_object_set(done, key, e);
    json_array_append_new(checks, e);
    return PAR_OK;
}

// Distinct configs that `parity check` runs for a case: the reference,
// then every config (every fast config with check_configs = fast).
int vf_check_keys(const vf_case *c, vf_config *keys)
{
    int n = 0;
    keys[n++] = (vf_config){"reference", PAR_MODE_EXACT, 1, 1};
    for (int i = 0; i < c->n_configs; i++) {
        const vf_config *k = &c->configs[i];
        if ((c->check_fast_only && k->mode == PAR_MODE_EXACT) || vf_config_is_external(k))
            continue;
        int dup = 0;
        for (int j = 0; j < n && !dup; j++) dup = memcmp(&keys[j], k, sizeof *k) == 0;
        if (!dup) keys[n++] = *k;
    }
    return n;
}

// The MPFR verdict of a config from the checks of its own trainer, mode,
// threads and ranks; with check_configs = fast, an exact config's from the
// reference's (its correctness run shows it has the reference's bits).
void vf_config_mpfr(json_t *cres, const vf_case *c, const vf_config *cf, const json_t *checks,
                    int available)
{
    const vf_config ref = {"reference", PAR_MODE_EXACT, 1, 1};
    const int inherit = c->check_fast_only && cf->mode == PAR_MODE_EXACT;
    const vf_config *as = inherit ? &ref : cf;
    json_t *m = json_object();
    json_object_set_new(cres, "mpfr", m);
    if (!available) {
        vf_set_verdict(m, "not run", "not run (parity check missing)");
        return;
    }
    if (vf_config_is_external(cf)) {   // held to each step's any-order bound instead
        vf_set_verdict(m, "not covered", "not covered: an external trainer, held to each step's "
                       "any-order bound in lockstep (parity check --external checks one step "
                       "in MPFR)");
        json_object_set_new(m, "checked_as", json_string("none"));
        return;
    }
    const json_t *first = json_array_get(checks, 0);
    if (json_array_size(checks) == 1 && strcmp(json_string_value(json_object_get(first, "trainer")), "all") == 0) {
        // check_steps = none: one "not covered" entry for the whole case
        vf_set_verdict(m, json_string_value(json_object_get(first, "verdict")), "%s",
                       json_string_value(json_object_get(first, "detail")));
        json_object_set_new(m, "checked_as", json_string("none"));
        return;
    }
    int n = 0, n_pass = 0, n_nc = 0;
    const char *worst = "pass", *nc_detail = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(checks, i, e) {
        const char *t = json_string_value(json_object_get(e, "trainer"));
        const char *md = json_string_value(json_object_get(e, "mode"));
        const int T = (int)json_integer_value(json_object_get(e, "threads"));
        const int R = (int)json_integer_value(json_object_get(e, "ranks"));
        if (strcmp(t, as->trainer) != 0 || strcmp(md, vf_mode_name(as->mode)) != 0 ||
            T != as->threads || R != as->ranks)
            continue;
        const char *v = json_string_value(json_object_get(e, "verdict"));
        n++;
        if (strcmp(v, "not covered") == 0) {
            n_nc++;
            nc_detail = json_string_value(json_object_get(e, "detail"));
            continue;
        }
        n_pass += strcmp(v, "pass") == 0;
        if (strcmp(v, "pass") != 0 && strcmp(worst, "fail") != 0) worst = v;
    }
    if (n == 0) worst = "not run";
    else if (n_nc == n) {
        vf_set_verdict(m, "not covered", "%s", nc_detail ? nc_detail : "not covered");
        json_object_set_new(m, "checked_as", json_string(as->trainer));
        return;
    }
    if (inherit)
        vf_set_verdict(m, worst, "%d of %d steps pass (the reference's checks: this exact config "
                       "has its bits)", n_pass, n);
    else
        vf_set_verdict(m, worst, "%d of %d steps pass (%s %s T=%d R=%d)", n_pass, n, cf->trainer,
                       vf_mode_name(cf->mode), cf->threads, cf->ranks);
    json_object_set_new(m, "checked_as", json_string(as->trainer));
}

