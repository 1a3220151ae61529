// The `parity` command line: subcommands and a small flag parser. Only this
// folder prints to the user and chooses exit codes (docs/CONTRIBUTING.md, "Errors"):
// 0 ok, 1 verification failed, 2 usage, 3 runtime error.
#ifndef PAR_CLI_H
#define PAR_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "par_data.h"
#include "par_model.h"
#include "par_status.h"
#include "par_trainer.h"

enum { EXIT_OK = 0, EXIT_VERIFY = 1, EXIT_USAGE = 2, EXIT_RUNTIME = 3 };

typedef enum cli_kind {
    CLI_STR, CLI_INT, CLI_U64, CLI_DOUBLE, CLI_FLAG, CLI_LONG, CLI_SIZE
} cli_kind;

typedef struct cli_opt {
    const char *name;      // "--batch"
    cli_kind kind;
    void *dst;             // const char **, int *, uint64_t *, double *, int * (flag), long *,
                           // size_t * (LONG, SIZE: the integers of INT)
    const char *help;      // "N  samples per batch (64)"
} cli_opt;

// The bounded spin of the binary's OpenMP threads (omp_wait.c): when the
// environment sets neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY, executes the
// binary again, once, with GOMP_SPINCOUNT=CLI_OMP_SPINCOUNT (libgomp reads it
// before main); returns in the process that goes on, with both variables
// out of its environment again. Called first in main().
#define CLI_OMP_SPINCOUNT "3000"
void cli_omp_wait(char **argv);

// Parses argv[first..argc) into opts (NULL-name terminated). Positional
// arguments go to pos[0..max_pos), *n_pos set. On a bad flag prints one line
// naming it and what was expected, then a hint, and returns EXIT_USAGE.
int cli_parse(const char *cmd, int argc, char **argv, int first, const cli_opt *opts,
              const char **pos, int max_pos, int *n_pos);

// The name of names[0..n) nearest to word[0..len) by edit distance, when it is
// near enough to be what was meant (a few edits); else NULL. The did-you-mean
// of every unknown flag (cli_parse) and of anything else a user misspells.
const char *cli_nearest(const char *word, size_t len, const char *const *names, size_t n);

// Prints the flag table of opts to stdout.
void cli_usage(const char *synopsis, const cli_opt *opts);

// The flags of a command that takes no positional argument: cli_parse from
// argv[2], then, when *help was set, cli_usage(synopsis). -1 to go on, else
// the exit code (EXIT_OK after the help, EXIT_USAGE after a bad flag).
int cli_flags(const char *cmd, int argc, char **argv, const cli_opt *opts, const int *help,
              const char *synopsis);

// The last library error as a user reads it; with PARITY_DEBUG=1 in the
// environment, prefixed by its origin ("par_data.c:571: ..."). Static buffer.
const char *cli_error_text(void);

// Prints "parity CMD: <last error>" (cli_error_text) and "hint: HINT" if hint
// is not NULL; returns the exit code for st (2 for config errors, else 3).
int cli_fail(const char *cmd, par_status st, const char *hint);

// Ctrl-C and SIGTERM set the returned flag (for ext_opts.interrupted) until
// cli_stop_release puts the previous handlers back (cli_stop.c).
volatile int *cli_stop_catch(void);
void cli_stop_release(void);

// The numerics flags of the training commands, as given (mode, fault and
// trainer may be NULL: not resolved), and resolved.
typedef struct cli_numerics_flags {
    const char *act, *model, *mode, *dtype, *fault, *trainer;
    int threads;
} cli_numerics_flags;
typedef struct cli_numerics {
    par_act act;
    par_model m;
    par_mode mode;
    par_dtype dt;
    par_fault fault;                 // kind PAR_FAULT_NONE when --fault was not given
    const par_trainer_ops *tr;       // NULL when no trainer was asked for
} cli_numerics;

// Resolves f for `parity cmd`: 0 when every value is good, else prints one
// line naming the flag and what was expected (and a hint) and returns the
// exit code.
int cli_numerics_resolve(const char *cmd, const cli_numerics_flags *f, cli_numerics *out);

// The hint for a --model whose input size is not that of ds's samples, in the
// model's own grammar: "cnn:1x28x28-..." for a CNN, "mlp:784-..." for an MLP.
// Static buffer.
const char *cli_input_hint(const par_model *m, const par_dataset *ds);

// --optim NAME and its hyperparameters as given (NAN: not given, the
// default applies), shared by train, check and lockstep.
typedef struct cli_optim_flags {
    const char *name;
    double momentum, beta1, beta2, eps;
} cli_optim_flags;

// Resolves f into *out: 0, or one line naming the flag and the value (a
// hyperparameter of another optimizer, or out of range), a hint, EXIT_USAGE.
int cli_optim_resolve(const char *cmd, const cli_optim_flags *f, par_optim *out);

// --batch B|full: *batch = B (0 is left for the caller's count check) and
// *full = 0, or *full = 1; 0, or one line and EXIT_USAGE.
int cli_batch_parse(const char *cmd, const char *s, int *batch, int *full);

int cmd_train(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_lockstep(int argc, char **argv);
int cmd_table(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bisect(int argc, char **argv);
int cmd_version(int argc, char **argv);

#endif
