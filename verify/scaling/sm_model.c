// The scaling model's formulas; see sm_model.h.
#include "sm_model.h"

#include <math.h>

static double log2_ceil(int P)
{
    int k = 0;
    while ((1 << k) < P) k++;
    return (double)k;
}

// A ring all-gather of B samples' gathered values on P ranks.
static double allgather_seconds(const sm_costs *c, int P, size_t B)
{
    const double bytes = (double)B * (double)c->gather_values * (double)c->elem_bytes;
    return (P - 1) * (c->alpha + bytes / P * c->beta);
}

// Messages sent back to back through `hops` ranks: each hop pays its latency
// once, for the first message, and the rest follow at the link's rate.
static double streamed_seconds(const sm_costs *c, int hops, double bytes)
{
    return hops * c->alpha + bytes * c->beta;
}

double sm_comm_seconds(const sm_costs *c, sm_design d, int P, size_t B)
{
    if (P <= 1) return 0;
    const double Ns = (double)c->n_params * (double)c->elem_bytes;
    const double full = c->alpha + Ns * c->beta;
    const size_t n_chunks = (B + c->chunk - 1) / c->chunk;
    switch (d) {
    case SM_MPI_FAST: {
        const double ring = 2.0 * (P - 1) * c->alpha + 2.0 * (P - 1) / P * Ns * c->beta;
        const int Q = c->allreduce_ranks;
        if (Q < 2 || !(c->t_allreduce > 0)) return ring;
        const double ring_Q = 2.0 * (Q - 1) * c->alpha + 2.0 * (Q - 1) / Q * Ns * c->beta;
        return ring_Q > 0 ? ring * c->t_allreduce / ring_Q : ring;
    }
    case SM_MPI_EXACT: {
        const double n_seg = ceil((double)c->n_params / (double)c->seg_params);
        const double S = Ns / n_seg;
        const double one = c->alpha + S * c->beta;
        const double n_c = ceil((double)c->chain_params / (double)c->seg_params);
        // The weights ring: every segment is sent as soon as it is there.
        double t = c->one_host
                       ? 2 * log2_ceil(P) * c->alpha
                       : streamed_seconds(c, P - 1, ((double)(P - 1) / P * n_seg + P - 2) * S);
        // One host: the gathered rows are written once, in the shared window.
        if (c->gather_values > 0 && !c->one_host) t += allgather_seconds(c, P, B);
        if (n_c > 0) t += (n_c + P - 2) * one;
        return t;
    }
    case SM_ROOT_FAST:
        return 2.0 * log2_ceil(P) * full;
    case SM_ROOT_EXACT: {
        const size_t own0 = n_chunks / (size_t)P + (n_chunks % (size_t)P != 0);
        const double per_sample = (double)c->elem_bytes;   // the losses, to rank 0
        const double chunk = c->alpha + (double)c->chain_params * (double)c->elem_bytes * c->beta;
        double t = 0;
        if (c->gather_values > 0) {
            // The all-gather, as mpi exact's; the rows the other ranks computed to rank 0.
            const double n_g = (double)(c->n_params - c->chain_params);
            t += allgather_seconds(c, P, B) +
                 streamed_seconds(c, P - 1, (double)(P - 1) / P * n_g * (double)c->elem_bytes);
        }
        return t + (P - 1) * (c->alpha + (double)B * per_sample / P * c->beta) +
               (double)(n_chunks - (own0 < n_chunks ? own0 : n_chunks)) * chunk +
               log2_ceil(P) * full;
    }
    }
    return 0;
}

double sm_compute_seconds(const sm_costs *c, double b)
{
    const int n = c->n_points;
    if (n < 2) return c->t0 + b * c->t_sample;
    int i = 0;   // the segment [i, i + 1]: the one holding b, or an end one
    while (i + 2 < n && b > c->point_b[i + 1]) i++;
    const double b0 = c->point_b[i], b1 = c->point_b[i + 1];
    const double t0 = c->point_t[i], t1 = c->point_t[i + 1];
    return t0 + (b - b0) * (t1 - t0) / (b1 - b0);
}

double sm_step_seconds(const sm_costs *c, sm_design d, int P, size_t B)
{
    const size_t n_chunks = (B + c->chunk - 1) / c->chunk;
    const size_t per_rank = (n_chunks + (size_t)P - 1) / (size_t)P;
    size_t samples = per_rank * c->chunk;
    if (samples > B) samples = B;
    double compute = sm_compute_seconds(c, (double)samples);
    if (d == SM_MPI_EXACT && P > 1) {
        const int k = c->update_shared_ranks;
        const double share = c->one_host && k > 1 && c->t_update_shared > 0
                                 ? c->t_update_shared * k / P
                                 : c->t_update / P;
        compute += -c->t_update + share + (c->one_host ? 0 : c->t_panel * (double)(P - 1) / P);
    }
    double slow = 1;
    if (c->cores > 0) {
        const int k = P < c->cores ? P : c->cores;
        if (c->cores > 1) slow = 1 + (c->contention - 1) * (k - 1) / (c->cores - 1);
        // More ranks than cores: they synchronize every step, so the core
        // holding the most ranks, ceil(P / cores) of them, sets the pace.
        if (P > c->cores) slow *= ceil((double)P / c->cores);
        // Each its own weights: taking turns, each evicts the other's.
        const int shared = d == SM_MPI_EXACT && c->one_host;
        if (P > c->cores && !shared && c->turns > 1) slow *= c->turns;
    }
    const double agree = P > 1 ? 2 * log2_ceil(P) * c->alpha : 0;
    return (compute + c->t_run) * slow + sm_comm_seconds(c, d, P, B) + agree;
}

void sm_scale_compute(sm_costs *c, double k)
{
    c->t0 *= k;
    c->t_update *= k;
    c->t_panel *= k;
    c->t_update_shared *= k;
    c->t_sample *= k;
    for (int i = 0; i < c->n_points; i++) c->point_t[i] *= k;
}

const char *sm_design_name(sm_design d)
{
    switch (d) {
    case SM_MPI_EXACT: return "mpi exact";
    case SM_MPI_FAST: return "mpi fast";
    case SM_ROOT_EXACT: return "root exact";
    case SM_ROOT_FAST: return "root fast";
    }
    return "?";
}
