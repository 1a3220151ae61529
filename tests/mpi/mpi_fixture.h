// The start of every MPI test program (test_mpi*.c), run as
//   mpirun -n R EXE TRAINER THREADS:
// MPI_Init_thread (FUNNELED), rank and size, the trainer and the thread
// count from the arguments, and rank 0 alone writing to stdout.
#ifndef MPI_FIXTURE_H
#define MPI_FIXTURE_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "par_trainer.h"

// The trainer named by argv[1], or NULL after a usage line (rank 0) and
// MPI_Finalize: the caller then returns 2.
static inline const par_trainer_ops *mpi_test_start(int *argc, char ***argv, int *rank,
                                                    int *size, int *threads)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    const par_trainer_ops *ops = *argc == 3 ? par_trainer_find((*argv)[1]) : NULL;
#ifdef PAR_CUDA_EMU   // test_mpi_cuda_emu: the cuda trainer on the host emulation
    extern const par_trainer_ops par_trainer_cuda;
    if (!ops && *argc == 3 && strcmp((*argv)[1], "cuda") == 0) ops = &par_trainer_cuda;
#endif
    if (!ops) {
        if (*rank == 0)
            fprintf(stderr, "usage: mpirun -n R %s mpi|hybrid|root|cuda THREADS\n", (*argv)[0]);
        MPI_Finalize();
        return NULL;
    }
    *threads = atoi((*argv)[2]);
    if (*rank != 0 && !freopen("/dev/null", "w", stdout)) abort();   // rank 0 reports
    return ops;
}

#endif
