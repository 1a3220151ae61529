// `parity bisect A B [flags]`: where two runs that should agree part. A and B
// are each one string of `parity train` flags; both run in lockstep in one
// set of processes (verify/bisect/bis_bisect.h), and the first differing step is
// replayed tensor by tensor. `parity bisect --logs a.jsonl b.jsonl [a.npz
// b.npz]` compares two saved step logs, and the weights each run saved after
// the first differing step array by array (runs of two builds or machines,
// which cannot be replayed in one process). `parity bisect --external CMD`
// free-runs a trainer parity did not build against the rounding spread
// (verify/external/ext_free.h). Exit 0 no divergence, 1 divergence, 2 usage,
// 3 runtime error. Tests: tests/verify/test_bisect.c, tests/cli/test_bisect.sh,
// tests/external/test_free.sh.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bis_bisect.h"
#include "cli.h"
#include "cli_mpi_launch.h"
#include "cmd_lockstep_ext.h"
#include "ext_free.h"
#include "par_engine.h"

typedef struct side_opts {
    const char *dataset, *model, *act, *trainer, *mode, *dtype, *fault, *init_load;
    const char *batch_s, *optim;                // --batch B|full, --optim
    int epochs, steps, chunk, threads, ranks, upscale;
    double lr, momentum, beta1, beta2, eps;     // NAN: not given (the defaults apply)
    uint64_t seed;
} side_opts;

enum { N_SIDE_OPTS = 22, MAX_TOKENS = 64 };

// The `parity train` flags a configuration may carry, writing into o.
static void side_table(cli_opt *t, side_opts *o)
{
    const cli_opt s[N_SIDE_OPTS] = {
        {"--trainer", CLI_STR, &o->trainer, "NAME      reference, serial, omp, mpi, hybrid, root, cuda (with nvcc) (serial)"},
        {"--mode", CLI_STR, &o->mode, "exact|fast  (exact)"},
        {"--threads", CLI_INT, &o->threads, "T         OpenMP threads per process (1)"},
        {"--ranks", CLI_INT, &o->ranks, "R         MPI ranks of an MPI trainer (parity launches mpirun)"},
        {"--chunk", CLI_INT, &o->chunk, "C         samples per chunk (8)"},
        {"--lr", CLI_DOUBLE, &o->lr, "LR        learning rate (0.01)"},
        {"--fault", CLI_STR, &o->fault, "SPEC      TESTS ONLY: a deliberate arithmetic fault"},
        {"--dataset", CLI_STR, &o->dataset, "NAME|DIR  same for A and B (fashion-mnist)"},
        {"--model", CLI_STR, &o->model, "SPEC      same for A and B (mlp:784-256-128-10)"},
        {"--act", CLI_STR, &o->act, "relu|sigmoid|tanh  same for A and B (relu)"},
        {"--dtype", CLI_STR, &o->dtype, "f32|f64   same for A and B (f32)"},
        {"--batch", CLI_STR, &o->batch_s, "B|full    same for A and B (64; full: the training split)"},
        {"--upscale", CLI_INT, &o->upscale, "S         resample the images to S x S, same for A and B"},
        {"--optim", CLI_STR, &o->optim, "NAME      sgd, momentum, nesterov or adam, same for A and B (sgd)"},
        {"--momentum", CLI_DOUBLE, &o->momentum, "MU        momentum and nesterov (0.9), same for A and B"},
        {"--beta1", CLI_DOUBLE, &o->beta1, "B1        adam (0.9), same for A and B"},
        {"--beta2", CLI_DOUBLE, &o->beta2, "B2        adam (0.999), same for A and B"},
        {"--eps", CLI_DOUBLE, &o->eps, "EPS       adam (1e-8), same for A and B"},
        {"--seed", CLI_U64, &o->seed, "S         init and shuffle seed, same for A and B (42)"},
        {"--steps", CLI_INT, &o->steps, "N         stop after N steps (0: every step of --epochs)"},
        {"--epochs", CLI_INT, &o->epochs, "N         epochs (1)"},
        {"--init-load", CLI_STR, &o->init_load, "FILE.npz  initial weights of both (default: from --seed)"},
    };
    memcpy(t, s, sizeof s);
}

static void usage(const cli_opt *opts)
{
    cli_usage("parity bisect A B [flags]\n"
              "       parity bisect --logs A.jsonl B.jsonl [A.npz B.npz] [--json]\n\n"
              "A and B are each ONE quoted string of `parity train` flags (trainer, mode,\n"
              "threads, ranks, chunk, lr may differ); the flags after them apply to both.\n"
              "Both run in lockstep on the same batches from the same initial weights; after\n"
              "every step loss, gradient and weights are compared. The first differing step\n"
              "is replayed from the weights before it and every tensor compared in\n"
              "computation order; the first differing element gets MPFR's verdict.\n"
              "e.g. parity bisect \"--trainer serial\" \"--trainer omp --threads 4 --mode fast\" "
              "--steps 200\n"
              "--external: the trainer CMD (docs/external.md) trains N steps on its own from\n"
              "parity's initial weights and batches; its losses and final weights are held to\n"
              "the spread of parity's runs under other reduction orders; leaving it names the\n"
              "first step and checks steps 1..that one in lockstep (exit 3: protocol broken).\n"
              "Exit: 0 no divergence, 1 divergence, 2 usage, 3 runtime error.",
              opts);
}

static int fail_usage(const char *msg, const char *hint)
{
    fprintf(stderr, "parity bisect: %s\n", msg);
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    return EXIT_USAGE;
}

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_REAL_PRECISION(17));
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

// %.9g for f32 values, %.17g for f64, and the exact bits as %a.
static void fmt_val(char *buf, size_t n, double x, par_dtype dt)
{
    snprintf(buf, n, dt == PAR_F32 ? "%.9g (%a)" : "%.17g (%a)", x, x);
}

// ---- --logs ---------------------------------------------------------------------------

// f32 ulps when both are f32 values (an f32 run's log), else f64.
static double log_ulps(double a, double b)
{
    if (!isfinite(a) || !isfinite(b)) return NAN;
    const int f32 = (double)(float)a == a && (double)(float)b == b;
    return bis_ulps(a, b, f32 ? PAR_F32 : PAR_F64);
}

