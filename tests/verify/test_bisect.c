// Tests of `parity bisect`'s library (verify/bisect/bis_bisect.h), single process:
// faults injected at a known step (ulp, swap, half, skip) are found there,
// with the tensor and element an independent run of the trainers names, in
// an MLP and in a CNN's conv layers; identical configs agree; --tol; the MPFR
// verdict; step logs; bis_run, which opens the data and the initial weights
// `parity bisect` runs on.
// Run: ctest -R test_bisect (MPI configs: tests/cli/test_bisect.sh mpi).
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bis_bisect.h"
#include "par_engine.h"
#include "par_fixtures.h"
#include "par_hash.h"
#include "par_log.h"

enum { STEPS = 4, BATCH = 64 };
static const uint64_t SEED = 7;
static par_model M;
static par_dataset DS;
static void *INIT32, *INIT64;
static const par_fault NO_FAULT = {PAR_FAULT_NONE, 0, 0, 0};

static par_run_cfg cfg_of(par_dtype dt, par_mode mode, int threads, size_t chunk, double lr,
                          const par_fault *f)
{
    return (par_run_cfg){.model = &M,
                         .dtype = dt,
                         .mode = mode,
                         .batch = BATCH,
                         .chunk = chunk,
                         .lr = lr,
                         .threads = threads,
                         .init_params = dt == PAR_F32 ? INIT32 : INIT64,
                         .fault = f ? f : &NO_FAULT};
}

static par_run_cfg plain(int threads) { return cfg_of(PAR_F32, PAR_MODE_EXACT, threads, 8, 0.01, NULL); }

static par_status bisect(bis_result *r, const char *ta, par_run_cfg ca, const char *tb,
                         par_run_cfg cb, double tol)
{
    const bis_opts o = {{{par_trainer_find(ta), ca}, {par_trainer_find(tb), cb}}, &DS, SEED,
                              1, STEPS, tol, 256, 0};
    return bis_lockstep(r, &o);
}

static par_fault fault(const char *spec)
{
    par_fault f;
    if (par_fault_parse(&f, spec) != PAR_OK) abort();
    return f;
}

// The oracle: `trainer` alone for k steps on the batches bisect uses; copies
// the gradient of step k and (engine trainers) layer l's output of step k.
static void run_k(const char *trainer, par_run_cfg cfg, int k, float *g, int l, float *out)
{
    const par_trainer_ops *ops = par_trainer_find(trainer);
    void *state;
    size_t *order;
    float *x = malloc(BATCH * 784 * sizeof *x);
    int32_t labels[BATCH];
    if (!x || ops->create(&cfg, &state) != PAR_OK || par_epoch_order(&order, DS.n_train, SEED, 0))
        abort();
    double loss;
    for (int s = 0; s < k; s++) {
        par_data_gather(&DS.train, order + (size_t)s * BATCH, BATCH, PAR_F32, x, labels);
        const par_batch b = {.x = x, .labels = labels, .B = BATCH};
        if (ops->step(state, &b, &loss) != PAR_OK) abort();
    }
    const void *gp;
    if (ops->grad(state, &gp) != PAR_OK) abort();
    memcpy(g, gp, M.n_params * sizeof *g);
    if (out) memcpy(out, ((par_engine *)state)->a[l + 1], BATCH * M.layers[l].n_out * sizeof *out);
    ops->destroy(state);
    free(order);
    free(x);
}

static size_t offset_of(const char *view)
{
    for (int v = 0; v < M.n_views; v++)
        if (strcmp(M.views[v].name, view) == 0) return M.views[v].offset;
    abort();
}

// Every tensor before the first differing one agrees.
static int clean_before_first(const bis_result *r)
{
    for (int i = 0; i < r->n_tensors; i++) {
        if (r->tensors[i].n_diff) return strncmp(r->tensors[i].name, r->tensor,
                                                 strcspn(r->tensors[i].name, "*")) == 0;
    }
    return 0;
}

static void show(const bis_result *r)
{
    printf("  step %ld tensor %s layer %d index %zu [%ld,%ld] param %zu a %.9g b %.9g ulps %.0f "
           "exact %.17g closer %s fold %d (%d %d)\n",
           r->step, r->tensor, r->layer, r->index, r->row, r->col, r->param, r->a, r->b,
           r->ulps, r->exact, bis_closer_name(r->closer), r->chunk_fold_differs,
           r->fold_in_order[0], r->fold_in_order[1]);
}

