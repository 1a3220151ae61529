// The CUDA trainer's kernel bodies (src/cuda/cuda_bodies.h) run on the CPU one
// index at a time, as each GPU thread runs them, and compared bit for bit
// with the CPU kernels (par_kernels.h) on odd shapes, f32 and f64: dense
// forward with every activation, input gradient with every activation's
// derivative, the chunked weight and bias gradient (short last chunk, C = 1,
// C = B), softmax + cross-entropy, every optimizer's update, the loss fold,
// and relu on -0, NaN and infinities. Needs no GPU and no CUDA toolkit; the
// device itself is tests/gpu/test_cuda.c.
#include <math.h>
#include <stdint.h>

#include "cuda_bodies.h"
#include "par_kernels.h"
#include "par_test.h"

enum { B = 13, NI = 37, NO = 19, K = 10 };

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

// Uniform in [-1, 1), with a sprinkling of exact zeros of both signs.
static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    const uint64_t r = rng_state >> 11;
    if (r % 29 == 0) return r % 2 ? -0.0 : 0.0;
    return (double)r / (double)(UINT64_C(1) << 52) - 1.0;
}

static const par_act acts[] = {PAR_ACT_NONE, PAR_ACT_RELU, PAR_ACT_SIGMOID, PAR_ACT_TANH};

#define NEXTAFTER_f32 nextafterf
#define NEXTAFTER_f64 nextafter

