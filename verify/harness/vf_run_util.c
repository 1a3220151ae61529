// Helpers of the suite runner (vf_run.h): child argument lists, running
// `parity` with its output in files, the flags of a case and a config,
// progress with an estimate of the time left, small JSON helpers.
#define _POSIX_C_SOURCE 200809L
#include "vf_run.h"

#include "par_time.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "par_data.h"
#include "par_io.h"
#include "par_trainer.h"

// snprintf for paths and keys (truncation cannot happen at these sizes:
// folder names are checked to be short when the run starts).
void vf_fmt(char *buf, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, n, f, ap);
    va_end(ap);
}

const char *vf_mode_name(int m) { return m == PAR_MODE_FAST ? "fast" : "exact"; }

void vf_config_label(char *buf, size_t n, const vf_config *cf)
{
    if (vf_config_is_external(cf)) snprintf(buf, n, "external world %d", cf->ranks);
    else snprintf(buf, n, "%s %s T=%d R=%d", cf->trainer, vf_mode_name(cf->mode), cf->threads, cf->ranks);
}

// ---- progress --------------------------------------------------------------------

// Seconds per task and per unit of each kind: a least-squares line through
// the tasks done (seconds = a + b units: a task's start-up apart from its
// work), a proportional rate after one task (or tasks of one size), the
// overall rate of the kinds seen for a kind not seen; 0 when nothing ran.
static int rates(const vf_runner *r, double a[VF_T_KINDS], double b[VF_T_KINDS])
{
    double all_s = 0, all_u = 0;
    for (int k = 0; k < VF_T_KINDS; k++) {
        all_u += r->fit[k][1];
        all_s += r->fit[k][2];
    }
    if (all_u <= 0) return 0;
    for (int k = 0; k < VF_T_KINDS; k++) {
        const double *f = r->fit[k];
        const double n = f[0], var = n * f[3] - f[1] * f[1], cov = n * f[4] - f[1] * f[2];
        a[k] = 0;
        b[k] = f[1] > 0 ? f[2] / f[1] : all_s / all_u;
        if (n >= 2 && var > 1e-9 * n * f[3] && cov > 0) {
            b[k] = cov / var;
            a[k] = (f[2] - b[k] * f[1]) / n;
            if (a[k] < 0) {   // no negative start-up: proportional instead
                a[k] = 0;
                b[k] = f[2] / f[1];
            }
        }
    }
    return 1;
}

// Seconds that work w takes at the rates measured so far; -1 before any task is done.
static double seconds_of(const vf_runner *r, const vf_work *w)
{
    double a[VF_T_KINDS], b[VF_T_KINDS];
    if (!rates(r, a, b)) return -1;
    double s = w->window_s;
    for (int k = 0; k < VF_T_KINDS; k++) s += w->tasks[k] * a[k] + w->units[k] * b[k];
    return s;
}

// The task r->what to the progress callback; running_s > 0 for a heartbeat
// (the estimate then leaves out the time the task has already run, but never
// goes below what the cases not yet started take).
static void report(const vf_runner *r, double running_s)
{
    double left = seconds_of(r, &r->left);
    if (left >= 0) {
        const double floor = seconds_of(r, &r->later);
        left = left > running_s ? left - running_s : 0;
        if (left < floor) left = floor;
    }
    const vf_progress p = {r->case_name, r->i_case, r->s->n_cases, r->what, r->done, r->total,
                           par_now() - r->t0, left, running_s};
    r->o->progress(r->o->ctx, &p);
}

void vf_note(vf_runner *r, const char *fmt, ...)
{
    if (!r->o->progress) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
    report(r, 0);
}

// par_proc_wait's tick (ctx: the runner): the running task's progress again.
static void heartbeat(void *ctx, const par_proc *p, double running_s)
{
    (void)p;
    const vf_runner *r = ctx;
    if (r->o->progress && r->what[0]) report(r, running_s);
}

