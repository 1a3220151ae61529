// Checkpoints of a training run (par_ckpt.c): the format below, writing a
// checkpoint atomically and keeping the last K, finding the newest valid one,
// loading its weights and optimizer state. Not a general store: one run per
// folder. Tests: tests/cli/test_resume.sh, tests/cli/test_faults.sh, tests/fuzz/fuzz_ckpt.c.
#ifndef PAR_CKPT_H
#define PAR_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "par_ckpt_log.h"
#include "par_dtype.h"
#include "par_model.h"
#include "par_status.h"

// A checkpoint of step S is two files in the checkpoint folder, each written
// atomically (temp file, fsync, rename, then the folder is fsynced), the
// .json last, so a checkpoint without its .json does not exist:
//   ckpt-SSSSSSSSSS.npz   the weights, one array per view exactly as
//                         par_weights_save writes them (numpy-readable, and
//                         usable as --init-load, which skips members
//                         "opt.*" and "best.*"), the optimizer state (SGD
//                         has none) as members "opt.<state>.<view>" shaped
//                         like the views (e.g. opt.m.layer0.weight), and
//                         with --select best-val the best epoch's weights
//                         as "best.<view>"
//   ckpt-SSSSSSSSSS.json  format and version, the run's position (epoch,
//                         records of that epoch done, step), the config it
//                         belongs to and its SHA-256, the SHA-256 of the
//                         .npz, where the JSONL log stood, who wrote it.
// A checkpoint is valid when its .json parses, its .npz has the recorded
// SHA-256 and loads for the model. The folder holds one run: `.lock`
// (flock) keeps a second writer out.

// Everything a resumed run must share with the run that wrote the
// checkpoint. The trainer, mode, threads, ranks, epochs and steps may
// differ (exact mode is bitwise the same for every trainer).
typedef struct par_ckpt_config {
    char model[128], act[16], dtype[8];
    char optimizer[128];        // "sgd", or the optimizer with its hyperparameters
    long batch, chunk;
    double lr;                  // as given (the trainer rounds it to dtype)
    uint64_t seed;
    char init_sha256[65];       // of the initial weights (seed or --init-load)
    char dataset[512];          // name or folder as given (not hashed)
    uint64_t n_train_file, n_test, n_train, n_val, features, classes;
    char data_sha256[65];       // of the pixels and labels of both files
} par_ckpt_config;

typedef struct par_ckpt_meta {
    int version;                // PAR_CKPT_VERSION
    long step;                  // steps done
    int epoch;                  // epoch in progress (0-based)
    uint64_t pos;               // records of that epoch's order done
    par_ckpt_config cfg;
    char config_sha256[65];
    char npz[64];               // file name of the weights in the folder
    char npz_sha256[65];
    int has_log;
    par_ckpt_log log;
    char trainer[16], mode[8];  // of the run that wrote it (information)
    int threads, ranks;
    long every;                 // its --checkpoint-every and --keep
    int keep;
    int optim_n;                // optimizer state arrays in the .npz (0 for SGD)
    char optim_names[2][16];    // their names ("velocity"; "m", "v")
    long optim_t;               // optimizer updates done
    // --select of the run ("last" or "best-val"; not part of the config:
    // "" in checkpoints written before it existed, read as "last"); with
    // best-val and has_best, the best epoch so far, whose weights are the
    // .npz members "best.<view>".
    char select[16];
    int has_best, best_epoch;   // best_epoch 0-based
    double best_val_loss, best_val_acc, best_test_loss, best_test_acc;
    // The run's other settings, so that `--resume DIR` alone continues it
    // (not part of the config: has_run 0 in checkpoints written before).
    int has_run;
    int run_epochs, run_steps;  // --epochs, --steps (0: no limit)
    int upscale, no_digest;     // --upscale (0: off), --no-digest
} par_ckpt_meta;