#define BODY_TESTS(REAL, SFX)                                                                  \
    static void fill_##SFX(REAL *p, size_t n, double scale)                                    \
    {                                                                                          \
        for (size_t i = 0; i < n; i++) p[i] = (REAL)(scale * rnd());                           \
    }                                                                                          \
    static void test_dense_##SFX(const char *dn)                                               \
    {                                                                                          \
        static REAL x[B * NI], W[NO * NI], WTp[NI * 32 + 16], b[NO];              \
        static REAL y_cpu[B * NO], y_gpu[B * NO], dz[B * NO], dx_cpu[B * NI], dx_gpu[B * NI];  \
        static REAL yprev[B * NI];                                                             \
        char name[128];                                                                        \
        fill_##SFX(x, B * NI, 2);                                                              \
        fill_##SFX(W, NO * NI, 0.5);                                                           \
        fill_##SFX(b, NO, 0.5);                                                                \
        fill_##SFX(dz, B * NO, 1);                                                             \
        memset(WTp, 0, sizeof WTp);                                                            \
        par_dense_transpose_##SFX(WTp, W, NI, NO, 0, NO);                                      \
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {                            \
            par_dense_forward_##SFX(y_cpu, x, WTp, b, 0, B, 0, NO, NI, NO);                    \
            par_act_forward_##SFX(y_cpu, B * NO, acts[a]);                                     \
            for (size_t s = 0; s < B; s++)                                                     \
                for (size_t o = 0; o < NO; o++)                                                \
                    cuda_forward_##SFX(y_gpu, x, W, b, (int)acts[a], NI, NO, s, o);            \
            snprintf(name, sizeof name, "forward body == par_dense_forward + %s, %s",          \
                     par_act_name(acts[a]), dn);                                               \
            par_check(memcmp(y_cpu, y_gpu, sizeof y_cpu) == 0, name);                          \
            /* the input gradient through the activation of a layer whose output is y */      \
            for (size_t t = 0; t < B * NI; t++)                                                \
                yprev[t] = (REAL)cuda_act_##SFX(x[t], (int)acts[a]);                           \
            par_dense_backward_data_##SFX(dx_cpu, dz, W, 0, B, NI, NO);                        \
            par_act_backward_##SFX(dx_cpu, yprev, B * NI, acts[a]);                            \
            for (size_t s = 0; s < B; s++)                                                     \
                for (size_t i = 0; i < NI; i++)                                                \
                    cuda_backward_data_##SFX(dx_gpu, dz, W, yprev, (int)acts[a], NI, NO, s, i); \
            snprintf(name, sizeof name, "input gradient body == backward_data + %s', %s",      \
                     par_act_name(acts[a]), dn);                                               \
            par_check(memcmp(dx_cpu, dx_gpu, sizeof dx_cpu) == 0, name);                       \
        }                                                                                      \
        static REAL dW_cpu[NO * NI], db_cpu[NO], dW_gpu[NO * NI], db_gpu[NO];                  \
        const size_t chunks[] = {4, 1, B, 5};                                                  \
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {                        \
            const size_t C = chunks[c];                                                        \
            par_dense_backward_weights_##SFX(dW_cpu, db_cpu, dz, x, B, C, 0, (B + C - 1) / C,  \
                                             0, NO, NI, NO, 0);                                \
            for (size_t o = 0; o < NO; o++)                                                    \
                for (size_t i = 0; i < NI; i++)                                                \
                    dW_gpu[o * NI + i] = cuda_wgrad_##SFX(dz, x, B, C, NI, NO, o, i);          \
            for (size_t o = 0; o < NO; o++) db_gpu[o] = cuda_bgrad_##SFX(dz, B, C, NO, o);     \
            snprintf(name, sizeof name, "weight and bias gradient bodies, B=%d C=%zu, %s", B,  \
                     C, dn);                                                                   \
            par_check(memcmp(dW_cpu, dW_gpu, sizeof dW_cpu) == 0 &&                            \
                          memcmp(db_cpu, db_gpu, sizeof db_cpu) == 0,                          \
                      name);                                                                   \
        }                                                                                      \
    }                                                                                          \
    static void test_softmax_##SFX(const char *dn)                                             \
    {                                                                                          \
        static REAL z[B * K], dz_cpu[B * K], dz_gpu[B * K], l_cpu[B], l_gpu[B];                \
        int32_t lab[B];                                                                        \
        fill_##SFX(z, B * K, 8);                                                               \
        for (size_t s = 0; s < B; s++) lab[s] = (int32_t)(s * 7 % K);                          \
        const size_t hits = par_softmax_xent_##SFX(dz_cpu, l_cpu, z, lab, 0, B, K, 64);        \
        size_t h = 0;                                                                          \
        for (size_t s = 0; s < B; s++)                                                         \
            h += (size_t)cuda_softmax_xent_##SFX(dz_gpu, l_gpu, z, lab, K, 64, s);             \
        char name[96];                                                                         \
        snprintf(name, sizeof name, "softmax + cross-entropy body == par_softmax_xent, %s",    \
                 dn);                                                                          \
        par_check(memcmp(dz_cpu, dz_gpu, sizeof dz_cpu) == 0 &&                                \
                      memcmp(l_cpu, l_gpu, sizeof l_cpu) == 0 && h == hits,                    \
                  name);                                                                       \
        snprintf(name, sizeof name, "loss fold body == par_loss_fold, C = 1, 4, 13, %s", dn);  \
        int same = 1;                                                                          \
        for (size_t C = 1; C <= B; C += 3) {                                                   \
            const REAL a = par_loss_fold_##SFX(l_cpu, B, C, 0, (B + C - 1) / C, 0, 0);         \
            const REAL g = cuda_loss_fold_##SFX(l_cpu, B, C);                                  \
            same = same && memcmp(&a, &g, sizeof a) == 0;                                      \
        }                                                                                      \
        par_check(same, name);                                                                 \
    }                                                                                          \
    static void test_update_##SFX(const char *dn)                                              \
    {                                                                                          \
        enum { N = 257 };                                                                      \
        static REAL w0[N], m0[N], v0[N], g[N], w1[N], m1[N], v1[N], w2[N], m2[N], v2[N];       \
        fill_##SFX(w0, N, 1);                                                                  \
        fill_##SFX(m0, N, 0.1);                                                                \
        fill_##SFX(g, N, 0.3);                                                                 \
        for (size_t i = 0; i < N; i++) v0[i] = (REAL)(0.01 * fabs(rnd()));                     \
        const par_update_kind kinds[] = {0, PAR_UPDATE_MOMENTUM, PAR_UPDATE_NESTEROV,          \
                                         PAR_UPDATE_ADAM};                                     \
        const char *names[] = {"sgd", "momentum", "nesterov", "adam"};                         \
        for (int k = 0; k < 4; k++) {                                                          \
            const par_optim_coef c = {kinds[k], (REAL)0.01, (REAL)0.9, (REAL)0.9,              \
                                      (REAL)0.999, (REAL)0.1, (REAL)0.001, (REAL)0.19,         \
                                      (REAL)0.001999, (REAL)1e-8};                             \
            memcpy(w1, w0, sizeof w0), memcpy(m1, m0, sizeof m0), memcpy(v1, v0, sizeof v0);   \
            memcpy(w2, w0, sizeof w0), memcpy(m2, m0, sizeof m0), memcpy(v2, v0, sizeof v0);   \
            if (k == 0)                                                                        \
                par_sgd_##SFX(w1, g, N, (REAL)c.lr);                                           \
            else                                                                               \
                par_optim_##SFX(w1, m1, v1, g, N, &c);                                         \
            const par_cuda_update u = {k == 0 ? NULL : &c, c.lr, SIZE_MAX};                    \
            const cuda_coef_##SFX q = cuda_coef_of_##SFX(&u);                                  \
            for (size_t i = 0; i < N; i++) cuda_update_##SFX(&w2[i], &m2[i], &v2[i], g[i], &q); \
            char name[96];                                                                     \
            snprintf(name, sizeof name, "update body == the CPU's %s, %s", names[k], dn);      \
            par_check(memcmp(w1, w2, sizeof w1) == 0 && memcmp(m1, m2, sizeof m1) == 0 &&      \
                          memcmp(v1, v2, sizeof v1) == 0,                                      \
                      name);                                                                   \
        }                                                                                      \
    }                                                                                          \
    static void test_relu_##SFX(const char *dn)                                                \
    {                                                                                          \
        const REAL v[] = {(REAL)-0.0, (REAL)0.0, (REAL)NAN, (REAL)-NAN, (REAL)INFINITY,         \
                          (REAL)-INFINITY, (REAL)1e-40, (REAL)-1e-40, (REAL)1.5, (REAL)-1.5};  \
        enum { NV = sizeof v / sizeof v[0] };                                                  \
        REAL cpu[NV], gpu[NV];                                                                 \
        memcpy(cpu, v, sizeof v);                                                              \
        par_act_forward_##SFX(cpu, NV, PAR_ACT_RELU);                                          \
        for (size_t i = 0; i < NV; i++) gpu[i] = cuda_relu_##SFX(v[i]);                        \
        char name[96];                                                                         \
        snprintf(name, sizeof name, "relu body == par_act_forward on -0, NaN, inf, %s", dn);   \
        par_check(memcmp(cpu, gpu, sizeof cpu) == 0, name);                                    \
        /* next_up (--fault ulp) against the C library's nextafter */                          \
        REAL big = (REAL)1;                                                                    \
        for (int e = 0; e < 2000; e++) big = big * 2 < (REAL)INFINITY ? big * 2 : big;         \
        int same = 1;                                                                          \
        for (size_t i = 0; i < NV; i++) {                                                      \
            const REAL u[2] = {cuda_next_up_##SFX(v[i]), NEXTAFTER_##SFX(v[i], INFINITY)};     \
            same = same &&                                                                     \
                   (memcmp(&u[0], &u[1], sizeof u[0]) == 0 || (isnan(u[0]) && isnan(u[1])));   \
        }                                                                                      \
        const REAL edge[2] = {cuda_next_up_##SFX(big), cuda_next_up_##SFX(-big)};              \
        same = same && edge[0] == NEXTAFTER_##SFX(big, INFINITY) &&                            \
               edge[1] == NEXTAFTER_##SFX(-big, INFINITY);                                     \
        snprintf(name, sizeof name, "next_up body == nextafter(x, +inf) on -0, NaN, inf, %s", dn); \
        par_check(same, name);                                                                 \
    }

BODY_TESTS(float, f32)
BODY_TESTS(double, f64)

int main(void)
{
    test_dense_f32("f32");
    test_dense_f64("f64");
    test_softmax_f32("f32");
    test_softmax_f64("f64");
    test_update_f32("f32");
    test_update_f64("f64");
    test_relu_f32("f32");
    test_relu_f64("f64");
    // The gather body: a copy of the indexed records and their labels.
    float data[5 * 3], x[2 * 3];
    const int32_t lab_all[5] = {4, 3, 2, 1, 0}, idx[2] = {3, 1};
    int32_t lab[2];
    for (int i = 0; i < 15; i++) data[i] = (float)i;
    for (size_t t = 0; t < 6; t++) cuda_gather_f32(x, lab, data, lab_all, idx, 3, t / 3, t % 3);
    const float want[6] = {9, 10, 11, 3, 4, 5};
    par_check(memcmp(x, want, sizeof x) == 0 && lab[0] == 1 && lab[1] == 3,
              "gather body: records 3 and 1 with their labels");
    return par_test_exit();
}
