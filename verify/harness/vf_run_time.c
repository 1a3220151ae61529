// Timings of the configs of a case that passed (vf_run.h; docs/table.md,
// "Timings"). A calibration run finds how many steps make a timed window
// of about `window` seconds on serial exact; every timed run then trains K
// warm-up steps in process (`parity train --warmup-steps K`: trained, not
// timed) and times the W steps after them. Runs go round-robin: each round
// runs every config once, starting one config later than the round before,
// so that drift on the machine (another job, a neighbour VM, the clock
// frequency) falls on every config alike. Each run's phase_seconds is kept
// beside its seconds, and the core-to-core round trip (vf_harness.h) is
// probed before every round and after the last. Statistics: vf_stats.h. A
// timing never decides a verdict; a timing run that fails is an error.
#define _POSIX_C_SOURCE 200809L
#include "vf_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par_sort.h"
#include "par_trainer.h"
#include "sm_measure.h"
#include "vf_stats.h"

// The step counts of a timed run: K warm-up steps, then the W-step window.
typedef struct time_plan {
    long K, W;
} time_plan;

// One `parity train --json` timing run of cf. *sec = its timed window
// (seconds), or 0 when the run failed (why says how); *last takes its
// summary when it succeeded. PAR_OK unless the run could not be started.
static par_status time_run(vf_runner *r, vf_case_run *cr, const vf_config *cf, time_plan p,
                           double *sec, double *wall, json_t **last, char *why, size_t why_n)
{
    char out[1200], err[1200];
    vf_fmt(out, sizeof out, "%s/timing.json", cr->dir);
    vf_fmt(err, sizeof err, "%s/timing.err", cr->dir);
    vf_case_run t = *cr;   // --epochs that hold K + W steps (the window may outrun the case)
    const long e = (p.K + p.W + cr->per_epoch - 1) / cr->per_epoch;
    t.epochs = e > t.epochs ? (int)e : t.epochs;
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "train");
    vf_case_flags(&b, &t, p.K + p.W);
    vf_config_flags(&b, cf, 1);
    // A T-thread row times T threads: omp may not fall back to one
    // thread on a busy machine (the bits are the same either way).
    if (strcmp(cf->trainer, "omp") == 0 && cf->threads > 1) par_argv_add(&b, "--fixed-threads");
    if (p.K > 0) {
        par_argv_opt(&b, "--warmup-steps", "%ld", p.K);
    }
    par_argv_words(&b, "--json --quiet");
    int code;
    json_t *tj = NULL;
    par_status st = vf_run_parity(r, &b, out, err, 0, &code, wall, &tj);
    par_argv_free(&b);
    PAR_TRY(st);
    vf_task_done(r, cr, VF_T_TIME, (double)(p.K + p.W) * cf->ranks, *wall);
    *sec = json_number_value(json_object_get(tj, "seconds"));
    if (code != 0 || !tj || !(*sec > 0)) {
        vf_first_line(why, why_n, err);
        if (!why[0]) snprintf(why, why_n, "parity train exited with %d and no timing", code);
        json_decref(tj);
        *sec = 0;
        return PAR_OK;
    }
    json_decref(*last);
    *last = tj;
    return PAR_OK;
}

// The plan of the case's timed runs. window > 0: a calibration run of cf
// (the case's N steps, the first tenth of them warm-up) gives the seconds
// of a step, and W = ceil(window / that), at least 1; window = 0 (or a
// failed calibration): W = N. Either way K = ceil(W / 10): a tenth of the
// window, enough for first-touch page faults, cold caches and thread and
// MPI start-up to be over before the clock starts.
static par_status plan_window(vf_runner *r, vf_case_run *cr, const vf_config *cf, time_plan *p,
                              json_t *tc)
{
    const vf_case *c = cr->c;
    const long N = cr->N;
    p->W = N;
    if (c->window > 0) {
        char label[128], why[600] = "";
        vf_config_label(label, sizeof label, cf);
        vf_note(r, "%s: timing, calibration run (%ld steps)", label, N);
        const time_plan cal = {N >= 2 ? (N + 9) / 10 : 0, N >= 2 ? N - (N + 9) / 10 : N};
        double sec, wall;
        json_t *tj = NULL;
        PAR_TRY(time_run(r, cr, cf, cal, &sec, &wall, &tj, why, sizeof why));
        json_decref(tj);
        json_t *cj = json_pack("{s:s, s:I, s:I, s:o}", "config", label, "warmup_steps",
                               (json_int_t)cal.K, "steps", (json_int_t)cal.W, "seconds",
                               vf_jnum(sec));
        if (sec > 0) {
            const double per_step = sec / (double)cal.W, w = ceil(c->window / per_step);
            p->W = w < 1 ? 1 : w > 1e8 ? 100000000 : (long)w;
            json_object_set_new(cj, "seconds_per_step", json_real(per_step));
        } else {
            json_object_set_new(cj, "error", json_string(why));
        }
        json_object_set_new(tc, "calibration", cj);
    }
    p->K = (p->W + 9) / 10;
    return PAR_OK;
}

