// Optimizers (momentum, nesterov, adam; sgd as the control), full-batch
// runs and optimizer state in checkpoints, below the CLI:
//   - golden values: the update kernels against values worked out by hand,
//     against a per-operation emulation in double (each float operation is
//     a double operation rounded once: exact, as double has > 2p+2 bits),
//     and against the formula in long double within a derived bound;
//   - reference == serial == omp T=1,2,3 bit for bit, every step;
//   - par_run_ex resumed with the optimizer state == the uninterrupted run;
//   - checkpoints store and reload the state; another optimizer is refused;
//   - batch = the whole training split (--batch full) == the reference;
//   - fast mode within the lockstep bound (vf_lockstep.h) for each optimizer,
//     and lr * (1 + 1e-3) caught at step 1.
// Small: mlp:784-33-10, 12-step trajectories, a few hundred records.
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chk_check.h"
#include "par_ckpt.h"
#include "par_engine.h"
#include "par_fixtures.h"
#include "par_kernels.h"
#include "par_npz.h"

extern const par_trainer_ops par_trainer_reference, par_trainer_serial, par_trainer_omp;

static const char *const KIND[] = {"sgd", "momentum", "nesterov", "adam"};

// ---- golden values ----

static int bits_eq_f(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

// Values a person can check on paper: powers of two, every operation exact.
static void golden_by_hand(void)
{
    // momentum: mu 1/2, lr 1/4, w 1, v 0, g = 1 twice:
    //   v = 1,   w = 1 - 1/4 = 3/4;   v = 1/2 + 1 = 3/2, w = 3/4 - 3/8 = 3/8.
    // nesterov: v as above; w = 1 - (1 + 1/2)/4 = 5/8; w = 5/8 - (1 + 3/4)/4 = 3/16.
    // adam: b1 1/2, b2 3/4, eps 0, lr 1/4, w 1, g = 2 twice:
    //   t=1: m = 1, v = 1, bc1 = 1/2, bc2 = 1/4, mhat = 2, vhat = 4, w = 1 - (1/2)/2 = 3/4;
    //   t=2: m = 3/2, v = 7/4, bc1 = 3/4, bc2 = 7/16, mhat = 2, vhat = 4, w = 1/2.
    const double want_w[4][2] = {{0, 0}, {0.75, 0.375}, {0.625, 0.1875}, {0.75, 0.5}};
    const double want_m[4][2] = {{0, 0}, {1, 1.5}, {1, 1.5}, {1, 1.5}};
    for (int kind = 1; kind <= 3; kind++) {
        par_optim o = par_optim_default((par_optim_kind)kind);
        o.momentum = 0.5;
        o.beta1 = 0.5;
        o.beta2 = 0.75;
        o.eps = 0;
        float w32 = 1, m32 = 0, v32 = 0;
        double w64 = 1, m64 = 0, v64 = 0;
        const float g32 = kind == 3 ? 2.0f : 1.0f;
        const double g64 = g32;
        int ok = 1;
        for (long t = 1; t <= 2; t++) {
            par_optim_coef k32, k64;
            par_optim_coefs(&k32, &o, PAR_F32, 0.25, par_optim_power(0.5, t),
                            par_optim_power(0.75, t));
            par_optim_coefs(&k64, &o, PAR_F64, 0.25, par_optim_power(0.5, t),
                            par_optim_power(0.75, t));
            if (kind == 3)
                ok &= k32.bc1 == (t == 1 ? 0.5 : 0.75) && k32.bc2 == (t == 1 ? 0.25 : 0.4375);
            par_optim_f32(&w32, &m32, &v32, &g32, 1, &k32);
            par_optim_f64(&w64, &m64, &v64, &g64, 1, &k64);
            ok &= w32 == want_w[kind][t - 1] && w64 == want_w[kind][t - 1];
            ok &= m32 == want_m[kind][t - 1] && m64 == want_m[kind][t - 1];
            if (!ok) printf("  t=%ld: w %.9g %.17g, m %.9g\n", t, w32, w64, m32);
        }
        if (kind == 3) ok &= v32 == 1.75f && v64 == 1.75;
        char name[96];
        snprintf(name, sizeof name, "golden by hand: %s, two steps, f32 and f64", KIND[kind]);
        par_check(ok, name);
    }
}

// One float operation = the double operation rounded once (double has
// 53 >= 2*24 + 2 bits, so this is the correctly rounded float result).
static float r32(double x) { return (float)x; }

// The documented formula order, written again here operation by operation.
static void emulate_f32(int kind, float *w, float *m, float *v, float g, double lr, double mu,
                        double b1, double b2, double eps, long t)
{
    const float flr = (float)lr, fmu = (float)mu, fb1 = (float)b1, fb2 = (float)b2;
    const float feps = (float)eps;
    if (kind == 1 || kind == 2) {
        *m = r32(r32((double)fmu * *m) + (double)g);
        const float dir = kind == 1 ? *m : r32((double)g + r32((double)fmu * *m));
        *w = r32((double)*w - r32((double)flr * dir));
        return;
    }
    double p1 = 1, p2 = 1;   // b^t: t multiplications in double
    for (long i = 0; i < t; i++) {
        p1 *= (double)fb1;
        p2 *= (double)fb2;
    }
    const float bc1 = (float)(1 - p1), bc2 = (float)(1 - p2);
    const float c1 = r32(1.0 - fb1), c2 = r32(1.0 - fb2);
    *m = r32(r32((double)fb1 * *m) + r32((double)c1 * g));
    *v = r32(r32((double)fb2 * *v) + r32((double)r32((double)c2 * g) * g));
    const float mh = r32((double)*m / bc1), vh = r32((double)*v / bc2);
    const float d = r32((double)r32(sqrt((double)vh)) + feps);
    *w = r32((double)*w - r32((double)r32((double)flr * mh) / d));
}

static void golden_emulated(void)
{
    enum { N = 73 };   // 9 chosen by hand, 64 from a small LCG over several magnitudes
    float g0[N] = {0.5f, -0.25f, 1e-3f, -3.5e-6f, 0.0f, 7.25f, -1e-30f, 0.1f, -0.3f};
    float w0[N] = {0.1f, -0.2f, 0.3f, 1.5f, -0.7f, 0.0f, 2.0f, -1e-3f, 0.05f};
    uint32_t x = 12345;
    for (int i = 9; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        g0[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * ldexpf(1.0f, (int)(x % 17) - 12);
        x = x * 1664525u + 1013904223u;
        w0[i] = (float)(x >> 8) / 8388608.0f - 1.0f;
    }
    for (int kind = 1; kind <= 3; kind++) {
        const double lr = kind == 3 ? 1e-3 : 0.05;
        par_optim o = par_optim_default((par_optim_kind)kind);   // 0.9; 0.9, 0.999, 1e-8
        float w[N], m[N] = {0}, v[N] = {0}, ew[N], em[N] = {0}, ev[N] = {0}, g[N];
        memcpy(w, w0, sizeof w);
        memcpy(ew, w0, sizeof w);
        int ok = 1;
        for (long t = 1; t <= 4 && ok; t++) {
            for (int i = 0; i < N; i++) g[i] = g0[i] * (float)(t % 2 ? 1 : -2);
            par_optim_coef k;
            const double b1 = (double)(float)o.beta1, b2 = (double)(float)o.beta2;
            par_optim_coefs(&k, &o, PAR_F32, lr, par_optim_power(b1, t), par_optim_power(b2, t));
            par_optim_f32(w, m, v, g, N, &k);
            for (int i = 0; i < N; i++) {
                emulate_f32(kind, &ew[i], &em[i], &ev[i], g[i], lr, o.momentum, o.beta1, o.beta2,
                            o.eps, t);
                if (!bits_eq_f(w[i], ew[i]) || !bits_eq_f(m[i], em[i]) ||
                    (kind == 3 && !bits_eq_f(v[i], ev[i]))) {
                    printf("  step %ld element %d: w %.9g vs %.9g, m %.9g vs %.9g\n", t, i, w[i],
                           ew[i], m[i], em[i]);
                    ok = 0;
                    break;
                }
            }
        }
        char name[96];
        snprintf(name, sizeof name, "golden: %s f32 == per-operation emulation, 73 elements x 4 steps",
                 KIND[kind]);
        par_check(ok, name);
    }
}

// One step against the formula in long double (no intermediate rounding):
// every result within 2u|x| + 16u|update| (about a dozen roundings of
// relative size u along the longest path, adam's: m, v, /bc, sqrt, + eps,
// * lr, /, and the final subtraction).
static void golden_exact(void)
{
    enum { N = 6 };
    const double g[N] = {0.37, -1.9, 2.5e-4, -7e-7, 3.0, -0.011};
    const double w0[N] = {0.2, -0.45, 1.25, 0.033, -2.0, 0.7};
    const double m0[N] = {0.01, 0.3, -0.2, 1e-5, -0.9, 0.0};
    const double v0[N] = {1e-4, 0.02, 3e-3, 1e-9, 0.5, 0.0};
    const long t = 7;
    for (int d = 0; d < 2; d++) {
        const double u = d ? DBL_EPSILON / 2 : FLT_EPSILON / 2;
        for (int kind = 1; kind <= 3; kind++) {
            par_optim o = par_optim_default((par_optim_kind)kind);
            o.momentum = 0.85;
            const double lr = kind == 3 ? 2e-3 : 0.1;
            const double rd = d ? 1.0 : 0.0;
#define RD(x) (rd ? (double)(x) : (double)(float)(x))
            const long double LR = RD(lr), MU = RD(o.momentum), B1 = RD(o.beta1),
                              B2 = RD(o.beta2), EPS = RD(o.eps);
            const double b1 = RD(o.beta1), b2 = RD(o.beta2);
            par_optim_coef k;
            par_optim_coefs(&k, &o, d ? PAR_F64 : PAR_F32, lr, par_optim_power(b1, t),
                            par_optim_power(b2, t));
            double w[N], m[N], v[N];
            float wf[N], mf[N], vf[N], gf[N];
            for (int i = 0; i < N; i++) {
                w[i] = RD(w0[i]), m[i] = RD(m0[i]), v[i] = RD(v0[i]);
                wf[i] = (float)w0[i], mf[i] = (float)m0[i], vf[i] = (float)v0[i];
                gf[i] = (float)g[i];
            }
            double gg[N];
            for (int i = 0; i < N; i++) gg[i] = RD(g[i]);
            if (d) {
                par_optim_f64(w, m, v, gg, N, &k);
            } else {
                par_optim_f32(wf, mf, vf, gf, N, &k);
                for (int i = 0; i < N; i++) w[i] = wf[i], m[i] = mf[i], v[i] = vf[i];
            }
            int ok = 1;
            for (int i = 0; i < N; i++) {
                const long double G = gg[i], W = RD(w0[i]), M = RD(m0[i]), V = RD(v0[i]);
                long double Mn, Vn = 0, step;
                if (kind == 3) {
                    Mn = B1 * M + (1 - B1) * G;
                    Vn = B2 * V + (1 - B2) * G * G;
                    const long double mh = Mn / (1 - powl(B1, (long double)t));
                    const long double vh = Vn / (1 - powl(B2, (long double)t));
                    step = LR * mh / (sqrtl(vh) + EPS);
                } else {
                    Mn = MU * M + G;
                    step = LR * (kind == 1 ? Mn : G + MU * Mn);
                }
                const long double Wn = W - step;
                // adam: bc = 1 - b^t cancels; b^t by t multiplications in double is off by
                // up to t*ud relative, i.e. bc by t*ud*b^t/bc (ud: the double's u).
                const double ud = DBL_EPSILON / 2, p1 = par_optim_power(b1, t),
                             p2 = par_optim_power(b2, t);
                const double rel_bc = kind == 3 ? t * ud * (p1 / (1 - p1) + p2 / (1 - p2)) : 0;
                const double tol_w = 2 * u * fabsl(Wn) + (16 * u + rel_bc) * fabsl(step);
                const double tol_m = 4 * u * (fabsl(Mn) + fabsl(M) + fabsl(G));
                const double tol_v = 4 * u * (fabsl(Vn) + fabsl(V) + G * G);
                if (fabsl(w[i] - Wn) > tol_w || fabsl(m[i] - Mn) > tol_m ||
                    (kind == 3 && fabsl(v[i] - Vn) > tol_v)) {
                    printf("  element %d: w %.17g vs %.17Lg (tol %.3g)\n", i, w[i], Wn, tol_w);
                    ok = 0;
                }
            }
#undef RD
            char name[96];
            snprintf(name, sizeof name, "golden: %s %s within the bound of the exact formula",
                     KIND[kind], d ? "f64" : "f32");
            par_check(ok, name);
        }
    }
    // b^t by repeated multiplication stays within t*u of the exact power.
    const double b = (double)0.999f;
    const double p = par_optim_power(b, 1000);
    par_check(fabsl(p - powl(b, 1000)) <= 1000 * DBL_EPSILON * p && par_optim_power(b, 0) == 1,
              "par_optim_power: 0.999f^1000 within 1000u of powl");
}

// The fused dense update equals the plain one row by row, and fills WT.
static void dense_matches_plain(void)
{
    enum { NI = 37, NO = 21 };
    const size_t ld = par_dense_ldwt(NO);
    float *W = malloc(NI * NO * 4), *W2 = malloc(NI * NO * 4), *M = calloc(NI * NO, 4);
    float *V = calloc(NI * NO, 4), *M2 = calloc(NI * NO, 4), *V2 = calloc(NI * NO, 4);
    float *G = malloc(NI * NO * 4), *WT = calloc(par_dense_wt_elems(NI, NO), 4);
    for (int i = 0; i < NI * NO; i++) {
        W[i] = W2[i] = (float)((i * 37 % 101) - 50) / 64.0f;
        G[i] = (float)((i * 53 % 89) - 44) / 128.0f;
    }
    par_optim o = par_optim_default(PAR_OPTIM_ADAM);
    par_optim_coef k;
    par_optim_coefs(&k, &o, PAR_F32, 1e-3, par_optim_power((float)0.9, 1),
                    par_optim_power((float)0.999, 1));
    par_optim_dense_f32(W, WT, M, V, G, NI, NO, 5, 19, &k);
    par_optim_f32(W2 + 5 * NI, M2 + 5 * NI, V2 + 5 * NI, G + 5 * NI, 14 * NI, &k);
    int ok = memcmp(W, W2, NI * NO * 4) == 0 && memcmp(M, M2, NI * NO * 4) == 0 &&
             memcmp(V, V2, NI * NO * 4) == 0;
    for (int i = 0; i < NI && ok; i++)
        for (int r = 5; r < 19; r++) ok &= bits_eq_f(WT[i * ld + r], W[r * NI + i]);
    par_check(ok, "par_optim_dense == par_optim on rows [5, 19), WT columns written");
    free(W), free(W2), free(M), free(V), free(M2), free(V2), free(G), free(WT);
}

// ---- trainers bit for bit ----

static void trajectories(const par_dataset *ds, const par_model *m)
{
    const int threads[] = {1, 2, 3};
    char name[200];
    trajectory last_ref[4];
    for (int kind = 0; kind < 4; kind++) {
        const par_optim o = par_optim_default((par_optim_kind)kind);
        for (int var = 0; var < (kind == 3 ? 3 : 1); var++) {
            // adam also in f64 and with a short last chunk (B=30, C=7).
            const par_dtype dt = var == 1 ? PAR_F64 : PAR_F32;
            const size_t B = var == 2 ? 30 : 32, C = var == 2 ? 7 : 8;
            void *init = malloc(m->n_params * par_dtype_size(dt));
            par_model_init(m, dt, 5, init);
            const double lr = kind == 3 ? 2e-3 : 0.05;
            par_run_cfg cfg = {m, dt, PAR_MODE_EXACT, B, C, lr, 1, init, NULL, &o, PAR_THREADS_ADAPT, 0};
            trajectory ref, t;
            enum { STEPS = 12 };
            PAR_REQUIRE(run_trajectory(&ref, &par_trainer_reference, &cfg, ds, STEPS));
            snprintf(name, sizeof name, "%s: serial == reference, %s, B=%zu C=%zu, %d steps",
                     KIND[kind], par_dtype_name(dt), B, C, STEPS);
            if (par_ran(run_trajectory(&t, &par_trainer_serial, &cfg, ds, STEPS), name))
                trajectory_equal(&t, &ref, m, dt, name);
            trajectory_free(&t);
            for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
                cfg.threads = threads[k];
                snprintf(name, sizeof name, "%s: omp T=%d == reference, %s, B=%zu C=%zu",
                         KIND[kind], threads[k], par_dtype_name(dt), B, C);
                if (par_ran(run_trajectory(&t, &par_trainer_omp, &cfg, ds, STEPS), name))
                    trajectory_equal(&t, &ref, m, dt, name);
                trajectory_free(&t);
            }
            if (kind == 0 && var == 0) {
                // An explicit sgd is the plain SGD of cfg.optim == NULL.
                cfg.optim = NULL;
                cfg.threads = 2;
                const char *same = "sgd: --optim sgd == no optimizer given";
                if (par_ran(run_trajectory(&t, &par_trainer_omp, &cfg, ds, STEPS), same))
                    trajectory_equal(&t, &ref, m, dt, same);
                trajectory_free(&t);
            }
            if (var == 0) last_ref[kind] = ref;
            else trajectory_free(&ref);
            free(init);
        }
    }
    // The optimizers must really differ (else the checks above prove little).
    const size_t bytes = last_ref[0].steps * m->n_params * sizeof(float);
    par_check(memcmp(last_ref[0].w, last_ref[1].w, bytes) != 0 &&
                  memcmp(last_ref[1].w, last_ref[2].w, bytes) != 0 &&
                  memcmp(last_ref[0].w, last_ref[3].w, bytes) != 0,
              "sgd, momentum, nesterov and adam give different weights");
    for (int kind = 0; kind < 4; kind++) trajectory_free(&last_ref[kind]);
}

// ---- resume ----

typedef struct grab {
    long at;
    par_run_point pt;
    void *w;
    void *os[2];
    par_optim_state copy;
    size_t bytes;
} grab;

static par_status after(void *ctx, const par_run_point *pt, const void *params,
                        const par_run_now *now)
{
    grab *g = ctx;
    if (pt->step == g->at) {
        par_optim_state st;
        PAR_TRY(par_run_optim(now, &st));
        g->pt = *pt;
        memcpy(g->w, params, g->bytes);
        g->copy.n = st.n;
        g->copy.t = st.t;
        for (int i = 0; i < st.n; i++) {
            memcpy(g->os[i], st.arr[i], g->bytes);
            g->copy.arr[i] = g->os[i];
        }
    }
    return PAR_OK;
}

static void resume(const par_dataset *ds, const par_model *m)
{
    const size_t N = m->n_params, bytes = N * sizeof(float);
    float *w0 = malloc(bytes), *full = malloc(bytes), *res = malloc(bytes);
    par_model_init(m, PAR_F32, 3, w0);
    for (int kind = 1; kind <= 3; kind += 2) {   // momentum and adam
        const par_optim o = par_optim_default((par_optim_kind)kind);
        par_run_opts ro = {.trainer = &par_trainer_serial,
                           .cfg = {.model = m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT,
                                   .batch = 64, .chunk = 8, .lr = kind == 3 ? 1e-3 : 0.05,
                                   .threads = 1, .init_params = w0, .optim = &o},
                           .ds = ds, .seed = 11, .epochs = 2};
        long done = 0;
        par_status st = par_run(&ro, NULL, full, &done, NULL);   // 2 epochs of 8 steps (500 records)
        if (!par_check(st == PAR_OK && done == 16, KIND[kind]))   // else nothing below is checked
            printf("  the uninterrupted run: status %d, %ld steps: %s\n", (int)st, done,
                   par_last_error());
        const long points[] = {3, 8, 9};
        const par_trainer_ops *with[] = {&par_trainer_serial, &par_trainer_omp,
                                         &par_trainer_reference};
        for (size_t p = 0; p < 3 && st == PAR_OK; p++) {
            grab g = {.at = points[p], .w = malloc(bytes), .bytes = bytes};
            g.os[0] = malloc(bytes);
            g.os[1] = malloc(bytes);
            const par_run_hooks h = {.ctx = &g, .after_step = after};
            st = par_run(&ro, &h, NULL, &done, NULL);
            par_run_opts o2 = ro;
            o2.trainer = with[p];
            o2.cfg.threads = p == 1 ? 2 : 1;
            o2.cfg.init_params = g.w;
            o2.start = &g.pt;
            o2.start_optim = &g.copy;
            o2.check_finite = 1;
            o2.check_every = 1;
            if (st == PAR_OK) st = par_run(&o2, NULL, res, &done, NULL);
            char name[160];
            snprintf(name, sizeof name, "%s: resumed at step %ld by %s (t = %ld): bitwise equal",
                     KIND[kind], g.pt.step, with[p]->name, g.copy.t);
            par_check(st == PAR_OK && done == 16 && g.copy.t == points[p] &&
                          memcmp(res, full, bytes) == 0, name);
            if (p == 0) {
                par_run_opts o3 = o2;
                o3.start_optim = NULL;
                o3.check_finite = 0;
                par_check(par_run(&o3, NULL, res, &done, NULL) == PAR_ERR_CONFIG &&
                              strstr(par_last_error(), "needs its state"),
                          "resuming without the optimizer state is refused");
            }
            free(g.w), free(g.os[0]), free(g.os[1]);
        }
    }
    free(w0), free(full), free(res);
}

// ---- checkpoints ----

static void checkpoints(const par_model *m)
{
    const size_t N = m->n_params, bytes = N * sizeof(float);
    float *w = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes);
    float *rb = malloc(bytes), *rw = malloc(bytes);
    for (size_t i = 0; i < N; i++) {
        w[i] = (float)i / 7.0f;
        a[i] = -(float)i / 3.0f;
        b[i] = (float)(i % 13) * 1e-6f;
    }
    char dir[] = "/tmp/parity-test-optim-XXXXXX";
    par_check(mkdtemp(dir) != NULL, "temp folder");
    par_ckpt_dir *d = NULL;
    par_status st = par_ckpt_dir_open(&d, dir, 0, 1);
    par_ckpt_meta mt;
    memset(&mt, 0, sizeof mt);
    snprintf(mt.cfg.model, sizeof mt.cfg.model, "%s", m->spec);
    snprintf(mt.cfg.act, sizeof mt.cfg.act, "relu");
    snprintf(mt.cfg.dtype, sizeof mt.cfg.dtype, "f32");
    snprintf(mt.cfg.optimizer, sizeof mt.cfg.optimizer, "adam beta1=0.9 beta2=0.999 eps=1e-08");
    mt.cfg.batch = 64;
    mt.cfg.chunk = 8;
    mt.cfg.lr = 1e-3;
    memset(mt.cfg.init_sha256, 'a', 64);
    memset(mt.cfg.data_sha256, 'b', 64);
    snprintf(mt.trainer, sizeof mt.trainer, "serial");
    snprintf(mt.mode, sizeof mt.mode, "exact");
    mt.step = 7;
    const par_ckpt_optim os = {2, {"m", "v"}, {a, b}, 7};
    snprintf(mt.select, sizeof mt.select, "best-val");   // and the best epoch so far
    mt.has_best = 1;
    mt.best_epoch = 3;
    mt.best_val_loss = 0.1;
    mt.best_val_acc = 2.0 / 3.0;
    mt.best_test_loss = 1e-300;
    mt.best_test_acc = 0.8125;
    if (st == PAR_OK) st = par_ckpt_write_ex(d, &mt, m, PAR_F32, w, &os, b, 2);
    par_ckpt_meta f;
    if (st == PAR_OK) st = par_ckpt_find(&f, dir, NULL, 0);
    par_check(st == PAR_OK && f.optim_n == 2 && strcmp(f.optim_names[1], "v") == 0 &&
                  f.optim_t == 7,
              "checkpoint with adam state written and found (arrays m, v; t = 7)");
    par_check(st == PAR_OK && strcmp(f.select, "best-val") == 0 && f.has_best &&
                  f.best_epoch == 3 && f.best_val_loss == 0.1 && f.best_val_acc == 2.0 / 3.0 &&
                  f.best_test_loss == 1e-300 && f.best_test_acc == 0.8125,
              "its best epoch so far (--select best-val) reads back exactly");
    if (st == PAR_OK) st = par_ckpt_load_best(dir, &f, m, PAR_F32, rb);
    par_check(st == PAR_OK && memcmp(rb, b, bytes) == 0, "its best-epoch weights load back");
    const char *names[2] = {"m", "v"};
    par_ckpt_optim back = {0, {NULL, NULL}, {ra, rb}, 0};
    if (st == PAR_OK) st = par_ckpt_load_optim(dir, &f, m, PAR_F32, 2, names, &back);
    if (st == PAR_OK) st = par_ckpt_load(dir, &f, m, PAR_F32, rw);
    par_check(st == PAR_OK && back.t == 7 && memcmp(ra, a, bytes) == 0 &&
                  memcmp(rb, b, bytes) == 0 && memcmp(rw, w, bytes) == 0,
              "its weights and optimizer state load back bit for bit");
    char npz[1200];
    snprintf(npz, sizeof npz, "%s/%s", dir, f.npz);
    par_check(par_weights_load(npz, m, PAR_F32, rw) == PAR_OK && memcmp(rw, w, bytes) == 0,
              "its .npz still loads as weights (--init-load skips opt.* and best.*)");
    const char *vel[2] = {"velocity", NULL};
    par_check(par_ckpt_load_optim(dir, &f, m, PAR_F32, 1, vel, &back) == PAR_ERR_CONFIG &&
                  strstr(par_last_error(), "optimizer has 1 (velocity)"),
              "loading it for momentum is refused, naming both");
    par_ckpt_config other = mt.cfg;
    snprintf(other.optimizer, sizeof other.optimizer, "momentum momentum=0.9");
    char why[300];
    par_check(par_ckpt_config_diff(why, sizeof why, &f.cfg, &other) &&
                  strcmp(why, "--optim: checkpoint adam beta1=0.9 beta2=0.999 eps=1e-08, this "
                              "run momentum momentum=0.9") == 0,
              "config diff: another optimizer names --optim");
    par_ckpt_dir_close(d);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("  could not remove %s\n", dir);
    free(w), free(a), free(b), free(ra), free(rb), free(rw);
}

