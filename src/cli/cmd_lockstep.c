// `parity lockstep`: a trainer (normally in fast mode) stepped against the
// reference from the reference's weights, each step checked under the
// derived bound (verify/harness/vf_lockstep.h). MPI trainers: --ranks R relaunches
// under mpirun; every rank checks, rank 0 reports. Exit 0 within the bound,
// 1 a violation, 2 usage, 3 runtime. Tests: tests/verify/test_verify.sh.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "cmd_lockstep_ext.h"
#include "par_engine.h"
#include "cli_mpi_launch.h"
#include "par_run.h"
#include "vf_lockstep.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

typedef struct lockstep_opts {
    const char *dataset, *model, *act, *trainer, *mode, *dtype, *init_load, *fault;
    const char *batch_s, *optim;                // --batch B|full, --optim
    const char *external, *ulps;                // --external CMD, --ulps FUNC=U,...
    double timeout;
    int intermediates;
    int epochs, steps, batch, batch_full, chunk, threads, ranks, upscale, json, help;
    double lr, momentum, beta1, beta2, eps;     // NAN: not given (the defaults apply)
    uint64_t seed;
} lockstep_opts;

#ifdef PARITY_HAVE_MPI
static par_status bcast(void *ctx, void *buf, size_t bytes)
{
    (void)ctx;
    PAR_FAIL_IF(bytes > (size_t)0x7fffffff, PAR_ERR_MPI, "broadcast of %zu bytes", bytes);
    PAR_FAIL_IF(MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS, PAR_ERR_MPI,
                "MPI_Bcast of the lockstep weights failed");
    return PAR_OK;
}
#endif

