// Lockstep of a fast-mode trainer against the reference under the derived
// bound; see vf_lockstep.h. Not a trajectory comparison: the trainer is
// re-synced to the reference's weights (and optimizer state) before every step.
// Tests: tests/unit/test_trainers.c (omp), tests/mpi/test_mpi.c (mpi, hybrid, root),
// tests/unit/test_optim.c (momentum, nesterov, adam).
#include "vf_lockstep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par_engine.h"
#include "par_kernels.h"
#include "par_run.h"
#include "ref_train.h"

static double gamma_n(double n, double u) { return n * u / (1 - n * u); }

double vf_lockstep_tol(double lr, double S, double w, size_t B, double u)
{
    const double gB = gamma_n((double)B, u);
    return lr * S * (2 * gB + 4 * u * (1 + gB) * (1 + u)) + 2 * u * fabs(w);
}

size_t vf_terms_per_sample(const par_model *m, size_t i)
{
    for (int l = 0; l < m->n_layers; l++) {
        const par_layer *ly = &m->layers[l];
        if (ly->n_rows == 0) continue;
        const par_view *w = &m->views[ly->w_view], *b = &m->views[ly->b_view];
        if ((i >= w->offset && i < w->offset + w->count) ||
            (i >= b->offset && i < b->offset + b->count))
            return ly->n_out / ly->n_rows;   // conv2d: output positions; dense: 1
    }
    return 1;
}

// Element i is a batchnorm running statistic (running_mean, running_var,
// num_batches_tracked): set by the forward pass, not by the optimizer.
static int is_running_stat(const par_model *m, size_t i)
{
    for (int l = 0; l < m->n_layers; l++) {
        const int sv = m->layers[l].stat_view;
        if (sv < 0) continue;
        const par_view *last = &m->views[sv + 2];   // num_batches_tracked
        if (i >= m->views[sv].offset && i < last->offset + last->count) return 1;
    }
    return 0;
}

// ---- momentum, nesterov, adam (derivation in vf_lockstep.h) ----
//
// One element: the reference's w, state m, v before the step, its gradient g
// and Eg >= |g_fast - g|. Fills ref[] with the reference's new w, m, v
// (recomputed: one dtype operation = the double operation rounded once,
// exact for f32 as double has >= 2p + 2 bits, the operation itself for f64;
// the build has -ffp-contract=off) and tol[] with the bounds on
// |fast - reference| of each. D(x) names the bound on the difference of x.
typedef struct opt_ctx {
    par_dtype dt;
    double u, tiny;
    par_optim_coef k;   // the dtype coefficients both sides use
} opt_ctx;

static double rd(const opt_ctx *c, double x) { return par_round_real(c->dt, x); }

// D of a rounded op's result x (the reference's), its exact results differing
// by at most delta: |fl(r_f) - fl(r_e)| <= delta + (u |r_f| + eta) + (u |r_e|
// + eta), |r_f| <= |r_e| + delta, and |r_e| <= (|x| + eta)/(1 - u) <= R.
static double prop(const opt_ctx *c, double delta, double x, double eta)
{
    const double R = (fabs(x) + eta) * (1 + 2 * c->u);
    return delta * (1 + c->u) + 2 * c->u * R + 2 * eta;
}

