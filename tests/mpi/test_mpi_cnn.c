// CNNs under the contract for the MPI trainers, run under mpirun:
//   test_mpi_cnn TRAINER THREADS    (e.g. mpirun -n 3 test_mpi_cnn hybrid 2)
// exact mode: every step's loss and weights bitwise equal to the reference on
// every rank, for every case of cnn_cases.h (the CNNs, batchnorm included,
// f32 and f64, batch 64 / chunk 8 and 50 / chunk 7, sgd and adam). Built as
// test_mpi_cuda_emu it runs `cuda` on the host emulation (src/cuda/cuda_emu.c).

#include "cnn_cases.h"
#include "mpi_fixture.h"

extern const par_trainer_ops par_trainer_reference;

int main(int argc, char **argv)
{
    int rank, size, T;
    const par_trainer_ops *ops = mpi_test_start(&argc, &argv, &rank, &size, &T);
    if (!ops) return 2;

    par_dataset ds;
    fixture_dataset(&ds, 1000);
#ifdef PAR_CUDA_EMU   // the host emulation uploads only the records trained on, and
    ds.train.n = ds.n_train;   // leaves the MNIST CNN (its 25088 x 128 layer) to the GPU
#endif
    char cname[160], name[240];
    for (int k = 0; k < N_CNN_CASES; k++) {
        const cnn_case *c = &CNN_CASES[k];
#ifdef PAR_CUDA_EMU
        if (strcmp(c->spec, CNN_MNIST) == 0) continue;
#endif
        cnn_case_name(cname, sizeof cname, c);
        par_model m;
        if (par_model_parse(&m, c->spec, PAR_ACT_RELU) != PAR_OK) return 1;
        const size_t sz = par_dtype_size(c->dt), N = m.n_params;
        void *init = malloc(N * sz);
        par_model_init(&m, c->dt, 42, init);
        const par_optim o = par_optim_default(c->optim);
        par_run_cfg cfg = cnn_case_cfg(c, &m, init, &o);
        cfg.threads = T;
        // The reference runs on rank 0 only (it is the slow one) and is sent to the others.
        trajectory ref = {0}, t;
        par_status st = PAR_OK;
        if (rank == 0) {
            st = run_trajectory(&ref, &par_trainer_reference, &cfg, &ds, c->steps);
        } else {
            ref.steps = c->steps;
            ref.n_params = N;
            ref.loss = calloc((size_t)c->steps, sizeof(double));
            ref.w = malloc((size_t)c->steps * N * sz);
        }
        int ref_ok = st == PAR_OK;
        MPI_Bcast(&ref_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
        snprintf(name, sizeof name, "reference runs, %s", cname);
        if (!par_check(ref_ok, name)) break;
        MPI_Bcast(ref.loss, c->steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Bcast(ref.w, (int)((size_t)c->steps * N), c->dt == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE,
                  0, MPI_COMM_WORLD);
        st = run_trajectory(&t, ops, &cfg, &ds, c->steps);
        snprintf(name, sizeof name, "%s R=%d T=%d exact == reference, %s, %d steps", ops->name,
                 size, T, cname, c->steps);
        // Every rank checks its own copy; a failure anywhere fails rank 0's line.
        int ok = st == PAR_OK && trajectory_equal(&t, &ref, &m, c->dt, "  (this rank)"), all;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        par_check(all, name);
        trajectory_free(&t);
        trajectory_free(&ref);
        free(init);
    }
    par_dataset_free(&ds);
    int rc = par_test_exit();
    MPI_Finalize();
    return rc;
}
