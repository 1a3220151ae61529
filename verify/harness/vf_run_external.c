// The rows of an external case (vf_run.h; `external = NAME` in a suite):
// each world's command checked in lockstep over the case's steps from the
// reference's initial weights (verify/external, ext_lockstep), and its
// timed runs, each one launch of the command and one free `run` whose
// window is summed from the trainer's own per-step seconds (ext_time_fn).
// Not the timing rounds or statistics (vf_run_time.c). Tests:
// tests/external/test_verify_ext.sh.
#define _POSIX_C_SOURCE 200809L
#include "vf_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_free.h"
#include "par_time.h"

// The command of world W: the case's with every "{world}" replaced by W.
static void world_command(char *buf, size_t n, const char *cmd, int W)
{
    size_t k = 0;
    buf[0] = '\0';
    for (const char *p = cmd; *p && k + 1 < n;) {
        if (strncmp(p, "{world}", 7) == 0) {
            const int m = snprintf(buf + k, n - k, "%d", W);
            k += m > 0 ? (size_t)m : 0;
            p += 7;
        } else {
            buf[k++] = *p++;
            buf[k] = '\0';
        }
    }
    if (k >= n) buf[n - 1] = '\0';
}

// A job for ext_job_run of config cf's world: the case's training settings,
// the reference's initial weights, `steps` steps. *m is the job's model.
typedef struct ext_row {
    par_model m;
    par_optim optim;
    char command[1100];
    ext_lockstep_job job;
} ext_row;

static par_status row_job(ext_row *x, const vf_runner *r, const vf_case_run *cr,
                          const vf_config *cf, const json_t *ref, long steps)
{
    const vf_case *c = cr->c;
    par_act act;
    par_optim_kind kind;
    PAR_TRY(par_act_parse(&act, c->act));
    PAR_TRY(par_model_parse(&x->m, c->model, act));
    PAR_TRY(par_optim_parse(&kind, c->optim));
    x->optim = par_optim_default(kind);
    if (!isnan(c->momentum)) x->optim.momentum = c->momentum;
    if (!isnan(c->beta1)) x->optim.beta1 = c->beta1;
    if (!isnan(c->beta2)) x->optim.beta2 = c->beta2;
    if (!isnan(c->eps)) x->optim.eps = c->eps;
    world_command(x->command, sizeof x->command, c->command, cf->ranks);
    x->job = (ext_lockstep_job){
        .cfg = {.m = &x->m, .act = act, .dt = strcmp(c->dtype, "f64") == 0 ? PAR_F64 : PAR_F32,
                .batch = c->batch == 0 ? cr->n_train : (size_t)c->batch,
                .chunk = (size_t)c->chunk,
                .optim = {(int)kind, c->lr, x->optim.momentum, x->optim.beta1, x->optim.beta2,
                          x->optim.eps},
                .seed = c->seed, .steps = steps, .ulps = ext_ulps_default(),
                .want_intermediates = 1,
                .proto = {.command = x->command, .timeout_s = r->o->timeout_s,
                          .interrupted = r->o->interrupted}},
        .dataset = c->dataset,
        .init_load = json_string_value(json_object_get(ref, "init_weights"))};
    return PAR_OK;
}

// The trainer's loss of each step it was handed (ext_hooks.answer).
typedef struct losses {
    json_t *arr;
} losses;

static par_status on_answer(void *ctx, const ext_answer *a)
{
    losses *l = ctx;
    json_array_append_new(l->arr, vf_jnum(a->loss));
    return PAR_OK;
}