static void optim_tol(const opt_ctx *c, double g, double Eg, double w, double m, double v,
                      double ref[3], double tol[3])
{
    const par_optim_coef *k = &c->k;
    const double u = c->u, ty = c->tiny, ag = fabs(g);
    double mn, Dm, vn = 0, Dv = 0, wn, Dw;
    if (k->kind != PAR_UPDATE_ADAM) {
        mn = rd(c, rd(c, k->mu * m) + g);                 // m = mu*m (shared); m = m + g
        Dm = prop(c, Eg, mn, 0);
        double t, Dt;
        if (k->kind == PAR_UPDATE_MOMENTUM) {
            t = rd(c, k->lr * mn);                        // t = lr*m
            Dt = prop(c, k->lr * Dm, t, ty);
        } else {
            const double t1 = rd(c, k->mu * mn);          // t = mu*m
            const double D1 = prop(c, k->mu * Dm, t1, ty);
            const double t2 = rd(c, g + t1);              // t = g + t
            const double D2 = prop(c, Eg + D1, t2, 0);
            t = rd(c, k->lr * t2);                        // t = lr*t
            Dt = prop(c, k->lr * D2, t, ty);
        }
        wn = rd(c, w - t);                                // w = w - t
        Dw = prop(c, Dt, wn, 0);
    } else {
        const double a = rd(c, k->c1 * g);                // m = b1*m (shared); t = c1*g
        const double Da = prop(c, k->c1 * Eg, a, ty);
        mn = rd(c, rd(c, k->b1 * m) + a);                 // m = m + t
        Dm = prop(c, Da, mn, 0);
        const double e = rd(c, k->c2 * g);                // v = b2*v (shared); t = c2*g
        const double De = prop(c, k->c2 * Eg, e, ty);
        const double f = rd(c, e * g);                    // t = t*g: both factors differ
        const double Df = prop(c, De * (ag + Eg) + fabs(e) * Eg, f, ty);
        vn = rd(c, rd(c, k->b2 * v) + f);                 // v = v + t
        Dv = prop(c, Df, vn, 0);
        const double mh = rd(c, mn / k->bc1), vh = rd(c, vn / k->bc2);
        const double Dmh = prop(c, Dm / k->bc1, mh, ty), Dvh = prop(c, Dv / k->bc2, vh, ty);
        const double s = rd(c, sqrt(vh));                 // d = sqrt(vh): |sqrt a - sqrt b|
        const double ds = vh > 0 ? fmin(Dvh / sqrt(vh), sqrt(Dvh)) : sqrt(Dvh);   // = |a-b| /
        const double Ds = prop(c, ds, s, 0);              //   (sqrt a + sqrt b)
        const double d = rd(c, s + k->eps);               // d = d + eps
        const double Dd = prop(c, Ds, d, 0);
        const double t = rd(c, k->lr * mh);              // t = lr*mh
        const double Dt = prop(c, k->lr * Dmh, t, ty);
        const double q = rd(c, t / d);                    // t = t/d: t_f/d_f - t/d =
        const double aq = (fabs(t / d) + ty) * (1 + 2 * u);   // ((t_f - t) - (t/d)(d_f - d)) / d_f,
        const double den = fmax(d - Dd, k->eps);          //   d_f >= max(d - Dd, eps)
        const double Dq = den > 0 ? prop(c, (Dt + aq * Dd) / den, q, ty) : INFINITY;
        wn = rd(c, w - q);                                // w = w - t
        Dw = prop(c, Dq, wn, 0);
    }
    const double slack = 1 + 0x1p-40;   // this evaluation's own roundings
    ref[0] = wn, ref[1] = mn, ref[2] = vn;
    tol[0] = Dw * slack, tol[1] = Dm * slack, tol[2] = Dv * slack;
}

typedef struct lockstep_buf {
    ref_trainer *ref;
    void *state, *x, *w0;
    void *s0;                  // the reference's optimizer state entering the step
    long t0;                   // and its update count (optimizers with state only)
    int n_state;
    par_optim optim;
    int32_t *labels;
    size_t *order;
} lockstep_buf;

static void buf_free(lockstep_buf *b, const par_trainer_ops *ops)
{
    if (b->state) ops->destroy(b->state);
    ref_destroy(b->ref);
    free(b->x);
    free(b->w0);
    free(b->s0);
    free(b->labels);
    free(b->order);
}

