// `--trainer cuda` equals the reference bit for bit on the GPU: every step's
// loss and the weights after every step, and the last step's gradient, for
// f32 and f64, relu, sigmoid and tanh, sgd, momentum, nesterov and adam,
// batch 64 / chunk 8, 50 / 7 (a short last chunk) and 24 / 5, on
// mlp:784-40-33-10 and the default mlp:784-256-128-10, and on CNNs with
// conv2d (padding, stride), max-pool and batchnorm (after a conv and after
// an fc); batches gathered on the device from the resident set and batches
// given whole (the fixture alternates). First, without a device: what the
// trainer refuses (a fault inside the CPU's layer kernels), with its one-line
// error. Fast mode within its bound; faults ulp and obeta as serial's.
// Without a device the rest is skipped (exit 77, ctest's SKIP_RETURN_CODE).
// Built with PAR_CUDA_EMU (test_cuda_emu, label unit) with src/cuda/cuda_emu.c it
// runs the same trainer with every kernel body on the host: the CNNs and a
// few MLP cases, in every build.
#include <math.h>

#include "cuda_api.h"
#include "par_engine.h"
#include "par_fixtures.h"

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_cuda;

enum { STEPS = 30 };
#ifdef PAR_CUDA_EMU
#define EMULATED 1
#else
#define EMULATED 0
#endif

// create must fail with PAR_ERR_CONFIG and a message containing want.
static void refuses(const par_run_cfg *cfg, const char *want, const char *name)
{
    void *state = NULL;
    const par_status st = par_trainer_cuda.create(cfg, &state);
    if (state) par_trainer_cuda.destroy(state);
    if (!par_check(st == PAR_ERR_CONFIG && strstr(par_last_error(), want), name))
        printf("  status %d: %s\n", (int)st, par_last_error());
}

static void check_refusals(void)
{
    par_model mlp;
    PAR_REQUIRE(par_model_parse(&mlp, "mlp:784-16-10", PAR_ACT_RELU));
    par_run_cfg cfg = {.model = &mlp, .dtype = PAR_F32, .mode = PAR_MODE_EXACT, .batch = 8,
                       .chunk = 4, .lr = 0.01, .threads = 1};
    const par_fault f = {PAR_FAULT_SKIP_SAMPLE, 1, 0, 3};
    cfg.fault = &f;
    refuses(&cfg, "--fault takes ulp and obeta", "cuda refuses a layer kernel's fault");
}

// cuda against the reference on one configuration: trajectories and the last gradient.
// m's initial weights of seed 42 (the caller frees them).
static void *initial(const par_model *m, par_dtype dt)
{
    void *init = malloc(m->n_params * par_dtype_size(dt));
    PAR_REQUIRE(init ? PAR_OK : PAR_ERR_ALLOC);
    par_model_init(m, dt, 42, init);
    return init;
}

static void compare(const par_model *m, par_dtype dt, size_t B, size_t C, par_optim_kind ok,
                    const par_dataset *ds, int steps)
{
    void *init = initial(m, dt);
    const par_optim o = par_optim_default(ok);
    const par_run_cfg cfg = {.model = m, .dtype = dt, .mode = PAR_MODE_EXACT, .batch = B,
                             .chunk = C, .lr = ok == PAR_OPTIM_ADAM ? 1e-3 : 0.05, .threads = 1,
                             .init_params = init, .optim = &o};
    char name[200];
    snprintf(name, sizeof name, "cuda == reference, %s, %s, %s, %s, B=%zu C=%zu, %d steps",
             m->spec, par_act_name(m->layers[0].act), par_dtype_name(dt), par_optim_name(ok), B,
             C, steps);
    trajectory ref, t;
    PAR_REQUIRE(run_trajectory(&ref, &par_trainer_reference, &cfg, ds, steps));
    if (par_ran(run_trajectory(&t, &par_trainer_cuda, &cfg, ds, steps), name) &&
        trajectory_equal(&t, &ref, m, dt, name)) {
        snprintf(name, sizeof name, "  and the last gradient (%s, %s)", par_dtype_name(dt),
                 par_optim_name(ok));
        par_check(memcmp(t.g, ref.g, m->n_params * par_dtype_size(dt)) == 0, name);
    }
    trajectory_free(&ref);
    trajectory_free(&t);
    free(init);
}

