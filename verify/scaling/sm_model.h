// The scaling model of `parity model`: time per step of data-parallel
// training on P ranks from measured costs, for exact and fast reductions and
// for the mpi and root designs. Written down in docs/scaling.md.
// Pure functions; the measurements are sm_measure.h's. Tests: tests/verify/test_scaling.c.
#ifndef SM_MODEL_H
#define SM_MODEL_H

#include <stddef.h>

enum { SM_MAX_POINTS = 8 };

typedef struct sm_costs {
    double t0;            // seconds per step that do not shrink with samples (update, panels)
    double t_update;      // the optimizer update's part of t0 (mpi exact shards it over P ranks)
    double t_panel;       // seconds to recompute every transposed panel from the weights
    double t_update_shared;   // one of update_shared_ranks threads' share of the update
    int update_shared_ranks;  // right after all read every weight (0: not measured)
    double t_sample;      // seconds per sample (forward, backward, weight gradient)
    // Serial compute per step measured at n_points batch sizes, point_b
    // ascending: with 2 or more the compute of b samples is read off them
    // (sm_compute_seconds) instead of t0 + b t_sample.
    int n_points;
    double point_b[SM_MAX_POINTS], point_t[SM_MAX_POINTS];
    double alpha;         // seconds per message (latency)
    double beta;          // seconds per byte (inverse bandwidth)
    double t_allreduce;   // seconds of an MPI_Allreduce of the N parameters, measured on
    int allreduce_ranks;  // this many ranks (0: not measured)
    size_t n_params;      // N
    size_t elem_bytes;    // 4 (f32) or 8 (f64)
    size_t chunk;         // C
    size_t seg_params;    // parameters per segment of the exact ring
    size_t chain_params;  // mpi exact: parameters whose gradient runs along the chain
    size_t gather_values; // mpi exact: values per sample all-gathered (par_ring_gathers)
    int one_host;         // mpi exact: the P ranks share one host, so one shared copy of
                          // the weights and gathered rows: no weights round the ring, no
                          // panels recomputed, no all-gather
    double t_run;         // seconds per step outside the engine on every rank: the batch,
                          // the run's hooks and bookkeeping (a real run's phase_seconds)
    int cores;            // cores the P ranks share (0: a core each, as on a cluster)
    double contention;    // compute slowdown with all `cores` cores busy (1: none)
    double turns;         // P > cores: two processes taking turns on one core, each with
                          // its own weights, over twice one alone (0 or 1: none)
} sm_costs;

typedef enum sm_design { SM_MPI_EXACT, SM_MPI_FAST, SM_ROOT_EXACT, SM_ROOT_FAST } sm_design;

// Seconds of communication per step on P ranks, global batch B.
//   mpi fast (ring allreduce):     2 (P-1) a + 2 (P-1)/P N s b, times the
//   measured allreduce over that formula at the ranks it was measured on
//   (t_allreduce / formula(allreduce_ranks): the library's algorithm and
//   its sums, which alpha and beta leave out), when it was measured
//   mpi exact (the gathered layers' activations all-gathered round a ring,
//   the other layers' gradient along the ordered chain, then the updated
//   weights round the ring; chain and weights pipelined over segments of
//   S = N s / n_seg bytes, n_c = ceil(chain_params / seg_params) of them
//   on the chain; the gradients the last rank sends to their owners overlap
//   the chain):
//     (P-1) (a + B g s b / P)        [g = gather_values; none if 0]
//     + (n_c + P - 2) (a + S b)      [none if n_c = 0]
//     + (P-1) a + ((P-1)/P n_seg + P - 2) S b
//   (the weights stream: each of the P-1 hops pays its latency once, for
//   the first segment; one_host: the last term is two barriers instead,
//   2 ceil(log2 P) a, and there is no gather term: the gathered rows are
//   written once, in the shared window)
//   root fast (reduce + broadcast, binomial trees): 2 ceil(log2 P) (a + N s b)
//   root exact (the gathered layers' activations all-gathered as mpi exact's,
//   each rank's rows of those layers' gradient, (P-1)/P of their N_g = N -
//   chain_params parameters, streamed as the weights are, and every loss to
//   rank 0; rank 0 receives every chunk it does not own of the chained
//   layers' gradient, chain_params values; then broadcasts the weights):
//     (P-1) (a + B g s b / P) + (P-1) a + (P-1)/P N_g s b   [none if g = 0]
//     + (P-1) (a + B s b / P) + (n_chunks - own_0) (a + chain_params s b)
//     + ceil(log2 P) (a + N s b)
double sm_comm_seconds(const sm_costs *c, sm_design d, int P, size_t B);

// Serial compute of one step of b samples: with n_points >= 2, linear between
// the two measured points around b (along the first or last two beyond
// them); else t0 + b t_sample. A straight line fitted through all the points
// misses the middle ones where the time per sample changes with b (caches),
// by several percent between the points.
double sm_compute_seconds(const sm_costs *c, double b);

// Seconds per step: (compute(samples of the busiest rank) + t_run) x
// slow + comm + the run's per-step agreement of the ranks, 2 ceil(log2 P) a.
// slow: 1 without cores; with P ranks on `cores` cores, the contention of
// min(P, cores) busy cores, 1 + (contention - 1) (k - 1) / (cores - 1), and
// ceil(P / cores) more when P > cores (the ranks of the busiest core take
// turns, and every rank waits for them each step), and then `turns` more
// where each rank holds its own weights (every design but mpi exact on one
// host, whose ranks share one copy).
// The busiest rank holds ceil(n_chunks / P) chunks of C samples (at most B).
// mpi exact shards the update: compute - t_update + t_update / P, plus
// t_panel (P-1)/P for the panels of the weights received (P > 1; none
// with one_host). On one host, where the ranks update one shared copy
// that all of them have just read, the share is t_update_shared k / P
// instead (k = update_shared_ranks, when measured): every line a rank
// writes, the others hold.
double sm_step_seconds(const sm_costs *c, sm_design d, int P, size_t B);

// The compute costs (t0, t_update, t_panel, t_update_shared, t_sample, the
// points) times k: the same
// machine measured faster or slower (calibration to a measured run).
void sm_scale_compute(sm_costs *c, double k);

const char *sm_design_name(sm_design d);

#endif
