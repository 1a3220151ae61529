// `parity check`: one training step of any single-process trainer recomputed
// in MPFR (verify/check/chk_check.h) and compared tensor by tensor, as a table or
// JSON; `parity check --external CMD` the step of a trainer parity did not
// build (verify/external/ext_check.h); `parity check --math` measures the own
// exp/log/tanh/sigmoid. Exit 0 all pass, 1 a check failed, 2 usage, 3 runtime
// (or the external trainer broke the protocol). Tests: tests/verify/test_check.c,
// tests/external/test_ext_check.sh.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chk_run.h"
#include "cli.h"
#include "cli_mpi_launch.h"
#include "ext_check.h"
#include "par_engine.h"
#include "par_time.h"

typedef struct check_opts {
    const char *dataset, *weights, *samples, *model, *act, *trainer, *mode, *dtype, *fault;
    const char *optim;
    const char *external, *ulps;   // --external CMD, --ulps FUNC=U,...
    double timeout;                // --timeout S (--external)
    int step, batch, chunk, threads, prec, mpfr_threads, points, json, math, no_e2e, help;
    int ranks;     // --ranks R: launch R MPI ranks (mpi, hybrid, root)
    int upscale;   // --upscale S: images resampled to S x S, as parity train does (0: off)
    double lr, momentum, beta1, beta2, eps;   // NAN: not given (the defaults apply)
    uint64_t seed;
} check_opts;

static const char *const HINT_DATA = "run data/fetch.sh (or ci/setup.sh) to install the datasets";

static json_t *jnum(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_REAL_PRECISION(17));
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

// "1.23e-07", "0", "inf": numbers in the table.
static const char *num(char *buf, size_t n, double x)
{
    if (x == 0)
        snprintf(buf, n, "0");
    else if (!isfinite(x))
        snprintf(buf, n, "%s", x != x ? "nan" : "inf");
    else
        snprintf(buf, n, "%.3g", x);
    return buf;
}

// ---- --math -----------------------------------------------------------------------

static int run_math(const check_opts *o)
{
    const size_t p32 = o->points > 0 ? (size_t)o->points : 1000000;
    const size_t p64 = o->points > 0 ? (size_t)o->points * 3 / 5 : 600000;
    chk_math_report r;
    par_status st = chk_math_check(&r, p32, p64, o->mpfr_threads);
    if (st != PAR_OK) return cli_fail("check", st, NULL);
    int bad = 0;
    for (int k = 0; k < r.n_rows; k++)
        bad += !(r.rows[k].max_ulp < 1.0);
    if (o->json) {
        json_t *rows = json_array();
        for (int k = 0; k < r.n_rows; k++) {
            const chk_math_row *w = &r.rows[k];
            char hex[40];
            snprintf(hex, sizeof hex, "%a", w->worst_x);
            json_array_append_new(
                rows, json_pack("{s:s, s:s, s:I, s:o, s:o, s:s, s:f}", "function",
                                chk_fn_name(w->fn), "dtype", par_dtype_name(w->dt), "points",
                                (json_int_t)w->points, "max_ulp", jnum(w->max_ulp), "worst_x",
                                jnum(w->worst_x), "worst_x_hex", hex, "seconds", w->seconds));
        }
        print_json(json_pack("{s:s, s:i, s:i, s:f, s:o, s:s}", "reference", "mpfr", "prec", 128,
                             "threads", r.threads, "seconds", r.seconds, "functions", rows,
                             "verdict", bad ? "FAIL" : "PASS"));
    } else {
        printf("parity check --math: own exp/log/tanh/sigmoid against MPFR (128 bits), "
               "%d threads, %.1f s\n\n",
               r.threads, r.seconds);
        printf("%-8s  %-5s  %9s  %9s  %s\n", "function", "dtype", "points", "max ulp", "worst x");
        for (int k = 0; k < r.n_rows; k++) {
            const chk_math_row *w = &r.rows[k];
            printf("%-8s  %-5s  %9zu  %9.6f  %a\n", chk_fn_name(w->fn), par_dtype_name(w->dt),
                   w->points, w->max_ulp, w->worst_x);
        }
        printf("\nverdict: %s (%s)\n", bad ? "FAIL" : "PASS",
               bad ? "some function is 1 ulp or more off" : "every function within 1 ulp");
    }
    return bad ? EXIT_VERIFY : EXIT_OK;
}

