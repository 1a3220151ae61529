// `parity model`: the scaling model. Parses the flags, has verify/scaling
// measure (sm_measure.h: compute per step, the network between MPI ranks, a
// real run's cost outside the engine, the validation runs at --validate's
// rank counts, through --launcher for other hosts) and prints the costs, the
// validation and the predictions for R = 1 .. 1024 ranks and batches 64 ..
// 8192 (strong and weak scaling, exact and fast), marked PREDICTED, as text
// or JSON. `parity model --probe-comm` (under mpirun) prints the network's
// figures for the probe. Tests: tests/cli/test_check_cli.sh, tests/verify/test_scaling.c.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_mpi_launch.h"
#include "sm_measure.h"
#include "sm_model.h"

typedef struct model_opts {
    const char *dataset, *model, *act, *dtype, *launcher, *validate, *optim;
    int batch, chunk, steps, max_ranks, json, probe, probe_ranks, help, upscale, cores;
    double momentum, beta1, beta2, eps;   // NAN: not given (the defaults apply)
} model_opts;

enum { N_MODEL_FLAGS = 22, MAX_VALIDATE = 64 };

static void flag_table(cli_opt *t, model_opts *o)
{
    const cli_opt f[N_MODEL_FLAGS] = {
        {"--dataset", CLI_STR, &o->dataset, "NAME|DIR  dataset (fashion-mnist)"},
        {"--model", CLI_STR, &o->model, "SPEC      model (mlp:784-256-128-10)"},
        {"--act", CLI_STR, &o->act, "A         hidden activation (relu)"},
        {"--dtype", CLI_STR, &o->dtype, "f32|f64   (f32)"},
        {"--upscale", CLI_INT, &o->upscale, "S         resample the images to S x S, as parity train does"},
        {"--optim", CLI_STR, &o->optim, "NAME      sgd, momentum, nesterov or adam: its update is timed (sgd)"},
        {"--momentum", CLI_DOUBLE, &o->momentum, "MU        momentum and nesterov (0.9)"},
        {"--beta1", CLI_DOUBLE, &o->beta1, "B1        adam (0.9)"},
        {"--beta2", CLI_DOUBLE, &o->beta2, "B2        adam (0.999)"},
        {"--eps", CLI_DOUBLE, &o->eps, "EPS       adam (1e-8)"},
        {"--batch", CLI_INT, &o->batch, "B         batch of the validation runs and weak scaling (64)"},
        {"--chunk", CLI_INT, &o->chunk, "C         chunk (8)"},
        {"--steps", CLI_INT, &o->steps, "K         steps of each validation run (200)"},
        {"--max-ranks", CLI_INT, &o->max_ranks, "R         largest predicted rank count (1024)"},
        {"--validate", CLI_STR, &o->validate, "LIST      rank counts measured against the model (2,3; '' for none)"},
        {"--launcher", CLI_STR, &o->launcher, "CMD       run MPI jobs as CMD (its words, no shell) with {R} = ranks (default: --ranks)"},
        {"--cores", CLI_INT, &o->cores, "N         cores the validation runs' ranks share (this machine's; with --launcher: a core per rank unless given)"},
        {"--json", CLI_FLAG, &o->json, "          JSON on stdout"},
        {"--probe-comm", CLI_FLAG, &o->probe, "          (internal) under mpirun: prints alpha, beta and an allreduce's seconds"},
        {"--ranks", CLI_INT, &o->probe_ranks, "R         (with --probe-comm) ranks to launch (2)"},
        {"--help", CLI_FLAG, &o->help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    memcpy(t, f, sizeof f);
}

// --probe-comm under mpirun: rank 0 prints {"ranks", "alpha": s, "beta":
// s/byte, "allreduce": s}.
static int probe_comm(size_t n_values, par_dtype dt)
{
#ifdef PARITY_HAVE_MPI
    int rank, size;
    if (cli_mpi_start(&rank, &size) != PAR_OK) return cli_fail("model", PAR_ERR_MPI, NULL);
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "parity model --probe-comm: needs 2 ranks\n");
        return cli_mpi_finish(EXIT_USAGE);
    }
    sm_comm_figures f;
    const par_status st = sm_probe_comm(&f, n_values, dt);
    if (st != PAR_OK) return cli_mpi_finish(cli_fail("model", st, NULL));
    if (rank == 0)
        printf("{\"ranks\": %d, \"alpha\": %.9g, \"beta\": %.9g, \"allreduce\": %.9g}\n", f.ranks,
               f.alpha, f.beta, f.allreduce_s);
    return cli_mpi_finish(EXIT_OK);
#else
    (void)n_values, (void)dt;
    fprintf(stderr, "parity model --probe-comm: parity was built without MPI\n");
    return EXIT_RUNTIME;
#endif
}

