// `parity bisect` lockstep: two configurations step by step on the same
// batches, then a replay of the first differing step with a per-tensor dump
// and MPFR's verdict; see bis_bisect.h. Not a checker against bounds (that is
// chk_check.h) nor a tolerance policy (vf_lockstep.h).
// Tests: tests/verify/test_bisect.c (single process), tests/cli/test_bisect.sh (MPI).
#include "bis_bisect.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bis_exact.h"
#include "par_conv.h"
#include "par_engine.h"
#include "par_kernels.h"
#include "par_run.h"
#include "ref_train.h"

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

#define NO_INDEX ((size_t)-1)

static const void *off(par_dtype dt, const void *p, size_t i)
{
    return (const char *)p + i * par_dtype_size(dt);
}

double bis_ulps(double a, double b, par_dtype dt)
{
    if (isnan(a) || isnan(b)) return a == b ? 0 : INFINITY;
    // Position in the ordered set of dt values: negative values mirrored below 0.
    int64_t pa, pb;
    if (dt == PAR_F32) {
        const float fa = (float)a, fb = (float)b;
        int32_t ia, ib;
        memcpy(&ia, &fa, 4);
        memcpy(&ib, &fb, 4);
        pa = ia < 0 ? -(int64_t)(ia & 0x7fffffff) : ia;
        pb = ib < 0 ? -(int64_t)(ib & 0x7fffffff) : ib;
    } else {
        int64_t ia, ib;
        memcpy(&ia, &a, 8);
        memcpy(&ib, &b, 8);
        pa = ia < 0 ? -(ia & INT64_MAX) : ia;
        pb = ib < 0 ? -(ib & INT64_MAX) : ib;
    }
    return pa > pb ? (double)(uint64_t)(pa - pb) : (double)(uint64_t)(pb - pa);
}

const char *bis_closer_name(bis_closer c)
{
    switch (c) {
    case BIS_CLOSER_A:
        return "a";
    case BIS_CLOSER_B:
        return "b";
    case BIS_CLOSER_TIE:
        return "tie";
    case BIS_CLOSER_NONE:
        break;
    }
    return "none";
}

// Whether a and b differ: in bits, or (tol > 0 or atol > 0) by more than
// both tol relative and atol absolute.
static int differ(double a, double b, double tol, double atol)
{
    if (memcmp(&a, &b, sizeof a) == 0) return 0;
    if (tol == 0 && atol == 0) return 1;
    const double d = fabs(a - b);
    return !(d <= tol * fmax(fabs(a), fabs(b))) && !(d <= atol);
}

// The absolute floor for n elements of pa and pb (o->atol; see
// bis_opts): the given one, or BIS_AUTO_ULPS ulps of the
// dtype at the largest finite |value| of either.
static double floor_of(par_dtype dt, const void *pa, const void *pb, size_t n, double tol,
                       double atol)
{
    if (atol >= 0) return atol;
    if (tol == 0) return 0;
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = fabs(par_get_real(dt, pa, i)), b = fabs(par_get_real(dt, pb, i));
        if (isfinite(a) && a > m) m = a;
        if (isfinite(b) && b > m) m = b;
    }
    const double ulp = dt == PAR_F32 ? (double)(nextafterf((float)m, INFINITY) - (float)m)
                                     : nextafter(m, INFINITY) - m;
    return BIS_AUTO_ULPS * ulp;
}

// ---- ranks ----------------------------------------------------------------------

static void world(int *rank, int *size)
{
    *rank = 0;
    *size = 1;
#ifdef PARITY_HAVE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) {
        MPI_Comm_rank(MPI_COMM_WORLD, rank);
        MPI_Comm_size(MPI_COMM_WORLD, size);
    }
#endif
}

