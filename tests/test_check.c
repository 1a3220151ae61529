// The MPFR checker (verify/check/chk_check.h) and `parity check`: the checker on
// sums with known exact answers; reference, serial, omp (exact and fast,
// f32 and f64, relu/tanh/sigmoid) pass on small nets, a conv + max-pool CNN,
// CNNs with batchnorm, the default MLP and momentum, nesterov, adam steps
// (step 1 and from a non-zero state); test-only faults make it fail and
// name the right tensor; --step picks the batch `parity train` uses; CLI
// exit codes. Run: ctest -R test_check (~10 s).
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mpfr.h>

#include "chk_check.h"
#include "par_engine.h"
#include "par_fixtures.h"
#include "par_npz.h"

static const chk_tensor *row(const chk_report *r, chk_view v, const char *name)
{
    for (size_t k = 0; k < r->n; k++)
        if (r->t[k].view == v && strcmp(r->t[k].name, name) == 0) return &r->t[k];
    return NULL;
}

static int verdict_is(const chk_report *r, chk_view v, const char *name, chk_verdict want)
{
    const chk_tensor *t = row(r, v, name);
    return t && t->verdict == want;
}

// Names of the failing rows of a view, for messages.
static void print_fails(const chk_report *r)
{
    for (size_t k = 0; k < r->n; k++) {
        const chk_tensor *t = &r->t[k];
        if (t->verdict != CHK_FAIL) continue;
        char ix[48];
        chk_format_index(ix, sizeof ix, t, t->worst);
        printf("  FAIL %s %s%s: run %.9g exact %.9g bound %.3g (%zu over)\n",
               chk_view_name(t->view), t->name, ix, t->worst_run, t->worst_exact, t->worst_bound,
               t->n_over);
    }
}

static size_t local_fails(const chk_report *r)
{
    size_t n = 0;
    for (size_t k = 0; k < r->n; k++)
        n += r->t[k].view == CHK_LOCAL && r->t[k].verdict == CHK_FAIL;
    return n;
}

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

// ---- steps of small networks -----------------------------------------------------

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;

typedef struct batch_buf {
    void *x;
    int32_t labels[256];
    size_t B;
} batch_buf;

static void gather(batch_buf *bb, const par_dataset *ds, par_dtype dt, size_t B, size_t first)
{
    size_t *order;
    PAR_REQUIRE(par_epoch_order(&order, ds->n_train, 7, 0));
    free(bb->x);
    bb->x = malloc(B * 784 * par_dtype_size(dt));
    bb->B = B;
    par_data_gather(&ds->train, order + first, B, dt, bb->x, bb->labels);
    free(order);
}

// Captures one step and checks it (LOCAL + E2E, and CONTRACT for exact
// non-reference trainers). Returns the status; *r is filled.
static par_status check_step(chk_report *r, const par_model *m, par_dtype dt,
                             const par_trainer_ops *tr, par_mode mode, int threads,
                             const batch_buf *bb, size_t C, const void *w0, int prec)
{
    memset(r, 0, sizeof *r);
    const par_run_cfg cfg = {.model = m,
                             .dtype = dt,
                             .mode = mode,
                             .batch = bb->B,
                             .chunk = C,
                             .lr = 0.05,
                             .threads = threads,
                             .init_params = w0};
    const par_batch batch = {.x = bb->x, .labels = bb->labels, .B = bb->B};
    chk_step run, ref;
    PAR_TRY(chk_capture(&run, tr, &cfg, &batch));
    const chk_opts o = {prec, 0, 1};
    par_status st = chk_check_step(r, &run, &o);
    if (st == PAR_OK && mode == PAR_MODE_EXACT && tr != &par_trainer_reference) {
        st = chk_capture(&ref, &par_trainer_reference, &cfg, &batch);
        if (st == PAR_OK) st = chk_check_contract(r, &run, &ref);
        chk_step_free(&ref);
    }
    chk_step_free(&run);
    return st;
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

// ---- optimizers: momentum, nesterov, adam ------------------------------------------

// One step of tr from w0 and the optimizer state `start` (NULL: fresh),
// checked LOCAL + E2E, and for exact non-reference trainers CONTRACT.
static par_status check_optim_step(chk_report *r, const par_run_cfg *cfg, const par_trainer_ops *tr,
                                   const batch_buf *bb, const par_optim_state *start)
{
    memset(r, 0, sizeof *r);
    const par_batch batch = {.x = bb->x, .labels = bb->labels, .B = bb->B};
    chk_step run, ref;
    PAR_TRY(chk_capture_state(&run, tr, cfg, &batch, start));
    const chk_opts o = {256, 0, 1};
    par_status st = chk_check_step(r, &run, &o);
    if (st == PAR_OK && tr != &par_trainer_reference) {
        st = chk_capture_state(&ref, &par_trainer_reference, cfg, &batch, start);
        if (st == PAR_OK) st = chk_check_contract(r, &run, &ref);
        chk_step_free(&ref);
    }
    chk_step_free(&run);
    return st;
}

// The LOCAL rows that fail, as "a b c" (for exact assertions).
static void local_fail_names(const chk_report *r, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t k = 0; k < r->n; k++)
        if (r->t[k].view == CHK_LOCAL && r->t[k].verdict == CHK_FAIL) {
            if (buf[0]) strncat(buf, " ", cap - strlen(buf) - 1);
            strncat(buf, r->t[k].name, cap - strlen(buf) - 1);
        }
}