// One step of both sides from the reference's weights; updates r. With
// comm, ranks other than 0 only receive the weights and step the trainer.
static par_status one_step(vf_lockstep_result *r, lockstep_buf *b, const par_trainer_ops *ops,
                           const par_run_cfg *cfg, double lr, const par_batch *batch, long k,
                           const vf_lockstep_comm *comm)
{
    const par_model *m = cfg->model;
    const par_dtype dt = cfg->dtype;
    const size_t N = m->n_params, sz = par_dtype_size(dt);
    const double u = dt == PAR_F32 ? 0x1p-24 : 0x1p-53;
    const int checker = !comm || comm->rank == 0;
    if (checker) memcpy(b->w0, ref_params(b->ref), N * sz);
    if (comm) PAR_TRY(comm->bcast(comm->ctx, b->w0, N * sz));
    double le = 0, lf = 0;
    const void *wf;
    size_t n;
    const int ns = b->n_state;
    if (ns && checker) {   // the optimizer state too: both sides update from the same
        void *arr[2];
        const int n_ref = ref_optim_state(b->ref, arr, &b->t0);
        PAR_FAIL_IF(n_ref != ns, PAR_ERR_CONFIG, "lockstep: the reference has %d state arrays",
                    n_ref);
        for (int j = 0; j < ns; j++) memcpy((char *)b->s0 + j * N * sz, arr[j], N * sz);
    }
    if (ns && comm) {
        PAR_TRY(comm->bcast(comm->ctx, b->s0, ns * N * sz));
        PAR_TRY(comm->bcast(comm->ctx, &b->t0, sizeof b->t0));
    }
    PAR_TRY(ops->set_params(b->state, b->w0));
    if (ns) {
        const par_optim_state in = {ns, {b->s0, (char *)b->s0 + N * sz}, b->t0};
        PAR_TRY(ops->set_optim(b->state, &in));
    }
    PAR_TRY(ops->step(b->state, batch, &lf));
    PAR_TRY(ops->params(b->state, &wf, &n));
    r->steps = k;
    if (!checker) return PAR_OK;
    par_optim_state sf = {0};
    if (ns) PAR_TRY(ops->get_optim(b->state, &sf));
    PAR_TRY(ref_step(b->ref, batch->x, batch->labels, batch->B, &le));
    const void *wr = ref_params(b->ref);
    const double *S = ref_grad_abs(b->ref);
    size_t bad = 0;
    // One element of array j (0 weights, 1 + i state i): fast a, reference e.
    #define LOCKSTEP_CHECK(j, a, e, tol)                                              \
        do {                                                                        \
            /* NaN or Inf: over */                                                   \
            const double q = (a) == (e) ? 0 : fabs((a) - (e)) / (tol);              \
            if (!(q <= 1) && bad++ == 0 && r->first_violation_step == 0) {           \
                r->first_violation_array = (j);                                      \
                r->first_violation_index = i;                                        \
            }                                                                        \
            if (!(q <= r->worst_ratio)) {                                            \
                r->worst_ratio = q;                                                  \
                r->worst_step = k;                                                   \
                r->worst_index = i;                                                  \
                r->worst_array = (j);                                                \
            }                                                                        \
        } while (0)
    if (!ns) {
        for (size_t i = 0; i < N; i++) {
            const double a = par_get_real(dt, wf, i), e = par_get_real(dt, wr, i);
            const size_t n_terms = batch->B * vf_terms_per_sample(m, i);
            const double tol = vf_lockstep_tol(lr, S[i], par_get_real(dt, b->w0, i), n_terms, u);
            LOCKSTEP_CHECK(0, a, e, tol);
        }
    } else {
        void *sr[2];
        long tr;
        ref_optim_state(b->ref, sr, &tr);
        opt_ctx c = {dt, u, dt == PAR_F32 ? 0x1p-150 : 0x1p-1074, {0}};
        const double b1 = rd(&c, b->optim.beta1);
        const double b2 = rd(&c, b->optim.beta2);
        par_optim_coefs(&c.k, &b->optim, dt, lr, par_optim_power(b1, b->t0 + 1),
                        par_optim_power(b2, b->t0 + 1));
        // The kernels use each coefficient as (REAL)k->x; so does this check (GCC
        // 12.2 -O2's SLP vectoriser drops par_optim_coefs's f32 rounding of bc1, bc2).
        double *kc[] = {&c.k.lr, &c.k.mu, &c.k.b1, &c.k.b2, &c.k.c1, &c.k.c2, &c.k.bc1, &c.k.bc2,
                        &c.k.eps};
        for (size_t j = 0; j < sizeof kc / sizeof kc[0]; j++) *kc[j] = rd(&c, *kc[j]);
        const void *g = ref_grad(b->ref);
        const char *s0 = b->s0;
        for (size_t i = 0; i < N; i++) {
            const size_t n_terms = batch->B * vf_terms_per_sample(m, i);
            if (is_running_stat(m, i)) {   // as under SGD (S = 0); no state: equal (zeros)
                const double tol =
                    vf_lockstep_tol(lr, S[i], par_get_real(dt, b->w0, i), n_terms, u);
                LOCKSTEP_CHECK(0, par_get_real(dt, wf, i), par_get_real(dt, wr, i), tol);
                for (int j = 0; j < ns; j++)
                    LOCKSTEP_CHECK(1 + j, par_get_real(dt, sf.arr[j], i),
                                   par_get_real(dt, sr[j], i), 0.0);
                continue;
            }
            const double Eg = 2 * gamma_n((double)n_terms, u) * S[i];
            double ref[3], tol[3];
            optim_tol(&c, par_get_real(dt, g, i), Eg, par_get_real(dt, b->w0, i),
                      par_get_real(dt, s0, i), ns > 1 ? par_get_real(dt, s0 + N * sz, i) : 0, ref,
                      tol);
            const double e[3] = {par_get_real(dt, wr, i), par_get_real(dt, sr[0], i),
                                 ns > 1 ? par_get_real(dt, sr[1], i) : 0};
            for (int j = 0; j <= ns; j++)
                PAR_FAIL_IF(!(ref[j] == e[j]) && !(isnan(ref[j]) && isnan(e[j])), PAR_ERR_NUMERIC,
                            "lockstep: the reference's %s element %zu at step %ld is %.17g, "
                            "its formula (par_kernels.h) gives %.17g",
                            j ? par_optim_state_name(b->optim.kind, j - 1) : "weight", i, k, e[j],
                            ref[j]);
            LOCKSTEP_CHECK(0, par_get_real(dt, wf, i), e[0], tol[0]);
            for (int j = 0; j < ns; j++)
                LOCKSTEP_CHECK(1 + j, par_get_real(dt, sf.arr[j], i), e[1 + j], tol[1 + j]);
        }
    }
    #undef LOCKSTEP_CHECK
    const double gB = gamma_n((double)batch->B, u);
    const double ql = lf == le ? 0 : fabs(lf - le) / ((2 * gB + 3 * u) * le);
    if (!(ql <= 1)) bad++;
    if (!(ql <= r->worst_loss_ratio)) r->worst_loss_ratio = ql;
    if (bad && r->first_violation_step == 0) r->first_violation_step = k;
    r->violations += bad;
    return PAR_OK;
}

