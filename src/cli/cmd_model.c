// `parity model`: the scaling model. Measures compute per step (serial steps
// at six batch sizes, read off between them, and fitted as t0 + b t_sample
// for the summary), the point-to-point latency and bandwidth (alpha, beta)
// between two MPI ranks (`parity model --probe-comm` under mpirun), predicts
// time per epoch, speedup and efficiency for R = 1 .. 1024 ranks and batches
// 64 .. 8192 (strong and weak scaling, exact and fast), and validates the
// prediction against measured runs at R = 2 and 3 (or any --validate list,
// through --launcher for other hosts). Predicted figures are marked as such.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "par_engine.h"
#include "par_kernels.h"
#include "cli_mpi_launch.h"
#include "par_run.h"
#include "par_sort.h"
#include "par_time.h"
#include "sm_measure.h"
#include "sm_model.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

#ifdef PARITY_HAVE_MPI
// Rank 0 prints {"alpha": s, "beta": s/byte}. alpha: half a ping-pong of 8
// bytes between ranks 0 and 1; beta: from every rank sending n bytes to the
// next on a ring while it receives from the one before (MPI_Sendrecv; on 2
// ranks an exchange), as the ring, the all-gather and allreduce move data,
// at 1 and 4 MB. With more ranks than cores the ring meets the ranks' taking
// turns, as training does. Medians of the repeats: a training step meets
// typical transfers, not the best one.
static int probe_comm(size_t n_values, par_dtype dt)
{
    int rank, size;
    if (cli_mpi_start(&rank, &size) != PAR_OK) return cli_fail("model", PAR_ERR_MPI, NULL);
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "parity model --probe-comm: needs 2 ranks\n");
        return cli_mpi_finish(EXIT_USAGE);
    }
    const size_t sizes[] = {8, 4096, 65536, 262144, 1048576, 4194304};
    enum { N_SIZES = sizeof sizes / sizeof sizes[0] };
    double t_one[N_SIZES];
    char *buf = calloc(sizes[N_SIZES - 1], 1);
    char *back = calloc(sizes[N_SIZES - 1], 1);
    enum { REPS = 21 };
    for (int k = 0; k < N_SIZES; k++) {
        double t[REPS];
        for (int r = 0; r < REPS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            if (k == 0 && rank == 0) {   // the latency: a ping-pong
                MPI_Send(buf, (int)sizes[k], MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)sizes[k], MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (k == 0 && rank == 1) {
                MPI_Recv(buf, (int)sizes[k], MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)sizes[k], MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            } else if (k > 0) {   // the rest: a step of a ring, all ranks at once
                MPI_Sendrecv(buf, (int)sizes[k], MPI_BYTE, (rank + 1) % size, 1, back,
                             (int)sizes[k], MPI_BYTE, (rank + size - 1) % size, 1,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            t[r] = (MPI_Wtime() - t0) / (k == 0 ? 2 : 1);
        }
        qsort(t, REPS, sizeof *t, par_cmp_double);
        t_one[k] = t[REPS / 2];
    }
    free(buf);
    free(back);
    // fast mode's reduction itself: MPI_Allreduce (sum) of the model's
    // n_values parameters, as the library runs it (its algorithm, the sums).
    // (0 s, "not measured", when a rank has no memory for it: all or none.)
    double t_ar[REPS] = {0};
    void *g = calloc(n_values ? n_values : 1, par_dtype_size(dt));
    int have = g != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    for (int r = 0; r < REPS && have; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, g, (int)n_values, dt == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE,
                      MPI_SUM, MPI_COMM_WORLD);
        t_ar[r] = MPI_Wtime() - t0;
    }
    free(g);
    qsort(t_ar, REPS, sizeof *t_ar, par_cmp_double);
    if (rank == 0) {
        const double alpha = t_one[0];
        const double beta = (t_one[N_SIZES - 1] - t_one[N_SIZES - 3]) /
                            (double)(sizes[N_SIZES - 1] - sizes[N_SIZES - 3]);
        printf("{\"ranks\": %d, \"alpha\": %.9g, \"beta\": %.9g, \"allreduce\": %.9g}\n", size,
               alpha, beta > 0 ? beta : 0.0, t_ar[REPS / 2]);
    }
    return cli_mpi_finish(EXIT_OK);
}
#else
static int probe_comm(size_t n_values, par_dtype dt)
{
    (void)n_values, (void)dt;
    fprintf(stderr, "parity model --probe-comm: parity was built without MPI\n");
    return EXIT_RUNTIME;
}
#endif

// Runs a command; out[i] = the number field keys[i] of the JSON on its
// stdout, for the n keys. 0 when the command succeeded and printed them all.
static int run_json_numbers(const char *cmd, int n, const char *const keys[], double out[])
{
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, p)) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        for (int i = 0; i < n && j; i++)
            if (json_is_number(json_object_get(j, keys[i]))) {
                out[i] = json_number_value(json_object_get(j, keys[i]));
                found |= 1 << i;
            }
        json_decref(j);
    }
    return pclose(p) == 0 && found == (1 << n) - 1 ? 0 : -1;
}

