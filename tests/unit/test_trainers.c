// serial and omp trainers equal the reference bit for bit: every step's loss
// and the weights after every step, for f32 and f64, batch 64 / chunk 8,
// batch 50 / chunk 7 (a short last chunk) and batch 24 / chunk 5 (hidden
// layers wider than the batch: their forward splits rows, not samples, on
// several threads), omp threads 1, 2, 3, 4, 8, every kernel set the CPU
// runs, and omp changing its thread count every step. Also: fast
// mode is a different order (so not bitwise).
#include "par_fixtures.h"
#include "par_kernels.h"

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;

enum { STEPS = 50 };

int main(void)
{
    par_dataset ds;
    fixture_dataset(&ds, 4000);
    par_model m;
    // Odd widths exercise every tile tail of the kernels.
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-40-33-10", PAR_ACT_RELU));
    const struct { size_t B, C; } shapes[] = {{64, 8}, {50, 7}, {24, 5}};
    const int threads[] = {1, 2, 3, 4, 8};
    char name[160];

    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        void *init = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, init);
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            par_run_cfg cfg = {.model = &m,
                               .dtype = dt,
                               .mode = PAR_MODE_EXACT,
                               .batch = shapes[sh].B,
                               .chunk = shapes[sh].C,
                               .lr = 0.05,
                               .threads = 1,
                               .init_params = init};
            trajectory ref, t;
            PAR_REQUIRE(run_trajectory(&ref, &par_trainer_reference, &cfg, &ds, STEPS));
            const char *dn = par_dtype_name(dt);

            snprintf(name, sizeof name, "serial == reference, %s, B=%zu C=%zu, %d steps", dn,
                     cfg.batch, cfg.chunk, STEPS);
            if (par_ran(run_trajectory(&t, &par_trainer_serial, &cfg, &ds, STEPS), name))
                trajectory_equal(&t, &ref, &m, dt, name);
            trajectory_free(&t);

            // The other kernel sets this CPU runs (serial above used the best).
            const par_kernel_set *sets[8];
            const size_t n_sets = par_kernels_available(sets, 8);
            for (size_t v = 1; v < n_sets && v < 8; v++) {
                par_kernels_use(sets[v]);
                snprintf(name, sizeof name, "serial (%s kernels) == reference, %s, B=%zu C=%zu",
                         sets[v]->name, dn, cfg.batch, cfg.chunk);
                ref.steps = 10;
                if (par_ran(run_trajectory(&t, &par_trainer_serial, &cfg, &ds, 10), name))
                    trajectory_equal(&t, &ref, &m, dt, name);
                ref.steps = STEPS;
                trajectory_free(&t);
            }
            par_kernels_use(NULL);

            for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
                cfg.threads = threads[k];
                snprintf(name, sizeof name, "omp T=%d == reference, %s, B=%zu C=%zu", threads[k],
                         dn, cfg.batch, cfg.chunk);
                if (par_ran(run_trajectory(&t, &par_trainer_omp, &cfg, &ds, STEPS), name))
                    trajectory_equal(&t, &ref, &m, dt, name);
                trajectory_free(&t);
            }
            // The governor may change omp's thread count between any two steps
            // (a busy machine): one thread and T on alternate steps, the same bits.
            for (int T = 2; T <= 3; T++) {
                cfg.threads = T;
                cfg.threads_policy = PAR_THREADS_ALTERNATE;
                snprintf(name, sizeof name, "omp 1 and %d threads alternating == reference, %s, "
                         "B=%zu C=%zu", T, dn, cfg.batch, cfg.chunk);
                if (par_ran(run_trajectory(&t, &par_trainer_omp, &cfg, &ds, STEPS), name)) {
                    trajectory_equal(&t, &ref, &m, dt, name);
                    snprintf(name, sizeof name, "omp 1 and %d threads alternating: %ld of %d "
                             "steps on one thread (the odd ones)", T, t.one_thread, STEPS);
                    par_check(t.one_thread == STEPS / 2, name);
                }
                trajectory_free(&t);
            }
            cfg.threads_policy = PAR_THREADS_ADAPT;
            cfg.threads = 1;

            // fast mode: within the derived bound of the reference, step by step,
            // and the bound is tight enough to catch a learning rate off by 1e-3.
            for (int T = 1; T <= 2; T++) {
                par_run_cfg f = cfg;
                f.mode = PAR_MODE_FAST;
                f.threads = T;
                vf_lockstep_result r;
                par_status st = fast_lockstep(&r, &par_trainer_omp, &f, cfg.lr, &ds, 20);
                snprintf(name, sizeof name, "omp T=%d fast within bound, %s, B=%zu C=%zu", T, dn,
                         cfg.batch, cfg.chunk);
                if (!par_check(st == PAR_OK && r.steps == 20 && r.violations == 0, name))
                    printf("  status %d (%s), %zu violations\n", (int)st, par_last_error(),
                           r.violations);
                printf("  worst |diff|/tol %.3g\n", r.worst_ratio);
                // The negative control: the bound catches it at the first step, and
                // an error (no verdict at all) does not pass for a catch.
                f.lr = cfg.lr * (1 + 1e-3);
                st = fast_lockstep(&r, &par_trainer_omp, &f, cfg.lr, &ds, 20);
                snprintf(name, sizeof name, "fast with lr * (1 + 1e-3) fails the bound at step 1, "
                         "%s, T=%d", dn, T);
                if (!par_check(st == PAR_OK && r.violations > 0 && r.first_violation_step == 1,
                               name))
                    printf("  status %d (%s), %zu violations, first at step %ld\n", (int)st,
                           par_last_error(), r.violations, r.first_violation_step);
            }

            // fast mode folds no chunks: a different rounding, so it must differ
            // somewhere in 50 steps (else the exact tests above prove nothing
            // about the fold order).
            cfg.mode = PAR_MODE_FAST;
            snprintf(name, sizeof name, "fast mode differs from exact, %s, B=%zu C=%zu", dn,
                     cfg.batch, cfg.chunk);
            if (par_ran(run_trajectory(&t, &par_trainer_serial, &cfg, &ds, STEPS), name))
                par_check(memcmp(t.w, ref.w, STEPS * m.n_params * par_dtype_size(dt)) != 0, name);
            trajectory_free(&t);
            trajectory_free(&ref);
        }
        free(init);
    }
    par_dataset_free(&ds);
    return par_test_exit();
}
