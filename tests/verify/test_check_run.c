// One `parity check` through the library (verify/check/chk_run.h): the
// records of --samples parsed and refused, a serial step checked end to end
// (LOCAL bounds pass, CONTRACT bitwise against the reference, the records
// those of `parity train`'s step), given records, and a momentum step S > 1
// whose weights carry no optimizer state refused with its stage named.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chk_run.h"
#include "par_fixtures.h"
#include "par_io.h"
#include "par_test.h"

static void parse(void)
{
    size_t *idx = NULL, B = 0;
    const int ok = chk_records_parse("0,17,3", 20, &idx, &B) == PAR_OK;
    par_check(ok && B == 3 && idx[0] == 0 && idx[1] == 17 && idx[2] == 3,
              "--samples 0,17,3: three records in the order given");
    free(idx);
    const char *bad[] = {"1,x", "-1", "5,20", "", "3,", NULL};
    int refused = 1;
    for (int i = 0; bad[i]; i++) {
        refused &= chk_records_parse(bad[i], 20, &idx, &B) == PAR_ERR_CONFIG && !idx && B == 0;
        char want[120];
        snprintf(want, sizeof want, "--samples '%s': expected record numbers below 20, "
                 "separated by commas", bad[i]);
        refused &= strcmp(par_last_error(), want) == 0;
    }
    par_check(refused, "--samples 1,x / -1 / 5,20 / '' / '3,': refused, named, nothing kept");
}

static chk_run_cfg config(const par_dataset *ds, const par_model *m, const par_optim *o)
{
    return (chk_run_cfg){.tr = par_trainer_find("serial"), .ds = ds, .m = m, .dt = PAR_F32,
                         .mode = PAR_MODE_EXACT, .optim = o, .batch = 8, .chunk = 4,
                         .lr = 0.01, .threads = 1, .seed = 7, .step = 3,
                         .check = {.prec = 128, .threads = 1, .end_to_end = 0}};
}

static void step(const par_dataset *ds, const par_model *m)
{
    const par_optim sgd = par_optim_default(PAR_OPTIM_SGD);
    const chk_run_cfg cfg = config(ds, m, &sgd);
    chk_run r;
    if (par_ran(chk_run_step(&r, &cfg), "a serial step checked")) {
        size_t *want = NULL, B = 0;
        int epoch = -1;
        PAR_REQUIRE(chk_step_records(&want, &B, &epoch, ds, 7, 8, 3));
        par_check(r.failed == CHK_RUN_OK && r.run.B == 8 && B == 8 && r.epoch == epoch &&
                      memcmp(r.idx, want, 8 * sizeof *want) == 0,
                  "step 3's records: those of parity train's step 3 with seed 7");
        par_check(r.contract && r.rep.n > 0 && r.rep.n_fail == 0,
                  "serial exact: LOCAL within the bounds and CONTRACT bitwise, every row passes");
        free(want);
    }
    chk_run_free(&r);

    chk_run_cfg given = cfg;
    given.samples = "5,1,4";
    if (par_ran(chk_run_step(&r, &given), "given records checked"))
        par_check(r.run.B == 3 && r.idx[0] == 5 && r.idx[1] == 1 && r.idx[2] == 4 &&
                      r.rep.n_fail == 0,
                  "--samples 5,1,4: those three records, in that order, pass");
    chk_run_free(&r);
    given.samples = "5,1000000";
    par_check(chk_run_step(&r, &given) == PAR_ERR_CONFIG && r.failed == CHK_RUN_SAMPLES,
              "a record beyond the split: PAR_ERR_CONFIG at the samples stage");
    chk_run_free(&r);
}

// Weights alone (no opt.*) for step 3 of momentum: the state before it is missing.
static void missing_state(const par_dataset *ds, const par_model *m)
{
    char path[] = "/tmp/par_check_run_XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    char npz[64];
    snprintf(npz, sizeof npz, "%s.npz", path);
    float *w = malloc(m->n_params * sizeof *w);
    par_model_init(m, PAR_F32, 7, w);
    PAR_REQUIRE(par_weights_save(npz, m, PAR_F32, w));
    const par_optim mom = par_optim_default(PAR_OPTIM_MOMENTUM);
    chk_run_cfg cfg = config(ds, m, &mom);
    cfg.weights = npz;
    chk_run r;
    const par_status st = chk_run_step(&r, &cfg);
    par_check(st != PAR_OK && r.failed == CHK_RUN_OPTIM_STATE,
              "momentum step 3 from weights without opt.*: refused at the optimizer state");
    chk_run_free(&r);
    cfg.step = 1;   // update 0: a fresh state, the weights alone are enough
    par_check(chk_run_step(&r, &cfg) == PAR_OK && r.rep.n_fail == 0,
              "momentum step 1 from the same weights: checked, passes");
    chk_run_free(&r);
    free(w);
    unlink(npz);
    unlink(path);
}

int main(void)
{
    par_dataset ds;
    fixture_dataset(&ds, 64);
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-16-10", PAR_ACT_RELU));
    parse();
    step(&ds, &m);
    missing_state(&ds, &m);
    par_dataset_free(&ds);
    return par_test_exit();
}
