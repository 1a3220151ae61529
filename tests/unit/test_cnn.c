// CNNs under the contract, single process: serial and omp (T = 1, 2, 3)
// equal the reference bit for bit (every step's loss, the weights after
// every step) on the cases of cnn_cases.h; each layer kind equals the
// reference's plain loops on odd shapes (1x1 images, kernels larger than
// the image, C_in = C_out = 1, strides, pool remainders, ties in max-pool),
// with every kernel set the CPU runs; fast mode stays within its derived
// bound and a learning rate off by 1e-3 leaves it. MPI: test_mpi_cnn.c.
#include "cnn_cases.h"
#include "par_conv.h"
#include "par_kernels.h"

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;

// One case: the reference trajectory, then serial and omp T = 1, 2, 3.
static void trainers_case(const cnn_case *c, const par_dataset *ds)
{
    char cname[160], name[240];
    cnn_case_name(cname, sizeof cname, c);
    par_model m;
    if (!par_check(par_model_parse(&m, c->spec, PAR_ACT_RELU) == PAR_OK, c->spec)) return;
    void *init = malloc(m.n_params * par_dtype_size(c->dt));
    par_model_init(&m, c->dt, 42, init);
    const par_optim o = par_optim_default(c->optim);
    par_run_cfg cfg = cnn_case_cfg(c, &m, init, &o);
    trajectory ref, t;
    snprintf(name, sizeof name, "reference runs, %s", cname);
    if (!par_check(run_trajectory(&ref, &par_trainer_reference, &cfg, ds, c->steps) == PAR_OK,
                   name)) {
        printf("  %s\n", par_last_error());
        free(init);
        return;
    }
    const struct { const par_trainer_ops *ops; int T; } runs[] = {
        {&par_trainer_serial, 1}, {&par_trainer_omp, 1}, {&par_trainer_omp, 2},
        {&par_trainer_omp, 3}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        cfg.threads = runs[k].T;
        snprintf(name, sizeof name, "%s T=%d == reference, %s, %d steps", runs[k].ops->name,
                 runs[k].T, cname, c->steps);
        const par_status st = run_trajectory(&t, runs[k].ops, &cfg, ds, c->steps);
        if (st != PAR_OK) printf("  %s: %s\n", name, par_last_error());
        if (st != PAR_OK) par_check(0, name);
        else trajectory_equal(&t, &ref, &m, c->dt, name);
        trajectory_free(&t);
    }
    trajectory_free(&ref);
    free(init);
}

// Inputs on a grid of quarters in [-2, 2): exact in both dtypes, and equal
// values are common, so max-pool windows have ties.
static void grid_inputs(void *x, size_t n, par_dtype dt, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        const double v = (double)(par_rng_bits(seed, PAR_RNG_DATA, 3, i) % 16) / 4 - 2;
        if (dt == PAR_F32) ((float *)x)[i] = (float)v;
        else ((double *)x)[i] = v;
    }
}

// One odd-shaped model: 3 steps of serial and omp T=3 against the reference
// from the same weights, comparing gradients, weights and losses bitwise.
static void odd_shape_case(const char *spec, par_dtype dt, const par_kernel_set *kernels)
{
    char name[240];
    par_model m;
    snprintf(name, sizeof name, "parse %s", spec);
    if (!par_check(par_model_parse(&m, spec, PAR_ACT_RELU) == PAR_OK, name)) {
        printf("  %s\n", par_last_error());
        return;
    }
    const size_t B = 5, C = 2, sz = par_dtype_size(dt), N = m.n_params;
    void *init = malloc(N * sz), *x = malloc(B * m.n_inputs * sz);
    int32_t labels[5];
    par_model_init(&m, dt, 9, init);
    const par_optim o = par_optim_default(PAR_OPTIM_ADAM);
    par_kernels_use(kernels);
    for (int T = 1; T <= 3; T += 2) {
        const par_run_cfg cfg = {.model = &m, .dtype = dt, .mode = PAR_MODE_EXACT, .batch = B,
                                 .chunk = C, .lr = 0.01, .threads = T, .init_params = init,
                                 .optim = T == 1 ? NULL : &o};
        const par_trainer_ops *ops = T == 1 ? &par_trainer_serial : &par_trainer_omp;
        void *sr = NULL, *st = NULL;
        int ok = par_trainer_reference.create(&cfg, &sr) == PAR_OK &&
                 ops->create(&cfg, &st) == PAR_OK;
        for (int k = 0; k < 3 && ok; k++) {
            grid_inputs(x, B * m.n_inputs, dt, (uint64_t)k);
            for (size_t s = 0; s < B; s++) labels[s] = (int32_t)((s + (size_t)k) % m.n_classes);
            const par_batch batch = {.x = x, .labels = labels, .B = B};
            double lr_ref, lt;
            const void *gr, *gt, *wr, *wt;
            size_t n;
            ok = par_trainer_reference.step(sr, &batch, &lr_ref) == PAR_OK &&
                 ops->step(st, &batch, &lt) == PAR_OK &&
                 par_trainer_reference.grad(sr, &gr) == PAR_OK && ops->grad(st, &gt) == PAR_OK &&
                 par_trainer_reference.params(sr, &wr, &n) == PAR_OK &&
                 ops->params(st, &wt, &n) == PAR_OK;
            ok = ok && memcmp(&lr_ref, &lt, sizeof lt) == 0 && memcmp(gr, gt, N * sz) == 0 &&
                 memcmp(wr, wt, N * sz) == 0;
            if (!ok) printf("  differs at step %d (%s)\n", k + 1, par_last_error());
        }
        snprintf(name, sizeof name, "%s %s %s T=%d, %s kernels: loss, gradient, weights == "
                 "reference, 3 steps", spec, par_dtype_name(dt), ops->name, T,
                 par_kernels_variant());
        par_check(ok, name);
        if (sr) par_trainer_reference.destroy(sr);
        if (st) ops->destroy(st);
    }
    par_kernels_use(NULL);
    free(init);
    free(x);
}

