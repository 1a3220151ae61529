// The MPI trainers: `mpi` (one thread per rank), `hybrid` (OpenMP inside each
// rank, MPI_THREAD_FUNNELED: only the master thread calls MPI) and `root`.
// Every rank loads the dataset itself and receives the whole batch from the
// loop (cheap: the batch is gathered from memory); rank r owns a contiguous
// range of chunks.
//
// exact, mpi/hybrid: the left fold over chunks runs as an ordered pipelined
//   chain over parameter segments: rank 0 starts each segment's fold with
//   its chunks, rank r continues the fold it receives from r-1 with its own
//   chunks, and the last rank's result travels back round the ring
//   (P-1 -> 0 -> 1 -> ... -> P-2). Each rank sends at most 2 x (N + 1)
//   values per step, like a ring allreduce, and every rank gets the serial
//   fold bit for bit whatever P is.
// exact, root: ranks send each of their chunk gradients to rank 0, which
//   folds them in chunk order, updates and broadcasts the weights (the
//   classic design made exact, at the price of one message per chunk).
// fast: MPI_Allreduce (mpi/hybrid) or MPI_Reduce + MPI_Bcast (root) of the
//   per-rank sums: order chosen by the MPI library.
#ifdef PARITY_HAVE_MPI

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "par_engine.h"

typedef struct segment {
    int layer;
    size_t o0, o1;               // rows of the layer
} segment;

typedef struct mpi_state {
    par_engine e;
    int is_root_design;
    MPI_Comm comm;
    int rank, size;
    MPI_Datatype real_t;
    segment *seg;
    int n_seg;
    void *chunk_g;               // root exact: one chunk's gradient + its loss
    MPI_Request *reqs;
    int n_reqs, cap_reqs;
    par_trainer_stats stats;
    double bytes, comm_s;        // totals of this rank
} mpi_state;

static void *at(const mpi_state *s, const void *base, size_t i)
{
    return (char *)base + i * par_dtype_size(s->e.dt);
}

// Chunks [c0, c1) owned by rank r: balanced, lower ranks get the extra ones,
// so rank 0 always owns chunk 0.
static void own_chunks(size_t n_chunks, int r, int P, size_t *c0, size_t *c1)
{
    const size_t base = n_chunks / (size_t)P, extra = n_chunks % (size_t)P, ur = (size_t)r;
    *c0 = ur * base + (ur < extra ? ur : extra);
    *c1 = *c0 + base + (ur < extra);
}

// Row segments of every layer, about SEG_PARAMS parameters each, in layer
// order: small enough that the pipeline fills fast (rank r waits about one
// segment's work for rank r-1), large enough that messages are not latency-bound.
enum { SEG_PARAMS = PAR_RING_SEG_PARAMS };
static par_status make_segments(mpi_state *s)
{
    const par_model *m = s->e.m;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (int l = 0; l < m->n_layers; l++) {
            const par_layer *L = &m->layers[l];
            if (L->n_rows == 0) continue;   // no parameters (max-pool): no segment
            size_t rows = (SEG_PARAMS / L->row_len + 3) / 4 * 4;
            if (rows == 0) rows = 4;
            for (size_t o = 0; o < L->n_rows; o += rows) {
                if (pass == 1)
                    s->seg[n] = (segment){l, o, o + rows < L->n_rows ? o + rows : L->n_rows};
                n++;
            }
        }
        if (pass == 0) {
            s->seg = malloc((size_t)n * sizeof *s->seg);
            s->reqs = malloc((size_t)(4 * n + 4) * sizeof *s->reqs);
            PAR_FAIL_IF(!s->seg || !s->reqs, PAR_ERR_ALLOC, "out of memory for %d segments", n);
            s->cap_reqs = 4 * n + 4;
        }
    }
    s->n_seg = n;
    return PAR_OK;
}

static void isend(mpi_state *s, const void *buf, size_t count, int to, int tag)
{
    MPI_Isend(buf, (int)count, s->real_t, to, tag, s->comm, &s->reqs[s->n_reqs++]);
    s->bytes += (double)(count * par_dtype_size(s->e.dt));
}

static void recv(mpi_state *s, void *buf, size_t count, int from, int tag)
{
    MPI_Recv(buf, (int)count, s->real_t, from, tag, s->comm, MPI_STATUS_IGNORE);
}

// The W rows and bias entries of segment k inside the gradient buffer.
static void seg_parts(const mpi_state *s, int k, void **w, size_t *nw, void **b, size_t *nb)
{
    const par_model *m = s->e.m;
    const segment *g = &s->seg[k];
    const par_layer *L = &m->layers[g->layer];
    *w = at(s, s->e.g, m->views[L->w_view].offset + g->o0 * L->row_len);
    *nw = (g->o1 - g->o0) * L->row_len;
    *b = at(s, s->e.g, m->views[L->b_view].offset + g->o0);
    *nb = g->o1 - g->o0;
}

