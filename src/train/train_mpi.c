// The MPI trainers: `mpi` (one thread per rank), `hybrid` (OpenMP inside each
// rank, MPI_THREAD_FUNNELED: only the master thread calls MPI) and `root`.
// Every rank loads the dataset itself and assembles the samples of its own
// chunks (PAR_CAP_FILLS_BATCH), and the other ranks' samples only where it
// reads them (exact: a gathered first layer's weight gradient reads every
// sample's input); rank r owns a contiguous range of chunks.
//
// exact, mpi/hybrid: every rank owns a contiguous block of row segments
//   (about N / P parameters), computes or receives their final gradient and
//   updates them (optimizer state included); the update is elementwise, so
//   every rank ends the step with the serial weights. Dense layers whose
//   per-sample data is small (par_ring_gathers: the default MLP's first two)
//   are gathered: the ranks all-gather each sample's layer input and output
//   gradient, and the owner of each row computes its whole chunk fold alone,
//   as one thread does. The other layers' fold runs as an ordered pipelined
//   chain over segments: rank 0 starts each segment's fold with its chunks,
//   rank r continues the fold it receives from r-1 with its own chunks, so
//   the last rank finishes every segment with the serial fold bit for bit
//   whatever P is, and sends it to its owner.
//   The new weights: with every rank on one host they live once, in an MPI
//   shared-memory window, and owners write their rows in place between two
//   node_sync a step (so do the gathered layers' per-sample rows: each rank's
//   pass writes its own samples' rows there, and every rank's weight gradient
//   reads them all after the first node_sync, with no all-gather);
//   otherwise (or --weights-by-messages) they go round the ring to every
//   other rank, which recomputes their transposed panel columns. A rank
//   sends each segment at most once per phase: under 2 N values per step,
//   like a ring allreduce. The gradient and optimizer state of the segments
//   a rank does not own are current only on their owner: grad and
//   get_optim gather them.
// exact, root: the gathered layers' per-sample data goes to every rank, and
//   each computes the whole chunk fold of the rows mpi's owner would and
//   sends them to rank 0; every loss goes to rank 0; for the other layers ranks
//   send each of their chunk gradients to rank 0, which folds them in chunk
//   order; rank 0 updates and broadcasts the weights (the classic design made
//   exact, at the price of one message per chunk).
// fast: MPI_Allreduce (mpi/hybrid) or MPI_Reduce + MPI_Bcast (root) of the
//   per-rank sums: order chosen by the MPI library.
//
// Setup (segments, the shared window, create, destroy): train_mpi_setup.c.
#ifdef PARITY_HAVE_MPI

#include <stdlib.h>
#include <string.h>

#include "par_time.h"
#include "train_mpi.h"