// The weights two runs saved after the first differing step, array by array
// (bis_weights). Returns 0, or an exit code after printing why not: files
// that are not the logs' weights at that step are refused, since their
// differences would point at the wrong step.
static int logs_weights(bis_weights_result *w, const bis_log_result *r, const char *npz_a,
                        const char *npz_b)
{
    par_status st = bis_weights(w, npz_a, npz_b);
    if (st != PAR_OK)
        return cli_fail("bisect", st, "give the .npz each run saved with `parity train --save`");
    const char *path[2] = {npz_a, npz_b}, *got[2] = {w->xxh_a, w->xxh_b};
    const char *want[2] = {r->weights_a, r->weights_b};
    for (int i = 0; i < 2; i++) {
        if (!want[i][0] || strcmp(got[i], want[i]) == 0) continue;
        fprintf(stderr,
                "parity bisect: %s: not the weights of log %c after step %ld (XXH3-128 %s, the "
                "log has %s)\n",
                path[i], 'a' + i, r->step, got[i], want[i]);
        fprintf(stderr, "hint: run that side again with `parity train ... --steps %ld --save %s`\n",
                r->step, path[i]);
        bis_weights_free(w);
        return EXIT_USAGE;
    }
    return 0;
}

static json_t *weights_json(const bis_weights_result *w)
{
    json_t *arr = json_array();
    for (size_t k = 0; k < w->n_arrays; k++) {
        const bis_array_diff *t = &w->arrays[k];
        if (!t->n_diff) continue;
        json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "name", t->name, "shape", t->shape,
                              "elements", (json_int_t)t->count, "differ", (json_int_t)t->n_diff,
                              "index", (json_int_t)t->first, "element", t->index);
        json_object_set_new(o, "a", jnum(t->a));
        json_object_set_new(o, "b", jnum(t->b));
        json_object_set_new(o, "ulps", jnum(t->ulps));
        json_array_append_new(arr, o);
    }
    return arr;
}

static const bis_array_diff *first_differing(const bis_weights_result *w)
{
    for (size_t k = 0; k < w->n_arrays; k++)
        if (w->arrays[k].n_diff) return &w->arrays[k];
    return NULL;
}

// What --logs found: the logs' comparison and, with the weights, theirs.
typedef struct logs_found {
    const bis_log_result *r;
    const bis_weights_result *w;   // with_npz
    int with_npz;
    const bis_array_diff *fd;      // the first differing array (NULL: none or no weights)
    double ulps;                   // of the losses (NAN: none)
} logs_found;

static void logs_json(const logs_found *f)
{
    const bis_log_result *r = f->r;
    json_t *j = json_pack("{s:b, s:I, s:I, s:b}", "diverged", r->diverged, "steps_a",
                          (json_int_t)r->steps_a, "steps_b", (json_int_t)r->steps_b, "digests",
                          r->digests);
    json_object_set_new(j, "step", r->diverged ? json_integer(r->step) : json_null());
    json_object_set_new(j, "epoch", r->diverged && r->epoch >= 0 ? json_integer(r->epoch)
                                                                  : json_null());
    json_object_set_new(j, "what", r->diverged ? json_string(r->what) : json_null());
    json_object_set_new(j, "layer", json_null());
    const char *tensor = !r->diverged                        ? NULL
                         : f->fd                             ? f->fd->name
                         : strcmp(r->what, "weights") == 0 ? "weights"
                         : strcmp(r->what, "length") == 0  ? "length"
                                                             : "loss";
    json_object_set_new(j, "tensor", tensor ? json_string(tensor) : json_null());
    json_object_set_new(j, "index", f->fd ? json_integer((json_int_t)f->fd->first) : json_null());
    json_object_set_new(j, "a", jnum(r->loss_a));
    json_object_set_new(j, "b", jnum(r->loss_b));
    json_object_set_new(j, "ulps", jnum(f->ulps));
    json_object_set_new(j, "closer", json_null());
    json_object_set_new(j, "weights_xxh128_a", r->weights_a[0] ? json_string(r->weights_a)
                                                               : json_null());
    json_object_set_new(j, "weights_xxh128_b", r->weights_b[0] ? json_string(r->weights_b)
                                                               : json_null());
    json_object_set_new(j, "arrays", f->with_npz ? weights_json(f->w) : json_null());
    print_json(j);
}

// The text of --logs (pos: the logs, and the weights with with_npz).
static void logs_text(const logs_found *f, const char *const pos[4])
{
    const bis_log_result *r = f->r;
    printf("logs: a = %s (%ld steps), b = %s (%ld steps), compared by %s\n", pos[0], r->steps_a,
           pos[1], r->steps_b,
           r->digests ? "the XXH3-128 of loss and weights per step" : "the loss per step (bitwise; "
                                                                      "a log has no digests)");
    if (!r->diverged) {
        printf("no divergence: every step agrees\n");
        return;
    }
    if (strcmp(r->what, "length") == 0) {
        printf("first difference at step %ld: %s ends before it (the logs agree up to there)\n",
               r->step, r->steps_a < r->steps_b ? "a" : "b");
        return;
    }
    printf("first difference at step %ld (epoch %d): %s\n", r->step, r->epoch, r->what);
    printf("  loss a = %.17g, b = %.17g", r->loss_a, r->loss_b);
    if (isfinite(f->ulps)) printf(" (%.0f ulps)", f->ulps);
    printf("\n");
    if (r->digests)
        printf("  weights_xxh128 a = %s\n                 b = %s\n", r->weights_a, r->weights_b);
    if (!f->with_npz) {
        printf("hint: replay it in lockstep with `parity bisect A B --steps %ld` to name the "
               "tensor, or give the weights each run saves with --steps %ld --save\n",
               r->step, r->step);
        return;
    }
    const bis_weights_result *w = f->w;
    printf("weights after step %ld: a = %s, b = %s%s\n", r->step, pos[2], pos[3],
           r->digests ? " (the logs' digests at that step)" : "");
    printf("  %zu of %zu arrays differ, in the parameter buffer's order:\n", w->n_differ,
           w->n_arrays);
    for (size_t k = 0; k < w->n_arrays; k++) {
        const bis_array_diff *t = &w->arrays[k];
        if (!t->n_diff) continue;
        printf("  %s %s: %zu of %zu elements differ, first %s: a = %.17g, b = %.17g (%.0f ulps)\n",
               t->name, t->shape, t->n_diff, t->count, t->index, t->a, t->b, t->ulps);
    }
    if (f->fd)
        printf("first differing tensor: %s, element %s (in buffer order; all come from one "
               "step)\n",
               f->fd->name, f->fd->index);
    else
        printf("the weights agree after step %ld: only the loss differs\n", r->step);
}