// The faults cuda takes (ulp, obeta) change its run as they change serial's:
// at the last of 3 steps, the same weights every step and the same last
// gradient as serial under the same fault, and not the reference's (ulp: the
// gradient element; obeta: the weights).
static void compare_fault(const par_model *m, par_fault_kind kind, size_t index,
                          const par_dataset *ds, const char *what)
{
    const par_dtype dt = PAR_F32;
    const size_t bytes = m->n_params * par_dtype_size(dt);
    void *init = initial(m, dt);
    const par_optim o = par_optim_default(PAR_OPTIM_ADAM);
    const par_fault f = {kind, 3, 0, index};
    par_run_cfg cfg = {.model = m, .dtype = dt, .mode = PAR_MODE_EXACT, .batch = 50, .chunk = 7,
                       .lr = 1e-3, .threads = 1, .init_params = init, .optim = &o};
    trajectory ref, ser, t;
    PAR_REQUIRE(run_trajectory(&ref, &par_trainer_reference, &cfg, ds, 3));
    cfg.fault = &f;
    PAR_REQUIRE(run_trajectory(&ser, &par_trainer_serial, &cfg, ds, 3));
    char name[200];
    snprintf(name, sizeof name, "cuda == serial under --fault %s, %s", what, m->spec);
    if (par_ran(run_trajectory(&t, &par_trainer_cuda, &cfg, ds, 3), name) &&
        trajectory_equal(&t, &ser, m, dt, name)) {
        const float *g = t.g, *gr = ref.g;
        const int moved = kind == PAR_FAULT_GRAD_ULP
                              ? g[index] == nextafterf(gr[index], INFINITY)
                              : memcmp((char *)t.w + 2 * bytes, (char *)ref.w + 2 * bytes,
                                       bytes) != 0;
        snprintf(name, sizeof name, "  the same last gradient, and the fault moved it (%s)",
                 what);
        par_check(memcmp(t.g, ser.g, bytes) == 0 && moved, name);
    }
    trajectory_free(&ref);
    trajectory_free(&ser);
    trajectory_free(&t);
    free(init);
}

// Fast mode: within the derived bound of the reference step by step (vf_lockstep,
// as parity lockstep), and a learning rate off by 1e-3 fails it at step 1. On
// an MLP it sums as serial's fast mode does (one chain over the batch): the
// same bits; on a CNN its conv gradients sum per sample, so it must differ
// from exact somewhere.
static void check_fast(const par_model *m, const par_dataset *ds, int steps)
{
    void *init = initial(m, PAR_F32);
    const par_run_cfg exact = {.model = m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT, .batch = 50,
                               .chunk = 7, .lr = 0.05, .threads = 1, .init_params = init};
    par_run_cfg f = exact;
    f.mode = PAR_MODE_FAST;
    vf_lockstep_result r;
    char name[200];
    par_status st = fast_lockstep(&r, &par_trainer_cuda, &f, exact.lr, ds, steps);
    snprintf(name, sizeof name, "cuda fast within the bound of the reference, %s, %d steps",
             m->spec, steps);
    if (!par_check(st == PAR_OK && r.steps == steps && r.violations == 0, name))
        printf("  status %d (%s), %zu violations\n", (int)st, par_last_error(), r.violations);
    printf("  worst |diff|/tol %.3g\n", r.worst_ratio);
    f.lr = exact.lr * (1 + 1e-3);
    st = fast_lockstep(&r, &par_trainer_cuda, &f, exact.lr, ds, steps);
    snprintf(name, sizeof name, "cuda fast with lr * (1 + 1e-3) fails the bound at step 1, %s",
             m->spec);
    par_check(st == PAR_OK && r.violations > 0 && r.first_violation_step == 1, name);
    f.lr = exact.lr;
    trajectory a, b;
    const int mlp = !m->is_cnn;
    PAR_REQUIRE(run_trajectory(&b, mlp ? &par_trainer_serial : &par_trainer_reference,
                               mlp ? &f : &exact, ds, steps));
    snprintf(name, sizeof name, "cuda fast %s, %s", mlp ? "== serial fast" : "!= exact",
             m->spec);
    if (par_ran(run_trajectory(&a, &par_trainer_cuda, &f, ds, steps), name)) {
        const int same = memcmp(a.w, b.w, steps * m->n_params * sizeof(float)) == 0;
        par_check(mlp ? same : !same, name);
    }
    trajectory_free(&a);
    trajectory_free(&b);
    free(init);
}

