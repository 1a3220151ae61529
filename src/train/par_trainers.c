// The trainer table: adding a trainer is one file and one line here.
#include <string.h>

#include "par_trainer.h"

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;
#ifdef PARITY_HAVE_MPI
extern const par_trainer_ops par_trainer_mpi, par_trainer_hybrid, par_trainer_root;
#endif
#ifdef PARITY_HAVE_CUDA
extern const par_trainer_ops par_trainer_cuda;
#endif

const par_trainer_ops *const par_trainers[] = {
    &par_trainer_reference,
    &par_trainer_serial,
    &par_trainer_omp,
#ifdef PARITY_HAVE_MPI
    &par_trainer_mpi,
    &par_trainer_hybrid,
    &par_trainer_root,
#endif
#ifdef PARITY_HAVE_CUDA
    &par_trainer_cuda,
#endif
    NULL,
};

const char *const par_phase_names[PAR_PHASE_N] = {
    "batch", "forward", "backward", "weight_grads", "communication", "update", "log",
};

const par_trainer_ops *par_trainer_find(const char *name)
{
    for (int i = 0; par_trainers[i]; i++)
        if (strcmp(par_trainers[i]->name, name) == 0) return par_trainers[i];
    return NULL;
}
