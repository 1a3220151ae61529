// The scaling model's child processes (sm_measure.h): the command that runs
// this binary on R ranks (its own --ranks, or a --launcher's words), the
// JSON figures a child prints, and serial `parity train` runs timed alone,
// side by side and taking turns on one core. Every child goes through
// par_proc (argv, no shell; stdin and stderr /dev/null; this process's
// group, so a terminal's Ctrl-C ends them with it).
#define _POSIX_C_SOURCE 200809L
#include "sm_measure.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void sm_launch_argv(par_argv *a, const char *launcher, const char *exe, int R)
{
    if (launcher) {
        par_argv words = {0};
        par_argv_words(&words, launcher);
        a->oom |= words.oom;
        for (int i = 0; i < words.n; i++) {   // every {R} of the word -> R
            char out[2048];
            size_t k = 0;
            for (const char *p = words.v[i]; *p && k + 16 < sizeof out; p++) {
                if (strncmp(p, "{R}", 3) == 0) {
                    k += (size_t)snprintf(out + k, sizeof out - k, "%d", R);
                    p += 2;
                } else {
                    out[k++] = *p;
                }
            }
            out[k] = '\0';
            par_argv_add(a, "%s", out);
        }
        par_argv_free(&words);
    }
    par_argv_add(a, "%s", exe);
}

void sm_launch_end(par_argv *a, const char *launcher, int R)
{
    if (launcher) return;
    par_argv_opt(a, "--ranks", "%d", R);
}

int sm_run_json(const par_argv *a, int n, const char *const keys[], double out[],
                double timeout_s)
{
    if (a->oom || a->n == 0 || n > 8) return -1;
    const par_proc_spec s = {.argv = (const char *const *)a->v, .out = PAR_PROC_PIPE};
    const par_proc_wait_opts w = {.timeout_s = timeout_s};
    par_proc_result r;
    if (par_proc_run(&s, &w, &r) != PAR_OK) return -1;
    int found = 0;
    for (char *line = r.out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        for (int i = 0; i < n && j; i++)
            if (json_is_number(json_object_get(j, keys[i]))) {
                out[i] = json_number_value(json_object_get(j, keys[i]));
                found |= 1 << i;
            }
        json_decref(j);
        line = nl ? nl + 1 : line + strlen(line);
    }
    const int ok = r.code == 0 && found == (1 << n) - 1;
    par_proc_result_free(&r);
    return ok ? 0 : -1;
}

void sm_train_argv(par_argv *a, const sm_setup *s, const char *trainer, const char *mode)
{
    par_argv_add(a, "train");
    par_argv_opt(a, "--trainer", "%s", trainer);
    par_argv_opt(a, "--mode", "%s", mode);
    par_argv_opt(a, "--dataset", "%s", s->dataset);
    par_argv_opt(a, "--model", "%s", s->model);
    par_argv_opt(a, "--act", "%s", s->act);
    par_argv_opt(a, "--dtype", "%s", s->dtype);
    par_argv_opt(a, "--batch", "%d", s->batch);
    par_argv_opt(a, "--chunk", "%d", s->chunk);
    par_argv_opt(a, "--steps", "%d", s->steps);
    par_argv_words(a, "--json --quiet --no-digest");
    const par_optim *o = s->optim;
    if (o->kind == PAR_OPTIM_ADAM) {
        par_argv_opt(a, "--optim", "adam");
        par_argv_opt(a, "--beta1", "%.17g", o->beta1);
        par_argv_opt(a, "--beta2", "%.17g", o->beta2);
        par_argv_opt(a, "--eps", "%.17g", o->eps);
    } else if (o->kind != PAR_OPTIM_SGD) {
        par_argv_opt(a, "--optim", "%s", par_optim_name(o->kind));
        par_argv_opt(a, "--momentum", "%.17g", o->momentum);
    }
    if (s->upscale > 0) par_argv_opt(a, "--upscale", "%d", s->upscale);
}

// `copies` serial runs of s's setting at once (each its own process, as
// ranks are; all on CPU 0 with pin): per step, the mean over the copies of
// the seconds inside the engine (forward .. update of phase_seconds) and
// outside it (batch, log, other).
static int time_serial(const sm_setup *s, int copies, int pin, double *engine, double *outside)
{
    enum { MAX_COPIES = 64 };
    if (copies > MAX_COPIES) copies = MAX_COPIES;
    par_argv a = {0};
    if (pin) par_argv_words(&a, "taskset -c 0");
    par_argv_add(&a, "%s", s->exe);
    sm_train_argv(&a, s, "serial", "exact");
    const par_proc_spec spec = {.argv = (const char *const *)a.v, .out = PAR_PROC_PIPE};
    par_proc p[MAX_COPIES];
    int started = 0, bad = 0;
    for (; started < copies && !a.oom; started++)
        if (par_proc_start(&p[started], &spec) != PAR_OK) break;
    par_argv_free(&a);
    *engine = *outside = 0;
    for (int i = 0; i < started; i++) {
        par_proc_result r;
        if (par_proc_wait(&p[i], NULL, &r) != PAR_OK) {
            bad = 1;
            continue;
        }
        bad |= r.code != 0;
        json_error_t err;
        json_t *j = json_loads(r.out ? r.out : "", 0, &err);
        par_proc_result_free(&r);
        const json_t *ph = json_object_get(j, "phase_seconds");
        const double steps = json_number_value(json_object_get(j, "steps"));
        if (!ph || steps <= 0) bad = 1;
        // The engine's phases; the rest (the batch, the hooks and "other",
        // what no phase holds) is the step's cost outside it.
        double in = 0, out = json_number_value(json_object_get(ph, "other"));
        for (int k = 0; k < PAR_PHASE_N && !bad; k++) {
            const double v = json_number_value(json_object_get(ph, par_phase_names[k]));
            if (k == PAR_PHASE_BATCH || k == PAR_PHASE_LOG)
                out += v;
            else if (k != PAR_PHASE_COMM)   // a serial run has none
                in += v;
        }
        if (!bad) *engine += in / steps / copies, *outside += out / steps / copies;
        json_decref(j);
    }
    return started == copies && !bad ? 0 : -1;
}

int sm_run_costs(const sm_setup *s, int cores, double *engine, double *outside,
                 double *contention)
{
    double engk, outk;
    *contention = 1;
    if (time_serial(s, 1, 0, engine, outside) != 0) return -1;
    if (cores > 1 && *engine > 0 && time_serial(s, cores, 0, &engk, &outk) == 0)
        *contention = engk / *engine;
    return 0;
}

// Above 1 where each run evicts the other's data from the core's caches
// (fast mode's ranks each hold their own weights).
double sm_turns_cost(const sm_setup *s)
{
    double one, two, out;
    if (time_serial(s, 1, 1, &one, &out) != 0 || !(one > 0) ||
        time_serial(s, 2, 1, &two, &out) != 0)
        return 1;
    return two / (2 * one);
}
