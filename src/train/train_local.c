// The single-process trainers: `serial` (one thread) and `omp` (cfg.threads
// OpenMP threads). Both fold the chunks of the whole batch in order inside
// the weight-gradient kernel; with threads splitting samples and parameter
// rows, every element is the serial one (exact mode). `omp` may run a step
// on one thread when that is faster (a busy machine; the governor below):
// the same bits either way, which test_trainers checks with the thread
// count changing every step.
#include <stdlib.h>
#include <string.h>

#include "par_engine.h"
#include "par_time.h"

// The governor of omp's thread count (PAR_THREADS_ADAPT; docs/performance.md,
// "Threads on a busy machine"). With another busy process on the cores the
// threads of a step wait for each other's time slices and the step runs
// slower than on one thread. The master measures its own CPU time against
// the wall time of every WINDOW steps: on a quiet machine it runs (or spins)
// all the time; well below that it waited for a descheduled thread or was
// descheduled itself. Then (and on one thread, where such waits cannot show,
// always) it tries the other count for PROBE steps, keeps the faster by the
// mean step time beside the PROBE steps before, and waits twice as long
// (up to GAP_MAX steps) before it tries again while the count stays. From T
// threads it tries one again soon (GAP_T: it has seen waiting); from one
// thread it tries T blindly, so less often (GAP_1).
enum { WINDOW = 8, PROBE = 6, GAP_T = 16, GAP_1 = 128, GAP_MAX = 1024 };
#define RAN_FRACTION 0.9   // CPU / wall above it: no thread waited for a time slice

typedef struct local_state {
    par_engine e;           // first: the par_engine_*_op helpers take the state as the engine
    int T;                  // cfg.threads
    par_threads_policy policy;
    int cur;                // threads outside a probe: T or 1
    long n;                 // steps done
    long one;               // steps run on one thread
    long next;              // first step at which a probe may start
    long gap;               // steps from a probe to the next (GAP_T or GAP_1 doubled)
    int probe;              // steps of the running probe done; -1: none
    double probe_s;         // their wall seconds
    double last[PROBE];     // wall seconds of the last PROBE steps outside a probe
    double win_wall, win_cpu;   // this window's wall and master CPU seconds
    int win_n;
    int waited;             // the last full window on T threads ran below RAN_FRACTION
} local_state;

static par_status create_common(const par_run_cfg *cfg, void **state, int threads)
{
    *state = NULL;
    local_state *s = calloc(1, sizeof *s);
    PAR_FAIL_IF(!s, PAR_ERR_ALLOC, "out of memory");
    par_run_cfg c = *cfg;
    c.threads = threads;
    par_status st = par_engine_init(&s->e, &c);
    if (st != PAR_OK) {
        free(s);
        return st;
    }
    s->T = s->cur = threads;
    s->policy = threads > 1 ? cfg->threads_policy : PAR_THREADS_FIXED;
    s->next = WINDOW;   // as soon as the first window has been measured
    s->gap = GAP_T;
    s->probe = -1;
    *state = s;
    return PAR_OK;
}

static par_status serial_create(const par_run_cfg *cfg, void **state)
{
    return create_common(cfg, state, 1);
}

static par_status omp_create(const par_run_cfg *cfg, void **state)
{
    return create_common(cfg, state, cfg->threads);
}

// The thread count of the next step.
static int threads_now(const local_state *s)
{
    switch (s->policy) {
    case PAR_THREADS_ALTERNATE:
        return s->n % 2 ? 1 : s->T;
    case PAR_THREADS_ADAPT:
        return s->probe >= 0 ? s->T + 1 - s->cur : s->cur;
    default:
        return s->T;
    }
}

// Accounts a step of `wall` seconds (the master ran `cpu` of them) on `threads`.
static void govern(local_state *s, int threads, double wall, double cpu)
{
    if (s->probe >= 0) {
        s->probe_s += wall;
        if (++s->probe < PROBE) return;
        double before = 0;
        for (int i = 0; i < PROBE; i++) before += s->last[i];
        if (s->probe_s < before) {   // the other count was faster: keep it
            s->cur = threads;
            s->gap = threads == 1 ? GAP_1 : GAP_T;
        } else {
            s->gap = 2 * s->gap < GAP_MAX ? 2 * s->gap : GAP_MAX;
        }
        s->probe = -1;
        s->next = s->n + s->gap;
        s->win_n = 0;
        s->win_wall = s->win_cpu = 0;
        s->waited = 0;
        return;
    }
    s->last[s->n % PROBE] = wall;
    s->win_wall += wall;
    s->win_cpu += cpu;
    if (++s->win_n == WINDOW) {
        s->waited = s->win_cpu < RAN_FRACTION * s->win_wall;
        s->win_n = 0;
        s->win_wall = s->win_cpu = 0;
    }
    if (s->n >= s->next && (s->cur == 1 || s->waited)) {
        s->probe = 0;
        s->probe_s = 0;
    }
}

static par_status local_step(void *state, const par_batch *batch, double *loss)
{
    local_state *s = state;
    par_engine *e = &s->e;
    const size_t B = batch->B, n_chunks = par_n_chunks(B, e->C);
    PAR_FAIL_IF(B == 0 || B > e->B_cap, PAR_ERR_CONFIG, "batch of %zu samples, expected 1..%zu", B,
                e->B_cap);
    e->threads = threads_now(s);   // at most the count the engine was made for
    const double t0 = par_now(), c0 = s->policy == PAR_THREADS_ADAPT ? par_thread_cpu() : 0;
    par_engine_begin_step(e);
    par_engine_step(e, batch);
    *loss = par_engine_loss_mean(e, par_engine_loss_fold(e, B, 0, n_chunks, 0, 0), B);
    if (s->policy == PAR_THREADS_ADAPT)
        govern(s, e->threads, par_now() - t0, par_thread_cpu() - c0);
    s->one += e->threads == 1;
    s->n++;
    e->threads = s->T;   // params, set_params and the rest: every thread
    return PAR_OK;
}

static par_status local_stats(void *state, par_trainer_stats *out)
{
    const local_state *s = state;
    memcpy(out->phase, s->e.phase, sizeof out->phase);
    out->threads_adaptive = s->policy == PAR_THREADS_ADAPT;
    out->steps_one_thread = s->T > 1 ? s->one : 0;
    return PAR_OK;
}

static void local_destroy(void *state)
{
    if (!state) return;
    par_engine_free(state);
    free(state);
}

const par_trainer_ops par_trainer_serial = {
    .name = "serial",
    .summary = "kernels, one thread",
    .caps = 0,
    .create = serial_create,
    .step = local_step,
    .params = par_engine_params_op,
    .destroy = local_destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
    .stats = local_stats,
};

const par_trainer_ops par_trainer_omp = {
    .name = "omp",
    .summary = "OpenMP threads (--threads T): samples and weight rows split among threads",
    .caps = PAR_CAP_THREADS,
    .create = omp_create,
    .step = local_step,
    .params = par_engine_params_op,
    .destroy = local_destroy,
    .set_params = par_engine_set_params_op,
    .grad = par_engine_grad_op,
    .get_optim = par_engine_get_optim_op,
    .set_optim = par_engine_set_optim_op,
    .stats = local_stats,
};
