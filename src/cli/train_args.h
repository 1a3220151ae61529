// `parity train`'s flags: parsing, the checks that need no dataset, and the
// settings --resume DIR takes from a checkpoint. Private to cmd_train.c.
#ifndef TRAIN_ARGS_H
#define TRAIN_ARGS_H

#include <stdint.h>

#include "par_trainer.h"

typedef struct train_opts {
    const char *dataset, *model, *act, *trainer, *mode, *dtype;
    const char *log, *save, *init_save, *init_load, *fault;
    const char *ckpt_dir, *resume;
    int epochs, batch, chunk, threads, ranks, json, quiet, help, no_digest,
        fixed_threads, weights_by_messages;
    int steps, ckpt_every, keep, check_every;
    int warmup_steps;                         // --warmup-steps K: the first K steps not timed
    int upscale;                              // --upscale S: images resampled to S x S (0: off)
    double lr;
    uint64_t seed;
    const char *optim_s, *batch_s, *select;   // --optim, --batch B|full, --select
    double momentum, beta1, beta2, eps;       // NAN: not given (the defaults apply)
    par_optim optim;                          // resolved
    int batch_full, best_val;                 // --batch full, --select best-val
} train_opts;

// Parses the flags into *o, defaults first; prints the help for --help.
// Returns 0 to go on, -1 after --help, else the exit code (a bad flag).
int cli_train_parse(train_opts *o, int argc, char **argv);

// --batch B|full, --optim and its hyperparameters, --select: into o, or
// one line naming the flag and EXIT_USAGE.
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
