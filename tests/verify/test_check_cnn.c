// The MPFR checker on CNNs: a conv + max-pool CNN and CNNs with batchnorm
// pass for reference, serial and omp, f32 and f64; a batchnorm with
// statistics known by hand; faults in conv and batchnorm layers (a skipped
// sample, one ulp, a reordered fold, a misrouted max-pool gradient) fail and
// name the right tensor.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpfr.h>

#include "check_fixtures.h"
#include "par_engine.h"

// ---- CNNs: conv2d and max-pool --------------------------------------------------

// Every failing CONTRACT row is one of layer l's: 1 if so and one does fail.
static int contract_fails_only_in(const chk_report *r, int l)
{
    char prefix[16];
    snprintf(prefix, sizeof prefix, "layer%d.", l);
    int any = 0;
    for (size_t k = 0; k < r->n; k++) {
        const chk_tensor *t = &r->t[k];
        if (t->view != CHK_CONTRACT || t->verdict != CHK_FAIL) continue;
        if (strncmp(t->name, prefix, strlen(prefix)) != 0) return 0;
        any = 1;
    }
    return any;
}

// Moves the gradient max-pool layer `pool` routed into one window of d (the
// pooled layer's dz, B samples) to another input of that window: swaps the
// window's one nonzero element with its neighbour. Returns the two flat
// indices into d, or 0 when no window has a nonzero gradient.
static int misroute(void *d, par_dtype dt, const par_layer *pool, size_t B, size_t moved[2])
{
    const size_t sz = par_dtype_size(dt), K = pool->K;
    for (size_t s = 0; s < B; s++)
        for (size_t c = 0; c < pool->c_in; c++)
            for (size_t oh = 0; oh < pool->h_out; oh++)
                for (size_t ow = 0; ow < pool->w_out; ow++) {
                    const size_t base =
                        s * pool->n_in + (c * pool->h_in + oh * K) * pool->w_in + ow * K;
                    for (size_t k = 0; k < K * K; k++) {
                        const size_t i = base + k / K * pool->w_in + k % K;
                        const size_t j = k == 0 ? base + 1 : base; // another input of the window
                        const double v = dt == PAR_F32 ? ((float *)d)[i] : ((double *)d)[i];
                        if (v == 0) continue;
                        char tmp[8];
                        memcpy(tmp, (char *)d + i * sz, sz);
                        memcpy((char *)d + i * sz, (char *)d + j * sz, sz);
                        memcpy((char *)d + j * sz, tmp, sz);
                        moved[0] = i < j ? i : j;
                        moved[1] = i < j ? j : i;
                        return 1;
                    }
                }
    return 0;
}

