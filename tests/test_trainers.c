// serial and omp trainers equal the reference bit for bit: every step's loss
// and the weights after every step, for f32 and f64, batch 64 / chunk 8 and
// batch 50 / chunk 7 (a short last chunk), omp threads 1, 2, 3, 4, 8, both
// kernel variants. Also: fast mode is a different order (so not bitwise).
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
    if (par_model_parse(&m, "mlp:784-40-33-10", PAR_ACT_RELU) != PAR_OK) return 1;
    const struct { size_t B, C; } shapes[] = {{64, 8}, {50, 7}};
    const int threads[] = {1, 2, 3, 4, 8};
    char name[160];

    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        void *init = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, init);
        for (int sh = 0; sh < 2; sh++) {
            par_run_cfg cfg = {&m, dt, PAR_MODE_EXACT, shapes[sh].B, shapes[sh].C, 0.05, 1, init, NULL, NULL};
            trajectory ref, t;
            if (run_trajectory(&ref, &par_trainer_reference, &cfg, &ds, STEPS) != PAR_OK) return 1;
            const char *dn = par_dtype_name(dt);

            snprintf(name, sizeof name, "serial == reference, %s, B=%zu C=%zu, %d steps", dn,
                     cfg.batch, cfg.chunk, STEPS);
            run_trajectory(&t, &par_trainer_serial, &cfg, &ds, STEPS);
            trajectory_equal(&t, &ref, &m, dt, name);
            trajectory_free(&t);

            par_kernels_force_portable(1);
            snprintf(name, sizeof name, "serial (portable kernels) == reference, %s, B=%zu C=%zu",
                     dn, cfg.batch, cfg.chunk);
            run_trajectory(&t, &par_trainer_serial, &cfg, &ds, 10);
            ref.steps = 10;
            trajectory_equal(&t, &ref, &m, dt, name);
            ref.steps = STEPS;
            trajectory_free(&t);
            par_kernels_force_portable(0);

            for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
                cfg.threads = threads[k];
                snprintf(name, sizeof name, "omp T=%d == reference, %s, B=%zu C=%zu", threads[k],
                         dn, cfg.batch, cfg.chunk);
                run_trajectory(&t, &par_trainer_omp, &cfg, &ds, STEPS);
                trajectory_equal(&t, &ref, &m, dt, name);
                trajectory_free(&t);
            }
            cfg.threads = 1;

            // fast mode: within the derived bound of the reference, step by step,
            // and the bound is tight enough to catch a learning rate off by 1e-3.
            for (int T = 1; T <= 2; T++) {
                par_run_cfg f = cfg;
                f.mode = PAR_MODE_FAST;
                f.threads = T;
                double worst;
                size_t bad = fast_lockstep(&par_trainer_omp, &f, cfg.lr, &ds, 20, &worst);
                snprintf(name, sizeof name, "omp T=%d fast within bound, %s, B=%zu C=%zu", T, dn,
                         cfg.batch, cfg.chunk);
                if (!par_check(bad == 0, name)) printf("  %zu violations\n", bad);
                printf("  worst |diff|/tol %.3g\n", worst);
                f.lr = cfg.lr * (1 + 1e-3);
                bad = fast_lockstep(&par_trainer_omp, &f, cfg.lr, &ds, 20, &worst);
                snprintf(name, sizeof name, "fast with lr * (1 + 1e-3) fails the bound, %s, T=%d",
                         dn, T);
                par_check(bad > 0, name);
            }

            // fast mode folds no chunks: a different rounding, so it must differ
            // somewhere in 50 steps (else the exact tests above prove nothing
            // about the fold order).
            cfg.mode = PAR_MODE_FAST;
            run_trajectory(&t, &par_trainer_serial, &cfg, &ds, STEPS);
            snprintf(name, sizeof name, "fast mode differs from exact, %s, B=%zu C=%zu", dn,
                     cfg.batch, cfg.chunk);
            par_check(memcmp(t.w, ref.w, STEPS * m.n_params * par_dtype_size(dt)) != 0, name);
            trajectory_free(&t);
            trajectory_free(&ref);
        }
        free(init);
    }
    par_dataset_free(&ds);
    return par_test_exit();
}
