// `cuda`: the contract on one CUDA GPU (docs/gpu.md), exact and fast mode, every layer
// kind (dense, conv2d, max-pool, batchnorm), every optimizer, f32 and f64.
// Each kernel's thread runs the bodies of src/cuda/cuda_bodies.h: one
// element's chain of the reference in its order (some kernels stage the
// operands in shared memory first); the chunk fold is a chain per chunk,
// folded left in chunk order. The training set is uploaded once (converted
// on the host as par_data_gather does) and each step gathers its batch on
// the device from the record indices; the loss is the one value read back
// per step. Parameters, gradient and optimizer state come back only when
// asked for. The engine (its first member) is the host mirror and gives the
// update's coefficients. Not yet: the faults inside the CPU's layer kernels
// (refused); --fault ulp and obeta run. Tests: tests/gpu/test_cuda.c
// (bitwise against the reference; on the device, and as test_cuda_emu on
// the host).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

#include "cuda_api.h"
#include "par_data.h"
#include "par_engine.h"

typedef struct cuda_state {
    par_engine e;                         // first: host mirror (w, g, state), coefficients
    size_t sz;
    void *w, *g, *os[2];                  // device: parameters, gradient, optimizer state
    void *st[PAR_MAX_LAYERS];             // device: a batchnorm layer's statistics
    void *part;                           // device: chunk parts of conv and batchnorm sums
    // Several MPI ranks (--ranks R): rank r computes chunks [c0, c1) of each
    // batch, samples [S0, S1); a conv or dense layer's gradient is the left
    // fold of every chunk's part, continued from rank to rank in rank order
    // (each rank's chunks follow the ones before), the last rank's result
    // broadcast; batchnorm's parts of every chunk go to every rank inside the pass.
    int rank, size;
    size_t c0, c1, S0, S1;
    void *rparts;                         // device: this rank's chunks' parts of every
                                          //   parameter and the loss, NP apart
    void *run;                            // device: the fold so far (NP values)
    void *h_run, *h_part;                 // host: the fold, batchnorm's parts on their way
#ifdef PARITY_HAVE_MPI
    MPI_Comm comm;
#endif
    void *a[PAR_MAX_LAYERS + 1];          // device: a[0] the batch, a[l + 1] layer l's output
    void *d[PAR_MAX_LAYERS];              // device: dL/d(pre-activation) of layer l
    void *loss, *lsum;                    // device: per-sample losses, their fold
    int32_t *labels, *idx;                // device: the batch's labels and record indices
    int32_t *h_idx;                       // page-locked: the indices on their way
    const par_images *im;                 // the resident training set: its source,
    const void *im_px;                    //   identified by address and pixels
    size_t im_n;
    void *data;                           // device: im's records in the dtype
    int32_t *lab_all;                     // device: im's labels
    int w_stale, g_stale, os_stale;       // the host mirror is behind the device
} cuda_state;

static void cuda_destroy(void *state)
{
    cuda_state *s = state;
    if (!s) return;
    void *dev[] = {s->w, s->g, s->os[0], s->os[1], s->loss, s->lsum, s->labels, s->idx,
                   s->data, s->lab_all, s->part, s->rparts, s->run};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) par_cuda_free(dev[i]);
    for (int l = 0; l < PAR_MAX_LAYERS; l++) {
        par_cuda_free(s->st[l]);
        par_cuda_free(s->a[l + 1]);
        par_cuda_free(s->d[l]);
    }
    par_cuda_free(s->a[0]);
    par_cuda_host_free(s->h_idx);
    par_cuda_host_free(s->h_run);
    par_cuda_host_free(s->h_part);
#ifdef PARITY_HAVE_MPI
    if (s->size > 1) MPI_Comm_free(&s->comm);
#endif
    par_engine_free(&s->e);
    free(s);
}

