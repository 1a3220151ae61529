// The reference and the configs of a case (vf_run.h): each a `parity train`
// run with a JSONL log and .npz weights; exact mode compared bit for bit
// (losses, per-step weight digests, final weights), fast mode by `parity
// lockstep` under the derived bound. Tests: tests/verify/test_verify.sh.
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

// ---- the reference ----------------------------------------------------------------

// Runs (or reuses) the reference of the case: log, final weights, initial
// weights. Sets paths in *ref (an object owned by the cache).
par_status vf_run_reference(vf_runner *r, vf_case_run *cr, json_t **ref_out)
{
    json_t *refs = json_object_get(r->cache, "reference");
    json_t *ref = json_object_get(refs, cr->ref_key);
    if (ref) {
        vf_task_skip(r, cr, VF_T_REF, (double)cr->N, 1);
        *ref_out = ref;
        return PAR_OK;
    }
    char log[1200], w[1200], init[1200], out[1200], err[1200];
    vf_fmt(log, sizeof log, "%s/reference.jsonl", cr->dir);
    vf_fmt(w, sizeof w, "%s/reference.npz", cr->dir);
    vf_fmt(init, sizeof init, "%s/init.npz", cr->dir);
    vf_fmt(out, sizeof out, "%s/reference.json", cr->dir);
    vf_fmt(err, sizeof err, "%s/reference.err", cr->dir);
    vf_note(r, "reference (%ld step%s)", cr->N, cr->N == 1 ? "" : "s");
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "train");
    vf_case_flags(&b, cr, cr->N);
    par_argv_opt(&b, "--trainer", "reference");
    par_argv_opt(&b, "--log", "%s", log);
    par_argv_opt(&b, "--save", "%s", w);
    par_argv_opt(&b, "--init-save", "%s", init);
    par_argv_words(&b, "--json --quiet");
    int code;
    double wall;
    json_t *tj = NULL;
    par_status st = vf_run_parity(r, &b, out, err, 0, &code, &wall, &tj);
    par_argv_free(&b);
    PAR_TRY(st);
    vf_task_done(r, cr, VF_T_REF, (double)cr->N, wall);
    if (code != 0 || !tj) {
        char why[600];
        vf_first_line(why, sizeof why, err);
        json_decref(tj);
        return par_set_error(code == 2 ? PAR_ERR_CONFIG : PAR_ERR_IO, __FILE__, __LINE__,
                             "[case %s] the reference run failed (exit %d): %s", cr->c->name,
                             code, why[0] ? why : "no message");
    }
    vf_log lg;
    st = vf_log_read(&lg, log);
    if (st != PAR_OK) {
        json_decref(tj);
        return st;
    }
    ref = json_object();
    vf_copy_train_fields(ref, tj);
    json_decref(tj);
    json_object_set_new(ref, "wall_seconds", json_real(wall));
    json_object_set_new(ref, "log", json_string(log));
    json_object_set_new(ref, "weights", json_string(w));
    json_object_set_new(ref, "init_weights", json_string(init));
    json_object_set_new(ref, "losses", vf_losses_json(lg.loss, lg.n));
    vf_log_free(&lg);
    if (!refs) {
        refs = json_object();
        json_object_set_new(r->cache, "reference", refs);
    }
    json_object_set_new(refs, cr->ref_key, ref);
    *ref_out = ref;
    return PAR_OK;
}

// ---- one config: correctness -----------------------------------------------------------

