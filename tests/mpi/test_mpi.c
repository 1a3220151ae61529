// MPI trainers against the reference, run under mpirun:
//   test_mpi TRAINER THREADS    (e.g. mpirun -n 3 test_mpi hybrid 2)
// exact mode: every step's loss and weights bitwise equal to the reference
// on every rank, f32 and f64, batch 64 / chunk 8 and batch 50 / chunk 7.
// fast mode: within the derived per-step bound (par_fixtures.h), and not
// within it when the learning rate is off by 1e-3.
#include <stdlib.h>
#include <string.h>

#include "mpi_fixture.h"
#include "par_fixtures.h"

extern const par_trainer_ops par_trainer_reference;

enum { STEPS = 30 };

// exact mode under cfg: the trajectory equal to ref's (run with status
// st_ref) on every rank, the last step's gradient, and the bytes each rank
// sent. how names the weights' path in the check names ("" when only one).
static void check_exact(const par_trainer_ops *ops, const par_run_cfg *cfg,
                        const par_dataset *ds, const trajectory *ref, par_status st_ref,
                        int rank, int size, const char *how)
{
    const par_model *m = cfg->model;
    const par_dtype dt = cfg->dtype;
    char name[200];
    trajectory t;
    snprintf(name, sizeof name, "%s R=%d T=%d exact == reference, %s, B=%zu C=%zu, %d steps%s",
             ops->name, size, cfg->threads, par_dtype_name(dt), cfg->batch, cfg->chunk, STEPS,
             how);
    // The trainer's run is collective; then every rank checks its own copy,
    // and a failure anywhere fails rank 0's line.
    const par_status st = run_trajectory(&t, ops, cfg, ds, STEPS);
    int ok = par_ran(st_ref, "  reference (this rank)") && par_ran(st, "  (this rank)") &&
             trajectory_equal(&t, ref, m, dt, "  (this rank)");
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    par_check(all, name);
    // The last step's gradient, gathered from the ranks that own its
    // segments (mpi, hybrid), equal to the reference's on every rank
    // (root: on rank 0, where it folds the chunks).
    const size_t sz = par_dtype_size(dt), N = m->n_params;
    ok = st == PAR_OK && (memcmp(t.g, ref->g, N * sz) == 0 ||
                          (strcmp(ops->name, "root") == 0 && rank != 0));   // rank 0's
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "%s R=%d T=%d exact: last gradient == reference's, %s, B=%zu%s",
             ops->name, size, cfg->threads, par_dtype_name(dt), cfg->batch, how);
    par_check(all, name);
    // Bytes: a ring allreduce sends 2 N (P - 1) / P values per rank; the
    // chain, the gathered activations (no more values than the chain of the
    // layers they replace) and the sharded update at most N + N (P - 1) / P
    // (+ the loss and segment rounding). By messages, at least the new
    // weights: every segment passes P - 1 ranks on the ring, so the busiest
    // rank sends no fewer than N (P - 1) / P of them; shared, none of them
    // (fewer bytes than that: the shared copy was really used). root sends N
    // per chunk: not bounded so.
    if (*how) {
        const int msg = cfg->weights_by_messages;
        const double cap = 1.1 * 2.0 * (double)(N * sz);
        const double floor = (double)(N * sz) * (size - 1) / size;
        snprintf(name, sizeof name, "%s R=%d exact%s: %.0f bytes per step per rank %s %.0f, "
                 "<= 1.1 x 2 N x %zu = %.0f", ops->name, size, how, t.bytes_max,
                 msg ? ">=" : "<", floor, sz, cap);
        par_check(t.bytes_max <= cap && t.bytes_max > 0 &&
                      (msg ? t.bytes_max >= floor : t.bytes_max < floor), name);
    }
    trajectory_free(&t);
}