// What this trainer does not run yet: one line naming it.
static par_status check_supported(const par_run_cfg *cfg)
{
    const par_fault *f = cfg->fault ? cfg->fault : par_fault_process();
    PAR_FAIL_IF(f->kind != PAR_FAULT_NONE && f->kind != PAR_FAULT_GRAD_ULP &&
                    f->kind != PAR_FAULT_OPT_BETA,
                PAR_ERR_CONFIG, "--trainer cuda: --fault takes ulp and obeta (the others are "
                                "faults inside the CPU's layer kernels)");
    return PAR_OK;
}

// Uploads the parameters from the host mirror.
static par_status put_params(cuda_state *s)
{
    PAR_TRY(par_cuda_put(s->w, s->e.w, s->e.m->n_params * s->sz));
    s->w_stale = 0;
    return par_cuda_sync();
}

static par_status alloc_all(cuda_state *s)
{
    const par_model *m = s->e.m;
    const size_t N = m->n_params, B = s->e.B_cap, sz = s->sz;
    PAR_TRY(par_cuda_alloc(&s->w, N * sz));
    PAR_TRY(par_cuda_alloc(&s->g, N * sz));
    for (int i = 0; i < par_optim_n_state(s->e.optim.kind); i++)
        PAR_TRY(par_cuda_alloc(&s->os[i], N * sz));
    PAR_TRY(par_cuda_alloc(&s->a[0], B * m->n_inputs * sz));
    const size_t nk = (B + s->e.C - 1) / s->e.C, nk_conv = s->e.mode == PAR_MODE_FAST ? B : nk;
    size_t n_part = 0;   // the largest layer's chunk parts (one rank: conv and batchnorm)
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *ly = &m->layers[l];
        if (ly->kind == PAR_LAYER_BATCHNORM)
            PAR_TRY(par_cuda_alloc(&s->st[l], 8 * ly->c_out * sz));
        const size_t np = ly->kind == PAR_LAYER_BATCHNORM ? 2 * nk * ly->c_out
                          : ly->kind == PAR_LAYER_CONV2D && s->size == 1
                              ? nk_conv * ly->n_rows * (ly->row_len + 1)
                              : 0;
        n_part = np > n_part ? np : n_part;
        PAR_TRY(par_cuda_alloc(&s->a[l + 1], B * ly->n_out * sz));
        PAR_TRY(par_cuda_alloc(&s->d[l], B * ly->n_out * sz));
    }
    PAR_TRY(par_cuda_alloc(&s->part, n_part * sz));
    if (s->size > 1) {   // this rank's chunks (at most ceil(nk / R)) of every parameter, the loss
        const size_t NP = N + 1, nkr = (nk + (size_t)s->size - 1) / (size_t)s->size;
        PAR_TRY(par_cuda_alloc(&s->rparts, nkr * NP * sz));
        PAR_TRY(par_cuda_alloc(&s->run, NP * sz));
        PAR_TRY(par_cuda_host_alloc(&s->h_run, NP * sz));
        PAR_TRY(par_cuda_host_alloc(&s->h_part, (n_part > 1 ? n_part : 1) * sz));
    }
    PAR_TRY(par_cuda_alloc(&s->loss, B * sz));
    PAR_TRY(par_cuda_alloc(&s->lsum, sz));
    PAR_TRY(par_cuda_alloc((void **)&s->labels, B * sizeof(int32_t)));
    PAR_TRY(par_cuda_alloc((void **)&s->idx, B * sizeof(int32_t)));
    return par_cuda_host_alloc((void **)&s->h_idx, B * sizeof(int32_t));
}

static par_status cuda_create(const par_run_cfg *cfg, void **state)
{
    *state = NULL;
    PAR_TRY(check_supported(cfg));
    int rank = 0, size = 1;
#ifdef PARITY_HAVE_MPI
    int init = 0;
    MPI_Initialized(&init);
    if (init) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
#endif
    PAR_TRY(par_cuda_open(rank, NULL, 0));
    cuda_state *s = calloc(1, sizeof *s);
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "out of memory");
    par_run_cfg c = *cfg;
    c.threads = 1;
    par_status st = par_engine_init(&s->e, &c);
    if (st != PAR_OK) {
        free(s);
        return st;
    }
    s->rank = rank;
    s->size = size;