// ---- the step check ------------------------------------------------------------------

static void print_table(const chk_report *r)
{
    char a[32], b[32], c[32], d[32], ix[48];
    int wn = 20;   // the tensor column: as wide as the longest name
    for (size_t k = 0; k < r->n; k++)
        if ((int)strlen(r->t[k].name) > wn) wn = (int)strlen(r->t[k].name);
    printf("%-8s  %-*s  %8s  %9s  %9s  %9s  %9s  %-7s  %s\n", "view", wn, "tensor", "n", "max abs",
           "max rel", "max ulp", "err/bound", "verdict", "worst");
    for (size_t k = 0; k < r->n; k++) {
        const chk_tensor *t = &r->t[k];
        if (k > 0 && t->view != r->t[k - 1].view) printf("\n");
        if (t->worst_err > 0 || t->n_over)
            chk_format_index(ix, sizeof ix, t, t->worst);
        else
            snprintf(ix, sizeof ix, "-");
        printf("%-8s  %-*s  %8zu  %9s  %9s  %9s  %9s  %-7s  %s\n", chk_view_name(t->view), wn,
               t->name, t->n, num(a, sizeof a, t->max_abs), num(b, sizeof b, t->max_rel),
               num(c, sizeof c, t->max_ulp), t->has_bound ? num(d, sizeof d, t->bound_ratio) : "-",
               chk_verdict_name(t->verdict), ix);
    }
}

// The worst element of t; its LOCAL value compared with `local` ("exact":
// MPFR's, "centre": an external trainer's op recomputed in double).
static void print_worst(const char *what, const chk_tensor *t, const char *local)
{
    char ix[48];
    chk_format_index(ix, sizeof ix, t, t->worst);
    const char *vs = t->view == CHK_CONTRACT ? "reference" : t->view == CHK_LOCAL ? local : "exact";
    printf("%s %s %s%s: run %.9g, %s %.9g, |err| %.3g", what, chk_view_name(t->view), t->name, ix,
           t->worst_run, vs, t->worst_exact, t->worst_err);
    if (t->has_bound) printf(", bound %.3g", t->worst_bound);
    printf(", %.3g ulp", t->worst_ulp);
    if (t->n_over)
        printf("; %zu of %zu elements %s", t->n_over, t->n,
               t->view == CHK_CONTRACT ? "differ from the reference" : "over their bound");
    printf("\n");
}

static json_t *tensor_json(const chk_tensor *t)
{
    json_t *shape = json_array(), *index = json_array();
    for (int d = 0; d < t->ndim; d++)
        json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
    if (t->ndim == 2 && t->shape[1]) {
        json_array_append_new(index, json_integer((json_int_t)(t->worst / t->shape[1])));
        json_array_append_new(index, json_integer((json_int_t)(t->worst % t->shape[1])));
    } else {
        json_array_append_new(index, json_integer((json_int_t)t->worst));
    }
    json_t *worst = json_pack(
        "{s:o, s:I, s:o, s:o, s:o, s:o, s:o}", "index", index, "flat", (json_int_t)t->worst, "run",
        jnum(t->worst_run), "exact", jnum(t->worst_exact), "err", jnum(t->worst_err), "ulp",
        jnum(t->worst_ulp), "bound", t->has_bound ? jnum(t->worst_bound) : json_null());
    return json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:s, s:o}", "view",
                     chk_view_name(t->view), "tensor", t->name, "shape", shape, "n",
                     (json_int_t)t->n, "reduction_n", (json_int_t)t->n_red, "n_over",
                     (json_int_t)t->n_over, "max_abs", jnum(t->max_abs), "max_rel",
                     jnum(t->max_rel), "max_ulp", jnum(t->max_ulp), "bound_ratio",
                     t->has_bound ? jnum(t->bound_ratio) : json_null(), "verdict",
                     chk_verdict_name(t->verdict), "worst", worst);
}

typedef struct check_run {
    const check_opts *o;
    const par_dataset *ds;
    const par_model *m;
    const chk_step *s;
    const size_t *idx;
    int epoch, by_step, contract;
    double t_run, t_total;
    int ranks;   // MPI trainers: the world size (rank 0's view is checked)
} check_run;

