// The report of `parity verify`: table.md (human, with a legend), table.csv,
// loss-curve plots and results.json (all raw data, with the SHA-256 of the
// other files so that the signature over results.json covers them), and
// the report's own cells (the checks `parity table sign|verify` make on a
// results folder are vf_results.c).
#define _POSIX_C_SOURCE 200809L
#include "vf_harness.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "par_hash.h"
#include "vf_report_json.h"
#include "vf_stats.h"

// Writes n bytes to dir/name through a temp file and a rename.
static par_status write_file(const char *dir, const char *name, const char *data, size_t n)
{
    char path[1200], tmp[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    PAR_TRY(par_out_check(path));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    const int ok = fwrite(data, 1, n, f) == n;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        const int e = errno;
        remove(tmp);
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot write %s: %s", path,
                             strerror(e));
    }
    return PAR_OK;
}

// ---- table cells ---------------------------------------------------------------------

// Short correctness cell: "bitwise", "within bound, worst 0.41", "FAIL: ...".
static void correctness_cell(char *buf, size_t n, const json_t *cf)
{
    const json_t *c = json_object_get(cf, "correctness");
    const char *v = str(c, "verdict"), *method = str(c, "method");
    if (strcmp(v, "error") == 0) snprintf(buf, n, "error (below)");
    else if (strcmp(method, "external lockstep") == 0) {
        const json_t *f = json_object_get(json_object_get(c, "lockstep"), "first_violation");
        const json_t *lf = json_object_get(json_object_get(c, "lockstep"), "local_first_violation");
        if (json_is_object(lf)) f = lf;   // the op it got wrong first
        if (strcmp(v, "pass") == 0) snprintf(buf, n, "within bound, worst %.2f", num(c, "worst_ratio"));
        else if (json_is_object(f))
            snprintf(buf, n, "first violation: step %ld, %s%s, %.3g times its bound",
                     integer(f, "step"), str(f, "tensor"), str(f, "index"), num(f, "ratio"));
        else if (json_is_object(json_object_get(c, "lockstep")))
            snprintf(buf, n, "rounding %.3gx parity's (below)",
                     num(json_object_get(c, "lockstep"), "signature"));
        else snprintf(buf, n, "broke the protocol (below)");
    } else if (strcmp(method, "bitwise") == 0) {
        if (strcmp(v, "pass") == 0) {
            snprintf(buf, n, "bitwise");
            return;
        }
        const long w = integer(c, "first_weights_diff_step"), l = integer(c, "first_loss_diff_step");
        int k = snprintf(buf, n, "differs:");
        if (w > 0 && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, " weights from step %ld", w);
        if (l > 0 && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, "%s loss from step %ld", w > 0 ? "," : "", l);
        if (!json_is_true(json_object_get(c, "weights_equal")) && k >= 0 && (size_t)k < n)
            snprintf(buf + k, n - (size_t)k, "%s final %s", w > 0 || l > 0 ? ";" : "", str(c, "first_weight_diff"));
    } else {
        const json_t *l = json_object_get(c, "lockstep");
        if (strcmp(v, "pass") == 0) snprintf(buf, n, "within bound, worst %.2f", num(c, "worst_ratio"));
        else snprintf(buf, n, "%ld over bound from step %ld, worst %.3g", integer(l, "violations"),
                      integer(l, "first_violation_step"), num(c, "worst_ratio"));
    }
}

static void mpfr_cell(char *buf, size_t n, const json_t *cf)
{
    const json_t *m = json_object_get(cf, "mpfr");
    const char *v = str(m, "verdict");
    const int inherited = strcmp(str(m, "checked_as"), "reference") == 0;   // bits = the reference's
    if (strcmp(v, "pass") == 0) snprintf(buf, n, inherited ? "pass (= ref)" : "pass");
    else if (strcmp(v, "fail") == 0) snprintf(buf, n, "**FAIL**");
    else snprintf(buf, n, "%s", v);
}

// Text for a Markdown table cell: '|' escaped, newlines as spaces.
static void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else fputc(*s == '\n' ? ' ' : *s, f);
    }
}

static const char *verdict_cell(const char *v)
{
    return strcmp(v, "pass") == 0 ? "PASS" : strcmp(v, "error") == 0 ? "**ERROR**" : "**FAIL**";
}

// ---- table.md ---------------------------------------------------------------------------

// "0.52 / 0.61 / 0.70" of a [1, 5, 15 min] array; "not known" otherwise.
static void loadavg_text(char *buf, size_t n, const json_t *l)
{
    if (json_array_size(l) != 3) {
        snprintf(buf, n, "not known");
        return;
    }
    snprintf(buf, n, "%.2f / %.2f / %.2f", json_number_value(json_array_get(l, 0)),
             json_number_value(json_array_get(l, 1)), json_number_value(json_array_get(l, 2)));
}

