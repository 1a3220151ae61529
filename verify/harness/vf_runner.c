// The suite runner of `parity verify` (vf_harness.h): plans every case
// (dataset, steps, work for the estimate), then per case the reference,
// every config, the MPFR checks, verdicts and timings of what passed;
// results in one jansson tree (results.json). Steps: vf_run_*.c.
// Everything runs as child processes of the same `parity` binary.
#define _POSIX_C_SOURCE 200809L
#include "vf_run.h"
#include "par_time.h"

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

// ---- a case ----------------------------------------------------------------------------

static json_t *settings_json(const vf_case_run *cr)
{
    const vf_case *c = cr->c;
    json_t *cs = json_array();
    for (int i = 0; i < c->n_check_steps; i++) json_array_append_new(cs, json_integer(cr->check_steps[i]));
    json_t *s = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:i, s:I, s:I, s:f, s:I, s:i, s:i, s:o}",
                          "dataset", c->dataset, "model", c->model, "act", c->act, "dtype",
                          c->dtype, "batch", c->batch, "chunk", c->chunk, "steps",
                          (json_int_t)c->steps, "epochs", c->epochs, "total_steps",
                          (json_int_t)cr->N, "steps_per_epoch", (json_int_t)cr->per_epoch,
                          "lr", c->lr, "seed", (json_int_t)c->seed, "repeats", c->repeats,
                          "warmup", c->warmup, "check_steps", cs);
    json_object_set_new(s, "window", json_real(c->window));
    json_object_set_new(s, "fault", c->fault[0] ? json_string(c->fault) : json_null());
    if (c->batch == 0) {   // batch = full: the whole training split
        json_object_set_new(s, "batch", json_integer((json_int_t)cr->n_train));
        json_object_set_new(s, "batch_full", json_true());
    }
    json_object_set_new(s, "upscale", c->upscale > 0 ? json_integer(c->upscale) : json_null());
    json_object_set_new(s, "optim", json_string(c->optim));
    if (c->external[0]) {
        json_object_set_new(s, "external", json_string(c->external));
        json_object_set_new(s, "command", json_string(c->command));
    }
    const char *const hp[4] = {"momentum", "beta1", "beta2", "eps"};
    const double hv[4] = {c->momentum, c->beta1, c->beta2, c->eps};
    for (int i = 0; i < 4; i++)
        if (!isnan(hv[i])) json_object_set_new(s, hp[i], json_real(hv[i]));
    return s;
}

// SHA-256 of the dataset's files (the four IDX files, raw or .gz).
static json_t *dataset_json(const par_dataset *ds)
{
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    json_t *files = json_object();
    for (int i = 0; i < 4; i++)
        for (int gz = 0; gz < 2; gz++) {
            char path[1200], sha[65];
            vf_fmt(path, sizeof path, "%s/%s%s", ds->dir, names[i], gz ? ".gz" : "");
            struct stat sb;
            if (stat(path, &sb) == 0 && par_sha256_file(sha, path) == PAR_OK)
                json_object_set_new(files, strrchr(path, '/') + 1, json_string(sha));
        }
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o}", "name", ds->name, "dir", ds->dir,
                     "n_train", (json_int_t)ds->n_train, "n_val", (json_int_t)ds->n_val,
                     "n_test", (json_int_t)ds->test.n, "sha256", files);
}

// Whether `parity check` is in this build (it needs MPFR): its --help exits 0.
static int check_in_build(const vf_run_opts *o)
{
    char path[1200];
    vf_fmt(path, sizeof path, "%s/runs/check-help.txt", o->out_dir);
    const char *argv[] = {o->parity, "check", "--help", NULL};
    const par_proc_spec s = {.argv = argv, .out = PAR_PROC_FILE, .out_path = path,
                             .group = PAR_PROC_OWN_SESSION};
    const par_proc_wait_opts w = {.timeout_s = 60};
    par_proc_result res;
    return par_proc_run(&s, &w, &res) == PAR_OK && res.code == 0;
}

