// The MPI trainers' setup (train_mpi.h): the row segments and their owners,
// the batchnorm ring between the ranks, the weights moved into one MPI
// shared-memory window when every rank is on one host, creation and
// destruction. The step itself, and the design it follows, is train_mpi.c's.
// Tested by tests/mpi/test_mpi.c and tests/mpi/test_mpi_cnn.c on 1 to 4 ranks.
#ifdef PARITY_HAVE_MPI

#include <stdlib.h>
#include <string.h>

#include "train_mpi.h"

// Whether exact mpi/hybrid gathers layer l's activations (par_ring_gathers).
static int gathered_layer(const mpi_state *s, int l)
{
    return s->e.mode == PAR_MODE_EXACT && s->size > 1 && par_ring_gathers(s->e.m, l, s->e.B_cap);
}

// Appends segment g to the row pieces r[0..*n), joined to the last piece
// when it continues it.
static void append_rows(par_rows *r, int *n, const segment *g)
{
    par_rows *p = *n > 0 ? &r[*n - 1] : NULL;
    if (p && p->layer == g->layer && p->o1 == g->o0) p->o1 = g->o1;
    else r[(*n)++] = (par_rows){g->layer, g->o0, g->o1};
}

// The row of a layer (its first parameter at `start`, rows of len values)
// nearest parameter b, rounded to a multiple of 4 rows: 0 when b comes
// before the layer, n_rows when after it.
static size_t row_of(size_t b, size_t start, size_t len, size_t n_rows)
{
    if (b <= start) return 0;
    const size_t o = ((b - start) + len / 2) / len;
    return (o + 2) / 4 * 4 < n_rows ? (o + 2) / 4 * 4 : n_rows;
}

// Row segments of every layer, about SEG_PARAMS parameters each, in layer
// order: small enough that the pipeline fills fast (rank r waits about one
// segment's work for rank r-1), large enough that messages are not
// latency-bound. Rank r owns the rows from parameter r N / P on (to the
// nearest 4 rows; the last rank the segments it finishes last): segments are
// also cut there, so that the blocks balance to a few rows, not a segment.
enum { SEG_PARAMS = PAR_RING_SEG_PARAMS };
static par_status make_segments(mpi_state *s)
{
    const par_model *m = s->e.m;
    const size_t P = (size_t)s->size;
    size_t N = 0;
    for (int l = 0; l < m->n_layers; l++) N += m->layers[l].n_rows * (m->layers[l].row_len + 1);
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        size_t start = 0;   // the layer's first parameter
        size_t r = 0;       // the owner of the rows from o on
        for (int l = 0; l < m->n_layers; l++) {
            const par_layer *L = &m->layers[l];
            if (L->n_rows == 0) continue;   // no parameters (max-pool): no segment
            const size_t len = L->row_len + 1;
            size_t rows = (SEG_PARAMS / L->row_len + 3) / 4 * 4;
            if (rows == 0) rows = 4;
            for (size_t o = 0; o < L->n_rows;) {
                while (r + 1 < P && row_of((r + 1) * N / P, start, len, L->n_rows) <= o) r++;
                size_t e = o + rows < L->n_rows ? o + rows : L->n_rows;
                if (r + 1 < P) {
                    const size_t cut = row_of((r + 1) * N / P, start, len, L->n_rows);
                    if (cut < e) e = cut;
                }
                if (pass == 1) {
                    s->seg[n] = (segment){l, o, e};
                    s->owner[n] = (int)r;
                }
                n++;
                o = e;
            }
            start += L->n_rows * len;
        }
        if (pass == 0) {
            // Per segment at most 2 chain sends, 2 to its owner and 2 of weights; the loss to all.
            const int cap = 6 * n + s->size + 4;
            s->seg = malloc((size_t)n * sizeof *s->seg);
            s->owner = malloc((size_t)n * sizeof *s->owner);
            s->seg_req = malloc((size_t)n * sizeof *s->seg_req);
            s->reqs = malloc((size_t)cap * sizeof *s->reqs);
            s->counts = malloc((size_t)s->size * sizeof *s->counts);
            s->displs = malloc((size_t)s->size * sizeof *s->displs);
            PAR_FAIL_IF(!s->seg || !s->owner || !s->seg_req || !s->reqs || !s->counts || !s->displs,
                        PAR_ERR_ALLOC, "out of memory for %d segments", n);
            s->cap_reqs = cap;
        }
    }
    s->n_seg = n;
    for (int l = 0; l < m->n_layers; l++) s->gathered[l] = gathered_layer(s, l);
    for (int k = 0; k < n; k++) {
        const segment *g = &s->seg[k];
        if (s->owner[k] != s->rank) append_rows(s->others, &s->n_others, g);
        else if (s->gathered[g->layer]) append_rows(s->mine, &s->n_mine, g);
    }
    return PAR_OK;
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
    MPI_Recv(acc, (int)n, s->real_t, s->rank - 1, TAG_BN, s->comm, MPI_STATUS_IGNORE);
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