// The command that runs `args` of this binary on R ranks: the launcher with
// {R} replaced, or this binary's own --ranks relaunch.
static void launch_cmd(char *out, size_t n, const char *launcher, int R, const char *exe,
                       const char *args)
{
    if (launcher) {
        char pre[2048];
        size_t k = 0;
        for (const char *p = launcher; *p && k + 8 < sizeof pre; p++) {
            if (strncmp(p, "{R}", 3) == 0) {
                k += (size_t)snprintf(pre + k, sizeof pre - k, "%d", R);
                p += 2;
            } else {
                pre[k++] = *p;
            }
        }
        pre[k] = '\0';
        snprintf(out, n, "%s '%s' %s 2>/dev/null </dev/null", pre, exe, args);
    } else {
        snprintf(out, n, "'%s' %s --ranks %d 2>/dev/null </dev/null", exe, args, R);
    }
}

// How a probe's launches met this machine's cores (sm_core_round_trip_ns
// before and after each launch).
typedef struct probe_cores {
    int launches;       // launches run
    int used;           // launches whose medians make the probe
    int near;           // 1: the used launches met the nearest placement of the cores
                        // seen (or the distance was not measured)
    double min_ns, max_ns;   // round trips over the used launches (NAN: not measured)
} probe_cores;

// The network of `parity model --probe-comm` on R ranks: alpha, beta, and
// the seconds of an allreduce of the model's parameters (model_args: its
// --model, --act and --dtype), each the median of 3 launches, as the
// validation runs are: a launch can meet a network in another state (over
// TCP between this VM's namespace hosts the same allreduce took 0.2 or 0.5
// ms from one launch to the next, and stayed so through the launch).
// The 3 are launches that met the nearest placement of the cores seen
// (sm_near_probes): on a VM whose host moves its virtual CPUs apart (a cache
// line's round trip over twice the fastest seen) the same 2-rank allreduce
// of the default MLP took 0.3-0.7 ms instead of 0.10-0.13 for as long as
// they stayed apart, and a probe taken then made every fast-mode
// prediction 3-5x too slow in communication. Up to 9 launches
// are run to find 3; failing that, every launch counts and `pc->near` is 0.
static int probe_on(const char *launcher, int R, const char *exe, const char *model_args,
                    sm_costs *c, probe_cores *pc)
{
    char cmd[8192], args[2048];
    snprintf(args, sizeof args, "model --probe-comm %s", model_args);
    launch_cmd(cmd, sizeof cmd, launcher, R, exe, args);
    const char *const keys[] = {"alpha", "beta", "allreduce", "ranks"};
    enum { WANT = 3, MAX_LAUNCHES = 9 };
    double v[MAX_LAUNCHES][4], rt[MAX_LAUNCHES][2];
    int near[MAX_LAUNCHES], n = 0, n_near = 0;
    while (n < MAX_LAUNCHES && n_near < WANT) {
        rt[n][0] = sm_core_round_trip_ns();
        // A probe on another count of ranks than R measured something else.
        if (run_json_numbers(cmd, 4, keys, v[n]) != 0 || v[n][3] != R) return -1;
        rt[n][1] = sm_core_round_trip_ns();
        n_near = sm_near_probes((const double(*)[2])rt, ++n, near);
    }
    pc->launches = n;
    pc->near = n_near >= WANT;
    pc->used = pc->near ? n_near : n;
    if (!pc->near)   // every launch counts
        for (int k = 0; k < n; k++) near[k] = 1;
    pc->min_ns = pc->max_ns = NAN;   // fmin and fmax skip NAN
    double x[3][MAX_LAUNCHES];
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (!near[k]) continue;
        pc->min_ns = fmin(pc->min_ns, fmin(rt[k][0], rt[k][1]));
        pc->max_ns = fmax(pc->max_ns, fmax(rt[k][0], rt[k][1]));
        for (int j = 0; j < 3; j++) x[j][m] = v[k][j];
        m++;
    }
    double med[3];
    for (int j = 0; j < 3; j++) med[j] = par_median_sort(x[j], m);
    c->alpha = med[0];
    c->beta = med[1];
    c->t_allreduce = med[2];
    c->allreduce_ranks = R;
    return 0;
}

// {"launches", "used", "cores_near", "core_round_trip_ns": [min, max] or null}
static json_t *probe_json(const probe_cores *pc)
{
    json_t *rt = isfinite(pc->min_ns) ? json_pack("[f, f]", pc->min_ns, pc->max_ns) : json_null();
    return json_pack("{s:i, s:i, s:b, s:o}", "launches", pc->launches, "used", pc->used,
                     "cores_near", pc->near, "core_round_trip_ns", rt);
}

typedef struct model_opts {
    const char *dataset, *model, *act, *dtype, *launcher, *validate, *optim;
    int batch, chunk, steps, max_ranks, json, probe, probe_ranks, help, upscale, cores;
    double momentum, beta1, beta2, eps;   // NAN: not given (the defaults apply)
} model_opts;

