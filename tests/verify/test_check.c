// The MPFR checker (verify/check/chk_check.h) on MLPs: sums with known exact
// answers; reference, serial, omp (exact and fast, f32 and f64,
// relu/tanh/sigmoid) pass on small nets and the default MLP; test-only
// faults make it fail and name the right tensor; --step picks the batch
// `parity train` uses. Optimizers: test_check_optim.c; CNNs and batchnorm:
// test_check_cnn.c; `parity check`: test_check_cmd.c.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_fixtures.h"
#include "par_engine.h"

// ---- the checker on known exact answers ------------------------------------------

static void known_answers(void)
{
    chk_elem e;
    // 1e20 + 1 - 1e20 in f64: the left fold gives 0 (1e20 + 1 rounds to 1e20),
    // the exact sum is 1, and |0 - 1| = 1 must lie inside gamma_3 * (2e20 + 1).
    const double big[] = {1e20, 1, -1e20};
    double fl = 0;
    for (int k = 0; k < 3; k++)
        fl = fl + big[k];
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F64, big, NULL, 3, 0, 3, fl, 256));
    par_check(fl == 0, "1e20 + 1 - 1e20: the f64 left fold is 0");
    par_check(e.exact == 1.0 && e.err == 1.0, "1e20 + 1 - 1e20: MPFR sum is exactly 1, error 1");
    par_check(e.S >= 2e20 && e.S < 2e20 * (1 + 1e-13) && e.err <= e.bound && e.bound < 1e6,
              "1e20 + 1 - 1e20: the gamma_3 bound contains the difference");
    printf("  bound %.6g = gamma_3 * S (S = %.6g)\n", e.bound, e.S);
    const double ones[] = {1, 1, 1};
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F64, big, ones, 3, 0, 3, fl, 256));
    par_check(e.exact == 1.0 && e.err == 1.0 && e.err <= e.bound,
              "1e20*1 + 1*1 - 1e20*1 as a dot product: the same");

    // A dot product of small integers is exact in binary: 0 ulp error.
    double a[32], b[32];
    long exact = 0;
    float chain = 3;
    for (int k = 0; k < 32; k++) {
        a[k] = k - 11;
        b[k] = 2 * k + 1 - (k % 5) * 7;
        exact += (long)a[k] * (long)b[k];
        chain = fmaf((float)a[k], (float)b[k], chain);
    }
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F32, a, b, 32, 3, 33, chain, 256));
    par_check(e.exact == (double)(exact + 3) && e.err == 0 && e.ulp == 0,
              "small-integer dot product (f32 fma chain): exact, 0 ulp");

    // The bound is not vacuous: 3*7 + 5*11 = 76 in f32; one ulp off is inside
    // gamma_2 * 76 (1.2e-7 * 76 = 9.1e-6 > ulp(76) = 7.6e-6), two are not.
    const double p[] = {3, 5}, q[] = {7, 11};
    const float up1 = nextafterf(76.0f, 100.0f), up2 = nextafterf(up1, 100.0f);
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F32, p, q, 2, 0, 2, up1, 256));
    par_check(e.ulp == 1 && e.err <= e.bound, "76 + 1 ulp: inside gamma_2 S");
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F32, p, q, 2, 0, 2, up2, 256));
    par_check(e.ulp == 2 && e.err > e.bound, "76 + 2 ulp: beyond gamma_2 S, caught");

    // Every term 0: exactly 0 in any order, so the bound is 0 and one
    // subnormal ulp is a violation (the GRAD_ULP control below relies on it).
    const double z[] = {0, 0, 0}, w[] = {0.5, -2, 3};
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F32, z, w, 3, 0, 3, 0x1p-149, 256));
    par_check(e.bound == 0 && e.err > e.bound, "all-zero terms (f32): bound 0, 2^-149 is caught");
    PAR_REQUIRE(chk_check_reduction(&e, PAR_F64, z, w, 3, 0, 3, 0x1p-1074, 256));
    par_check(e.bound == 0 && e.err > e.bound, "all-zero terms (f64): bound 0, 2^-1074 is caught");

    par_check(chk_ulp_of(1.0, PAR_F32) == 0x1p-23 && chk_ulp_of(-1.5, PAR_F64) == 0x1p-52 &&
                  chk_ulp_of(0, PAR_F32) == 0x1p-149 && chk_ulp_of(0x1p-130, PAR_F32) == 0x1p-149,
              "ulp of normal, zero and subnormal values");
    par_check(fabs(chk_gamma(64, PAR_F32) - 64 * 0x1p-24 / (1 - 64 * 0x1p-24)) < 1e-20,
              "gamma_n = n u / (1 - n u)");
}

