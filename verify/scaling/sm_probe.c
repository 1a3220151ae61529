// The network of the scaling model (sm_measure.h): alpha, beta and the
// allreduce measured by the ranks of `parity model --probe-comm` under
// mpirun, and those figures taken from launches of it on R ranks that met
// the nearest placement of this machine's cores.
#define _POSIX_C_SOURCE 200809L
#include "sm_measure.h"

#include <math.h>
#include <stdlib.h>

#include "par_sort.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

// A launch of the probe that runs longer than this is a hung one.
#define SM_PROBE_TIMEOUT_S 600.0

#ifdef PARITY_HAVE_MPI
// The median of REPS timings of a ping-pong (k == 0; half of it) or of a
// ring step of sizes[k] bytes (buf and back at least that large).
static double time_transfer(const size_t sizes[], int k, char *buf, char *back, int rank,
                            int size)
{
    enum { REPS = 21 };
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (k == 0 && rank == 0) {   // the latency: a ping-pong
            MPI_Send(buf, (int)sizes[k], MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)sizes[k], MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (k == 0 && rank == 1) {
            MPI_Recv(buf, (int)sizes[k], MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)sizes[k], MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        } else if (k > 0) {   // the rest: a step of a ring, all ranks at once
            MPI_Sendrecv(buf, (int)sizes[k], MPI_BYTE, (rank + 1) % size, 1, back,
                         (int)sizes[k], MPI_BYTE, (rank + size - 1) % size, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        t[r] = (MPI_Wtime() - t0) / (k == 0 ? 2 : 1);
    }
    qsort(t, REPS, sizeof *t, par_cmp_double);
    return t[REPS / 2];
}

// 1 on every rank when every rank's `ok` is 1.
static int all_ranks(int ok)
{
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok;
}

par_status sm_probe_comm(sm_comm_figures *f, size_t n_values, par_dtype dt)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    PAR_FAIL_IF(size < 2, PAR_ERR_CONFIG, "the network probe needs 2 ranks");
    const size_t sizes[] = {8, 4096, 65536, 262144, 1048576, 4194304};
    enum { N_SIZES = sizeof sizes / sizeof sizes[0] };
    double t_one[N_SIZES];
    char *buf = calloc(sizes[N_SIZES - 1], 1);
    char *back = calloc(sizes[N_SIZES - 1], 1);
    if (!all_ranks(buf && back)) {
        free(buf);
        free(back);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    for (int k = 0; k < N_SIZES; k++) t_one[k] = time_transfer(sizes, k, buf, back, rank, size);
    free(buf);
    free(back);
    // fast mode's reduction itself: MPI_Allreduce (sum) of the model's
    // n_values parameters, as the library runs it (its algorithm, the sums).
    // (0 s, "not measured", when a rank has no memory for it: all or none.)
    enum { REPS = 21 };
    double t_ar[REPS] = {0};
    void *g = calloc(n_values ? n_values : 1, par_dtype_size(dt));
    const int have = all_ranks(g != NULL);
    for (int r = 0; r < REPS && have; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, g, (int)n_values, dt == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE,
                      MPI_SUM, MPI_COMM_WORLD);
        t_ar[r] = MPI_Wtime() - t0;
    }
    free(g);
    qsort(t_ar, REPS, sizeof *t_ar, par_cmp_double);
    const double beta = (t_one[N_SIZES - 1] - t_one[N_SIZES - 3]) /
                        (double)(sizes[N_SIZES - 1] - sizes[N_SIZES - 3]);
    *f = (sm_comm_figures){.ranks = size, .alpha = t_one[0], .beta = beta > 0 ? beta : 0.0,
                           .allreduce_s = t_ar[REPS / 2]};
    return PAR_OK;
}
#else
par_status sm_probe_comm(sm_comm_figures *f, size_t n_values, par_dtype dt)
{
    (void)f, (void)n_values, (void)dt;
    return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__, "parity was built without MPI");
}
#endif

// A launch can meet a network in another state (over TCP between a VM's
// namespace hosts the same allreduce can take twice as long from one
// launch to the next, and stay so through the launch), and a VM whose host
// moves its virtual CPUs apart can make every transfer several times
// slower for as long as they stay apart: hence medians, of launches that
// met the nearest placement of the cores seen.
int sm_probe_network(const sm_setup *s, int R, sm_costs *c, sm_probe_info *pc)
{
    par_argv a = {0};
    sm_launch_argv(&a, s->launcher, s->exe, R);
    par_argv_words(&a, "model --probe-comm --model");
    par_argv_add(&a, "%s", s->model);
    par_argv_opt(&a, "--act", "%s", s->act);
    par_argv_opt(&a, "--dtype", "%s", s->dtype);
    sm_launch_end(&a, s->launcher, R);
    const char *const keys[] = {"alpha", "beta", "allreduce", "ranks"};
    enum { WANT = 3, MAX_LAUNCHES = 9 };
    double v[MAX_LAUNCHES][4], rt[MAX_LAUNCHES][2];
    int near[MAX_LAUNCHES], n = 0, n_near = 0;
    while (n < MAX_LAUNCHES && n_near < WANT) {
        rt[n][0] = sm_core_round_trip_ns();
        // A probe on another count of ranks than R measured something else.
        if (sm_run_json(&a, 4, keys, v[n], SM_PROBE_TIMEOUT_S) != 0 || v[n][3] != R) {
            par_argv_free(&a);
            return -1;
        }
        rt[n][1] = sm_core_round_trip_ns();
        n_near = sm_near_probes((const double(*)[2])rt, ++n, near);
    }
    par_argv_free(&a);
    pc->launches = n;
    pc->near = n_near >= WANT;
    pc->used = pc->near ? n_near : n;
    if (!pc->near)   // every launch counts
        for (int k = 0; k < n; k++) near[k] = 1;
    pc->min_ns = pc->max_ns = NAN;   // fmin and fmax skip NAN
    double x[3][MAX_LAUNCHES];
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (!near[k]) continue;
        pc->min_ns = fmin(pc->min_ns, fmin(rt[k][0], rt[k][1]));
        pc->max_ns = fmax(pc->max_ns, fmax(rt[k][0], rt[k][1]));
        for (int j = 0; j < 3; j++) x[j][m] = v[k][j];
        m++;
    }
    double med[3];
    for (int j = 0; j < 3; j++) med[j] = par_median_sort(x[j], m);
    c->alpha = med[0];
    c->beta = med[1];
    c->t_allreduce = med[2];
    c->allreduce_ranks = R;
    return 0;
}