int main(int argc, char **argv)
{
    int rank, size, T;
    const par_trainer_ops *ops = mpi_test_start(&argc, &argv, &rank, &size, &T);
    if (!ops) return 2;

    par_dataset ds;
    fixture_dataset(&ds, 3000);
    par_model m;
    // At batch 64 and 50 exact mpi/hybrid gather the activations of the first
    // two layers (64 x 128 <= 2 x 65 x 64 values) and fold the last one's
    // gradient along the chain (train_mpi.c, gathered_layer): both paths.
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-64-64-10", PAR_ACT_RELU));
    const struct { size_t B, C; } shapes[] = {{64, 8}, {50, 7}};
    char name[200];

    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        void *init = malloc(m.n_params * par_dtype_size(dt));
        par_model_init(&m, dt, 42, init);
        for (int sh = 0; sh < 2; sh++) {
            par_run_cfg cfg = {.model = &m,
                               .dtype = dt,
                               .mode = PAR_MODE_EXACT,
                               .batch = shapes[sh].B,
                               .chunk = shapes[sh].C,
                               .lr = 0.05,
                               .threads = T,
                               .init_params = init};
            // The reference once on every rank (its run is not collective).
            trajectory ref;
            const par_status st_ref =
                run_trajectory(&ref, &par_trainer_reference, &cfg, &ds, STEPS);
            // mpi and hybrid on one host keep one shared copy of the weights;
            // weights_by_messages makes them pass the new weights round the
            // ring instead, as across hosts: both ways.
            const int ring = strcmp(ops->name, "root") != 0 && size > 1;
            for (int msg = 0; msg <= ring; msg++) {
                cfg.weights_by_messages = msg;
                check_exact(ops, &cfg, &ds, &ref, st_ref, rank, size,
                            !ring ? "" : msg ? " (weights by messages)" : " (shared weights)");
            }
            cfg.weights_by_messages = 0;
            // hybrid and root: the governor may change a rank's thread count
            // between any two steps (a busy machine), each rank on its own:
            // one thread and T on alternate steps, the same bits.
            if (T > 1) {
                cfg.threads_policy = PAR_THREADS_ALTERNATE;
                trajectory t;
                const par_status st = run_trajectory(&t, ops, &cfg, &ds, STEPS);
                // Odd steps on one thread: 15 of 30 (the alternation really ran).
                int ok = par_ran(st, "  (this rank)") &&
                         trajectory_equal(&t, &ref, &m, dt, "  (this rank)") &&
                         t.one_thread == STEPS / 2, all;
                if (t.one_thread != STEPS / 2)
                    printf("  rank %d: %ld steps on one thread\n", rank, t.one_thread);
                MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
                snprintf(name, sizeof name, "%s R=%d 1 and %d threads alternating == reference, "
                         "%s, B=%zu C=%zu", ops->name, size, T, par_dtype_name(dt), cfg.batch,
                         cfg.chunk);
                par_check(all, name);
                trajectory_free(&t);
                cfg.threads_policy = PAR_THREADS_ADAPT;
            }
            trajectory_free(&ref);

            par_run_cfg f = cfg;
            f.mode = PAR_MODE_FAST;
            // Every rank runs the lockstep on its own (no comm): each must end
            // with PAR_OK and its verdict; an error on any rank is a failure.
            vf_lockstep_result r;
            par_status st = fast_lockstep(&r, ops, &f, cfg.lr, &ds, 15);
            int ok = st == PAR_OK && r.steps == 15 && r.violations == 0;
            if (!ok)
                fprintf(stderr, "rank %d: status %d (%s), %zu violations\n", rank, (int)st,
                        par_last_error(), r.violations);
            int all;
            MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            snprintf(name, sizeof name, "%s R=%d T=%d fast within bound, %s, B=%zu C=%zu",
                     ops->name, size, T, par_dtype_name(dt), cfg.batch, cfg.chunk);
            par_check(all, name);
            printf("  worst |diff|/tol %.3g\n", r.worst_ratio);
            // The negative control: caught at the first step on every rank; an
            // error (no verdict at all) does not pass for a catch.
            f.lr = cfg.lr * (1 + 1e-3);
            st = fast_lockstep(&r, ops, &f, cfg.lr, &ds, 15);
            ok = st == PAR_OK && r.violations > 0 && r.first_violation_step == 1;
            if (!ok)
                fprintf(stderr, "rank %d: status %d (%s), %zu violations, first at step %ld\n",
                        rank, (int)st, par_last_error(), r.violations, r.first_violation_step);
            MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            snprintf(name, sizeof name, "%s R=%d fast with lr * (1 + 1e-3) fails the bound at "
                     "step 1, %s", ops->name, size, par_dtype_name(dt));
            par_check(all, name);
        }
        free(init);
    }
    par_dataset_free(&ds);
    int rc = par_test_exit();
    MPI_Finalize();
    return rc;
}