// Batchnorm's batch sums (par_batch_ring): the same ordered chain as the
// gradient, on one small vector. Rank r continues the fold it receives from
// r - 1 with its own chunks and passes it on; the last rank's result, the
// fold of every chunk in order, goes to every rank by MPI_Bcast.
enum { TAG_BN = 1 << 20 };

static int bn_recv(void *ctx, void *acc, size_t n)
{
    mpi_state *s = ctx;
    if (s->rank == 0) return 0;   // rank 0 owns chunk 0: it starts the fold
    const double t0 = MPI_Wtime();
    recv(s, acc, n, s->rank - 1, TAG_BN);
    s->comm_s += MPI_Wtime() - t0;
    return 1;
}

static void bn_send(void *ctx, void *acc, size_t n)
{
    mpi_state *s = ctx;
    const double t0 = MPI_Wtime();
    if (s->rank + 1 < s->size) {
        MPI_Send(acc, (int)n, s->real_t, s->rank + 1, TAG_BN, s->comm);
        s->bytes += (double)(n * par_dtype_size(s->e.dt));
    }
    MPI_Bcast(acc, (int)n, s->real_t, s->size - 1, s->comm);
    if (s->rank == s->size - 1) s->bytes += (double)(n * par_dtype_size(s->e.dt));
    s->comm_s += MPI_Wtime() - t0;
}

static void destroy(void *state);

static par_status create(const par_run_cfg *cfg, void **state, int threads, int root_design)
{
    *state = NULL;
    int init = 0;
    MPI_Initialized(&init);
    PAR_FAIL_IF(!init, PAR_ERR_MPI, "MPI trainers need MPI to be initialised (run under mpirun "
                                    "or with --ranks R)");
    mpi_state *s = calloc(1, sizeof *s);
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "out of memory");
    par_run_cfg c = *cfg;
    c.threads = threads;
    par_status st = par_engine_init(&s->e, &c);
    if (st != PAR_OK) {
        free(s);
        return st;
    }
    s->is_root_design = root_design;
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    s->real_t = cfg->dtype == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE;
    s->e.ring = (par_batch_ring){bn_recv, bn_send, s};
    st = make_segments(s);
    if (st == PAR_OK && root_design) {
        s->chunk_g = malloc((cfg->model->n_params + 1) * par_dtype_size(cfg->dtype));
        if (!s->chunk_g) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    if (st != PAR_OK) {   // the contract of create(): nothing left behind
        destroy(s);
        s = NULL;
    }
    *state = s;
    return st;
}

static par_status mpi_create(const par_run_cfg *cfg, void **state)
{
    return create(cfg, state, 1, 0);
}

static par_status hybrid_create(const par_run_cfg *cfg, void **state)
{
    return create(cfg, state, cfg->threads, 0);
}

static par_status root_create(const par_run_cfg *cfg, void **state)
{
    return create(cfg, state, cfg->threads, 1);
}