// {"launches", "used", "cores_near", "core_round_trip_ns": [min, max] or null}
static json_t *probe_json(const sm_probe_info *pc)
{
    json_t *rt = isfinite(pc->min_ns) ? json_pack("[f, f]", pc->min_ns, pc->max_ns) : json_null();
    return json_pack("{s:i, s:i, s:b, s:o}", "launches", pc->launches, "used", pc->used,
                     "cores_near", pc->near, "core_round_trip_ns", rt);
}

static json_t *jreal_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *validation_json(const sm_validation_row *rows, int n)
{
    json_t *val = json_array();
    for (int i = 0; i < n; i++) {
        const sm_validation_row *v = &rows[i];
        const double meas = v->measured_s, pred = v->predicted_s;
        json_t *row = json_pack("{s:s, s:i, s:I, s:f, s:f, s:f, s:f, s:f}", "design",
                                sm_design_name(v->design), "ranks", v->ranks, "batch",
                                (json_int_t)v->batch, "measured_step_s", meas, "predicted_step_s",
                                pred, "error", (pred - meas) / meas, "alpha", v->here.alpha,
                                "beta", v->here.beta);
        json_object_set_new(row, "allreduce_s", json_real(v->here.t_allreduce));
        json_object_set_new(row, "probe", v->probed ? probe_json(&v->probe) : json_null());
        json_object_set_new(row, "compute_scale", json_real(v->compute_scale));
        json_object_set_new(row, "contention", json_real(v->here.contention));
        json_object_set_new(row, "turns", json_real(v->here.turns));
        json_object_set_new(row, "t_update_shared_s", json_real(v->here.t_update_shared));
        json_object_set_new(row, "core_round_trip_ns", jreal_or_null(v->round_trip_ns));
        json_object_set_new(row, "core_round_trip_after_ns",
                            jreal_or_null(v->round_trip_after_ns));
        json_object_set_new(row, "cores_moved", json_boolean(v->cores_moved));
        json_array_append_new(val, row);
    }
    return val;
}

static json_t *predictions_json(const sm_prediction *p, int n)
{
    json_t *pred = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(pred, json_pack("{s:s, s:s, s:i, s:I, s:f, s:f, s:f}", "scaling",
                                              p[i].weak ? "weak" : "strong", "design",
                                              sm_design_name(p[i].design), "ranks", p[i].ranks,
                                              "batch", (json_int_t)p[i].batch, "epoch_s",
                                              p[i].epoch_s, "speedup", p[i].speedup,
                                              "efficiency", p[i].efficiency));
    return pred;
}

typedef struct model_out {   // what cmd_model prints
    const par_model *m;
    const sm_calibration *cal;
    const sm_validation_row *rows;
    int n_rows;
    const sm_prediction *pred;
    int n_pred;
} model_out;

static void print_json(const model_out *r)
{
    const sm_costs *c = &r->cal->c;
    json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:o, s:o}",
                          "model", r->m->spec, "n_params", (json_int_t)r->m->n_params,
                          "chain_params", (json_int_t)c->chain_params,
                          "gather_values_per_sample", (json_int_t)c->gather_values, "t0_s", c->t0,
                          "t_update_s", c->t_update, "t_panel_s", c->t_panel, "t_sample_s",
                          c->t_sample, "alpha_s", c->alpha, "beta_s_per_byte", c->beta,
                          "comm_measured", r->cal->have_comm, "validation",
                          validation_json(r->rows, r->n_rows), "predicted",
                          predictions_json(r->pred, r->n_pred));
    json_t *pts = json_array();
    for (int k = 0; k < c->n_points; k++)
        json_array_append_new(pts, json_pack("{s:f, s:f}", "batch", c->point_b[k], "step_s",
                                             c->point_t[k]));
    json_object_set_new(j, "compute_points", pts);
    json_object_set_new(j, "t_update_shared_s", json_real(c->t_update_shared));
    json_object_set_new(j, "update_shared_ranks", json_integer(c->update_shared_ranks));
    json_object_set_new(j, "allreduce_s", json_real(c->t_allreduce));
    json_object_set_new(j, "probe", r->cal->have_comm ? probe_json(&r->cal->probe) : json_null());
    json_object_set_new(j, "t_run_s", json_real(c->t_run));
    json_object_set_new(j, "contention", json_real(c->contention));
    json_object_set_new(j, "cores", json_integer(r->cal->cores));
    char *s = json_dumps(j, JSON_REAL_PRECISION(6));
    printf("%s\n", s);
    free(s);
    json_decref(j);
}