// The arguments of a `parity train` run like the model's (trainer, mode).
static void train_args(char *out, size_t n, const model_opts *o, const par_optim *optim,
                       const char *trainer, const char *mode)
{
    snprintf(out, n,
             "train --trainer %s --mode %s --dataset %s --model %s --act %s --dtype %s "
             "--batch %d --chunk %d --steps %d --json --quiet --no-digest",
             trainer, mode, o->dataset, o->model, o->act, o->dtype, o->batch, o->chunk, o->steps);
    const size_t k = strlen(out);
    if (optim->kind == PAR_OPTIM_ADAM)
        snprintf(out + k, n - k, " --optim adam --beta1 %.17g --beta2 %.17g --eps %.17g",
                 optim->beta1, optim->beta2, optim->eps);
    else if (optim->kind != PAR_OPTIM_SGD)
        snprintf(out + k, n - k, " --optim %s --momentum %.17g", par_optim_name(optim->kind),
                 optim->momentum);
    if (o->upscale > 0) snprintf(out + strlen(out), n - strlen(out), " --upscale %d", o->upscale);
}

// `copies` serial runs `parity ARGS` at once (each its own process, as ranks
// are; all on CPU 0 with pin): per step, the mean over the copies of the
// seconds inside the engine (forward .. update of phase_seconds) and outside
// it (batch, log, other).
static int time_serial(const char *exe, const char *args, int copies, int pin, double *engine,
                       double *outside)
{
    enum { MAX_COPIES = 64 };
    FILE *p[MAX_COPIES];
    char cmd[4096];
    if (copies > MAX_COPIES) copies = MAX_COPIES;
    snprintf(cmd, sizeof cmd, "%s'%s' %s 2>/dev/null </dev/null", pin ? "taskset -c 0 " : "", exe,
             args);
    int started = 0, bad = 0;
    for (; started < copies; started++)
        if (!(p[started] = popen(cmd, "r"))) break;
    *engine = *outside = 0;
    for (int i = 0; i < started; i++) {
        char buf[16384];
        const size_t n = fread(buf, 1, sizeof buf - 1, p[i]);
        buf[n] = '\0';
        bad |= pclose(p[i]) != 0;
        json_error_t err;
        json_t *j = json_loads(buf, 0, &err);
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

// A serial run's engine and outside seconds per step (time_serial), and
// the contention of `cores` such runs at once: their engine time over the
// one run's (1 when cores is 1 or the runs at once failed).
static int run_costs(const char *exe, const char *targs, int cores, double *engine,
                     double *outside, double *contention)
{
    double engk, outk;
    *contention = 1;
    if (time_serial(exe, targs, 1, 0, engine, outside) != 0) return -1;
    if (cores > 1 && *engine > 0 && time_serial(exe, targs, cores, 0, &engk, &outk) == 0)
        *contention = engk / *engine;
    return 0;
}

// Two runs that take turns on one core (as ranks beyond the cores do): their
// engine seconds over twice one run's alone on that core. Above 1 where each
// evicts the other's data from the core's caches (fast mode's ranks each
// hold their own weights). 1 when it cannot be measured (taskset missing,
// CPU 0 not ours).
static double turns_cost(const char *exe, const char *targs)
{
    double one, two, out;
    if (time_serial(exe, targs, 1, 1, &one, &out) != 0 || !(one > 0) ||
        time_serial(exe, targs, 2, 1, &two, &out) != 0)
        return 1;
    return two / (2 * one);
}

// Serial seconds per step at batch b: median of `reps` steps of the engine;
// and the medians of its update and of recomputing every panel (not a part
// of the step: what a rank of the sharded update does for weights it receives).
static par_status time_steps(const par_model *m, par_dtype dt, const par_optim *optim,
                             const par_dataset *ds, const void *w, size_t b, size_t C, int reps,
                             int threads, double *sec, double *upd, double *pan)
{
    const par_run_cfg cfg = {.optim = optim,
                             .model = m,
                             .dtype = dt,
                             .mode = PAR_MODE_EXACT,
                             .batch = b,
                             .chunk = C,
                             .lr = 0.01,
                             .threads = threads,
                             .init_params = w};
    par_engine e;
    PAR_TRY(par_engine_init(&e, &cfg));
    e.samples_only = 1;   // every thread reads every weight, as every MPI rank does
    void *x = malloc(b * m->n_inputs * par_dtype_size(dt));
    int32_t *labels = malloc(b * sizeof *labels);
    size_t *idx = malloc(b * sizeof *idx);
    double *t = malloc(3 * (size_t)reps * sizeof *t);
    if (!x || !labels || !idx || !t) {
        free(x), free(labels), free(idx), free(t);
        par_engine_free(&e);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    for (int r = -3; r < reps; r++) {   // 3 warm-up steps
        for (size_t s = 0; s < b; s++) idx[s] = ((size_t)(r + 3) * b + s) % ds->n_train;
        par_data_gather(&ds->train, idx, b, dt, x, labels);
        const par_batch batch = {.x = x, .labels = labels, .B = b};
        const double t0 = par_now();
        par_engine_forward_backward(&e, &batch, 0, b, 1);
        par_engine_weight_grads(&e, b, 0, par_n_chunks(b, C), 0);
        const double t1 = par_now();
        par_engine_update(&e);
        const double t2 = par_now();
        par_engine_sync_wt(&e);
        if (r >= 0) {
            t[r] = t2 - t0;
            t[reps + r] = t2 - t1;
            t[2 * reps + r] = par_now() - t2;
        }
    }
    for (int k = 0; k < 3; k++) qsort(t + k * reps, (size_t)reps, sizeof *t, par_cmp_double);
    *sec = t[reps / 2];
    *upd = t[reps + reps / 2];
    *pan = t[2 * reps + reps / 2];
    free(x), free(labels), free(idx), free(t);
    par_engine_free(&e);
    return PAR_OK;
}

// One of k threads' share of the update right after all of them read every
// weight in the forward and backward passes, each then updating its own rows
// (mpi exact on one host writes its shared window so; the omp step does not
// since its wide layers' forward splits rows, hence samples_only): every
// line a core writes, the others hold, and must give up. 0 when k < 2.
// The least of 3 medians: now and then the scheduler puts both threads on
// one core for a while, and the update takes 3x (260 against 77 us here).
static double shared_update(const par_model *m, par_dtype dt, const par_optim *optim,
                            const par_dataset *ds, const void *w, int C, int k)
{
    double best = 0;
    for (int r = 0; r < 3 && k >= 2; r++) {
        double step, upd, pan;
        if (time_steps(m, dt, optim, ds, w, 64, (size_t)C, 40, k, &step, &upd, &pan) != PAR_OK)
            return 0;
        if (r == 0 || upd < best) best = upd;
    }
    return best;
}

int cmd_model(int argc, char **argv)
{
    model_opts o = {.dataset = "fashion-mnist", .model = "mlp:784-256-128-10", .act = "relu",
                    .dtype = "f32", .validate = "2,3", .batch = 64, .chunk = 8, .steps = 200,
                    .max_ranks = 1024, .probe_ranks = 2, .optim = "sgd", .momentum = NAN,
                    .beta1 = NAN, .beta2 = NAN, .eps = NAN};
    const cli_opt opts[] = {
        {"--dataset", CLI_STR, &o.dataset, "NAME|DIR  dataset (fashion-mnist)"},
        {"--model", CLI_STR, &o.model, "SPEC      model (mlp:784-256-128-10)"},
        {"--act", CLI_STR, &o.act, "A         hidden activation (relu)"},
        {"--dtype", CLI_STR, &o.dtype, "f32|f64   (f32)"},
        {"--upscale", CLI_INT, &o.upscale, "S         resample the images to S x S, as parity train does"},
        {"--optim", CLI_STR, &o.optim, "NAME      sgd, momentum, nesterov or adam: its update is timed (sgd)"},
        {"--momentum", CLI_DOUBLE, &o.momentum, "MU        momentum and nesterov (0.9)"},
        {"--beta1", CLI_DOUBLE, &o.beta1, "B1        adam (0.9)"},
        {"--beta2", CLI_DOUBLE, &o.beta2, "B2        adam (0.999)"},
        {"--eps", CLI_DOUBLE, &o.eps, "EPS       adam (1e-8)"},
        {"--batch", CLI_INT, &o.batch, "B         batch of the validation runs and weak scaling (64)"},
        {"--chunk", CLI_INT, &o.chunk, "C         chunk (8)"},
        {"--steps", CLI_INT, &o.steps, "K         steps of each validation run (200)"},
        {"--max-ranks", CLI_INT, &o.max_ranks, "R         largest predicted rank count (1024)"},
        {"--validate", CLI_STR, &o.validate, "LIST      rank counts measured against the model (2,3; '' for none)"},
        {"--launcher", CLI_STR, &o.launcher, "CMD       run MPI jobs as CMD with {R} = ranks (default: --ranks)"},
        {"--cores", CLI_INT, &o.cores, "N         cores the validation runs' ranks share (this machine's; with --launcher: a core per rank unless given)"},
        {"--json", CLI_FLAG, &o.json, "          JSON on stdout"},
        {"--probe-comm", CLI_FLAG, &o.probe, "          (internal) under mpirun: prints alpha, beta and an allreduce's seconds"},
        {"--ranks", CLI_INT, &o.probe_ranks, "R         (with --probe-comm) ranks to launch (2)"},
        {"--help", CLI_FLAG, &o.help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos, rc = cli_parse("model", argc, argv, 2, opts, pos, 0, &n_pos);
    if (rc) return rc;
    if (o.help) {
        cli_usage("parity model [flags]", opts);
        return EXIT_OK;
    }
    cli_numerics nu;
    const cli_numerics_flags nf = {o.act, o.model, NULL, o.dtype, NULL, NULL, 1};
    rc = cli_numerics_resolve("model", &nf, &nu);
    if (rc) return rc;
    const par_model m = nu.m;
    const par_dtype dt = nu.dt;
    if (o.probe) {
        if (o.probe_ranks < 2) {
            fprintf(stderr, "parity model: --ranks %d: the probe needs at least 2 ranks\n",
                    o.probe_ranks);
            return EXIT_USAGE;
        }
        if (!cli_mpi_under_launcher()) return cli_mpi_relaunch(argc, argv, o.probe_ranks);
        return probe_comm(m.n_params, dt);
    }
    if (o.batch < 1 || o.chunk < 1 || o.steps < 1 || o.max_ranks < 1 || o.cores < 0) {
        fprintf(stderr, "parity model: --batch, --chunk, --steps and --max-ranks must be >= 1, "
                        "--cores >= 0\n");
        return EXIT_USAGE;
    }
    if (o.upscale < 0 || o.upscale > 1024) {
        fprintf(stderr, "parity model: --upscale %d: expected 1 to 1024 (0: off)\n", o.upscale);
        return EXIT_USAGE;
    }
    par_optim optim;
    const cli_optim_flags of = {o.optim, o.momentum, o.beta1, o.beta2, o.eps};
    rc = cli_optim_resolve("model", &of, &optim);
    if (rc) return rc;
    par_dataset ds;
    par_status st = par_dataset_open(&ds, o.dataset, 10);
    if (st != PAR_OK) return cli_fail("model", st, "run data/fetch.sh to install the datasets");
    if (o.upscale > 0) st = par_dataset_upscale(&ds, (size_t)o.upscale, dt);
    if (st == PAR_OK && ds.train.n_features != m.n_inputs)
        st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "--model %s takes %zu inputs but "
                           "dataset %s has %zu features per sample%s", m.spec, m.n_inputs, ds.name,
                           ds.train.n_features, o.upscale > 0 ? " after --upscale" : "");
    if (st != PAR_OK) {
        par_dataset_free(&ds);
        return cli_fail("model", st, NULL);
    }
    void *w = malloc(m.n_params * par_dtype_size(dt));
    par_model_init(&m, dt, 42, w);

    // 1. Compute: serial steps at b = 8 .. 256 samples, the model reading the
    // compute of b samples off them (sm_compute_seconds); t(b) = t0 + b
    // t_sample, least squares over them, for the summary and t0's update.
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int cores = o.cores > 0 ? o.cores : online > 0 ? (int)online : 1;
    enum { NB = 6 };
    const size_t bs[NB] = {8, 16, 32, 64, 128, 256};
    double tb[NB], upd[NB] = {0}, pan[NB] = {0}, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int k = 0; k < NB && st == PAR_OK; k++) {
        st = time_steps(&m, dt, &optim, &ds, w, bs[k], (size_t)o.chunk, 40, 1, &tb[k], &upd[k],
                        &pan[k]);
        sx += (double)bs[k], sy += tb[k], sxx += (double)bs[k] * (double)bs[k];
        sxy += (double)bs[k] * tb[k];
    }
    const int k_upd = cores < 2 || online < 2 ? 0 : cores < online ? cores : (int)online;
    const double upd_shared =
        st == PAR_OK ? shared_update(&m, dt, &optim, &ds, w, o.chunk, k_upd) : 0;
    if (st != PAR_OK) {
        free(w);
        par_dataset_free(&ds);
        return cli_fail("model", st, NULL);
    }
    sm_costs c = {0};
    c.t_sample = (NB * sxy - sx * sy) / (NB * sxx - sx * sx);
    c.t0 = (sy - c.t_sample * sx) / NB;
    if (c.t0 < 0) c.t0 = 0;
    c.t_update = upd[3] < c.t0 ? upd[3] : c.t0;   // at b = 64; part of t0
    c.t_panel = pan[3];
    c.t_update_shared = upd_shared;
    c.update_shared_ranks = k_upd;
    c.n_points = NB;
    for (int k = 0; k < NB; k++) c.point_b[k] = (double)bs[k], c.point_t[k] = tb[k];
    c.n_params = m.n_params;
    c.elem_bytes = par_dtype_size(dt);
    c.chunk = (size_t)o.chunk;
    c.seg_params = PAR_RING_SEG_PARAMS;
    par_ring_split(&m, (size_t)o.batch, &c.chain_params, &c.gather_values);

    // 2. Communication: alpha, beta from a ping-pong on 2 ranks.
    char exe[4096], cmd[8192];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char model_args[1024];
    snprintf(model_args, sizeof model_args, "--model %s --act %s --dtype %s", o.model, o.act,
             o.dtype);
    probe_cores pc = {0};
    const int have_comm = probe_on(o.launcher, 2, exe, model_args, &c, &pc) == 0;
    if (!have_comm)
        fprintf(stderr, "parity model: the MPI probe did not run; predictions leave communication out\n");

    // 3. A real run: what a step costs outside the engine on every rank
    // (t_run: the batch, hooks, bookkeeping), and how much ranks that share
    // this machine's cores slow each other down (memory bandwidth, caches):
    // the engine's seconds of `cores` serial runs at once against one alone.
    char targs[1024];
    train_args(targs, sizeof targs, &o, &optim, "serial", "exact");
    double eng1 = 0, out1 = 0;
    const int have_run = run_costs(exe, targs, cores, &eng1, &out1, &c.contention) == 0;
    c.t_run = have_run ? out1 : 0;
    if (!have_run)
        fprintf(stderr, "parity model: the serial run failed; predictions leave t_run and "
                        "contention out\n");

    // 4. Validation: measured seconds per step at the given rank counts.
    json_t *val = json_array();
    const size_t B = (size_t)o.batch;
    char list[256];
    snprintf(list, sizeof list, "%s", o.validate);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        const int R = atoi(tok);
        if (R < 1) continue;
        // alpha, beta and the allreduce measured on R ranks just before R's
        // runs: on one host with more ranks than cores a ring step costs more
        // than on two ranks, and the network of a shared machine drifts.
        sm_costs here = c;
        probe_cores pc_here;
        const int probed =
            have_comm && probe_on(o.launcher, R, exe, model_args, &here, &pc_here) == 0;
        if (!probed) here = c;
        // Compute as the machine runs it now: a serial run just before R's
        // runs scales t0, t_update, t_panel and t_sample by its engine time
        // over the calibration run's, and gives t_run and the contention
        // anew. A shared machine drifts: the fitted t0 was 209 us in one
        // `parity model` and 374 us in the next, minutes later (2026-11-26),
        // and a row would otherwise test the drift, not the model.
        double eng_now, out_now, cont_now, scale = 1;
        if (have_run && eng1 > 0 &&
            run_costs(exe, targs, cores, &eng_now, &out_now, &cont_now) == 0) {
            scale = eng_now / eng1;
            sm_scale_compute(&here, scale);
            here.t_run = out_now;
            here.contention = cont_now;
        }
        // Without --launcher the runs are on this host, where the weights are
        // shared, and its cores are shared by the ranks (with it: --cores).
        here.one_host = o.launcher == NULL;
        here.cores = o.launcher == NULL || o.cores > 0 ? cores : 0;
        // The shared update as the cores are placed now (far apart, each
        // line costs several times more: 289 against 76 us a thread).
        if (o.launcher == NULL && k_upd > 0)
            here.t_update_shared = shared_update(&m, dt, &optim, &ds, w, o.chunk, k_upd);
        // More ranks than cores here: what taking turns on a core costs.
        here.turns = o.launcher == NULL && R > cores ? turns_cost(exe, targs) : 1;
        // How far apart this machine's first two cores are now (a VM's host
        // may place its virtual CPUs on cores that share no cache: two-core
        // runs are then 1.3-1.45x slower, and a validation row says so).
        const double round_trip = sm_core_round_trip_ns();
        for (int d = 0; d < 2; d++) {
            const sm_design des = d ? SM_MPI_FAST : SM_MPI_EXACT;
            char args[1024];
            train_args(args, sizeof args, &o, &optim, "mpi", d ? "fast" : "exact");
            launch_cmd(cmd, sizeof cmd, o.launcher, R, exe, args);
            // The median of 3 runs: one run can meet a slow spell of the
            // machine (a neighbour, or a VM's cores placed far apart).
            const char *const key[] = {"seconds"};
            double secs[3];
            int ran = 0;
            while (ran < 3 && run_json_numbers(cmd, 1, key, &secs[ran]) == 0) ran++;
            if (ran < 3) continue;
            qsort(secs, 3, sizeof *secs, par_cmp_double);
            // The distance after the runs too: a row whose cores moved
            // meanwhile measured two machines, and says so.
            const double rt_after = sm_core_round_trip_ns();
            const double meas = secs[1] / o.steps, pred = sm_step_seconds(&here, des, R, B);
            json_t *row = json_pack("{s:s, s:i, s:I, s:f, s:f, s:f, s:f, s:f}", "design",
                                    sm_design_name(des), "ranks", R, "batch", (json_int_t)B,
                                    "measured_step_s", meas, "predicted_step_s", pred, "error",
                                    (pred - meas) / meas, "alpha", here.alpha, "beta", here.beta);
            json_object_set_new(row, "allreduce_s", json_real(here.t_allreduce));
            json_object_set_new(row, "probe", probed ? probe_json(&pc_here) : json_null());
            json_object_set_new(row, "compute_scale", json_real(scale));
            json_object_set_new(row, "contention", json_real(here.contention));
            json_object_set_new(row, "turns", json_real(here.turns));
            json_object_set_new(row, "t_update_shared_s", json_real(here.t_update_shared));
            json_object_set_new(row, "core_round_trip_ns",
                                isfinite(round_trip) ? json_real(round_trip) : json_null());
            json_object_set_new(row, "core_round_trip_after_ns",
                                isfinite(rt_after) ? json_real(rt_after) : json_null());
            const double lo = fmin(round_trip, rt_after), hi = fmax(round_trip, rt_after);
            json_object_set_new(row, "cores_moved", json_boolean(isfinite(lo) && hi > 2 * lo));
            json_array_append_new(val, row);
        }
    }

    // 5. Predictions: strong (global batch fixed) and weak (batch per rank fixed),
    // a core per rank (a cluster's nodes).
    json_t *pred = json_array();
    const size_t n_train = ds.n_train;
    for (int d = 0; d < 2; d++) {
        const sm_design des = d ? SM_MPI_FAST : SM_MPI_EXACT;
        for (size_t Bg = 64; Bg <= 8192; Bg *= 2) {
            sm_costs cg = c;   // which layers gather depends on the batch
            par_ring_split(&m, Bg, &cg.chain_params, &cg.gather_values);
            const double t1 = sm_step_seconds(&cg, des, 1, Bg);
            for (int R = 1; R <= o.max_ranks; R *= 2) {
                const double steps = ceil((double)n_train / (double)Bg);
                const double tR = sm_step_seconds(&cg, des, R, Bg);
                json_array_append_new(pred, json_pack(
                    "{s:s, s:s, s:i, s:I, s:f, s:f, s:f}", "scaling", "strong", "design",
                    sm_design_name(des), "ranks", R, "batch", (json_int_t)Bg, "epoch_s",
                    steps * tR, "speedup", t1 / tR, "efficiency", t1 / tR / R));
                // weak: B samples per rank, against one rank's epoch at batch B
                const size_t Bw = B * (size_t)R;
                sm_costs cw = c;
                par_ring_split(&m, Bw, &cw.chain_params, &cw.gather_values);
                const double tw = sm_step_seconds(&cw, des, R, Bw);
                const double steps_w = ceil((double)n_train / (double)Bw);
                const double epoch1 = ceil((double)n_train / (double)B) * sm_step_seconds(&c, des, 1, B);
                json_array_append_new(pred, json_pack(
                    "{s:s, s:s, s:i, s:I, s:f, s:f, s:f}", "scaling", "weak", "design",
                    sm_design_name(des), "ranks", R, "batch", (json_int_t)Bw, "epoch_s",
                    steps_w * tw, "speedup", epoch1 / (steps_w * tw), "efficiency",
                    epoch1 / (steps_w * tw) / R));
            }
        }
    }

    if (o.json) {
        json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:o, s:o}",
                              "model", m.spec, "n_params", (json_int_t)m.n_params, "chain_params",
                              (json_int_t)c.chain_params, "gather_values_per_sample",
                              (json_int_t)c.gather_values, "t0_s", c.t0,
                              "t_update_s", c.t_update, "t_panel_s", c.t_panel, "t_sample_s",
                              c.t_sample, "alpha_s", c.alpha, "beta_s_per_byte", c.beta,
                              "comm_measured", have_comm, "validation", val, "predicted", pred);
        json_t *pts = json_array();
        for (int k = 0; k < c.n_points; k++)
            json_array_append_new(pts, json_pack("{s:f, s:f}", "batch", c.point_b[k],
                                                 "step_s", c.point_t[k]));
        json_object_set_new(j, "compute_points", pts);
        json_object_set_new(j, "t_update_shared_s", json_real(c.t_update_shared));
        json_object_set_new(j, "update_shared_ranks", json_integer(c.update_shared_ranks));
        json_object_set_new(j, "allreduce_s", json_real(c.t_allreduce));
        json_object_set_new(j, "probe", have_comm ? probe_json(&pc) : json_null());
        json_object_set_new(j, "t_run_s", json_real(c.t_run));
        json_object_set_new(j, "contention", json_real(c.contention));
        json_object_set_new(j, "cores", json_integer(cores));
        char *s = json_dumps(j, JSON_REAL_PRECISION(6));
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        printf("scaling model of %s (%zu parameters, %s, chunk %d)\n", m.spec, m.n_params,
               par_dtype_name(dt), o.chunk);
        printf("  compute  measured at b =");
        for (int k = 0; k < NB; k++) printf(" %zu%s", bs[k], k + 1 < NB ? "," : ":");
        for (int k = 0; k < NB; k++) printf(" %.3f%s", tb[k] * 1e3, k + 1 < NB ? "," : " ms");
        printf(" (read off between them);\n           as t(b) = t0 + b t_sample: t0 = %.1f us, "
               "t_sample = %.2f us\n", c.t0 * 1e6, c.t_sample * 1e6);
        printf("           of t0: the update %.1f us (mpi exact shards it); recomputing every "
               "panel %.1f us\n", c.t_update * 1e6, c.t_panel * 1e6);
        if (c.update_shared_ranks > 0)
            printf("           the update on %d threads that share the weights: %.1f us each "
                   "(against %.1f if it divided)\n", c.update_shared_ranks,
                   c.t_update_shared * 1e6, c.t_update / c.update_shared_ranks * 1e6);
        printf("           mpi exact at batch %d: %zu parameters along the chain, %zu values "
               "per sample all-gathered\n", o.batch, c.chain_params, c.gather_values);
        printf("  run      t_run = %.1f us a step outside the engine (batch, hooks); %d ranks "
               "on %d cores slow each other by %.3fx (%d serial runs at once)\n",
               c.t_run * 1e6, cores, cores, c.contention, cores);
        printf("  network  alpha = %.2f us, beta = %.3f ns/byte (%.2f GB/s)%s\n", c.alpha * 1e6,
               c.beta * 1e9, c.beta > 0 ? 1e-9 / c.beta : 0.0, have_comm ? "" : " (not measured)");
        if (have_comm) {
            const double ring = sm_comm_seconds(&(sm_costs){.alpha = c.alpha, .beta = c.beta,
                                                            .n_params = c.n_params,
                                                            .elem_bytes = c.elem_bytes},
                                                SM_MPI_FAST, 2, (size_t)o.batch);
            printf("           MPI_Allreduce of the %zu parameters on 2 ranks %.1f us, %.2fx "
                   "what alpha and beta give a ring (fast mode's term is scaled by it)\n",
                   c.n_params, c.t_allreduce * 1e6, ring > 0 ? c.t_allreduce / ring : 0.0);
            printf("           medians of %d of %d launches: %s", pc.used, pc.launches,
                   pc.near ? "those that met the cores' nearest placement"
                           : "the cores were far or moved in every launch; the network terms "
                             "are the far placement's");
            if (isfinite(pc.min_ns)) printf(" (%.0f-%.0f ns apart)", pc.min_ns, pc.max_ns);
            printf("\n");
        }
        printf("\nvalidation (measured vs PREDICTED seconds per step, batch %d):\n", o.batch);
        size_t i;
        json_t *v;
        json_array_foreach(val, i, v) {
            const json_t *rt = json_object_get(v, "core_round_trip_ns");
            const json_t *rt2 = json_object_get(v, "core_round_trip_after_ns");
            char apart[128] = "cores' distance not measured";
            if (json_is_real(rt) && json_is_real(rt2))
                snprintf(apart, sizeof apart, "cores %.0f ns apart, %.0f after%s",
                         json_real_value(rt), json_real_value(rt2),
                         json_is_true(json_object_get(v, "cores_moved"))
                             ? ": they moved, the row measured two machines" : "");
            const double beta = json_real_value(json_object_get(v, "beta"));
            printf("  %-10s R=%-3d measured %8.3f ms  predicted %8.3f ms  error %+6.1f%%"
                   "   (compute x%.2f since calibration, contention %.2f, turns %.2f; probe on R "
                   "ranks: alpha %.2f us, %.2f GB/s, allreduce %.0f us; %s)\n",
                   json_string_value(json_object_get(v, "design")),
                   (int)json_integer_value(json_object_get(v, "ranks")),
                   1e3 * json_real_value(json_object_get(v, "measured_step_s")),
                   1e3 * json_real_value(json_object_get(v, "predicted_step_s")),
                   100 * json_real_value(json_object_get(v, "error")),
                   json_real_value(json_object_get(v, "compute_scale")),
                   json_real_value(json_object_get(v, "contention")),
                   json_real_value(json_object_get(v, "turns")),
                   1e6 * json_real_value(json_object_get(v, "alpha")),
                   beta > 0 ? 1e-9 / beta : 0.0,
                   1e6 * json_real_value(json_object_get(v, "allreduce_s")), apart);
        }
        printf("\nPREDICTED strong scaling (global batch fixed): speedup / efficiency\n");
        printf("  %-10s %6s", "design", "batch");
        for (int R = 1; R <= o.max_ranks; R *= 4) printf("   R=%-4d     ", R);
        printf("\n");
        for (int d = 0; d < 2; d++)
            for (size_t Bg = 64; Bg <= 8192; Bg *= 8) {
                printf("  %-10s %6zu", d ? "mpi fast" : "mpi exact", Bg);
                const double t1 = sm_step_seconds(&c, d ? SM_MPI_FAST : SM_MPI_EXACT, 1, Bg);
                for (int R = 1; R <= o.max_ranks; R *= 4) {
                    const double tR = sm_step_seconds(&c, d ? SM_MPI_FAST : SM_MPI_EXACT, R, Bg);
                    printf("  %6.1fx %3.0f%%", t1 / tR, 100 * t1 / tR / R);
                }
                printf("\n");
            }
        printf("(all rows of strong and weak scaling, R = 1 .. %d, batch 64 .. 8192: --json)\n",
               o.max_ranks);
        json_decref(val);
        json_decref(pred);
    }
    free(w);
    par_dataset_free(&ds);
    return EXIT_OK;
}