// Every optimizer, f32 and f64: step 1 (zero state; momentum's velocity is
// then g exactly, error 0) and step 4 from the
// weights and state that 3 steps of the reference left (non-zero state, t =
// 3) pass LOCAL (the op-by-op bounds of chk_update_check) and CONTRACT; the
// new state is checked too. Negative controls on step 4: obeta (the trainer
// uses mu or beta1 + 2^-10, the checker the given value) fails exactly the
// first state row of every parameter view (velocity or m) and no weight
// (nesterov: the weights too, whose step uses mu again);
// oswap (the weight step taken from the state before the update) fails
// exactly the new weights and no state.
static void optim_checks(const par_dataset *ds)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-24-16-10", PAR_ACT_RELU));
    const par_optim_kind kinds[] = {PAR_OPTIM_MOMENTUM, PAR_OPTIM_NESTEROV, PAR_OPTIM_ADAM};
    batch_buf bb = {0};
    char name[1200], fails[600], want[600];
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        const size_t sz = par_dtype_size(dt), N = m.n_params;
        void *w0 = malloc(N * sz), *w3 = malloc(N * sz), *s3[2] = {malloc(N * sz), malloc(N * sz)};
        par_model_init(&m, dt, 42, w0);
        for (int k = 0; k < 3; k++) {
            const par_optim o = par_optim_default(kinds[k]);
            const char *on = par_optim_name(kinds[k]), *dn = par_dtype_name(dt);
            const int ns = par_optim_n_state(kinds[k]);
            par_run_cfg cfg = {.model = &m,
                               .dtype = dt,
                               .mode = PAR_MODE_EXACT,
                               .batch = 24,
                               .chunk = 8,
                               .lr = 0.05,
                               .threads = 1,
                               .init_params = w0,
                               .optim = &o};
            // 3 steps of the reference on batches 0..71: the state of t = 3.
            void *rs;
            PAR_REQUIRE(par_trainer_reference.create(&cfg, &rs));
            double loss;
            for (int s = 0; s < 3; s++) {
                gather(&bb, ds, dt, 24, 24 * (size_t)s);
                const par_batch b = {.x = bb.x, .labels = bb.labels, .B = bb.B};
                PAR_REQUIRE(par_trainer_reference.step(rs, &b, &loss));
            }
            const void *wp;
            size_t n;
            par_optim_state os;
            PAR_REQUIRE(par_trainer_reference.params(rs, &wp, &n));
            PAR_REQUIRE(par_trainer_reference.get_optim(rs, &os));
            memcpy(w3, wp, N * sz);
            double big = 0;
            for (int i = 0; i < ns; i++) {
                memcpy(s3[i], os.arr[i], N * sz);
                for (size_t p = 0; p < N; p++) {
                    const double x = d ? ((double *)s3[i])[p] : ((float *)s3[i])[p];
                    big = fmax(big, fabs(x));
                }
            }
            par_check(os.n == ns && os.t == 3 && big > 0, "3 reference steps: a non-zero state, t 3");
            par_trainer_reference.destroy(rs);
            const par_optim_state start = {ns, {s3[0], s3[1]}, 3};
            gather(&bb, ds, dt, 24, 72);
            const par_trainer_ops *trs[] = {&par_trainer_reference, &par_trainer_serial,
                                            &par_trainer_omp};
            for (int later = 0; later < 2; later++) {
                cfg.init_params = later ? w3 : w0;
                for (int t = 0; t < 3; t++) {
                    cfg.threads = t == 2 ? 2 : 1;
                    chk_report r;
                    par_status st = check_optim_step(&r, &cfg, trs[t], &bb, later ? &start : NULL);
                    const chk_tensor *wn = row(&r, CHK_LOCAL, "layer0.weight.new");
                    snprintf(want, sizeof want, "layer0.weight.%s.new",
                             par_optim_state_name(kinds[k], ns - 1));
                    const chk_tensor *sn = row(&r, CHK_LOCAL, want);
                    snprintf(name, sizeof name,
                             "%s %s %s, step %d: every tensor passes, new state checked "
                             "(weight ratio %.3f, %s ratio %.3f)",
                             on, dn, trs[t]->name, later ? 4 : 1, wn ? wn->bound_ratio : -1, want,
                             sn ? sn->bound_ratio : -1);
                    if (!par_check(st == PAR_OK && r.n_fail == 0 && wn && sn &&
                                       wn->bound_ratio > 0.1 &&
                                       (sn->bound_ratio > 0.1 || (!later && ns == 1)) &&
                                       (trs[t] == &par_trainer_reference ||
                                        row(&r, CHK_CONTRACT, want + 0)),
                                   name))
                        print_fails(&r);
                    chk_report_free(&r);
                }
            }
            // Negative controls, serial, step 4 (faults count from the run's step 1).
            cfg.init_params = w3;
            cfg.threads = 1;
            for (int fk = 0; fk < 2; fk++) {
                par_fault f = {fk ? PAR_FAULT_OPT_SWAP : PAR_FAULT_OPT_BETA, 1, 0, 0};
                par_fault_set(&f);
                chk_report r;
                par_status st = check_optim_step(&r, &cfg, &par_trainer_serial, &bb, &start);
                f.kind = PAR_FAULT_NONE;
                par_fault_set(&f);
                local_fail_names(&r, fails, sizeof fails);
                want[0] = '\0';
                for (int l = 0; l < 3; l++)
                    for (int j = 0; j < 2; j++) {
                        char one[64];
                        if (fk)
                            snprintf(one, sizeof one, "%slayer%d.%s.new", l || j ? " " : "", l,
                                     j ? "bias" : "weight");
                        else if (kinds[k] == PAR_OPTIM_NESTEROV)   // mu in the weight step too
                            snprintf(one, sizeof one, "%slayer%d.weight%s.new layer%d.bias%s.new",
                                     l || j ? " " : "", l, j ? ".velocity" : "", l,
                                     j ? ".velocity" : "");
                        else
                            snprintf(one, sizeof one, "%slayer%d.%s.%s.new", l || j ? " " : "", l,
                                     j ? "bias" : "weight", par_optim_state_name(kinds[k], 0));
                        strcat(want, one);
                    }
                snprintf(name, sizeof name, "%s %s, %s: LOCAL fails exactly [%s]", on, dn,
                         fk ? "oswap (weight step before the state update)"
                            : "obeta (mu/beta1 + 2^-10 in the trainer only)",
                         want);
                if (!par_check(st == PAR_OK && strcmp(fails, want) == 0, name))
                    printf("  got [%s]\n", fails);
                chk_report_free(&r);
            }
        }
        free(w0), free(w3), free(s3[0]), free(s3[1]);
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
        const par_run_cfg cfg = {.model = &m,
                                 .dtype = dt,
                                 .mode = PAR_MODE_EXACT,
                                 .batch = bb.B,
                                 .chunk = 8,
                                 .lr = 0.05,
                                 .threads = 1,
                                 .init_params = w0};
        const par_batch batch = {.x = bb.x, .labels = bb.labels, .B = bb.B};
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