// Opens the dataset to learn the steps of the case; fills cr.
static par_status plan_case(vf_runner *r, vf_case_run *cr, const vf_case *c, json_t **ds_json)
{
    memset(cr, 0, sizeof *cr);
    cr->c = c;
    par_dataset ds;
    par_status st = par_dataset_open(&ds, c->dataset, 10);
    if (st != PAR_OK) return st;
    cr->n_train = ds.n_train;
    cr->upscale_identity = c->upscale > 0 && (size_t)c->upscale == ds.train.width &&
                           (size_t)c->upscale == ds.train.height;
    cr->per_epoch = c->batch == 0 ? 1 : (long)((ds.n_train + (size_t)c->batch - 1) / (size_t)c->batch);
    cr->N = c->steps > 0 ? c->steps : (long)c->epochs * cr->per_epoch;
    cr->epochs = c->epochs > 0 ? c->epochs : (int)((c->steps + cr->per_epoch - 1) / cr->per_epoch);
    *ds_json = dataset_json(&ds);
    par_dataset_free(&ds);
    par_model m;
    const double batch = c->batch == 0 ? (double)cr->n_train : (double)c->batch;
    cr->step_work = par_model_parse(&m, c->model, PAR_ACT_RELU) == PAR_OK ? batch * par_model_macs(&m)
                                                                           : batch;
    for (int i = 0; i < c->n_check_steps; i++) {
        const long S = c->check_steps[i] == VF_STEP_FIRST ? 1
                       : c->check_steps[i] == VF_STEP_LAST ? cr->N : c->check_steps[i];
        PAR_FAIL_IF(S > cr->N, PAR_ERR_CONFIG, "%s: [case %s] check_steps %ld: the case has %ld steps",
                    r->s->path, c->name, S, cr->N);
        cr->check_steps[i] = S;
    }
    vf_fmt(cr->ref_key, sizeof cr->ref_key, "%s|%d|%s|%s|%s|%d|%d|%.17g|%s|%.17g|%.17g|%.17g|%.17g|%llu|%d|%ld",
             c->dataset, c->upscale, c->model, c->act, c->dtype, c->batch, c->chunk, c->lr, c->optim,
             c->momentum, c->beta1, c->beta2, c->eps, (unsigned long long)c->seed, cr->epochs, cr->N);
    vf_fmt(cr->dir, sizeof cr->dir, "%s/runs/%s", r->o->out_dir, c->name);
    return par_mkdirs(cr->dir, 0755);
}

// The work of a case for the progress estimate (vf_plan_add): tasks and their
// steps x step_work per kind; the timed runs of a window-sized case in seconds.
static void count_case(vf_runner *r, vf_case_run *cr)
{
    const vf_case *c = cr->c;
    const double w = cr->step_work;
    vf_plan_add(r, cr, VF_T_REF, 1, (double)cr->N * w, 0);
    for (int i = 0; i < c->n_configs; i++) {
        const vf_config *cf = &c->configs[i];
        const double u = (double)cr->N * cf->ranks * w;
        if (!vf_config_is_external(cf)) vf_plan_add(r, cr, VF_T_RUN, 1, u, 0);
        if (cf->mode == PAR_MODE_FAST || vf_config_is_external(cf))
            vf_plan_add(r, cr, VF_T_LOCKSTEP, 1, u, 0);
        const int runs = vf_timed_runs(c, cf, r->o->cores);
        if (runs > 0) {
            if (c->window > 0)
                vf_plan_add(r, cr, VF_T_TIME, runs, 0, runs * vf_window_run_s(c));
            else
                vf_plan_add(r, cr, VF_T_TIME, runs, u * runs, 0);
        }
    }
    if (vf_case_calibrates(r, c))   // the window's calibration run, one rank
        vf_plan_add(r, cr, VF_T_TIME, 1, (double)cr->N * w, 0);
    if (r->check_available) {
        vf_config keys[VF_MAX_CONFIGS + 1];
        const int n = vf_check_keys(c, keys) * c->n_check_steps;
        vf_plan_add(r, cr, VF_T_CHECK, n, n * w, 0);
        // reference runs to step S - 1 for the checks, once per setting
        json_t *planned = json_object_get(r->cache, "planned");
        if (!planned) {
            planned = json_object();
            json_object_set_new(r->cache, "planned", planned);
        }
        for (int i = 0; i < c->n_check_steps; i++) {
            char key[700];
            vf_fmt(key, sizeof key, "%s|%ld", cr->ref_key, cr->check_steps[i] - 1);
            if (cr->check_steps[i] <= 1 || json_object_get(planned, key)) continue;
            json_object_set_new(planned, key, json_true());
            vf_plan_add(r, cr, VF_T_REF, 1, (double)(cr->check_steps[i] - 1) * w, 0);
        }
    }
}