static void *at(const mpi_state *s, const void *base, size_t i)
{
    return (char *)base + i * par_dtype_size(s->e.dt);
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

static par_status mpi_create(const par_run_cfg *cfg, void **state)
{
    return par_ring_create(cfg, state, 1, 0);
}

static par_status hybrid_create(const par_run_cfg *cfg, void **state)
{
    return par_ring_create(cfg, state, cfg->threads, 0);
}

static par_status root_create(const par_run_cfg *cfg, void **state)
{
    return par_ring_create(cfg, state, cfg->threads, 1);
}

// The W rows and bias entries of segment k in buffer base (parameter layout).
static void seg_at(const mpi_state *s, const void *base, int k, void **w, size_t *nw, void **b,
                   size_t *nb)
{
    const par_model *m = s->e.m;
    const segment *g = &s->seg[k];
    const par_layer *L = &m->layers[g->layer];
    *w = at(s, base, m->views[L->w_view].offset + g->o0 * L->row_len);
    *nw = (g->o1 - g->o0) * L->row_len;
    *b = at(s, base, m->views[L->b_view].offset + g->o0);
    *nb = g->o1 - g->o0;
}

static void isend_seg(mpi_state *s, const void *base, int k, int to, int tag)
{
    void *w, *b;
    size_t nw, nb;
    seg_at(s, base, k, &w, &nw, &b, &nb);
    isend(s, w, nw, to, tag);
    isend(s, b, nb, to, tag + 1);
}

static void recv_seg(mpi_state *s, void *base, int k, int from, int tag)
{
    void *w, *b;
    size_t nw, nb;
    seg_at(s, base, k, &w, &nw, &b, &nb);
    const double t0 = MPI_Wtime();
    recv(s, w, nw, from, tag);
    recv(s, b, nb, from, tag + 1);
    s->comm_s += MPI_Wtime() - t0;
}

// Segment k updated here, its new weights sent on round the ring.
static void update_own(mpi_state *s, const par_update *u, int k, int tag)
{
    const par_rows r = {s->seg[k].layer, s->seg[k].o0, s->seg[k].o1};
    par_engine_update_rows(&s->e, u, &r, 1);
    if (!s->shared) isend_seg(s, s->e.w, k, (s->rank + 1) % s->size, tag);
}

// Rows [s0_q, s1_q) of buf (row values each) from every rank q to all (to
// rank 0 only: to_root), in place: the samples each rank's pass computed.
static void gather_rows(mpi_state *s, void *buf, size_t row, size_t B, int to_root)
{
    int *counts = s->counts, *displs = s->displs;
    for (int q = 0; q < s->size; q++) {
        size_t q0, q1;
        par_own_samples(B, s->e.C, q, s->size, &q0, &q1);
        displs[q] = (int)(q0 * row);
        counts[q] = (int)((q1 - q0) * row);
    }
    const size_t sz = par_dtype_size(s->e.dt);
    if (to_root) {
        void *mine = (char *)buf + (size_t)displs[s->rank] * sz;
        MPI_Gatherv(s->rank == 0 ? MPI_IN_PLACE : mine, counts[s->rank], s->real_t, buf, counts,
                    displs, s->real_t, 0, s->comm);
        if (s->rank != 0) s->bytes += (double)((size_t)counts[s->rank] * sz);
        return;
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, s->real_t, s->comm);
    // As a ring all-gather: every block but one's own passes through each rank.
    s->bytes += (double)((B * row - (size_t)counts[s->rank]) * sz);
}

// The gathered layers' inputs (a[0], the batch, is everywhere already) and
// output gradients of every sample, to every rank (in the shared window they
// are there, after ring_step's first node_sync).
static void gather_layers(mpi_state *s, size_t B)
{
    if (s->shared) return;
    const par_model *m = s->e.m;
    const double t0 = MPI_Wtime();
    for (int l = 0; l < m->n_layers; l++) {
        if (!s->gathered[l]) continue;
        if (l > 0) gather_rows(s, s->e.a[l], m->layers[l].n_in, B, 0);
        gather_rows(s, s->e.d[l], m->layers[l].n_out, B, 0);
    }
    s->comm_s += MPI_Wtime() - t0;
}

// The gathered layers' per-sample data to every rank, then the weight
// gradient of this rank's rows of them over all chunks (mpi exact and root).
// A gathered first layer reads every sample's input: the other ranks'
// samples are assembled here too, if the step's pass assembled only its own
// (in the shared window they are there, after ring_step's first node_sync).
static void mine_grads(mpi_state *s, const par_batch *batch)
{
    const size_t B = batch->B;
    if (batch->fill && s->gathered[0] && !s->x_shared) {
        const double t0 = par_now();
        size_t s0, s1;
        par_own_samples(B, s->e.C, s->rank, s->size, &s0, &s1);
        par_batch_fill(batch, 0, s0);
        par_batch_fill(batch, s1, B);
        s->e.phase[PAR_PHASE_BATCH] += par_now() - t0;
    }
    gather_layers(s, B);
    const size_t n_chunks = par_n_chunks(B, s->e.C);
    for (int i = 0; i < s->n_mine; i++)
        par_engine_layer_grads(&s->e, s->mine[i].layer, B, 0, n_chunks, s->mine[i].o0,
                               s->mine[i].o1, 0);
}

// This rank's rows of the gathered layers computed, updated and sent round
// the ring.
static void own_gathered(mpi_state *s, const par_update *u, const par_batch *batch, int tag_new)
{
    mine_grads(s, batch);
    par_engine_update_rows(&s->e, u, s->mine, s->n_mine);
    for (int k = 0; k < s->n_seg; k++)
        if (s->owner[k] == s->rank && s->gathered[s->seg[k].layer] && !s->shared)
            isend_seg(s, s->e.w, k, (s->rank + 1) % s->size, tag_new + 2 * k);
}

// exact mpi/hybrid: the ordered chain fold and the sharded update (see the
// top of the file), the gathered layers computed by their owners. Returns
// the folded loss sum, the same on every rank.
static double ring_step(mpi_state *s, const par_batch *batch, size_t c0, size_t c1)
{
    const size_t B = batch->B;
    const int r = s->rank, P = s->size, last = P - 1, n = s->n_seg;
    const int has = c1 > c0;
    // Tags: [0, 2n] the chain (segments, then the loss), [T_OWN, T_OWN + 2n]
    // the final gradients to their owners (and the loss to everyone),
    // [T_NEW, T_NEW + 2n) the updated weights.
    const int T_OWN = 2 * n + 2, T_NEW = 4 * n + 4;
    par_update u;
    par_engine_update_begin(&s->e, &u);
    s->n_reqs = 0;
    // One copy of the weights: no rank writes them before every rank's
    // forward and backward passes, which read them, are done.
    if (s->shared) par_ring_node_sync(s);
    // Rank 0 starts the chain first, so that the ranks after it find its
    // segments waiting when they come to the chain after their own rows.
    if (r > 0) own_gathered(s, &u, batch, T_NEW);
    for (int k = 0; k < n; k++) {
        if (s->gathered[s->seg[k].layer]) continue;
        if (r > 0) recv_seg(s, s->e.g, k, r - 1, 2 * k);
        if (has)
            par_engine_layer_grads(&s->e, s->seg[k].layer, B, c0, c1, s->seg[k].o0,
                                   s->seg[k].o1, r > 0);
        s->seg_req[k] = s->n_reqs;
        if (r < last) isend_seg(s, s->e.g, k, r + 1, 2 * k);
        else if (s->owner[k] != last) isend_seg(s, s->e.g, k, s->owner[k], T_OWN + 2 * k);
        else update_own(s, &u, k, T_NEW + 2 * k);   // final here: no gradient to send
    }
    // The loss rides the chain as one more value; the last rank sends the sum to all.
    char lossbuf[2][8];
    double acc = 0;
    double t0 = MPI_Wtime();
    if (r > 0) {
        recv(s, lossbuf[0], 1, r - 1, 2 * n);
        acc = par_get_real(s->e.dt, lossbuf[0], 0);
    }
    if (has) acc = par_engine_loss_fold(&s->e, B, c0, c1, acc, r > 0);
    par_put_real(s->e.dt, lossbuf[1], 0, acc);
    if (r < last) isend(s, lossbuf[1], 1, r + 1, 2 * n);
    else
        for (int q = 0; q < last; q++) isend(s, lossbuf[1], 1, q, T_OWN + 2 * n);
    s->comm_s += MPI_Wtime() - t0;
    if (r == 0) own_gathered(s, &u, batch, T_NEW);

    // Own segments: their final gradient from the last rank (after this rank's
    // chain send of the same buffer completed), the update, the new weights out.
    for (int k = 0; k < n && r != last; k++) {
        if (s->owner[k] != r || s->gathered[s->seg[k].layer]) continue;
        t0 = MPI_Wtime();
        MPI_Waitall(2, &s->reqs[s->seg_req[k]], MPI_STATUSES_IGNORE);
        s->comm_s += MPI_Wtime() - t0;
        recv_seg(s, s->e.g, k, last, T_OWN + 2 * k);
        update_own(s, &u, k, T_NEW + 2 * k);
    }
    t0 = MPI_Wtime();
    if (r != last) {
        recv(s, lossbuf[0], 1, last, T_OWN + 2 * n);
        acc = par_get_real(s->e.dt, lossbuf[0], 0);
    }
    s->comm_s += MPI_Wtime() - t0;
    // Everyone else's segments: their new weights round the ring (r - 1 -> r
    // -> r + 1, up to the rank before the owner), then the panel columns.
    const int from = (r + P - 1) % P, to = (r + 1) % P;
    for (int k = 0; k < n && !s->shared; k++) {
        if (s->owner[k] == r) continue;
        recv_seg(s, s->e.w, k, from, T_NEW + 2 * k);
        if (s->owner[k] != to) isend_seg(s, s->e.w, k, to, T_NEW + 2 * k);
    }
    if (s->shared) par_ring_node_sync(s);   // every owner's rows written
    else par_engine_sync_rows(&s->e, s->others, s->n_others);
    t0 = MPI_Wtime();
    MPI_Waitall(s->n_reqs, s->reqs, MPI_STATUSES_IGNORE);
    s->comm_s += MPI_Wtime() - t0;
    s->g_partial = 1;
    s->os_partial = s->e.os[0] != NULL;
    return acc;
}

// The parameters of the layers that are not gathered, packed in layer order
// (W, then b, per layer) to or from buf, or folded from buf into e.g (g = g
// + h). Returns how many there are.
enum { PACK, UNPACK_FOLD };
static size_t chained_params(mpi_state *s, void *buf, int how)
{
    const par_model *m = s->e.m;
    const size_t sz = par_dtype_size(s->e.dt);
    size_t n = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *L = &m->layers[l];
        if (L->n_rows == 0 || s->gathered[l]) continue;
        const int views[2] = {L->w_view, L->b_view};
        for (int v = 0; v < 2; v++) {
            const par_view *V = &m->views[views[v]];
            char *g = at(s, s->e.g, V->offset), *h = buf ? at(s, buf, n) : NULL;
            if (how == PACK && buf) memcpy(h, g, V->count * sz);
            else if (how == UNPACK_FOLD && s->e.dt == PAR_F32)
                for (size_t i = 0; i < V->count; i++)
                    ((float *)g)[i] = ((float *)g)[i] + ((const float *)h)[i];
            else if (how == UNPACK_FOLD)
                for (size_t i = 0; i < V->count; i++)
                    ((double *)g)[i] = ((double *)g)[i] + ((const double *)h)[i];
            n += V->count;
        }
    }
    return n;
}