static void test_agree(void)
{
    bis_result r;
    par_status st = bisect(&r, "serial", plain(1), "serial", plain(1), 0);
    par_check(st == PAR_OK && !r.diverged && r.steps == STEPS, "serial vs serial: no divergence");
    st = bisect(&r, "serial", plain(1), "omp", plain(2), 0);
    par_check(st == PAR_OK && !r.diverged && r.steps == STEPS, "serial vs omp T=2: no divergence");
    st = bisect(&r, "reference", plain(1), "omp", plain(3), 0);
    par_check(st == PAR_OK && !r.diverged, "reference vs omp T=3: no divergence");
}

// ulp:K:P on a parameter whose gradient at step K is not 0. The exact value
// must lie within max_ulps of the run's (0: any distance; a conv gradient
// sums batch x positions terms, whose cancellation can take it further).
static void test_ulp(const char *name, size_t p, int K, double max_ulps)
{
    float *g = malloc(M.n_params * sizeof *g);
    run_k("serial", plain(1), K, g, 0, NULL);
    char what[160];
    snprintf(what, sizeof what, "%s: gradient of parameter %zu at step %d is not 0 (%g)", name, p,
             K, (double)g[p]);
    par_check(g[p] != 0, what);
    char spec[64];
    snprintf(spec, sizeof spec, "ulp:%d:%zu", K, p);
    const par_fault f = fault(spec);
    bis_result r;
    const par_status st = bisect(&r, "serial", plain(1), "omp",
                                 cfg_of(PAR_F32, PAR_MODE_EXACT, 2, 8, 0.01, &f), 0);
    int v = 0;
    while (v + 1 < M.n_views && M.views[v + 1].offset <= p) v++;
    const par_view *vw = &M.views[v];
    char tensor[48];
    snprintf(tensor, sizeof tensor, "%s.grad", vw->name);
    const size_t idx = p - vw->offset;
    // Rows of the weight: (n_out, n_in) dense, (c_out, c_in K K) conv.
    const size_t width = vw->ndim == 4 ? vw->shape[1] * vw->shape[2] * vw->shape[3] : vw->shape[1];
    const int ok = st == PAR_OK && r.diverged && r.step == K && r.grad_differs &&
                   r.grad_first == p && r.found && strcmp(r.tensor, tensor) == 0 &&
                   r.index == idx && r.param == p && r.row == (long)(idx / width) &&
                   r.col == (long)(idx % width) && r.ulps == 1 &&
                   (float)r.b == nextafterf((float)r.a, INFINITY) && (float)r.a == g[p];
    snprintf(what, sizeof what, "%s: %s found at step %d, %s[%zu,%zu]", name, spec, K, tensor,
             idx / width, idx % width);
    if (!par_check(ok && clean_before_first(&r), what)) show(&r);
    // MPFR: the exact sum is within a few ulps of both; a verdict is given.
    const double ulp = fabs((double)nextafterf((float)r.a, INFINITY) - r.a);
    snprintf(what, sizeof what, "%s: an exact value (%.3g ulps away, limit %g; 0: none), verdict %s",
             name, fabs(r.exact - r.a) / ulp, max_ulps, bis_closer_name(r.closer));
    par_check(r.has_exact && (max_ulps == 0 || fabs(r.exact - r.a) <= max_ulps * ulp) &&
                  r.closer != BIS_CLOSER_NONE,
              what);
    snprintf(what, sizeof what, "%s: chunks agree, the fold differs: a in order, b not", name);
    par_check(r.chunks && r.chunk_fold_differs && r.fold_in_order[0] == 1 &&
                  r.fold_in_order[1] == 0, what);
    free(g);
}

