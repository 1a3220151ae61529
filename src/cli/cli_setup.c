// The flags every training command resolves the same way (--act, --model,
// --mode, --dtype, --fault, --trainer with --threads): one place for their
// checks and their error lines; and the hint for a --model whose input does not
// fit the dataset. Tests: tests/cli/test_cli.sh, tests/cli/test_first_hour.sh.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "par_engine.h"

int cli_numerics_resolve(const char *cmd, const cli_numerics_flags *f, cli_numerics *out)
{
    char hint[64];
    snprintf(hint, sizeof hint, "run 'parity %s --help'", cmd);
    memset(out, 0, sizeof *out);
    out->fault.kind = PAR_FAULT_NONE;
    par_status st = par_act_parse(&out->act, f->act);
    if (st == PAR_OK) st = par_model_parse(&out->m, f->model, out->act);
    if (st == PAR_OK && f->mode) st = par_mode_parse(&out->mode, f->mode);
    if (st == PAR_OK && f->fault) st = par_fault_parse(&out->fault, f->fault);
    if (st != PAR_OK) return cli_fail(cmd, st, hint);

    if (strcmp(f->dtype, "f32") == 0) {
        out->dt = PAR_F32;
    } else if (strcmp(f->dtype, "f64") == 0) {
        out->dt = PAR_F64;
    } else {
        fprintf(stderr, "parity %s: --dtype '%s': expected f32 or f64\n", cmd, f->dtype);
        return EXIT_USAGE;
    }
    if (!f->trainer) return 0;
    out->tr = par_trainer_find(f->trainer);
    if (!out->tr) {
        fprintf(stderr, "parity %s: --trainer '%s': expected one of", cmd, f->trainer);
        for (int i = 0; par_trainers[i]; i++) fprintf(stderr, " %s", par_trainers[i]->name);
        fprintf(stderr, "\nhint: mpi, hybrid and root need a build with -DPARITY_MPI=ON\n");
        if (strcmp(f->trainer, "cuda") == 0)
            fprintf(stderr, "hint: cuda needs a build with nvcc (-DPARITY_CUDA=ON; docs/gpu.md)\n");
        return EXIT_USAGE;
    }
    if (f->fault && strcmp(out->tr->name, "reference") == 0) {
        // Faults live in the engine (engine_fault.c); the reference never reads them.
        fprintf(stderr, "parity %s: --fault '%s': trainer reference takes no faults (only serial, "
                "omp, mpi, hybrid and root do)\n", cmd, f->fault);
        fprintf(stderr, "hint: drop --fault, or give --trainer serial\n");
        return EXIT_USAGE;
    }
    if (f->threads > 1 && !(out->tr->caps & PAR_CAP_THREADS)) {
        fprintf(stderr, "parity %s: --threads %d: trainer %s runs one thread\n", cmd, f->threads,
                out->tr->name);
        fprintf(stderr, "hint: use --trainer omp or hybrid for threads\n");
        return EXIT_USAGE;
    }
    return 0;
}

const char *cli_input_hint(const par_model *m, const par_dataset *ds)
{
    static char buf[300];
    const par_images *im = &ds->train;
    if (strncmp(m->spec, "cnn:", 4) == 0)
        snprintf(buf, sizeof buf, "begin the CNN with the image shape of %s, channels x height x "
                 "width: cnn:%zux%zux%zu-...", ds->name, im->channels, im->height, im->width);
    else
        snprintf(buf, sizeof buf, "leave out --model for the default MLP, or make its first "
                 "number the input size: mlp:%zu-...", im->n_features);
    return buf;
}