// exact: every step's loss (and weights digest) and the final weights
// bitwise equal to the reference's.
static par_status compare_exact(json_t *corr, const json_t *ref, const vf_log *lg,
                                const char *weights)
{
    vf_log rl;
    PAR_TRY(vf_log_read(&rl, json_string_value(json_object_get(ref, "log"))));
    const long first = vf_losses_first_diff(lg, &rl), first_w = vf_weights_first_diff(lg, &rl);
    vf_weight_diff d;
    par_status st = vf_weights_compare(&d, weights, json_string_value(json_object_get(ref, "weights")));
    if (st != PAR_OK) {
        vf_log_free(&rl);
        return st;
    }
    json_object_set_new(corr, "method", json_string("bitwise"));
    json_object_set_new(corr, "steps_compared", json_integer(lg->n < rl.n ? lg->n : rl.n));
    json_object_set_new(corr, "weight_digests_compared", json_boolean(lg->wxxh && rl.wxxh));
    json_object_set_new(corr, "first_loss_diff_step", json_integer(first));
    json_object_set_new(corr, "first_weights_diff_step", json_integer(first_w));
    json_object_set_new(corr, "weights_equal", json_boolean(d.equal));
    json_object_set_new(corr, "weights_compared", json_integer((json_int_t)d.n_elements));
    if (!d.equal) {
        json_object_set_new(corr, "weights_differing", json_integer((json_int_t)d.n_diff));
        json_object_set_new(corr, "first_weight_diff", json_string(d.first));
        json_object_set_new(corr, "weights_max_abs_diff", vf_jnum(d.max_abs));
    }
    char steps[200] = "", final[400] = "final weights equal";
    if (first_w > 0) snprintf(steps, sizeof steps, "weights differ from step %ld", first_w);
    if (first > 0) {
        const double a = first <= lg->n ? lg->loss[first - 1] : NAN;
        const double b = first <= rl.n ? rl.loss[first - 1] : NAN;
        const size_t u = strlen(steps);
        snprintf(steps + u, sizeof steps - u, "%sloss differs from step %ld (%.17g vs %.17g)",
                 u ? ", " : "", first, a, b);
    }
    if (!d.equal)
        snprintf(final, sizeof final, "final weights: %zu of %zu differ, first %s (%.9g vs "
                 "%.9g), max |diff| %.3g", d.n_diff, d.n_elements, d.first, d.first_a, d.first_b,
                 d.max_abs);
    if (first == 0 && first_w == 0 && d.equal)
        vf_set_verdict(corr, "pass", "bitwise: %ld losses%s, %zu final weights", rl.n,
                    lg->wxxh && rl.wxxh ? " and weight digests" : "", d.n_elements);
    else
        vf_set_verdict(corr, "fail", "%s%s%s", steps, steps[0] ? "; " : "", final);
    vf_log_free(&rl);
    return PAR_OK;
}

// fast: `parity lockstep` under the derived bound; the trajectory's distance
// from the reference is recorded for information.
static par_status compare_fast(vf_runner *r, vf_case_run *cr, const vf_config *cf, const char *base,
                               json_t *corr, const json_t *ref, const vf_log *lg,
                               const char *weights, int oversubscribed)
{
    char out[1200], err[1200], label[128];
    vf_config_label(label, sizeof label, cf);
    vf_fmt(out, sizeof out, "%s.lockstep.json", base);
    vf_fmt(err, sizeof err, "%s.lockstep.err", base);
    vf_note(r, "%s: lockstep against the reference", label);
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "lockstep");
    vf_case_flags(&b, cr, cr->N);
    vf_config_flags(&b, cf, 1);
    vf_fault_flag(&b, cr);
    par_argv_add(&b, "--json");
    int code;
    double wall;
    json_t *lj = NULL;
    par_status st = vf_run_parity(r, &b, out, err, oversubscribed, &code, &wall, &lj);
    par_argv_free(&b);
    PAR_TRY(st);
    vf_task_done(r, cr, VF_T_LOCKSTEP, (double)cr->N * cf->ranks, wall);
    json_object_set_new(corr, "method", json_string("bound"));
    json_object_set_new(corr, "lockstep_wall_seconds", json_real(wall));
    const json_t *rl = json_object_get(ref, "losses");
    double max_rel = 0;
    for (long k = 0; k < lg->n && k < (long)json_array_size(rl); k++) {
        const double q = json_number_value(json_array_get(rl, (size_t)k));
        const double e = fabs(lg->loss[k] - q) / fabs(q);
        if (!(e <= max_rel)) max_rel = e;
    }
    json_object_set_new(corr, "trajectory_loss_max_rel_diff", vf_jnum(max_rel));
    vf_weight_diff d;
    if (vf_weights_compare(&d, weights, json_string_value(json_object_get(ref, "weights"))) == PAR_OK)
        json_object_set_new(corr, "trajectory_weights_max_abs_diff", vf_jnum(d.max_abs));
    if (!lj || (code != 0 && code != 1)) {
        char why[600];
        vf_first_line(why, sizeof why, err);
        vf_set_verdict(corr, "error", "parity lockstep failed (exit %d): %s", code, why);
        json_decref(lj);
        return PAR_OK;
    }
    json_object_set_new(corr, "lockstep", lj);
    const double worst = json_number_value(json_object_get(lj, "worst_ratio"));
    const json_int_t viol = json_integer_value(json_object_get(lj, "violations"));
    const char *where = json_string_value(json_object_get(lj, "worst_param"));
    const json_int_t wstep = json_integer_value(json_object_get(lj, "worst_step"));
    json_object_set_new(corr, "worst_ratio", vf_jnum(worst));
    if (code == 0 && viol == 0)
        vf_set_verdict(corr, "pass", "bound: worst |diff|/tol %.3g (%s, step %lld) over %lld steps",
                    worst, where ? where : "-", (long long)wstep,
                    (long long)json_integer_value(json_object_get(lj, "steps")));
    else
        vf_set_verdict(corr, "fail", "bound: %lld violations from step %lld; worst |diff|/tol %.3g "
                    "(%s, step %lld)", (long long)viol,
                    (long long)json_integer_value(json_object_get(lj, "first_violation_step")),
                    worst, where ? where : "-", (long long)wstep);
    return PAR_OK;
}