// ---- full batch ----

static void full_batch(const par_dataset *ds_in, const par_model *m)
{
    par_dataset ds = *ds_in;
    ds.n_train = 300;   // a small slice: one step per epoch of 300 samples
    const size_t bytes = m->n_params * sizeof(float);
    float *w0 = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes);
    par_model_init(m, PAR_F32, 9, w0);
    for (int kind = 0; kind <= 3; kind += 3) {
        const par_optim o = par_optim_default((par_optim_kind)kind);
        par_run_opts ro = {.trainer = &par_trainer_reference,
                           .cfg = {.model = m, .dtype = PAR_F32, .mode = PAR_MODE_EXACT,
                                   .batch = ds.n_train, .chunk = 8, .lr = kind ? 1e-3 : 0.1,
                                   .threads = 1, .init_params = w0, .optim = &o},
                           .ds = &ds, .seed = 4, .epochs = 3};
        long done = 0;
        par_status st = par_run(&ro, NULL, ref, &done, NULL);
        par_check(st == PAR_OK && done == 3, "full batch: 3 epochs are 3 steps");
        const par_trainer_ops *ops[] = {&par_trainer_serial, &par_trainer_omp, &par_trainer_omp};
        for (int k = 0; k < 3; k++) {
            ro.trainer = ops[k];
            ro.cfg.threads = k + 1;
            st = par_run(&ro, NULL, got, &done, NULL);
            char name[120];
            snprintf(name, sizeof name, "full batch (300 records), %s: %s T=%d == reference",
                     KIND[kind], ops[k]->name, k + 1);
            par_check(st == PAR_OK && memcmp(got, ref, bytes) == 0, name);
        }
    }
    free(w0), free(ref), free(got);
}