// Optimizer state to store with a checkpoint or to load from one: n arrays
// (0 for SGD) of n_params elements of the run's dtype, named, and t.
typedef struct par_ckpt_optim {
    int n;
    const char *names[2];
    void *arr[2];
    long t;
} par_ckpt_optim;

#define PAR_CKPT_VERSION 1

// SHA-256 of the canonical text of c (every field but the dataset name).
void par_ckpt_config_sha256(char out[65], const par_ckpt_config *c);

// 0 if a and b agree on every hashed field; else 1 with "--flag: checkpoint
// X, this run Y" for the first field that differs in why.
int par_ckpt_config_diff(char *why, size_t cap, const par_ckpt_config *ckpt,
                         const par_ckpt_config *run);

// An open checkpoint folder, locked against other writers.
typedef struct par_ckpt_dir par_ckpt_dir;

// Opens (creating it when `create`, one level) and locks folder `path`,
// removes temp files that a killed run left there, and checks that it can
// write there. With `fresh`, fails (PAR_ERR_CONFIG) if the folder already
// holds checkpoints, naming the newest.
par_status par_ckpt_dir_open(par_ckpt_dir **d, const char *path, int create, int fresh);
void par_ckpt_dir_close(par_ckpt_dir *d);
const char *par_ckpt_dir_path(const par_ckpt_dir *d);

// Writes the checkpoint of meta->step (fills meta->npz, meta->npz_sha256 and
// meta->config_sha256), then deletes all but the newest `keep` checkpoints.
// On failure nothing new is left in the folder and older checkpoints are
// untouched.
par_status par_ckpt_write(par_ckpt_dir *d, par_ckpt_meta *meta, const par_model *m, par_dtype dt,
                          const void *params, int keep);
// The same with the optimizer state os (NULL or n == 0: none, as for SGD)
// and, when meta->has_best, the best epoch's weights `best` (n_params of dt).
par_status par_ckpt_write_ex(par_ckpt_dir *d, par_ckpt_meta *meta, const par_model *m,
                             par_dtype dt, const void *params, const par_ckpt_optim *os,
                             const void *best, int keep);

// Loads the best epoch's weights of a found checkpoint with has_best.
par_status par_ckpt_load_best(const char *path, const par_ckpt_meta *meta, const par_model *m,
                              par_dtype dt, void *best);

// The newest valid checkpoint of folder `path` into *meta. Checkpoints that
// are not valid are skipped; `skipped` (cap bytes, may be NULL) gets one
// "name: reason" per skipped one, "; "-separated. PAR_ERR_IO or
// PAR_ERR_FORMAT when there is no valid one, with the reasons.
par_status par_ckpt_find(par_ckpt_meta *meta, const char *path, char *skipped, size_t cap);

// Loads the weights of a found checkpoint (n_params of dt) for model m,
// checking the .npz's SHA-256 again.
par_status par_ckpt_load(const char *path, const par_ckpt_meta *meta, const par_model *m,
                         par_dtype dt, void *params);

// Loads the optimizer state of a found checkpoint into os->arr[0..meta->optim_n)
// (allocated by the caller, n_params of dt each); sets os->n and os->t. Fails
// unless the checkpoint holds exactly the arrays named names[0..n) (the
// run's optimizer), each for every view of m.
par_status par_ckpt_load_optim(const char *path, const par_ckpt_meta *meta, const par_model *m,
                               par_dtype dt, int n, const char *const names[2],
                               par_ckpt_optim *os);

// The optimizer state members "opt.<names[i]>.<view>" of any .npz (e.g. a
// checkpoint's, without its .json: no SHA-256 check) into arr[0..n), n_params
// of dt each; PAR_ERR_FORMAT naming the first missing or mis-shaped member.
par_status par_npz_load_optim(const char *npz, const par_model *m, par_dtype dt, int n,
                              const char *const names[2], void *arr[2]);

// Parses the text of a checkpoint .json (from `path`, for messages).
par_status par_ckpt_meta_parse(par_ckpt_meta *meta, const char *text, size_t len,
                               const char *path);

#endif
