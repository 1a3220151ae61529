// The checker's report (rows of compared tensors, their statistics and
// verdicts), the dtype constants of the bounds, and the CONTRACT view: a run
// in exact mode against the reference, bit for bit. No MPFR here; no printing
// (src/cli/cmd_check.c formats the report). Tests: tests/verify/test_check*.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_check.h"

double chk_unit_roundoff(par_dtype dt)
{
    return dt == PAR_F32 ? 0x1p-24 : 0x1p-53;
}

double chk_gamma(size_t n, par_dtype dt)
{
    const double nu = (double)n * chk_unit_roundoff(dt);
    return nu < 1 ? nu / (1 - nu) : INFINITY;
}

double chk_ulp_of(double x, par_dtype dt)
{
    const int p = dt == PAR_F32 ? 24 : 53, emin = dt == PAR_F32 ? -126 : -1022;
    int e = emin;
    if (x != 0 && isfinite(x)) {
        (void)frexp(x, &e); // |x| in [2^(e-1), 2^e)
        e -= 1;
        if (e < emin) e = emin;
    }
    return ldexp(1.0, e - p + 1);
}

const char *chk_view_name(chk_view v)
{
    return v == CHK_LOCAL ? "LOCAL" : v == CHK_E2E ? "E2E" : "CONTRACT";
}

const char *chk_verdict_name(chk_verdict v)
{
    return v == CHK_PASS ? "PASS" : v == CHK_FAIL ? "FAIL" : "info";
}

void chk_format_index(char *buf, size_t size, const chk_tensor *t, size_t flat)
{
    if (t->n == 0)
        snprintf(buf, size, "-");
    else if (t->ndim == 2 && t->shape[1] > 0)
        snprintf(buf, size, "[%zu,%zu]", flat / t->shape[1], flat % t->shape[1]);
    else
        snprintf(buf, size, "[%zu]", flat);
}

chk_tensor *chk_report_add(chk_report *r, chk_view v, const char *name, int ndim, size_t d0,
                           size_t d1, size_t n_red, int has_bound)
{
    if (r->n == r->cap) {
        const size_t cap = r->cap ? 2 * r->cap : 64;
        chk_tensor *t = realloc(r->t, cap * sizeof *t);
        if (!t) return NULL;
        r->t = t;
        r->cap = cap;
    }
    chk_tensor *t = &r->t[r->n++];
    memset(t, 0, sizeof *t);
    t->view = v;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 0;
    t->n_red = n_red;
    t->has_bound = has_bound;
    t->worst_key = -1;
    return t;
}

chk_tensor chk_tensor_blank(const chk_tensor *t)
{
    chk_tensor b = *t;
    b.n = b.n_over = 0;
    b.max_abs = b.max_rel = b.max_ulp = b.bound_ratio = 0;
    b.worst = 0;
    b.worst_run = b.worst_exact = b.worst_err = b.worst_ulp = b.worst_bound = 0;
    b.worst_key = -1;
    return b;
}

// NaN compares as the largest value: a NaN error is worst, never hidden.
static int above(double a, double b)
{
    return a > b || (a != a && b == b);
}

void chk_tensor_record(chk_tensor *t, size_t idx, double run, double exact, double err, double ulp,
                       double bound)
{
    if (err != err) err = INFINITY;
    if (ulp != ulp) ulp = INFINITY;
    const double rel = err == 0 ? 0 : exact != 0 ? err / fabs(exact) : INFINITY;
    double key = ulp;
    t->n++;
    if (t->has_bound) {
        const double ratio = err == 0 ? 0 : bound > 0 ? err / bound : INFINITY;
        if (!(err <= bound)) t->n_over++;
        if (above(ratio, t->bound_ratio)) t->bound_ratio = ratio;
        key = ratio;
    }
    if (above(err, t->max_abs)) t->max_abs = err;
    if (above(rel, t->max_rel)) t->max_rel = rel;
    if (above(ulp, t->max_ulp)) t->max_ulp = ulp;
    if (above(key, t->worst_key) || (key == t->worst_key && idx < t->worst)) {
        t->worst_key = key;
        t->worst = idx;
        t->worst_run = run;
        t->worst_exact = exact;
        t->worst_err = err;
        t->worst_ulp = ulp;
        t->worst_bound = t->has_bound ? bound : NAN;
    }
}

void chk_tensor_merge(chk_tensor *dst, const chk_tensor *p)
{
    if (p->n == 0) return;
    dst->n += p->n;
    dst->n_over += p->n_over;
    if (above(p->max_abs, dst->max_abs)) dst->max_abs = p->max_abs;
    if (above(p->max_rel, dst->max_rel)) dst->max_rel = p->max_rel;
    if (above(p->max_ulp, dst->max_ulp)) dst->max_ulp = p->max_ulp;
    if (above(p->bound_ratio, dst->bound_ratio)) dst->bound_ratio = p->bound_ratio;
    if (above(p->worst_key, dst->worst_key) ||
        (p->worst_key == dst->worst_key && p->worst < dst->worst)) {
        dst->worst_key = p->worst_key;
        dst->worst = p->worst;
        dst->worst_run = p->worst_run;
        dst->worst_exact = p->worst_exact;
        dst->worst_err = p->worst_err;
        dst->worst_ulp = p->worst_ulp;
        dst->worst_bound = p->worst_bound;
    }
}