static int bisect_logs(int argc, char **argv)
{
    int logs = 0, json = 0, help = 0;
    const cli_opt opts[] = {
        {"--logs", CLI_FLAG, &logs, "          compare two `parity train --log` files"},
        {"--json", CLI_FLAG, &json, "          one JSON object on stdout"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[4];
    int n_pos, rc = cli_parse("bisect", argc, argv, 2, opts, pos, 4, &n_pos);
    if (rc) return rc;
    if (help) {
        usage(opts);
        return EXIT_OK;
    }
    if (n_pos != 2 && n_pos != 4)
        return fail_usage("--logs: expected two step logs (and the two runs' .npz weights)",
                          "parity bisect --logs a.jsonl b.jsonl [a.npz b.npz]");
    bis_log_result r;
    par_status st = bis_logs(&r, pos[0], pos[1]);
    if (st != PAR_OK)
        return cli_fail("bisect", st, "give two logs written by `parity train --log FILE`");
    // The weights are compared at a step both logs have, where they part.
    bis_weights_result w = {0};
    const int with_npz = n_pos == 4 && r.diverged && strcmp(r.what, "length") != 0;
    if (with_npz && (rc = logs_weights(&w, &r, pos[2], pos[3]))) return rc;
    const logs_found f = {&r, &w, with_npz, with_npz ? first_differing(&w) : NULL,
                          r.diverged ? log_ulps(r.loss_a, r.loss_b) : NAN};
    if (json)
        logs_json(&f);
    else
        logs_text(&f, pos);
    bis_weights_free(&w);
    return r.diverged ? EXIT_VERIFY : EXIT_OK;
}

// ---- lockstep -------------------------------------------------------------------------

// Splits s (modified) on whitespace into tok[0..n); returns n, -1 if too many.
static int split(char *s, char **tok, int max)
{
    int n = 0;
    for (char *p = strtok(s, " \t\n"); p; p = strtok(NULL, " \t\n")) {
        if (n == max) return -1;
        tok[n++] = p;
    }
    return n;
}

static int streq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

// Flags that must be the same for A and B: the batches, model and start.
static int check_common(const side_opts *a, const side_opts *b)
{
    char msg[400];
    const char *what = NULL;
    char va[200] = "", vb[200] = "";
#define STR_FIELD(f, flag)                                                                  \
    if (!what && !streq(a->f, b->f)) {                                                      \
        what = flag;                                                                        \
        snprintf(va, sizeof va, "%s", a->f ? a->f : "none");                                \
        snprintf(vb, sizeof vb, "%s", b->f ? b->f : "none");                                \
    }
#define NUM_FIELD(f, flag)                                                                  \
    if (!what && a->f != b->f) {                                                            \
        what = flag;                                                                        \
        snprintf(va, sizeof va, "%llu", (unsigned long long)a->f);                          \
        snprintf(vb, sizeof vb, "%llu", (unsigned long long)b->f);                          \
    }
#define REAL_FIELD(f, flag)                                                                 \
    if (!what && a->f != b->f && !(isnan(a->f) && isnan(b->f))) {                           \
        what = flag;                                                                        \
        snprintf(va, sizeof va, "%g", a->f);                                                \
        snprintf(vb, sizeof vb, "%g", b->f);                                                \
    }
    STR_FIELD(dataset, "--dataset")
    STR_FIELD(model, "--model")
    STR_FIELD(act, "--act")
    STR_FIELD(dtype, "--dtype")
    STR_FIELD(init_load, "--init-load")
    STR_FIELD(batch_s, "--batch")
    STR_FIELD(optim, "--optim")
    NUM_FIELD(upscale, "--upscale")
    REAL_FIELD(momentum, "--momentum")
    REAL_FIELD(beta1, "--beta1")
    REAL_FIELD(beta2, "--beta2")
    REAL_FIELD(eps, "--eps")
    NUM_FIELD(seed, "--seed")
    NUM_FIELD(steps, "--steps")
    NUM_FIELD(epochs, "--epochs")
#undef STR_FIELD
#undef NUM_FIELD
#undef REAL_FIELD
    if (!what) return 0;
    snprintf(msg, sizeof msg,
             "%s differs between A (%s) and B (%s): both runs get the same batches from the "
             "same start",
             what, va, vb);
    return fail_usage(msg, "give it once, after A and B; A and B may differ in --trainer, "
                           "--mode, --threads, --ranks, --chunk, --lr, --fault");
}

static const char *side_name(int s) { return s ? "B" : "A"; }

// A and B may differ in --trainer, --mode, --threads, --ranks, --chunk (the same
// mathematics, another order), --fault (a deliberate error) and --lr: another
// step, whose exact value MPFR (bis_exact) computes with a's.
static int lr_differs(const bis_opts *o) { return o->side[0].cfg.lr != o->side[1].cfg.lr; }

// The replay of the first differing step: every tensor, the first
// differing element, MPFR's verdict, the chunk fold.
static void print_replay(const bis_result *r, const bis_opts *o)
{
    const par_dtype dt = o->side[0].cfg.dtype;
    printf("\nreplay of step %ld on both from a's weights before it; tensors in computation "
           "order%s:\n",
           r->step, r->within_tol ? " (bitwise: nothing exceeds --tol/--atol from the same weights)" : "");
    if (!r->internals)
        printf("(activations and deltas not compared: a trainer does not expose them)\n");
    printf("  %-30s %10s %10s %10s\n", "tensor", "elements", "differ", "max ulps");
    int marked = 0;
    for (int i = 0; i < r->n_tensors; i++) {
        const bis_tensor *t = &r->tensors[i];
        const int first = !marked && t->n_diff > 0;
        marked |= first;
        printf("  %-30s %10zu %10zu %10.0f%s\n", t->name, t->n, t->n_diff, t->max_ulps,
               first ? "   <- first" : "");
    }
    if (!r->found) {
        printf("\nthe replay from the same weights agrees everywhere: the difference at step %ld "
               "is not reproducible (nondeterminism?)\n",
               r->step);
        return;
    }
    char a[80], b[80], e[80], pos[64];
    const par_dtype vdt = strcmp(r->tensor, "loss") == 0 && (double)(float)r->a != r->a ? PAR_F64
                                                                                       : dt;
    if (r->col >= 0) snprintf(pos, sizeof pos, "[%ld,%ld]", r->row, r->col);
    else snprintf(pos, sizeof pos, "[%ld]", r->row);
    printf("\nfirst differing element: %s%s (flat index %zu", r->tensor, pos, r->index);
    if (r->param != (size_t)-1) printf(", parameter %zu", r->param);
    if (r->layer >= 0) printf(", layer %d", r->layer);
    printf(") at step %ld\n", r->step);
    fmt_val(a, sizeof a, r->a, vdt);
    fmt_val(b, sizeof b, r->b, vdt);
    printf("  a = %s\n  b = %s\n  difference: %.0f ulp%s of %s\n", a, b, r->ulps,
           r->ulps == 1 ? "" : "s", par_dtype_name(vdt));
    if (r->has_exact) {
        snprintf(e, sizeof e, "%.17g", r->exact);
        printf("  exact (MPFR, %d bits, from the inputs both sides share) = %s\n  closer to "
               "exact: %s%s\n",
               o->prec, e, r->closer == BIS_CLOSER_TIE ? "tie (both equally far)"
                                                     : bis_closer_name(r->closer),
               lr_differs(o) ? " (exact for a's --lr: b computes other mathematics)" : "");
    }
    if (r->chunk_fold_differs) {
        printf("  the per-chunk gradients agree: the chunk fold differs\n");
        for (int s = 0; s < 2; s++)
            if (r->fold_in_order[s] >= 0)
                printf("  %s's value %s the in-order fold of its chunks (contract rule 3)\n",
                       s ? "b" : "a", r->fold_in_order[s] ? "is" : "is NOT");
    }
}

static void print_human(const bis_result *r, const bis_opts *o, const char *cfg[2],
                        const side_opts *so)
{
    printf("a: %s\nb: %s\n", cfg[0][0] ? cfg[0] : "(defaults)", cfg[1][0] ? cfg[1] : "(defaults)");
    char extra[96] = "";
    const par_optim *opt = o->side[0].cfg.optim;
    if (opt && opt->kind != PAR_OPTIM_SGD)
        snprintf(extra, sizeof extra, " --optim %s", par_optim_name(opt->kind));
    if (so->upscale > 0)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --upscale %d", so->upscale);
    printf("both: --dataset %s --model %s --act %s --dtype %s --batch %zu --seed %llu%s; lockstep "
           "(side by side, the same batches), compared %s\n",
           so->dataset, so->model, so->act, so->dtype, o->side[0].cfg.batch,
           (unsigned long long)so->seed, extra,
           o->tol > 0 || o->atol > 0 ? "within --tol/--atol" : "bitwise");
    if (lr_differs(o))
        printf("note: --lr %g (a) and %g (b) compute different mathematics, not the same sums "
               "in another order; MPFR's verdict applies to a's setting only\n",
               o->side[0].cfg.lr, o->side[1].cfg.lr);
    if (o->tol > 0 || o->atol > 0) {
        char floor[80];
        if (o->atol >= 0) snprintf(floor, sizeof floor, "%g", o->atol);
        else snprintf(floor, sizeof floor, "%d ulps of the tensor's largest |value|", BIS_AUTO_ULPS);
        printf("--tol %g --atol %s: |a - b| <= %g max(|a|, |b|) or |a - b| <= %s counts as equal\n",
               o->tol, o->atol >= 0 ? floor : "auto", o->tol, floor);
    }
    if (!r->diverged) {
        printf("no divergence in %ld steps: loss, gradient and weights agree after every step\n",
               r->steps);
        return;
    }
    printf("\nfirst difference at step %ld (epoch %d, batch %ld of the epoch, %zu samples):",
           r->step, r->epoch, r->batch, r->B);
    printf(" loss %s, gradient %s", r->loss_differs ? "differs" : "equal",
           r->grad_differs ? "differs" : "equal");
    if (r->grad_differs) printf(" (parameter %zu first)", r->grad_first);
    printf(", weights %s", r->weights_differs ? "differs" : "equal");
    if (r->weights_differs) printf(" (parameter %zu first)", r->weights_first);
    printf("\n");
    if (r->replayed) print_replay(r, o);
}

static void print_json_result(const bis_result *r, const bis_opts *o,
                              const char *cfg[2])
{
    json_t *j = json_pack("{s:b, s:I, s:s, s:s, s:f, s:i}", "diverged", r->diverged, "steps",
                          (json_int_t)r->steps, "config_a", cfg[0], "config_b", cfg[1], "tol",
                          o->tol, "prec", o->prec);
    const int f = r->diverged && r->found;
    json_object_set_new(j, "atol", o->atol >= 0 ? json_real(o->atol) : json_string("auto"));
    json_object_set_new(j, "same_mathematics", json_boolean(!lr_differs(o)));
    json_object_set_new(j, "step", r->diverged ? json_integer(r->step) : json_null());
    json_object_set_new(j, "epoch", r->diverged ? json_integer(r->epoch) : json_null());
    json_object_set_new(j, "batch", r->diverged ? json_integer(r->batch) : json_null());
    if (r->diverged) {
        json_t *ls = json_pack("{s:b, s:b, s:b, s:o, s:o, s:o, s:o}", "loss", r->loss_differs,
                               "grad", r->grad_differs, "weights", r->weights_differs,
                               "grad_first_param",
                               r->grad_differs ? json_integer((json_int_t)r->grad_first)
                                               : json_null(),
                               "weights_first_param",
                               r->weights_differs ? json_integer((json_int_t)r->weights_first)
                                                  : json_null(),
                               "loss_a", jnum(r->loss_a), "loss_b", jnum(r->loss_b));
        json_object_set_new(j, "lockstep", ls);
    }
    json_object_set_new(j, "layer", f && r->layer >= 0 ? json_integer(r->layer) : json_null());
    json_object_set_new(j, "tensor", f ? json_string(r->tensor) : json_null());
    json_object_set_new(j, "index", f ? json_integer((json_int_t)r->index) : json_null());
    json_object_set_new(j, "row", f ? json_integer(r->row) : json_null());
    json_object_set_new(j, "col", f && r->col >= 0 ? json_integer(r->col) : json_null());
    json_object_set_new(j, "param", f && r->param != (size_t)-1
                                        ? json_integer((json_int_t)r->param)
                                        : json_null());
    json_object_set_new(j, "a", f ? jnum(r->a) : json_null());
    json_object_set_new(j, "b", f ? jnum(r->b) : json_null());
    json_object_set_new(j, "ulps", f ? jnum(r->ulps) : json_null());
    json_object_set_new(j, "exact", f && r->has_exact ? jnum(r->exact) : json_null());
    json_object_set_new(j, "closer", f && r->closer != BIS_CLOSER_NONE
                                         ? json_string(bis_closer_name(r->closer))
                                         : json_null());
    if (r->diverged) {
        json_object_set_new(j, "reproduced", json_boolean(r->found));
        json_object_set_new(j, "within_tol", json_boolean(r->within_tol));
        json_object_set_new(j, "internals_compared", json_boolean(r->internals));
        json_object_set_new(j, "chunk_fold_differs", json_boolean(r->chunk_fold_differs));
        json_t *t = json_array();
        for (int i = 0; i < r->n_tensors; i++) {
            const bis_tensor *x = &r->tensors[i];
            json_t *row = json_pack("{s:s, s:I, s:I, s:o}", "name", x->name, "n",
                                    (json_int_t)x->n, "n_diff", (json_int_t)x->n_diff,
                                    "max_ulps", jnum(x->max_ulps));
            if (x->n_diff) json_object_set_new(row, "first", json_integer((json_int_t)x->first));
            if (x->first_chunk >= 0)
                json_object_set_new(row, "first_chunk", json_integer(x->first_chunk));
            json_array_append_new(t, row);
        }
        json_object_set_new(j, "tensors", t);
    }
    print_json(j);
}

// A and B: the common flags (base), then each string's own flags over them
// (so[s] points into text[s], which the caller frees); the flags both must
// share checked. 0 or the exit code.
static int parse_sides(side_opts so[2], char *text[2], const side_opts *base, char **argv)
{
    so[0] = so[1] = *base;
    text[0] = strdup(argv[2]);
    text[1] = strdup(argv[3]);
    if (!text[0] || !text[1]) return EXIT_RUNTIME;
    for (int s = 0; s < 2; s++) {
        char *tok[MAX_TOKENS];
        const char *pos[1];
        int n_pos;
        const int n = split(text[s], tok, MAX_TOKENS);
        cli_opt t[N_SIDE_OPTS + 1];
        side_table(t, &so[s]);
        t[N_SIDE_OPTS] = (cli_opt){NULL, CLI_FLAG, NULL, NULL};
        if (n < 0) return fail_usage("a configuration has more than 64 words", NULL);
        const int rc = cli_parse("bisect", n, tok, 0, t, pos, 0, &n_pos);
        if (rc) return rc;
    }
    return check_common(&so[0], &so[1]);
}

// What both sides share (check_common): the batch, the optimizer, the
// model; 0 or the exit code.
static int resolve_shared(const side_opts *so, int *batch, int *batch_full, par_optim *optim,
                          par_model *m)
{
    int rc = cli_batch_parse("bisect", so->batch_s, batch, batch_full);
    const cli_optim_flags of = {so->optim, so->momentum, so->beta1, so->beta2, so->eps};
    if (rc == 0) rc = cli_optim_resolve("bisect", &of, optim);
    if (rc == 0 && (so->upscale < 0 || so->upscale > 1024))
        rc = fail_usage("--upscale: expected a side of 1 to 1024 (0: off)", NULL);
    if (rc) return rc;
    par_act act;
    par_status st = par_act_parse(&act, so->act);
    if (st == PAR_OK) st = par_model_parse(m, so->model, act);
    if (st != PAR_OK) return cli_fail("bisect", st, "run 'parity bisect --help'");
    return 0;
}

// Each side's mode, fault and trainer, checked against its flags (and the
// dtype, shared); 0 or the exit code.
static int resolve_sides(const side_opts so[2], int batch, par_mode mode[2], par_fault fault[2],
                         const par_trainer_ops *tr[2], par_dtype *dt)
{
    par_status st = PAR_OK;
    for (int s = 0; s < 2 && st == PAR_OK; s++) {
        st = par_mode_parse(&mode[s], so[s].mode);
        memset(&fault[s], 0, sizeof fault[s]);
        if (st == PAR_OK && so[s].fault) st = par_fault_parse(&fault[s], so[s].fault);
    }
    if (st != PAR_OK) return cli_fail("bisect", st, "run 'parity bisect --help'");
    if (strcmp(so[0].dtype, "f64") == 0) *dt = PAR_F64;
    else if (strcmp(so[0].dtype, "f32") != 0)
        return fail_usage("--dtype: expected f32 or f64", NULL);
    for (int s = 0; s < 2; s++) {
        char msg[300];
        tr[s] = par_trainer_find(so[s].trainer);
        if (!tr[s]) {
            snprintf(msg, sizeof msg, "%s: --trainer '%s': expected reference, serial, omp, mpi, "
                     "hybrid or root", side_name(s), so[s].trainer);
            return fail_usage(msg, "mpi, hybrid and root need a build with -DPARITY_MPI=ON");
        } else if (so[s].epochs < 1 || batch < 1 || so[s].chunk < 1 || so[s].threads < 1 ||
                   !(so[s].lr > 0)) {
            return fail_usage("--epochs, --batch, --chunk and --threads must be >= 1 and --lr > 0",
                              NULL);
        } else if (so[s].fault && strcmp(tr[s]->name, "reference") == 0) {
            snprintf(msg, sizeof msg, "%s: --fault '%s': trainer reference takes no faults (only "
                     "serial, omp, mpi, hybrid and root do)", side_name(s), so[s].fault);
            return fail_usage(msg, "drop --fault, or give that side --trainer serial");
        } else if (so[s].threads > 1 && !(tr[s]->caps & PAR_CAP_THREADS)) {
            snprintf(msg, sizeof msg, "%s: --threads %d: trainer %s runs one thread",
                     side_name(s), so[s].threads, tr[s]->name);
            return fail_usage(msg, "use --trainer omp or hybrid for threads");
        } else if (so[s].ranks > 1 && !(tr[s]->caps & PAR_CAP_RANKS)) {
            snprintf(msg, sizeof msg, "%s: --ranks %d: trainer %s is not an MPI trainer",
                     side_name(s), so[s].ranks, tr[s]->name);
            return fail_usage(msg, "use --trainer mpi, hybrid or root");
        }
    }
    return 0;
}

static int ranks_of(const side_opts *so) { return so->ranks > 1 ? so->ranks : 1; }

// Ranks: one set of processes runs both sides; MPI trainers span all of
// them. Relaunches under mpirun when a side asks for ranks and none run
// (*relaunched: the exit code returned is the relaunch's failure); joins the
// job when one runs (*use_mpi, *rank, *size). 0 or the exit code.
static int join_ranks(int argc, char **argv, const side_opts so[2], const par_trainer_ops *tr[2],
                      int *relaunched, int *use_mpi, int *rank, int *size)
{
    const int mpi[2] = {(tr[0]->caps & PAR_CAP_RANKS) != 0, (tr[1]->caps & PAR_CAP_RANKS) != 0};
    const int launched = cli_mpi_under_launcher();
    int R = 1;
    for (int s = 0; s < 2; s++)
        if (mpi[s] && so[s].ranks > R) R = so[s].ranks;
    if (mpi[0] && mpi[1] && !launched && ranks_of(&so[0]) != ranks_of(&so[1])) {
        char msg[300];
        snprintf(msg, sizeof msg, "A runs %d MPI ranks and B %d: both run in one set of "
                 "processes, so only one rank count > 1 is supported",
                 ranks_of(&so[0]), ranks_of(&so[1]));
        return fail_usage(msg, "give both MPI configurations the same --ranks (a single-process "
                               "configuration runs on every rank)");
    }
    if ((mpi[0] || mpi[1]) && R > 1 && !launched) {
        *relaunched = 1;
        // Exit 1 is a result here, not a failure: no "process returned non-zero" banner.
        setenv("OMPI_MCA_orte_execute_quiet", "1", 0);
        return cli_mpi_relaunch(argc, argv, R);
    }
    *use_mpi = mpi[0] || mpi[1] || launched;
    if (*use_mpi && cli_mpi_start(rank, size) != PAR_OK) {
        *use_mpi = 0;
        return cli_fail("bisect", PAR_ERR_MPI, NULL);
    }
    for (int s = 0; s < 2 && *use_mpi; s++)
        if (mpi[s] && so[s].ranks > 0 && so[s].ranks != *size) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s: --ranks %d but the job has %d ranks", side_name(s),
                     so[s].ranks, *size);
            return *rank == 0 ? fail_usage(msg, "let parity launch mpirun itself, or give the "
                                                "same --ranks")
                              : EXIT_USAGE;
        }
    return 0;
}

