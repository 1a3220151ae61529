// `parity lockstep --external CMD`: a trainer parity did not build, checked
// step by step under the any-order bound (verify/external/ext_lockstep.h):
// flags to a job, one call, one line (or JSON) of the result. Exit 0 within
// every bound, 1 a violation or a narrower arithmetic's signature, 2 usage,
// 3 the trainer failed or broke the protocol. Tests: tests/external/test_external.sh.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "cmd_lockstep_ext.h"
#include "ext_check.h"

// |got - centre| in ulps of the run's dtype at the centre.
static double ulps_of(const ext_worst *w, par_dtype dt)
{
    const double c = fabs(w->centre), u = dt == PAR_F32 ? 0x1p-23 : 0x1p-52;
    int e;
    frexp(c > 0 ? c : (dt == PAR_F32 ? 0x1p-126 : 0x1p-1022), &e);
    return fabs(w->got - w->centre) / ldexp(u, e - 1);
}

// Whether a violation is in a batchnorm layer's op or running statistics.
static int in_batchnorm(const ext_worst *w)
{
    return strstr(w->op, "batchnorm") || strstr(w->tensor, ".running_");
}

void cmd_lockstep_ext_print(const ext_lockstep_result *r, par_dtype dt)
{
    const int pass = ext_lockstep_pass(r);
    printf("lockstep external '%s' (world %d), %ld steps: %zu violations, worst |diff|/bound "
           "%.3g (%s%s, step %ld), worst loss ratio %.3g", r->name, r->world, r->steps,
           r->violations, r->worst.ratio, r->worst.tensor, r->worst.index, r->worst.step,
           r->worst_loss_ratio);
    if (r->intermediates)
        printf("; %s from its own values: %zu violations, worst %.3g (%s%s, step %ld); its "
               "rounding %.3gx parity's (%s, step %ld)",
               r->layers_checked ? "every op" : "its update", r->local_violations,
               r->local_worst.ratio, r->local_worst.tensor, r->local_worst.index,
               r->local_worst.step, r->signature, r->signature_tensor, r->signature_step);
    else
        printf("; no gradients sent: the update and the rounding's size are not checked");
    printf(": %s\n", pass ? "PASS" : "FAIL");
    const ext_worst *firsts[2] = {r->local_violations ? &r->local_first : NULL,
                                  r->violations ? &r->first : NULL};
    for (int k = 0; k < 2; k++) {   // the op the trainer got wrong first, then the step's bound
        const ext_worst *f = firsts[k];
        if (!f) continue;
        printf("first violation%s: step %ld, %s%s: the trainer has %.9g, the bound allows %.9g "
               "+- %.3g (%.3g times the bound, %.3g ulps)%s%s%s\n",
               k ? " of the step's bound" : " of its own ops", f->step, f->tensor, f->index,
               f->got, f->centre, f->bound, f->ratio, ulps_of(f, dt), f->op[0] ? " [" : "",
               f->op, f->op[0] ? "]" : "");
    }
    if (r->world > 1 && ((r->local_violations && in_batchnorm(&r->local_first)) ||
                         (r->violations && in_batchnorm(&r->first))))
        printf("batchnorm at world %d: each rank normalising its own samples by its own "
               "statistics looks like this (DDP's BatchNorm; SyncBatchNorm uses the whole "
               "batch's, as parity's reference does)\n", r->world);
    if (r->signature_flagged)
        printf("its rounding is %.3g times parity's on the same op (%s, step %ld): "
               "not summed in %s (TF32, bf16 or another narrower arithmetic looks like this)\n",
               r->signature, r->signature_tensor, r->signature_step, par_dtype_name(dt));
}

int cmd_lockstep_ext_job(ext_lockstep_job *job, const lockstep_ext_flags *f)
{
    *job = (ext_lockstep_job){
        .cfg = {.m = f->m, .act = f->act, .dt = f->dt, .batch = f->batch, .chunk = f->chunk,
                .optim = {(int)f->optim->kind, f->lr, f->optim->momentum, f->optim->beta1,
                          f->optim->beta2, f->optim->eps},
                .seed = f->seed, .steps = f->steps, .ulps = ext_ulps_default(),
                .want_intermediates = f->intermediates,
                .proto = {.command = f->command, .timeout_s = f->timeout_s,
                          .interrupted = NULL}},
        .dataset = f->dataset, .init_load = f->init_load};
    if (f->ulps && ext_ulps_parse_list(&job->cfg.ulps, f->ulps) != PAR_OK)
        return cli_fail("lockstep", PAR_ERR_CONFIG, NULL);
    return 0;
}

int cmd_lockstep_ext_run(const char *cmd, ext_lockstep_job *job, ext_job_fn fn, void *result)
{
    job->cfg.proto.interrupted = cli_stop_catch();   // Ctrl-C: stop the trainer, clean up
    int opening = 0;
    const par_status st = ext_job_run(job, &opening, fn, result);
    cli_stop_release();
    if (st == PAR_OK) return EXIT_OK;
    return cli_fail(cmd, st,
                    opening ? "run data/fetch.sh (or ci/setup.sh) to install the datasets"
                    : st == PAR_ERR_EXTERNAL ? "docs/external.md says what a trainer must "
                                               "answer, and in which files"
                                             : NULL);
}

int cmd_lockstep_external(const lockstep_ext_flags *f)
{
    ext_lockstep_job job;
    int rc = cmd_lockstep_ext_job(&job, f);
    ext_lockstep_result r;
    if (!rc) rc = cmd_lockstep_ext_run("lockstep", &job, ext_lockstep_fn, &r);
    if (rc) return rc;
    if (f->json) {
        json_t *j = ext_lockstep_json(&r);
        char *s = json_dumps(j, JSON_REAL_PRECISION(17));
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        cmd_lockstep_ext_print(&r, f->dt);
    }
    return ext_lockstep_pass(&r) ? EXIT_OK : EXIT_VERIFY;
}