static void report_json(const check_run *c, const chk_report *r)
{
    const check_opts *o = c->o;
    json_t *tensors = json_array(), *records = json_array();
    for (size_t k = 0; k < r->n; k++)
        json_array_append_new(tensors, tensor_json(&r->t[k]));
    for (size_t s = 0; s < c->s->B; s++)
        json_array_append_new(records, json_integer((json_int_t)c->idx[s]));
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:f, s:I, s:o, s:o, s:o, s:s,"
                  " s:i, s:i, s:b, s:b, s:{s:f, s:f, s:f}, s:s, s:i, s:o, s:s, s:I, s:i}",
                  "dataset", c->ds->name, "model", c->m->spec, "act", o->act, "dtype",
                  par_dtype_name(c->s->dt), "trainer", c->s->trainer, "mode",
                  par_mode_name(c->s->mode), "threads", o->threads, "batch", (json_int_t)c->s->B,
                  "chunk", (json_int_t)c->s->C, "lr", c->s->lr, "seed", (json_int_t)o->seed, "step",
                  c->by_step ? json_integer(o->step > 0 ? o->step : 1) : json_null(), "epoch",
                  c->by_step ? json_integer(c->epoch) : json_null(), "records", records,
                  "internals", c->s->internals, "prec", r->prec, "mpfr_threads", r->threads,
                  "end_to_end", !o->no_e2e, "contract", c->contract, "seconds", "run", c->t_run,
                  "mpfr", r->seconds, "total", c->t_total, "verdict", r->n_fail ? "FAIL" : "PASS",
                  "n_fail", r->n_fail, "tensors", tensors, "optim",
                  par_optim_name(c->s->optim.kind), "optim_update", (json_int_t)c->s->opt_t,
                  "ranks", c->ranks);
    print_json(j);
}

// The worst ulp and relative error of a set of END-TO-END rows (ulp -1: none).
typedef struct e2e_sum {
    double ulp, rel;
} e2e_sum;

static void e2e_add(e2e_sum *a, const chk_tensor *t)
{
    if (t->max_ulp > a->ulp) a->ulp = t->max_ulp;
    if (t->max_rel > a->rel) a->rel = t->max_rel;
}

// "layer3.weight.new", "layer3.bias.new": a weight row (the state rows carry one
// more part, "layer3.weight.m.new", or a batchnorm statistic's name).
static int is_weight_row(const char *name)
{
    int l, n = 0;
    char what[8];
    return sscanf(name, "layer%d.%7[a-z].new%n", &l, what, &n) == 2 && name[n] == '\0' &&
           (strcmp(what, "weight") == 0 || strcmp(what, "bias") == 0);
}

// The new state a step of this run holds: "velocity", "m, v", "running statistics".
static const char *state_names(const chk_step *s, const par_model *m)
{
    static char buf[96];
    buf[0] = '\0';
    for (int i = 0; i < par_optim_n_state(s->optim.kind); i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "",
                 par_optim_state_name(s->optim.kind, i));
    int bn = 0;
    for (int l = 0; l < m->n_layers; l++)
        bn |= m->layers[l].kind == PAR_LAYER_BATCHNORM;
    if (bn)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%sbatchnorm running statistics",
                 buf[0] ? "; " : "");
    return buf;
}

