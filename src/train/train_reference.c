// `reference`: the plain serial reference of reference/ in the trainer table.
// Exact by definition; --mode fast is refused rather than silently ignored.
#include <string.h>

#include "par_trainer.h"
#include "ref_train.h"

static par_status reference_create(const par_run_cfg *cfg, void **state)
{
    *state = NULL;
    PAR_FAIL_IF(cfg->mode != PAR_MODE_EXACT, PAR_ERR_CONFIG,
                "--trainer reference: only --mode exact exists (it defines exact)");
    ref_trainer *t;
    PAR_TRY(ref_create(&t, cfg->model, cfg->dtype, cfg->chunk, cfg->lr, cfg->init_params));
    if (cfg->optim && cfg->optim->kind != PAR_OPTIM_SGD) {
        static const ref_optim_kind kinds[] = {REF_SGD, REF_MOMENTUM, REF_NESTEROV, REF_ADAM};
        const par_optim *o = cfg->optim;
        par_status st = ref_set_optimizer(t, kinds[o->kind], o->momentum, o->beta1, o->beta2,
                                          o->eps);
        if (st != PAR_OK) {
            ref_destroy(t);
            return st;
        }
    }
    *state = t;
    return PAR_OK;
}

static par_status reference_get_optim(void *state, par_optim_state *out)
{
    out->n = ref_optim_state(state, out->arr, &out->t);
    return PAR_OK;
}

static par_status reference_set_optim(void *state, const par_optim_state *in)
{
    void *arr[2];
    long t;
    const int n = ref_optim_state(state, arr, &t);
    PAR_FAIL_IF(in->n != n || in->t < 0, PAR_ERR_CONFIG,
                "reference: optimizer state of %d arrays at step %ld, expected %d arrays", in->n,
                in->t, n);
    const size_t bytes = ref_n_params(state) * par_dtype_size(ref_dtype(state));
    for (int i = 0; i < n; i++) memcpy(arr[i], in->arr[i], bytes);
    ref_set_optim_steps(state, in->t);
    return PAR_OK;
}

static par_status reference_step(void *state, const par_batch *batch, double *loss)
{
    return ref_step(state, batch->x, batch->labels, batch->B, loss);
}

static par_status reference_params(void *state, const void **w, size_t *n)
{
    *w = ref_params(state);
    *n = ref_n_params(state);
    return PAR_OK;
}

static par_status reference_set_params(void *state, const void *w)
{
    ref_set_params(state, w);
    return PAR_OK;
}

static par_status reference_grad(void *state, const void **g)
{
    *g = ref_grad(state);
    return PAR_OK;
}

static par_status reference_stats(void *state, par_trainer_stats *out)
{
    double ph[4];
    ref_phase_seconds(state, ph);
    out->phase[PAR_PHASE_FORWARD] = ph[0];
    out->phase[PAR_PHASE_BACKWARD] = ph[1];
    out->phase[PAR_PHASE_WGRAD] = ph[2];
    out->phase[PAR_PHASE_UPDATE] = ph[3];
    return PAR_OK;
}

static void reference_destroy(void *state) { ref_destroy(state); }

const par_trainer_ops par_trainer_reference = {
    .name = "reference",
    .summary = "the plain serial reference (reference/): defines exact",
    .caps = 0,
    .create = reference_create,
    .step = reference_step,
    .params = reference_params,
    .destroy = reference_destroy,
    .stats = reference_stats,
    .set_params = reference_set_params,
    .grad = reference_grad,
    .get_optim = reference_get_optim,
    .set_optim = reference_set_optim,
};