// The hint of a failed run, by where it failed; the exit code.
static int run_failed(par_status st, bis_run_stage at, int rank)
{
    switch (at) {
    case BIS_RUN_DATA:
        return cli_fail("bisect", st, "run data/fetch.sh (or ci/setup.sh) to install the datasets");
    case BIS_RUN_BATCH:
        return cli_fail("bisect", st, "give a smaller --batch, or --batch full");
    case BIS_RUN_LOCKSTEP:
        if (rank != 0) return st == PAR_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;
        return cli_fail("bisect", st, st == PAR_ERR_NUMERIC ? "lower --lr" : NULL);
    default:
        return cli_fail("bisect", st, NULL);
    }
}

// Both sides in lockstep (bis_run), the result printed on rank 0; the exit code.
static int run_sides(bis_opts *o, const bis_data *d, const char *cfg[2], const side_opts *so,
                     int json, int rank)
{
    bis_result *r = malloc(sizeof *r);
    bis_run_stage at = BIS_RUN_LOCKSTEP;
    const par_status st = r ? bis_run(r, o, d, &at)
                            : par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    int rc;
    if (st != PAR_OK) {
        rc = run_failed(st, at, rank);
    } else {
        if (rank == 0 && json) print_json_result(r, o, cfg);
        else if (rank == 0) print_human(r, o, cfg, so);
        rc = r->diverged ? EXIT_VERIFY : EXIT_OK;
    }
    free(r);
    return rc;
}