// w += n tasks of kind, units, window seconds; none of them below 0.
static void work_add(vf_work *w, int kind, double n, double units, double window_s)
{
    w->tasks[kind] = w->tasks[kind] + n > 0 ? w->tasks[kind] + n : 0;
    w->units[kind] = w->units[kind] + units > 0 ? w->units[kind] + units : 0;
    w->window_s = w->window_s + window_s > 0 ? w->window_s + window_s : 0;
}

void vf_plan_add(vf_runner *r, vf_case_run *cr, int kind, double n, double units,
                 double window_s)
{
    work_add(&r->left, kind, n, units, window_s);
    if (!cr->started) {
        work_add(&r->later, kind, n, units, window_s);
        work_add(&cr->plan, kind, n, units, window_s);
    }
    r->total += (long)n;
}

void vf_case_start(vf_runner *r, vf_case_run *cr)
{
    cr->started = 1;
    for (int k = 0; k < VF_T_KINDS; k++)
        work_add(&r->later, k, -cr->plan.tasks[k], -cr->plan.units[k], k ? 0 : -cr->plan.window_s);
}

void vf_task_done(vf_runner *r, const vf_case_run *cr, int kind, double steps, double seconds)
{
    const double u = (steps > 0 ? steps : 1) * cr->step_work;
    double *f = r->fit[kind];
    f[0] += 1;
    f[1] += u;
    f[2] += seconds;
    f[3] += u * u;
    f[4] += u * seconds;
    work_add(&r->left, kind, -1, -u, 0);
    r->done++;
}

void vf_task_skip(vf_runner *r, const vf_case_run *cr, int kind, double steps, long n)
{
    work_add(&r->left, kind, -(double)n, -steps * cr->step_work * (double)n, 0);
    r->total -= n;
}

// ---- child processes ------------------------------------------------------------------

// First non-empty line of a file (for error details), "" if none; hints
// and the progress lines of `parity train` ("step S/N epoch ...") skipped.
void vf_first_line(char *buf, size_t n, const char *path)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[600];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        long a, b;
        char c;
        const int progress = sscanf(line, "step %ld/%ld epoch%c", &a, &b, &c) == 3 && c == ' ';
        if (line[0] && strncmp(line, "hint:", 5) != 0 && !progress) {
            snprintf(buf, n, "%s", line);
            break;
        }
    }
    fclose(f);
}

// Runs `parity` with b (b->v[0] must be free for the binary path); see vf_run.h.
par_status vf_run_parity(vf_runner *r, par_argv *b, const char *out_path, const char *err_path,
                             int oversubscribed, int *code, double *wall, json_t **json)
{
    *code = -1;
    PAR_FAIL_IF(b->n < 1 || b->oom, PAR_ERR_ALLOC, "out of memory");
    PAR_FAIL_IF(r->o->interrupted && *r->o->interrupted, PAR_ERR_EXTERNAL, "interrupted");
    free(b->v[0]);
    b->v[0] = strdup(r->o->parity);
    PAR_FAIL_IF(!b->v[0], PAR_ERR_ALLOC, "out of memory");
    const char *env_over[] = {"OMP_WAIT_POLICY=passive", NULL};
    const par_proc_spec s = {
        .argv = (const char *const *)b->v,
        .env = oversubscribed && !getenv("OMP_WAIT_POLICY") ? env_over : NULL,
        .out = out_path ? PAR_PROC_FILE : PAR_PROC_DEVNULL, .out_path = out_path,
        .err = err_path ? PAR_PROC_FILE : PAR_PROC_DEVNULL, .err_path = err_path,
        .group = PAR_PROC_OWN_SESSION};
    const par_proc_wait_opts w = {.timeout_s = r->o->timeout_s, .on_tick = heartbeat,
                                  .tick_s = 1, .ctx = r};
    par_proc_result res;
    const par_status st = par_proc_run(&s, &w, &res);
    *wall = res.wall_s;
    PAR_TRY(st);
    *code = res.code;
    if (json) {
        json_error_t e;
        *json = json_load_file(out_path, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &e);
        if (*json && !json_is_object(*json)) {
            json_decref(*json);
            *json = NULL;
        }
    }
    return PAR_OK;
}