static par_status run_case(vf_runner *r, vf_case_run *cr, json_t *cres)
{
    const vf_case *c = cr->c;
    json_t *ref = NULL;
    PAR_TRY(vf_run_reference(r, cr, &ref));
    json_object_set(cres, "reference", ref);

    // 1. correctness of every config
    json_t *configs = json_array();
    json_object_set_new(cres, "configs", configs);
    for (int i = 0; i < c->n_configs; i++) {
        const vf_config *cf = &c->configs[i];
        json_t *e = json_pack("{s:s, s:s, s:i, s:i, s:i, s:b}", "trainer", cf->trainer, "mode",
                              vf_mode_name(cf->mode), "threads", cf->threads, "ranks", cf->ranks,
                              "cores", cf->threads * cf->ranks, "oversubscribed",
                              vf_oversubscribed(r, cf));
        json_object_set_new(e, "fault", c->fault[0] ? json_string(c->fault) : json_null());
        json_object_set_new(e, "timing_base", json_boolean(vf_config_is_base(c, cf)));
        if (vf_config_is_external(cf)) {   // its label in the trainer column, world in R
            json_object_set_new(e, "trainer", json_string(c->external));
            json_object_set_new(e, "mode", json_string("external"));
            json_object_set_new(e, "external", json_true());
        }
        json_array_append_new(configs, e);
        PAR_TRY(vf_run_config(r, cr, cf, ref, e));
    }

    // 2. MPFR checks of the reference and of each config
    json_t *checks = json_array();
    json_object_set_new(cres, "checks", checks);
    if (r->check_available && c->n_check_steps == 0) {
        json_t *e = json_pack("{s:s, s:s, s:i, s:i}", "trainer", "all", "mode", "-", "threads", 0,
                              "step", 0);
        vf_set_verdict(e, "not covered", "not covered: check_steps = none in the suite (no MPFR "
                       "check of this case; its configs are compared with the reference only)");
        json_array_append_new(checks, e);
    } else if (r->check_available) {
        vf_config keys[VF_MAX_CONFIGS + 1];
        const int n = vf_check_keys(c, keys);
        for (int k = 0; k < n; k++)
            for (int i = 0; i < c->n_check_steps; i++)
                PAR_TRY(vf_run_check(r, cr, ref, &keys[k], cr->check_steps[i], checks));
    } else {
        json_t *e = json_pack("{s:s, s:s, s:i, s:i}", "trainer", "reference", "mode", "exact",
                              "threads", 1, "step", 1);
        vf_set_verdict(e, "not run", "not run (parity check missing)");
        json_array_append_new(checks, e);
    }

    // 3. verdicts, then timings of what passed
    int todo[VF_MAX_CONFIGS] = {0};
    size_t i;
    json_t *e;
    json_array_foreach(configs, i, e) {
        const vf_config *cf = &c->configs[i];
        vf_config_mpfr(e, c, cf, checks, r->check_available);
        const char *cv = json_string_value(json_object_get(json_object_get(e, "correctness"), "verdict"));
        const char *mv = json_string_value(json_object_get(json_object_get(e, "mpfr"), "verdict"));
        const int pass = strcmp(cv, "pass") == 0 && strcmp(mv, "fail") != 0 && strcmp(mv, "error") != 0;
        json_object_set_new(e, "verdict", json_string(pass ? "pass" : strcmp(cv, "error") == 0 ? "error" : "fail"));
        json_t *timing = json_object();
        json_object_set_new(e, "timing", timing);
        const int over = vf_oversubscribed(r, cf), counted = !over && c->repeats > 0;
        if (!pass || over || c->repeats == 0) {
            json_object_set_new(timing, "timed", json_false());
            json_object_set_new(timing, "note", json_string(
                !pass ? "not timed: verification failed"
                : over ? "correctness only: oversubscribed (threads x ranks > cores)"
                       : "correctness only: repeats = 0"));
            if (counted) vf_time_row_skip(r, cr, cf);
            continue;
        }
        todo[i] = 1;
    }
    // Interleaved: every config that passed, round by round (vf_run_time.c).
    PAR_TRY(vf_time_case(r, cr, configs, todo));
    vf_speedups(configs, cres);
    return vf_predict_case(r, cr, cres);
}

