// Modes and optimizers by name: parsing, printing, their defaults and the
// number and names of an optimizer's state arrays (par_trainer.h). The
// update formulas themselves are the kernels' (par_kernels.h).
#include <string.h>

#include "par_trainer.h"

par_status par_mode_parse(par_mode *mode, const char *name)
{
    if (strcmp(name, "exact") == 0) *mode = PAR_MODE_EXACT;
    else if (strcmp(name, "fast") == 0) *mode = PAR_MODE_FAST;
    else return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                              "--mode '%s': expected exact or fast", name);
    return PAR_OK;
}

const char *par_mode_name(par_mode mode) { return mode == PAR_MODE_FAST ? "fast" : "exact"; }

static const char *const optim_names[] = {"sgd", "momentum", "nesterov", "adam"};

par_optim par_optim_default(par_optim_kind kind)
{
    const par_optim o = {kind, 0.9, 0.9, 0.999, 1e-8};
    return o;
}

par_status par_optim_parse(par_optim_kind *kind, const char *name)
{
    for (int k = 0; k < 4; k++)
        if (strcmp(name, optim_names[k]) == 0) {
            *kind = (par_optim_kind)k;
            return PAR_OK;
        }
    return par_set_error(PAR_ERR_CONFIG, __FILE__, __LINE__,
                         "--optim '%s': expected sgd, momentum, nesterov or adam", name);
}

const char *par_optim_name(par_optim_kind kind)
{
    return (unsigned)kind < 4 ? optim_names[kind] : "?";
}

int par_optim_n_state(par_optim_kind kind)
{
    return kind == PAR_OPTIM_ADAM ? 2 : kind == PAR_OPTIM_SGD ? 0 : 1;
}

const char *par_optim_state_name(par_optim_kind kind, int i)
{
    if (kind == PAR_OPTIM_ADAM) return i == 0 ? "m" : "v";
    return "velocity";
}