// exact mpi/hybrid: the ordered chain fold, then the result round the ring.
static double ring_fold(mpi_state *s, size_t B, size_t c0, size_t c1)
{
    const int r = s->rank, P = s->size, last = P - 1;
    const int has = c1 > c0;
    const int prev = r - 1, next = r + 1 < P ? r + 1 : -1;
    // Phase 2 chain: last -> 0 -> 1 -> ... -> P-2.
    const int bprev = r == last ? -1 : (r == 0 ? last : r - 1);
    int bnext;
    if (P == 1 || r == P - 2) bnext = -1;   // the tail of the chain
    else if (r == last) bnext = 0;
    else bnext = r + 1;
    char lossbuf[3][8];   // [0] phase 1 in, [1] phase 1 out, [2] phase 2
    const int base = 2 * s->n_seg + 2;   // tags of phase 2
    s->n_reqs = 0;
    for (int k = 0; k < s->n_seg; k++) {
        void *w, *b;
        size_t nw, nb;
        seg_parts(s, k, &w, &nw, &b, &nb);
        double t0 = MPI_Wtime();
        if (r > 0) {
            recv(s, w, nw, prev, 2 * k);
            recv(s, b, nb, prev, 2 * k + 1);
        }
        s->comm_s += MPI_Wtime() - t0;
        if (has)
            par_engine_layer_grads(&s->e, s->seg[k].layer, B, c0, c1, s->seg[k].o0,
                                   s->seg[k].o1, r > 0);
        if (next >= 0) {
            isend(s, w, nw, next, 2 * k);
            isend(s, b, nb, next, 2 * k + 1);
        } else if (bnext >= 0) {
            // The last rank holds the final values: start them round the ring now.
            isend(s, w, nw, bnext, base + 2 * k);
            isend(s, b, nb, bnext, base + 2 * k + 1);
        }
    }
    // The loss rides the same chain as one more value.
    double acc = 0;
    double t0 = MPI_Wtime();
    if (r > 0) {
        recv(s, lossbuf[0], 1, prev, 2 * s->n_seg);
        acc = par_get_real(s->e.dt, lossbuf[0], 0);
    }
    if (has) acc = par_engine_loss_fold(&s->e, B, c0, c1, acc, r > 0);
    par_put_real(s->e.dt, lossbuf[1], 0, acc);
    if (next >= 0) isend(s, lossbuf[1], 1, next, 2 * s->n_seg);

    // Phase 2: the final gradient from the last rank to everyone (the last
    // rank already sent its segments as they were finished).
    for (int k = 0; k < s->n_seg && r != last; k++) {
        void *w, *b;
        size_t nw, nb;
        seg_parts(s, k, &w, &nw, &b, &nb);
        if (bprev >= 0) {
            recv(s, w, nw, bprev, base + 2 * k);
            recv(s, b, nb, bprev, base + 2 * k + 1);
        }
        if (bnext >= 0) {
            isend(s, w, nw, bnext, base + 2 * k);
            isend(s, b, nb, bnext, base + 2 * k + 1);
        }
    }
    if (bprev >= 0) {   // phase 2 has its own buffer: phase 1's send may be in flight
        recv(s, lossbuf[2], 1, bprev, base + 2 * s->n_seg);
        acc = par_get_real(s->e.dt, lossbuf[2], 0);
    }
    if (bnext >= 0) isend(s, lossbuf[r == last ? 1 : 2], 1, bnext, base + 2 * s->n_seg);
    MPI_Waitall(s->n_reqs, s->reqs, MPI_STATUSES_IGNORE);
    s->comm_s += MPI_Wtime() - t0;
    return acc;
}

// exact root: every chunk's gradient reaches rank 0, folded there in order.
static double root_fold(mpi_state *s, size_t B, size_t c0, size_t c1, size_t n_chunks)
{
    const size_t N = s->e.m->n_params;
    double acc = 0;
    if (s->rank == 0) {
        par_engine_weight_grads(&s->e, B, c0, c1, 0);
        acc = par_engine_loss_fold(&s->e, B, c0, c1, 0, 0);
        for (size_t c = c1; c < n_chunks; c++) {
            size_t q0 = 0, q1 = 0;
            int from = 1;
            for (; from < s->size; from++) {
                own_chunks(n_chunks, from, s->size, &q0, &q1);
                if (c >= q0 && c < q1) break;
            }
            double t0 = MPI_Wtime();
            recv(s, s->chunk_g, N + 1, from, (int)c);
            s->comm_s += MPI_Wtime() - t0;
            if (s->e.dt == PAR_F32) {
                float *g = s->e.g;
                const float *h = s->chunk_g;
                for (size_t i = 0; i < N; i++) g[i] = g[i] + h[i];
                acc = (double)((float)acc + h[N]);
            } else {
                double *g = s->e.g;
                const double *h = s->chunk_g;
                for (size_t i = 0; i < N; i++) g[i] = g[i] + h[i];
                acc = acc + h[N];
            }
        }
    } else {
        for (size_t c = c0; c < c1; c++) {
            // This chunk alone, its gradient in e.g, copied out with its loss.
            par_engine_weight_grads(&s->e, B, c, c + 1, 0);
            memcpy(s->chunk_g, s->e.g, N * par_dtype_size(s->e.dt));
            par_put_real(s->e.dt, s->chunk_g, N, par_engine_loss_fold(&s->e, B, c, c + 1, 0, 0));
            double t0 = MPI_Wtime();
            MPI_Send(s->chunk_g, (int)(N + 1), s->real_t, 0, (int)c, s->comm);
            s->comm_s += MPI_Wtime() - t0;
            s->bytes += (double)((N + 1) * par_dtype_size(s->e.dt));
        }
    }
    return acc;
}