// Max-pool on four 2 x 2 windows worked out by hand (the first maximum in
// scan order, a later equal value never replacing it): (-0, +0, +0, -0)
// gives -0 at index 0; (1, 3, 3, 2) gives 3 at index 1; (NaN, 5, 7, 1) gives
// NaN at index 0 (nothing compares greater); (2, NaN, 1, 4) gives 4 at index
// 3. The forward must return the element itself (its bits), the backward
// route dy to it alone; with relu's derivative in the same pass only the
// maxima > 0 (3 at index 3, 4 at index 15) keep theirs, every other element
// +0.
#define POOL_GOLDEN(REAL, SFX)                                                                  \
    do {                                                                                        \
        const REAL nan = (REAL)NAN;                                                             \
        const REAL x[16] = {(REAL)-0.0, 0, 1, 3, nan, 5, 2, nan,                                \
                            0, (REAL)-0.0, 3, 2, 7, 1, 1, 4};                                   \
        const int at[4] = {0, 3, 4, 15};   /* each window's first maximum in x */              \
        const REAL dy[4] = {10, 20, 30, 40};                                                    \
        REAL y[4], dx[16];                                                                      \
        par_maxpool_forward_##SFX(y, x, ly, 0, 1);                                              \
        par_maxpool_backward_##SFX(dx, dy, x, ly, 0, 1, PAR_ACT_NONE);                          \
        int ok = 1;                                                                             \
        for (int w = 0; w < 4; w++) ok &= memcmp(&y[w], &x[at[w]], sizeof(REAL)) == 0;          \
        for (int i = 0; i < 16; i++) {                                                          \
            REAL want = 0;                                                                      \
            for (int w = 0; w < 4; w++) want = i == at[w] ? dy[w] : want;                       \
            ok &= memcmp(&dx[i], &want, sizeof(REAL)) == 0;                                     \
        }                                                                                       \
        par_check(ok, "max-pool 2x2 " #SFX ": first maximum by hand (signed zeros, ties, NaN)"); \
        par_maxpool_backward_##SFX(dx, dy, x, ly, 0, 1, PAR_ACT_RELU);                          \
        ok = 1;                                                                                 \
        for (int i = 0; i < 16; i++) {                                                          \
            const REAL want = i == 3 ? 20 : i == 15 ? 40 : 0;                                   \
            ok &= memcmp(&dx[i], &want, sizeof(REAL)) == 0;                                     \
        }                                                                                       \
        par_check(ok, "max-pool 2x2 " #SFX " with relu's derivative: by hand");                 \
    } while (0)

static void pool_golden(void)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "cnn:1x2x8-m2-f-fc2", PAR_ACT_RELU));
    const par_layer *ly = &m.layers[0];
    POOL_GOLDEN(float, f32);
    POOL_GOLDEN(double, f64);
}