// The measured costs, as text.
static void print_costs(const model_out *r, par_dtype dt, int batch)
{
    const sm_costs *c = &r->cal->c;
    const int cores = r->cal->cores;
    printf("scaling model of %s (%zu parameters, %s, chunk %zu)\n", r->m->spec, r->m->n_params,
           par_dtype_name(dt), c->chunk);
    printf("  compute  measured at b =");
    for (int k = 0; k < c->n_points; k++)
        printf(" %.0f%s", c->point_b[k], k + 1 < c->n_points ? "," : ":");
    for (int k = 0; k < c->n_points; k++)
        printf(" %.3f%s", c->point_t[k] * 1e3, k + 1 < c->n_points ? "," : " ms");
    printf(" (read off between them);\n           as t(b) = t0 + b t_sample: t0 = %.1f us, "
           "t_sample = %.2f us\n", c->t0 * 1e6, c->t_sample * 1e6);
    printf("           of t0: the update %.1f us (mpi exact shards it); recomputing every "
           "panel %.1f us\n", c->t_update * 1e6, c->t_panel * 1e6);
    if (c->update_shared_ranks > 0)
        printf("           the update on %d threads that share the weights: %.1f us each "
               "(against %.1f if it divided)\n", c->update_shared_ranks,
               c->t_update_shared * 1e6, c->t_update / c->update_shared_ranks * 1e6);
    printf("           mpi exact at batch %d: %zu parameters along the chain, %zu values "
           "per sample all-gathered\n", batch, c->chain_params, c->gather_values);
    printf("  run      t_run = %.1f us a step outside the engine (batch, hooks); %d ranks "
           "on %d cores slow each other by %.3fx (%d serial runs at once)\n",
           c->t_run * 1e6, cores, cores, c->contention, cores);
    printf("  network  alpha = %.2f us, beta = %.3f ns/byte (%.2f GB/s)%s\n", c->alpha * 1e6,
           c->beta * 1e9, c->beta > 0 ? 1e-9 / c->beta : 0.0,
           r->cal->have_comm ? "" : " (not measured)");
    if (!r->cal->have_comm) return;
    const sm_probe_info *pc = &r->cal->probe;
    const double ring = sm_comm_seconds(&(sm_costs){.alpha = c->alpha, .beta = c->beta,
                                                    .n_params = c->n_params,
                                                    .elem_bytes = c->elem_bytes},
                                        SM_MPI_FAST, 2, (size_t)batch);
    printf("           MPI_Allreduce of the %zu parameters on 2 ranks %.1f us, %.2fx "
           "what alpha and beta give a ring (fast mode's term is scaled by it)\n",
           c->n_params, c->t_allreduce * 1e6, ring > 0 ? c->t_allreduce / ring : 0.0);
    printf("           medians of %d of %d launches: %s", pc->used, pc->launches,
           pc->near ? "those that met the cores' nearest placement"
                    : "the cores were far or moved in every launch; the network terms "
                      "are the far placement's");
    if (isfinite(pc->min_ns)) printf(" (%.0f-%.0f ns apart)", pc->min_ns, pc->max_ns);
    printf("\n");
}