const char *vf_phase_name(int k) { return k < PAR_PHASE_N ? par_phase_names[k] : "other"; }

// Per phase (vf_phase_name), the median of the n runs' phase_seconds, into
// timing["phase_median_seconds"]; left out when a run has no phase_seconds.
static void phase_medians(json_t *timing, json_t *const *phases, int n)
{
    double *x = malloc((size_t)n * sizeof *x);
    json_t *med = json_object();
    for (int k = 0; x && k < VF_N_PHASES; k++) {
        const char *name = vf_phase_name(k);
        int m = 0;
        for (int i = 0; i < n; i++) {
            const json_t *v = json_object_get(phases[i], name);
            if (json_is_number(v)) x[m++] = json_number_value(v);
        }
        if (m == n) json_object_set_new(med, name, json_real(par_median_sort(x, m)));
    }
    free(x);
    if (json_object_size(med) == VF_N_PHASES)
        json_object_set_new(timing, "phase_median_seconds", med);
    else
        json_decref(med);
}

// What one config's timed runs are, into its "timing" object; phases[k]:
// run k's phase_seconds (NULL when it has none).
static void config_timing(json_t *timing, const double *sec, const double *wall, const int *seq,
                          json_t *const *phases, int warmup, int repeats, time_plan p,
                          json_t *last)
{
    json_t *warm = json_array(), *runs = json_array(), *walls = json_array(), *order = json_array();
    json_t *ph = json_array();
    for (int k = 0; k < warmup + repeats; k++) {
        json_array_append_new(k < warmup ? warm : runs, json_real(sec[k]));
        if (k >= warmup) {
            json_array_append_new(walls, json_real(wall[k]));
            json_array_append_new(order, json_integer(seq[k]));
            json_array_append(ph, phases[k] ? phases[k] : json_null());
        }
    }
    json_object_set_new(timing, "warmup_seconds", warm);
    json_object_set_new(timing, "seconds", runs);
    json_object_set_new(timing, "phase_seconds", ph);
    json_object_set_new(timing, "wall_seconds", walls);
    json_object_set_new(timing, "order", order);
    json_object_set_new(timing, "warmup_steps", json_integer(p.K));
    json_object_set_new(timing, "steps", json_integer(p.W));
    vf_time_stats ts;
    if (vf_time_stats_of(&ts, sec + warmup, repeats) != PAR_OK) {
        json_object_set_new(timing, "timed", json_false());
        json_object_set_new(timing, "note", json_string(par_last_error()));
        return;
    }
    json_object_set_new(timing, "timed", json_true());
    json_object_set_new(timing, "median", json_real(ts.median));
    json_object_set_new(timing, "min", json_real(ts.min));
    json_object_set_new(timing, "max", json_real(ts.max));
    json_object_set_new(timing, "runs", json_integer(ts.n));
    json_object_set_new(timing, "runs_kept", json_integer(ts.n_kept));
    json_object_set_new(timing, "mean_kept", json_real(ts.mean_kept));
    json_object_set_new(timing, "cv", vf_jnum(ts.cv_kept));
    json_object_set_new(timing, "noisy", json_boolean(ts.noisy));
    phase_medians(timing, phases + warmup, repeats);
    json_t *bs = json_object_get(last, "bytes_sent_per_step");
    if (bs) json_object_set(timing, "bytes_sent_per_step", bs);
    json_t *sps = json_object_get(last, "samples_per_second");
    if (sps) json_object_set(timing, "samples_per_second_last", sps);
}

// The machine around the timings: load averages, CPU time stolen.
static void machine_before(json_t *tc, vf_cpu_ticks *t0, int *ok)
{
    json_object_set_new(tc, "load_average_start", vf_loadavg_json(NULL));
    *ok = vf_cpu_ticks_read(t0, NULL) == PAR_OK;
}