// The comparisons can fail: a test fault at step 2 in layer f->layer's
// weight gradient gives a different gradient of that layer at step 2, and
// the same one at step 1: the conv chunk fold reordered (swap:2:0), and
// batchnorm's dgamma and dbeta with one sample's dz skipped (skip:2:1:3),
// which an omp step must then compute afresh rather than keep from the
// backward pass. (The weights may
// not show it: lr times a one-ulp change of the gradient often vanishes in
// w - t.)
static void grad_fault_control(const char *spec, const par_fault *f, par_dtype dt,
                               const char *what)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, spec, PAR_ACT_RELU));
    const size_t B = 64, sz = par_dtype_size(dt), N = m.n_params;
    const par_view *vw = &m.views[m.layers[f->layer].w_view];
    const par_view *vb = &m.views[m.layers[f->layer].b_view];
    void *init = malloc(N * sz), *x = malloc(B * m.n_inputs * sz), *g_clean = malloc(N * sz);
    int32_t labels[64];
    par_model_init(&m, dt, 42, init);
    par_run_cfg cfg = {.model = &m, .dtype = dt, .mode = PAR_MODE_EXACT, .batch = B, .chunk = 8,
                       .lr = 0.05, .threads = 2, .init_params = init};
    void *clean = NULL, *faulty = NULL;
    int ok = par_trainer_omp.create(&cfg, &clean) == PAR_OK;
    cfg.fault = f;
    ok = ok && par_trainer_omp.create(&cfg, &faulty) == PAR_OK;
    int same[2] = {0, 0};
    for (int k = 0; k < 2 && ok; k++) {
        for (size_t i = 0; i < B * m.n_inputs; i++) {   // full-precision inputs
            const double v = par_rng_uniform(100 + (uint64_t)k, PAR_RNG_DATA, 4, i);
            if (dt == PAR_F32) ((float *)x)[i] = (float)v;
            else ((double *)x)[i] = v;
        }
        for (size_t s = 0; s < B; s++) labels[s] = (int32_t)(s % 10);
        const par_batch batch = {.x = x, .labels = labels, .B = B};
        double l;
        const void *g;
        ok = par_trainer_omp.step(clean, &batch, &l) == PAR_OK &&
             par_trainer_omp.grad(clean, &g) == PAR_OK;
        if (ok) memcpy(g_clean, g, N * sz);
        ok = ok && par_trainer_omp.step(faulty, &batch, &l) == PAR_OK &&
             par_trainer_omp.grad(faulty, &g) == PAR_OK;
        const char *gf = g, *gc = g_clean;
        same[k] = ok && memcmp(gf + vw->offset * sz, gc + vw->offset * sz, vw->count * sz) == 0 &&
                  memcmp(gf + vb->offset * sz, gc + vb->offset * sz, vb->count * sz) == 0;
    }
    char name[200];
    snprintf(name, sizeof name, "%s at step 2 changes layer%d's gradient at step 2 only, %s", what,
             f->layer, par_dtype_name(dt));
    par_check(ok && same[0] && !same[1], name);
    if (clean) par_trainer_omp.destroy(clean);
    if (faulty) par_trainer_omp.destroy(faulty);
    free(init);
    free(x);
    free(g_clean);
}

// fast mode on the small CNN: within the bound derived for any summation order
// of the batch x positions terms of a conv gradient (vf_lockstep.h), and out
// of it when the learning rate is off by 1e-3.
static void fast_case(const char *spec, par_dtype dt, const par_dataset *ds)
{
    char name[200];
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, spec, PAR_ACT_RELU));
    void *init = malloc(m.n_params * par_dtype_size(dt));
    par_model_init(&m, dt, 42, init);
    const par_run_cfg cfg = {.model = &m, .dtype = dt, .mode = PAR_MODE_FAST, .batch = 64,
                             .chunk = 8, .lr = 0.05, .threads = 2, .init_params = init};
    vf_lockstep_result r;
    snprintf(name, sizeof name, "omp T=2 fast within bound, %s, %s, 10 steps", spec,
             par_dtype_name(dt));
    par_status st = vf_lockstep(&r, &par_trainer_omp, &cfg, cfg.lr, ds, 7, 1, 10, NULL);
    if (!par_check(st == PAR_OK && r.steps == 10 && r.violations == 0, name))
        printf("  status %d, %zu violations, worst %.3g\n", (int)st, r.violations, r.worst_ratio);
    printf("  worst |diff|/tol %.3g\n", r.worst_ratio);
    par_run_cfg off = cfg;
    off.lr = cfg.lr * (1 + 1e-3);
    snprintf(name, sizeof name, "fast with lr * (1 + 1e-3) fails the bound, %s, %s", spec,
             par_dtype_name(dt));
    st = vf_lockstep(&r, &par_trainer_omp, &off, cfg.lr, ds, 7, 1, 10, NULL);
    if (!par_check(st == PAR_OK && r.violations > 0 && r.first_violation_step == 1, name))
        printf("  status %d, %zu violations, first at step %ld\n", (int)st, r.violations,
               r.first_violation_step);
    free(init);
}

