// MPI start-up and the `--ranks` launcher; see par_mpi_launch.h.
#define _POSIX_C_SOURCE 200809L
#include "par_mpi_launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

int par_mpi_under_launcher(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
           getenv("PMIX_RANK") != NULL;
}

int par_mpi_env_size(int *rank)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!n) n = getenv("PMI_SIZE");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    *rank = r ? atoi(r) : 0;
    const int size = n ? atoi(n) : 1;
    return size > 0 ? size : 1;
}

int par_mpi_relaunch(int argc, char **argv, int ranks)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "parity: cannot find its own executable to relaunch under mpirun\n");
        return EXIT_RUNTIME;
    }
    exe[n] = '\0';
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", ranks);
    const char *pre[] = {PARITY_MPIEXEC, "-n", nbuf, "--oversubscribe", "--bind-to", "none",
                         "--mca", "mpi_yield_when_idle", "1"};
    const int n_pre = (int)(sizeof pre / sizeof pre[0]);
    char **args = calloc((size_t)(n_pre + argc + 2), sizeof *args);
    if (!args) return EXIT_RUNTIME;
    int k = 0;
    for (int i = 0; i < n_pre; i++) args[k++] = (char *)pre[i];
    if (geteuid() == 0) args[k++] = "--allow-run-as-root";
    args[k++] = exe;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    fflush(NULL);
    execvp(args[0], args);
    fprintf(stderr, "parity: cannot run '%s' for --ranks %d\n", args[0], ranks);
    fprintf(stderr, "hint: install openmpi-bin (ci/setup.sh does) or run mpirun yourself\n");
    free(args);
    return EXIT_RUNTIME;
}

#ifdef PARITY_HAVE_MPI
par_status par_mpi_start(int *rank, int *size)
{
    int init = 0, provided = 0;
    MPI_Initialized(&init);
    if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__, "MPI_Init_thread failed");
    if (!init && provided < MPI_THREAD_FUNNELED)
        return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__,
                             "the MPI library does not provide MPI_THREAD_FUNNELED");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return PAR_OK;
}

int par_mpi_finish(int rc)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return rc;
    int all = rc;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
}
#else
par_status par_mpi_start(int *rank, int *size)
{
    *rank = 0;
    *size = 1;
    return par_set_error(PAR_ERR_MPI, __FILE__, __LINE__, "parity was built without MPI");
}

int par_mpi_finish(int rc) { return rc; }
#endif