// swap:K:L: the first differing gradient element is where an independent
// run of the faulty trainer first differs from serial.
static void test_swap(int K, int L)
{
    char spec[32], what[160];
    snprintf(spec, sizeof spec, "swap:%d:%d", K, L);
    const par_fault f = fault(spec);
    const par_run_cfg faulty = cfg_of(PAR_F32, PAR_MODE_EXACT, 2, 8, 0.01, &f);
    float *g1 = malloc(M.n_params * sizeof *g1), *g2 = malloc(M.n_params * sizeof *g2);
    run_k("serial", plain(1), K - 1, g1, 0, NULL);
    run_k("omp", faulty, K - 1, g2, 0, NULL);
    par_check(memcmp(g1, g2, M.n_params * sizeof *g1) == 0, "swap: oracle agrees before step K");
    run_k("serial", plain(1), K, g1, 0, NULL);
    run_k("omp", faulty, K, g2, 0, NULL);
    size_t p = 0;
    while (p < M.n_params && memcmp(&g1[p], &g2[p], sizeof *g1) == 0) p++;
    snprintf(what, sizeof what, "swap: oracle: step %d differs, first at parameter %zu", K, p);
    par_check(p < M.n_params, what);
    bis_result r;
    const par_status st = bisect(&r, "serial", plain(1), "omp", faulty, 0);
    char tensor[48];
    snprintf(tensor, sizeof tensor, "layer%d.weight.grad", L);
    snprintf(what, sizeof what, "%s found at step %d, %s, parameter %zu, the chunk fold differs",
             spec, K, tensor, p);
    if (!par_check(st == PAR_OK && r.diverged && r.step == K && r.found &&
                       strcmp(r.tensor, tensor) == 0 && r.layer == L && r.param == p &&
                       (float)r.a == g1[p] && (float)r.b == g2[p] && r.chunk_fold_differs &&
                       r.fold_in_order[0] == 1 && r.fold_in_order[1] == 0 &&
                       clean_before_first(&r) && r.has_exact && r.closer != BIS_CLOSER_NONE,
                   what))
        show(&r);
    free(g1);
    free(g2);
}

// PAR_FAULT_HALF_FWD's rounding (src/train/par_engine.c), for the oracle.
static float round11(float v)
{
    int ex;
    const double m = frexp(v, &ex);
    return (float)ldexp(nearbyint(ldexp(m, 11)), ex - 11);
}

static void test_half(const char *ref_side, int K, int L)
{
    char spec[32], what[200];
    snprintf(spec, sizeof spec, "half:%d:%d", K, L);
    const par_fault f = fault(spec);
    const size_t n = BATCH * M.layers[L].n_out;
    float *g = malloc(M.n_params * sizeof *g), *out = malloc(n * sizeof *out);
    run_k("serial", plain(1), K, g, L, out);
    size_t i = 0;
    while (i < n && round11(out[i]) == out[i]) i++;
    bis_result r;
    const par_status st =
        bisect(&r, ref_side, plain(1), "omp", cfg_of(PAR_F32, PAR_MODE_EXACT, 2, 8, 0.01, &f), 0);
    char tensor[48];
    snprintf(tensor, sizeof tensor, "layer%d.out", L);
    snprintf(what, sizeof what, "%s vs omp %s: found at step %d, %s[%zu,%zu], closer a", ref_side,
             spec, K, tensor, i / M.layers[L].n_out, i % M.layers[L].n_out);
    if (!par_check(st == PAR_OK && i < n && r.diverged && r.step == K && r.found &&
                       r.internals && strcmp(r.tensor, tensor) == 0 && r.index == i &&
                       (float)r.a == out[i] && (float)r.b == round11(out[i]) &&
                       r.row == (long)(i / M.layers[L].n_out) && clean_before_first(&r) &&
                       (r.closer == BIS_CLOSER_A || r.ulps <= 2),
                   what))
        show(&r);
    free(g);
    free(out);
}