static void machine_after(vf_runner *r, json_t *tc, const vf_cpu_ticks *t0, int ok)
{
    json_object_set_new(tc, "load_average_end", vf_loadavg_json(NULL));
    vf_cpu_ticks t1;
    if (ok && vf_cpu_ticks_read(&t1, NULL) == PAR_OK && t1.total > t0->total) {
        json_object_set_new(tc, "steal_percent", vf_jnum(vf_steal_percent(t0, &t1)));
        r->ticks_total += t1.total - t0->total;
        r->ticks_steal += t1.steal - t0->steal;
    } else {
        json_object_set_new(tc, "steal_percent", json_null());
    }
}

int vf_case_calibrates(const vf_runner *r, const vf_case *c)
{
    if (!(c->window > 0) || c->repeats == 0) return 0;
    for (int i = 0; i < c->n_configs; i++)
        if (!vf_oversubscribed(r, &c->configs[i])) return 1;
    return 0;
}

par_status vf_time_case(vf_runner *r, vf_case_run *cr, json_t *configs, const int *todo)
{
    const vf_case *c = cr->c;
    int idx[VF_MAX_CONFIGS], n = 0;
    for (int i = 0; i < c->n_configs; i++)
        if (todo[i]) idx[n++] = i;
    if (n == 0) {
        if (vf_case_calibrates(r, c)) vf_task_skip(r, cr, VF_T_TIME, (double)cr->N, 1);
        return PAR_OK;
    }
    json_t *tc = json_object();
    json_object_set_new(cr->res, "timing", tc);
    vf_cpu_ticks t0;
    int ticks_ok;
    machine_before(tc, &t0, &ticks_ok);

    // The calibration config: the timing baseline, serial exact, when it is timed.
    int cal = idx[0];
    for (int j = n - 1; j >= 0; j--) {
        const vf_config *cf = &c->configs[idx[j]];
        if (strcmp(cf->trainer, "serial") == 0 && cf->mode == PAR_MODE_EXACT) cal = idx[j];
    }
    time_plan p;
    PAR_TRY(plan_window(r, cr, &c->configs[cal], &p, tc));
    cr->time_warmup = p.K;
    cr->time_steps = p.W;
    const int rounds = c->warmup + c->repeats;
    for (int j = 0; j < n; j++) {   // the plan counted N steps a run; they are K + W
        r->units_left[VF_T_TIME] += (double)(p.K + p.W - cr->N) * c->configs[idx[j]].ranks *
                                    cr->step_work * rounds;
        if (r->units_left[VF_T_TIME] < 0) r->units_left[VF_T_TIME] = 0;
    }
    json_object_set_new(tc, "window_target_seconds", json_real(c->window));
    json_object_set_new(tc, "warmup_steps", json_integer(p.K));
    json_object_set_new(tc, "steps", json_integer(p.W));
    json_object_set_new(tc, "warmup_rounds", json_integer(c->warmup));
    json_object_set_new(tc, "rounds", json_integer(c->repeats));
    json_object_set_new(tc, "order", json_string("round-robin: every config once a round, each "
                                                 "round starting one config later"));

    // Run rd of config j is [j * rounds + rd] in sec, wall, seq and phases.
    double *sec = calloc((size_t)n * rounds, sizeof *sec);
    double *wall = calloc((size_t)n * rounds, sizeof *wall);
    int *seq = calloc((size_t)n * rounds, sizeof *seq);
    json_t **phases = calloc((size_t)n * rounds, sizeof *phases);
    json_t **last = calloc((size_t)n, sizeof *last);
    char (*why)[600] = calloc((size_t)n, sizeof *why);
    par_status st = PAR_OK;
    if (!sec || !wall || !seq || !phases || !last || !why)
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    // The core-to-core round trip before every round and after the last.
    json_t *probes = json_array();
    json_object_set_new(tc, "core_round_trip_ns", probes);
    int order = 0, n_busy = 0;
    double busy = 0;   // tasks runnable besides verify itself, read before each run
    for (int rd = 0; st == PAR_OK && rd < rounds; rd++) {
        json_array_append_new(probes, vf_jnum(sm_core_round_trip_ns()));
        for (int j = 0; st == PAR_OK && j < n; j++) {
            const int q = (rd + j) % n;
            const vf_config *cf = &c->configs[idx[q]];
            if (why[q][0]) continue;   // an earlier run of it failed
            char label[128];
            vf_config_label(label, sizeof label, cf);
            vf_note(r, "%s: timing, %s %d of %d", label, rd < c->warmup ? "warm-up round" : "round",
                    rd < c->warmup ? rd + 1 : rd - c->warmup + 1,
                    rd < c->warmup ? c->warmup : c->repeats);
            const int running = vf_runnable_read(NULL);
            if (running >= 1) {
                busy += running - 1;
                n_busy++;
            }
            double s;
            st = time_run(r, cr, cf, p, &s, &wall[(size_t)q * rounds + rd], &last[q], why[q],
                          sizeof why[q]);
            if (st == PAR_OK && !(s > 0))
                vf_task_skip(r, cr, VF_T_TIME, (double)(p.K + p.W) * cf->ranks, rounds - rd - 1);
            sec[(size_t)q * rounds + rd] = s;
            seq[(size_t)q * rounds + rd] = order++;
            if (s > 0) phases[(size_t)q * rounds + rd] =
                json_incref(json_object_get(last[q], "phase_seconds"));
        }
    }
    json_array_append_new(probes, vf_jnum(sm_core_round_trip_ns()));
    machine_after(r, tc, &t0, ticks_ok);
    json_object_set_new(tc, "others_runnable_mean", n_busy ? json_real(busy / n_busy) : json_null());
    json_object_set_new(tc, "others_runnable_samples", json_integer(n_busy));
    for (int j = 0; st == PAR_OK && j < n; j++) {
        json_t *e = json_array_get(configs, (size_t)idx[j]);
        json_t *timing = json_object_get(e, "timing");
        if (why[j][0]) {
            json_object_set_new(timing, "timed", json_false());
            json_object_set_new(timing, "note", json_string("a timing run failed"));
            json_object_set_new(timing, "error", json_string(why[j]));
        } else {
            const size_t at = (size_t)j * rounds;
            config_timing(timing, sec + at, wall + at, seq + at, phases + at, c->warmup,
                          c->repeats, p, last[j]);
        }
        if (!json_is_true(json_object_get(timing, "timed")))
            json_object_set_new(e, "verdict", json_string("error"));
    }
    for (int j = 0; last && j < n; j++) json_decref(last[j]);
    for (size_t k = 0; phases && k < (size_t)n * rounds; k++) json_decref(phases[k]);
    free(sec);
    free(wall);
    free(seq);
    free(phases);
    free(last);
    free(why);
    return st;
}

