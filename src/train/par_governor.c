// The thread-count governor (par_governor.h). The master measures its own
// CPU time against the wall time of every WINDOW steps: on a quiet machine
// it runs (or spins) all the time; well below that it waited for a
// descheduled thread or was descheduled itself. Then (and on one thread,
// where such waits cannot show, always) it tries the other count for PROBE
// steps, keeps the faster by the mean step time beside the PROBE steps
// before, and waits twice as long (up to GAP_MAX steps) before it tries
// again while the count stays. From T threads it tries one again soon
// (GAP_T: it has seen waiting); from one thread it tries T blindly, so less
// often (GAP_1).
#include "par_governor.h"

enum { WINDOW = 8, PROBE = PAR_GOV_PROBE, GAP_T = 16, GAP_1 = 128, GAP_MAX = 1024 };
#define RAN_FRACTION 0.9   // CPU / wall above it: no thread waited for a time slice

void par_governor_init(par_governor *g, int T, par_threads_policy policy)
{
    *g = (par_governor){.T = T,
                        .cur = T,
                        .policy = T > 1 ? policy : PAR_THREADS_FIXED,
                        .next = WINDOW,   // as soon as the first window has been measured
                        .gap = GAP_T,
                        .probe = -1};
}

int par_governor_threads(const par_governor *g)
{
    switch (g->policy) {
    case PAR_THREADS_ALTERNATE:
        return g->n % 2 ? 1 : g->T;
    case PAR_THREADS_ADAPT:
        return g->probe >= 0 ? g->T + 1 - g->cur : g->cur;
    default:
        return g->T;
    }
}

// Adaptive accounting of one step (PAR_THREADS_ADAPT).
static void govern(par_governor *g, int threads, double wall, double cpu)
{
    if (g->probe >= 0) {
        g->probe_s += wall;
        if (++g->probe < PROBE) return;
        double before = 0;
        for (int i = 0; i < PROBE; i++) before += g->last[i];
        if (g->probe_s < before) {   // the other count was faster: keep it
            g->cur = threads;
            g->gap = threads == 1 ? GAP_1 : GAP_T;
        } else {
            g->gap = 2 * g->gap < GAP_MAX ? 2 * g->gap : GAP_MAX;
        }
        g->probe = -1;
        g->next = g->n + g->gap;
        g->win_n = 0;
        g->win_wall = g->win_cpu = 0;
        g->waited = 0;
        return;
    }
    g->last[g->n % PROBE] = wall;
    g->win_wall += wall;
    g->win_cpu += cpu;
    if (++g->win_n == WINDOW) {
        g->waited = g->win_cpu < RAN_FRACTION * g->win_wall;
        g->win_n = 0;
        g->win_wall = g->win_cpu = 0;
    }
    if (g->n >= g->next && (g->cur == 1 || g->waited)) {
        g->probe = 0;
        g->probe_s = 0;
    }
}

void par_governor_step(par_governor *g, int threads, double wall, double cpu)
{
    if (g->policy == PAR_THREADS_ADAPT) govern(g, threads, wall, cpu);
    g->one += threads == 1;
    g->n++;
}
