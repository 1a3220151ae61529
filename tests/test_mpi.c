// MPI trainers against the reference, run under mpirun:
//   test_mpi TRAINER THREADS    (e.g. mpirun -n 3 test_mpi hybrid 2)
// exact mode: every step's loss and weights bitwise equal to the reference
// on every rank, f32 and f64, batch 64 / chunk 8 and batch 50 / chunk 7.
// fast mode: within the derived per-step bound (par_fixtures.h), and not
// within it when the learning rate is off by 1e-3.
#include <mpi.h>
#include <stdlib.h>

#include "par_fixtures.h"

extern const par_trainer_ops par_trainer_reference;

enum { STEPS = 30 };

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 || !par_trainer_find(argv[1])) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n R test_mpi mpi|hybrid|root THREADS\n");
        MPI_Finalize();
        return 2;
    }
    const par_trainer_ops *ops = par_trainer_find(argv[1]);
    const int T = atoi(argv[2]);
    if (rank != 0) freopen("/dev/null", "w", stdout);   // rank 0 reports

    par_dataset ds;
    fixture_dataset(&ds, 3000);
    par_model m;
    if (par_model_parse(&m, "mlp:784-40-33-10", PAR_ACT_RELU) != PAR_OK) return 1;
    const struct { size_t B, C; } shapes[] = {{64, 8}, {50, 7}};
    char name[200];
    int local_fail = 0;

    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        void *init = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, init);
        for (int sh = 0; sh < 2; sh++) {
            par_run_cfg cfg = {&m, dt, PAR_MODE_EXACT, shapes[sh].B, shapes[sh].C, 0.05, T, init, NULL, NULL};
            trajectory ref, t;
            run_trajectory(&ref, &par_trainer_reference, &cfg, &ds, STEPS);
            run_trajectory(&t, ops, &cfg, &ds, STEPS);
            snprintf(name, sizeof name, "%s R=%d T=%d exact == reference, %s, B=%zu C=%zu, %d steps",
                     ops->name, size, T, par_dtype_name(dt), cfg.batch, cfg.chunk, STEPS);
            // Every rank checks its own copy; a failure anywhere fails rank 0's line.
            int ok = trajectory_equal(&t, &ref, &m, dt, "  (this rank)"), all;
            MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            local_fail += !par_check(all, name);
            trajectory_free(&t);
            trajectory_free(&ref);

            par_run_cfg f = cfg;
            f.mode = PAR_MODE_FAST;
            double worst;
            size_t bad = fast_lockstep(ops, &f, cfg.lr, &ds, 15, &worst), bad_all;
            MPI_Allreduce(&bad, &bad_all, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
            snprintf(name, sizeof name, "%s R=%d T=%d fast within bound, %s, B=%zu C=%zu",
                     ops->name, size, T, par_dtype_name(dt), cfg.batch, cfg.chunk);
            local_fail += !par_check(bad_all == 0, name);
            printf("  worst |diff|/tol %.3g\n", worst);
            f.lr = cfg.lr * (1 + 1e-3);
            bad = fast_lockstep(ops, &f, cfg.lr, &ds, 15, &worst);
            MPI_Allreduce(&bad, &bad_all, 1, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
            snprintf(name, sizeof name, "%s R=%d fast with lr * (1 + 1e-3) fails the bound, %s",
                     ops->name, size, par_dtype_name(dt));
            local_fail += !par_check(bad_all > 0, name);
        }
        free(init);
    }
    par_dataset_free(&ds);
    int rc = par_test_exit();
    MPI_Finalize();
    return rc;
}
