// Timings of the configs that passed (vf_run.h): warm-up runs, then timed
// runs of `parity train --json` (its training seconds); median, min, max;
// speedup against the serial exact T=1 R=1 median, efficiency per core.
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

// ---- timing -------------------------------------------------------------------------

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

par_status vf_time_config(vf_runner *r, vf_case_run *cr, const vf_config *cf, json_t *timing)
{
    const vf_case *c = cr->c;
    char label[128], err[1200], out[1200];
    vf_config_label(label, sizeof label, cf);
    vf_fmt(out, sizeof out, "%s/timing.json", cr->dir);
    vf_fmt(err, sizeof err, "%s/timing.err", cr->dir);
    json_t *runs = json_array(), *walls = json_array(), *warm = json_array();
    double *sec = calloc((size_t)c->repeats + 1, sizeof *sec);
    PAR_FAIL_IF(!sec, PAR_ERR_ALLOC, "out of memory");
    par_status st = PAR_OK;
    int ok = 1;
    json_t *last = NULL;
    for (int k = 0; st == PAR_OK && ok && k < c->warmup + c->repeats; k++) {
        const int is_warm = k < c->warmup;
        vf_note(r, "%s: timing, %s %d of %d", label, is_warm ? "warm-up" : "run",
                 is_warm ? k + 1 : k - c->warmup + 1, is_warm ? c->warmup : c->repeats);
        vf_args b = {0};
        vf_arg(&b, "parity");
        vf_arg(&b, "train");
        vf_case_flags(&b, cr, cr->N);
        vf_config_flags(&b, cf, 1);
        // A T-thread row times T threads: omp may not fall back to one
        // thread on a busy machine (the bits are the same either way).
        if (strcmp(cf->trainer, "omp") == 0 && cf->threads > 1) vf_arg(&b, "--fixed-threads");
        vf_arg(&b, "--json");
        vf_arg(&b, "--quiet");
        int code;
        double wall;
        json_t *tj = NULL;
        st = vf_run_parity(r, &b, out, err, 0, &code, &wall, &tj);
        vf_args_free(&b);
        if (st != PAR_OK) break;
        vf_task_done(r, cr, VF_T_TIME, (double)cr->N * cf->ranks, wall);
        const double s = json_number_value(json_object_get(tj, "seconds"));
        if (code != 0 || !tj || !(s > 0)) {
            char why[600];
            vf_first_line(why, sizeof why, err);
            json_object_set_new(timing, "error", json_string(why));
            json_decref(tj);
            ok = 0;
            vf_task_skip(r, cr, VF_T_TIME, (double)cr->N * cf->ranks, c->warmup + c->repeats - k - 1);
            break;
        }
        json_array_append_new(is_warm ? warm : runs, json_real(s));
        if (!is_warm) {
            sec[k - c->warmup] = s;
            json_array_append_new(walls, json_real(wall));
        }
        json_decref(last);
        last = tj;
    }
    json_object_set_new(timing, "warmup_seconds", warm);
    json_object_set_new(timing, "seconds", runs);
    json_object_set_new(timing, "wall_seconds", walls);
    if (st == PAR_OK && ok && c->repeats > 0) {
        qsort(sec, (size_t)c->repeats, sizeof *sec, cmp_double);
        const int n = c->repeats;
        const double med = n % 2 ? sec[n / 2] : 0.5 * (sec[n / 2 - 1] + sec[n / 2]);
        json_object_set_new(timing, "timed", json_true());
        json_object_set_new(timing, "median", json_real(med));
        json_object_set_new(timing, "min", json_real(sec[0]));
        json_object_set_new(timing, "max", json_real(sec[n - 1]));
        json_t *bs = json_object_get(last, "bytes_sent_per_step");
        if (bs) json_object_set(timing, "bytes_sent_per_step", bs);
        json_t *sps = json_object_get(last, "samples_per_second");
        if (sps) json_object_set(timing, "samples_per_second_last", sps);
    } else if (st == PAR_OK) {
        json_object_set_new(timing, "timed", json_false());
        json_object_set_new(timing, "note", json_string("a timing run failed"));
    }
    json_decref(last);
    free(sec);
    return st;
}

// Speedup and efficiency against the serial exact T=1 R=1 median of the case.
void vf_speedups(json_t *configs, json_t *cres_case)
{
    double base = 0;
    size_t i;
    json_t *cf;
    json_array_foreach(configs, i, cf) {
        if (strcmp(json_string_value(json_object_get(cf, "trainer")), "serial") == 0 &&
            strcmp(json_string_value(json_object_get(cf, "mode")), "exact") == 0) {
            json_t *t = json_object_get(cf, "timing");
            if (json_is_true(json_object_get(t, "timed")))
                base = json_number_value(json_object_get(t, "median"));
        }
    }
    json_object_set_new(cres_case, "timing_baseline",
                        base > 0 ? json_string("serial exact T=1 R=1") : json_null());
    if (!(base > 0)) return;
    json_array_foreach(configs, i, cf) {
        json_t *t = json_object_get(cf, "timing");
        if (!json_is_true(json_object_get(t, "timed"))) continue;
        const double med = json_number_value(json_object_get(t, "median"));
        const double cores = (double)json_integer_value(json_object_get(cf, "cores"));
        json_object_set_new(t, "speedup", json_real(base / med));
        json_object_set_new(t, "efficiency", json_real(base / med / cores));
    }
}