// The speedup of a timed row: the ratio with its 95% interval, "n.s." when
// the interval holds 1 (no difference shown), "near R/N" or "far R/N" when
// only the rounds of one placement of the cores were used; NOISY with the interval alone when
// it is too wide to quote a number (vf_stats.h).
static void speedup_cell(char *buf, size_t n, const json_t *cf, const json_t *t)
{
    const json_t *ci = json_object_get(t, "speedup_ci95");
    const json_t *tb = json_object_get(cf, "timing_base");
    const int base = tb ? json_is_true(tb)
                        : strcmp(str(cf, "trainer"), "serial") == 0 &&
                              strcmp(str(cf, "mode"), "exact") == 0;
    char near[48] = "";
    const char *placement = str(t, "speedup_placement");
    if (strcmp(placement, "near") == 0 || strcmp(placement, "far") == 0)
        snprintf(near, sizeof near, " %s %ld/%ld", placement, integer(t, "speedup_rounds"),
                 integer(t, "runs"));
    if (base) snprintf(buf, n, "%.2f (baseline)", num(t, "speedup"));
    else if (json_array_size(ci) != 2)
        snprintf(buf, n, "%.2f (%ld run%s: no interval)", num(t, "speedup"), integer(t, "runs"),
                 integer(t, "runs") == 1 ? "" : "s");
    else if (json_is_true(json_object_get(t, "noisy")))
        snprintf(buf, n, "**NOISY** [%.2f, %.2f]%s", json_number_value(json_array_get(ci, 0)),
                 json_number_value(json_array_get(ci, 1)), near);
    else
        snprintf(buf, n, "%.2f [%.2f, %.2f]%s%s", num(t, "speedup"),
                 json_number_value(json_array_get(ci, 0)), json_number_value(json_array_get(ci, 1)),
                 json_is_true(json_object_get(t, "speedup_significant")) ? "" : " n.s.", near);
}

// The core-to-core probes around the case's runs: their range, and how
// many timed runs met the cores farther apart than the nearest placement.
static void md_probes(FILE *f, const json_t *tc, const json_t *configs)
{
    json_t *sum = vf_round_trip_summary_json(json_object_get(tc, "core_round_trip_ns"));
    if (integer(sum, "measured") > 0) {
        long runs = 0, far = 0;
        size_t i, k;
        json_t *cf, *v;
        json_array_foreach(configs, i, cf) {
            json_array_foreach(json_object_get(json_object_get(cf, "timing"), "near"), k, v) {
                runs++;
                far += json_is_false(v);
            }
        }
        fprintf(f, " Core-to-core round trip before and after each run: %.0f-%.0f ns (median "
                   "%.0f, %ld probes); %ld of %ld timed runs met the cores far (a probe over "
                   "twice the fastest).", num(sum, "min"), num(sum, "max"), num(sum, "median"),
                integer(sum, "measured"), far, runs);
    }
    json_decref(sum);
}

// The case's timing method and the machine while it ran, under its table.
static void md_timing(FILE *f, const json_t *cs)
{
    const json_t *st = json_object_get(cs, "settings"), *tc = json_object_get(cs, "timing");
    if (!tc) return;
    const long rounds = integer(tc, "rounds");
    fprintf(f, "Timing: %ld round%s", rounds, rounds == 1 ? "" : "s");
    if (num(tc, "precision") > 0)
        fprintf(f, " (adaptive: at most %ld; from round %d on, a row stops once its speedup's "
                   "interval is within +-%.3g%% of it)", integer(tc, "rounds_max"),
                VF_ADAPT_MIN_ROUNDS, 100 * num(tc, "precision"));
    if (integer(tc, "warmup_rounds") > 0)
        fprintf(f, " after %ld untimed", integer(tc, "warmup_rounds"));
    fprintf(f, ", configs interleaved (every config still timed once a round, each round "
               "starting one config later); each run trains %ld warm-up steps in process, then "
               "times %ld steps", integer(tc, "warmup_steps"), integer(tc, "steps"));
    const json_t *cal = json_object_get(tc, "calibration");
    if (num(st, "window") > 0 && json_is_number(json_object_get(cal, "seconds_per_step")))
        fprintf(f, " (a window of %.2g s on %s: %.3f ms a step in a calibration run)",
                num(st, "window"), str(cal, "config"), 1e3 * num(cal, "seconds_per_step"));
    else if (num(st, "window") > 0)
        fprintf(f, " (the case's steps: the calibration run failed: %s)", str(cal, "error"));
    else fprintf(f, " (the case's steps: window = 0)");
    char a[64], b[64];
    loadavg_text(a, sizeof a, json_object_get(tc, "load_average_start"));
    loadavg_text(b, sizeof b, json_object_get(tc, "load_average_end"));
    fprintf(f, ". Load average %s before, %s after; CPU time stolen meanwhile: ", a, b);
    if (json_is_number(json_object_get(tc, "steal_percent")))
        fprintf(f, "%.2f%%.", num(tc, "steal_percent"));
    else fprintf(f, "not known.");
    if (json_is_number(json_object_get(tc, "others_runnable_mean")))
        fprintf(f, " Other tasks runnable between runs (/proc/loadavg, %ld readings): %.2f on "
                   "average.", integer(tc, "others_runnable_samples"),
                num(tc, "others_runnable_mean"));
    if (rounds < VF_TRIM_MIN_RUNS)
        fprintf(f, " **%ld timed run%s a config: fewer than %d, so no run is dropped%s.**",
                rounds, rounds == 1 ? "" : "s", VF_TRIM_MIN_RUNS,
                rounds == 1 ? " (no CV, no interval)" : rounds < VF_CV_MIN_RUNS ? " (no CV)" : "");
    md_probes(f, tc, json_object_get(cs, "configs"));
    fprintf(f, "\n\n");
}

