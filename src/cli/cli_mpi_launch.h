// MPI start-up for the CLI: joining a job launched by mpirun, or launching
// one for `--ranks R`. MPI_Init and MPI_Finalize live here, on the main()
// side, never in library code (docs/CONTRIBUTING.md, "Errors and exit codes").
#ifndef CLI_MPI_LAUNCH_H
#define CLI_MPI_LAUNCH_H

#include "par_status.h"

// True when this process was started by mpirun/mpiexec.
int cli_mpi_under_launcher(void);

// The world size mpirun announces in the environment (OMPI_COMM_WORLD_SIZE or
// PMI_SIZE; 1 when not under a launcher) and this process's rank there, for
// commands that do not join the job.
int cli_mpi_env_size(int *rank);

// Replaces this process with `mpirun -n ranks <flags> <this binary> argv...`,
// adding the flags one machine needs (docs/DESIGN.md, section 7): --oversubscribe,
// --bind-to none, yield when idle, and --allow-run-as-root for root.
// Returns an exit code only if mpirun could not be started.
int cli_mpi_relaunch(int argc, char **argv, int ranks);

// Runs `mpirun -n ranks` for this command line (cli_mpi_relaunch's argv) as
// a child (par_proc.h: its own process group, stdin /dev/null, SIGTERM when
// this process dies) whose stderr passes through a watcher: SIGINT/SIGTERM
// are passed on as SIGUSR1/SIGUSR2 (mpirun forwards those to every rank, which stop cleanly
// at the same step; another signal 2 s later is passed on as SIGTERM: mpirun
// kills the job), mpirun's own message boxes about exit codes are dropped,
// and a rank that died is named in one line ("parity CMD: ..."), with a hint
// to resume from ckpt_dir when it is not NULL. Returns the exit code.
int cli_mpi_launch_watched(int argc, char **argv, int ranks, const char *cmd,
                           const char *ckpt_dir);

// The process of an MPI trainer's command: with ranks > 0 and no launcher
// around it, runs the job (cli_mpi_launch_watched, no checkpoint hint) and
// returns its exit code; else joins the job (cli_mpi_start: *rank, *size)
// and returns -1 to go on, or the exit code of a failed start after one line.
int cli_mpi_launch_or_join(int argc, char **argv, int ranks, const char *cmd, int *rank,
                           int *size);

// MPI_Init_thread(FUNNELED) if not yet initialised; rank and size of WORLD.
par_status cli_mpi_start(int *rank, int *size);

// Combines every rank's exit code (the largest wins), finalises MPI if it
// was started, and returns the combined code. Without MPI returns rc.
int cli_mpi_finish(int rc);

#endif