// The row's verdict line from a lockstep that ran.
static void verdict(json_t *corr, const ext_lockstep_result *lr)
{
    const ext_worst *f = lr->local_violations ? &lr->local_first : &lr->first;
    if (ext_lockstep_pass(lr))
        vf_set_verdict(corr, "pass", "lockstep: %ld steps within the any-order bound, worst "
                       "|diff|/bound %.3g (%s%s, step %ld)%s", lr->steps, lr->worst.ratio,
                       lr->worst.tensor, lr->worst.index, lr->worst.step,
                       lr->intermediates ? "" : "; no gradients sent: its update not checked");
    else if (lr->violations || lr->local_violations)
        vf_set_verdict(corr, "fail", "lockstep: %zu violations; first: step %ld, %s%s: the "
                       "trainer has %.9g, the bound allows %.9g +- %.3g (%.3g times the "
                       "bound)%s%s%s", lr->violations + lr->local_violations, f->step, f->tensor,
                       f->index, f->got, f->centre, f->bound, f->ratio, f->op[0] ? " [" : "",
                       f->op, f->op[0] ? "]" : "");
    else
        vf_set_verdict(corr, "fail", "lockstep: its rounding is %.3g times parity's on the same "
                       "op (%s, step %ld): not summed in the dtype", lr->signature,
                       lr->signature_tensor, lr->signature_step);
}

par_status vf_run_external(vf_runner *r, vf_case_run *cr, const vf_config *cf, const json_t *ref,
                           json_t *cres)
{
    char label[128];
    vf_config_label(label, sizeof label, cf);
    vf_note(r, "%s: lockstep, %ld steps", label, cr->N);
    ext_row *x = calloc(1, sizeof *x);
    ext_lockstep_result *lr = calloc(1, sizeof *lr);
    json_t *corr = json_object();
    losses l = {json_array()};
    json_object_set_new(cres, "correctness", corr);
    json_object_set_new(corr, "method", json_string("external lockstep"));
    par_status st = x && lr ? row_job(x, r, cr, cf, ref, cr->N)
                            : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK) {
        json_object_set_new(cres, "command", json_string(x->command));
        const ext_hooks hooks = {.answer = on_answer, .ctx = &l};
        x->job.cfg.hooks = &hooks;
        const double t0 = par_now();
        int opening;
        st = ext_job_run(&x->job, &opening, ext_lockstep_fn, lr);
        vf_task_done(r, cr, VF_T_LOCKSTEP, (double)cr->N * cf->ranks, par_now() - t0);
        json_object_set_new(corr, "lockstep_wall_seconds", json_real(par_now() - t0));
    } else {
        vf_task_skip(r, cr, VF_T_LOCKSTEP, (double)cr->N * cf->ranks, 1);
    }
    if (st == PAR_OK) {
        json_object_set_new(corr, "lockstep", ext_lockstep_json(lr));
        json_object_set_new(corr, "worst_ratio", vf_jnum(lr->worst.ratio));
        json_object_set_new(cres, "losses", json_incref(l.arr));
        verdict(corr, lr);
    } else {   // the trainer failed or broke the protocol: a FAIL row; else an error row
        vf_set_verdict(corr, st == PAR_ERR_EXTERNAL ? "fail" : "error", "%s", par_last_error());
        json_object_set_new(corr, "protocol", json_boolean(st == PAR_ERR_EXTERNAL));
    }
    json_decref(l.arr);
    free(x);
    free(lr);
    return PAR_OK;
}

par_status vf_time_external(vf_runner *r, vf_case_run *cr, const vf_config *cf, long K, long W,
                            double *sec, double *wall, char *why, size_t why_n)
{
    const json_t *ref = json_object_get(cr->res, "reference");
    ext_row *x = calloc(1, sizeof *x);
    ext_time_result tr = {.warmup = K};
    *sec = 0;
    par_status st = x ? row_job(x, r, cr, cf, ref, K + W)
                      : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    const double t0 = par_now();
    int opening;
    if (st == PAR_OK) st = ext_job_run(&x->job, &opening, ext_time_fn, &tr);
    *wall = par_now() - t0;
    free(x);
    vf_task_done(r, cr, VF_T_TIME, (double)(K + W) * cf->ranks, *wall);
    if (st == PAR_OK && tr.seconds > 0) *sec = tr.seconds;
    else if (st == PAR_OK) snprintf(why, why_n, "the trainer's log says its window took 0 s");
    else snprintf(why, why_n, "%s", par_last_error());
    return PAR_OK;
}