// The training flags of a case for `steps` steps: everything but trainer,
// mode, threads, ranks.
void vf_setting_flags(par_argv *b, const vf_case *c)
{
    par_argv_opt(b, "--dataset", "%s", c->dataset);
    if (c->upscale > 0) {
        par_argv_opt(b, "--upscale", "%d", c->upscale);
    }
    par_argv_opt(b, "--model", "%s", c->model);
    par_argv_opt(b, "--act", "%s", c->act);
    par_argv_opt(b, "--dtype", "%s", c->dtype);
    par_argv_add(b, "--batch");
    if (c->batch > 0) par_argv_add(b, "%d", c->batch);
    else par_argv_add(b, "full");
    par_argv_opt(b, "--chunk", "%d", c->chunk);
}

void vf_optim_flags(par_argv *b, const vf_case *c)
{
    if (strcmp(c->optim, "sgd") == 0) return;   // the default: SGD runs keep their flags as before
    par_argv_opt(b, "--optim", "%s", c->optim);
    const char *const flags[4] = {"--momentum", "--beta1", "--beta2", "--eps"};
    const double v[4] = {c->momentum, c->beta1, c->beta2, c->eps};
    for (int i = 0; i < 4; i++)
        if (!isnan(v[i])) {
            par_argv_add(b, "%s", flags[i]);
            par_argv_add(b, "%.17g", v[i]);
        }
}

void vf_case_flags(par_argv *b, const vf_case_run *cr, long steps)
{
    const vf_case *c = cr->c;
    vf_setting_flags(b, c);
    par_argv_opt(b, "--lr", "%.17g", c->lr);
    vf_optim_flags(b, c);
    par_argv_opt(b, "--seed", "%llu", (unsigned long long)c->seed);
    par_argv_opt(b, "--epochs", "%d", cr->epochs);
    par_argv_opt(b, "--steps", "%ld", steps);
}

void vf_fault_flag(par_argv *b, const vf_case_run *cr)
{
    if (!cr->c->fault[0]) return;
    par_argv_opt(b, "--fault", "%s", cr->c->fault);
}

void vf_config_flags(par_argv *b, const vf_config *cf, int with_ranks)
{
    par_argv_opt(b, "--trainer", "%s", cf->trainer);
    par_argv_opt(b, "--mode", "%s", vf_mode_name(cf->mode));
    par_argv_opt(b, "--threads", "%d", cf->threads);
    if (with_ranks && vf_trainer_is_mpi(cf->trainer)) {
        par_argv_opt(b, "--ranks", "%d", cf->ranks);
    }
}

json_t *vf_jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *vf_losses_json(const double *l, long n)
{
    json_t *a = json_array();
    for (long k = 0; k < n; k++) json_array_append_new(a, vf_jnum(l[k]));
    return a;
}

// Copies the fields of a `parity train --json` summary that results keep.
void vf_copy_train_fields(json_t *dst, const json_t *tj)
{
    static const char *const keys[] = {"seconds", "samples_per_second", "final_loss",
                                       "test_accuracy", "val_accuracy", "weights_sha256",
                                       "steps", "kernels", "bytes_sent_per_step",
                                       "comm_seconds_per_step"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(tj, keys[i]);
        if (v) json_object_set(dst, keys[i], v);
    }
}

void vf_set_verdict(json_t *o, const char *verdict, const char *fmt, ...)
{
    char buf[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_object_set_new(o, "verdict", json_string(verdict));
    json_object_set_new(o, "detail", json_string(buf));
}

int vf_config_is_base(const vf_case *c, const vf_config *cf)
{
    return c->external[0] ? cf->ranks == 1
                          : strcmp(cf->trainer, "serial") == 0 && cf->mode == PAR_MODE_EXACT;
}

int vf_oversubscribed(const vf_runner *r, const vf_config *cf)
{
    return cf->threads * cf->ranks > r->o->cores;
}