static void pass_matrix(const par_dataset *ds)
{
    const struct {
        par_act act;
        const char *spec;
    } nets[] = {{PAR_ACT_RELU, "mlp:784-24-16-10"},
                {PAR_ACT_TANH, "mlp:784-20-10"},
                {PAR_ACT_SIGMOID, "mlp:784-20-12-10"}};
    const par_trainer_ops *trs[] = {&par_trainer_reference, &par_trainer_serial, &par_trainer_omp};
    char name[200];
    batch_buf bb = {0};
    for (size_t n = 0; n < 3; n++) {
        par_model m;
        PAR_REQUIRE(par_model_parse(&m, nets[n].spec, nets[n].act));
        for (int d = 0; d < 2; d++) {
            const par_dtype dt = d ? PAR_F64 : PAR_F32;
            void *w0 = malloc(m.n_params * par_dtype_size(dt));
            par_model_init(&m, dt, 42, w0);
            gather(&bb, ds, dt, 29, 0); // chunks of 8: 8, 8, 8, 5
            for (int t = 0; t < 3; t++) {
                for (int fast = 0; fast <= (t > 0); fast++) {
                    if (n > 0 && t != 1 + d) continue; // tanh, sigmoid: one trainer per dtype
                    const int T = t == 2 ? 2 : 1;
                    chk_report r;
                    par_status st =
                        check_step(&r, &m, dt, trs[t], fast ? PAR_MODE_FAST : PAR_MODE_EXACT, T,
                                   &bb, 8, w0, 256);
                    snprintf(name, sizeof name, "%s %s %s %s T=%d: every tensor passes",
                             nets[n].spec, par_act_name(nets[n].act), par_dtype_name(dt),
                             trs[t]->name, T);
                    if (fast) strcat(name, " (fast mode)");
                    if (!par_check(st == PAR_OK && r.n > 0 && r.n_fail == 0, name)) print_fails(&r);
                    if (st == PAR_OK && t == 1 && !fast) {
                        // not vacuous: the bounds of the rounded update are tight
                        const chk_tensor *u = row(&r, CHK_LOCAL, "layer0.weight.new");
                        snprintf(name, sizeof name, "  %s %s: update bound tight (ratio %.3f)",
                                 nets[n].spec, par_dtype_name(dt), u ? u->bound_ratio : 0);
                        par_check(u && u->bound_ratio > 0.4 && u->bound_ratio <= 1, name);
                        par_check(row(&r, CHK_CONTRACT, "loss") != NULL,
                                  "  exact mode also checked bitwise against the reference");
                    }
                    chk_report_free(&r);
                }
            }
            free(w0);
        }
    }
    free(bb.x);
}

// ---- negative controls -----------------------------------------------------------