// exact root: the gradient is completed on rank 0, in chunk order. The
// gathered layers' per-sample data goes to every rank, and each rank computes
// the whole chunk fold of its rows of those layers (the rows mpi's owners
// compute) and sends them to rank 0; every sample's loss goes to rank 0. For
// the other layers each rank sends each of its chunks' gradient (those
// layers' parameters only) to rank 0, which folds them in chunk order.
enum { TAG_ROWS = 1 << 18 };
static double root_fold(mpi_state *s, const par_batch *batch, size_t c0, size_t c1,
                        size_t n_chunks)
{
    par_engine *e = &s->e;
    const par_model *m = e->m;
    const size_t B = batch->B;
    mine_grads(s, batch);
    double t0 = MPI_Wtime();
    gather_rows(s, e->loss, 1, B, 1);
    s->comm_s += MPI_Wtime() - t0;
    s->n_reqs = 0;
    for (int k = 0; k < s->n_seg && s->rank != 0; k++)
        if (s->owner[k] == s->rank && s->gathered[s->seg[k].layer])
            isend_seg(s, e->g, k, 0, TAG_ROWS + 2 * k);
    const size_t Nc = chained_params(s, NULL, PACK);
    if (s->rank == 0) {
        for (int l = 0; l < m->n_layers; l++)
            if (m->layers[l].n_rows > 0 && !s->gathered[l])
                par_engine_layer_grads(e, l, B, c0, c1, 0, m->layers[l].n_rows, 0);
        for (size_t c = c1; c < n_chunks && Nc > 0; c++) {
            size_t q0 = 0, q1 = 0;
            int from = 1;
            for (; from < s->size; from++) {
                par_own_chunks(n_chunks, from, s->size, &q0, &q1);
                if (c >= q0 && c < q1) break;
            }
            const double t1 = MPI_Wtime();
            recv(s, s->chunk_g, Nc, from, (int)c);
            s->comm_s += MPI_Wtime() - t1;
            chained_params(s, s->chunk_g, UNPACK_FOLD);
        }
        for (int k = 0; k < s->n_seg; k++)
            if (s->owner[k] != 0 && s->gathered[s->seg[k].layer])
                recv_seg(s, e->g, k, s->owner[k], TAG_ROWS + 2 * k);
        return par_engine_loss_fold(e, B, 0, n_chunks, 0, 0);
    }
    for (size_t c = c0; c < c1 && Nc > 0; c++) {
        // This chunk alone, its gradient in e.g, packed and sent.
        for (int l = 0; l < m->n_layers; l++)
            if (m->layers[l].n_rows > 0 && !s->gathered[l])
                par_engine_layer_grads(e, l, B, c, c + 1, 0, m->layers[l].n_rows, 0);
        chained_params(s, s->chunk_g, PACK);
        const double t1 = MPI_Wtime();
        MPI_Send(s->chunk_g, (int)Nc, s->real_t, 0, (int)c, s->comm);
        s->comm_s += MPI_Wtime() - t1;
        s->bytes += (double)(Nc * par_dtype_size(e->dt));
    }
    t0 = MPI_Wtime();
    MPI_Waitall(s->n_reqs, s->reqs, MPI_STATUSES_IGNORE);
    s->comm_s += MPI_Wtime() - t0;
    return 0;   // rank 0's sum reaches every rank with the weights
}
// A step of this rank's engine on e->threads threads.
static par_status step_on(mpi_state *s, const par_batch *given, double *loss)
{
    par_engine *e = &s->e;
    // Shared window: the samples are assembled into its one copy of x. A
    // step writes it only after the last step's second node_sync, when every
    // rank has read it.
    par_batch in_window = *given;
    if (s->x_shared && given->fill) in_window.x = s->x_shared;
    const par_batch *batch = &in_window;
    const size_t B = batch->B, C = e->C, n_chunks = par_n_chunks(B, C), N = e->m->n_params;
    PAR_FAIL_IF(B == 0 || B > e->B_cap, PAR_ERR_CONFIG, "batch of %zu samples, expected 1..%zu", B,
                e->B_cap);
    size_t c0, c1;
    par_own_chunks(n_chunks, s->rank, s->size, &c0, &c1);
    par_engine_begin_step(e);
    size_t s0, s1;
    par_own_samples(B, C, s->rank, s->size, &s0, &s1);
    // Also a rank without chunks: batchnorm's batch sums pass through it.
    par_engine_forward_backward(e, batch, s0, s1, 1);

    double sum;
    if (e->mode == PAR_MODE_EXACT && !s->is_root_design && s->size == 1) {
        // One rank: the chain is just this rank's fold. In one parallel region,
        // not one per ring segment (each region wakes the threads again).
        par_engine_weight_grads(e, B, c0, c1, 0);
        sum = par_engine_loss_fold(e, B, c0, c1, 0, 0);
    } else if (e->mode == PAR_MODE_EXACT && !s->is_root_design) {
        sum = ring_step(s, batch, c0, c1);
    } else if (e->mode == PAR_MODE_EXACT) {
        sum = root_fold(s, batch, c0, c1, n_chunks);
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

    if (s->is_root_design) {
        // Rank 0 updates; everyone receives the new weights.
        if (s->rank == 0) par_engine_update(e);
        const double t1 = MPI_Wtime();
        MPI_Bcast(e->w, (int)N, s->real_t, 0, s->comm);
        if (s->rank != 0) par_engine_sync_wt(e);   // rank 0's panels follow its update
        MPI_Bcast(&sum, 1, MPI_DOUBLE, 0, s->comm);
        s->comm_s += MPI_Wtime() - t1;
        if (s->rank == 0) s->bytes += (double)(N * par_dtype_size(e->dt));
    } else if (e->mode != PAR_MODE_EXACT || s->size == 1) {
        par_engine_update(e);
    }
    *loss = par_engine_loss_mean(e, sum, B);
    s->stats.steps++;
    return PAR_OK;
}

// hybrid and root with threads: a step runs on one thread while that is
// measured faster (par_governor.h); each rank decides for itself, and any
// count gives the same bits.
static par_status step(void *state, const par_batch *batch, double *loss)
{
    mpi_state *s = state;
    par_governor *g = &s->gov;
    const int measures = par_governor_measures(g);
    s->e.threads = par_governor_threads(g);   // at most the count the engine was made for
    const double t0 = par_now(), c0 = measures ? par_thread_cpu() : 0;
    const par_status st = step_on(s, batch, loss);
    par_governor_step(g, s->e.threads, par_now() - t0, measures ? par_thread_cpu() - c0 : 0);
    s->e.threads = g->T;   // params, set_params and the rest: every thread
    return st;
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
    memcpy(out->phase, s->e.phase, sizeof out->phase);   // this rank's
    out->threads_adaptive = par_governor_measures(&s->gov);
    out->steps_one_thread = s->gov.T > 1 ? s->gov.one : 0;
    out->phase[PAR_PHASE_COMM] = s->comm_s;
    return PAR_OK;
}

// Every segment's current values of buf (e.g or a state array) from its
// owner to every rank. Collective.
static void gather_segs(mpi_state *s, void *buf)
{
    for (int k = 0; k < s->n_seg; k++) {
        void *w, *b;
        size_t nw, nb;
        seg_at(s, buf, k, &w, &nw, &b, &nb);
        MPI_Bcast(w, (int)nw, s->real_t, s->owner[k], s->comm);
        MPI_Bcast(b, (int)nb, s->real_t, s->owner[k], s->comm);
    }
}

// The batch gradient of the last step, complete on every rank (collective
// after an exact step of the sharded update).
static par_status grad_op(void *state, const void **g)
{
    mpi_state *s = state;
    if (s->g_partial) gather_segs(s, s->e.g);
    s->g_partial = 0;
    *g = s->e.g;
    return PAR_OK;
}

// New weights: with one shared copy, rank 0 writes them between two
// node_sync (every rank calls set_params with the same weights).
static par_status set_params_op(void *state, const void *w)
{
    mpi_state *s = state;
    if (!s->shared) return par_engine_set_params_op(state, w);
    par_ring_node_sync(s);
    if (s->rank == 0) par_engine_set_params_op(state, w);
    par_ring_node_sync(s);
    return PAR_OK;
}

static par_status get_optim_op(void *state, par_optim_state *out)
{
    mpi_state *s = state;
    for (int i = 0; i < 2 && s->os_partial; i++)
        if (s->e.os[i]) gather_segs(s, s->e.os[i]);
    s->os_partial = 0;
    return par_engine_get_optim_op(state, out);
}

static par_status set_optim_op(void *state, const par_optim_state *in)
{
    mpi_state *s = state;
    s->os_partial = 0;
    return par_engine_set_optim_op(state, in);
}

const par_trainer_ops par_trainer_mpi = {
    .name = "mpi",
    .summary = "one process per MPI rank, owners of rows + ordered chain (exact) or MPI_Allreduce (fast)",
    .caps = PAR_CAP_RANKS | PAR_CAP_FILLS_BATCH,
    .create = mpi_create,
    .step = step,
    .params = par_engine_params_op,
    .destroy = par_ring_destroy,
    .set_params = set_params_op,
    .grad = grad_op,
    .stats = stats,
    .get_optim = get_optim_op,
    .set_optim = set_optim_op,
    .set_step = par_engine_set_step_op,
};

const par_trainer_ops par_trainer_hybrid = {
    .name = "hybrid",
    .summary = "MPI ranks x OpenMP threads (--threads T per rank), MPI_THREAD_FUNNELED",
    .caps = PAR_CAP_RANKS | PAR_CAP_THREADS | PAR_CAP_FILLS_BATCH,
    .create = hybrid_create,
    .step = step,
    .params = par_engine_params_op,
    .destroy = par_ring_destroy,
    .set_params = set_params_op,
    .grad = grad_op,
    .stats = stats,
    .get_optim = get_optim_op,
    .set_optim = set_optim_op,
    .set_step = par_engine_set_step_op,
};

const par_trainer_ops par_trainer_root = {
    .name = "root",
    .summary = "classic reduce to rank 0, update there, broadcast weights (exact: chunk by chunk)",
    .caps = PAR_CAP_RANKS | PAR_CAP_THREADS | PAR_CAP_FILLS_BATCH,
    .create = root_create,
    .step = step,
    .params = par_engine_params_op,
    .destroy = par_ring_destroy,
    .set_params = set_params_op,
    .grad = grad_op,
    .stats = stats,
    .get_optim = get_optim_op,
    .set_optim = set_optim_op,
    .set_step = par_engine_set_step_op,
};

#endif