#ifdef PARITY_HAVE_MPI
    if (size > 1) MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
#endif
    s->sz = par_dtype_size(cfg->dtype);
    st = alloc_all(s);
    if (st == PAR_OK) st = put_params(s);
    if (st != PAR_OK) {
        cuda_destroy(s);
        return st;
    }
    *state = s;
    return PAR_OK;
}

// Makes im the resident training set: every record converted to the dtype
// by par_data_gather (the host's values), a block at a time, and uploaded.
static par_status make_resident(cuda_state *s, const par_images *im)
{
    if (s->im == im && s->im_px == (const void *)im->pixels && s->im_n == im->n) return PAR_OK;
    par_cuda_free(s->data);
    par_cuda_free(s->lab_all);
    s->data = s->lab_all = NULL;
    s->im = NULL;
    PAR_FAIL_IF(im->n > INT32_MAX, PAR_ERR_CONFIG, "--trainer cuda: %zu records, at most %d",
                im->n, INT32_MAX);
    const size_t nf = im->n_features, blk = 1024;
    PAR_TRY(par_cuda_alloc(&s->data, im->n * nf * s->sz));
    PAR_TRY(par_cuda_alloc((void **)&s->lab_all, im->n * sizeof(int32_t)));
    void *x = malloc(blk * nf * s->sz);
    int32_t *lab = malloc(im->n * sizeof *lab);
    size_t *idx = malloc(blk * sizeof *idx);
    par_status st = x && lab && idx ? PAR_OK : PAR_ERR_ALLOC;
    for (size_t r0 = 0; st == PAR_OK && r0 < im->n; r0 += blk) {
        const size_t nb = im->n - r0 < blk ? im->n - r0 : blk;
        for (size_t i = 0; i < nb; i++) idx[i] = r0 + i;
        par_data_gather(im, idx, nb, s->e.dt, x, lab + r0);
        st = par_cuda_put((char *)s->data + r0 * nf * s->sz, x, nb * nf * s->sz);
        if (st == PAR_OK) st = par_cuda_sync();   // x is reused
    }
    if (st == PAR_OK) st = par_cuda_put(s->lab_all, lab, im->n * sizeof *lab);
    if (st == PAR_OK) st = par_cuda_sync();
    free(x);
    free(lab);
    free(idx);
    PAR_FAIL_IF(st == PAR_ERR_ALLOC, st, "out of memory uploading %zu records", im->n);
    PAR_TRY(st);
    s->im = im;
    s->im_px = im->pixels;
    s->im_n = im->n;
    return PAR_OK;
}

// Samples [S0, S1) of the batch (this rank's) into a[0] and labels: gathered
// on the device from the resident set when it comes from one
// (par_data_batch_fill), else copied up.
static par_status put_batch(cuda_state *s, const par_batch *b)
{
    const size_t nf = s->e.m->n_inputs, S0 = s->S0, n = s->S1 - s->S0;
    if (b->fill == par_data_batch_fill) {
        const par_data_batch *src = b->fill_ctx;
        PAR_FAIL_IF(src->dt != s->e.dt || src->im->n_features != nf, PAR_ERR_CONFIG,
                    "--trainer cuda: batch of another dtype or width than the model's");
        PAR_TRY(make_resident(s, src->im));
        for (size_t i = 0; i < n; i++) s->h_idx[i] = (int32_t)src->idx[S0 + i];
        PAR_TRY(par_cuda_put(s->idx, s->h_idx, n * sizeof(int32_t)));
        par_cuda_gather(s->e.dt, s->a[0], s->labels, s->data, s->lab_all, s->idx, n, nf);
        return PAR_OK;
    }
    if (b->fill) par_batch_fill(b, S0, s->S1);
    PAR_TRY(par_cuda_put(s->a[0], (const char *)b->x + S0 * nf * s->sz, n * nf * s->sz));
    return par_cuda_put(s->labels, b->labels + S0, n * sizeof(int32_t));
}