// In place over all ranks: flags by MAX, indices by MIN.
static void combine(int *flags, int n_flags, size_t *idx, int n_idx, int size)
{
#ifdef PARITY_HAVE_MPI
    if (size > 1) {
        unsigned long long v[4];
        for (int i = 0; i < n_idx; i++)
            v[i] = idx[i];
        MPI_Allreduce(MPI_IN_PLACE, flags, n_flags, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, v, n_idx, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        for (int i = 0; i < n_idx; i++)
            idx[i] = (size_t)v[i];
    }
#else
    (void)flags, (void)n_flags, (void)idx, (void)n_idx, (void)size;
#endif
}

// ---- the sides --------------------------------------------------------------------

typedef enum side_kind { SIDE_OTHER = 0, SIDE_ENGINE, SIDE_REFERENCE } side_kind;

// Engine trainers keep a par_engine as the first member of their state.
static side_kind kind_of(const par_trainer_ops *ops)
{
    static const char *const engine[] = {"serial", "omp", "mpi", "hybrid", "root"};
    if (strcmp(ops->name, "reference") == 0) return SIDE_REFERENCE;
    for (size_t i = 0; i < sizeof engine / sizeof engine[0]; i++)
        if (strcmp(ops->name, engine[i]) == 0) return SIDE_ENGINE;
    return SIDE_OTHER;
}

static int is_mpi(const par_trainer_ops *ops)
{
    return (ops->caps & PAR_CAP_RANKS) != 0;
}

// root keeps the complete gradient on rank 0 only.
static int grad_complete(const par_trainer_ops *ops, int rank)
{
    return rank == 0 || strcmp(ops->name, "root") != 0;
}

// The tensors of one side after the replayed step (complete on rank 0).
typedef struct side_view {
    const void *a[PAR_MAX_LAYERS + 1];
    const void *d[PAR_MAX_LAYERS];
    const void *loss_s;
    const void *g, *w;
    double loss;
    size_t C;
    void *own[2 * PAR_MAX_LAYERS + 1]; // gathered copies, freed by view_free
    int n_own;
} side_view;

static void view_free(side_view *v)
{
    for (int i = 0; i < v->n_own; i++)
        free(v->own[i]);
    v->n_own = 0;
}

#ifdef PARITY_HAVE_MPI
// Samples [s0, s1) whose activations and deltas rank r of P computes in the
// MPI trainers (src/train/train_mpi.c: contiguous chunk ranges, balanced,
// lower ranks get the extra chunks).
static void rank_rows(size_t B, size_t C, int r, int P, size_t *s0, size_t *s1)
{
    const size_t n_chunks = par_n_chunks(B, C), base = n_chunks / (size_t)P;
    const size_t extra = n_chunks % (size_t)P, ur = (size_t)r;
    const size_t c0 = ur * base + (ur < extra ? ur : extra), c1 = c0 + base + (ur < extra);
    *s0 = c0 * C < B ? c0 * C : B;
    *s1 = c1 * C < B ? c1 * C : B;
}

// Every rank's rows of a (B, width) tensor into dst on rank 0.
static void gather_rows(void *dst, const void *local, size_t B, size_t C, size_t width, size_t sz,
                        int rank, int size, int *counts, int *displs)
{
    const size_t row = width * sz;
    size_t s0, s1;
    rank_rows(B, C, rank, size, &s0, &s1);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            size_t q0, q1;
            rank_rows(B, C, r, size, &q0, &q1);
            counts[r] = (int)((q1 - q0) * row);
            displs[r] = (int)(q0 * row);
        }
        memcpy((char *)dst + s0 * row, (const char *)local + s0 * row, (s1 - s0) * row);
        MPI_Gatherv(MPI_IN_PLACE, 0, MPI_BYTE, dst, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    } else {
        MPI_Gatherv((const char *)local + s0 * row, (int)((s1 - s0) * row), MPI_BYTE, NULL, NULL,
                    NULL, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}
#endif

// Fills v from side `ops` after a step on a batch x of B samples: internals
// (when *internals) and gradient, weights. Collective for MPI sides.
static par_status side_view_make(side_view *v, const par_trainer_ops *ops, void *state,
                                 const par_run_cfg *cfg, const void *x, size_t B, double loss,
                                 int internals, int rank, int size)
{
    memset(v, 0, sizeof *v);
    const par_model *m = cfg->model;
    const int L = m->n_layers;
    size_t n;
    v->loss = loss;
    v->C = cfg->chunk;
    PAR_TRY(ops->grad(state, &v->g));
    PAR_TRY(ops->params(state, &v->w, &n));
    if (!internals) return PAR_OK;
    v->a[0] = x;
    if (kind_of(ops) == SIDE_REFERENCE) {
        for (int l = 0; l < L; l++) {
            v->a[l + 1] = ref_act(state, l + 1);
            v->d[l] = ref_delta(state, l);
        }
        v->loss_s = ref_losses(state);
        return PAR_OK;
    }
    const par_engine *e = state;
    for (int l = 0; l < L; l++) {
        v->a[l + 1] = e->a[l + 1];
        v->d[l] = e->d[l];
    }
    v->loss_s = e->loss;
    if (!is_mpi(ops) || size == 1) return PAR_OK;
#ifdef PARITY_HAVE_MPI
    // The rank's own rows only: gather them to rank 0.
    const size_t sz = par_dtype_size(cfg->dtype);
    int ok = 1;
    if (rank == 0) {
        for (int l = 0; l < L && ok; l++) {
            const size_t w = m->layers[l].n_out;
            ok = (v->own[v->n_own++] = malloc(B * w * sz)) != NULL &&
                 (v->own[v->n_own++] = malloc(B * w * sz)) != NULL;
        }
        ok = ok && (v->own[v->n_own++] = malloc(B * sz)) != NULL;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int *counts = rank == 0 ? malloc(2 * (size_t)size * sizeof *counts) : NULL;
    if (ok && rank == 0 && !counts) ok = 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        view_free(v);
        free(counts);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory gathering the activations of %s", ops->name);
    }
    for (int l = 0; l < L; l++) {
        const size_t w = m->layers[l].n_out;
        void *ga = rank == 0 ? v->own[2 * l] : NULL, *gd = rank == 0 ? v->own[2 * l + 1] : NULL;
        gather_rows(ga, e->a[l + 1], B, cfg->chunk, w, sz, rank, size, counts,
                    counts ? counts + size : NULL);
        gather_rows(gd, e->d[l], B, cfg->chunk, w, sz, rank, size, counts,
                    counts ? counts + size : NULL);
        if (rank == 0) {
            v->a[l + 1] = ga;
            v->d[l] = gd;
        }
    }
    void *gl = rank == 0 ? v->own[2 * L] : NULL;
    gather_rows(gl, e->loss, B, cfg->chunk, 1, sz, rank, size, counts,
                counts ? counts + size : NULL);
    if (rank == 0) v->loss_s = gl;
    free(counts);
#else
    (void)B, (void)rank;
#endif
    return PAR_OK;
}

// ---- the replay's comparison (rank 0) --------------------------------------------

typedef struct cmp_ctx {
    bis_result *r;
    const par_model *m;
    par_dtype dt;
    double tol, atol;
    // the first difference, for the verdict
    bis_kind kind;
    int layer;
    size_t chunk;
} cmp_ctx;

static bis_tensor *add_row(cmp_ctx *c, const char *name, int layer)
{
    bis_result *r = c->r;
    if (r->n_tensors >= BIS_MAX_TENSORS) return NULL;
    bis_tensor *t = &r->tensors[r->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->layer = layer;
    t->first_chunk = -1;
    return t;
}

// Compares n elements of pa and pb into row t; the first difference of the
// whole replay is recorded in c->r with its identity (kind, layer, chunk).
// cols: elements per row of a 2-D tensor (0: 1-D); pbase: parameter offset
// of element 0 (NO_INDEX: not a parameter tensor).
static void compare(cmp_ctx *c, bis_tensor *t, const void *pa, const void *pb, size_t n,
                    bis_kind kind, int layer, long chunk, size_t cols, size_t pbase,
                    const char *first_name)
{
    if (!t) return;
    bis_result *r = c->r;
    const double atol = floor_of(c->dt, pa, pb, n, c->tol, c->atol);
    for (size_t i = 0; i < n; i++) {
        const double a = par_get_real(c->dt, pa, i), b = par_get_real(c->dt, pb, i);
        if (!differ(a, b, c->tol, atol)) continue;
        const double u = bis_ulps(a, b, c->dt);
        if (t->n_diff == 0) {
            t->first = i;
            t->first_chunk = chunk;
        }
        t->n_diff++;
        if (!(u <= t->max_ulps)) t->max_ulps = u;
        if (r->found) continue;
        r->found = 1;
        snprintf(r->tensor, sizeof r->tensor, "%s", first_name);
        r->layer = layer;
        r->index = i;
        r->row = cols ? (long)(i / cols) : (long)i;
        r->col = cols ? (long)(i % cols) : -1;
        r->param = pbase == NO_INDEX ? NO_INDEX : pbase + i;
        r->a = a;
        r->b = b;
        r->ulps = u;
        c->kind = kind;
        c->layer = layer;
        c->chunk = chunk < 0 ? 0 : (size_t)chunk;
    }
    t->n += n;
}

// Weight and bias gradient of rows [o0, o1) of layer l from a side's own
// activations and deltas, over chunks [c0, c1), as the run's kernels compute
// them. 0 when out of memory.
static int layer_grads(par_dtype dt, const par_layer *ly, const void *dz, const void *x, size_t B,
                       size_t C, size_t c0, size_t c1, size_t o0, size_t o1, void *gw, void *gb)
{
    if (ly->kind == PAR_LAYER_DENSE) {
        if (dt == PAR_F32)
            par_dense_backward_weights_f32(gw, gb, dz, x, B, C, c0, c1, o0, o1, ly->n_in,
                                           ly->n_out, 0);
        else
            par_dense_backward_weights_f64(gw, gb, dz, x, B, C, c0, c1, o0, o1, ly->n_in,
                                           ly->n_out, 0);
        return 1;
    }
    // conv2d: the kernel's chunk fold
    void *g = malloc(par_conv_wgrad_elems(ly, o1 - o0) * par_dtype_size(dt));
    if (g && dt == PAR_F32)
        par_conv_backward_weights_f32(gw, gb, dz, x, ly, B, C, c0, c1, o0, o1, 0, g);
    else if (g)
        par_conv_backward_weights_f64(gw, gb, dz, x, ly, B, C, c0, c1, o0, o1, 0, g);
    free(g);
    return g != NULL;
}

// Per-chunk gradients of layer l of both sides (recomputed from each side's
// own activations and deltas, one chunk range [k, k+1) at a time).
static par_status compare_chunks(cmp_ctx *c, const side_view *v, int l, size_t B)
{
    const par_model *m = c->m;
    const par_layer *ly = &m->layers[l];
    if (ly->kind != PAR_LAYER_DENSE && ly->kind != PAR_LAYER_CONV2D) return PAR_OK;
    const size_t sz = par_dtype_size(c->dt), nr = ly->n_rows, nw = nr * ly->row_len, C = v[0].C;
    void *buf = malloc(2 * (nw + nr) * sz);
    PAR_FAIL_IF(!buf, PAR_ERR_ALLOC, "out of memory for the chunk gradients of layer %d", l);
    void *gw[2] = {buf, (char *)buf + nw * sz};
    void *gb[2] = {(char *)buf + 2 * nw * sz, (char *)buf + (2 * nw + nr) * sz};
    char name[48], first[48];
    snprintf(name, sizeof name, "layer%d.weight.grad.chunk*", l);
    bis_tensor *tw = add_row(c, name, l);
    snprintf(name, sizeof name, "layer%d.bias.grad.chunk*", l);
    bis_tensor *tb = add_row(c, name, l);
    for (size_t k = 0; k < par_n_chunks(B, C); k++) {
        for (int s = 0; s < 2; s++)
            if (!layer_grads(c->dt, ly, v[s].d[l], v[s].a[l], B, C, k, k + 1, 0, nr, gw[s], gb[s])) {
                free(buf);
                PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory for the chunk gradients of layer %d",
                            l);
            }
        snprintf(first, sizeof first, "layer%d.weight.grad.chunk%d", l, (int)k);
        compare(c, tw, gw[0], gw[1], nw, BIS_WGRAD_CHUNK, l, (long)k, ly->row_len, NO_INDEX, first);
        snprintf(first, sizeof first, "layer%d.bias.grad.chunk%d", l, (int)k);
        compare(c, tb, gb[0], gb[1], nr, BIS_BGRAD_CHUNK, l, (long)k, 0, NO_INDEX, first);
    }
    free(buf);
    return PAR_OK;
}

// Whether side v's folded gradient element (layer l, weight or bias, row o,
// flat index idx in the view) is the in-order fold of its chunks (the
// contract), recomputed by the kernel over all chunks for row o.
static int fold_in_order(const cmp_ctx *c, const side_view *v, int l, int weight, size_t idx,
                         size_t B)
{
    const par_model *m = c->m;
    const par_layer *ly = &m->layers[l];
    if (ly->kind != PAR_LAYER_DENSE && ly->kind != PAR_LAYER_CONV2D) return -1;
    const size_t sz = par_dtype_size(c->dt), nw = ly->n_rows * ly->row_len;
    const size_t o = weight ? idx / ly->row_len : idx;
    char *buf = malloc((nw + ly->n_rows) * sz);
    if (!buf) return -1;
    void *gw = buf, *gb = buf + nw * sz;
    const size_t n_chunks = par_n_chunks(B, v->C);
    if (!layer_grads(c->dt, ly, v->d[l], v->a[l], B, v->C, 0, n_chunks, o, o + 1, gw, gb)) {
        free(buf);
        return -1;
    }
    const int vi = weight ? ly->w_view : ly->b_view;
    const double want = par_get_real(c->dt, weight ? (const void *)gw : (const void *)gb, idx);
    const double got = par_get_real(c->dt, v->g, m->views[vi].offset + idx);
    free(buf);
    return memcmp(&want, &got, sizeof want) == 0;
}

// All tensors of the replayed step in computation order (rank 0).
static par_status compare_step(cmp_ctx *c, const side_view *v, const bis_opts *o,
                               const void *w_prev, const int32_t *labels, size_t B)
{
    bis_result *r = c->r;
    const par_model *m = c->m;
    const par_dtype dt = c->dt;
    const int L = m->n_layers;
    char name[48];
    r->n_tensors = 0;
    r->found = 0;
    if (r->internals) {
        for (int l = 0; l < L; l++) {
            snprintf(name, sizeof name, "layer%d.out", l);
            compare(c, add_row(c, name, l), v[0].a[l + 1], v[1].a[l + 1], B * m->layers[l].n_out,
                    BIS_OUT, l, -1, m->layers[l].n_out, NO_INDEX, name);
        }
        compare(c, add_row(c, "loss.sample", -1), v[0].loss_s, v[1].loss_s, B, BIS_LOSS_SAMPLE, -1,
                -1, 0, NO_INDEX, "loss.sample");
        for (int l = L - 1; l >= 0; l--) {
            snprintf(name, sizeof name, "layer%d.dz", l);
            compare(c, add_row(c, name, l), v[0].d[l], v[1].d[l], B * m->layers[l].n_out, BIS_DZ, l,
                    -1, m->layers[l].n_out, NO_INDEX, name);
        }
        if (r->chunks)
            for (int l = L - 1; l >= 0; l--)
                PAR_TRY(compare_chunks(c, v, l, B));
    }
    const int chunk_diff = r->found;
    for (int l = L - 1; l >= 0; l--) {
        const par_layer *ly = &m->layers[l];
        if (!ly->n_rows) continue;   // max-pool: no parameters
        const par_view *vw = &m->views[ly->w_view], *vb = &m->views[ly->b_view];
        snprintf(name, sizeof name, "layer%d.weight.grad", l);
        compare(c, add_row(c, name, l), off(dt, v[0].g, vw->offset), off(dt, v[1].g, vw->offset),
                vw->count, BIS_WGRAD, l, -1, ly->row_len, vw->offset, name);
        snprintf(name, sizeof name, "layer%d.bias.grad", l);
        compare(c, add_row(c, name, l), off(dt, v[0].g, vb->offset), off(dt, v[1].g, vb->offset),
                vb->count, BIS_BGRAD, l, -1, 0, vb->offset, name);
    }
    // The batch losses are doubles holding dtype values: compared in the dtype
    // when they are representable in it, else in f64.
    const par_dtype ldt = dt == PAR_F32 && (double)(float)v[0].loss == v[0].loss &&
                                  (double)(float)v[1].loss == v[1].loss
                              ? PAR_F32
                              : PAR_F64;
    float lf[2] = {(float)v[0].loss, (float)v[1].loss};
    double ld[2] = {v[0].loss, v[1].loss};
    c->dt = ldt;
    compare(c, add_row(c, "loss", -1), ldt == PAR_F32 ? (void *)&lf[0] : (void *)&ld[0],
            ldt == PAR_F32 ? (void *)&lf[1] : (void *)&ld[1], 1, BIS_LOSS, -1, -1, 0, NO_INDEX,
            "loss");
    c->dt = dt;
    for (int l = 0; l < L; l++) {
        const par_layer *ly = &m->layers[l];
        if (!ly->n_rows) continue;
        const par_view *vw = &m->views[ly->w_view], *vb = &m->views[ly->b_view];
        snprintf(name, sizeof name, "layer%d.weight.new", l);
        compare(c, add_row(c, name, l), off(dt, v[0].w, vw->offset), off(dt, v[1].w, vw->offset),
                vw->count, BIS_WNEW, l, -1, ly->row_len, vw->offset, name);
        snprintf(name, sizeof name, "layer%d.bias.new", l);
        compare(c, add_row(c, name, l), off(dt, v[0].w, vb->offset), off(dt, v[1].w, vb->offset),
                vb->count, BIS_BNEW, l, -1, 0, vb->offset, name);
    }
    if (!r->found) return PAR_OK;

    // The exact value from the inputs of the first differing tensor: side a's
    // (equal to b's, since every tensor before it agreed). lr: side a's.
    bis_step_view sv = {
        .m = m,
        .dt = dt,
        .B = B,
        .C = v[0].C,
        .lr = par_round_real(dt, o->side[0].cfg.lr),
        .labels = labels,
        .w = w_prev,
        .loss_s = v[0].loss_s,
        .g = v[0].g,
    };
    memcpy(sv.a, v[0].a, sizeof sv.a);
    memcpy(sv.d, v[0].d, sizeof sv.d);
    // The exact update is SGD's (w - lr g): with another optimizer a weight
    // row gets no exact verdict (its step depends on the optimizer state).
    const par_optim *opt = o->side[0].cfg.optim;
    const int upd = c->kind == BIS_WNEW || c->kind == BIS_BNEW;
    const int sgd = !opt || opt->kind == PAR_OPTIM_SGD;
    if ((r->internals && !upd) || (upd && sgd)) {
        bis_exact_verdict(&sv, c->kind, c->layer, c->chunk, r->index, r->a, r->b, o->prec,
                          &r->exact, &r->closer);
        r->has_exact = 1;
    }
    // Folded gradient differs while every chunk agreed: the fold differs.
    if ((c->kind == BIS_WGRAD || c->kind == BIS_BGRAD) && r->chunks && !chunk_diff) {
        r->chunk_fold_differs = 1;
        for (int s = 0; s < 2; s++)
            r->fold_in_order[s] =
                fold_in_order(c, &v[s], c->layer, c->kind == BIS_WGRAD, r->index, B);
    }
    return PAR_OK;
}

// ---- lockstep ---------------------------------------------------------------------

typedef struct run_buf {
    void *state[2];
    void *x, *w_prev;
    par_optim_state s_prev;      // side a's optimizer state before the step (n = 0: SGD)
    int32_t *labels;
    size_t *order;
} run_buf;

static void run_free(run_buf *b, const bis_opts *o)
{
    for (int s = 0; s < 2; s++)
        if (b->state[s]) o->side[s].ops->destroy(b->state[s]);
    free(b->x);
    free(b->w_prev);
    free(b->s_prev.arr[0]);
    free(b->s_prev.arr[1]);
    free(b->labels);
    free(b->order);
}

// The first parameter (flat) where pa and pb differ, each tensor of the
// model (layer<i>.weight, .bias) under its own floor; NO_INDEX if none.
static size_t first_param_diff(const par_model *m, par_dtype dt, const void *pa, const void *pb,
                               double tol, double atol)
{
    size_t first = NO_INDEX, covered = 0;
    for (int v = 0; v < m->n_views; v++) {
        const par_view *w = &m->views[v];
        const double fl = floor_of(dt, off(dt, pa, w->offset), off(dt, pb, w->offset), w->count,
                                   tol, atol);
        covered += w->count;
        for (size_t i = w->offset; i < w->offset + w->count && i < first; i++)
            if (differ(par_get_real(dt, pa, i), par_get_real(dt, pb, i), tol, fl)) first = i;
    }
    if (covered != m->n_params) {   // not one view per tensor: one floor for the whole buffer
        const double fl = floor_of(dt, pa, pb, m->n_params, tol, atol);
        first = NO_INDEX;
        for (size_t i = 0; i < m->n_params && first == NO_INDEX; i++)
            if (differ(par_get_real(dt, pa, i), par_get_real(dt, pb, i), tol, fl)) first = i;
    }
    return first;
}

// Compares one step of both sides on this rank and over all ranks.
static par_status compare_lockstep(bis_result *r, const bis_opts *o, run_buf *b,
                                   double la, double lb, int rank, int size)
{
    const par_model *m = o->side[0].cfg.model;
    const par_dtype dt = o->side[0].cfg.dtype;
    const double la_d = la, lb_d = lb;
    int flags[3] = {differ(la, lb, o->tol, floor_of(PAR_F64, &la_d, &lb_d, 1, o->tol, o->atol)), 0, 0};
    size_t first[2] = {NO_INDEX, NO_INDEX};
    const void *ga, *gb, *wa, *wb;
    size_t n;
    if (grad_complete(o->side[0].ops, rank) && grad_complete(o->side[1].ops, rank)) {
        PAR_TRY(o->side[0].ops->grad(b->state[0], &ga));
        PAR_TRY(o->side[1].ops->grad(b->state[1], &gb));
        first[0] = first_param_diff(m, dt, ga, gb, o->tol, o->atol);
    }
    PAR_TRY(o->side[0].ops->params(b->state[0], &wa, &n));
    PAR_TRY(o->side[1].ops->params(b->state[1], &wb, &n));
    first[1] = first_param_diff(m, dt, wa, wb, o->tol, o->atol);
    flags[1] = first[0] != NO_INDEX;
    flags[2] = first[1] != NO_INDEX;
    combine(flags, 3, first, 2, size);
    r->loss_differs = flags[0];
    r->grad_differs = flags[1];
    r->weights_differs = flags[2];
    r->grad_first = first[0];
    r->weights_first = first[1];
    r->loss_a = la;
    r->loss_b = lb;
    r->diverged = flags[0] || flags[1] || flags[2];
    return PAR_OK;
}

// Side a's optimizer state before a step into b->s_prev, the same on every
// rank (root keeps it current on rank 0 only: rank 0's is sent to all).
static par_status save_optim(run_buf *b, const bis_opts *o, size_t N, int size)
{
    if (b->s_prev.n == 0) return PAR_OK;
    const size_t bytes = N * par_dtype_size(o->side[0].cfg.dtype);
    par_optim_state now;
    PAR_TRY(o->side[0].ops->get_optim(b->state[0], &now));
    PAR_FAIL_IF(now.n != b->s_prev.n, PAR_ERR_CONFIG, "bisect: optimizer state of %d arrays, "
                "expected %d", now.n, b->s_prev.n);
    for (int i = 0; i < now.n; i++) memcpy(b->s_prev.arr[i], now.arr[i], bytes);
    b->s_prev.t = now.t;
#ifdef PARITY_HAVE_MPI
    if (size > 1) {
        for (int i = 0; i < now.n; i++)
            for (size_t k = 0; k < bytes; k += 1u << 30) {
                const size_t part = bytes - k < (1u << 30) ? bytes - k : 1u << 30;
                MPI_Bcast((char *)b->s_prev.arr[i] + k, (int)part, MPI_BYTE, 0, MPI_COMM_WORLD);
            }
        MPI_Bcast(&b->s_prev.t, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    }
#else
    (void)size;
#endif
    return PAR_OK;
}

// Replays step r->step from w_prev (and s_prev) on both sides and compares
// it (rank 0).
static par_status replay(bis_result *r, const bis_opts *o, run_buf *b,
                         const par_batch *batch, int rank, int size)
{
    double loss[2];
    for (int s = 0; s < 2; s++) {
        const par_trainer_ops *ops = o->side[s].ops;
        PAR_TRY(ops->set_params(b->state[s], b->w_prev));
        if (b->s_prev.n) PAR_TRY(ops->set_optim(b->state[s], &b->s_prev));
        if (ops->set_step) PAR_TRY(ops->set_step(b->state[s], r->step - 1));   // --fault
        PAR_TRY(ops->step(b->state[s], batch, &loss[s]));
    }
    r->internals = kind_of(o->side[0].ops) != SIDE_OTHER && kind_of(o->side[1].ops) != SIDE_OTHER;
    r->chunks = r->internals && o->side[0].cfg.chunk == o->side[1].cfg.chunk;
    side_view v[2];
    memset(v, 0, sizeof v);
    par_status st = PAR_OK;
    for (int s = 0; s < 2 && st == PAR_OK; s++)
        st = side_view_make(&v[s], o->side[s].ops, b->state[s], &o->side[s].cfg, batch->x, batch->B,
                            loss[s], r->internals, rank, size);
    if (st == PAR_OK && rank == 0) {
        cmp_ctx c = {.r = r, .m = o->side[0].cfg.model, .dt = o->side[0].cfg.dtype, .tol = o->tol,
                     .atol = o->atol};
        st = compare_step(&c, v, o, b->w_prev, batch->labels, batch->B);
        if (st == PAR_OK && !r->found && (o->tol > 0 || o->atol > 0)) {
            // Nothing beyond --tol/--atol from the same weights: name the first bit difference.
            r->within_tol = 1;
            c.tol = 0;
            c.atol = 0;
            st = compare_step(&c, v, o, b->w_prev, batch->labels, batch->B);
        }
        r->replayed = st == PAR_OK;
    }
    for (int s = 0; s < 2; s++)
        view_free(&v[s]);
    return st;
}

par_status bis_lockstep(bis_result *r, const bis_opts *o)
{
    memset(r, 0, sizeof *r);
    r->layer = -1;
    r->row = r->col = -1;
    r->param = NO_INDEX;
    r->closer = BIS_CLOSER_NONE;
    r->fold_in_order[0] = r->fold_in_order[1] = -1;
    const par_run_cfg *ca = &o->side[0].cfg, *cb = &o->side[1].cfg;
    const par_model *m = ca->model;
    const par_dataset *ds = o->ds;
    PAR_FAIL_IF(!o->side[0].ops || !o->side[1].ops, PAR_ERR_CONFIG,
                "bisect: a side has no trainer");
    const par_optim sgd = par_optim_default(PAR_OPTIM_SGD);
    const par_optim *oa = ca->optim ? ca->optim : &sgd, *ob = cb->optim ? cb->optim : &sgd;
    PAR_FAIL_IF(cb->model->n_params != m->n_params || cb->dtype != ca->dtype ||
                    cb->batch != ca->batch || oa->kind != ob->kind ||
                    oa->momentum != ob->momentum || oa->beta1 != ob->beta1 ||
                    oa->beta2 != ob->beta2 || oa->eps != ob->eps,
                PAR_ERR_CONFIG, "bisect: both sides need the same model, dtype, batch and optimizer");
    PAR_FAIL_IF(ds->train.n_features != m->n_inputs, PAR_ERR_CONFIG,
                "--model %s takes %zu inputs but dataset %s has %zu features per sample", m->spec,
                m->n_inputs, ds->name, ds->train.n_features);
    PAR_FAIL_IF(ds->n_classes != m->n_classes, PAR_ERR_CONFIG,
                "--model %s has %zu outputs but dataset %s has %zu classes", m->spec, m->n_classes,
                ds->name, ds->n_classes);
    PAR_FAIL_IF(ds->n_train == 0, PAR_ERR_CONFIG, "dataset %s has no training records", ds->name);
    PAR_FAIL_IF(o->epochs < 1, PAR_ERR_CONFIG, "--epochs must be >= 1");
    PAR_FAIL_IF(o->prec < 64, PAR_ERR_CONFIG, "--prec %d: expected at least 64 bits", o->prec);
    PAR_FAIL_IF(!(o->tol >= 0), PAR_ERR_CONFIG, "--tol %g: expected >= 0", o->tol);
    int rank, size;
    world(&rank, &size);
    const size_t Bmax = ca->batch, N = m->n_params, sz = par_dtype_size(ca->dtype);

    run_buf b;
    memset(&b, 0, sizeof b);
    par_status st = o->side[0].ops->create(ca, &b.state[0]);
    if (st == PAR_OK) st = o->side[1].ops->create(cb, &b.state[1]);
    b.x = malloc(Bmax * m->n_inputs * sz);
    b.w_prev = malloc(N * sz);
    b.labels = malloc(Bmax * sizeof *b.labels);
    if (st == PAR_OK && (!b.x || !b.w_prev || !b.labels))
        st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory for a batch of %zu",
                           Bmax);
    const par_optim_kind okind = ca->optim ? ca->optim->kind : PAR_OPTIM_SGD;
    b.s_prev.n = par_optim_n_state(okind);
    for (int i = 0; st == PAR_OK && i < b.s_prev.n; i++) {
        b.s_prev.arr[i] = malloc(N * sz);
        if (!b.s_prev.arr[i]) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
    }
    for (int s = 0; st == PAR_OK && b.s_prev.n && s < 2; s++)
        if (!o->side[s].ops->get_optim || !o->side[s].ops->set_optim)
            st = par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__, "bisect: trainer %s does not "
                               "expose its optimizer state", o->side[s].ops->name);
    long step = 0;
    int done = 0;
    for (int epoch = 0; st == PAR_OK && !done && epoch < o->epochs; epoch++) {
        free(b.order);
        b.order = NULL;
        st = par_epoch_order(&b.order, ds->n_train, o->seed, epoch);
        for (size_t pos = 0; st == PAR_OK && pos < ds->n_train; pos += Bmax) {
            const size_t B = ds->n_train - pos < Bmax ? ds->n_train - pos : Bmax;
            par_data_gather(&ds->train, b.order + pos, B, ca->dtype, b.x, b.labels);
            const par_batch batch = {.x = b.x, .labels = b.labels, .B = B};
            const void *w;
            size_t n;
            double la = 0, lb = 0;
            st = o->side[0].ops->params(b.state[0], &w, &n);
            if (st != PAR_OK) break;
            memcpy(b.w_prev, w, N * sz);
            st = save_optim(&b, o, N, size);
            if (st == PAR_OK) st = o->side[0].ops->step(b.state[0], &batch, &la);
            if (st == PAR_OK) st = o->side[1].ops->step(b.state[1], &batch, &lb);
            step++;
            if (st == PAR_OK) st = compare_lockstep(r, o, &b, la, lb, rank, size);
            if (st == PAR_OK && r->diverged) {
                r->step = step;
                r->epoch = epoch;
                r->batch = (long)(pos / Bmax);
                r->B = B;
                st = replay(r, o, &b, &batch, rank, size);
                done = 1;
                break;
            }
            if (o->max_steps > 0 && step >= o->max_steps) {
                done = 1;
                break;
            }
        }
    }
    r->steps = step;
    run_free(&b, o);
    return st;
}