// Where each timed config's time goes: per phase of `parity train --json`'s
// phase_seconds, the median over the config's timed runs, in ms per step.
static void md_phases(FILE *f, const json_t *cs)
{
    const json_t *configs = json_object_get(cs, "configs"), *cols = NULL;
    const long steps = integer(json_object_get(cs, "timing"), "steps");
    size_t i;
    json_t *cf, *v;
    const char *name;
    json_array_foreach(configs, i, cf) {
        if (!cols) cols = json_object_get(json_object_get(cf, "timing"), "phase_median_seconds");
    }
    if (!cols || steps < 1) return;
    fprintf(f, "Where the time goes, in ms per step: each phase's median over the row's timed "
               "runs (`parity train --json`'s phase_seconds: OpenMP's master thread, waits at "
               "barriers included; MPI's rank 0), and the "
               "step, the row's median s / %ld steps. Each median is taken on its own, so a "
               "row's phases need not add up to its step exactly.\n\n", steps);
    fprintf(f, "| trainer | mode | T | R | step |");
    json_object_foreach((json_t *)cols, name, v) fprintf(f, " %s |", name);
    fprintf(f, "\n|---|---|--:|--:|--:|");
    json_object_foreach((json_t *)cols, name, v) fprintf(f, "--:|");
    fprintf(f, "\n");
    json_array_foreach(configs, i, cf) {
        const json_t *t = json_object_get(cf, "timing");
        const json_t *med = json_object_get(t, "phase_median_seconds");
        if (!med) continue;
        fprintf(f, "| %s | %s | %ld | %ld | %.3f |", str(cf, "trainer"), str(cf, "mode"),
                integer(cf, "threads"), integer(cf, "ranks"), 1e3 * num(t, "median") / steps);
        json_object_foreach((json_t *)cols, name, v)
            fprintf(f, " %.3f |", 1e3 * num(med, name) / steps);
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

// The core-to-core round trip over every probe of the run (provenance): its
// range, and whether the distance between the two cores changed meanwhile.
static void md_round_trip(FILE *f, const json_t *rt)
{
    const long measured = integer(rt, "measured"), far = integer(rt, "far");
    fprintf(f, "| core distance | ");
    if (measured == 0) {
        fprintf(f, "core-to-core round trip not measured (%s) |\n",
                integer(rt, "probes") > 0 ? "fewer than two CPUs to pin two threads to"
                                          : "nothing was timed");
        return;
    }
    fprintf(f, "core-to-core round trip %.0f-%.0f ns during the timings (median %.0f, %ld "
               "probes)", num(rt, "min"), num(rt, "max"), num(rt, "median"), measured);
    if (far > 0)
        fprintf(f, ": the cores' distance changed (far, over twice the fastest, in %ld of %ld "
                   "probes); two-core rows timed while far are slower", far, measured);
    fprintf(f, " |\n");
}

static void md_header(FILE *f, const json_t *res, const char *signed_note)
{
    const json_t *s = json_object_get(res, "suite"), *p = json_object_get(res, "provenance");
    const json_t *dirty = json_object_get(p, "git_dirty");
    fprintf(f, "# parity verify: suite `%s`\n\n", str(s, "name"));
    fprintf(f, "**Verdict: %s** — %s.  \n", strcmp(str(res, "verdict"), "pass") == 0 ? "PASS" : "FAIL",
            str(res, "verdict_reason"));
    fprintf(f, "**Signature:** %s\n\n", signed_note);
    fprintf(f, "| | |\n|---|---|\n");
    fprintf(f, "| suite | `%s` (SHA-256 `%.16s…`) |\n", str(s, "path"), str(s, "sha256"));
    fprintf(f, "| commit | `%s`%s |\n", str(p, "git_commit"),
            json_is_true(dirty) ? " (dirty: uncommitted changes)" : json_is_false(dirty) ? "" : " (dirty: unknown)");
    fprintf(f, "| compiler | %s, %s, `%s` |\n", str(p, "compiler"), str(p, "build_type"), str(p, "c_flags"));
    fprintf(f, "| machine | %s, %ld cores, %s |\n", str(p, "cpu"), integer(p, "cores"), str(p, "os"));
    fprintf(f, "| MPI | %s (%s) |\n", str(p, "mpirun_version"), str(p, "mpi_library"));
    fprintf(f, "| MPFR | %s; `parity check`: %s |\n", str(p, "mpfr_version"), str(res, "mpfr_check"));
    fprintf(f, "| run | %s to %s (%.0f s) |\n", str(res, "started"), str(res, "finished"),
            num(res, "seconds"));
    char a[64], b[64];
    loadavg_text(a, sizeof a, json_object_get(p, "load_average_start"));
    loadavg_text(b, sizeof b, json_object_get(p, "load_average_end"));
    fprintf(f, "| load | load average (1, 5, 15 min) %s at the start, %s at the end; CPU time "
               "stolen by the hypervisor while timings ran: ", a, b);
    if (json_is_number(json_object_get(p, "steal_percent_timed")))
        fprintf(f, "%.2f%% |\n", num(p, "steal_percent_timed"));
    else fprintf(f, "not known |\n");
    md_round_trip(f, json_object_get(p, "core_round_trip_ns"));
    fprintf(f, "\n");
}

// The scaling model's rows (suite key `predict`), marked PREDICTED, and the
// model against what the case measured.
static void md_predicted(FILE *f, const json_t *pr)
{
    if (!pr) return;
    fprintf(f, "Scaling model (docs/scaling.md): rows marked **PREDICTED** are computed, "
               "not measured, and take no part in the verdict.");
    if (json_object_get(pr, "error")) {
        fprintf(f, " Not available: ");
        md_text(f, str(pr, "error"));
        fprintf(f, "\n\n");
        return;
    }
    const json_t *k = json_object_get(pr, "costs"), *cal = json_object_get(pr, "calibration");
    // Compute is read off the measured steps, linearly between them; the line
    // through them is only a summary (older results have no points).
    const json_t *pts = json_object_get(k, "compute_points");
    const int has_pts = json_array_size(pts) > 0;
    fprintf(f, " Costs measured here: compute, one serial step of b samples, ");
    if (has_pts) {
        size_t i;
        const json_t *pt;
        json_array_foreach(pts, i, pt)
            fprintf(f, "%st(%.0f) = %.1f us", i ? ", " : "",
                    json_number_value(json_array_get(pt, 0)),
                    json_number_value(json_array_get(pt, 1)) * 1e6);
        fprintf(f, ", read off linearly between these (the line through them: ");
    } else {
        fprintf(f, "as the line ");
    }
    fprintf(f, "t0 + b t_sample with t0 = %.1f us, t_sample = %.2f us%s", num(k, "t0_s") * 1e6,
            num(k, "t_sample_s") * 1e6, has_pts ? ")" : "");
    if (strcmp(str(cal, "to"), "none") != 0)
        fprintf(f, " (scaled by %.3f to the %s)", num(cal, "compute_scale"), str(cal, "to"));
    if (json_is_true(json_object_get(k, "comm_measured"))) {
        fprintf(f, "; network alpha = %.2f us, beta = %.3f ns/byte (2-rank ping-pong",
                num(k, "alpha_s") * 1e6, num(k, "beta_s_per_byte") * 1e9);
        const json_t *pb = json_object_get(k, "probe");
        if (json_is_object(pb)) {
            fprintf(f, "; medians of %ld of %ld launches, ", integer(pb, "used"),
                    integer(pb, "launches"));
            if (json_is_true(json_object_get(pb, "cores_near")))
                fprintf(f, "those at the cores' nearest placement");
            else fprintf(f, "the cores far or moving in every one: the communication "
                            "predicted is that placement's");
            const json_t *rt = json_object_get(pb, "core_round_trip_ns");
            if (json_array_size(rt) == 2)
                fprintf(f, ", %.0f-%.0f ns apart", json_number_value(json_array_get(rt, 0)),
                        json_number_value(json_array_get(rt, 1)));
        }
        fprintf(f, ").\n\n");
    } else {
        fprintf(f, "; network not measured (no MPI): communication left out.\n\n");
    }
    fprintf(f, "| trainer | mode | R | seconds | speedup (vs the model's R=1) | efficiency | |\n"
               "|---|---|--:|--:|--:|--:|---|\n");
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(pr, "rows"), i, row)
        fprintf(f, "| %s | %s | %ld | %.3f | %.2f | %.3f | **PREDICTED** |\n", str(row, "trainer"),
                str(row, "mode"), integer(row, "ranks"), num(row, "seconds"), num(row, "speedup"),
                num(row, "efficiency"));
    fprintf(f, "\n");
    if (json_array_size(json_object_get(pr, "check")) == 0) return;
    fprintf(f, "The model against this case's timed mpi configs:\n\n"
               "| mode | R | measured median s | predicted s | error |\n|---|--:|--:|--:|--:|\n");
    json_array_foreach(json_object_get(pr, "check"), i, row)
        fprintf(f, "| %s | %ld | %.3f | %.3f | %+.0f%% |\n", str(row, "mode"), integer(row, "ranks"),
                num(row, "measured"), num(row, "predicted"), 100 * num(row, "error"));
    fprintf(f, "\n");
}

// What an external case's rows are: its command, how each row is checked
// and timed, and its own timing baseline.
static void md_external(FILE *f, const json_t *st, const json_t *configs)
{
    fprintf(f, "External trainer `%s`: `", str(st, "external"));
    md_text(f, str(st, "command"));
    fprintf(f, "` at world");
    size_t i;
    json_t *cf;
    json_array_foreach(configs, i, cf) fprintf(f, "%s %ld", i ? "," : "", integer(cf, "ranks"));
    fprintf(f, " ({world}: the process count, the R column). Each world's row is checked in "
               "lockstep over the case's steps (`parity lockstep --external`: every step from "
               "the reference's state, every new weight, optimizer-state element and the loss "
               "held to the step's any-order bound, its update from its own gradient); rows "
               "that pass are timed as free runs of the command (one launch a run: warm-up "
               "steps, then the window, seconds from the trainer's own per-step log). **Timing "
               "baseline: its own world 1 row** (speedup = world 1's median / the row's), not "
               "`serial exact`.\n\n");
}

static void md_case(FILE *f, const json_t *cs, const char *plot_file, const char *plot_note)
{
    const json_t *st = json_object_get(cs, "settings"), *ref = json_object_get(cs, "reference");
    const json_t *ds = json_object_get(cs, "dataset");
    fprintf(f, "## Case `%s`\n\n", str(cs, "name"));
    char timing[80];
    if (integer(st, "repeats") > 0)
        snprintf(timing, sizeof timing, "timing: %ld timed round%s (below)", integer(st, "repeats"),
                 integer(st, "repeats") == 1 ? "" : "s");
    else snprintf(timing, sizeof timing, "correctness only (repeats = 0)");
    char extra[160] = "";
    if (integer(st, "upscale") > 0)
        snprintf(extra, sizeof extra, ", images upscaled to %ldx%ld", integer(st, "upscale"), integer(st, "upscale"));
    if (json_is_string(json_object_get(st, "optim")) && strcmp(str(st, "optim"), "sgd") != 0) {
        const size_t u = strlen(extra);
        snprintf(extra + u, sizeof extra - u, ", optimizer %s", str(st, "optim"));
    }
    fprintf(f, "%s (%ld training records%s), `%s` %s, %s, batch %ld%s, chunk %ld, %ld steps "
               "(%ld per epoch), lr %g, seed %ld; %s.%s%s%s\n\n",
            str(ds, "name"), integer(ds, "n_train"), extra, str(st, "model"), str(st, "act"), str(st, "dtype"),
            integer(st, "batch"), json_is_true(json_object_get(st, "batch_full")) ? " (full)" : "",
            integer(st, "chunk"), integer(st, "total_steps"),
            integer(st, "steps_per_epoch"), num(st, "lr"), integer(st, "seed"), timing, json_is_string(json_object_get(st, "fault")) ? " **Test-only fault injected into the configs: `" : "",
            json_is_string(json_object_get(st, "fault")) ? str(st, "fault") : "",
            json_is_string(json_object_get(st, "fault")) ? "`.**" : "");
    if (json_is_string(json_object_get(st, "external")))
        md_external(f, st, json_object_get(cs, "configs"));
    fprintf(f, "Reference (the correctness baseline, not timed): final loss %.6g, test accuracy "
               "%.4f, weights SHA-256 `%.16s…`.\n\n", num(ref, "final_loss"), num(ref, "test_accuracy"),
            str(ref, "weights_sha256"));
    fprintf(f, "| trainer | mode | T | R | cores | verdict | correctness | MPFR | runs | median s "
               "| min s | max s | CV | speedup [95%% CI] | efficiency |\n");
    fprintf(f, "|---|---|--:|--:|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    size_t i;
    json_t *cf;
    json_array_foreach(json_object_get(cs, "configs"), i, cf) {
        char corr[300], mp[64];
        correctness_cell(corr, sizeof corr, cf);
        mpfr_cell(mp, sizeof mp, cf);
        const json_t *t = json_object_get(cf, "timing");
        fprintf(f, "| %s | %s | %ld | %ld | %ld | %s | %s | %s |", str(cf, "trainer"), str(cf, "mode"),
                integer(cf, "threads"), integer(cf, "ranks"), integer(cf, "cores"),
                verdict_cell(str(cf, "verdict")), corr, mp);
        if (json_is_true(json_object_get(t, "timed"))) {
            fprintf(f, " %ld | %.3f | %.3f | %.3f |", integer(t, "runs"), num(t, "median"),
                    num(t, "min"), num(t, "max"));
            if (json_is_number(json_object_get(t, "cv")))
                fprintf(f, " %.1f%% |", 100 * num(t, "cv"));
            else fprintf(f, " - |");
            if (json_object_get(t, "speedup")) {
                char sp[96];
                speedup_cell(sp, sizeof sp, cf, t);
                if (json_is_true(json_object_get(t, "noisy"))) fprintf(f, " %s | - |\n", sp);
                else fprintf(f, " %s | %.2f |\n", sp, num(t, "efficiency"));
            } else {
                fprintf(f, " - | - |\n");
            }
        } else {
            const char *note = str(t, "note");
            const int over = json_is_true(json_object_get(cf, "oversubscribed"));
            fprintf(f, " %s | | | | | | |\n", over ? "correctness only (oversubscribed)"
                                              : strstr(note, "failed") ? "not timed" : note);
        }
    }
    fprintf(f, "\n");
    md_timing(f, cs);
    md_phases(f, cs);
    if (!json_object_get(cs, "timing_baseline") || json_is_null(json_object_get(cs, "timing_baseline")))
        fprintf(f, "No speedups: this case has no timed %s (the timing baseline).\n\n",
                json_is_string(json_object_get(st, "external")) ? "world 1 row"
                                                                : "`serial exact T=1 R=1` config");

    // Why rows failed, in full.
    int any = 0;
    json_array_foreach(json_object_get(cs, "configs"), i, cf) {
        if (strcmp(str(cf, "verdict"), "pass") == 0) continue;
        char l[128];
        label(l, sizeof l, cf);
        if (!any) fprintf(f, "Failures:\n\n");
        any = 1;
        fprintf(f, "- **%s**: %s", l, str(json_object_get(cf, "correctness"), "detail"));
        const char *mv = str(json_object_get(cf, "mpfr"), "verdict");
        if (strcmp(mv, "pass") != 0) fprintf(f, "; MPFR: %s", str(json_object_get(cf, "mpfr"), "detail"));
        const char *te = str(json_object_get(cf, "timing"), "error");
        if (te[0]) fprintf(f, "; timing run failed: %s", te);
        fprintf(f, "\n");
    }
    if (any) fprintf(f, "\n");

    md_predicted(f, json_object_get(cs, "predicted"));

    fprintf(f, "MPFR checks (`parity check`, 256 bits, on the weights entering the step):\n\n");
    fprintf(f, "| trainer | mode | T | R | step | weights | verdict | detail |\n"
               "|---|---|--:|--:|--:|---|---|---|\n");
    json_t *ck;
    json_array_foreach(json_object_get(cs, "checks"), i, ck) {
        char w[64];
        if (integer(ck, "step") == 0) snprintf(w, sizeof w, "-");
        else if (integer(ck, "step") <= 1 || !json_object_get(ck, "weights_step")) snprintf(w, sizeof w, "initial");
        else snprintf(w, sizeof w, "reference after step %ld", integer(ck, "weights_step"));
        const long R = json_object_get(ck, "ranks") ? integer(ck, "ranks") : 1;
        fprintf(f, "| %s | %s | %ld | %ld | %ld | %s | %s | ", str(ck, "trainer"), str(ck, "mode"),
                integer(ck, "threads"), R, integer(ck, "step"), w,
                strcmp(str(ck, "verdict"), "pass") == 0 ? "PASS" : strcmp(str(ck, "verdict"), "not run") == 0 ? "**NOT RUN**"
                : strcmp(str(ck, "verdict"), "not covered") == 0 ? "**NOT COVERED**" : "**FAIL**");
        md_text(f, str(ck, "detail"));
        fprintf(f, " |\n");
    }
    fprintf(f, "\n");
    if (plot_file[0]) fprintf(f, "![loss curves of case %s](%s)\n\n", str(cs, "name"), plot_file);
    else fprintf(f, "Loss curves: %s.\n\n", plot_note);
}

static void md_legend(FILE *f, long cores)
{
    fprintf(f,
        "## Legend\n\n"
        "- **Baselines.** The `reference` trainer (reference/, plain loops) is the *correctness* "
        "baseline: every config is compared with it. The `serial` trainer in exact mode (T=1, R=1) "
        "is the *timing* baseline: speedup = its median / the config's median.\n"
        "- **T, R, cores.** OpenMP threads per process, MPI ranks, cores used = T x R. "
        "Efficiency = speedup / cores.\n"
        "- **exact: bitwise.** Every step's loss (JSONL logs, 17 significant digits, read back "
        "bit for bit) and every final weight (.npz) have the reference's bits. A failure names the "
        "first step whose loss differs and the first differing weight (tensor[row,col]).\n"
        "- **fast: within bound.** `parity lockstep`: the trainer is re-synced to the reference's "
        "weights before each step and each weight after the step must satisfy "
        "|w_fast - w_ref| <= lr S (2 gamma_B + 4u (1 + gamma_B)(1 + u)) + 2u |w|, "
        "S = sum over the batch of |dz x| (recorded by the reference), gamma_B = B u / (1 - B u); "
        "the loss within (2 gamma_B + 3u) loss. *worst* = the largest |diff| / bound (<= 1 passes).\n"
        "- **MPFR.** `parity check` recomputes a step in MPFR at 256 bits from the weights entering "
        "it (the initial weights for step 1, the reference's after step S-1 otherwise) and checks "
        "every tensor of the trainer's step against its a priori bound (and exact mode bitwise "
        "against the reference). MPI trainers are checked on rank 0's view of the step, run "
        "under mpirun with the config's ranks.\n"
        "- **Timing.** Only configs that passed are timed, and a timing never decides a verdict. "
        "A calibration run of serial exact finds the steps of a window of about `window` seconds "
        "(1 unless the suite says otherwise); every timed run of the case trains a tenth of that "
        "as warm-up steps in process (not timed), then times the window: the training seconds "
        "`parity train --json` reports (no start-up, data loading or evaluation). Configs run "
        "round-robin, every config once a round, so drift on the machine falls on all alike; "
        "with adaptive rounds (`precision` in the suite) a row stops being timed once its "
        "interval is narrow enough, so **runs** differ between rows. median, min and max over "
        "the row's runs; **CV** = standard deviation / mean of the runs after dropping the "
        "fastest and the slowest (as MLPerf Training does; from %d runs on), shown as "
        "information. **correctness only**: threads x ranks exceeds this machine's %ld cores "
        "(oversubscribed), so times would mean nothing.\n"
        "- **Speedup [95%% CI].** the median, over the rounds both ran, of serial exact's run / "
        "the row's run in the same round, with a 95%% confidence interval: a percentile "
        "bootstrap over those rounds "
        "(%d resamples, splitmix64 seed %llu), reproducible from the raw runs in results.json. "
        "**n.s.**: the interval holds 1, so the row is not shown faster or slower than serial "
        "exact. **far R/N** (or **near R/N**): the cores' distance changed during the case (a "
        "core-to-core probe before or after a run over twice the case's fastest), and this row "
        "on two cores or more uses only its R of N rounds that met the placement most of its "
        "runs met: the two placements are two different machines for a two-core run. **NOISY [lo, hi]**: "
        "the interval is wider than +-%.0f%% of the speedup, too wide to quote a number. A "
        "steady competitor (another job on a core) slows every run alike and leaves the "
        "interval narrow: the load average and the other runnable tasks of each case's Timing "
        "line show it.\n"
        "- **Verdict.** PASS: correctness passed and the MPFR check of its trainer did not fail. "
        "The table is signed (Ed25519, minisign format, `results.json.minisig`) only when every "
        "config and every MPFR check passed; `parity table verify DIR` checks the signature, the "
        "verdicts in results.json and the SHA-256 of this table, table.csv and the plots.\n",
        VF_TRIM_MIN_RUNS, cores, VF_BOOT_RESAMPLES, (unsigned long long)VF_BOOT_SEED,
        100 * VF_NOISY_HALF_WIDTH);
}

// ---- table.csv -------------------------------------------------------------------------

static void csv_field(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, const json_t *o, const char *key, const char *fmt)
{
    const json_t *v = json_object_get(o, key);
    fputc(',', f);
    if (json_is_number(v)) fprintf(f, fmt, json_number_value(v));
}

static void write_csv(FILE *f, const json_t *res)
{
    fprintf(f, "case,trainer,mode,threads,ranks,cores,oversubscribed,verdict,correctness,"
               "worst_ratio,mpfr,timed,median_s,min_s,max_s,speedup,efficiency,speedup_ci95_lo,"
               "speedup_ci95_hi,cv,noisy,runs,window_steps,warmup_steps,repeats,detail");
    // Then where the time goes (md_phases): each phase's median, ms per step.
    for (int k = 0; k < VF_N_PHASES; k++) fprintf(f, ",%s_ms", vf_phase_name(k));
    fprintf(f, "\n");
    size_t i, j;
    json_t *cs, *cf;
    json_array_foreach(json_object_get(res, "cases"), i, cs) {
        const long steps = integer(json_object_get(cs, "timing"), "steps");
        json_array_foreach(json_object_get(cs, "configs"), j, cf) {
            const json_t *c = json_object_get(cf, "correctness"), *t = json_object_get(cf, "timing");
            csv_field(f, str(cs, "name"));
            fprintf(f, ",%s,%s,%ld,%ld,%ld,%s,%s,%s", str(cf, "trainer"), str(cf, "mode"),
                    integer(cf, "threads"), integer(cf, "ranks"), integer(cf, "cores"),
                    json_is_true(json_object_get(cf, "oversubscribed")) ? "yes" : "no",
                    str(cf, "verdict"), str(c, "method"));
            csv_num(f, c, "worst_ratio", "%.6g");
            fprintf(f, ",%s,%s", str(json_object_get(cf, "mpfr"), "verdict"),
                    json_is_true(json_object_get(t, "timed")) ? "yes" : "no");
            csv_num(f, t, "median", "%.6f");
            csv_num(f, t, "min", "%.6f");
            csv_num(f, t, "max", "%.6f");
            csv_num(f, t, "speedup", "%.4f");
            csv_num(f, t, "efficiency", "%.4f");
            const json_t *ci = json_object_get(t, "speedup_ci95");
            for (size_t k = 0; k < 2; k++) {
                fputc(',', f);
                if (json_array_size(ci) == 2)
                    fprintf(f, "%.4f", json_number_value(json_array_get(ci, k)));
            }
            csv_num(f, t, "cv", "%.4f");
            fprintf(f, ",%s", !json_is_boolean(json_object_get(t, "noisy")) ? ""
                              : json_is_true(json_object_get(t, "noisy")) ? "yes" : "no");
            fputc(',', f);
            if (json_object_get(t, "runs")) fprintf(f, "%ld", integer(t, "runs"));
            fputc(',', f);
            if (json_object_get(t, "steps")) fprintf(f, "%ld", integer(t, "steps"));
            fputc(',', f);
            if (json_object_get(t, "warmup_steps")) fprintf(f, "%ld", integer(t, "warmup_steps"));
            fprintf(f, ",%ld,", integer(json_object_get(cs, "settings"), "repeats"));
            csv_field(f, str(c, "detail"));
            const json_t *med = json_object_get(t, "phase_median_seconds");
            for (int k = 0; k < VF_N_PHASES; k++) {
                const json_t *v = json_object_get(med, vf_phase_name(k));
                fputc(',', f);
                if (json_is_number(v) && steps > 0)
                    fprintf(f, "%.6f", 1e3 * json_number_value(v) / (double)steps);
            }
            fprintf(f, "\n");
        }
    }
}

// ---- results.json ----------------------------------------------------------------------

par_status vf_results_save(const json_t *results, const char *dir)
{
    char *s = json_dumps(results, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "cannot serialise results.json");
    const size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (t) {
        s = t;
        s[n] = '\n';
        s[n + 1] = '\0';
    }
    par_status st = write_file(dir, "results.json", s, strlen(s));
    free(s);
    return st;
}

static par_status add_file_hash(json_t *files, const char *dir, const char *name)
{
    char path[1200], sha[65];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    PAR_TRY(par_sha256_file(sha, path));
    json_object_set_new(files, name, json_string(sha));
    return PAR_OK;
}

par_status vf_report_write(json_t *res, const char *dir, const char *signed_note)
{
    json_t *files = json_object();
    json_object_set_new(res, "files", files);
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(res, "cases"), i, cs) {
        char file[200];
        if (vf_plot_case(cs, dir, file, sizeof file) == PAR_OK) {
            json_object_set_new(cs, "plot", json_string(file));
            PAR_TRY(add_file_hash(files, dir, file));
        } else {
            const char *m = strstr(par_last_error(), "plot skipped");
            json_object_set_new(cs, "plot_note", json_string(m ? m : par_last_error()));
        }
    }

    char *md = NULL, *csv = NULL;
    size_t md_n = 0, csv_n = 0;
    FILE *f = open_memstream(&md, &md_n);
    PAR_FAIL_IF(!f, PAR_ERR_ALLOC, "out of memory");
    md_header(f, res, signed_note);
    json_array_foreach(json_object_get(res, "cases"), i, cs)
        md_case(f, cs, str(cs, "plot"), str(cs, "plot_note"));
    md_legend(f, integer(res, "cores_for_timing"));
    fclose(f);
    f = open_memstream(&csv, &csv_n);
    if (!f) {
        free(md);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    write_csv(f, res);
    fclose(f);
    par_status st = write_file(dir, "table.md", md, md_n);
    if (st == PAR_OK) st = write_file(dir, "table.csv", csv, csv_n);
    free(md);
    free(csv);
    if (st == PAR_OK) st = add_file_hash(files, dir, "table.md");
    if (st == PAR_OK) st = add_file_hash(files, dir, "table.csv");
    if (st == PAR_OK) st = vf_results_save(res, dir);
    return st;
}