// The two sides, resolved, relaunched or joined to their ranks, run; the exit code.
static int bisect_sides(int argc, char **argv, const side_opts so[2], double tol, double atol,
                        int prec, int json)
{
    int batch = 0, batch_full = 0, relaunched = 0, use_mpi = 0, rank = 0, size = 1;
    par_optim optim = par_optim_default(PAR_OPTIM_SGD);
    par_model m;
    par_dtype dt = PAR_F32;
    par_mode mode[2];
    par_fault fault[2];
    const par_trainer_ops *tr[2] = {NULL, NULL};
    int rc = resolve_shared(&so[0], &batch, &batch_full, &optim, &m);
    if (rc == 0) rc = resolve_sides(so, batch, mode, fault, tr, &dt);
    if (rc == 0) rc = join_ranks(argc, argv, so, tr, &relaunched, &use_mpi, &rank, &size);
    if (rc || relaunched) return use_mpi ? cli_mpi_finish(rc) : rc;
    bis_opts o = {.seed = so[0].seed, .epochs = so[0].epochs, .max_steps = so[0].steps,
                  .tol = tol, .atol = isnan(atol) ? BIS_ATOL_AUTO : atol, .prec = prec};
    for (int s = 0; s < 2; s++) {
        o.side[s].ops = tr[s];
        o.side[s].cfg = (par_run_cfg){.model = &m, .dtype = dt, .mode = mode[s],
                                      .batch = (size_t)batch, .chunk = (size_t)so[s].chunk,
                                      .lr = so[s].lr, .threads = so[s].threads,
                                      .fault = &fault[s], .optim = &optim};
    }
    const bis_data d = {so[0].dataset, so[0].upscale, batch_full, so[0].init_load};
    const char *cfg[2] = {argv[2], argv[3]};
    rc = run_sides(&o, &d, cfg, &so[0], json, rank);
    return use_mpi ? cli_mpi_finish(rc) : rc;
}