// ---- the fast-mode lockstep: every optimizer within its derived bound; the MPFR checker ----

// "layer0.weight[3,5]" or "m:layer0.weight[3,5]": element i of array j of a
// lockstep result (0 the weights, 1 + s optimizer state s).
static void lockstep_where(char *buf, size_t n, const par_model *m, par_optim_kind kind, int j,
                           size_t i)
{
    int v = 0;
    while (v + 1 < m->n_views && m->views[v + 1].offset <= i) v++;
    const par_view *pv = &m->views[v];
    const size_t k = i - pv->offset;
    const int at = j > 0 ? snprintf(buf, n, "%s:", par_optim_state_name(kind, j - 1)) : 0;
    if (pv->ndim == 2)
        snprintf(buf + at, n - (size_t)at, "%s[%zu,%zu]", pv->name, k / pv->shape[1],
                 k % pv->shape[1]);
    else
        snprintf(buf + at, n - (size_t)at, "%s[%zu]", pv->name, k);
}

// For momentum, nesterov and adam, f32 and f64: serial fast and omp T=2 fast
// step by step against the reference (weights and state re-synced each step)
// within the bound of vf_lockstep.h, 30 steps of batch 16 on real records;
// and the same with lr * (1 + 1e-3) in the fast run only fails at step 1 in
// the weights (the state does not see lr).
static void fast_lockstep_optim(const par_dataset *ds, const par_model *m)
{
    enum { STEPS = 30 };
    for (int d = 0; d < 2; d++) {
        const par_dtype dt = d ? PAR_F64 : PAR_F32;
        void *w0 = malloc(m->n_params * par_dtype_size(dt));
        par_model_init(m, dt, 1, w0);
        for (int kind = 1; kind <= 3; kind++) {
            const par_optim o = par_optim_default((par_optim_kind)kind);
            const double lr = kind == PAR_OPTIM_ADAM ? 1e-3 : 0.02;
            for (int T = 1; T <= 2; T++) {
                const par_trainer_ops *ops = T == 1 ? &par_trainer_serial : &par_trainer_omp;
                par_run_cfg f = {.model = m, .dtype = dt, .mode = PAR_MODE_FAST, .batch = 16,
                                 .chunk = 4, .lr = lr, .threads = T, .init_params = w0,
                                 .optim = &o};
                vf_lockstep_result r;
                par_status st = fast_lockstep(&r, ops, &f, lr, ds, STEPS);
                char name[160], where[96] = "-";
                if (r.worst_step > 0)
                    lockstep_where(where, sizeof where, m, o.kind, r.worst_array, r.worst_index);
                snprintf(name, sizeof name, "%s fast T=%d within the lockstep bound, %s, %d steps",
                         KIND[kind], T, par_dtype_name(dt), STEPS);
                if (!par_check(st == PAR_OK && r.steps == STEPS && r.violations == 0, name))
                    printf("  status %d (%s), %zu violations, first at step %ld\n", (int)st,
                           par_last_error(), r.violations, r.first_violation_step);
                printf("  worst |diff|/tol %.3g (%s, step %ld)\n", r.worst_ratio, where,
                       r.worst_step);
                // The negative control: caught at step 1 in the weights, named.
                f.lr = lr * (1 + 1e-3);
                st = fast_lockstep(&r, ops, &f, lr, ds, STEPS);
                if (r.first_violation_step > 0)
                    lockstep_where(where, sizeof where, m, o.kind, r.first_violation_array,
                                   r.first_violation_index);
                snprintf(name, sizeof name, "%s fast T=%d with lr * (1 + 1e-3) fails the bound at "
                         "step 1 in the weights, %s", KIND[kind], T, par_dtype_name(dt));
                if (par_check(st == PAR_OK && r.violations > 0 && r.first_violation_step == 1 &&
                                  r.first_violation_array == 0, name))
                    printf("  first violation: %s, step %ld (%zu in all)\n", where,
                           r.first_violation_step, r.violations);
                else
                    printf("  status %d (%s), %zu violations, first at step %ld (array %d)\n",
                           (int)st, par_last_error(), r.violations, r.first_violation_step,
                           r.first_violation_array);
            }
        }
        free(w0);
    }
    // A conv layer (B x positions terms per gradient element) and batchnorm
    // (gamma, beta through the optimizer; running statistics not), adam, f32.
    par_model cm;
    PAR_REQUIRE(par_model_parse(&cm, "cnn:1x28x28-c4k3p1-bn-r-m2-f-fc10", PAR_ACT_RELU));
    float *w0 = malloc(cm.n_params * sizeof(float));
    par_model_init(&cm, PAR_F32, 1, w0);
    const par_optim o = par_optim_default(PAR_OPTIM_ADAM);
    par_run_cfg f = {.model = &cm, .dtype = PAR_F32, .mode = PAR_MODE_FAST, .batch = 16,
                     .chunk = 4, .lr = 1e-3, .threads = 2, .init_params = w0, .optim = &o};
    vf_lockstep_result r;
    par_status st = fast_lockstep(&r, &par_trainer_omp, &f, 1e-3, ds, 10);
    if (!par_check(st == PAR_OK && r.steps == 10 && r.violations == 0,
                   "adam fast T=2 within the lockstep bound, cnn with batchnorm, f32, 10 steps"))
        printf("  status %d (%s), %zu violations\n", (int)st, par_last_error(), r.violations);
    printf("  worst |diff|/tol %.3g (step %ld)\n", r.worst_ratio, r.worst_step);
    f.lr = 1e-3 * (1 + 1e-3);
    st = fast_lockstep(&r, &par_trainer_omp, &f, 1e-3, ds, 10);
    par_check(st == PAR_OK && r.first_violation_step == 1 && r.first_violation_array == 0,
              "adam fast with lr * (1 + 1e-3) fails at step 1, cnn with batchnorm");
    free(w0);
}

