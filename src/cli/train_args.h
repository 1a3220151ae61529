// `parity train`'s flags: parsing, the checks that need no dataset, and the
// settings --resume DIR takes from a checkpoint. Private to cmd_train.c.
#ifndef TRAIN_ARGS_H
#define TRAIN_ARGS_H

#include <stdint.h>

#include "par_session.h"

// `parity train`'s flags. Most land straight in the session's settings
// (cfg: par_session.h, par_run.h, par_trainer.h; the flag table in
// train_args.c names each field); the ones typed as names are kept as
// typed here and resolved into cfg by cmd_train.c.
typedef struct train_opts {
    par_session_cfg cfg;                      // what the session runs (flags given, defaults)
    // As typed: --model (NULL: the default MLP for the dataset's features),
    // --act, --trainer, --mode, --dtype, --fault (NULL: none).
    const char *model, *act, *trainer, *mode, *dtype, *fault;
    const char *optim_s, *batch_s, *select;   // --optim, --batch B|full, --select
    double momentum, beta1, beta2, eps;       // NAN: not given (the defaults apply)
    par_optim optim;                          // --optim and its hyperparameters, resolved
    int batch_full;                           // --batch full
    int fixed_threads;                        // --fixed-threads: cfg.run.cfg.threads_policy
    int ranks;                                // --ranks R: launch R ranks (-1: not given)
    int json, quiet, help;                    // --json, --quiet, --help: what the CLI prints
} train_opts;

// Parses the flags into *o, defaults first; prints the help for --help.
// Returns 0 to go on, -1 after --help, else the exit code (a bad flag).
int cli_train_parse(train_opts *o, int argc, char **argv);

// --batch B|full, --optim and its hyperparameters, --select: into o and
// o->cfg, or one line naming the flag and EXIT_USAGE.
int cli_train_extras(train_opts *o);

// The counts (>= 1), --lr > 0, --upscale <= 1024, --checkpoint-every and
// --keep only with a checkpoint folder, no --init-save with --resume: 0, or
// one line (and a hint) and EXIT_USAGE.
int cli_train_check_flags(const train_opts *o);

// Every output path (--save, --init-save, --log, --checkpoint-dir) checked
// before the run starts, so that a typo costs no training: 0, or one line
// naming the flag and the path and EXIT_USAGE.
int cli_train_check_outputs(const train_opts *o);

// Whether `flag` was typed ("--flag V" or "--flag=V").
int cli_flag_given(int argc, char **argv, const char *flag);

// OMP_NUM_THREADS's first number into *threads (unset or empty: unchanged);
// 0, or one line and EXIT_USAGE.
int cli_threads_from_env(int *threads);

// --resume DIR: every setting not typed is taken from DIR's newest valid
// checkpoint (nothing happens when it has none: the resume says why).
void cli_train_resume_defaults(train_opts *o, int argc, char **argv);

#endif