// ---- --external: a trainer parity did not build, free-running ----------------------

static void free_json(const ext_free_result *r)
{
    json_t *mem = json_array();
    for (int k = 0; k < r->members; k++) json_array_append_new(mem, json_string(r->member[k]));
    json_t *j = json_pack(
        "{s:s, s:i, s:I, s:o, s:s, s:o, s:f, s:I, s:o, s:o, s:f, s:f, s:f}", "trainer", r->name,
        "world", r->world, "steps", (json_int_t)r->steps, "spread", mem, "verdict",
        r->within ? "within" : "left", "first_step",
        r->first_step ? json_integer(r->first_step) : json_null(), "worst_loss_ratio",
        r->worst_loss_ratio, "worst_loss_step", (json_int_t)r->worst_loss_step, "tensor_step",
        r->tensor_step ? json_integer(r->tensor_step) : json_null(), "first_tensor",
        r->tensor_step ? json_pack("{s:s, s:f, s:f}", "tensor", r->first_tensor, "diff",
                                   r->tensor_diff, "allowed", r->tensor_limit)
                       : json_null(), "worst_tensor_ratio",
        r->worst_tensor_ratio, "seconds_trainer", r->seconds_trainer, "seconds_parity",
        r->seconds_parity);
    json_object_set_new(j, "worst_spread_ratio", jnum(r->worst_spread_ratio));
    json_object_set_new(j, "worst_tensor", json_pack("{s:s, s:I}", "tensor", r->worst_tensor,
                                                     "step", (json_int_t)r->worst_tensor_step));
    if (r->first_step)
        json_object_set_new(j, "first_loss", json_pack("{s:o, s:o, s:o, s:o}", "trainer",
                                                       jnum(r->first_loss), "reference",
                                                       jnum(r->first_ref), "lo",
                                                       jnum(r->first_lo), "hi", jnum(r->first_hi)));
    json_object_set_new(j, "lockstep", r->lockstep_ran ? ext_lockstep_json(&r->lockstep)
                                                       : json_null());
    print_json(j);
}