int main(void)
{
    check_refusals();
    char dev[256];
    if (par_cuda_open(0, dev, sizeof dev) != PAR_OK) {
        printf("SKIP: %s\n", par_last_error());
        return par_test_failures_ ? 1 : 77;
    }
    printf("device: %s\n", dev);
    par_dataset ds;
    fixture_dataset(&ds, 4000);
    if (EMULATED) ds.train.n = ds.n_train;   // the host uploads only the records it trains on
    const struct {
        size_t B, C;
    } shapes[] = {{64, 8}, {50, 7}, {24, 5}};
    // CNNs: conv with padding and stride, max-pool, batchnorm after a conv
    // (and after an fc), relu, sigmoid and tanh on convs; every dtype and
    // optimizer on the first, whose shape is test_cross's batchnorm CNN; the
    // last has a conv of 8 input channels (the weight gradient's tiles) and
    // 10 output channels (a part group of the tiles' 8).
    const char *cnns[] = {"cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10",
                          "cnn:1x28x28-c3k5p2s2-sg-c5k3s2-th-m2-f-fc10",
                          "cnn:1x28x28-c2k4p3s3-r-m3-f-fc12-bn-th-fc10",
                          "cnn:1x28x28-c8k3s2-r-c10k3p1-bn-r-m2-f-fc10"};
    for (size_t c = 0; c < sizeof cnns / sizeof cnns[0]; c++) {
        par_model m;
        PAR_REQUIRE(par_model_parse(&m, cnns[c], PAR_ACT_RELU));
        for (int d = 0; d < 2; d++)
            for (size_t sh = 0; sh < 2; sh++)
                for (int k = 0; k < 4; k++)
                    if (c == 0 || k == 0 || k == 3)
                        compare(&m, d ? PAR_F64 : PAR_F32, shapes[sh].B, shapes[sh].C,
                                (par_optim_kind)k, &ds, EMULATED ? 4 : 12);
    }
    {   // a conv weight, a batchnorm gamma: one ulp more in their gradient; Adam's b1 off
        par_model m;
        PAR_REQUIRE(par_model_parse(&m, cnns[0], PAR_ACT_RELU));
        compare_fault(&m, PAR_FAULT_GRAD_ULP, 7, &ds, "ulp:3:7");
        compare_fault(&m, PAR_FAULT_GRAD_ULP, m.views[m.layers[1].w_view].offset + 2, &ds,
                      "ulp on a batchnorm gamma");
        compare_fault(&m, PAR_FAULT_OPT_BETA, 0, &ds, "obeta:3");
        check_fast(&m, &ds, EMULATED ? 4 : 10);
        PAR_REQUIRE(par_model_parse(&m, "mlp:784-40-33-10", PAR_ACT_RELU));
        check_fast(&m, &ds, EMULATED ? 4 : 10);
    }
    // The host runs the MLPs' kernels as slowly as the reference: two; and so
    // does PARITY_TEST_CUDA_QUICK (a short GPU run: the MLP matrix is long on
    // the reference's side).
    if (EMULATED || getenv("PARITY_TEST_CUDA_QUICK")) {
        par_model m;
        PAR_REQUIRE(par_model_parse(&m, "mlp:784-40-33-10", PAR_ACT_TANH));
        compare(&m, PAR_F32, 50, 7, PAR_OPTIM_ADAM, &ds, 5);
        compare(&m, PAR_F64, 24, 5, PAR_OPTIM_NESTEROV, &ds, 5);
        return par_test_exit();
    }
    const par_act acts[] = {PAR_ACT_RELU, PAR_ACT_SIGMOID, PAR_ACT_TANH};
    for (size_t a = 0; a < 3; a++) {
        par_model m;
        PAR_REQUIRE(par_model_parse(&m, "mlp:784-40-33-10", acts[a]));
        for (int d = 0; d < 2; d++)
            for (size_t sh = 0; sh < 3; sh++)
                for (int k = 0; k < 4; k++)
                    if (a == 0 || k == 0 || k == 3)
                        compare(&m, d ? PAR_F64 : PAR_F32, shapes[sh].B, shapes[sh].C,
                                (par_optim_kind)k, &ds, STEPS);
    }
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-256-128-10", PAR_ACT_RELU));
    for (int d = 0; d < 2; d++)
        for (size_t sh = 0; sh < 2; sh++)
            for (int k = 0; k < 4; k += 3)
                compare(&m, d ? PAR_F64 : PAR_F32, shapes[sh].B, shapes[sh].C, (par_optim_kind)k,
                        &ds, 20);
    return par_test_exit();
}