static void test_other_causes(void)
{
    bis_result r;
    // skip: the recomputed chunks agree; b's gradient is not the fold of its chunks.
    const par_fault f = fault("skip:2:0:5");
    par_status st = bisect(&r, "serial", plain(1), "omp",
                           cfg_of(PAR_F32, PAR_MODE_EXACT, 2, 8, 0.01, &f), 0);
    if (!par_check(st == PAR_OK && r.step == 2 && strcmp(r.tensor, "layer0.weight.grad") == 0 &&
                       r.fold_in_order[0] == 1 && r.fold_in_order[1] == 0,
                   "skip:2:0:5 found at step 2 in layer0.weight.grad"))
        show(&r);
    // Another learning rate: the first difference is a new weight; a is exact's side.
    st = bisect(&r, "serial", plain(1), "serial", cfg_of(PAR_F32, PAR_MODE_EXACT, 1, 8, 0.02, NULL),
                0);
    if (!par_check(st == PAR_OK && r.step == 1 && !r.loss_differs && !r.grad_differs &&
                       strcmp(r.tensor, "layer0.weight.new") == 0 && r.closer == BIS_CLOSER_A,
                   "--lr 0.01 vs 0.02: step 1, layer0.weight.new, closer a"))
        show(&r);
    // Another chunk size: no per-chunk comparison; a folded gradient differs.
    st = bisect(&r, "serial", plain(1), "serial", cfg_of(PAR_F32, PAR_MODE_EXACT, 1, 16, 0.01, NULL),
                0);
    if (!par_check(st == PAR_OK && r.step == 1 && !r.chunks && strstr(r.tensor, ".grad") &&
                       !strstr(r.tensor, "chunk") && !r.chunk_fold_differs,
                   "--chunk 8 vs 16: step 1, a folded gradient, chunks not compared"))
        show(&r);
    // f64 fast mode: bitwise it parts at step 1; within --tol 1e-6 it does not.
    st = bisect(&r, "serial", cfg_of(PAR_F64, PAR_MODE_EXACT, 1, 8, 0.01, NULL), "omp",
                cfg_of(PAR_F64, PAR_MODE_FAST, 2, 8, 0.01, NULL), 0);
    if (!par_check(st == PAR_OK && r.step == 1 && r.chunk_fold_differs &&
                       r.fold_in_order[0] == 1 && r.fold_in_order[1] == 0,
                   "f64 serial vs omp fast: step 1, the chunk fold differs"))
        show(&r);
    st = bisect(&r, "serial", cfg_of(PAR_F64, PAR_MODE_EXACT, 1, 8, 0.01, NULL), "omp",
                cfg_of(PAR_F64, PAR_MODE_FAST, 2, 8, 0.01, NULL), 1e-6);
    if (!par_check(st == PAR_OK && !r.diverged && r.steps == STEPS,
                   "f64 serial vs omp fast within --tol 1e-6: no divergence"))
        show(&r);
    // Mismatched sides are refused.
    par_run_cfg c = plain(1);
    c.batch = 32;
    st = bisect(&r, "serial", plain(1), "serial", c, 0);
    par_check(st == PAR_ERR_CONFIG, "different --batch: PAR_ERR_CONFIG");
}

// CNN: a skipped sample in conv layer 0's weight gradient is found there at
// its step; the chunks agree and b's gradient is not their fold; MPFR's
// exact sum (from the inputs both share) is a's.
static void test_cnn_skip(void)
{
    bis_result r;
    const par_fault f = fault("skip:2:0:5");
    const par_status st = bisect(&r, "serial", plain(1), "omp",
                                 cfg_of(PAR_F32, PAR_MODE_EXACT, 2, 8, 0.01, &f), 0);
    if (!par_check(st == PAR_OK && r.step == 2 && strcmp(r.tensor, "layer0.weight.grad") == 0 &&
                       r.layer == 0 && clean_before_first(&r) && r.fold_in_order[0] == 1 &&
                       r.fold_in_order[1] == 0 && r.has_exact && r.closer == BIS_CLOSER_A,
                   "CNN: skip:2:0:5 found at step 2 in layer0.weight.grad, closer a"))
        show(&r);
}

static void test_ulps(void)
{
    par_check(bis_ulps(1.0, (double)nextafterf(1.0f, 2.0f), PAR_F32) == 1 &&
                  bis_ulps(1.0, nextafter(1.0, 2.0), PAR_F64) == 1 &&
                  bis_ulps(-0.0, 0.0, PAR_F32) == 0 &&
                  bis_ulps(-0x1p-149, 0x1p-149, PAR_F32) == 2 &&
                  bis_ulps(-1.0, 1.0, PAR_F32) == 2.0 * 0x3f800000,
              "ulps across 0, subnormals, f32 and f64");
}

// Writes a step log with n steps; step `bad` (if > 0) gets other weights.
static void write_log(const char *path, int n, int bad, int digest)
{
    par_log *lg;
    PAR_REQUIRE(par_log_open(&lg, path));
    for (int k = 1; k <= n; k++) {
        char xxh[33];
        const int w = k + (k >= bad && bad > 0 ? 1000 : 0);
        par_xxh128_hex(xxh, &w, sizeof w);
        PAR_REQUIRE(par_log_step(lg, 0, k, 1.0 / k, digest ? xxh : NULL));
    }
    PAR_REQUIRE(par_log_close(lg));
}