static void faults(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-24-16-10", PAR_ACT_RELU));
    batch_buf bb = {0};
    char name[200];
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        const char *dn = par_dtype_name(dt);
        void *w0 = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, w0);
        gather(&bb, ds, dt, 24, 100);
        chk_report r;

        // HALF_FWD, layer 1: its outputs keep 11 bits, a relative error up to
        // 2^-12 = 2.4e-4, while the bound of a 25-term forward element is
        // gamma_25 S <= 1.5e-6 S (f32): every output whose S is below ~160 |a|
        // breaks it. Layer 2 and the gradients are computed from the rounded
        // values, consistently, so their LOCAL checks pass.
        par_fault f = {PAR_FAULT_HALF_FWD, 1, 1, 0};
        par_fault_set(&f);
        par_status st =
            check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        snprintf(name, sizeof name, "HALF_FWD layer 1 (%s): LOCAL layer1.out fails, only it", dn);
        if (!par_check(st == PAR_OK && verdict_is(&r, CHK_LOCAL, "layer1.out", CHK_FAIL) &&
                           local_fails(&r) == 1,
                       name))
            print_fails(&r);
        chk_report_free(&r);

        // SKIP_SAMPLE, layer 0, sample 3: each weight gradient element loses
        // the term dz[3][o] x[3][i]; wherever that term is not tiny next to
        // gamma_24 S (24 u = 1.4e-6 of the sum of |terms|) the bound breaks.
        f = (par_fault){PAR_FAULT_SKIP_SAMPLE, 1, 0, 3};
        par_fault_set(&f);
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        snprintf(name, sizeof name,
                 "SKIP_SAMPLE layer 0 (%s): LOCAL layer0.weight.grad and bias.grad fail, only they",
                 dn);
        if (!par_check(st == PAR_OK && verdict_is(&r, CHK_LOCAL, "layer0.weight.grad", CHK_FAIL) &&
                           verdict_is(&r, CHK_LOCAL, "layer0.bias.grad", CHK_FAIL) &&
                           local_fails(&r) == 2,
                       name))
            print_fails(&r);
        chk_report_free(&r);

        // GRAD_ULP: +1 ulp on a gradient element is a legal rounding of most
        // elements (1 ulp <= 2u |g| is far inside gamma_B S >= B u |g|), so the
        // fault is put where it provably breaks the bound: feature 0 is made
        // 0 in every sample, so layer0.weight[5][0] has only zero terms, its
        // exact value 0 is computed exactly in any order (bound 0), and the
        // fault turns it into the smallest subnormal.
        const size_t sz = par_dtype_size(dt), idx = m.views[m.layers[0].w_view].offset + 5 * 784;
        for (size_t s = 0; s < bb.B; s++)
            memset((char *)bb.x + s * 784 * sz, 0, sz);
        f = (par_fault){PAR_FAULT_GRAD_ULP, 1, 0, idx};
        par_fault_set(&f);
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        const chk_tensor *t = row(&r, CHK_LOCAL, "layer0.weight.grad");
        snprintf(name, sizeof name,
                 "GRAD_ULP on an all-zero-terms element (%s): LOCAL layer0.weight.grad[5,0] fails",
                 dn);
        if (!par_check(st == PAR_OK && t && t->verdict == CHK_FAIL && t->worst == 5 * 784 &&
                           t->worst_bound == 0 &&
                           t->n_over == 1 && local_fails(&r) == 1,
                       name))
            print_fails(&r);
        chk_report_free(&r);

        // ... and on the element with the largest |g|, the same 1-ulp fault is
        // inside the bound (LOCAL passes, rightly: some order could give it);
        // exact mode's bitwise CONTRACT view catches it.
        f.kind = PAR_FAULT_NONE;
        par_fault_set(&f);
        chk_step run;
        const par_run_cfg cfg = step_cfg(&m, dt, bb.B, 8, w0);
        const par_batch batch = batch_of(&bb);
        size_t big = 0;
        if (chk_capture(&run, &par_trainer_reference, &cfg, &batch) == PAR_OK) {
            for (size_t i = 0; i < m.n_params; i++)
                if (fabs(dt == PAR_F32 ? ((float *)run.g)[i] : ((double *)run.g)[i]) >
                    fabs(dt == PAR_F32 ? ((float *)run.g)[big] : ((double *)run.g)[big]))
                    big = i;
            chk_step_free(&run);
        }
        f = (par_fault){PAR_FAULT_GRAD_ULP, 1, 0, big};
        par_fault_set(&f);
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        snprintf(name, sizeof name,
                 "GRAD_ULP on the largest gradient (%s): LOCAL passes, CONTRACT names the element",
                 dn);
        int named = 0;
        for (size_t k = 0; k < r.n; k++) {
            const chk_tensor *c = &r.t[k];
            if (c->view == CHK_CONTRACT && c->verdict == CHK_FAIL && strstr(c->name, ".grad"))
                named = c->n_over == 1 && c->worst_ulp == 1;
        }
        if (!par_check(st == PAR_OK && local_fails(&r) == 0 && named, name)) print_fails(&r);
        chk_report_free(&r);

        // CHUNK_SWAP folds ((g1 + g2) + g0) + ... instead of ((g0 + g1) + g2).
        // The bound holds for every order, so LOCAL must pass (as for fast
        // mode); only the bitwise CONTRACT view can see a reorder, and must.
        gather(&bb, ds, dt, 24, 100);
        f = (par_fault){PAR_FAULT_CHUNK_SWAP, 1, 0, 0};
        par_fault_set(&f);
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        snprintf(name, sizeof name, "CHUNK_SWAP layer 0 (%s): LOCAL passes (order-free bound)", dn);
        // (An error leaves an empty report: no LOCAL failure, and no pass either.)
        if (!par_check(st == PAR_OK && local_fails(&r) == 0, name)) print_fails(&r);
        int swap_named = 0;
        for (size_t k = 0; k < r.n; k++) {
            const chk_tensor *c = &r.t[k];
            if (c->view == CHK_CONTRACT && c->verdict == CHK_FAIL &&
                strstr(c->name, "layer0.weight"))
                swap_named = 1;
        }
        snprintf(name, sizeof name, "CHUNK_SWAP layer 0 (%s): CONTRACT names layer0.weight", dn);
        if (!par_check(st == PAR_OK && swap_named, name)) print_fails(&r);
        chk_report_free(&r);

        f.kind = PAR_FAULT_NONE;
        par_fault_set(&f);
        free(w0);
    }
    free(bb.x);
}

