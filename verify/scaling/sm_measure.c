// `parity model`'s figures put together (sm_measure.h): the calibration
// (compute, network, a real run), the validation rows (measured runs on R
// ranks against the model with the costs taken again just before them), and
// the predicted strong and weak scaling rows.
#define _POSIX_C_SOURCE 200809L
#include "sm_measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "par_sort.h"

// The serial steps at SM_N_POINTS batch sizes; the costs they give.
static par_status calibrate_compute(sm_calibration *cal, const sm_setup *s, long online)
{
    static const size_t bs[SM_N_POINTS] = {8, 16, 32, 64, 128, 256};
    enum { NB = SM_N_POINTS };
    sm_costs *c = &cal->c;
    double tb[NB], upd[NB] = {0}, pan[NB] = {0}, sx = 0, sy = 0, sxx = 0, sxy = 0;
    par_status st = PAR_OK;
    for (int k = 0; k < NB && st == PAR_OK; k++) {
        st = sm_time_steps(s, bs[k], 40, 1, &tb[k], &upd[k], &pan[k]);
        sx += (double)bs[k], sy += tb[k], sxx += (double)bs[k] * (double)bs[k];
        sxy += (double)bs[k] * tb[k];
    }
    const int cores = cal->cores;
    const int k_upd = cores < 2 || online < 2 ? 0 : cores < online ? cores : (int)online;
    PAR_TRY(st);
    // t(b) = t0 + b t_sample, least squares over the points, for the summary
    // and t0's update; the model reads the compute of b samples off the points.
    c->t_sample = (NB * sxy - sx * sy) / (NB * sxx - sx * sx);
    c->t0 = (sy - c->t_sample * sx) / NB;
    if (c->t0 < 0) c->t0 = 0;
    c->t_update = upd[3] < c->t0 ? upd[3] : c->t0;   // at b = 64; part of t0
    c->t_panel = pan[3];
    c->t_update_shared = sm_shared_update(s, k_upd);
    c->update_shared_ranks = k_upd;
    cal->shared_threads = k_upd;
    c->n_points = NB;
    for (int k = 0; k < NB; k++) c->point_b[k] = (double)bs[k], c->point_t[k] = tb[k];
    c->n_params = s->m->n_params;
    c->elem_bytes = par_dtype_size(s->dt);
    c->chunk = (size_t)s->chunk;
    c->seg_params = PAR_RING_SEG_PARAMS;
    par_ring_split(s->m, (size_t)s->batch, &c->chain_params, &c->gather_values);
    return PAR_OK;
}

par_status sm_calibrate(sm_calibration *cal, const sm_setup *s)
{
    memset(cal, 0, sizeof *cal);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cal->cores = s->cores > 0 ? s->cores : online > 0 ? (int)online : 1;
    // 1. Compute: serial steps at b = 8 .. 256 samples.
    PAR_TRY(calibrate_compute(cal, s, online));
    // 2. Communication: alpha, beta and the allreduce from the probe on 2 ranks.
    cal->have_comm = sm_probe_network(s, 2, &cal->c, &cal->probe) == 0;
    // 3. A real run: what a step costs outside the engine on every rank
    // (t_run: the batch, hooks, bookkeeping), and how much ranks that share
    // this machine's cores slow each other down (memory bandwidth, caches):
    // the engine's seconds of `cores` serial runs at once against one alone.
    double out1 = 0;
    cal->have_run = sm_run_costs(s, cal->cores, &cal->run_engine_s, &out1,
                                 &cal->c.contention) == 0;
    cal->c.t_run = cal->have_run ? out1 : 0;
    return PAR_OK;
}

// The costs of R's rows, taken again just before its runs: alpha, beta and
// the allreduce on R ranks (on one host with more ranks than cores a ring
// step costs more than on two ranks, and the network of a shared machine
// drifts); compute as the machine runs it now (a serial run scales t0,
// t_update, t_panel and t_sample by its engine time over the calibration
// run's, and gives t_run and the contention anew: a shared machine drifts,
// and a row would otherwise test the drift, not the model).
static void costs_now(sm_validation_row *row, const sm_calibration *cal, const sm_setup *s, int R)
{
    sm_costs here = cal->c;
    row->probed = cal->have_comm && sm_probe_network(s, R, &here, &row->probe) == 0;
    if (!row->probed) here = cal->c;
    double eng_now, out_now, cont_now;
    row->compute_scale = 1;
    if (cal->have_run && cal->run_engine_s > 0 &&
        sm_run_costs(s, cal->cores, &eng_now, &out_now, &cont_now) == 0) {
        row->compute_scale = eng_now / cal->run_engine_s;
        sm_scale_compute(&here, row->compute_scale);
        here.t_run = out_now;
        here.contention = cont_now;
    }
    // Without a launcher the runs are on this host, where the weights are
    // shared, and its cores are shared by the ranks (with one: --cores).
    const int local = s->launcher == NULL;
    here.one_host = local;
    here.cores = local || s->cores > 0 ? cal->cores : 0;
    // The shared update as the cores are placed now.
    if (local && cal->shared_threads > 0)
        here.t_update_shared = sm_shared_update(s, cal->shared_threads);
    // More ranks than cores here: what taking turns on a core costs.
    here.turns = local && R > cal->cores ? sm_turns_cost(s) : 1;
    row->here = here;
}