void chk_report_finish(chk_report *r)
{
    r->n_fail = 0;
    for (size_t k = 0; k < r->n; k++) {
        chk_tensor *t = &r->t[k];
        if (t->view == CHK_E2E && !t->has_bound)
            t->verdict = CHK_INFO;
        else
            t->verdict = t->n_over ? CHK_FAIL : CHK_PASS;
        r->n_fail += t->verdict == CHK_FAIL;
    }
}

void chk_report_free(chk_report *r)
{
    free(r->t);
    memset(r, 0, sizeof *r);
}

// ---- CONTRACT: exact mode is the reference, bit for bit ------------------------

static int same_bits(par_dtype dt, const void *a, const void *b, size_t i)
{
    const size_t sz = par_dtype_size(dt);
    return memcmp((const char *)a + i * sz, (const char *)b + i * sz, sz) == 0;
}

// One row: elements [off, off + n) of a and b (b is the reference).
static par_status contract_row(chk_report *r, const char *name, int ndim, size_t d0, size_t d1,
                               par_dtype dt, const void *a, const void *b, size_t off, size_t n)
{
    chk_tensor *t = chk_report_add(r, CHK_CONTRACT, name, ndim, d0, d1, 0, 0);
    PAR_FAIL_IF(!t, PAR_ERR_ALLOC, "out of memory for the report");
    for (size_t i = 0; i < n; i++) {
        const double x = par_get_real(dt, a, off + i), y = par_get_real(dt, b, off + i);
        const double err = isfinite(x) && isfinite(y) ? fabs(x - y) : INFINITY;
        chk_tensor_record(t, i, x, y, err, err / chk_ulp_of(y, dt), NAN);
        t->n_over += !same_bits(dt, a, b, off + i);
    }
    return PAR_OK;
}

const char *chk_bn_stat_name(int k)
{
    static const char *const names[CHK_BN_N] = {"sum", "mean", "sqdev", "var", "inv"};
    return k >= 0 && k < CHK_BN_N ? names[k] : "?";
}

par_status chk_check_contract(chk_report *r, const chk_step *run, const chk_step *ref)
{
    const par_model *m = run->m;
    PAR_FAIL_IF(ref->m != m || ref->dt != run->dt || ref->B != run->B, PAR_ERR_CONFIG,
                "contract check: the two steps differ in model, dtype or batch");
    char name[40];
    for (int l = 0; l < m->n_layers; l++) {
        if (!run->bn[l] || !ref->bn[l]) continue;
        const size_t nc = m->layers[l].c_out;
        for (int k = 0; k < CHK_BN_N; k++) {
            snprintf(name, sizeof name, "layer%d.bn.%s", l, chk_bn_stat_name(k));
            PAR_TRY(contract_row(r, name, 1, nc, 0, run->dt, run->bn[l], ref->bn[l], k * nc, nc));
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int v = 0; v < m->n_views; v++) {
            const par_view *pv = &m->views[v];
            snprintf(name, sizeof name, "%s.%s", pv->name, pass == 0 ? "grad" : "new");
            PAR_TRY(contract_row(r, name, pv->ndim, pv->shape[0], pv->ndim == 2 ? pv->shape[1] : 0,
                                 run->dt, pass == 0 ? run->g : run->w_new,
                                 pass == 0 ? ref->g : ref->w_new, pv->offset, pv->count));
        }
    }
    const int ns = par_optim_n_state(run->optim.kind);   // the optimizer's new state
    for (int i = 0; i < ns && ref->optim.kind == run->optim.kind; i++) {
        for (int v = 0; v < m->n_views; v++) {
            const par_view *pv = &m->views[v];
            snprintf(name, sizeof name, "%s.%s.new", pv->name,
                     par_optim_state_name(run->optim.kind, i));
            PAR_TRY(contract_row(r, name, pv->ndim, pv->shape[0], pv->ndim == 2 ? pv->shape[1] : 0,
                                 run->dt, run->s_new[i], ref->s_new[i], pv->offset, pv->count));
        }
    }
    chk_tensor *t = chk_report_add(r, CHK_CONTRACT, "loss", 1, 1, 0, 0, 0);
    PAR_FAIL_IF(!t, PAR_ERR_ALLOC, "out of memory for the report");
    const double err = fabs(run->loss - ref->loss);
    chk_tensor_record(t, 0, run->loss, ref->loss, isfinite(err) ? err : INFINITY,
                      err / chk_ulp_of(ref->loss, run->dt), NAN);
    t->n_over += memcmp(&run->loss, &ref->loss, sizeof(double)) != 0;
    chk_report_finish(r);
    return PAR_OK;
}