par_status vf_run_config(vf_runner *r, vf_case_run *cr, const vf_config *cf, const json_t *ref,
                             json_t *cres)
{
    if (vf_config_is_external(cf)) return vf_run_external(r, cr, cf, ref, cres);
    char label[128], base[1100], log[1200], w[1200], out[1200], err[1200];
    vf_config_label(label, sizeof label, cf);
    vf_fmt(base, sizeof base, "%s/%s-%s-T%d-R%d", cr->dir, cf->trainer, vf_mode_name(cf->mode),
             cf->threads, cf->ranks);
    vf_fmt(log, sizeof log, "%s.jsonl", base);
    vf_fmt(w, sizeof w, "%s.npz", base);
    vf_fmt(out, sizeof out, "%s.json", base);
    vf_fmt(err, sizeof err, "%s.err", base);
    const int over = vf_oversubscribed(r, cf);
    vf_note(r, "%s: training run", label);
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "train");
    vf_case_flags(&b, cr, cr->N);
    vf_config_flags(&b, cf, 1);
    vf_fault_flag(&b, cr);
    par_argv_opt(&b, "--log", "%s", log);
    par_argv_opt(&b, "--save", "%s", w);
    par_argv_words(&b, "--json --quiet");
    int code;
    double wall;
    json_t *tj = NULL;
    par_status st = vf_run_parity(r, &b, out, err, over, &code, &wall, &tj);
    par_argv_free(&b);
    PAR_TRY(st);
    vf_task_done(r, cr, VF_T_RUN, (double)cr->N * cf->ranks, wall);
    json_t *run = json_object(), *corr = json_object();
    json_object_set_new(cres, "run", run);
    json_object_set_new(cres, "correctness", corr);
    json_object_set_new(run, "exit_code", json_integer(code));
    json_object_set_new(run, "wall_seconds", json_real(wall));
    json_object_set_new(run, "log", json_string(log));
    if (code != 0 || !tj) {
        char why[600];
        vf_first_line(why, sizeof why, err);
        vf_set_verdict(corr, "error", "parity train failed (exit %d): %s", code,
                    why[0] ? why : "no message");
        json_decref(tj);
        if (cf->mode == PAR_MODE_FAST) vf_task_skip(r, cr, VF_T_LOCKSTEP, (double)cr->N * cf->ranks, 1);
        return PAR_OK;
    }
    vf_copy_train_fields(run, tj);
    json_decref(tj);
    vf_log lg;
    st = vf_log_read(&lg, log);
    if (st != PAR_OK) {
        vf_set_verdict(corr, "error", "%s", par_last_error());
        if (cf->mode == PAR_MODE_FAST) vf_task_skip(r, cr, VF_T_LOCKSTEP, (double)cr->N * cf->ranks, 1);
        return PAR_OK;
    }
    json_object_set_new(cres, "losses", vf_losses_json(lg.loss, lg.n));
    if (cf->mode == PAR_MODE_EXACT) st = compare_exact(corr, ref, &lg, w);
    else st = compare_fast(r, cr, cf, base, corr, ref, &lg, w, over);
    vf_log_free(&lg);
    // Keep the weights of failing configs (for `parity bisect`), drop the rest.
    const char *v = json_string_value(json_object_get(corr, "verdict"));
    if (st == PAR_OK && v && strcmp(v, "pass") == 0) remove(w);
    else json_object_set_new(run, "weights", json_string(w));
    return st;
}

