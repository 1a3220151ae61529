// The MPFR checker on optimizer steps: momentum, nesterov and adam, f32 and
// f64, step 1 and a step from a non-zero state, pass LOCAL and CONTRACT with
// their new state checked; the obeta and oswap faults fail exactly the rows
// they should.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_fixtures.h"
#include "par_engine.h"

// ---- optimizers: momentum, nesterov, adam ------------------------------------------

// One step of tr from w0 and the optimizer state `start` (NULL: fresh),
// checked LOCAL + E2E, and for exact non-reference trainers CONTRACT.
static par_status check_optim_step(chk_report *r, const par_run_cfg *cfg, const par_trainer_ops *tr,
                                   const batch_buf *bb, const par_optim_state *start)
{
    memset(r, 0, sizeof *r);
    const par_batch batch = batch_of(bb);
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
            par_run_cfg cfg = step_cfg(&m, dt, 24, 8, w0);
            cfg.optim = &o;
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
            par_check(os.n == ns && os.t == 3 && big > 0,
                      "3 reference steps: a non-zero state, t 3");
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

int main(void)
{
    par_dataset ds;
    fixture_dataset(&ds, 4000);
    optim_checks(&ds);
    par_dataset_free(&ds);
    return par_test_exit();
}