// Speedup and efficiency against the serial exact T=1 R=1 median of the
// case, with the 95% interval of the speedup (vf_speedup_ci: paired over
// the rounds) where there are 2 rounds or more.
void vf_speedups(json_t *configs, json_t *cres_case)
{
    const json_t *base_t = NULL;
    size_t i;
    json_t *cf;
    json_array_foreach(configs, i, cf) {
        if (strcmp(json_string_value(json_object_get(cf, "trainer")), "serial") == 0 &&
            strcmp(json_string_value(json_object_get(cf, "mode")), "exact") == 0) {
            json_t *t = json_object_get(cf, "timing");
            if (json_is_true(json_object_get(t, "timed"))) base_t = t;
        }
    }
    json_object_set_new(cres_case, "timing_baseline",
                        base_t ? json_string("serial exact T=1 R=1") : json_null());
    if (!base_t) return;
    const double base = json_number_value(json_object_get(base_t, "median"));
    const json_t *base_runs = json_object_get(base_t, "seconds");
    const int base_noisy = json_is_true(json_object_get(base_t, "noisy"));
    json_array_foreach(configs, i, cf) {
        json_t *t = json_object_get(cf, "timing");
        if (!json_is_true(json_object_get(t, "timed"))) continue;
        const double med = json_number_value(json_object_get(t, "median"));
        const double cores = (double)json_integer_value(json_object_get(cf, "cores"));
        json_object_set_new(t, "speedup", json_real(base / med));
        json_object_set_new(t, "efficiency", json_real(base / med / cores));
        json_object_set_new(t, "baseline_noisy", json_boolean(base_noisy));
        const json_t *runs = json_object_get(t, "seconds");
        const size_t n = json_array_size(runs);
        double a[1000], b[1000], s, lo, hi;
        if (n < 2 || n != json_array_size(base_runs) || n > 1000) {
            json_object_set_new(t, "speedup_ci95", json_null());
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            a[k] = json_number_value(json_array_get(base_runs, k));
            b[k] = json_number_value(json_array_get(runs, k));
        }
        if (vf_speedup_ci(&s, &lo, &hi, a, b, (int)n, VF_BOOT_RESAMPLES, VF_BOOT_SEED) != PAR_OK) {
            json_object_set_new(t, "speedup_ci95", json_null());
            continue;
        }
        json_object_set_new(t, "speedup_ci95", json_pack("[f, f]", lo, hi));
        // The interval's test at 5%: does the speedup differ from 1 (no change)?
        json_object_set_new(t, "speedup_significant", json_boolean(lo > 1 || hi < 1));
    }
}
