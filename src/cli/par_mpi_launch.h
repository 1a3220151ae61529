// The launcher's names before they took the CLI's prefix, for the two files
// that still use them (cmd_train.c, train_args.c, which another change is
// reworking); remove this header once they include cli_mpi_launch.h.
#ifndef PAR_MPI_LAUNCH_H
#define PAR_MPI_LAUNCH_H

#include "cli_mpi_launch.h"

#define par_mpi_under_launcher cli_mpi_under_launcher
#define par_mpi_env_size cli_mpi_env_size
#define par_mpi_launch_watched cli_mpi_launch_watched
#define par_mpi_start cli_mpi_start
#define par_mpi_finish cli_mpi_finish

#endif