static void print_validation(const model_out *r, int batch)
{
    printf("\nvalidation (measured vs PREDICTED seconds per step, batch %d):\n", batch);
    for (int i = 0; i < r->n_rows; i++) {
        const sm_validation_row *v = &r->rows[i];
        char apart[128] = "cores' distance not measured";
        if (isfinite(v->round_trip_ns) && isfinite(v->round_trip_after_ns))
            snprintf(apart, sizeof apart, "cores %.0f ns apart, %.0f after%s", v->round_trip_ns,
                     v->round_trip_after_ns,
                     v->cores_moved ? ": they moved, the row measured two machines" : "");
        const double beta = v->here.beta;
        printf("  %-10s R=%-3d measured %8.3f ms  predicted %8.3f ms  error %+6.1f%%"
               "   (compute x%.2f since calibration, contention %.2f, turns %.2f; probe on R "
               "ranks: alpha %.2f us, %.2f GB/s, allreduce %.0f us; %s)\n",
               sm_design_name(v->design), v->ranks, 1e3 * v->measured_s, 1e3 * v->predicted_s,
               100 * ((v->predicted_s - v->measured_s) / v->measured_s), v->compute_scale,
               v->here.contention, v->here.turns, 1e6 * v->here.alpha,
               beta > 0 ? 1e-9 / beta : 0.0, 1e6 * v->here.t_allreduce, apart);
    }
}

static void print_strong(const sm_costs *c, int max_ranks)
{
    printf("\nPREDICTED strong scaling (global batch fixed): speedup / efficiency\n");
    printf("  %-10s %6s", "design", "batch");
    for (int R = 1; R <= max_ranks; R *= 4) printf("   R=%-4d     ", R);
    printf("\n");
    for (int d = 0; d < 2; d++)
        for (size_t Bg = 64; Bg <= 8192; Bg *= 8) {
            printf("  %-10s %6zu", d ? "mpi fast" : "mpi exact", Bg);
            const double t1 = sm_step_seconds(c, d ? SM_MPI_FAST : SM_MPI_EXACT, 1, Bg);
            for (int R = 1; R <= max_ranks; R *= 4) {
                const double tR = sm_step_seconds(c, d ? SM_MPI_FAST : SM_MPI_EXACT, R, Bg);
                printf("  %6.1fx %3.0f%%", t1 / tR, 100 * t1 / tR / R);
            }
            printf("\n");
        }
    printf("(all rows of strong and weak scaling, R = 1 .. %d, batch 64 .. 8192: --json)\n",
           max_ranks);
}

// The flags' ranges; 0 or EXIT_USAGE after one line.
static int check_counts(const model_opts *o)
{
    if (o->batch < 1 || o->chunk < 1 || o->steps < 1 || o->max_ranks < 1 || o->cores < 0) {
        fprintf(stderr, "parity model: --batch, --chunk, --steps and --max-ranks must be >= 1, "
                        "--cores >= 0\n");
        return EXIT_USAGE;
    }
    if (o->upscale < 0 || o->upscale > 1024) {
        fprintf(stderr, "parity model: --upscale %d: expected 1 to 1024 (0: off)\n", o->upscale);
        return EXIT_USAGE;
    }
    return 0;
}

// The dataset (resampled as --upscale says), checked against the model's
// inputs, and the initial weights of the timed steps; 0 or an exit code.
static int open_data(par_dataset *ds, void **w, const model_opts *o, const par_model *m,
                     par_dtype dt)
{
    *w = NULL;
    par_status st = par_dataset_open(ds, o->dataset, 10);
    if (st != PAR_OK) return cli_fail("model", st, "run data/fetch.sh to install the datasets");
    if (o->upscale > 0) st = par_dataset_upscale(ds, (size_t)o->upscale, dt);
    const int fits = st != PAR_OK || ds->train.n_features == m->n_inputs;
    if (!fits)
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--model %s takes %zu inputs but "
                           "dataset %s has %zu features per sample%s", m->spec, m->n_inputs,
                           ds->name, ds->train.n_features,
                           o->upscale > 0 ? " after --upscale" : "");
    if (st == PAR_OK && !(*w = malloc(m->n_params * par_dtype_size(dt))))
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st != PAR_OK) {
        const int rc = cli_fail("model", st, fits ? NULL : cli_input_hint(m, ds));
        par_dataset_free(ds);
        return rc;
    }
    par_model_init(m, dt, 42, *w);
    return 0;
}

