// The optimizers (momentum, nesterov, adam) and full-batch steps of the MPI
// trainers against the reference, run under mpirun:
//   test_mpi_optim TRAINER THREADS    (e.g. mpirun -n 3 test_mpi_optim root 1)
// exact mode: every step's loss and weights bitwise equal to the reference
// on every rank. SGD is covered by test_mpi.
#include <stdlib.h>

#include "mpi_fixture.h"
#include "par_fixtures.h"

extern const par_trainer_ops par_trainer_reference;

static const char *const KIND[] = {"sgd", "momentum", "nesterov", "adam"};

int main(int argc, char **argv)
{
    int rank, size, T;
    const par_trainer_ops *ops = mpi_test_start(&argc, &argv, &rank, &size, &T);
    if (!ops) return 2;

    par_dataset ds;
    fixture_dataset(&ds, 500);
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-33-10", PAR_ACT_RELU));
    char name[200];
    float *init = malloc(m.n_params * sizeof(float));
    par_model_init(&m, PAR_F32, 5, init);

    // (kind, B, C, steps): mini-batches, a short last chunk, and full batches of 300.
    const struct { int kind; size_t B, C; int steps; } cases[] = {
        {1, 32, 8, 8}, {2, 32, 8, 8}, {3, 32, 8, 8}, {3, 30, 7, 8}, {3, 300, 8, 3},
        {1, 300, 8, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const par_optim o = par_optim_default((par_optim_kind)cases[k].kind);
        par_dataset d = ds;
        if (cases[k].B == 300) d.n_train = 300;   // --batch full on a 300-record split
        const par_run_cfg cfg = {.model = &m,
                                 .dtype = PAR_F32,
                                 .mode = PAR_MODE_EXACT,
                                 .batch = cases[k].B,
                                 .chunk = cases[k].C,
                                 .lr = cases[k].kind == 3 ? 2e-3 : 0.05,
                                 .threads = T,
                                 .init_params = init,
                                 .optim = &o};
        trajectory ref, t;
        // The reference runs on rank 0 only (it is the slow one) and is sent to
        // the others, with its status: a failed reference fails every rank.
        int st_ref = PAR_OK;
        if (rank == 0) {
            st_ref = run_trajectory(&ref, &par_trainer_reference, &cfg, &d, cases[k].steps);
            if (st_ref != PAR_OK) printf("  reference: %s\n", par_last_error());
        } else {
            ref.steps = cases[k].steps;
            ref.n_params = m.n_params;
            ref.loss = calloc((size_t)ref.steps, sizeof(double));
            ref.w = malloc((size_t)ref.steps * m.n_params * sizeof(float));
        }
        MPI_Bcast(&st_ref, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Bcast(ref.loss, ref.steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Bcast(ref.w, (int)((size_t)ref.steps * m.n_params), MPI_FLOAT, 0, MPI_COMM_WORLD);
        par_status st = run_trajectory(&t, ops, &cfg, &d, cases[k].steps);
        snprintf(name, sizeof name, "%s R=%d T=%d %s == reference, B=%zu%s C=%zu, %d steps",
                 ops->name, size, T, KIND[cases[k].kind], cases[k].B,
                 cases[k].B == 300 ? " (full)" : "", cases[k].C, cases[k].steps);
        // Every rank checks its own copy; a failure anywhere fails rank 0's line.
        int ok = st_ref == PAR_OK && par_ran(st, "  (this rank)") &&
                 trajectory_equal(&t, &ref, &m, PAR_F32, "  (this rank)"), all;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        par_check(all, name);
        trajectory_free(&t);
        trajectory_free(&ref);
    }
    free(init);
    par_dataset_free(&ds);
    int rc = par_test_exit();
    MPI_Finalize();
    return rc;
}
