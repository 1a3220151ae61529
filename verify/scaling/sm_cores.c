// The cores' distance (sm_measure.h): the round trip of a cache line between
// the first two CPUs this process may run on, and which measurements met the
// nearest placement of the cores. The scaling model's probes and the
// harness's timings read it. Tests: tests/verify/test_timing.c.
#define _GNU_SOURCE   // sched_getaffinity, pthread_attr_setaffinity_np
#include "sm_measure.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "par_sort.h"
#include "par_time.h"

enum { RT_WARMUP = 200, RT_TRIPS = 2000, RT_REPEATS = 5 };

// One cache line bounced between two threads: ping writes 2i - 1 for the
// i-th round trip, pong answers 2i; -1 tells pong to stop (ping never started).
typedef struct bounce {
    _Alignas(64) atomic_long line;
    _Alignas(64) double ns[RT_REPEATS];   // ping's: ns per round trip of each repeat
} bounce;

static void *pong(void *arg)
{
    bounce *b = arg;
    for (long i = 1; i <= RT_WARMUP + (long)RT_REPEATS * RT_TRIPS; i++) {
        long v;
        while ((v = atomic_load_explicit(&b->line, memory_order_acquire)) != 2 * i - 1)
            if (v < 0) return NULL;
        atomic_store_explicit(&b->line, 2 * i, memory_order_release);
    }
    return NULL;
}

// Round trips *i + 1 .. *i + n, from ping's side.
static void round_trips(bounce *b, long *i, long n)
{
    for (const long end = *i + n; *i < end;) {
        ++*i;
        atomic_store_explicit(&b->line, 2 * *i - 1, memory_order_release);
        while (atomic_load_explicit(&b->line, memory_order_acquire) != 2 * *i) {
        }
    }
}

static void *ping(void *arg)
{
    bounce *b = arg;
    long i = 0;
    round_trips(b, &i, RT_WARMUP);   // both threads running, the line in a cache
    for (int r = 0; r < RT_REPEATS; r++) {
        const double t0 = par_now();
        round_trips(b, &i, RT_TRIPS);
        b->ns[r] = (par_now() - t0) * 1e9 / RT_TRIPS;
    }
    return NULL;
}

double sm_core_round_trip_ns(void)
{
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2) return NAN;
    int cpu[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &mask)) cpu[n++] = c;
    bounce *b = aligned_alloc(_Alignof(bounce), sizeof *b);
    if (!b) return NAN;
    atomic_init(&b->line, 0);
    void *(*const fn[2])(void *) = {pong, ping};
    pthread_t th[2];
    int started = 0;
    for (; started < 2; started++) {   // each thread pinned to its CPU from its start
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu[started], &one);
        pthread_attr_t a;
        if (pthread_attr_init(&a) != 0) break;
        const int ok = pthread_attr_setaffinity_np(&a, sizeof one, &one) == 0 &&
                       pthread_create(&th[started], &a, fn[started], b) == 0;
        pthread_attr_destroy(&a);
        if (!ok) break;
    }
    if (started == 1) atomic_store_explicit(&b->line, -1, memory_order_release);
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    const double ns = started == 2 ? par_median_sort(b->ns, RT_REPEATS) : NAN;
    free(b);
    return ns;
}

int sm_near_probes(const double (*rt)[2], int n, int near[])
{
    double fastest = INFINITY;   // fmin skips NAN
    for (int k = 0; k < n; k++) fastest = fmin(fastest, fmin(rt[k][0], rt[k][1]));
    int n_near = 0;
    for (int k = 0; k < n; k++) {
        near[k] = !(fmax(rt[k][0], rt[k][1]) > 2 * fastest);
        n_near += near[k];
    }
    return n_near;
}
