// The machine while timings run (vf_harness.h): the load averages and the
// runnable tasks of /proc/loadavg, the CPU time stolen by the hypervisor
// from /proc/stat and the summary of the cores' distance (the round trips of
// sm_measure.h), recorded in results.json's provenance and each case's
// timing. Kept apart from vf_prov.c so that its tests need no MPFR.
// Tests: tests/verify/test_timing.c.
#include "vf_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "par_sort.h"

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

json_t *vf_round_trip_summary_json(const json_t *probes)
{
    const size_t n = json_array_size(probes);
    double *ns = malloc((n > 0 ? n : 1) * sizeof *ns);
    if (!ns) return json_null();
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(probes, i);
        ns[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    json_t *o = vf_round_trip_summary(ns, (int)n);
    free(ns);
    return o;
}