par_status vf_lockstep(vf_lockstep_result *r, const par_trainer_ops *ops,
                       const par_run_cfg *cfg_fast, double lr_ref, const par_dataset *ds,
                       uint64_t seed, int epochs, long steps, const vf_lockstep_comm *comm)
{
    memset(r, 0, sizeof *r);
    const par_model *m = cfg_fast->model;
    const par_dtype dt = cfg_fast->dtype;
    const size_t N = m->n_params, Bmax = cfg_fast->batch, sz = par_dtype_size(dt);
    const size_t n_train = ds->n_train;
    PAR_FAIL_IF(!ops->set_params, PAR_ERR_CONFIG, "trainer %s cannot set its parameters",
                ops->name);
    const par_optim optim = cfg_fast->optim ? *cfg_fast->optim : par_optim_default(PAR_OPTIM_SGD);
    const int n_state = par_optim_n_state(optim.kind);
    PAR_FAIL_IF(n_state && (!ops->set_optim || !ops->get_optim), PAR_ERR_CONFIG,
                "trainer %s cannot set its optimizer state (--optim %s)", ops->name,
                par_optim_name(optim.kind));
    PAR_FAIL_IF(ds->train.n_features != m->n_inputs || ds->n_classes != m->n_classes,
                PAR_ERR_CONFIG, "--model %s does not fit dataset %s", m->spec, ds->name);
    PAR_FAIL_IF(n_train == 0 || Bmax == 0 || epochs < 1, PAR_ERR_CONFIG,
                "lockstep needs training records, a batch >= 1 and epochs >= 1");
    const double lr = par_round_real(dt, lr_ref);
    lockstep_buf b = {0};
    b.n_state = n_state;
    b.optim = optim;
    par_status st = PAR_OK;
    if (!comm || comm->rank == 0) {
        st = ref_create(&b.ref, m, dt, cfg_fast->chunk, lr_ref, cfg_fast->init_params);
        if (st == PAR_OK) st = ref_track_abs(b.ref);
        if (st == PAR_OK && n_state) {
            const ref_optim_kind rk = optim.kind == PAR_OPTIM_MOMENTUM   ? REF_MOMENTUM
                                      : optim.kind == PAR_OPTIM_NESTEROV ? REF_NESTEROV
                                                                         : REF_ADAM;
            st = ref_set_optimizer(b.ref, rk, optim.momentum, optim.beta1, optim.beta2, optim.eps);
        }
    }
    if (st == PAR_OK) st = ops->create(cfg_fast, &b.state);
    if (st == PAR_OK) {
        b.x = malloc(Bmax * m->n_inputs * sz);
        b.w0 = malloc(N * sz);
        b.labels = malloc(Bmax * sizeof *b.labels);
        if (n_state) b.s0 = malloc(n_state * N * sz);
        if (!b.x || !b.w0 || !b.labels || (n_state && !b.s0))
            st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory (lockstep)");
    }
    long k = 0;
    for (int e = 0; st == PAR_OK && e < epochs && (steps == 0 || k < steps); e++) {
        free(b.order);
        b.order = NULL;
        st = par_epoch_order(&b.order, n_train, seed, e);
        for (size_t pos = 0; st == PAR_OK && pos < n_train && (steps == 0 || k < steps);
             pos += Bmax) {
            const size_t B = n_train - pos < Bmax ? n_train - pos : Bmax;
            par_data_gather(&ds->train, b.order + pos, B, dt, b.x, b.labels);
            const par_batch batch = {.x = b.x, .labels = b.labels, .B = B};
            st = one_step(r, &b, ops, cfg_fast, lr, &batch, ++k, comm);
        }
    }
    buf_free(&b, ops);
    return st;
}