// Batchnorm's parts of every chunk on every rank: this rank wrote its chunks'
// (at c0 n_per of the nk n_per values at part); the other ranks' come in.
static par_status share_parts(cuda_state *s, void *part, size_t n_per, size_t nk)
{
#ifdef PARITY_HAVE_MPI
    if (s->size == 1) return PAR_OK;
    const size_t sz = s->sz;
    int counts[64], displs[64];
    PAR_FAIL_IF(s->size > 64, PAR_ERR_CONFIG, "--trainer cuda: at most 64 ranks");
    for (int r = 0; r < s->size; r++) {
        size_t a, b;
        par_own_chunks(nk, r, s->size, &a, &b);
        counts[r] = (int)((b - a) * n_per);
        displs[r] = (int)(a * n_per);
    }
    char *h = s->h_part;
    PAR_TRY(par_cuda_get(h + s->c0 * n_per * sz, (char *)part + s->c0 * n_per * sz,
                         (s->c1 - s->c0) * n_per * sz));
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, counts, displs,
                   s->e.dt == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE, s->comm);
    return par_cuda_put(part, h, nk * n_per * sz);
#else
    (void)s, (void)part, (void)n_per, (void)nk;
    return PAR_OK;
#endif
}

// Layer l's forward pass on this rank's B samples of the batch's Bt:
// a[l + 1] = act(layer l of a[l]). Batchnorm's statistics take every chunk's
// sums (share_parts).
static par_status forward(cuda_state *s, int l, size_t B, size_t Bt)
{
    const par_model *m = s->e.m;
    const par_layer *ly = &m->layers[l];
    const par_dtype dt = s->e.dt;
    char *W = ly->w_view >= 0 ? (char *)s->w + m->views[ly->w_view].offset * s->sz : NULL;
    const char *b = ly->b_view >= 0 ? (char *)s->w + m->views[ly->b_view].offset * s->sz : NULL;
    if (ly->kind == PAR_LAYER_DENSE) {
        par_cuda_forward(dt, s->a[l + 1], s->a[l], W, b, ly->act, B, ly->n_in, ly->n_out);
    } else if (ly->kind == PAR_LAYER_CONV2D) {
        par_cuda_conv_forward(dt, s->a[l + 1], s->a[l], W, b, ly->act, ly, B);
    } else if (ly->kind == PAR_LAYER_MAXPOOL) {
        par_cuda_pool_forward(dt, s->a[l + 1], s->a[l], ly, B);
    } else {   // the sums' and the squares' parts of every chunk, then the statistics
        const size_t C = s->e.C, nk = (Bt + C - 1) / C, nc = ly->c_out, here = s->c0 * nc;
        char *ps = s->part, *pq = ps + nk * nc * s->sz;
        par_cuda_bn_sum_parts(dt, ps + here * s->sz, s->a[l], ly, B, C);
        PAR_TRY(share_parts(s, ps, nc, nk));
        par_cuda_bn_sq_parts(dt, pq + here * s->sz, ps, s->a[l], ly, B, Bt, C);
        PAR_TRY(share_parts(s, pq, nc, nk));
        par_cuda_bn_finish(dt, s->a[l + 1], s->a[l], W, s->st[l], ps, pq, ly->act, ly, B, Bt, C);
    }
    return PAR_OK;
}