static void iso_time(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

// A case's core-to-core probes (timing.core_round_trip_ns; null: not measured).
static const json_t *case_probes(const json_t *cs)
{
    return json_object_get(json_object_get(cs, "timing"), "core_round_trip_ns");
}

// Every case's probes summed up by vf_round_trip_summary.
static json_t *round_trips(const json_t *cases)
{
    json_t *all = json_array(), *cs;
    size_t i;
    json_array_foreach(cases, i, cs) json_array_extend(all, (json_t *)case_probes(cs));
    json_t *o = vf_round_trip_summary_json(all);
    json_decref(all);
    return o;
}

par_status vf_run_suite(json_t **results, const vf_suite *s, const vf_run_opts *o)
{
    vf_runner r = {.s = s, .o = o, .cache = json_object(), .t0 = par_now()};
    char started[32], finished[32];
    iso_time(started, sizeof started);
    json_t *res = json_object();
    *results = res;
    json_object_set_new(res, "format", json_string("parity-results-1"));
    json_object_set_new(res, "suite", json_pack("{s:s, s:s, s:s}", "path", s->path, "name",
                                                s->name, "sha256", s->sha256));
    json_object_set_new(res, "provenance", vf_provenance(&o->build, o->command_line));
    json_object_set_new(json_object_get(res, "provenance"), "load_average_start",
                        vf_loadavg_json(NULL));
    json_object_set_new(res, "started", json_string(started));
    json_object_set_new(res, "cores_for_timing", json_integer(o->cores));

    // Is `parity check` in this build?
    {
        char runs[1100];
        vf_fmt(runs, sizeof runs, "%s/runs", o->out_dir);
        PAR_TRY(par_mkdirs(runs, 0755));
        r.check_available = check_in_build(o);
        json_object_set_new(res, "mpfr_check", json_string(r.check_available ? "available"
                                                           : "missing: parity check is not in this build"));
    }

    json_t *cases = json_array();
    json_object_set_new(res, "cases", cases);
    vf_case_run *crs = calloc((size_t)s->n_cases, sizeof *crs);
    PAR_FAIL_IF(!crs, PAR_ERR_ALLOC, "out of memory");
    par_status st = PAR_OK;
    for (int i = 0; st == PAR_OK && i < s->n_cases; i++) {
        json_t *dsj = NULL;
        st = plan_case(&r, &crs[i], &s->cases[i], &dsj);
        if (st != PAR_OK) break;
        count_case(&r, &crs[i]);
        crs[i].res = json_pack("{s:s, s:o, s:o}", "name", s->cases[i].name, "settings",
                               settings_json(&crs[i]), "dataset", dsj);
        json_array_append_new(cases, crs[i].res);
    }
    for (int i = 0; st == PAR_OK && i < s->n_cases; i++) {
        r.case_name = s->cases[i].name;
        r.i_case = i + 1;
        vf_case_start(&r, &crs[i]);
        st = run_case(&r, &crs[i], crs[i].res);
    }
    free(crs);
    json_decref(r.cache);
    iso_time(finished, sizeof finished);
    json_object_set_new(res, "finished", json_string(finished));
    // The machine's load over the run, and the CPU time stolen from it while
    // the timings ran (a shared VM's neighbours): what the times were up against.
    json_t *prov = json_object_get(res, "provenance");
    json_object_set_new(prov, "load_average_end", vf_loadavg_json(NULL));
    json_object_set_new(prov, "steal_percent_timed",
                        r.ticks_total > 0 ? json_real(100.0 * (double)r.ticks_steal /
                                                      (double)r.ticks_total)
                                          : json_null());
    json_object_set_new(prov, "core_round_trip_ns", round_trips(cases));
    json_object_set_new(res, "seconds", json_real(par_now() - r.t0));
    if (st != PAR_OK) {
        json_object_set_new(res, "verdict", json_string("error"));
        json_object_set_new(res, "error", json_string(par_last_error()));
        return st;
    }
    // The overall verdict and a count of each kind.
    long n_cfg = 0, n_cfg_pass = 0, n_chk = 0, n_chk_pass = 0, n_chk_nc = 0;
    size_t i, j;
    json_t *cs, *e;
    json_array_foreach(cases, i, cs) {
        json_array_foreach(json_object_get(cs, "configs"), j, e) {
            n_cfg++;
            n_cfg_pass += strcmp(json_string_value(json_object_get(e, "verdict")), "pass") == 0;
        }
        json_array_foreach(json_object_get(cs, "checks"), j, e) {
            n_chk++;
            n_chk_pass += strcmp(json_string_value(json_object_get(e, "verdict")), "pass") == 0;
            n_chk_nc += strcmp(json_string_value(json_object_get(e, "verdict")), "not covered") == 0;
        }
    }
    // A check `parity check` cannot run for the case's settings (e.g. an
    // optimizer it has no bound for) is "not covered": shown, counted, not
    // a failure (the configs are still compared bit for bit).
    const int pass = n_cfg > 0 && n_cfg_pass == n_cfg && n_chk_pass + n_chk_nc == n_chk;
    char why[300];
    if (pass && n_chk_nc > 0)
        vf_fmt(why, sizeof why, "all %ld configs and %ld of %ld MPFR checks passed; %ld MPFR checks "
               "not covered (see the cases)", n_cfg, n_chk_pass, n_chk, n_chk_nc);
    else if (pass) vf_fmt(why, sizeof why, "all %ld configs and %ld MPFR checks passed", n_cfg, n_chk);
    else if (!r.check_available && n_cfg_pass == n_cfg)
        vf_fmt(why, sizeof why, "%ld of %ld configs passed, but the MPFR check was not run "
                 "(parity check missing)", n_cfg_pass, n_cfg);
    else vf_fmt(why, sizeof why, "%ld of %ld configs and %ld of %ld MPFR checks passed",
                  n_cfg_pass, n_cfg, n_chk_pass, n_chk);
    json_object_set_new(res, "summary", json_pack("{s:I, s:I, s:I, s:I, s:I}", "configs", (json_int_t)n_cfg,
                                                  "configs_passed", (json_int_t)n_cfg_pass,
                                                  "checks", (json_int_t)n_chk, "checks_passed",
                                                  (json_int_t)n_chk_pass, "checks_not_covered",
                                                  (json_int_t)n_chk_nc));
    json_object_set_new(res, "verdict", json_string(pass ? "pass" : "fail"));
    json_object_set_new(res, "verdict_reason", json_string(why));
    return PAR_OK;
}
