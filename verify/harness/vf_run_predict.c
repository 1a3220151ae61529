// Predicted rows of a case (suite key `predict`, vf_run.h): the scaling
// model of `parity model` (verify/scaling/sm_model.h; docs/scaling.md) with
// costs measured on this machine by `parity model --json`, for the mpi
// trainer in exact and fast mode at the listed rank counts. Each timed mpi
// T=1 config of the case is also predicted and set against its measured
// median: the model's error, where it can be checked. Predictions never
// enter a verdict; table.md marks them PREDICTED.
#define _POSIX_C_SOURCE 200809L
#include "vf_run.h"

#include <string.h>

#include "par_trainer.h"
#include "sm_model.h"

// Seconds of the training steps a timed run of the case times on P ranks
// (its window: steps K + 1 to K + W, or the case's N steps when it was not
// timed): full batches, except the last batch of each epoch, which holds
// what is left of n_train.
static double run_seconds(const sm_costs *k, sm_design d, int P, const vf_case_run *cr, size_t B)
{
    const long first = cr->time_steps > 0 ? cr->time_warmup : 0;
    const long n = cr->time_steps > 0 ? cr->time_steps : cr->N;
    // 0-based steps s in [first, first + n) that end an epoch: (s + 1) % per_epoch == 0
    const long n_last = (first + n) / cr->per_epoch - first / cr->per_epoch;
    const size_t last_B = cr->n_train - (size_t)(cr->per_epoch - 1) * B;
    return (double)(n - n_last) * sm_step_seconds(k, d, P, B) +
           (double)n_last * sm_step_seconds(k, d, P, last_B);
}

static double get_num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