// Layer l's backward pass from d[l] on this rank's B samples of Bt: above
// layer 0, d[l - 1] through the activation of layer l - 1; its gradient and
// update u (one rank), or its gradient's chunk parts into rparts (several:
// the fold and update follow the pass; batchnorm's gradient is complete here
// and updated at once). Each layer's input gradient reads its parameters
// before their update writes them. Fast mode (one rank) sums a dense layer's
// gradient in one chain over the batch, as the CPU trainers do, and a conv
// layer's in one part per sample folded in sample order (any order keeps fast
// mode's bound; B parts run B-wide on the device); batchnorm keeps the
// chunks, as everywhere.
static par_status backward(cuda_state *s, int l, size_t B, size_t Bt, const par_cuda_update *u)
{
    const par_model *m = s->e.m;
    const par_layer *ly = &m->layers[l];
    const par_dtype dt = s->e.dt;
    const size_t wo = ly->w_view >= 0 ? m->views[ly->w_view].offset : 0;
    const size_t bo = ly->b_view >= 0 ? m->views[ly->b_view].offset : 0, C = s->e.C;
    const size_t NP = m->n_params + 1, Cw = s->e.mode == PAR_MODE_FAST ? 1 : C;
    const int ranks = s->size > 1;
    void *dx = l > 0 ? s->d[l - 1] : NULL, *const *os = s->os;
    const char *W = (const char *)s->w + wo * s->sz;
    const par_act below = l > 0 ? m->layers[l - 1].act : PAR_ACT_NONE;
    if (ly->kind == PAR_LAYER_DENSE) {
        if (dx) par_cuda_backward_data(dt, dx, s->d[l], W, s->a[l], below, B, ly->n_in, ly->n_out);
        if (ranks)
            par_cuda_dense_grad_parts(dt, s->rparts, NP, wo, bo, s->d[l], s->a[l], B, C, ly->n_in,
                                      ly->n_out);
        else
            par_cuda_grad_update(dt, s->w, s->g, os[0], os[1], s->d[l], s->a[l], wo, bo, B,
                                 s->e.mode == PAR_MODE_FAST ? B : C, ly->n_in, ly->n_out, u);
    } else if (ly->kind == PAR_LAYER_CONV2D) {
        const size_t nw = ly->n_rows * ly->row_len;
        if (ranks)
            par_cuda_conv_grad_parts(dt, s->rparts, NP, wo, bo, s->d[l], s->a[l], ly, B, C);
        else
            par_cuda_conv_grad_parts(dt, s->part, nw + ly->n_rows, 0, nw, s->d[l], s->a[l], ly,
                                     B, Cw);
        if (dx) par_cuda_conv_backward_data(dt, dx, s->d[l], W, s->a[l], below, ly, B);
        if (!ranks)
            par_cuda_conv_update(dt, s->w, s->g, os[0], os[1], s->part, ly, wo, bo,
                                 (B + Cw - 1) / Cw, u);
    } else if (ly->kind == PAR_LAYER_MAXPOOL) {
        if (dx) par_cuda_pool_backward(dt, dx, s->d[l], s->a[l], below, ly, B);
    } else {
        const size_t nk = (Bt + C - 1) / C, nc = ly->c_out, here = s->c0 * nc * s->sz;
        char *pg = s->part, *pb = pg + nk * nc * s->sz;
        par_cuda_bn_grad_parts(dt, pg + here, pb + here, s->d[l], s->a[l], s->st[l], ly, B, C);
        PAR_TRY(share_parts(s, pg, nc, nk));
        PAR_TRY(share_parts(s, pb, nc, nk));
        par_cuda_bn_update(dt, s->w, s->g, os[0], os[1], s->st[l], pg, pb, ly, wo, bo, Bt, C, u);
        if (dx) par_cuda_bn_backward_data(dt, dx, s->d[l], s->a[l], s->st[l], below, ly, B, Bt);
    }
    return PAR_OK;
}

