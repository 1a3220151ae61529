// The CNN cases shared by test_cnn.c (serial, omp) and test_mpi_cnn.c (mpi,
// hybrid, root): the models, batch shapes and optimizers under which every
// trainer must equal the reference bit for bit (issue: CNNs under the
// contract). Both files run them on the fixture dataset (par_fixtures.h).
#ifndef CNN_CASES_H
#define CNN_CASES_H

#include "par_fixtures.h"

// The fourth study's MNIST CNN, and a small conv + max-pool CNN with a
// strided conv (so that every layer kind and a pool remainder appear).
#define CNN_MNIST "cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10"
#define CNN_SMALL "cnn:1x28x28-c4k3p1-r-m2-c6k3s2-r-m2-f-fc10"
// With batchnorm after both convs and the first fc (batch statistics: the
// ordered ring inside the forward and backward passes under MPI).
#define CNN_BN "cnn:1x28x28-c4k3p1-bn-r-m2-c6k3-bn-r-m2-f-fc16-bn-r-fc10"

typedef struct cnn_case {
    const char *spec;
    par_dtype dt;
    size_t B, C;
    par_optim_kind optim;
    int steps;
} cnn_case;

// Every (dtype, shape, optimizer) for the small CNN; for the MNIST CNN (whose
// reference steps are slow) and the batchnorm CNN each dtype with one shape
// per optimizer.
static const cnn_case CNN_CASES[] = {
    {CNN_SMALL, PAR_F32, 64, 8, PAR_OPTIM_SGD, 8},  {CNN_SMALL, PAR_F32, 64, 8, PAR_OPTIM_ADAM, 8},
    {CNN_SMALL, PAR_F32, 50, 7, PAR_OPTIM_SGD, 8},  {CNN_SMALL, PAR_F32, 50, 7, PAR_OPTIM_ADAM, 8},
    {CNN_SMALL, PAR_F64, 64, 8, PAR_OPTIM_SGD, 8},  {CNN_SMALL, PAR_F64, 64, 8, PAR_OPTIM_ADAM, 8},
    {CNN_SMALL, PAR_F64, 50, 7, PAR_OPTIM_SGD, 8},  {CNN_SMALL, PAR_F64, 50, 7, PAR_OPTIM_ADAM, 8},
    {CNN_MNIST, PAR_F32, 64, 8, PAR_OPTIM_SGD, 3},  {CNN_MNIST, PAR_F32, 50, 7, PAR_OPTIM_ADAM, 3},
    {CNN_MNIST, PAR_F64, 64, 8, PAR_OPTIM_ADAM, 3}, {CNN_MNIST, PAR_F64, 50, 7, PAR_OPTIM_SGD, 3},
    {CNN_BN, PAR_F32, 64, 8, PAR_OPTIM_SGD, 6},     {CNN_BN, PAR_F32, 50, 7, PAR_OPTIM_ADAM, 6},
    {CNN_BN, PAR_F64, 64, 8, PAR_OPTIM_ADAM, 6},    {CNN_BN, PAR_F64, 50, 7, PAR_OPTIM_SGD, 6},
};
enum { N_CNN_CASES = sizeof CNN_CASES / sizeof CNN_CASES[0] };

// The run configuration of case k (threads 1); init and optim are the caller's.
static inline par_run_cfg cnn_case_cfg(const cnn_case *c, const par_model *m, const void *init,
                                       const par_optim *o)
{
    return (par_run_cfg){.model = m, .dtype = c->dt, .mode = PAR_MODE_EXACT, .batch = c->B,
                         .chunk = c->C, .lr = c->optim == PAR_OPTIM_ADAM ? 1e-3 : 0.05,
                         .threads = 1, .init_params = init, .optim = o};
}

// "cnn:... f32 B=64 C=8 adam": the case's name in test lines.
static inline void cnn_case_name(char *buf, size_t cap, const cnn_case *c)
{
    snprintf(buf, cap, "%s %s B=%zu C=%zu %s", c->spec, par_dtype_name(c->dt), c->B, c->C,
             par_optim_name(c->optim));
}

#endif