// --validate's list: rank counts separated by commas (each atoi'd; < 1 skipped later).
static int parse_validate(const char *s, int *ranks)
{
    char list[256];
    snprintf(list, sizeof list, "%s", s);
    int n = 0;
    for (char *tok = strtok(list, ","); tok && n < MAX_VALIDATE; tok = strtok(NULL, ","))
        ranks[n++] = atoi(tok);
    return n;
}

// Calibrates, validates at --validate's rank counts and predicts; prints.
static int measure_and_print(const model_opts *o, const sm_setup *s, size_t n_train)
{
    sm_calibration cal;
    par_status st = sm_calibrate(&cal, s);
    if (st != PAR_OK) return cli_fail("model", st, NULL);
    if (!cal.have_comm)
        fprintf(stderr, "parity model: the MPI probe did not run; predictions leave "
                        "communication out\n");
    if (!cal.have_run)
        fprintf(stderr, "parity model: the serial run failed; predictions leave t_run and "
                        "contention out\n");
    int ranks[MAX_VALIDATE], n_rows = 0;
    sm_validation_row *rows = NULL;
    st = sm_validate(&rows, &n_rows, &cal, s, ranks, parse_validate(o->validate, ranks));
    const int n_pred = sm_n_predictions(o->max_ranks);
    sm_prediction *pred = malloc((size_t)n_pred * sizeof *pred);
    if (st == PAR_OK && !pred)
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    if (st == PAR_OK) {
        const model_out r = {s->m, &cal, rows, n_rows, pred,
                             sm_predictions(pred, n_pred, &cal.c, s->m, n_train,
                                            (size_t)o->batch, o->max_ranks)};
        if (o->json) {
            print_json(&r);
        } else {
            print_costs(&r, s->dt, o->batch);
            print_validation(&r, o->batch);
            print_strong(&cal.c, o->max_ranks);
        }
    }
    free(rows);
    free(pred);
    return st == PAR_OK ? EXIT_OK : cli_fail("model", st, NULL);
}

int cmd_model(int argc, char **argv)
{
    model_opts o = {.dataset = "fashion-mnist", .model = "mlp:784-256-128-10", .act = "relu",
                    .dtype = "f32", .validate = "2,3", .batch = 64, .chunk = 8, .steps = 200,
                    .max_ranks = 1024, .probe_ranks = 2, .optim = "sgd", .momentum = NAN,
                    .beta1 = NAN, .beta2 = NAN, .eps = NAN};
    cli_opt opts[N_MODEL_FLAGS];
    flag_table(opts, &o);
    int rc = cli_flags("model", argc, argv, opts, &o.help, "parity model [flags]");
    if (rc >= 0) return rc;
    cli_numerics nu;
    const cli_numerics_flags nf = {o.act, o.model, NULL, o.dtype, NULL, NULL, 1};
    if ((rc = cli_numerics_resolve("model", &nf, &nu))) return rc;
    if (o.probe) {
        if (o.probe_ranks < 2) {
            fprintf(stderr, "parity model: --ranks %d: the probe needs at least 2 ranks\n",
                    o.probe_ranks);
            return EXIT_USAGE;
        }
        if (!cli_mpi_under_launcher()) return cli_mpi_relaunch(argc, argv, o.probe_ranks);
        return probe_comm(nu.m.n_params, nu.dt);
    }
    if ((rc = check_counts(&o))) return rc;
    par_optim optim;
    const cli_optim_flags of = {o.optim, o.momentum, o.beta1, o.beta2, o.eps};
    if ((rc = cli_optim_resolve("model", &of, &optim))) return rc;
    par_dataset ds;
    void *w;
    if ((rc = open_data(&ds, &w, &o, &nu.m, nu.dt))) return rc;
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    const sm_setup s = {.exe = exe, .launcher = o.launcher, .m = &nu.m, .dt = nu.dt,
                        .optim = &optim, .ds = &ds, .w = w, .dataset = o.dataset,
                        .model = o.model, .act = o.act, .dtype = o.dtype, .upscale = o.upscale,
                        .batch = o.batch, .chunk = o.chunk, .steps = o.steps, .cores = o.cores};
    rc = measure_and_print(&o, &s, ds.n_train);
    free(w);
    par_dataset_free(&ds);
    return rc;
}