void par_ring_node_sync(mpi_state *s)
{
    const double t0 = MPI_Wtime();
    MPI_Win_sync(s->win);
    MPI_Barrier(s->comm);
    MPI_Win_sync(s->win);
    s->comm_s += MPI_Wtime() - t0;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Moves the engine's weights and transposed panels into one MPI shared-memory
// window, when every rank is on this host and the step can use it: exact
// mpi/hybrid on more than one rank, no batchnorm (its forward pass writes the
// running statistics, held with the weights, on every rank). The gathered
// layers' per-sample rows go there too (a gathered first layer's inputs, the
// later ones' inputs, every one's output gradients): each rank writes its own
// samples' rows, the weight gradient reads every rank's. Collective.
static par_status share_weights(mpi_state *s, int by_messages)
{
    par_engine *e = &s->e;
    const par_model *m = e->m;
    int ok = e->mode == PAR_MODE_EXACT && !s->is_root_design && s->size > 1 && !by_messages;
    for (int l = 0; l < m->n_layers; l++) ok = ok && m->layers[l].kind != PAR_LAYER_BATCHNORM;
    MPI_Comm node;
    MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, s->rank, MPI_INFO_NULL, &node);
    int node_size;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (!ok || node_size != s->size) return PAR_OK;
    // Layout: w, then every layer's panel, each from a multiple of 64 bytes.
    const size_t sz = par_dtype_size(e->dt);
    size_t off[PAR_MAX_LAYERS + 1], total = round_up(m->n_params * sz, 64);
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *L = &m->layers[l];
        off[l] = total;
        if (e->wt[l]) total += round_up(par_dense_wt_elems(L->row_len, L->n_rows) * sz, 64);
    }
    const size_t off_x = total;
    if (s->gathered[0]) total += round_up(e->B_cap * m->n_inputs * sz, 64);
    size_t off_a[PAR_MAX_LAYERS] = {0}, off_d[PAR_MAX_LAYERS] = {0};
    for (int l = 0; l < m->n_layers; l++) {
        if (!s->gathered[l]) continue;
        if (l > 0) off_a[l] = total, total += round_up(e->B_cap * m->layers[l].n_in * sz, 64);
        off_d[l] = total, total += round_up(e->B_cap * m->layers[l].n_out * sz, 64);
    }
    void *mine = NULL, *base = NULL;
    // An MPI that cannot give the window: the weights go by messages.
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    const int rc = MPI_Win_allocate_shared(s->rank == 0 ? (MPI_Aint)total : 0, 1, MPI_INFO_NULL,
                                           s->comm, &mine, &s->win);
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_ARE_FATAL);
    int all_ok = rc == MPI_SUCCESS;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, s->comm);
    if (!all_ok) {
        if (rc == MPI_SUCCESS) MPI_Win_free(&s->win);
        return PAR_OK;
    }
    MPI_Aint got;
    int unit;
    MPI_Win_shared_query(s->win, 0, &got, &unit, &base);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win);
    s->shared = 1;
    // Every rank holds the same initial weights: rank 0 copies its own.
    if (s->rank == 0) {
        memcpy(base, e->w, m->n_params * sz);
        for (int l = 0; l < m->n_layers; l++)
            if (e->wt[l])
                memcpy((char *)base + off[l], e->wt[l],
                       par_dense_wt_elems(m->layers[l].row_len, m->layers[l].n_rows) * sz);
    }
    free(e->w);
    e->w = base;
    if (s->gathered[0]) s->x_shared = (char *)base + off_x;
    for (int l = 0; l < m->n_layers; l++) {
        if (!s->gathered[l]) continue;
        if (l > 0) {
            free(e->a[l]);
            e->a[l] = (char *)base + off_a[l];
        }
        free(e->d[l]);
        e->d[l] = (char *)base + off_d[l];
    }
    for (int l = 0; l < m->n_layers; l++)
        if (e->wt[l]) {
            free(e->wt[l]);
            e->wt[l] = (char *)base + off[l];
        }
    par_ring_node_sync(s);
    return PAR_OK;
}


par_status par_ring_create(const par_run_cfg *cfg, void **state, int threads, int root_design)
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
    par_governor_init(&s->gov, threads, cfg->threads_policy);
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    s->real_t = cfg->dtype == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE;
    s->e.ring = (par_batch_ring){bn_recv, bn_send, s};
    st = make_segments(s);
    if (st == PAR_OK) st = share_weights(s, cfg->weights_by_messages);
    if (st == PAR_OK && root_design) {
        s->chunk_g = malloc((cfg->model->n_params + 1) * par_dtype_size(cfg->dtype));
        if (!s->chunk_g) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    if (st != PAR_OK) {   // the contract of create(): nothing left behind
        par_ring_destroy(s);
        s = NULL;
    }
    *state = s;
    return st;
}


void par_ring_destroy(void *state)
{
    mpi_state *s = state;
    if (!s) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (s->shared) {   // the window's memory is MPI's: not the engine's to free
        s->e.w = NULL;
        for (int l = 0; l < PAR_MAX_LAYERS; l++) {
            s->e.wt[l] = NULL;   // all in the window
            if (s->gathered[l]) {
                if (l > 0) s->e.a[l] = NULL;
                s->e.d[l] = NULL;
            }
        }
        if (!fin) {
            MPI_Win_unlock_all(s->win);
            MPI_Win_free(&s->win);
        }
    }
    if (!fin && s->comm != MPI_COMM_NULL && s->comm != 0) MPI_Comm_free(&s->comm);
    par_engine_free(&s->e);
    free(s->seg);
    free(s->owner);
    free(s->seg_req);
    free(s->reqs);
    free(s->counts);
    free(s->displs);
    free(s->chunk_g);
    free(s);
}

#endif
