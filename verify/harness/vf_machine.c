// The machine while timings run (vf_harness.h): the load averages and the
// runnable tasks of /proc/loadavg, the CPU time stolen by the hypervisor
// from /proc/stat and the round trip of a cache line between two cores,
// recorded in results.json's provenance and each case's timing. Kept apart
// from vf_prov.c so that its tests need no MPFR. Tests: tests/test_timing.c.
#define _GNU_SOURCE   // sched_getaffinity, pthread_attr_setaffinity_np
#include "vf_harness.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "par_sort.h"
#include "par_time.h"

json_t *vf_loadavg_json(const char *path)
{
    FILE *f = fopen(path ? path : "/proc/loadavg", "r");
    if (!f) return json_null();
    double l[3];
    const int n = fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]);
    fclose(f);
    if (n != 3) return json_null();
    return json_pack("[f, f, f]", l[0], l[1], l[2]);
}

int vf_runnable_read(const char *path)
{
    FILE *f = fopen(path ? path : "/proc/loadavg", "r");
    if (!f) return -1;
    double l[3];
    int running = -1, total;
    if (fscanf(f, "%lf %lf %lf %d/%d", &l[0], &l[1], &l[2], &running, &total) != 5) running = -1;
    fclose(f);
    return running;
}

par_status vf_cpu_ticks_read(vf_cpu_ticks *t, const char *path)
{
    const char *p = path ? path : "/proc/stat";
    FILE *f = fopen(p, "r");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot read %s", p);
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice
    unsigned long long v[8];
    const int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                         &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    PAR_FAIL_IF(n != 8, PAR_ERR_FORMAT, "%s: expected a first line 'cpu' and 8 tick counts "
                "(user ... steal)", p);
    t->total = 0;
    for (int i = 0; i < 8; i++) t->total += v[i];
    t->steal = v[7];
    return PAR_OK;
}

double vf_steal_percent(const vf_cpu_ticks *a, const vf_cpu_ticks *b)
{
    if (b->total <= a->total || b->steal < a->steal) return NAN;
    return 100.0 * (double)(b->steal - a->steal) / (double)(b->total - a->total);
}

// ---- the distance between two cores ------------------------------------------------

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

double vf_core_round_trip_ns(void)
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

json_t *vf_round_trip_summary(const double *ns, int n)
{
    double *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    if (!x) return json_null();
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(ns[i])) x[m++] = ns[i];
    json_t *o = json_pack("{s:i, s:i}", "probes", n, "measured", m);
    if (m > 0) {
        const double median = par_median_sort(x, m), lo = x[0], hi = x[m - 1];
        int far = 0;
        for (int i = 0; i < m && hi > 2 * lo; i++) far += x[i] > 2 * lo;
        json_object_set_new(o, "min", json_real(lo));
        json_object_set_new(o, "median", json_real(median));
        json_object_set_new(o, "max", json_real(hi));
        json_object_set_new(o, "far", json_integer(far));
    }
    free(x);
    return o;
}

int vf_near_probes(const double (*rt)[2], int n, int near[])
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