// Combines the ranks' results: the most violations and the worst ratios.
static void combine(vf_lockstep_result *r, int size)
{
#ifdef PARITY_HAVE_MPI
    if (size > 1) {
        unsigned long v = r->violations, vmax = 0;
        double q[2] = {r->worst_ratio, r->worst_loss_ratio}, qmax[2];
        MPI_Allreduce(&v, &vmax, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(q, qmax, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        r->violations = vmax;
        r->worst_ratio = qmax[0];
        r->worst_loss_ratio = qmax[1];
    }
#else
    (void)r;
    (void)size;
#endif
}

static void param_name(char *buf, size_t n, const par_model *m, size_t i)
{
    int v = 0;
    while (v + 1 < m->n_views && m->views[v + 1].offset <= i) v++;
    const par_view *pv = &m->views[v];
    const size_t k = i - pv->offset;
    if (pv->ndim == 2) snprintf(buf, n, "%s[%zu,%zu]", pv->name, k / pv->shape[1], k % pv->shape[1]);
    else snprintf(buf, n, "%s[%zu]", pv->name, k);
}

enum { N_LOCKSTEP_FLAGS = 29 };

static void flag_table(cli_opt *t, lockstep_opts *o)
{
    const cli_opt f[N_LOCKSTEP_FLAGS] = {
        {"--dataset", CLI_STR, &o->dataset, "NAME|DIR  mnist, fashion-mnist or a folder of IDX files (fashion-mnist)"},
        {"--model", CLI_STR, &o->model, "SPEC      mlp:N0-N1-...-Nk (mlp:784-256-128-10)"},
        {"--act", CLI_STR, &o->act, "relu|sigmoid|tanh  hidden activation (relu)"},
        {"--trainer", CLI_STR, &o->trainer, "NAME      serial, omp, mpi, hybrid, root (serial)"},
        {"--external", CLI_STR, &o->external, "CMD       a trainer parity did not build, speaking the step protocol (docs/external.md): checked under the any-order bound"},
        {"--intermediates", CLI_FLAG, &o->intermediates, "          --external: ask it for its gradients too (its update is then checked op by op)"},
        {"--ulps", CLI_STR, &o->ulps, "FUNC=U,.. --external: ulps its exp, log, tanh, sigmoid may be off (1 each)"},
        {"--timeout", CLI_DOUBLE, &o->timeout, "S         --external: the longest wait for one answer (120)"},
        {"--mode", CLI_STR, &o->mode, "exact|fast  (fast)"},
        {"--dtype", CLI_STR, &o->dtype, "f32|f64   floating-point type (f32)"},
        {"--epochs", CLI_INT, &o->epochs, "N         epochs (1)"},
        {"--steps", CLI_INT, &o->steps, "K         check the first K steps (0: every step of --epochs)"},
        {"--upscale", CLI_INT, &o->upscale, "S         resample the images to S x S, as parity train does"},
        {"--batch", CLI_STR, &o->batch_s, "B|full    samples per step, or the whole training split (64)"},
        {"--chunk", CLI_INT, &o->chunk, "C         samples per chunk (8)"},
        {"--lr", CLI_DOUBLE, &o->lr, "LR        learning rate (0.01)"},
        {"--optim", CLI_STR, &o->optim, "NAME      sgd, momentum, nesterov or adam (sgd)"},
        {"--momentum", CLI_DOUBLE, &o->momentum, "MU        momentum and nesterov (0.9)"},
        {"--beta1", CLI_DOUBLE, &o->beta1, "B1        adam (0.9)"},
        {"--beta2", CLI_DOUBLE, &o->beta2, "B2        adam (0.999)"},
        {"--eps", CLI_DOUBLE, &o->eps, "EPS       adam (1e-8)"},
        {"--seed", CLI_U64, &o->seed, "S         seed of initialisation and shuffling (42)"},
        {"--threads", CLI_INT, &o->threads, "T         OpenMP threads per process (1)"},
        {"--ranks", CLI_INT, &o->ranks, "R         launch R MPI ranks through mpirun (mpi/hybrid/root)"},
        {"--init-load", CLI_STR, &o->init_load, "FILE.npz  start from these weights"},
        {"--json", CLI_FLAG, &o->json, "          print {violations, worst_ratio, steps, ...} as JSON"},
        {"--help", CLI_FLAG, &o->help, "          this text"},
        {"--fault", CLI_STR, &o->fault, "SPEC      TESTS ONLY: inject a deliberate arithmetic fault"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    memcpy(t, f, sizeof f);
}

// The flags, resolved and checked; 0 or the exit code after one line.
static int resolve(lockstep_opts *o, cli_numerics *nu, par_optim *optim)
{
    const cli_optim_flags of = {o->optim, o->momentum, o->beta1, o->beta2, o->eps};
    int rc = cli_batch_parse("lockstep", o->batch_s, &o->batch, &o->batch_full);
    if (!rc) rc = cli_optim_resolve("lockstep", &of, optim);
    if (rc) return rc;
    const cli_numerics_flags nf = {o->act, o->model, o->mode, o->dtype, o->fault, o->trainer,
                                   o->threads};
    if ((rc = cli_numerics_resolve("lockstep", &nf, nu))) return rc;
    if (o->fault) par_fault_set(&nu->fault);
    if (strcmp(o->trainer, "reference") == 0) {
        fprintf(stderr, "parity lockstep: --trainer reference: the reference is what it is "
                        "compared with; expected serial, omp, mpi, hybrid or root\n");
        return EXIT_USAGE;
    }
    const struct { const char *flag; int v; } counts[] = {
        {"--epochs", o->epochs}, {"--batch", o->batch}, {"--chunk", o->chunk},
        {"--threads", o->threads}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (counts[i].v < 1) {
            fprintf(stderr, "parity lockstep: %s %d: expected an integer >= 1\n", counts[i].flag,
                    counts[i].v);
            return EXIT_USAGE;
        }
    if (!(o->lr > 0) || o->upscale < 0 || o->upscale > 1024) {
        fprintf(stderr, "parity lockstep: %s: expected %s\n", !(o->lr > 0) ? "--lr" : "--upscale",
                !(o->lr > 0) ? "a number > 0" : "a side of 1 to 1024 (0: off)");
        return EXIT_USAGE;
    }
    return 0;
}

// Rank 0's line or JSON of the combined result.
static void print_result(const lockstep_opts *o, const cli_numerics *nu, int size,
                         const vf_lockstep_result *r)
{
    char where[96] = "-";
    if (r->worst_step > 0) param_name(where, sizeof where, &nu->m, r->worst_index);
    const char *verdict = r->violations == 0 ? "pass" : "fail";
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:f, s:f, s:I, s:s, s:I, s:s}",
                              "trainer", nu->tr->name, "mode", par_mode_name(nu->mode), "threads",
                              o->threads, "ranks", size, "dtype", par_dtype_name(nu->dt), "steps",
                              (json_int_t)r->steps, "violations", (json_int_t)r->violations,
                              "worst_ratio", r->worst_ratio, "worst_loss_ratio",
                              r->worst_loss_ratio, "worst_step", (json_int_t)r->worst_step,
                              "worst_param", where, "first_violation_step",
                              (json_int_t)r->first_violation_step, "verdict", verdict);
        char *s = json_dumps(j, JSON_REAL_PRECISION(17));
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        printf("lockstep %s %s T=%d R=%d, %ld steps: %zu violations, worst |diff|/tol %.3g "
               "(%s, step %ld), worst loss ratio %.3g: %s\n", nu->tr->name,
               par_mode_name(nu->mode), o->threads, size, r->steps, r->violations,
               r->worst_ratio, where, r->worst_step, r->worst_loss_ratio,
               r->violations == 0 ? "PASS" : "FAIL");
    }
}

// The check on this process's rank (MPI trainers: rank 0 alone runs the
// reference and checks); the exit code.
static int run_check(const lockstep_opts *o, const cli_numerics *nu, const par_optim *optim,
                     int rank, int size)
{
    vf_lockstep_comm comm = {rank, NULL, NULL};
#ifdef PARITY_HAVE_MPI
    comm.bcast = bcast;
#endif
    const vf_lockstep_job job = {
        .ops = nu->tr,
        .cfg = {.model = &nu->m, .dtype = nu->dt, .mode = nu->mode, .batch = (size_t)o->batch,
                .chunk = (size_t)o->chunk, .lr = o->lr, .threads = o->threads, .optim = optim},
        .batch_full = o->batch_full, .dataset = o->dataset, .upscale = o->upscale,
        .init_load = o->init_load, .seed = o->seed, .epochs = o->epochs, .steps = o->steps,
        .comm = size > 1 && comm.bcast ? &comm : NULL};
    vf_lockstep_result r = {0};
    int opening = 0;
    const par_status st = vf_lockstep_run(&r, &job, &opening);
    if (st != PAR_OK)
        return cli_fail("lockstep", st,
                        opening ? "run data/fetch.sh (or ci/setup.sh) to install the datasets"
                                : NULL);
    combine(&r, size);
    if (rank == 0) print_result(o, nu, size, &r);
    return r.violations ? EXIT_VERIFY : EXIT_OK;
}

// --external: the command is the trainer; flags of parity's own trainers are refused.
static int run_external(lockstep_opts *o)
{
    const struct { const char *flag; int given; } own[] = {
        {"--trainer", o->trainer != NULL}, {"--ranks", o->ranks > 0}, {"--threads", o->threads != 1},
        {"--fault", o->fault != NULL}, {"--upscale", o->upscale != 0}};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (own[i].given) {
            fprintf(stderr, "parity lockstep: %s: not with --external (the command is the "
                            "trainer)\n", own[i].flag);
            return EXIT_USAGE;
        }
    if (o->steps < 1) {
        fprintf(stderr, "parity lockstep: --external needs --steps K >= 1 (each step is a round "
                        "trip to the trainer)\n");
        return EXIT_USAGE;
    }
    if (!(o->timeout > 0)) {
        fprintf(stderr, "parity lockstep: --timeout %g: expected seconds > 0\n", o->timeout);
        return EXIT_USAGE;
    }
    o->trainer = "serial";
    o->mode = "exact";
    cli_numerics nu;
    par_optim optim;
    int rc = resolve(o, &nu, &optim);
    if (rc) return rc;
    if (o->batch_full) {
        fprintf(stderr, "parity lockstep: --batch full: not with --external (give a number)\n");
        return EXIT_USAGE;
    }
    const lockstep_ext_flags f = {
        .command = o->external, .ulps = o->ulps, .timeout_s = o->timeout,
        .intermediates = o->intermediates, .m = &nu.m, .act = nu.act, .dt = nu.dt,
        .dataset = o->dataset, .init_load = o->init_load, .batch = (size_t)o->batch,
        .chunk = (size_t)o->chunk, .lr = o->lr, .optim = &optim, .seed = o->seed,
        .steps = o->steps, .json = o->json};
    return cmd_lockstep_external(&f);
}

int cmd_lockstep(int argc, char **argv)
{
    lockstep_opts o = {
        .dataset = "fashion-mnist", .model = "mlp:784-256-128-10", .act = "relu",
        .mode = "fast", .dtype = "f32", .epochs = 1, .batch_s = "64", .timeout = 120,
        .chunk = 8, .threads = 1, .lr = 0.01, .seed = 42, .optim = "sgd", .momentum = NAN,
        .beta1 = NAN, .beta2 = NAN, .eps = NAN,
    };
    cli_opt opts[N_LOCKSTEP_FLAGS];
    flag_table(opts, &o);
    int rc = cli_flags("lockstep", argc, argv, opts, &o.help,
                       "parity lockstep --trainer T [--mode fast] [train flags] [--steps K] "
                       "[--json]\n       parity lockstep --external CMD --steps K [train flags] "
                       "[--intermediates] [--ulps FUNC=U,...] [--timeout S] [--json]");
    if (rc >= 0) return rc;
    cli_numerics nu;
    par_optim optim;
    if (o.external) return run_external(&o);
    if (!o.trainer) o.trainer = "serial";
    if ((rc = resolve(&o, &nu, &optim))) return rc;
    int rank = 0, size = 1;
    if (nu.tr->caps & PAR_CAP_RANKS) {
        if ((rc = cli_mpi_launch_or_join(argc, argv, o.ranks, "lockstep", &rank, &size)) >= 0)
            return rc;
    } else if (o.ranks > 1) {
        fprintf(stderr, "parity lockstep: --ranks %d: trainer %s is not an MPI trainer\n", o.ranks,
                nu.tr->name);
        return EXIT_USAGE;
    }
    return cli_mpi_finish(run_check(&o, &nu, &optim, rank, size));
}