// The table, each failing tensor's worst element, the closest to their
// bounds when none fails, and the END-TO-END summary lines.
static void print_findings(const chk_report *r, const chk_step *s, const par_model *m,
                           const char *local)
{
    print_table(r);
    printf("\n");
    const chk_tensor *worst[2] = {NULL, NULL}; // reductions, elementwise ops
    for (size_t k = 0; k < r->n; k++) {
        const chk_tensor *t = &r->t[k];
        if (t->verdict == CHK_FAIL) print_worst("FAIL", t, local);
        const int e = t->n_red == 0;
        if (t->view == CHK_LOCAL && (!worst[e] || t->bound_ratio > worst[e]->bound_ratio))
            worst[e] = t;
    }
    if (worst[0] && !r->n_fail) print_worst("closest to its bound (reductions):", worst[0], local);
    if (worst[1] && !r->n_fail) print_worst("closest to its bound (elementwise):", worst[1], local);
    // END-TO-END summary: the new weights and biases apart from the new state (the
    // optimizer's velocity or m and v, batchnorm's running statistics), whose
    // relative errors are of another kind (a tiny v divides the step).
    e2e_sum wts = {-1, 0}, state = {-1, 0};
    double loss_ulp = -1;
    for (size_t k = 0; k < r->n; k++) {
        const chk_tensor *t = &r->t[k];
        if (t->view != CHK_E2E) continue;
        const size_t len = strlen(t->name);
        if (len > 4 && strcmp(t->name + len - 4, ".new") == 0)
            e2e_add(is_weight_row(t->name) ? &wts : &state, t);
        if (strcmp(t->name, "loss") == 0) loss_ulp = t->max_ulp;
    }
    if (wts.ulp >= 0)
        printf("END-TO-END: new weights within %.3g ulp (max rel %.3g) of exact %s from the "
               "step's inputs; loss within %.3g ulp\n",
               wts.ulp, wts.rel,
               s->optim.kind == PAR_OPTIM_SGD ? "SGD" : par_optim_name(s->optim.kind), loss_ulp);
    if (state.ulp >= 0)
        printf("END-TO-END: new state (%s) within %.3g ulp (max rel %.3g) of exact\n",
               state_names(s, m), state.ulp, state.rel);
}

static void report_text(const check_run *c, const chk_report *r)
{
    const check_opts *o = c->o;
    const chk_step *s = c->s;
    if (c->by_step)
        printf("parity check: step %d (epoch %d) of %s, %zu records;", o->step > 0 ? o->step : 1,
               c->epoch, c->ds->name, s->B);
    else
        printf("parity check: %zu given records of %s;", s->B, c->ds->name);
    printf(" %s %s, %s, chunk %zu, lr %g, %s", c->m->spec, o->act, par_dtype_name(s->dt), s->C,
           s->lr, par_optim_name(s->optim.kind));
    if (s->optim.kind == PAR_OPTIM_ADAM)
        printf(" beta1 %g beta2 %g eps %g, update %ld", s->optim.beta1, s->optim.beta2,
               s->optim.eps, s->opt_t);
    else if (s->optim.kind != PAR_OPTIM_SGD)
        printf(" momentum %g, update %ld", s->optim.momentum, s->opt_t);
    printf("\n");
    char ranks[48] = "";
    if (c->ranks > 1) snprintf(ranks, sizeof ranks, " per rank, %d ranks (rank 0's view)", c->ranks);
    printf("run: trainer %s, mode %s, %d thread%s%s; activations and deltas from %s\n\n",
           s->trainer, par_mode_name(s->mode), o->threads, o->threads == 1 ? "" : "s", ranks,
           s->internals);
    print_findings(r, s, c->m, "exact");
    printf(
        "verdict: %s (%d of %zu tensors fail; LOCAL: bounds, CONTRACT: bitwise vs reference%s)\n",
        r->n_fail ? "FAIL" : "PASS", r->n_fail, r->n, c->contract ? "" : " not applicable");
    printf("time: run %.2f s, MPFR %.2f s (%d bits, %d threads), total %.2f s\n", c->t_run,
           r->seconds, r->prec, r->threads, c->t_total);
}

enum { N_CHECK_FLAGS = 33 };