static void free_human(const ext_free_result *r, par_dtype dt)
{
    printf("bisect external '%s' (world %d), %ld steps, against parity's reference and %d runs "
           "under other orders (", r->name, r->world, r->steps, r->members);
    for (int k = 0; k < r->members; k++) printf("%s%s", k ? ", " : "", r->member[k]);
    printf("): loss worst %.3g of its band (step %ld), weights worst %.3g of their spread and "
           "bound (%s, step %ld; %.3g times the spread alone); its steps took %.3g s: %s\n",
           r->worst_loss_ratio, r->worst_loss_step, r->worst_tensor_ratio, r->worst_tensor,
           r->worst_tensor_step, r->worst_spread_ratio, r->seconds_trainer,
           r->within ? "within rounding spread" : "LEFT the rounding spread");
    const int g = dt == PAR_F32 ? 9 : 17;
    if (r->first_step)
        printf("first step outside: step %ld, loss %.*g where rounding spreads it over "
               "[%.*g, %.*g] (reference %.*g)\n", r->first_step, g, r->first_loss, g,
               r->first_lo, g, r->first_hi, g, r->first_ref);
    if (r->first_tensor[0])
        printf("first weights outside: after step %ld, %s, max |diff| from the reference %.3g "
               "where the spread and the step's bound allow %.3g\n", r->tensor_step,
               r->first_tensor, r->tensor_diff, r->tensor_limit);
    if (r->lockstep_ran) {
        printf("narrowing in lockstep, steps 1..%ld:\n", r->lockstep.steps);
        cmd_lockstep_ext_print(&r->lockstep, dt);
    }
}

// The train flags of --external, resolved into f (m, act, dt, optim: the
// caller's); 0 or the exit code.
static int external_flags(const side_opts *o, lockstep_ext_flags *f, par_model *m,
                          par_optim *optim)
{
    const struct { const char *flag; int given; } own[] = {
        {"--trainer", o->trainer != NULL}, {"--mode", o->mode != NULL},
        {"--ranks", o->ranks > 0}, {"--threads", o->threads != 1},
        {"--fault", o->fault != NULL}, {"--upscale", o->upscale != 0},
        {"--epochs", o->epochs != 1}};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (own[i].given) {
            char msg[120];
            snprintf(msg, sizeof msg, "%s: not with --external (the command is the trainer)",
                     own[i].flag);
            return fail_usage(msg, NULL);
        }
    if (o->steps < 1 || !(f->timeout_s > 0) || o->chunk < 1 || !(o->lr > 0))
        return fail_usage("--external needs --steps N >= 1, --timeout > 0, --chunk >= 1 and "
                          "--lr > 0", NULL);
    int batch, full;
    int rc = resolve_shared(o, &batch, &full, optim, m);
    if (rc) return rc;
    if (full) return fail_usage("--batch full: not with --external (give a number)", NULL);
    if (strcmp(o->dtype, "f32") != 0 && strcmp(o->dtype, "f64") != 0)
        return fail_usage("--dtype: expected f32 or f64", NULL);
    f->dt = strcmp(o->dtype, "f64") == 0 ? PAR_F64 : PAR_F32;
    if (par_act_parse(&f->act, o->act) != PAR_OK) return cli_fail("bisect", PAR_ERR_CONFIG, NULL);
    f->m = m;
    f->dataset = o->dataset;
    f->init_load = o->init_load;
    f->batch = (size_t)batch;
    f->chunk = (size_t)o->chunk;
    f->lr = o->lr;
    f->optim = optim;
    f->seed = o->seed;
    f->steps = o->steps;
    return 0;
}