static void test_logs(void)
{
    char a[64], b[64], c[64], d[64], e[64], o[64], x[64];
    snprintf(a, sizeof a, "/tmp/test_bisect_%d_a.jsonl", (int)getpid());
    snprintf(b, sizeof b, "/tmp/test_bisect_%d_b.jsonl", (int)getpid());
    snprintf(c, sizeof c, "/tmp/test_bisect_%d_c.jsonl", (int)getpid());
    snprintf(d, sizeof d, "/tmp/test_bisect_%d_d.jsonl", (int)getpid());
    snprintf(e, sizeof e, "/tmp/test_bisect_%d_e.jsonl", (int)getpid());
    snprintf(o, sizeof o, "/tmp/test_bisect_%d_o.jsonl", (int)getpid());
    snprintf(x, sizeof x, "/tmp/test_bisect_%d_x.jsonl", (int)getpid());
    write_log(a, 6, 0, 1);
    write_log(b, 6, 4, 1);
    write_log(c, 4, 0, 1);
    write_log(d, 6, 0, 0);
    FILE *f = fopen(e, "w");
    fputs("{\"type\":\"step\",\"step\":1}\n", f);
    fclose(f);
    // A log of parity before XXH3-128 step digests (SHA-256, 64 hex), and a
    // digest of the wrong length under the new name.
    f = fopen(o, "w");
    fputs("{\"type\":\"step\",\"epoch\":0,\"step\":1,\"loss\":1.0,\"weights_sha256\":\""
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"loss_sha256\":\""
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}\n", f);
    fclose(f);
    f = fopen(x, "w");
    fputs("{\"type\":\"step\",\"epoch\":0,\"step\":1,\"loss\":1.0,\"weights_xxh128\":\""
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"loss_xxh128\":\""
          "99aa06d3014798d86001c324468d497f\"}\n", f);
    fclose(f);
    bis_log_result r;
    par_check(bis_logs(&r, a, a) == PAR_OK && !r.diverged && r.digests && r.steps_a == 6,
              "logs: a log against itself agrees");
    par_check(bis_logs(&r, a, b) == PAR_OK && r.diverged && r.step == 4 &&
                  strcmp(r.what, "weights") == 0,
              "logs: weights digest differs from step 4");
    par_check(bis_logs(&r, a, c) == PAR_OK && r.diverged && r.step == 5 &&
                  strcmp(r.what, "length") == 0,
              "logs: the shorter log differs after its end");
    par_check(bis_logs(&r, b, d) == PAR_OK && !r.diverged && !r.digests,
              "logs: without digests the losses are compared");
    par_check(bis_logs(&r, a, e) == PAR_ERR_FORMAT, "logs: a bad line is a format error");
    par_check(bis_logs(&r, a, o) == PAR_ERR_FORMAT && strstr(par_last_error(), o) &&
                  strstr(par_last_error(), "weights_sha256") &&
                  strstr(par_last_error(), "expected \"weights_xxh128\""),
              "logs: an older log (SHA-256 step digests) is refused, naming file and field");
    par_check(bis_logs(&r, o, o) == PAR_ERR_FORMAT,
              "logs: two older logs are refused too (no SHA-256 comparison path left)");
    par_check(bis_logs(&r, a, x) == PAR_ERR_FORMAT && strstr(par_last_error(), "32 lowercase hex"),
              "logs: a weights_xxh128 that is not 32 hex characters is a format error");
    par_check(bis_logs(&r, a, "/nonexistent/x.jsonl") == PAR_ERR_IO,
              "logs: a missing file is an I/O error");
    remove(a), remove(b), remove(c), remove(d), remove(e), remove(o), remove(x);
}