// A conv + max-pool CNN passes for serial and omp T=2 in f32 and f64 (LOCAL
// bounds and the CONTRACT view). The same faults in its conv layers fail and
// name the conv tensor: a skipped sample breaks the LOCAL weight and bias
// gradient bounds of that layer, and only them; one ulp and a reordered chunk
// fold are what some order of the terms could give (LOCAL passes, as for
// MLPs), and the bitwise CONTRACT view names the element (one ulp) or the
// layer (fold). Max-pool is checked exactly: a gradient routed to another
// input of its window fails LOCAL layer0.dz with bound 0, first of all rows.
static void cnn_checks(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "cnn:1x28x28-c3k3p1-r-m2-c4k3-th-m2-f-fc10", PAR_ACT_RELU));
    batch_buf bb = {0};
    char name[200];
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        const char *dn = par_dtype_name(dt);
        void *w0 = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, w0);
        gather(&bb, ds, dt, 21, 200); // chunks of 8: 8, 8, 5
        chk_report r;
        for (int T = 1; T <= 2; T++) {
            const par_status st =
                check_step(&r, &m, dt, T == 1 ? &par_trainer_serial : &par_trainer_omp,
                           PAR_MODE_EXACT, T, &bb, 8, w0, 256);
            snprintf(name, sizeof name, "%s %s T=%d: every tensor passes (conv, max-pool)", m.spec,
                     dn, T);
            if (!par_check(st == PAR_OK && r.n > 0 && r.n_fail == 0 &&
                               row(&r, CHK_LOCAL, "layer0.weight.grad") &&
                               row(&r, CHK_LOCAL, "layer1.out") &&
                               row(&r, CHK_CONTRACT, "layer2.weight.grad") &&
                               !row(&r, CHK_LOCAL, "layer1.weight.grad"),
                           name))
                print_fails(&r);
            chk_report_free(&r);
        }

        par_fault f = {PAR_FAULT_SKIP_SAMPLE, 1, 0, 3};
        par_fault_set(&f);
        par_status st =
            check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        snprintf(name, sizeof name,
                 "CNN, skipped sample in conv layer 0 (%s): LOCAL layer0.weight.grad and "
                 "bias.grad fail, only they",
                 dn);
        if (!par_check(st == PAR_OK && verdict_is(&r, CHK_LOCAL, "layer0.weight.grad", CHK_FAIL) &&
                           verdict_is(&r, CHK_LOCAL, "layer0.bias.grad", CHK_FAIL) &&
                           local_fails(&r) == 2,
                       name))
            print_fails(&r);
        chk_report_free(&r);

        f = (par_fault){PAR_FAULT_GRAD_ULP, 1, 0, m.views[m.layers[0].w_view].offset + 5};
        par_fault_set(&f);
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        const chk_tensor *t = row(&r, CHK_CONTRACT, "layer0.weight.grad");
        snprintf(name, sizeof name,
                 "CNN, one ulp in conv layer 0 (%s): LOCAL passes, CONTRACT names "
                 "layer0.weight.grad[0,5]",
                 dn);
        if (!par_check(st == PAR_OK && local_fails(&r) == 0 && t && t->verdict == CHK_FAIL &&
                           t->n_over == 1 && t->worst == 5 && t->worst_ulp == 1,
                       name))
            print_fails(&r);
        chk_report_free(&r);

        // The same fault where it provably breaks the bound (as for MLPs): with
        // every input pixel 0, each conv layer 0 weight gradient has only zero
        // terms, so its exact value 0 is computed exactly in any order.
        batch_buf zero = {0};
        gather(&zero, ds, dt, 21, 200);
        memset(zero.x, 0, zero.B * 784 * par_dtype_size(dt));
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &zero, 8, w0, 256);
        t = row(&r, CHK_LOCAL, "layer0.weight.grad");
        snprintf(name, sizeof name,
                 "CNN, one ulp on an all-zero-terms conv gradient (%s): LOCAL "
                 "layer0.weight.grad[0,5] fails, bound 0",
                 dn);
        if (!par_check(st == PAR_OK && t && t->verdict == CHK_FAIL && t->n_over == 1 &&
                           t->worst == 5 && t->worst_bound == 0 && local_fails(&r) == 1,
                       name))
            print_fails(&r);
        chk_report_free(&r);
        free(zero.x);

        for (int l = 0; l <= 2; l += 2) {
            f = (par_fault){PAR_FAULT_CHUNK_SWAP, 1, l, 0};
            par_fault_set(&f);
            st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
            char tensor[40];
            snprintf(tensor, sizeof tensor, "layer%d.weight.grad", l);
            snprintf(name, sizeof name,
                     "CNN, reordered chunk fold in conv layer %d (%s): LOCAL passes, CONTRACT "
                     "fails in %s and layer %d only",
                     l, dn, tensor, l);
            if (!par_check(st == PAR_OK && local_fails(&r) == 0 &&
                               verdict_is(&r, CHK_CONTRACT, tensor, CHK_FAIL) &&
                               contract_fails_only_in(&r, l),
                           name))
                print_fails(&r);
            chk_report_free(&r);
        }
        f = (par_fault){PAR_FAULT_NONE, 0, 0, 0};
        par_fault_set(&f);

        // max-pool (layer 1) routing, on a clean step's captured dz of layer 0
        chk_step run;
        const par_run_cfg cfg = step_cfg(&m, dt, bb.B, 8, w0);
        const par_batch batch = batch_of(&bb);
        size_t moved[2] = {0, 0};
        memset(&r, 0, sizeof r);
        const par_status cap = chk_capture(&run, &par_trainer_serial, &cfg, &batch);
        const int found = cap == PAR_OK && misroute(run.d[0], dt, &m.layers[1], bb.B, moved);
        const chk_opts o = {256, 0, 0};
        st = found ? chk_check_step(&r, &run, &o) : cap;
        t = first_fail(&r, CHK_LOCAL);
        snprintf(name, sizeof name,
                 "CNN, max-pool gradient moved within its window (%s): LOCAL layer0.dz fails "
                 "first, at both elements, bound 0",
                 dn);
        if (!par_check(found && st == PAR_OK && t && strcmp(t->name, "layer0.dz") == 0 &&
                           t->n_over == 2 && (t->worst == moved[0] || t->worst == moved[1]) &&
                           t->worst_bound == 0,
                       name))
            print_fails(&r);
        chk_report_free(&r);
        if (cap == PAR_OK) chk_step_free(&run);
        free(w0);
    }
    free(bb.x);
}