par_status vf_predict_case(vf_runner *r, vf_case_run *cr, json_t *cres)
{
    const vf_case *c = cr->c;
    if (c->n_predict == 0) return PAR_OK;
    vf_note(r, "scaling model: measuring compute and network costs");
    char out[1200], err[1200];
    vf_fmt(out, sizeof out, "%s/model.json", cr->dir);
    vf_fmt(err, sizeof err, "%s/model.err", cr->dir);
    par_argv b = {0};
    par_argv_add(&b, "parity");
    par_argv_add(&b, "model");
    vf_setting_flags(&b, c);
    par_argv_add(&b, "--validate=");     // no runs of its own: the case's timings check it
    par_argv_opt(&b, "--max-ranks", "1");
    par_argv_add(&b, "--json");
    int code;
    double wall;
    json_t *mj = NULL;
    par_status st = vf_run_parity(r, &b, out, err, 0, &code, &wall, &mj);
    par_argv_free(&b);
    if (st != PAR_OK) return st;

    json_t *pr = json_object();
    json_object_set_new(cres, "predicted", pr);
    if (code != 0 || !mj) {
        char why[600];
        vf_first_line(why, sizeof why, err);
        json_object_set_new(pr, "error", json_string(why[0] ? why : "parity model failed"));
        json_decref(mj);
        return PAR_OK;
    }
    const size_t B = (size_t)c->batch;
    sm_costs k = {
        .t0 = get_num(mj, "t0_s"),
        .t_update = get_num(mj, "t_update_s"),
        .t_panel = get_num(mj, "t_panel_s"),
        .t_update_shared = get_num(mj, "t_update_shared_s"),
        .update_shared_ranks = (int)json_integer_value(json_object_get(mj, "update_shared_ranks")),
        .t_sample = get_num(mj, "t_sample_s"),
        .alpha = get_num(mj, "alpha_s"),
        .beta = get_num(mj, "beta_s_per_byte"),
        .t_allreduce =
            json_is_number(json_object_get(mj, "allreduce_s")) ? get_num(mj, "allreduce_s") : 0,
        .allreduce_ranks = 2,   // parity model's probe runs on 2 ranks
        .n_params = (size_t)json_integer_value(json_object_get(mj, "n_params")),
        .elem_bytes = strcmp(c->dtype, "f64") == 0 ? 8 : 4,
        .chunk = (size_t)c->chunk,
        .seg_params = PAR_RING_SEG_PARAMS,
        .chain_params = (size_t)json_integer_value(json_object_get(mj, "chain_params")),
        .gather_values =
            (size_t)json_integer_value(json_object_get(mj, "gather_values_per_sample")),
        .t_run = get_num(mj, "t_run_s"),
        .contention = json_is_number(json_object_get(mj, "contention")) ? get_num(mj, "contention") : 1,
    };
    // The measured compute points, which the model reads compute off.
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(mj, "compute_points"), i, e) {
        if (k.n_points == SM_MAX_POINTS) break;
        k.point_b[k.n_points] = get_num(e, "batch");
        k.point_t[k.n_points++] = get_num(e, "step_s");
    }
    const int cores = (int)json_integer_value(json_object_get(mj, "cores"));
    // Calibration: the fit times the engine's steps alone; a run also
    // gathers batches and runs hooks. Scale compute so that one rank takes
    // the case's measured serial exact median (when it was timed).
    double scale = 1;
    json_array_foreach(json_object_get(cres, "configs"), i, e) {
        const json_t *t = json_object_get(e, "timing");
        if (strcmp(json_string_value(json_object_get(e, "trainer")), "serial") == 0 &&
            strcmp(json_string_value(json_object_get(e, "mode")), "exact") == 0 &&
            json_is_true(json_object_get(t, "timed"))) {
            const double model1 = run_seconds(&k, SM_MPI_EXACT, 1, cr, B);
            if (model1 > 0) scale = get_num(t, "median") / model1;
        }
    }
    sm_scale_compute(&k, scale);
    k.t_run *= scale;
    json_object_set_new(pr, "calibration",
                        json_pack("{s:o, s:s}", "compute_scale", vf_jnum(scale), "to",
                                  scale != 1 ? "serial exact T=1 R=1 median" : "none"));
    json_t *probe = json_object_get(mj, "probe");
    json_object_set_new(pr, "costs", json_pack("{s:o, s:o, s:o, s:o, s:O, s:O}", "t0_s",
                                               vf_jnum(k.t0), "t_sample_s", vf_jnum(k.t_sample),
                                               "alpha_s", vf_jnum(k.alpha), "beta_s_per_byte",
                                               vf_jnum(k.beta), "comm_measured",
                                               json_object_get(mj, "comm_measured"), "probe",
                                               probe ? probe : json_null()));
    // The points as the predictions used them (scaled), for the report.
    json_t *pts = json_array();
    for (int j = 0; j < k.n_points; j++)
        json_array_append_new(pts,
                              json_pack("[o, o]", vf_jnum(k.point_b[j]), vf_jnum(k.point_t[j])));
    json_object_set_new(json_object_get(pr, "costs"), "compute_points", pts);
    json_decref(mj);

    json_t *rows = json_array();
    json_object_set_new(pr, "rows", rows);
    for (int d = 0; d < 2; d++) {
        const sm_design des = d ? SM_MPI_FAST : SM_MPI_EXACT;
        const double t1 = run_seconds(&k, des, 1, cr, B);
        for (int p = 0; p < c->n_predict; p++) {
            const int R = c->predict[p];
            const double tR = run_seconds(&k, des, R, cr, B);
            json_array_append_new(rows, json_pack("{s:s, s:s, s:i, s:o, s:o, s:o}", "trainer",
                                                  "mpi", "mode", d ? "fast" : "exact", "ranks", R,
                                                  "seconds", vf_jnum(tR), "speedup",
                                                  vf_jnum(t1 / tR), "efficiency",
                                                  vf_jnum(t1 / tR / R)));
        }
    }

    // The model against what this case measured.
    json_t *check = json_array();
    json_object_set_new(pr, "check", check);
    json_array_foreach(json_object_get(cres, "configs"), i, e) {
        const json_t *t = json_object_get(e, "timing");
        if (strcmp(json_string_value(json_object_get(e, "trainer")), "mpi") != 0 ||
            !json_is_true(json_object_get(t, "timed")))
            continue;
        const int fast = strcmp(json_string_value(json_object_get(e, "mode")), "fast") == 0;
        const int R = (int)json_integer_value(json_object_get(e, "ranks"));
        const double meas = get_num(t, "median");
        sm_costs here = k;   // measured on this one host: shared weights, shared cores
        here.one_host = 1;
        here.cores = cores;
        const double pred = run_seconds(&here, fast ? SM_MPI_FAST : SM_MPI_EXACT, R, cr, B);
        json_array_append_new(check, json_pack("{s:s, s:i, s:o, s:o, s:o}", "mode",
                                               fast ? "fast" : "exact", "ranks", R, "measured",
                                               vf_jnum(meas), "predicted", vf_jnum(pred), "error",
                                               vf_jnum((pred - meas) / meas)));
    }
    return PAR_OK;
}