static void flag_table(cli_opt *t, check_opts *o)
{
    const cli_opt f[N_CHECK_FLAGS] = {
        {"--dataset", CLI_STR, &o->dataset, "NAME|DIR  dataset of the run (fashion-mnist)"},
        {"--upscale", CLI_INT, &o->upscale, "S         resample the images to S x S, as the run did"},
        {"--weights", CLI_STR, &o->weights,
         "FILE.npz  weights before the step (default: the initial weights of --seed)"},
        {"--step", CLI_INT, &o->step,
         "S         1-based step of `parity train` whose batch is checked (1)"},
        {"--samples", CLI_STR, &o->samples,
         "i,j,k     check these records of the training file instead"},
        {"--seed", CLI_U64, &o->seed,
         "N         seed of shuffling (and of the initial weights) (42)"},
        {"--model", CLI_STR, &o->model, "SPEC      mlp:N0-N1-...-Nk or cnn:CxHxW-... (mlp:784-256-128-10)"},
        {"--act", CLI_STR, &o->act, "relu|sigmoid|tanh  hidden activation (relu)"},
        {"--batch", CLI_INT, &o->batch, "B         samples per step (64)"},
        {"--chunk", CLI_INT, &o->chunk, "C         samples per chunk (8)"},
        {"--lr", CLI_DOUBLE, &o->lr, "LR        learning rate (0.01)"},
        {"--dtype", CLI_STR, &o->dtype, "f32|f64   floating-point type (f32)"},
        {"--optim", CLI_STR, &o->optim, "NAME      sgd, momentum, nesterov or adam (sgd)"},
        {"--momentum", CLI_DOUBLE, &o->momentum, "MU        momentum and nesterov (0.9)"},
        {"--beta1", CLI_DOUBLE, &o->beta1, "B1        adam (0.9)"},
        {"--beta2", CLI_DOUBLE, &o->beta2, "B2        adam (0.999)"},
        {"--eps", CLI_DOUBLE, &o->eps, "EPS       adam (1e-8)"},
        {"--trainer", CLI_STR, &o->trainer,
         "NAME      reference, serial, omp, mpi, hybrid, root or cuda (with nvcc) (reference)"},
        {"--mode", CLI_STR, &o->mode, "exact|fast  (exact)"},
        {"--threads", CLI_INT, &o->threads, "T         OpenMP threads of the trainer (1)"},
        {"--ranks", CLI_INT, &o->ranks, "R         MPI trainers: launch R ranks through mpirun; rank 0's step is checked"},
        {"--prec", CLI_INT, &o->prec, "P         MPFR precision in bits, >= 64 (256)"},
        {"--mpfr-threads", CLI_INT, &o->mpfr_threads,
         "N         OpenMP threads of the checker (0: all cores)"},
        {"--no-e2e", CLI_FLAG, &o->no_e2e,
         "          skip the END-TO-END view (about half the time)"},
        {"--math", CLI_FLAG, &o->math,
         "          check own exp/log/tanh/sigmoid against MPFR instead"},
        {"--points", CLI_INT, &o->points,
         "N         --math: samples per function (f32 1000000, f64 3/5 of it)"},
        {"--json", CLI_FLAG, &o->json, "          print JSON on stdout"},
        {"--help", CLI_FLAG, &o->help, "          this text"},
        {"--fault", CLI_STR, &o->fault,
         "SPEC      TESTS ONLY: inject a fault into the run (counted from its step 1)"},
        {"--external", CLI_STR, &o->external,
         "CMD       check a step of a trainer parity did not build, speaking the step protocol "
         "(docs/external.md)"},
        {"--ulps", CLI_STR, &o->ulps,
         "FUNC=U,.. --external: ulps its exp, log, tanh, sigmoid may be off (1 each)"},
        {"--timeout", CLI_DOUBLE, &o->timeout,
         "S         --external: the longest wait for one answer (120)"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    memcpy(t, f, sizeof f);
}

// The flags that say what is checked, resolved; 0 or the exit code after one line.
static int resolve(const check_opts *o, cli_numerics *nu, par_optim *optim)
{
    const cli_numerics_flags nf = {o->act, o->model, o->mode, o->dtype, o->fault, o->trainer,
                                   o->threads};
    int rc = cli_numerics_resolve("check", &nf, nu);
    if (rc) return rc;
    if (o->fault) par_fault_set(&nu->fault);
    if (!(nu->tr->caps & PAR_CAP_RANKS) && o->ranks > 1) {
        fprintf(stderr, "parity check: --ranks %d: trainer %s is not an MPI trainer\n", o->ranks,
                nu->tr->name);
        return EXIT_USAGE;
    }
    if (o->batch < 1 || o->chunk < 1 || o->threads < 1 || !(o->lr > 0) || o->prec < 64 ||
        o->prec > 1 << 20) {
        fprintf(stderr, "parity check: --batch, --chunk and --threads must be >= 1, --lr > 0, "
                        "--prec 64 to 1048576\n");
        return EXIT_USAGE;
    }
    const cli_optim_flags of = {o->optim, o->momentum, o->beta1, o->beta2, o->eps};
    if ((rc = cli_optim_resolve("check", &of, optim))) return rc;
    if (o->upscale < 0 || o->upscale > 1024) {
        fprintf(stderr, "parity check: --upscale %d: expected 1 to 1024 (0: off)\n", o->upscale);
        return EXIT_USAGE;
    }
    if (o->step == 0) {
        fprintf(stderr, "parity check: --step 0: expected an integer >= 1 (steps count from 1)\n");
        return EXIT_USAGE;
    }
    if (o->samples && o->step > 0) {
        fprintf(stderr, "parity check: --step and --samples both given\n");
        fprintf(stderr, "hint: --step picks the batch of a `parity train` step, --samples gives "
                        "records directly; use one\n");
        return EXIT_USAGE;
    }
    return 0;
}

// The run's dataset (resampled as it was: the resampled images are the
// step's inputs; the resampling itself is data preparation, outside the
// checked step), checked against the model; 0 or an exit code.
static int open_data(par_dataset *ds, const check_opts *o, const par_model *m, par_dtype dt)
{
    par_status st = par_dataset_open(ds, o->dataset, 10);
    if (st != PAR_OK) return cli_fail("check", st, HINT_DATA);
    if (o->upscale > 0) st = par_dataset_upscale(ds, (size_t)o->upscale, dt);
    if (st != PAR_OK) {
        par_dataset_free(ds);
        return cli_fail("check", st, NULL);
    }
    if (ds->train.n_features != m->n_inputs || ds->n_classes != m->n_classes) {
        fprintf(stderr,
                "parity check: --model %s takes %zu inputs and %zu classes, dataset %s "
                "has %zu and %zu\n",
                m->spec, m->n_inputs, m->n_classes, ds->name, ds->train.n_features, ds->n_classes);
        if (ds->train.n_features != m->n_inputs)
            fprintf(stderr, "hint: %s\n", cli_input_hint(m, ds));
        par_dataset_free(ds);
        return EXIT_USAGE;
    }
    return 0;
}

// The hint of a failed check, by where it failed.
static const char *fail_hint(par_status st, chk_run_stage at)
{
    if (at == CHK_RUN_OPTIM_STATE)
        return "--step S > 1 with --optim momentum, nesterov or adam needs the state before the "
               "step: give the ckpt-*.npz of the checkpoint after step S - 1 (--save writes "
               "weights only)";
    if (at == CHK_RUN_SAMPLES)
        return "e.g. --samples 0,17,4242 (0-based records of the training file)";
    return st == PAR_ERR_IO ? "check the --weights path" : NULL;
}

// Checks the step on the open dataset; prints the report (rank 0); the exit code.
static int check_step(const check_opts *o, const cli_numerics *nu, const par_optim *optim,
                      const par_dataset *ds, int rank, int size, double t0)
{
    const chk_run_cfg cfg = {
        .tr = nu->tr, .ds = ds, .m = &nu->m, .dt = nu->dt, .mode = nu->mode, .optim = optim,
        .batch = (size_t)o->batch, .chunk = (size_t)o->chunk, .lr = o->lr,
        .threads = o->threads, .seed = o->seed, .weights = o->weights,
        .step = o->step > 0 ? o->step : 1, .samples = o->samples, .rank = rank,
        .check = {o->prec, o->mpfr_threads, !o->no_e2e}};
    chk_run r;
    const par_status st = chk_run_step(&r, &cfg);
    const check_run c = {o,           ds,         &nu->m, &r.run,         r.idx, r.epoch,
                         !o->samples, r.contract, r.t_run, par_now() - t0, size};
    int rc = EXIT_OK;   // ranks other than 0 report nothing; cli_mpi_finish combines the codes
    if (st != PAR_OK) {
        rc = cli_fail("check", st, fail_hint(st, r.failed));
    } else if (rank == 0) {
        if (o->json)
            report_json(&c, &r.rep);
        else
            report_text(&c, &r.rep);
        rc = r.rep.n_fail ? EXIT_VERIFY : EXIT_OK;
    }
    chk_run_free(&r);
    return rc;
}

// ---- --external -------------------------------------------------------------------

static void ext_text(const check_opts *o, const ext_check_result *r, const par_model *m, int pass)
{
    const chk_step *s = &r->step;
    printf("parity check --external '%s' (world %d): step %d of %s, %zu records; %s %s, %s, "
           "chunk %zu, lr %g, %s",
           r->name, r->world, o->step > 0 ? o->step : 1, o->dataset, s->B, m->spec, o->act,
           par_dtype_name(s->dt), s->C, o->lr, par_optim_name(s->optim.kind));
    if (par_optim_n_state(s->optim.kind)) printf(", update %ld", s->opt_t);
    printf("\n");
    printf("run: %s from parity's state before the step; activations and deltas from %s\n\n",
           o->external, s->internals);
    print_findings(&r->rep, s, m, "centre");
    const ext_worst *w = &r->local_first;
    if (w->step)
        printf("first op outside its bound: %s%s %.9g, centre %.9g, bound %.3g [%s]\n", w->tensor,
               w->index, w->got, w->centre, w->bound, w->op[0] ? w->op : "its update");
    if (r->local_skipped) printf("LOCAL skipped: %s\n", r->local_skipped);
    if (r->signature_flagged)
        printf("its rounding is %.3g times parity's on the same op (%s): not summed in %s (TF32, "
               "bf16 or another narrower arithmetic looks like this)\n",
               r->signature, r->signature_tensor, par_dtype_name(s->dt));
    printf("verdict: %s (%d of %zu tensors fail; LOCAL: its own ops within their bounds, "
           "END-TO-END: within twice the step's any-order bound of MPFR's step)\n",
           pass ? "PASS" : "FAIL", r->rep.n_fail, r->rep.n);
    printf("time: waiting for the trainer %.2f s, parity %.2f s, MPFR %.2f s (%d bits, %d "
           "threads)\n",
           r->seconds_wait, r->seconds_parity, r->rep.seconds, r->rep.prec, r->rep.threads);
}

static void ext_json(const check_opts *o, const ext_check_result *r, const par_model *m, int pass)
{
    const chk_step *s = &r->step;
    json_t *tensors = json_array();
    for (size_t k = 0; k < r->rep.n; k++)
        json_array_append_new(tensors, tensor_json(&r->rep.t[k]));
    const ext_worst *w = &r->local_first;
    json_t *first = w->step ? json_pack("{s:s, s:s, s:s, s:f, s:f, s:f}", "tensor", w->tensor,
                                        "index", w->index, "op", w->op, "trainer", w->got,
                                        "centre", w->centre, "bound", w->bound)
                            : json_null();
    json_t *j = json_pack(
        "{s:{s:s, s:s, s:i}, s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:I, s:i, s:s, s:I, s:i, s:i, "
        "s:b, s:b, s:o, s:o, s:f, s:s, s:b, s:s, s:i, s:o}",
        "external", "command", o->external, "name", r->name, "world", r->world, "dataset",
        o->dataset, "model", m->spec, "act", o->act, "dtype", par_dtype_name(s->dt), "batch",
        (json_int_t)s->B, "chunk", (json_int_t)s->C, "lr", o->lr, "seed", (json_int_t)o->seed,
        "step", o->step > 0 ? o->step : 1, "optim", par_optim_name(s->optim.kind), "optim_update",
        (json_int_t)s->opt_t, "prec", r->rep.prec, "mpfr_threads", r->rep.threads,
        "intermediates", r->intermediates, "layers_checked", r->layers_checked, "local_skipped",
        r->local_skipped ? json_string(r->local_skipped) : json_null(), "local_first_violation",
        first, "signature", r->signature, "signature_tensor", r->signature_tensor,
        "signature_flagged", r->signature_flagged, "verdict", pass ? "PASS" : "FAIL", "n_fail",
        r->rep.n_fail, "tensors", tensors);
    print_json(j);
}

// The first flag given that belongs to parity's own trainers or to a step
// parity picks (--weights, --samples), or NULL.
static const char *own_flag(const check_opts *o)
{
    return o->trainer       ? "--trainer"
           : o->mode        ? "--mode"
           : o->threads != 1 ? "--threads"
           : o->ranks > 0   ? "--ranks"
           : o->fault       ? "--fault"
           : o->upscale     ? "--upscale"
           : o->weights     ? "--weights"
           : o->samples     ? "--samples"
           : o->math        ? "--math"
           : o->no_e2e      ? "--no-e2e"
                            : NULL;
}

// --external: the command is the trainer; flags of parity's own trainers are refused.
static int run_external(check_opts *o)
{
    cli_numerics nu;
    par_optim optim;
    const char *own = own_flag(o);
    if (own) {
        fprintf(stderr, "parity check: %s: not with --external (the command is the trainer; the "
                        "step starts from parity's state)\n", own);
        return EXIT_USAGE;
    }
    o->trainer = "serial";   // parity's trajectory to the step: the reference's bits
    o->mode = "exact";
    int rc = resolve(o, &nu, &optim);
    if (rc) return rc;
    ext_lockstep_job job = {
        .cfg = {.m = &nu.m, .act = nu.act, .dt = nu.dt, .batch = (size_t)o->batch,
                .chunk = (size_t)o->chunk,
                .optim = {(int)optim.kind, o->lr, optim.momentum, optim.beta1, optim.beta2,
                          optim.eps},
                .seed = o->seed, .steps = o->step > 0 ? o->step : 1, .ulps = ext_ulps_default(),
                .proto = {.command = o->external, .timeout_s = o->timeout}},
        .dataset = o->dataset};
    if (o->ulps && ext_ulps_parse_list(&job.cfg.ulps, o->ulps) != PAR_OK)
        return cli_fail("check", PAR_ERR_CONFIG, NULL);
    job.cfg.proto.interrupted = cli_stop_catch();   // Ctrl-C: stop the trainer, clean up
    ext_check_result r;
    int opening = 0;
    const chk_opts co = {o->prec, o->mpfr_threads, 1};
    const par_status st = ext_check_run(&r, &job, &co, &opening);
    cli_stop_release();
    if (st != PAR_OK) {
        ext_check_free(&r);
        return cli_fail("check", st,
                        opening                    ? HINT_DATA
                        : st == PAR_ERR_EXTERNAL ? "docs/external.md says what a trainer must "
                                                   "answer, and in which files"
                                                 : NULL);
    }
    const int pass = !r.rep.n_fail && !r.signature_flagged;
    if (o->json) ext_json(o, &r, &nu.m, pass);
    else ext_text(o, &r, &nu.m, pass);
    ext_check_free(&r);
    return pass ? EXIT_OK : EXIT_VERIFY;
}

int cmd_check(int argc, char **argv)
{
    check_opts o = {
        .dataset = "fashion-mnist", .model = "mlp:784-256-128-10", .act = "relu",
        .dtype = "f32", .timeout = 120, .batch = 64, .chunk = 8,
        .threads = 1, .prec = 256, .lr = 0.01, .seed = 42,
        .step = -1,   // not given (0 is refused: steps count from 1)
        .optim = "sgd", .momentum = NAN, .beta1 = NAN, .beta2 = NAN, .eps = NAN,
    };
    cli_opt opts[N_CHECK_FLAGS];
    flag_table(opts, &o);
    int rc = cli_flags("check", argc, argv, opts, &o.help,
                       "parity check [--dataset D] [--weights W.npz] [--step S | --samples "
                       "i,j,k] [--trainer T --mode M --threads T] [--prec P] [--json]\n"
                       "       parity check --external CMD [--step S] [train flags] [--ulps "
                       "FUNC=U,...] [--json]\n"
                       "       parity check --math [--points N] [--json]");
    if (rc >= 0) return rc;
    if (o.external) return run_external(&o);
    if (!o.trainer) o.trainer = "reference";
    if (!o.mode) o.mode = "exact";
    if (o.math) return run_math(&o);
    cli_numerics nu;
    par_optim optim;
    if ((rc = resolve(&o, &nu, &optim))) return rc;
    // MPI trainers: every rank runs the step (it is collective); rank 0
    // checks its own view of it (gradient, new weights, optimizer state).
    int rank = 0, size = 1;
    if ((nu.tr->caps & PAR_CAP_RANKS) &&
        (rc = cli_mpi_launch_or_join(argc, argv, o.ranks, "check", &rank, &size)) >= 0)
        return rc;
    const double t0 = par_now();
    par_dataset ds;
    if ((rc = open_data(&ds, &o, &nu.m, nu.dt))) return cli_mpi_finish(rc);
    rc = check_step(&o, &nu, &optim, &ds, rank, size, t0);
    par_dataset_free(&ds);
    return cli_mpi_finish(rc);
}