static int bisect_external(int argc, char **argv, const side_opts *base)
{
    side_opts o = *base;
    o.trainer = o.mode = NULL;
    lockstep_ext_flags f = {.timeout_s = 120};
    cli_opt opts[N_SIDE_OPTS + 6];
    side_table(opts, &o);
    const cli_opt extra[] = {
        {"--external", CLI_STR, &f.command, NULL},
        {"--intermediates", CLI_FLAG, &f.intermediates, NULL},
        {"--ulps", CLI_STR, &f.ulps, NULL}, {"--timeout", CLI_DOUBLE, &f.timeout_s, NULL},
        {"--json", CLI_FLAG, &f.json, NULL}, {NULL, CLI_FLAG, NULL, NULL}};
    memcpy(opts + N_SIDE_OPTS, extra, sizeof extra);
    const char *pos[1];
    int n_pos;
    int rc = cli_parse("bisect", argc, argv, 2, opts, pos, 0, &n_pos);
    if (rc) return rc;
    par_model m;
    par_optim optim;
    if ((rc = external_flags(&o, &f, &m, &optim))) return rc;
    ext_lockstep_job job;
    ext_free_result r;
    if (!rc) rc = cmd_lockstep_ext_job(&job, &f);
    if (!rc) rc = cmd_lockstep_ext_run("bisect", &job, ext_free_fn, &r);
    if (rc) return rc;
    if (f.json) free_json(&r);
    else free_human(&r, f.dt);
    return r.within ? EXIT_OK : EXIT_VERIFY;
}

// With --external anywhere: its help (opts: bisect's table) or its run;
// without: -1.
static int external_or_not(int argc, char **argv, const cli_opt *opts, const side_opts *base)
{
    int ext = 0, help = 0;
    for (int i = 2; i < argc; i++) {
        ext |= strcmp(argv[i], "--external") == 0;
        help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    }
    if (ext && help) usage(opts);
    return !ext ? -1 : help ? EXIT_OK : bisect_external(argc, argv, base);
}

int cmd_bisect(int argc, char **argv)
{
    side_opts base = {
        .dataset = "fashion-mnist", .model = "mlp:784-256-128-10", .act = "relu",
        .trainer = "serial", .mode = "exact", .dtype = "f32", .epochs = 1, .batch_s = "64",
        .chunk = 8, .threads = 1, .lr = 0.01, .seed = 42, .optim = "sgd", .momentum = NAN,
        .beta1 = NAN, .beta2 = NAN, .eps = NAN,
    };
    double tol = 0, atol = NAN;   // atol NaN: not given (the derived floor)
    int json = 0, prec = 256, help = 0, logs = 0, ext_flag = 0;
    const char *ext_cmd = NULL, *ext_str = NULL;
    double ext_timeout = NAN;
    cli_opt opts[N_SIDE_OPTS + 11];
    side_table(opts, &base);
    const cli_opt extra[] = {
        {"--tol", CLI_DOUBLE, &tol, "REL       equal within |a - b| <= REL max(|a|, |b|) (0: bitwise)"},
        {"--atol", CLI_DOUBLE, &atol, "ABS       and a floor: a difference counts only when |a - b| exceeds\n"
         "                   both REL max(|a|, |b|) and ABS (default with --tol: 4 ulps of the\n"
         "                   tensor's largest |value| on either side, so 2.9e-11 vs 0 among\n"
         "                   values near 1e-2 is equal; without --tol: 0, bitwise)"},
        {"--prec", CLI_INT, &prec, "BITS      MPFR precision of the exact value (256)"},
        {"--json", CLI_FLAG, &json, "          one JSON object on stdout"},
        {"--logs", CLI_FLAG, &logs, "          compare two step logs instead (see above)"},
        {"--external", CLI_STR, &ext_cmd, "CMD       free-run a trainer parity did not build against the rounding spread"},
        {"--intermediates", CLI_FLAG, &ext_flag, "          --external: its lockstep asks it for its gradients too"},
        {"--ulps", CLI_STR, &ext_str, "FUNC=U,.. --external: ulps its exp, log, tanh, sigmoid may be off (1 each)"},
        {"--timeout", CLI_DOUBLE, &ext_timeout, "S         --external: the longest wait for one answer, the whole run's included (120)"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    memcpy(opts + N_SIDE_OPTS, extra, sizeof extra);
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--logs") == 0) return bisect_logs(argc, argv);
    int rc;
    if ((rc = external_or_not(argc, argv, opts, &base)) >= 0) return rc;
    if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        usage(opts);
        return EXIT_OK;
    }
    if (argc < 4)
        return fail_usage("expected two run configurations A and B, e.g. "
                          "parity bisect \"--trainer serial\" \"--trainer omp --threads 2\"",
                          "run 'parity bisect --help'");
    // `bisect "--trainer serial" --steps 5`: the second word is a flag of both runs
    // ("--steps", not a quoted configuration such as "--steps=5 --trainer omp").
    for (int k = 0; opts[k].name; k++)
        if (strcmp(argv[3], opts[k].name) == 0 &&
            (opts[k].kind != CLI_FLAG || k >= N_SIDE_OPTS)) {
            char msg[200];
            snprintf(msg, sizeof msg, "configuration B is missing: '%s' after A is a flag of "
                     "both runs", argv[3]);
            return fail_usage(msg, "give A and B first, each one quoted string, e.g. parity "
                                   "bisect \"--trainer serial\" \"--trainer omp\" --steps 5 "
                                   "(\"\" for the defaults)");
        }
    const char *pos[1];
    int n_pos;
    rc = cli_parse("bisect", argc, argv, 4, opts, pos, 0, &n_pos);
    if (rc) return rc;
    if (help) {
        usage(opts);
        return EXIT_OK;
    }
    if (!(tol >= 0) || prec < 64) return fail_usage("--tol must be >= 0 and --prec >= 64", NULL);
    if (ext_flag || ext_str || ext_timeout == ext_timeout)
        return fail_usage("--intermediates, --ulps and --timeout go with --external", NULL);
    if (atol < 0) {
        char msg[100];
        snprintf(msg, sizeof msg, "--atol %g: expected a number >= 0", atol);
        return fail_usage(msg, "leave it out for the default floor (4 ulps of each tensor's largest |value|)");
    }
    side_opts so[2];
    char *text[2] = {NULL, NULL};
    rc = parse_sides(so, text, &base, argv);
    if (rc == 0) rc = bisect_sides(argc, argv, so, tol, atol, prec, json);
    free(text[0]);
    free(text[1]);
    return rc;
}