static par_status step(void *state, const par_batch *batch, double *loss)
{
    mpi_state *s = state;
    par_engine *e = &s->e;
    const size_t B = batch->B, C = e->C, n_chunks = par_n_chunks(B, C), N = e->m->n_params;
    PAR_FAIL_IF(B == 0 || B > e->B_cap, PAR_ERR_CONFIG, "batch of %zu samples, expected 1..%zu", B,
                e->B_cap);
    size_t c0, c1;
    own_chunks(n_chunks, s->rank, s->size, &c0, &c1);
    par_engine_begin_step(e);
    const size_t s0 = c0 * C < B ? c0 * C : B, s1 = c1 * C < B ? c1 * C : B;
    // Also a rank without chunks: batchnorm's batch sums pass through it.
    par_engine_forward_backward(e, batch, s0, s1, 1);

    double sum;
    const double t0 = MPI_Wtime();
    if (e->mode == PAR_MODE_EXACT && !s->is_root_design && s->size == 1) {
        // One rank: the chain is just this rank's fold. In one parallel region,
        // not one per ring segment (each region wakes the threads again).
        par_engine_weight_grads(e, B, c0, c1, 0);
        sum = par_engine_loss_fold(e, B, c0, c1, 0, 0);
    } else if (e->mode == PAR_MODE_EXACT && !s->is_root_design) {
        sum = ring_fold(s, B, c0, c1);
    } else if (e->mode == PAR_MODE_EXACT) {
        sum = root_fold(s, B, c0, c1, n_chunks);
    } else {
        // fast: local sums, combined by the MPI library in its own order.
        if (c1 > c0) {
            par_engine_weight_grads(e, B, c0, c1, 0);
            sum = par_engine_loss_fold(e, B, c0, c1, 0, 0);
        } else {
            memset(e->g, 0, N * par_dtype_size(e->dt));
            sum = 0;
        }
        const double t1 = MPI_Wtime();
        double lsum = sum;
        MPI_Allreduce(MPI_IN_PLACE, &lsum, 1, MPI_DOUBLE, MPI_SUM, s->comm);
        sum = lsum;
        if (s->is_root_design) {
            MPI_Reduce(s->rank == 0 ? MPI_IN_PLACE : e->g, e->g, (int)N, s->real_t, MPI_SUM, 0,
                       s->comm);
            s->bytes += s->rank == 0 ? 0 : (double)(N * par_dtype_size(e->dt));
        } else {
            MPI_Allreduce(MPI_IN_PLACE, e->g, (int)N, s->real_t, MPI_SUM, s->comm);
            s->bytes += 2.0 * (double)(N * par_dtype_size(e->dt)) * (s->size - 1) / s->size;
        }
        s->comm_s += MPI_Wtime() - t1;
    }
    (void)t0;

    if (s->is_root_design) {
        // Rank 0 updates; everyone receives the new weights.
        if (s->rank == 0) par_engine_update(e);
        const double t1 = MPI_Wtime();
        MPI_Bcast(e->w, (int)N, s->real_t, 0, s->comm);
        if (s->rank != 0) par_engine_sync_wt(e);   // rank 0's panels follow its update
        MPI_Bcast(&sum, 1, MPI_DOUBLE, 0, s->comm);
        s->comm_s += MPI_Wtime() - t1;
        if (s->rank == 0) s->bytes += (double)(N * par_dtype_size(e->dt));
    } else {
        par_engine_update(e);
    }
    *loss = par_engine_loss_mean(e, sum, B);
    s->stats.steps++;
    return PAR_OK;
}

static par_status stats(void *state, par_trainer_stats *out)
{
    mpi_state *s = state;
    double mine[2] = {s->bytes, s->comm_s}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, s->comm);
    const double steps = s->stats.steps > 0 ? (double)s->stats.steps : 1.0;
    out->steps = s->stats.steps;
    out->bytes_sent_max = all[0] / steps;
    out->comm_seconds_max = all[1] / steps;
    return PAR_OK;
}

static void destroy(void *state)
{
    mpi_state *s = state;
    if (!s) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && s->comm != MPI_COMM_NULL && s->comm != 0) MPI_Comm_free(&s->comm);
    par_engine_free(&s->e);
    free(s->seg);
    free(s->reqs);
    free(s->chunk_g);
    free(s);
}

const par_trainer_ops par_trainer_mpi = {
    .name = "mpi",
    .summary = "one process per MPI rank, ordered ring reduction (exact) or MPI_Allreduce (fast)",
    .caps = PAR_CAP_RANKS,
    .create = mpi_create,
    .step = step,
    .params = par_engine_params_op,
    .destroy = destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .stats = stats,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
};

const par_trainer_ops par_trainer_hybrid = {
    .name = "hybrid",
    .summary = "MPI ranks x OpenMP threads (--threads T per rank), MPI_THREAD_FUNNELED",
    .caps = PAR_CAP_RANKS | PAR_CAP_THREADS,
    .create = hybrid_create,
    .step = step,
    .params = par_engine_params_op,
    .destroy = destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .stats = stats,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
};

const par_trainer_ops par_trainer_root = {
    .name = "root",
    .summary = "classic reduce to rank 0, update there, broadcast weights (exact: chunk by chunk)",
    .caps = PAR_CAP_RANKS | PAR_CAP_THREADS,
    .create = root_create,
    .step = step,
    .params = par_engine_params_op,
    .destroy = destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .stats = stats,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
};

#endif