// ---- --step is the batch of `parity train` ------------------------------------------

static void step_records(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-16-10", PAR_ACT_RELU));
    const size_t sz = 4, N = m.n_params, batch = 64;
    const long per_epoch = (long)((ds->n_train + batch - 1) / batch);
    void *w0 = malloc(N * sz), *w_prev = malloc(N * sz), *w_next = malloc(N * sz);
    par_model_init(&m, PAR_F32, 9, w0);
    const long steps[] = {2, per_epoch, per_epoch + 1};
    for (int k = 0; k < 3; k++) {
        const long S = steps[k];
        par_run_opts ro = {.trainer = &par_trainer_serial,
                           .cfg = {.model = &m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT,
                                   .batch = batch, .chunk = 8, .lr = 0.05, .threads = 1,
                                   .init_params = w0},
                           .ds = ds, .seed = 11, .epochs = 2, .max_steps = S - 1};
        long done;
        par_status st = S > 1 ? par_run(&ro, NULL, w_prev, &done, NULL) : PAR_OK;
        ro.max_steps = S;
        if (st == PAR_OK) st = par_run(&ro, NULL, w_next, &done, NULL);
        size_t *idx = NULL, B = 0;
        int epoch = -1;
        if (st == PAR_OK) st = chk_step_records(&idx, &B, &epoch, ds, 11, batch, S);
        chk_step run = {0};
        if (st == PAR_OK) {
            void *x = malloc(B * 784 * sz);
            int32_t *labels = malloc(B * sizeof *labels);
            par_data_gather(&ds->train, idx, B, PAR_F32, x, labels);
            const par_run_cfg cfg = step_cfg(&m, PAR_F32, B, 8, w_prev);
            const par_batch b = {.x = x, .labels = labels, .B = B};
            st = chk_capture(&run, &par_trainer_serial, &cfg, &b);
            free(x);
            free(labels);
        }
        char name[160];
        snprintf(name, sizeof name,
                 "step %ld (epoch %d, B=%zu): the checked step is parity train's, bitwise", S,
                 epoch, B);
        par_check(st == PAR_OK && memcmp(run.w_new, w_next, N * sz) == 0 &&
                      epoch == (int)((S - 1) / per_epoch),
                  name);
        chk_step_free(&run);
        free(idx);
    }
    free(w0);
    free(w_prev);
    free(w_next);
}

// ---- the default MLP, one step ---------------------------------------------------

static void default_mlp(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-256-128-10", PAR_ACT_RELU));
    void *w0 = malloc(m.n_params * 4);
    par_model_init(&m, PAR_F32, 42, w0);
    batch_buf bb = {0};
    gather(&bb, ds, PAR_F32, 64, 0);
    chk_report r;
    par_status st =
        check_step(&r, &m, PAR_F32, &par_trainer_omp, PAR_MODE_EXACT, 2, &bb, 8, w0, 128);
    printf("  default MLP, B=64, 128 bits, with END-TO-END: %.2f s of MPFR on %d threads\n",
           r.seconds, r.threads);
    if (!par_check(st == PAR_OK && r.n_fail == 0 && r.n == 53,
                   "mlp:784-256-128-10 f32 omp T=2 exact: every tensor passes"))
        print_fails(&r);
    par_check(r.seconds < 60, "default MLP checked in under 60 s");
    chk_report_free(&r);
    free(bb.x);
    free(w0);
}

int main(void)
{
    known_answers();
    par_dataset ds;
    fixture_dataset(&ds, 4000);
    pass_matrix(&ds);
    faults(&ds);
    step_records(&ds);
    default_mlp(&ds);
    par_dataset_free(&ds);
    return par_test_exit();
}