// bis_run on a synthetic CIFAR-10 folder (5 x 40 records, 180 for training):
// the whole split as the batch, a fault found at its step, and the stage of
// each failure (data, batch, initial weights); what it opened is released.
static void test_run(void)
{
    char dir[] = "/tmp/par_bisect_run_XXXXXX";
    if (!mkdtemp(dir)) return;
    PAR_REQUIRE(par_cifar_make(dir, 40, 3));
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:3072-16-10", PAR_ACT_RELU));
    const par_fault ulp = fault("ulp:2:5");
    bis_opts o = {.seed = SEED, .epochs = 2, .max_steps = 4, .prec = 128};
    for (int s = 0; s < 2; s++) {
        o.side[s].ops = par_trainer_find("serial");
        o.side[s].cfg = (par_run_cfg){.model = &m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT,
                                      .batch = 64, .chunk = 8, .lr = 0.01, .threads = 1,
                                      .fault = s ? &ulp : &NO_FAULT};
    }
    bis_data d = {.dataset = dir, .batch_full = 1};
    bis_result *r = malloc(sizeof *r);
    bis_run_stage at = BIS_RUN_DATA;
    if (par_ran(bis_run(r, &o, &d, &at), "bis_run"))
        par_check(at == BIS_RUN_OK && r->diverged && r->step == 2 &&
                      o.side[0].cfg.batch == 180 && o.side[1].cfg.batch == 180 && !o.ds &&
                      !o.side[0].cfg.init_params && !o.side[1].cfg.init_params,
                  "bis_run: batch full is the 180 training records, the ulp fault found at "
                  "step 2, the data and weights released");
    d.batch_full = 0;
    o.side[0].cfg.batch = o.side[1].cfg.batch = 500;
    char want[160];
    snprintf(want, sizeof want, "--batch 500: expected at most 180, the training split of %s",
             dir);
    par_check(bis_run(r, &o, &d, &at) == PAR_ERR_CONFIG && at == BIS_RUN_BATCH &&
                  strcmp(par_last_error(), want) == 0,
              "bis_run: a batch beyond the split refused at the batch stage, named");
    o.side[0].cfg.batch = o.side[1].cfg.batch = 64;
    d.init_load = "/nonexistent/init.npz";
    par_check(bis_run(r, &o, &d, &at) != PAR_OK && at == BIS_RUN_INIT,
              "bis_run: missing initial weights fail at the init stage");
    d.dataset = "/nonexistent/data";
    par_check(bis_run(r, &o, &d, &at) != PAR_OK && at == BIS_RUN_DATA,
              "bis_run: a missing dataset fails at the data stage");
    free(r);
    const char *files[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    for (int i = 0; i < 6; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

int main(void)
{
    fixture_dataset(&DS, 8 * BATCH);
    if (par_model_parse(&M, "mlp:784-256-128-10", PAR_ACT_RELU) != PAR_OK) return 1;
    INIT32 = malloc(M.n_params * sizeof(float));
    INIT64 = malloc(M.n_params * sizeof(double));
    par_model_init(&M, PAR_F32, 42, INIT32);
    par_model_init(&M, PAR_F64, 42, INIT64);
    test_ulps();
    test_agree();
    // layer 2's weight [3,5]; layer 0's weight from unit 7 to the centre pixel (14,14).
    test_ulp("ulp in layer 2", offset_of("layer2.weight") + 3 * 128 + 5, 3, 4);
    test_ulp("ulp in layer 0 (centre pixel)", offset_of("layer0.weight") + 7 * 784 + 14 * 28 + 14,
             2, 4);
    test_swap(3, 1);
    test_swap(2, 0);
    test_half("serial", 2, 1);
    test_half("reference", 3, 0);
    test_other_causes();
    test_logs();
    test_run();
    // A CNN: the same faults in its conv layer are found there, with the
    // conv tensor, its element and MPFR's verdict.
    if (par_model_parse(&M, "cnn:1x28x28-c4k3p1-r-m2-c3k3-r-f-fc10", PAR_ACT_RELU) != PAR_OK)
        return 1;
    free(INIT32);
    free(INIT64);
    INIT32 = malloc(M.n_params * sizeof(float));
    INIT64 = malloc(M.n_params * sizeof(double));
    par_model_init(&M, PAR_F32, 42, INIT32);
    par_model_init(&M, PAR_F64, 42, INIT64);
    test_agree();
    test_ulp("CNN: ulp in conv layer 2", offset_of("layer2.weight") + 2 * 36 + 13, 2, 0);
    test_ulp("CNN: ulp in conv layer 0", offset_of("layer0.weight") + 7, 3, 0);
    test_swap(3, 0);
    test_swap(2, 2);
    test_half("serial", 2, 0);
    test_half("reference", 3, 2);
    test_cnn_skip();
    free(INIT32);
    free(INIT64);
    par_dataset_free(&DS);
    return par_test_exit();
}