// ---- CNNs: conv2d and max-pool --------------------------------------------------

// The first LOCAL row that fails, in computation order; NULL if none.
static const chk_tensor *first_local_fail(const chk_report *r)
{
    for (size_t k = 0; k < r->n; k++)
        if (r->t[k].view == CHK_LOCAL && r->t[k].verdict == CHK_FAIL) return &r->t[k];
    return NULL;
}

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
        const par_run_cfg cfg = {.model = &m,
                                 .dtype = dt,
                                 .mode = PAR_MODE_EXACT,
                                 .batch = bb.B,
                                 .chunk = 8,
                                 .lr = 0.05,
                                 .threads = 1,
                                 .init_params = w0};
        const par_batch batch = {.x = bb.x, .labels = bb.labels, .B = bb.B};
        size_t moved[2] = {0, 0};
        memset(&r, 0, sizeof r);
        const par_status cap = chk_capture(&run, &par_trainer_serial, &cfg, &batch);
        const int found = cap == PAR_OK && misroute(run.d[0], dt, &m.layers[1], bb.B, moved);
        const chk_opts o = {256, 0, 0};
        st = found ? chk_check_step(&r, &run, &o) : cap;
        t = first_local_fail(&r);
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
        const par_run_cfg cfg = {.model = &m,
                                 .dtype = dt,
                                 .mode = PAR_MODE_EXACT,
                                 .batch = 2,
                                 .chunk = 1,
                                 .lr = 0.05,
                                 .threads = 1,
                                 .init_params = w0};
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

