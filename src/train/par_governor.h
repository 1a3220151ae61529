// The thread-count governor of `omp` and `hybrid` (par_threads_policy;
// docs/performance.md, "Threads on a busy machine"). With another busy
// process on the cores the threads of a step wait for each other's time
// slices, and the step runs slower than on one thread. The governor says how
// many threads the next step runs on (T or 1) from the wall and CPU seconds
// of the steps before. Any count gives the same bits: exact mode computes
// every element as one thread does.
#ifndef PAR_GOVERNOR_H
#define PAR_GOVERNOR_H

#include "par_trainer.h"

enum { PAR_GOV_PROBE = 6 };

typedef struct par_governor {
    int T;                      // the most threads (cfg.threads)
    par_threads_policy policy;  // FIXED when T is 1
    int cur;                    // threads outside a probe: T or 1
    long n;                     // steps done
    long one;                   // steps run on one thread
    long next;                  // first step at which a probe may start
    long gap;                   // steps from a probe to the next
    int probe;                  // steps of the running probe done; -1: none
    double probe_s;             // their wall seconds
    double last[PAR_GOV_PROBE]; // wall seconds of the last steps outside a probe
    double win_wall, win_cpu;   // this window's wall and master CPU seconds
    int win_n;
    int waited;                 // the last full window on T threads ran below RAN_FRACTION
} par_governor;

void par_governor_init(par_governor *g, int T, par_threads_policy policy);

// The thread count of the next step.
int par_governor_threads(const par_governor *g);

// Accounts a step of `wall` seconds, of which the master thread ran `cpu`
// (par_thread_cpu; only read under PAR_THREADS_ADAPT), on `threads` threads.
void par_governor_step(par_governor *g, int threads, double wall, double cpu);

// Whether the governor needs the master's CPU time (PAR_THREADS_ADAPT).
static inline int par_governor_measures(const par_governor *g)
{
    return g->policy == PAR_THREADS_ADAPT;
}

#endif
