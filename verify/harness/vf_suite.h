// Verify suites: a small INI-like file of `[case NAME]` sections with
// `key = value` lines (format: verify/suites/README.md), parsed into cases,
// and each case expanded into its configs (trainers x modes x threads x ranks
// that the trainer supports). Parsing only: the runner is vf_harness.h.
#ifndef VF_SUITE_H
#define VF_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "par_status.h"

enum { VF_MAX_LIST = 16, VF_MAX_CHECKS = 8, VF_MAX_CASES = 64, VF_MAX_CONFIGS = 256 };

// The trainer of an external case's configs (a trainer parity did not
// build, run by the case's command; not a name of the trainer table).
#define VF_EXTERNAL "external"

// check_steps entries: a step number >= 1, or one of these.
enum { VF_STEP_FIRST = -1, VF_STEP_LAST = -2 };

typedef struct vf_config {
    char trainer[16];
    int mode;                   // par_mode
    int threads, ranks;
} vf_config;

typedef struct vf_case {
    char name[64];
    int line;                   // line of its [case NAME] header
    // external = NAME: the case's configs are a trainer parity did not build,
    // one per world count (in ranks; configs' trainer VF_EXTERNAL, threads 1),
    // each run by `command` with "{world}" replaced by the count ("": none).
    char external[64];
    char command[1024];
    char dataset[256], model[128], act[16], dtype[8], fault[64];
    int batch, chunk;           // batch 0: `batch = full` (the whole training split)
    int upscale;                // `parity train --upscale S` (0: off)
    char optim[16];             // sgd, momentum, nesterov, adam
    // Optimizer hyperparameters; NAN when not given (parity train's defaults apply).
    double momentum, beta1, beta2, eps;
    long steps;                 // 0 when epochs is given
    int epochs;                 // 0 when steps is given
    double lr;
    uint64_t seed;
    int n_trainers, n_modes, n_threads, n_ranks;
    char trainers[VF_MAX_LIST][16];
    int modes[VF_MAX_LIST];     // par_mode
    int threads[VF_MAX_LIST], ranks[VF_MAX_LIST];
    int repeats, warmup;        // timed rounds (at most, with precision), untimed rounds
                                //   before them
    double precision;           // adaptive rounds: a row stops being timed once its speedup
                                //   interval's half-width is at most this share of it
                                //   (after VF_ADAPT_MIN_ROUNDS rounds); 0: every round runs
    double window;              // seconds the serial exact config's timed window should
                                //   last (steps found by a calibration run); 0: the case's steps
    int n_predict;              // rank counts the scaling model predicts (0: none)
    int predict[VF_MAX_LIST];
    int check_fast_only;        // check_configs = fast: MPFR checks of the reference and the
                                //   fast configs only (exact ones inherit the reference's)
    int n_check_steps;         // 0: `check_steps = none`
    long check_steps[VF_MAX_CHECKS];   // >= 1, VF_STEP_FIRST or VF_STEP_LAST
    int n_configs;              // expanded, filtered, deduplicated
    vf_config configs[VF_MAX_CONFIGS];
} vf_case;

typedef struct vf_suite {
    char path[512];
    char name[128];             // file name without folders
    char sha256[65];            // of the file's bytes
    int n_cases;
    vf_case cases[VF_MAX_CASES];
    // On PAR_ERR_CONFIG: "SUITE:LINE: key 'x': what was expected" (or the
    // line's problem when it is not a key line); empty otherwise.
    char error[600];
} vf_suite;

// Reads and validates a suite file. Keys (defaults in brackets): dataset
// [fashion-mnist], upscale [none], model [mlp:784-256-128-10], act [relu],
// dtype [f32], batch [64; or full], chunk [8], optim [sgd] with momentum
// (momentum, nesterov), beta1, beta2, eps (adam) [parity train's defaults],
// steps or epochs (one of them: required), lr [0.01], seed [42], trainers
// (required; serial, omp, mpi, hybrid, root), modes [exact], threads [1],
// ranks [1], repeats [3], warmup [1], window [1: seconds of the timed
// window on serial exact; 0: the case's steps], check_steps [first, last],
// predict [none: rank counts for the scaling model's predicted rows],
// fault [none; tests only]; or, instead of trainers, external (a label),
// command (required with it) and world [1]: a trainer parity did not build. Returns PAR_ERR_CONFIG with s->error set for
// any mistake in the file, PAR_ERR_IO when it cannot be read. s is large:
// allocate it, don't put it on the stack.
par_status vf_suite_load(vf_suite *s, const char *path);

// The file of suite `name` into path (n bytes): name itself when it is a
// file, else, for a name without '/', verify/suites/<name> of the source tree
// src_dir when that is a file ("" or NULL: none), else name.
void vf_suite_path(char *path, size_t n, const char *name, const char *src_dir);

// Whether trainer `name` runs with T threads and R ranks: serial T=1,R=1;
// omp R=1; mpi T=1; hybrid and root any; unknown names never.
int vf_trainer_supports(const char *name, int threads, int ranks);

// Whether the trainer runs one process per MPI rank (mpi, hybrid, root).
int vf_trainer_is_mpi(const char *name);

// Whether cf is an external case's config (a world of its command).
int vf_config_is_external(const vf_config *cf);

#endif