// The design's row on R ranks: the median of 3 runs (one run can meet a slow
// spell of the machine: a neighbour, or a VM's cores placed far apart);
// 0 when a run failed.
static int measure(sm_validation_row *row, const sm_setup *s, sm_design des, int R)
{
    par_argv a = {0};
    sm_launch_argv(&a, s->launcher, s->exe, R);
    sm_train_argv(&a, s, "mpi", des == SM_MPI_FAST ? "fast" : "exact");
    sm_launch_end(&a, s->launcher, R);
    const char *const key[] = {"seconds"};
    double secs[3];
    int ran = 0;
    while (ran < 3 && sm_run_json(&a, 1, key, &secs[ran], 0) == 0) ran++;
    par_argv_free(&a);
    if (ran < 3) return 0;
    qsort(secs, 3, sizeof *secs, par_cmp_double);
    // The distance after the runs too: a row whose cores moved meanwhile
    // measured two machines, and says so.
    row->round_trip_after_ns = sm_core_round_trip_ns();
    const double lo = fmin(row->round_trip_ns, row->round_trip_after_ns);
    const double hi = fmax(row->round_trip_ns, row->round_trip_after_ns);
    row->cores_moved = isfinite(lo) && hi > 2 * lo;
    row->design = des;
    row->ranks = R;
    row->batch = (size_t)s->batch;
    row->measured_s = secs[1] / s->steps;
    row->predicted_s = sm_step_seconds(&row->here, des, R, row->batch);
    return 1;
}

par_status sm_validate(sm_validation_row **rows, int *n_rows, const sm_calibration *cal,
                       const sm_setup *s, const int *ranks, int n_ranks)
{
    *n_rows = 0;
    *rows = calloc((size_t)(n_ranks > 0 ? 2 * n_ranks : 1), sizeof **rows);
    PAR_FAIL_IF(!*rows, PAR_ERR_ALLOC, "out of memory");
    for (int i = 0; i < n_ranks; i++) {
        const int R = ranks[i];
        if (R < 1) continue;
        sm_validation_row row = {0};
        costs_now(&row, cal, s, R);
        // How far apart this machine's first two cores are now (a VM's host
        // may place its virtual CPUs on cores that share no cache: two-core
        // runs are then slower, and a row says so).
        row.round_trip_ns = sm_core_round_trip_ns();
        for (int d = 0; d < 2; d++) {
            sm_validation_row *r = &(*rows)[*n_rows];
            *r = row;
            *n_rows += measure(r, s, d ? SM_MPI_FAST : SM_MPI_EXACT, R);
        }
    }
    return PAR_OK;
}

int sm_n_predictions(int max_ranks)
{
    int n_ranks = 0;
    for (int R = 1; R <= max_ranks; R *= 2) n_ranks++;
    return 2 * 8 * n_ranks * 2;   // designs x batches 64 .. 8192 x ranks x (strong, weak)
}

int sm_predictions(sm_prediction *rows, int cap, const sm_costs *c, const par_model *m,
                   size_t n_train, size_t B, int max_ranks)
{
    int n = 0;
    for (int d = 0; d < 2; d++) {
        const sm_design des = d ? SM_MPI_FAST : SM_MPI_EXACT;
        for (size_t Bg = 64; Bg <= 8192; Bg *= 2) {
            sm_costs cg = *c;   // which layers gather depends on the batch
            par_ring_split(m, Bg, &cg.chain_params, &cg.gather_values);
            const double t1 = sm_step_seconds(&cg, des, 1, Bg);
            for (int R = 1; R <= max_ranks && n + 2 <= cap; R *= 2) {
                const double steps = ceil((double)n_train / (double)Bg);
                const double tR = sm_step_seconds(&cg, des, R, Bg);
                rows[n++] = (sm_prediction){0, des, R, Bg, steps * tR, t1 / tR, t1 / tR / R};
                // weak: B samples per rank, against one rank's epoch at batch B
                const size_t Bw = B * (size_t)R;
                sm_costs cw = *c;
                par_ring_split(m, Bw, &cw.chain_params, &cw.gather_values);
                const double tw = sm_step_seconds(&cw, des, R, Bw);
                const double steps_w = ceil((double)n_train / (double)Bw);
                const double epoch1 =
                    ceil((double)n_train / (double)B) * sm_step_seconds(c, des, 1, B);
                const double speedup = epoch1 / (steps_w * tw);
                rows[n++] = (sm_prediction){1, des, R, Bw, steps_w * tw, speedup, speedup / R};
            }
        }
    }
    return n;
}
