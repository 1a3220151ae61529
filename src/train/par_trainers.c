// The trainer table: adding a trainer is one file and one line here.
#include <string.h>

#include "par_trainer.h"

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;
#ifdef PARITY_HAVE_MPI
extern const par_trainer_ops par_trainer_mpi, par_trainer_hybrid, par_trainer_root;
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

par_status par_mode_parse(par_mode *mode, const char *name)
{
    if (strcmp(name, "exact") == 0) *mode = PAR_MODE_EXACT;
    else if (strcmp(name, "fast") == 0) *mode = PAR_MODE_FAST;
    else return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                              "--mode '%s': expected exact or fast", name);
    return PAR_OK;
}

const char *par_mode_name(par_mode mode) { return mode == PAR_MODE_FAST ? "fast" : "exact"; }

static const char *const optim_names[] = {"sgd", "momentum", "nesterov", "adam"};

par_optim par_optim_default(par_optim_kind kind)
{
    const par_optim o = {kind, 0.9, 0.9, 0.999, 1e-8};
    return o;
}

par_status par_optim_parse(par_optim_kind *kind, const char *name)
{
    for (int k = 0; k < 4; k++)
        if (strcmp(name, optim_names[k]) == 0) {
            *kind = (par_optim_kind)k;
            return PAR_OK;
        }
    return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                         "--optim '%s': expected sgd, momentum, nesterov or adam", name);
}

const char *par_optim_name(par_optim_kind kind)
{
    return (unsigned)kind < 4 ? optim_names[kind] : "?";
}

int par_optim_n_state(par_optim_kind kind)
{
    return kind == PAR_OPTIM_ADAM ? 2 : kind == PAR_OPTIM_SGD ? 0 : 1;
}

const char *par_optim_state_name(par_optim_kind kind, int i)
{
    if (kind == PAR_OPTIM_ADAM) return i == 0 ? "m" : "v";
    return "velocity";
}

// Gathering a dense layer's input (a[0] is the batch, on every rank already)
// and output gradient lets the owner of each row compute its whole chunk fold
// exactly as one thread does: the weight gradient is split among the ranks
// instead of run rank after rank. It is taken when it moves no more values
// than the chain would (about 2 per parameter): B (n_in + n_out) <=
// 2 (n_in + 1) n_out. Conv and batchnorm layers keep the chain (their
// per-sample data is the larger).
int par_ring_gathers(const par_model *m, int l, size_t B)
{
    const par_layer *L = &m->layers[l];
    if (L->kind != PAR_LAYER_DENSE) return 0;
    const size_t per_sample = (l > 0 ? L->n_in : 0) + L->n_out;
    return B * per_sample <= 2 * (L->n_in + 1) * L->n_out;
}

void par_ring_split(const par_model *m, size_t B, size_t *chain_params, size_t *gather_values)
{
    *chain_params = *gather_values = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *L = &m->layers[l];
        if (L->n_rows == 0) continue;
        if (par_ring_gathers(m, l, B)) *gather_values += (l > 0 ? L->n_in : 0) + L->n_out;
        else *chain_params += L->n_rows * (L->row_len + 1);
    }
}