// Several ranks, after the backward pass: the fold of every chunk's parts of
// the conv and dense parameters and of the loss, rank by rank in order (rank
// r continues rank r - 1's), broadcast from the last rank; then every rank
// updates those parameters alike (u). *lsum: the loss's fold.
static par_status fold_and_update(cuda_state *s, const par_cuda_update *u, double *lsum)
{
#ifdef PARITY_HAVE_MPI
    const par_model *m = s->e.m;
    const par_dtype dt = s->e.dt;
    const size_t NP = m->n_params + 1, bytes = NP * s->sz;
    const MPI_Datatype real_t = dt == PAR_F32 ? MPI_FLOAT : MPI_DOUBLE;
    const int last = s->size - 1;
    if (s->rank > 0) {
        MPI_Recv(s->h_run, (int)NP, real_t, s->rank - 1, 0, s->comm, MPI_STATUS_IGNORE);
        PAR_TRY(par_cuda_put(s->run, s->h_run, bytes));
    }
    if (s->c1 > s->c0) par_cuda_fold(dt, s->run, s->rparts, s->c1 - s->c0, NP, NP, s->c0 > 0);
    PAR_TRY(par_cuda_get(s->h_run, s->run, bytes));
    if (s->rank < last) MPI_Send(s->h_run, (int)NP, real_t, s->rank + 1, 0, s->comm);
    MPI_Bcast(s->h_run, (int)NP, real_t, last, s->comm);
    if (s->rank < last) PAR_TRY(par_cuda_put(s->run, s->h_run, bytes));
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *ly = &m->layers[l];
        if (ly->kind != PAR_LAYER_DENSE && ly->kind != PAR_LAYER_CONV2D) continue;
        const size_t wo = m->views[ly->w_view].offset, bo = m->views[ly->b_view].offset;
        const size_t nw = ly->n_rows * ly->row_len;
        par_cuda_apply(dt, s->w, s->g, s->os[0], s->os[1], s->run, wo, wo + nw, u);
        par_cuda_apply(dt, s->w, s->g, s->os[0], s->os[1], s->run, bo, bo + ly->n_rows, u);
    }
    *lsum = dt == PAR_F32 ? (double)((const float *)s->h_run)[NP - 1]
                          : ((const double *)s->h_run)[NP - 1];
    return PAR_OK;
#else
    (void)s, (void)u, (void)lsum;
    return PAR_ERR_CONFIG;
#endif
}

// The label and flops of layer l's pass (fwd, or bwd: its input gradient,
// gradient and update) on B samples, for par_cuda_prof_end (PARITY_CUDA_PROFILE).
static double prof_label(const par_model *m, int l, const char *pass, size_t B, char *buf,
                         size_t cap)
{
    static const char *const kinds[] = {"dense", "conv", "maxpool", "batchnorm"};
    const par_layer *ly = &m->layers[l];
    snprintf(buf, cap, "%d %s %zux%zux%zu->%zux%zux%zu %s", l, kinds[ly->kind], ly->c_in,
             ly->h_in, ly->w_in, ly->c_out, ly->h_out, ly->w_out, pass);
    const double mac = ly->kind == PAR_LAYER_DENSE    ? (double)ly->n_in * (double)ly->n_out
                       : ly->kind == PAR_LAYER_CONV2D ? (double)ly->n_out * (double)ly->row_len
                                                      : 0;
    return 2 * mac * (double)B * (pass[0] == 'f' ? 1 : l > 0 ? 2 : 1);
}

