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
#include "vf_report_json.h"
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
    if (vf_config_is_external(cf))   // one launch of its command, one free run
        return vf_time_external(r, cr, cf, p.K, p.W, sec, wall, why, why_n);
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
    par_argv_words(&b, "--no-eval --json --quiet");   // the window is timed: no accuracies after
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

// One config's runs in the case's timing: warm-up rounds' and timed
// rounds' runs, each with its round, its place in the case's order, the
// core-to-core round trip before and after it (vf_harness.h) and its
// phase_seconds.
typedef struct row_runs {
    int n_warm, n;              // untimed runs, timed runs so far
    double *warm;               // [warmup] seconds of the untimed runs
    double *sec, *wall;         // [max rounds] per timed run
    int *round, *seq;           // its timed round (0-based), its place in the order
    double (*rt)[2];            // probes before and after it (NAN: not measured)
    json_t **phases;            // phase_seconds (NULL: none)
    int open;                   // still timed in the coming rounds
    int accounted;              // its rounds that will not run are off the progress plan
    json_t *last;               // the last run's summary
    char why[600];              // "" or why a run failed (no more runs)
} row_runs;

// What one config's timed runs are, into its "timing" object.
static void config_timing(json_t *timing, const row_runs *rr, const int *near, time_plan p)
{
    json_t *warm = json_array(), *runs = json_array(), *walls = json_array(), *order = json_array();
    json_t *ph = json_array(), *rounds = json_array(), *rts = json_array(), *nr = json_array();
    for (int k = 0; k < rr->n_warm; k++) json_array_append_new(warm, json_real(rr->warm[k]));
    for (int k = 0; k < rr->n; k++) {
        json_array_append_new(runs, json_real(rr->sec[k]));
        json_array_append_new(walls, json_real(rr->wall[k]));
        json_array_append_new(order, json_integer(rr->seq[k]));
        json_array_append_new(rounds, json_integer(rr->round[k]));
        json_array_append_new(rts, json_pack("[o, o]", vf_jnum(rr->rt[k][0]), vf_jnum(rr->rt[k][1])));
        json_array_append_new(nr, json_boolean(near[k]));
        json_array_append(ph, rr->phases[k] ? rr->phases[k] : json_null());
    }
    json_object_set_new(timing, "warmup_seconds", warm);
    json_object_set_new(timing, "seconds", runs);
    json_object_set_new(timing, "rounds", rounds);
    json_object_set_new(timing, "core_round_trip_ns", rts);
    json_object_set_new(timing, "near", nr);
    json_object_set_new(timing, "phase_seconds", ph);
    json_object_set_new(timing, "wall_seconds", walls);
    json_object_set_new(timing, "order", order);
    json_object_set_new(timing, "warmup_steps", json_integer(p.K));
    json_object_set_new(timing, "steps", json_integer(p.W));
    vf_time_stats ts;
    if (vf_time_stats_of(&ts, rr->sec, rr->n) != PAR_OK) {
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
    phase_medians(timing, rr->phases, rr->n);
    json_t *bs = json_object_get(rr->last, "bytes_sent_per_step");
    if (bs) json_object_set(timing, "bytes_sent_per_step", bs);
    json_t *sps = json_object_get(rr->last, "samples_per_second");
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

double vf_window_run_s(const vf_case *c) { return 1.1 * c->window; }

int vf_timed_runs(const vf_case *c, const vf_config *cf, int cores)
{
    return cf->threads * cf->ranks > cores || c->repeats == 0 ? 0 : c->warmup + c->repeats;
}

double vf_suite_window_s(const vf_suite *s, int cores, long *runs)
{
    double sec = 0;
    *runs = 0;
    for (int i = 0; i < s->n_cases; i++) {
        const vf_case *c = &s->cases[i];
        for (int j = 0; c->window > 0 && j < c->n_configs; j++) {
            const int n = vf_timed_runs(c, &c->configs[j], cores);
            *runs += n;
            sec += n * vf_window_run_s(c);
        }
    }
    return sec;
}

void vf_time_row_skip(vf_runner *r, vf_case_run *cr, const vf_config *cf)
{
    const vf_case *c = cr->c;
    const int runs = c->warmup + c->repeats;
    if (c->window > 0)
        vf_plan_add(r, cr, VF_T_TIME, -runs, 0, -runs * vf_window_run_s(c));
    else
        vf_task_skip(r, cr, VF_T_TIME, (double)cr->N * cf->ranks, runs);
}

int vf_case_calibrates(const vf_runner *r, const vf_case *c)
{
    if (!(c->window > 0) || c->repeats == 0) return 0;
    for (int i = 0; i < c->n_configs; i++)
        if (!vf_oversubscribed(r, &c->configs[i])) return 1;
    return 0;
}

// The near flag of every timed run of the case so far (sm_near_probes over
// all of them: "near" is against the case's fastest probe); near[j] has
// rows[j].n entries.
static par_status case_near(const row_runs *rows, int n_rows, int **near)
{
    int total = 0;
    for (int j = 0; j < n_rows; j++) total += rows[j].n;
    double (*rt)[2] = malloc((size_t)(total > 0 ? total : 1) * sizeof *rt);
    int *all = malloc((size_t)(total > 0 ? total : 1) * sizeof *all);
    if (!rt || !all) {
        free(rt);
        free(all);
        return par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    for (int j = 0, k = 0; j < n_rows; k += rows[j].n, j++)
        memcpy(rt + k, rows[j].rt, (size_t)rows[j].n * sizeof *rt);
    sm_near_probes((const double(*)[2])rt, total, all);
    for (int j = 0, k = 0; j < n_rows; k += rows[j].n, j++)
        memcpy(near[j], all + k, (size_t)rows[j].n * sizeof *all);
    free(rt);
    free(all);
    return PAR_OK;
}

// Adaptive rounds: after round rd (0-based, timed), each row other than the
// baseline (and than a row whose run failed) is closed when its speedup
// interval's half-width is at most the case's precision, computed from at
// least VF_ADAPT_MIN_ROUNDS rounds, and open otherwise. A closed row is
// looked at again every round: a faster probe can move its runs between
// near and far (case_near), and with them the rounds its interval uses, so
// a row that stopped on an interval the table would no longer give runs
// again (the progress estimate, which counted its rounds off, then runs
// short). The baseline stays open while any other row is. Returns how many
// rows are still open.
static par_status close_settled(const vf_case *c, row_runs *rows, int n, int base, int rd,
                                const int *cores, int **near, int *n_open)
{
    *n_open = 0;
    if (c->precision > 0 && rd + 1 >= VF_ADAPT_MIN_ROUNDS && base >= 0) {
        PAR_TRY(case_near(rows, n, near));
        for (int j = 0; j < n; j++) {
            if (j == base || rows[j].why[0] || rows[j].n < VF_ADAPT_MIN_ROUNDS) continue;
            vf_speedup e;
            PAR_TRY(vf_row_speedup(&e, rows[base].sec, rows[base].round, rows[base].n,
                                   rows[j].sec, rows[j].round, near[j], rows[j].n, cores[j]));
            rows[j].open = !(e.n >= VF_ADAPT_MIN_ROUNDS && e.half_width <= c->precision);
        }
    }
    int others = 0;
    for (int j = 0; j < n; j++) others += j != base && rows[j].open;
    if (base >= 0 && others == 0) rows[base].open = 0;
    for (int j = 0; j < n; j++) *n_open += rows[j].open;
    return PAR_OK;
}

// The progress estimate's plan counted every round for every row: the
// rounds a row will not run (it failed, or is settled; all when `all`)
// come off it once.
static void skip_closed(vf_runner *r, const vf_case_run *cr, row_runs *rows, int n,
                        const int *idx, time_plan p, int rounds, int all)
{
    for (int j = 0; rows && j < n; j++) {
        row_runs *rr = &rows[j];
        if (rr->accounted || (rr->open && !rr->why[0] && !all)) continue;
        rr->accounted = 1;
        const int ran = rr->n_warm + rr->n + (rr->why[0] != 0);
        vf_task_skip(r, cr, VF_T_TIME, (double)(p.K + p.W) * cr->c->configs[idx[j]].ranks,
                     rounds - ran);
    }
}

static void rows_free(row_runs *rows, int n)
{
    for (int j = 0; rows && j < n; j++) {
        json_decref(rows[j].last);
        for (int k = 0; k < rows[j].n; k++) json_decref(rows[j].phases[k]);
        free(rows[j].warm);
        free(rows[j].sec);
        free(rows[j].wall);
        free(rows[j].round);
        free(rows[j].seq);
        free(rows[j].rt);
        free(rows[j].phases);
    }
    free(rows);
}

static par_status rows_alloc(row_runs **out, int n, int warmup, int repeats)
{
    row_runs *rows = calloc((size_t)n, sizeof *rows);
    PAR_FAIL_IF(!rows, PAR_ERR_ALLOC, "out of memory");
    const size_t m = (size_t)(repeats > 0 ? repeats : 1);
    int ok = 1;
    for (int j = 0; j < n; j++) {
        row_runs *rr = &rows[j];
        rr->warm = malloc((size_t)(warmup > 0 ? warmup : 1) * sizeof *rr->warm);
        rr->sec = malloc(m * sizeof *rr->sec);
        rr->wall = malloc(m * sizeof *rr->wall);
        rr->round = malloc(m * sizeof *rr->round);
        rr->seq = malloc(m * sizeof *rr->seq);
        rr->rt = malloc(m * sizeof *rr->rt);
        rr->phases = calloc(m, sizeof *rr->phases);
        rr->open = 1;
        ok = ok && rr->warm && rr->sec && rr->wall && rr->round && rr->seq && rr->rt &&
             rr->phases;
    }
    *out = rows;
    PAR_FAIL_IF(!ok, PAR_ERR_ALLOC, "out of memory");
    return PAR_OK;
}

par_status vf_time_case(vf_runner *r, vf_case_run *cr, json_t *configs, const int *todo)
{
    const vf_case *c = cr->c;
    int idx[VF_MAX_CONFIGS], cores[VF_MAX_CONFIGS], n = 0;
    for (int i = 0; i < c->n_configs; i++)
        if (todo[i]) {
            cores[n] = c->configs[i].threads * c->configs[i].ranks;
            idx[n++] = i;
        }
    if (n == 0) {
        if (vf_case_calibrates(r, c)) vf_task_skip(r, cr, VF_T_TIME, (double)cr->N, 1);
        return PAR_OK;
    }
    json_t *tc = json_object();
    json_object_set_new(cr->res, "timing", tc);
    vf_cpu_ticks t0;
    int ticks_ok;
    machine_before(tc, &t0, &ticks_ok);

    // The calibration config and timing baseline: serial exact (an external
    // case: its world 1), when it is timed.
    int cal = 0, base = -1;
    for (int j = n - 1; j >= 0; j--)
        if (vf_config_is_base(c, &c->configs[idx[j]])) cal = base = j;
    time_plan p;
    PAR_TRY(plan_window(r, cr, &c->configs[idx[cal]], &p, tc));
    cr->time_warmup = p.K;
    cr->time_steps = p.W;
    const int rounds = c->warmup + c->repeats;
    for (int j = 0; j < n; j++) {   // the plan counted N steps a run, or window seconds; now K + W
        const double planned = c->window > 0 ? 0 : (double)cr->N;
        vf_plan_add(r, cr, VF_T_TIME, 0, (double)(p.K + p.W - planned) * c->configs[idx[j]].ranks *
                    cr->step_work * rounds, c->window > 0 ? -rounds * vf_window_run_s(c) : 0);
    }
    json_object_set_new(tc, "window_target_seconds", json_real(c->window));
    json_object_set_new(tc, "warmup_steps", json_integer(p.K));
    json_object_set_new(tc, "steps", json_integer(p.W));
    json_object_set_new(tc, "warmup_rounds", json_integer(c->warmup));
    json_object_set_new(tc, "rounds_max", json_integer(c->repeats));
    json_object_set_new(tc, "precision", json_real(c->precision));
    json_object_set_new(tc, "order", json_string("round-robin: every open config once a round, "
                                                 "each round starting one config later"));

    row_runs *rows = NULL;
    int **near = calloc((size_t)n, sizeof *near);
    par_status st = near ? rows_alloc(&rows, n, c->warmup, c->repeats)
                         : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    for (int j = 0; st == PAR_OK && j < n; j++) {
        near[j] = malloc((size_t)(c->repeats > 0 ? c->repeats : 1) * sizeof *near[j]);
        if (!near[j]) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    // The core-to-core round trip before every run and after the last: a
    // run's "after" is the next run's "before".
    double *after = NULL;
    json_t *probes = json_array();   // every probe in order
    json_object_set_new(tc, "core_round_trip_ns", probes);
    int order = 0, n_busy = 0, timed_rounds = 0;
    double busy = 0;   // tasks runnable besides verify itself, read before each run
    for (int rd = 0; st == PAR_OK && rd < rounds; rd++) {
        const int timed = rd >= c->warmup;
        for (int j = 0; st == PAR_OK && j < n; j++) {
            const int q = (rd + j) % n;
            row_runs *rr = &rows[q];
            const vf_config *cf = &c->configs[idx[q]];
            if (rr->why[0] || !rr->open) continue;   // a run of it failed, or it is settled
            char label[128];
            vf_config_label(label, sizeof label, cf);
            vf_note(r, "%s: timing, %s %d of %s%d", label, timed ? "round" : "warm-up round",
                    timed ? rd - c->warmup + 1 : rd + 1,
                    timed && c->precision > 0 ? "at most " : "", timed ? c->repeats : c->warmup);
            const int running = vf_runnable_read(NULL);
            if (running >= 1) {
                busy += running - 1;
                n_busy++;
            }
            const double probe = sm_core_round_trip_ns();
            json_array_append_new(probes, vf_jnum(probe));
            if (after) *after = probe;
            after = NULL;
            double s, wall;
            st = time_run(r, cr, cf, p, &s, &wall, &rr->last, rr->why, sizeof rr->why);
            if (st != PAR_OK) break;
            if (!(s > 0)) continue;   // failed: rr->why says why
            order++;
            if (!timed) {
                rr->warm[rr->n_warm++] = s;
                continue;
            }
            const int k = rr->n++;
            rr->sec[k] = s;
            rr->wall[k] = wall;
            rr->round[k] = rd - c->warmup;
            rr->seq[k] = order - 1;
            rr->rt[k][0] = probe;
            rr->rt[k][1] = NAN;
            after = &rr->rt[k][1];
            rr->phases[k] = json_incref(json_object_get(rr->last, "phase_seconds"));
        }
        int n_open = 1;
        if (st == PAR_OK && timed) {
            timed_rounds++;
            st = close_settled(c, rows, n, base, rd - c->warmup, cores, near, &n_open);
        }
        skip_closed(r, cr, rows, n, idx, p, rounds, n_open == 0);
        if (n_open == 0) break;
    }
    if (after) {
        *after = sm_core_round_trip_ns();
        json_array_append_new(probes, vf_jnum(*after));
    }
    skip_closed(r, cr, rows, n, idx, p, rounds, 1);
    if (st == PAR_OK) st = case_near(rows, n, near);
    machine_after(r, tc, &t0, ticks_ok);
    json_object_set_new(tc, "rounds", json_integer(timed_rounds));
    json_object_set_new(tc, "others_runnable_mean", n_busy ? json_real(busy / n_busy) : json_null());
    json_object_set_new(tc, "others_runnable_samples", json_integer(n_busy));
    for (int j = 0; st == PAR_OK && j < n; j++) {
        json_t *e = json_array_get(configs, (size_t)idx[j]);
        json_t *timing = json_object_get(e, "timing");
        if (rows[j].why[0]) {
            json_object_set_new(timing, "timed", json_false());
            json_object_set_new(timing, "note", json_string("a timing run failed"));
            json_object_set_new(timing, "error", json_string(rows[j].why));
        } else {
            config_timing(timing, &rows[j], near[j], p);
        }
        if (!json_is_true(json_object_get(timing, "timed")))
            json_object_set_new(e, "verdict", json_string("error"));
    }
    for (int j = 0; j < n; j++) free(near ? near[j] : NULL);
    free(near);
    rows_free(rows, n);
    return st;
}

// The row's runs from its "timing" object: seconds, rounds, near flags
// (arrays of n, allocated by the caller).
static int runs_of(const json_t *t, double *sec, int *round, int *near, size_t cap)
{
    const json_t *s = json_object_get(t, "seconds"), *rd = json_object_get(t, "rounds");
    const json_t *nr = json_object_get(t, "near");
    const size_t n = json_array_size(s);
    if (n > cap || json_array_size(rd) != n || json_array_size(nr) != n) return -1;
    for (size_t k = 0; k < n; k++) {
        sec[k] = json_number_value(json_array_get(s, k));
        round[k] = (int)json_integer_value(json_array_get(rd, k));
        near[k] = json_is_true(json_array_get(nr, k));
    }
    return (int)n;
}

// Speedup and efficiency against the case's timing baseline, the config
// marked "timing_base" (serial exact T=1 R=1; an external case's world 1;
// vf_row_speedup: paired by round, the rounds of one placement for a
// two-core row when the cores moved), with its 95% interval where two rounds or more pair.
void vf_speedups(json_t *configs, json_t *cres_case)
{
    const json_t *base_t = NULL;
    size_t i;
    json_t *cf;
    char base_label[128] = "";
    json_array_foreach(configs, i, cf) {
        if (json_is_true(json_object_get(cf, "timing_base"))) {
            json_t *t = json_object_get(cf, "timing");
            if (!json_is_true(json_object_get(t, "timed"))) continue;
            base_t = t;
            label(base_label, sizeof base_label, cf);
        }
    }
    json_object_set_new(cres_case, "timing_baseline",
                        base_t ? json_string(base_label) : json_null());
    if (!base_t) return;
    const size_t cap = json_array_size(json_object_get(base_t, "seconds")) + 1;
    double *bs = malloc(cap * sizeof *bs), *xs = malloc(cap * sizeof *xs);
    int *br = malloc(cap * sizeof *br), *bn = malloc(cap * sizeof *bn);
    int *xr = malloc(cap * sizeof *xr), *xn = malloc(cap * sizeof *xn);
    const int nb = bs && xs && br && bn && xr && xn ? runs_of(base_t, bs, br, bn, cap) : -1;
    json_array_foreach(configs, i, cf) {
        json_t *t = json_object_get(cf, "timing");
        if (nb < 0 || !json_is_true(json_object_get(t, "timed"))) continue;
        const int cores = (int)json_integer_value(json_object_get(cf, "cores"));
        const int nx = runs_of(t, xs, xr, xn, cap);
        vf_speedup e;
        if (nx < 0 || vf_row_speedup(&e, bs, br, nb, xs, xr, xn, nx, cores) != PAR_OK) continue;
        json_object_set_new(t, "speedup", json_real(e.speedup));
        json_object_set_new(t, "efficiency", json_real(e.speedup / cores));
        json_object_set_new(t, "speedup_rounds", json_integer(e.n));
        static const char *const placement[] = {"all", "near", "far"};
        json_object_set_new(t, "speedup_placement", json_string(placement[e.placement]));
        if (e.n < 2) {
            json_object_set_new(t, "speedup_ci95", json_null());
            continue;
        }
        json_object_set_new(t, "speedup_ci95", json_pack("[f, f]", e.lo, e.hi));
        json_object_set_new(t, "speedup_half_width", json_real(e.half_width));
        // The interval's test at 5%: does the speedup differ from 1 (no change)?
        json_object_set_new(t, "speedup_significant", json_boolean(e.significant));
        json_object_set_new(t, "noisy", json_boolean(e.noisy));
    }
    free(bs);
    free(xs);
    free(br);
    free(bn);
    free(xr);
    free(xn);
}