// ---- batchnorm ---------------------------------------------------------------------

// A batchnorm whose statistics are known by hand: cnn:1x2x2-c1k1-bn-f-fc2
// with the conv set to the identity (weight 1, bias 0) on two samples
// x = 1 2 3 4 and 5 6 7 8: N = 8, S = 36, mean = 4.5, Q = sum (x - 4.5)^2 =
// 2 (0.25 + 2.25 + 6.25 + 12.25) = 42, var = 42 / 8 = 5.25, all exact in
// both dtypes; inv = 1 / sqrt(5.25 + eps) to within one ulp of MPFR's
// value (eps as the dtype rounds 1e-5). The step then passes the check.
static void bn_hand(void)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "cnn:1x2x2-c1k1-bn-f-fc2", PAR_ACT_RELU));
    const double want[4] = {36, 4.5, 42, 5.25};
    char name[160];
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        const size_t sz = par_dtype_size(dt);
        double w[64] = {0}, x[8];
        void *w0 = malloc(m.n_params * sz), *xb = malloc(8 * sz);
        par_model_init(&m, dt, 42, w0);
        for (size_t i = 0; i < m.n_params && i < 64; i++)
            w[i] = dt == PAR_F32 ? ((float *)w0)[i] : ((double *)w0)[i];
        w[m.views[m.layers[0].w_view].offset] = 1;
        w[m.views[m.layers[0].b_view].offset] = 0;
        for (int i = 0; i < 8; i++)
            x[i] = i + 1;
        for (size_t i = 0; i < m.n_params && i < 64; i++) {
            if (dt == PAR_F32) ((float *)w0)[i] = (float)w[i];
            else ((double *)w0)[i] = w[i];
        }
        for (int i = 0; i < 8; i++) {
            if (dt == PAR_F32) ((float *)xb)[i] = (float)x[i];
            else ((double *)xb)[i] = x[i];
        }
        const int32_t labels[2] = {0, 1};
        const par_run_cfg cfg = step_cfg(&m, dt, 2, 1, w0);
        const par_batch batch = {.x = xb, .labels = labels, .B = 2};
        chk_step run;
        chk_report r = {0};
        PAR_REQUIRE(chk_capture(&run, &par_trainer_serial, &cfg, &batch));
        double got[CHK_BN_N];
        for (int k = 0; k < CHK_BN_N; k++)
            got[k] = dt == PAR_F32 ? ((float *)run.bn[1])[k] : ((double *)run.bn[1])[k];
        mpfr_t e;
        mpfr_init2(e, 256);
        mpfr_set_d(e, dt == PAR_F32 ? (double)(float)1e-5 : 1e-5, MPFR_RNDN);
        mpfr_add_d(e, e, 5.25, MPFR_RNDN);
        mpfr_rec_sqrt(e, e, MPFR_RNDN);
        const double inv = mpfr_get_d(e, MPFR_RNDN);
        mpfr_clear(e);
        snprintf(name, sizeof name,
                 "hand batchnorm (%s): S 36, mean 4.5, Q 42, var 5.25 exactly, inv %.9g within 1 "
                 "ulp of MPFR's",
                 par_dtype_name(dt), inv);
        par_check(got[0] == want[0] && got[1] == want[1] && got[2] == want[2] &&
                      got[3] == want[3] && fabs(got[CHK_BN_INV] - inv) <= chk_ulp_of(inv, dt),
                  name);
        const chk_opts o = {256, 1, 1};
        const par_status st = chk_check_step(&r, &run, &o);
        const chk_tensor *t = row(&r, CHK_LOCAL, "layer1.bn.var");
        snprintf(name, sizeof name, "hand batchnorm (%s): every tensor passes, var error 0",
                 par_dtype_name(dt));
        if (!par_check(st == PAR_OK && r.n_fail == 0 && t && t->max_abs == 0, name))
            print_fails(&r);
        chk_report_free(&r);
        chk_step_free(&run);
        free(w0);
        free(xb);
    }
}