static par_status cuda_step(void *state, const par_batch *batch, double *loss)
{
    cuda_state *s = state;
    par_engine *e = &s->e;
    const par_model *m = e->m;
    const par_dtype dt = e->dt;
    const size_t Bt = batch->B, C = e->C;
    const int L = m->n_layers;
    PAR_FAIL_IF(Bt == 0 || Bt > e->B_cap, PAR_ERR_CONFIG, "batch of %zu samples, expected 1..%zu",
                Bt, e->B_cap);
    par_own_chunks((Bt + C - 1) / C, s->rank, s->size, &s->c0, &s->c1);
    par_own_samples(Bt, C, s->rank, s->size, &s->S0, &s->S1);
    const size_t B = s->S1 - s->S0;
    par_engine_begin_step(e);
    PAR_TRY(put_batch(s, batch));
    char label[64];
    for (int l = 0; l < L; l++) {
        const int timed = par_cuda_prof_begin();
        PAR_TRY(forward(s, l, B, Bt));
        if (timed) {
            const double flops = prof_label(m, l, "fwd", B, label, sizeof label);
            par_cuda_prof_end(label, flops);
        }
    }
    par_cuda_softmax_xent(dt, s->d[L - 1], s->loss, s->a[L], s->labels, B, Bt, m->n_classes);
    par_update u;
    par_engine_update_begin(e, &u);
    const int ulp = par_fault_fires(e, PAR_FAULT_GRAD_ULP);
    const par_cuda_update cu = {u.sgd ? NULL : &u.k, e->lr, ulp ? e->fault.index : SIZE_MAX};
    for (int l = L - 1; l >= 0; l--) {
        const int timed = par_cuda_prof_begin();
        PAR_TRY(backward(s, l, B, Bt, &cu));
        if (timed) {
            const double flops = prof_label(m, l, "bwd", B, label, sizeof label);
            par_cuda_prof_end(label, flops);
        }
    }
    s->w_stale = s->g_stale = s->os_stale = 1;
    double sum;
    if (s->size > 1) {
        par_cuda_loss_parts(dt, s->rparts, m->n_params + 1, m->n_params, s->loss, B, C);
        PAR_TRY(fold_and_update(s, &cu, &sum));
    } else {
        par_cuda_loss_fold(dt, s->lsum, s->loss, Bt, C);
        union {
            float f;
            double d;
        } v;
        PAR_TRY(par_cuda_get(&v, s->lsum, s->sz));
        sum = dt == PAR_F32 ? (double)v.f : v.d;
    }
    *loss = par_engine_loss_mean(e, sum, Bt);
    return PAR_OK;
}

static par_status cuda_params(void *state, const void **w, size_t *n)
{
    cuda_state *s = state;
    if (s->w_stale) PAR_TRY(par_cuda_get(s->e.w, s->w, s->e.m->n_params * s->sz));
    s->w_stale = 0;
    return par_engine_params_op(state, w, n);
}

static par_status cuda_set_params(void *state, const void *w)
{
    cuda_state *s = state;
    memcpy(s->e.w, w, s->e.m->n_params * s->sz);
    return put_params(s);
}

static par_status cuda_grad(void *state, const void **g)
{
    cuda_state *s = state;
    if (s->g_stale) PAR_TRY(par_cuda_get(s->e.g, s->g, s->e.m->n_params * s->sz));
    s->g_stale = 0;
    return par_engine_grad_op(state, g);
}

static par_status cuda_get_optim(void *state, par_optim_state *out)
{
    cuda_state *s = state;
    for (int i = 0; s->os_stale && i < par_optim_n_state(s->e.optim.kind); i++)
        PAR_TRY(par_cuda_get(s->e.os[i], s->os[i], s->e.m->n_params * s->sz));
    s->os_stale = 0;
    return par_engine_get_optim_op(state, out);
}

static par_status cuda_set_optim(void *state, const par_optim_state *in)
{
    cuda_state *s = state;
    PAR_TRY(par_engine_set_optim_op(state, in));
    for (int i = 0; i < par_optim_n_state(s->e.optim.kind); i++)
        PAR_TRY(par_cuda_put(s->os[i], s->e.os[i], s->e.m->n_params * s->sz));
    s->os_stale = 0;
    return par_cuda_sync();
}

const par_trainer_ops par_trainer_cuda = {
    .name = "cuda",
    .summary = "CUDA GPUs, one per MPI rank with --ranks (docs/gpu.md)",
#ifdef PARITY_HAVE_MPI
    .caps = PAR_CAP_FILLS_BATCH | PAR_CAP_LAZY_PARAMS | PAR_CAP_RANKS_ASKED,
#else
    .caps = PAR_CAP_FILLS_BATCH | PAR_CAP_LAZY_PARAMS,
#endif
    .create = cuda_create,
    .step = cuda_step,
    .params = cuda_params,
    .destroy = cuda_destroy,
    .set_params = cuda_set_params,
    .grad = cuda_grad,
    .get_optim = cuda_get_optim,
    .set_optim = cuda_set_optim,
    .set_step = par_engine_set_step_op,
};
