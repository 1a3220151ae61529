// Loss-curve plots of a case through gnuplot (Debian gnuplot-nox, pngcairo):
// top, every config's loss per step over the reference's, log-scale; below,
// |loss - reference| / reference per step (exact configs are 0: not drawn).
// No plotting code of our own: a script and inline data piped to gnuplot.
#define _POSIX_C_SOURCE 200809L
#include "vf_harness.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void datablock(FILE *p, int id, const json_t *losses, const json_t *ref, int rel)
{
    fprintf(p, "$d%d << EOD\n", id);
    size_t k;
    json_t *v;
    int any = 0;
    json_array_foreach(losses, k, v) {
        const double l = json_number_value(v);
        if (!rel) {
            if (l > 0 && isfinite(l)) fprintf(p, "%zu %.9g\n", k + 1, l), any = 1;
            continue;
        }
        const double q = json_number_value(json_array_get(ref, k));
        const double d = fabs(l - q) / fabs(q);
        if (d > 0 && isfinite(d)) fprintf(p, "%zu %.9g\n", k + 1, d), any = 1;
    }
    if (!any) fprintf(p, "NaN NaN\n");
    fprintf(p, "EOD\n");
}

static void title(char *buf, size_t n, const json_t *cf)
{
    snprintf(buf, n, "%s %s T=%d R=%d", json_string_value(json_object_get(cf, "trainer")),
             json_string_value(json_object_get(cf, "mode")),
             (int)json_integer_value(json_object_get(cf, "threads")),
             (int)json_integer_value(json_object_get(cf, "ranks")));
}

// Whether an executable `name` is on $PATH.
static int in_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[4096];
    while (path && *path) {
        const size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, name);
        if (n > 0 && access(buf, X_OK) == 0) return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

par_status vf_plot_case(const json_t *cres, const char *dir, char *file, size_t file_size)
{
    const char *name = json_string_value(json_object_get(cres, "name"));
    const json_t *ref = json_object_get(json_object_get(cres, "reference"), "losses");
    const json_t *configs = json_object_get(cres, "configs");
    snprintf(file, file_size, "loss-%s.png", name);
    PAR_FAIL_IF(strchr(dir, '\'') || strchr(dir, '\n'), PAR_ERR_IO,
                "plot skipped: the output folder's name has a quote or newline");
    PAR_FAIL_IF(!in_path("gnuplot"), PAR_ERR_IO,
                "plot skipped: gnuplot not found (apt-get install gnuplot-nox)");
    struct sigaction ign = {0}, old;
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old);   // gnuplot may stop reading early
    FILE *p = popen("gnuplot 2>/dev/null", "w");
    if (!p) sigaction(SIGPIPE, &old, NULL);
    PAR_FAIL_IF(!p, PAR_ERR_IO, "plot skipped: cannot start gnuplot");
    fprintf(p, "set terminal pngcairo size 1200,%d font ',10'\n", 900);
    fprintf(p, "set output '%s/%s'\n", dir, file);
    datablock(p, 0, ref, ref, 0);
    size_t i;
    json_t *cf;
    json_array_foreach(configs, i, cf) {
        datablock(p, (int)(2 * i + 1), json_object_get(cf, "losses"), ref, 0);
        datablock(p, (int)(2 * i + 2), json_object_get(cf, "losses"), ref, 1);
    }
    fprintf(p, "set xrange [1:%zu]\n", json_array_size(ref) > 1 ? json_array_size(ref) : 2);
    fprintf(p, "set multiplot layout 2,1\n"
               "set key outside right top font ',8'\n"
               "set grid\nset logscale y\nset xlabel 'step'\n"
               "set format y '%%g'\n");
    fprintf(p, "set title \"case %s: training loss (batch mean), reference and every config\"\n", name);
    fprintf(p, "set ylabel 'loss'\nplot $d0 with lines lw 4 lc rgb 'black' title 'reference'");
    char t[128];
    json_array_foreach(configs, i, cf) {
        title(t, sizeof t, cf);
        fprintf(p, ", $d%zu with lines lw 1 title '%s'", 2 * i + 1, t);
    }
    int n_fast = 0;
    json_array_foreach(configs, i, cf)
        n_fast += strcmp(json_string_value(json_object_get(cf, "mode")), "fast") == 0;
    // Exact mode only: no second panel (gnuplot fails on a log-scale plot
    // of nothing but NaN).
    if (n_fast == 0) fprintf(p, "\nunset multiplot\nset output\n");
    else fprintf(p, "\nset title \"fast mode: |loss - reference| / reference per step (exact mode: 0)\"\n"
                    "set ylabel 'relative difference'\nset format y '%%.0e'\nplot NaN notitle");
    json_array_foreach(configs, i, cf) {
        if (n_fast == 0) break;
        if (strcmp(json_string_value(json_object_get(cf, "mode")), "fast") != 0) continue;
        title(t, sizeof t, cf);
        fprintf(p, ", $d%zu with lines lw 1 title '%s'", 2 * i + 2, t);
    }
    if (n_fast > 0) fprintf(p, "\nunset multiplot\nset output\n");
    const int status = pclose(p);
    sigaction(SIGPIPE, &old, NULL);
    PAR_FAIL_IF(status == -1 || !WIFEXITED(status), PAR_ERR_IO, "plot skipped: gnuplot failed");
    PAR_FAIL_IF(WEXITSTATUS(status) != 0, PAR_ERR_IO, "plot skipped: gnuplot failed (exit %d)",
                WEXITSTATUS(status));
    return PAR_OK;
}