// CNNs with batchnorm after a conv (layer 1, relu) and after an fc (layer
// 4, tanh) pass for reference, serial, omp T=2 exact and fast, f32 and f64,
// with rows for every statistic and the running statistics. Negative
// controls on batchnorm layer 1: one ulp up in the variance of channel 1
// breaks the half-ulp bound of var = fl(Q / N) and fails LOCAL
// layer1.bn.var at [1], and only it; statistics folded out of chunk order
// are what some order could give (LOCAL passes, order-free bounds) and fail
// the bitwise CONTRACT first in a statistic of layer 1 (its sum or sqdev).
static void bn_checks(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "cnn:1x28x28-c3k3p1-bn-r-m2-f-fc8-bn-th-fc10", PAR_ACT_RELU));
    const par_trainer_ops *trs[] = {&par_trainer_reference, &par_trainer_serial, &par_trainer_omp,
                                    &par_trainer_omp};
    batch_buf bb = {0};
    char name[200];
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        const char *dn = par_dtype_name(dt);
        void *w0 = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, w0);
        gather(&bb, ds, dt, 21, 300); // chunks of 8: 8, 8, 5
        chk_report r;
        for (int t = 0; t < 4; t++) {
            const par_mode mode = t == 3 ? PAR_MODE_FAST : PAR_MODE_EXACT;
            const par_status st =
                check_step(&r, &m, dt, trs[t], mode, t >= 2 ? 2 : 1, &bb, 8, w0, 256);
            snprintf(name, sizeof name, "%s %s %s%s: every tensor passes (batchnorm)", m.spec, dn,
                     trs[t]->name, t == 3 ? " fast" : "");
            const int rows_ok = row(&r, CHK_LOCAL, "layer1.bn.var") &&
                                row(&r, CHK_LOCAL, "layer4.bn.inv") &&
                                row(&r, CHK_LOCAL, "layer4.running_var.new") &&
                                row(&r, CHK_E2E, "layer1.bn.mean") &&
                                (t == 0 || t == 3 || row(&r, CHK_CONTRACT, "layer1.bn.sqdev"));
            if (!par_check(st == PAR_OK && r.n > 0 && r.n_fail == 0 && rows_ok, name))
                print_fails(&r);
            if (st == PAR_OK && t == 1) {   // not vacuous: half-ulp bounds are reached
                double top = 0;
                const char *names[] = {"layer1.bn.mean", "layer1.bn.var", "layer4.bn.mean",
                                       "layer4.bn.var"};
                for (int k = 0; k < 4; k++) {
                    const chk_tensor *u = row(&r, CHK_LOCAL, names[k]);
                    if (u && u->bound_ratio > top) top = u->bound_ratio;
                }
                snprintf(name, sizeof name, "  batchnorm mean/var bounds tight (%s: ratio %.3f)",
                         dn, top);
                par_check(top > 0.5 && top <= 1, name);
            }
            chk_report_free(&r);
        }

        par_fault f = {PAR_FAULT_BN_VAR_ULP, 1, 1, 1};
        par_fault_set(&f);
        par_status st =
            check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        const chk_tensor *t = row(&r, CHK_LOCAL, "layer1.bn.var");
        snprintf(name, sizeof name,
                 "batchnorm var + 1 ulp (%s): LOCAL layer1.bn.var[1] fails, only it; CONTRACT "
                 "layer1.bn.var too",
                 dn);
        if (!par_check(st == PAR_OK && t && t->verdict == CHK_FAIL && t->n_over == 1 &&
                           t->worst == 1 && local_fails(&r) == 1 &&
                           verdict_is(&r, CHK_CONTRACT, "layer1.bn.var", CHK_FAIL),
                       name))
            print_fails(&r);
        chk_report_free(&r);

        f = (par_fault){PAR_FAULT_BN_SWAP, 1, 1, 0};
        par_fault_set(&f);
        st = check_step(&r, &m, dt, &par_trainer_serial, PAR_MODE_EXACT, 1, &bb, 8, w0, 256);
        t = first_fail(&r, CHK_CONTRACT);
        snprintf(name, sizeof name,
                 "batchnorm statistics folded out of order (%s): LOCAL passes, CONTRACT fails "
                 "first in layer1.bn.sum or layer1.bn.sqdev (%s)",
                 dn, t ? t->name : "none");
        if (!par_check(st == PAR_OK && local_fails(&r) == 0 && t &&
                           (strcmp(t->name, "layer1.bn.sum") == 0 ||
                            strcmp(t->name, "layer1.bn.sqdev") == 0),
                       name))
            print_fails(&r);
        chk_report_free(&r);
        f = (par_fault){PAR_FAULT_NONE, 0, 0, 0};
        par_fault_set(&f);
        free(w0);
    }
    free(bb.x);
}

int main(void)
{
    par_dataset ds;
    fixture_dataset(&ds, 4000);
    cnn_checks(&ds);
    bn_hand();
    bn_checks(&ds);
    par_dataset_free(&ds);
    return par_test_exit();
}
