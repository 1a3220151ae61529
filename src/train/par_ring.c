// Which layers the MPI trainers' ring gathers (par_trainer.h): pure
// functions of the model and the batch, shared by the trainers and the
// scaling model's traffic figures.
#include "par_trainer.h"

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