// Batchnorm's evaluation mode (running statistics, after 20 steps of training
// them): the same loss for every thread count. (Training mode: CNN_CASES.)
static void batchnorm_eval(const par_dataset *ds)
{
    static const char *const spec = CNN_BN;
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, spec, PAR_ACT_RELU));
    float *w = malloc(m.n_params * sizeof *w);
    par_model_init(&m, PAR_F32, 42, w);
    const par_optim o = par_optim_default(PAR_OPTIM_ADAM);
    const par_run_cfg cfg = {.model = &m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT, .batch = 64,
                             .chunk = 8, .lr = 1e-3, .threads = 1, .init_params = w, .optim = &o};
    trajectory t;
    int ok = run_trajectory(&t, &par_trainer_serial, &cfg, ds, 20) == PAR_OK;
    double loss[3], acc[3];
    for (int T = 1; T <= 3 && ok; T++)   // the trained weights, running statistics included
        ok = par_evaluate(&m, PAR_F32, (char *)t.w + 19 * m.n_params * sizeof(float), &ds->train,
                          0, 300, T, &loss[T - 1], &acc[T - 1]) == PAR_OK;
    par_check(ok && memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0 &&
                  memcmp(&loss[0], &loss[2], sizeof loss[0]) == 0 && acc[0] == acc[2],
              "batchnorm evaluation mode (running statistics): T = 1, 2, 3 give the same loss");
    trajectory_free(&t);
    free(w);
}

int main(void)
{
    static const char *const odd[] = {
        "cnn:1x1x1-c1k3p1-f-fc2",                       // 1x1 image, kernel > image, C = 1
        "cnn:2x4x12-c3k3p1-m2-c2k3p1-r-m2-f-fc3",       // whole 2x2 windows after none, relu
        "cnn:1x3x3-c2k5p2-f-fc2",                       // kernel larger than the image
        "cnn:1x6x6-m2-c3k3p1-r-f-fc3",                  // pool on raw inputs (ties), conv at l=1
        "cnn:2x5x7-c1k5p2-r-m2-c4k2-th-f-fc3",          // C_out = 1, odd sizes, pool remainder
        "cnn:3x9x9-c5k4p3s2-r-c2k1-sg-m3-f-fc4-r-fc3",  // stride 2, 1x1 conv, sigmoid, pool 3
        "cnn:2x9x8-c3k3p1-r-c4k3p2s3-r-f-fc3",          // stride 3 and wide padding at l = 1
        "cnn:2x5x7-c3k3p1-bn-th-m2-f-fc4-bn-sg-fc3",    // batchnorm 2d and 1d, pool remainder
        "cnn:1x1x1-c2k1-bn-f-fc2",                      // batchnorm over one position
        "cnn:1x3x3-c1k3p1-bn-f-fc2",                    // batchnorm of one channel
        "cnn:3x4x21-c19k3p1-r-c10k5p2-f-fc3",           // rows past a vector, channel tails
    };
    const par_kernel_set *sets[8];
    const size_t n_sets = par_kernels_available(sets, 8);
    for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++)
        for (int d = 0; d < 2; d++)
            for (size_t v = 0; v < n_sets && v < 8; v++)
                odd_shape_case(odd[k], d ? PAR_F64 : PAR_F32, sets[v]);

    par_dataset ds;
    fixture_dataset(&ds, 1000);
    for (int k = 0; k < N_CNN_CASES; k++) trainers_case(&CNN_CASES[k], &ds);
    batchnorm_eval(&ds);
    const par_fault conv_swap = {.kind = PAR_FAULT_CHUNK_SWAP, .step = 2, .layer = 0};
    const par_fault bn_skip = {.kind = PAR_FAULT_SKIP_SAMPLE, .step = 2, .layer = 1, .index = 3};
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        grad_fault_control(CNN_SMALL, &conv_swap, dt, "a reordered conv chunk fold");
        grad_fault_control(CNN_BN, &bn_skip, dt, "batchnorm's weight gradient skipping sample 3");
    }
    pool_golden();
    fast_case(CNN_SMALL, PAR_F32, &ds);
    fast_case(CNN_SMALL, PAR_F64, &ds);
    fast_case(CNN_BN, PAR_F32, &ds);   // batchnorm keeps its chunk order in fast mode
    fast_case(CNN_BN, PAR_F64, &ds);
    par_dataset_free(&ds);
    return par_test_exit();
}