// The first failing row of view v; NULL if none.
static const chk_tensor *first_fail(const chk_report *r, chk_view v)
{
    for (size_t k = 0; k < r->n; k++)
        if (r->t[k].view == v && r->t[k].verdict == CHK_FAIL) return &r->t[k];
    return NULL;
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
            const par_run_cfg cfg = {.model = &m,
                                     .dtype = PAR_F32,
                                     .mode = PAR_MODE_EXACT,
                                     .batch = B,
                                     .chunk = 8,
                                     .lr = 0.05,
                                     .threads = 1,
                                     .init_params = w_prev};
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

// ---- the CLI --------------------------------------------------------------------------

static void put_be32(FILE *f, uint32_t v)
{
    const unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                                (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

// IDX files of n synthetic 28x28 images with labels, as parity reads them.
static int write_idx(const char *dir, const char *prefix, size_t n, uint64_t salt)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    put_be32(f, 0x803);
    put_be32(f, (uint32_t)n);
    put_be32(f, 28);
    put_be32(f, 28);
    for (size_t i = 0; i < n * 784; i++) {
        const unsigned char px =
            (i % 784) < 56 ? 0 : (unsigned char)(par_rng_bits(salt, PAR_RNG_DATA, 0, i) >> 56);
        fputc(px, f);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    f = fopen(path, "wb");
    if (!f) return 0;
    put_be32(f, 0x801);
    put_be32(f, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        fputc((int)(par_rng_bits(salt, PAR_RNG_DATA, 1, i) % 10), f);
    return fclose(f) == 0;
}

// Runs `parity check ARGS`, output to out; returns the exit code.
static int cli(const char *args, const char *out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s check %s > %s 2>&1", PAR_PARITY_BIN, args, out);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[1 << 20];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, text) != NULL;
}

static void cli_tests(void)
{
    char dir[] = "/tmp/parity_test_check_XXXXXX";
    if (!mkdtemp(dir) || !write_idx(dir, "train", 300, 3) || !write_idx(dir, "t10k", 40, 4)) {
        par_check(0, "CLI: write a small IDX dataset");
        return;
    }
    char args[1024], out[600], npz[600];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(npz, sizeof npz, "%s/w.npz", dir);
    const char *net = "--model mlp:784-16-10 --batch 32";

    snprintf(args, sizeof args, "--dataset %s %s --step 3 --trainer omp --threads 2 --json", dir,
             net);
    par_check(cli(args, out) == 0 && file_has(out, "\"verdict\": \"PASS\"") &&
                  file_has(out, "\"view\": \"CONTRACT\"") && file_has(out, "\"mpfr\""),
              "CLI: check --step 3 --trainer omp --json: exit 0, JSON verdict PASS");
    snprintf(args, sizeof args, "--dataset %s %s --step 9 --dtype f64 --act tanh --prec 128", dir,
             net);
    par_check(cli(args, out) == 0 && file_has(out, "verdict: PASS") &&
                  file_has(out, "LOCAL     layer0.out"),
              "CLI: check --step 9 (epoch 0's short last batch) f64 tanh: exit 0, a table");
    snprintf(args, sizeof args, "--dataset %s %s --samples 5,0,299 --trainer serial --mode fast",
             dir, net);
    par_check(cli(args, out) == 0 && file_has(out, "3 given records"),
              "CLI: check --samples 5,0,299 fast: exit 0");
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --fault half:1:0", dir, net);
    par_check(cli(args, out) == 1 && file_has(out, "FAIL LOCAL layer0.out"),
              "CLI: a faulty run (HALF_FWD layer 0): exit 1, names layer0.out");

    // A CNN (conv + max-pool) through the CLI, f32 omp and f64 serial; a
    // skipped sample in its conv layer exits 1 and names the conv gradient.
    const char *cnn = "--model cnn:1x28x28-c3k3p1-r-m2-f-fc10 --batch 32";
    snprintf(args, sizeof args, "--dataset %s %s --step 2 --trainer omp --threads 2 --json", dir,
             cnn);
    par_check(cli(args, out) == 0 && file_has(out, "\"verdict\": \"PASS\"") &&
                  file_has(out, "layer0.weight.grad") && file_has(out, "\"view\": \"CONTRACT\""),
              "CLI: a CNN, check --step 2 --trainer omp --json: exit 0, JSON verdict PASS");
    snprintf(args, sizeof args, "--dataset %s %s --dtype f64 --trainer serial", dir, cnn);
    par_check(cli(args, out) == 0 && file_has(out, "verdict: PASS") &&
                  file_has(out, "LOCAL     layer1.out"),
              "CLI: a CNN, check --dtype f64: exit 0, a table with the max-pool row");
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --fault skip:1:0:3", dir, cnn);
    par_check(cli(args, out) == 1 && file_has(out, "FAIL LOCAL layer0.weight.grad"),
              "CLI: a CNN with a skipped sample in its conv layer: exit 1, names "
              "layer0.weight.grad");

    // Batchnorm through the CLI: a clean step passes; one ulp in a variance
    // exits 1 and names it.
    const char *bn = "--model cnn:1x28x28-c2k3p1-bn-r-m2-f-fc10 --batch 24";
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --dtype f64", dir, bn);
    par_check(cli(args, out) == 0 && file_has(out, "verdict: PASS") &&
                  file_has(out, "LOCAL     layer1.bn.var"),
              "CLI: a CNN with batchnorm, f64: exit 0, a row per statistic");
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --fault bnvar:1:1:0", dir, bn);
    par_check(cli(args, out) == 1 && file_has(out, "FAIL LOCAL layer1.bn.var[0]"),
              "CLI: batchnorm var + 1 ulp: exit 1, names layer1.bn.var[0]");

    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-16-10", PAR_ACT_RELU));
    float *w = malloc(m.n_params * sizeof *w);
    par_model_init(&m, PAR_F32, 5, w);
    for (size_t i = 0; i < m.n_params; i++)
        w[i] *= 3; // not the --seed weights
    PAR_REQUIRE(par_weights_save(npz, &m, PAR_F32, w));
    free(w);
    snprintf(args, sizeof args, "--dataset %s %s --weights %s --step 4 --trainer serial --json",
             dir, net, npz);
    par_check(cli(args, out) == 0 && file_has(out, "\"verdict\": \"PASS\""),
              "CLI: check --weights W.npz: exit 0");

    snprintf(args, sizeof args, "--dataset %s %s --step 2 --samples 1", dir, net);
    par_check(cli(args, out) == 2, "CLI: --step with --samples: exit 2");
    snprintf(args, sizeof args, "--dataset %s %s --samples 1,300", dir, net);
    par_check(cli(args, out) == 2 && file_has(out, "--samples"),
              "CLI: a record past the file: exit 2");
    snprintf(args, sizeof args, "--dataset %s %s --prec 32", dir, net);
    par_check(cli(args, out) == 2, "CLI: --prec 32: exit 2");
    snprintf(args, sizeof args, "--dataset %s %s --trainer omp --ranks 2", dir, net);
    par_check(cli(args, out) == 2 && file_has(out, "--ranks 2: trainer omp is not an MPI trainer"),
              "CLI: --trainer omp --ranks 2: exit 2 naming --ranks");
    snprintf(args, sizeof args, "--dataset %s %s --trainer reference --mode fast", dir, net);
    par_check(cli(args, out) == 2, "CLI: --trainer reference --mode fast: exit 2");
    snprintf(args, sizeof args, "--dataset %s/nothing-here %s", dir, net);
    par_check(cli(args, out) == 3 && file_has(out, "hint:"),
              "CLI: a missing dataset: exit 3 with a hint");
    snprintf(args, sizeof args, "--dataset %s %s --weights %s/missing.npz", dir, net, dir);
    par_check(cli(args, out) == 3, "CLI: missing --weights file: exit 3");
    par_check(cli("--math --points 3000 --json", out) == 0 && file_has(out, "\"max_ulp\"") &&
                  file_has(out, "\"verdict\": \"PASS\""),
              "CLI: check --math --points 3000 --json: exit 0, every function < 1 ulp");
    par_check(cli("--help", out) == 0 && file_has(out, "--prec"), "CLI: check --help");

    const char *files[] = {"train-images-idx3-ubyte",
                           "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte",
                           "out.txt",
                           "w.npz"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", dir, files[k]);
        remove(p);
    }
    rmdir(dir);
}

int main(void)
{
    known_answers();
    par_dataset ds;
    fixture_dataset(&ds, 4000);
    pass_matrix(&ds);
    faults(&ds);
    optim_checks(&ds);
    cnn_checks(&ds);
    bn_hand();
    bn_checks(&ds);
    step_records(&ds);
    default_mlp(&ds);
    par_dataset_free(&ds);
    cli_tests();
    return par_test_exit();
}