static void mpfr_takes_adam(const par_model *m)
{
    float *w0 = malloc(m->n_params * sizeof(float));
    par_model_init(m, PAR_F32, 1, w0);
    const par_optim o = par_optim_default(PAR_OPTIM_ADAM);
    const par_run_cfg cfg = {m, PAR_F32, PAR_MODE_FAST, 32, 8, 1e-3, 1, w0, NULL, &o, PAR_THREADS_ADAPT, 0};
    par_run_cfg ce = cfg;
    ce.mode = PAR_MODE_EXACT;
    float *x = calloc(32 * 784, sizeof(float));
    int32_t labels[32] = {0};
    const par_batch b = {.x = x, .labels = labels, .B = 32};
    for (size_t i = 0; i < 32 * 784; i++) x[i] = (float)((i * 7) % 13) / 13.0f;
    // The MPFR checker takes adam (tests/verify/test_check_optim.c checks its steps): from
    // a zero state m' = fl(b1 * 0) + fl(c1 g) = fl(c1 g) with c1 = 1 - 0.9f
    // (exact in f32: Sterbenz), and v' = fl(fl(c2 g) g), c2 = 1 - 0.999f.
    chk_step st;
    int ok = chk_capture(&st, &par_trainer_serial, &ce, &b) == PAR_OK && st.opt_t == 1 &&
             st.s_new[0] && st.s_new[1];
    const float c1 = 1.0f - 0.9f, c2 = 1.0f - 0.999f;
    for (size_t i = 0; ok && i < m->n_params; i++) {
        const float g = ((const float *)st.g)[i];
        ok = ((const float *)st.s_new[0])[i] == c1 * g &&
             ((const float *)st.s_new[1])[i] == (c2 * g) * g;
    }
    par_check(ok, "the MPFR checker captures adam's state: m' = c1 g, v' = c2 g g from zeros");
    if (st.m) chk_step_free(&st);
    free(x);
    free(w0);
}

int main(void)
{
    golden_by_hand();
    golden_emulated();
    golden_exact();
    dense_matches_plain();

    par_dataset ds;
    fixture_dataset(&ds, 500);
    par_model m;
    if (par_model_parse(&m, "mlp:784-33-10", PAR_ACT_RELU) != PAR_OK) return 1;
    trajectories(&ds, &m);
    resume(&ds, &m);
    checkpoints(&m);
    full_batch(&ds, &m);
    fast_lockstep_optim(&ds, &m);
    mpfr_takes_adam(&m);
    par_dataset_free(&ds);
    return par_test_exit();
}
