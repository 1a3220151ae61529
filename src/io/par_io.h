// Files a run writes and reads: weights as NumPy .npz (one array per view of
// the parameter buffer, loadable with numpy.load), and the JSONL step log.
// Every file is written to "<path>.tmp.<pid>" and renamed into place, so a
// failure never leaves a half-written file under the final name; except the
// JSONL log, appended line by line in place (whole lines, each flushed).
#ifndef PAR_IO_H
#define PAR_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "par_dtype.h"
#include "par_model.h"
#include "par_status.h"

// One array of an .npz archive.
typedef struct par_array {
    char name[64];        // archive member without ".npy"
    par_dtype dtype;      // '<f4' or '<f8'
    int ndim;
    size_t shape[4];
    size_t count;         // product of shape
    void *data;           // count elements, owned by the archive
} par_array;

typedef struct par_npz {
    size_t n;
    par_array *arrays;
} par_npz;

// Writes arrays[0..n) as an uncompressed .npz (members "<name>.npy",
// format version 1.0, little-endian, C order). Atomic (temp + rename).
par_status par_npz_write(const char *path, const par_array *arrays, size_t n);

// Reads an .npz (stored or deflated members, as numpy writes them) holding
// '<f4' or '<f8' arrays in C order. Errors name the file and the member.
par_status par_npz_read(par_npz *out, const char *path);
void par_npz_free(par_npz *z);

// Weights of model m (buffer of dtype dt) as one array per view, named and
// shaped like m->views (dense weight (n_out, n_in) as torch.nn.Linear).
par_status par_weights_save(const char *path, const par_model *m, par_dtype dt, const void *params);

// Loads weights saved for the same architecture: every view present, with
// the same shape; arrays of the other dtype are converted (f64 -> f32 is a
// rounding, reported by nothing; save in the run's dtype to be exact).
par_status par_weights_load(const char *path, const par_model *m, par_dtype dt, void *params);

// parity writes every output file whole: a temporary file renamed over the
// old one. So an existing path must be a regular file (or a link to one):
// renaming over a device, pipe or folder entry would replace it (as root,
// `--save /dev/null` would replace /dev/null). PAR_ERR_IO naming the path
// otherwise; PAR_OK when the path does not exist yet.
par_status par_out_check(const char *path);

// Creates the folder path and any missing parents (mode & ~umask), like
// `mkdir -p`; PAR_OK when it exists already. PAR_ERR_IO naming the path
// when it cannot be made or is not a folder.
par_status par_mkdirs(const char *path, unsigned mode);

// SHA-256 of n bytes as 64 lowercase hex chars + NUL (libsodium).
void par_sha256_hex(char out[65], const void *data, size_t n);
// SHA-256 over n buffers in order, as one stream.
void par_sha256_parts(char out[65], const void *const *parts, const size_t *sizes, int n);
// SHA-256 of a file's bytes.
par_status par_sha256_file(char out[65], const char *path);
// XXH3-128 (seed 0) of n bytes as 32 lowercase hex chars + NUL (libxxhash),
// in the canonical byte order `xxh128sum` prints. Fast (about 10 us for the
// default MLP's 0.94 MB) but not cryptographic: for the per-step digests of
// the step log only; artefacts (weights, checkpoints, .npz, results) keep
// SHA-256. data may be NULL when n is 0.
void par_xxh128_hex(char out[33], const void *data, size_t n);

// JSONL step log: one JSON object per line, written to the path as it goes
// (each line flushed; the file is truncated on open).
typedef struct par_log par_log;
par_status par_log_open(par_log **log, const char *path);
// {"type":"step","epoch":e,"step":s,"loss":l} and, if weights_xxh128 is not
// NULL, "weights_xxh128" (par_xxh128_hex of the weight buffer after the step)
// and "loss_xxh128" (of the loss's 8 f64 bytes): the per-step digests
// `parity bisect --logs` and the harness compare. XXH3-128, not SHA-256: one
// digest of all weights every step must cost little beside the step
// (docs/train.md); logs of parity before it carried "weights_sha256".
par_status par_log_step(par_log *log, int epoch, long step, double loss,
                        const char *weights_xxh128);
// The refusal of line `line` of log `path`, a step line of parity before
// XXH3-128 step digests ("weights_sha256"): PAR_ERR_FORMAT, never a compare
// of a SHA-256 with an XXH3 digest.
par_status par_log_old_digests(const char *path, long line);
// {"type":"epoch","epoch":e,"step":s,"val_loss":..,"val_accuracy":..,"test_loss":..,"test_accuracy":..}
par_status par_log_epoch(par_log *log, int epoch, long step, double val_loss, double val_acc,
                         double test_loss, double test_acc);
// Flushes, fsyncs and closes; frees log. Returns the first error seen.
par_status par_log_close(par_log *log);
// Closes without a final fsync (after a failed run), keeping the whole lines
// written so far; frees log.
void par_log_discard(par_log *log);

// ---- checkpoints (par_ckpt.c) ----
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

// Where the JSONL log stood at the checkpoint: its first `bytes` bytes
// (`lines` lines, SHA-256 `sha256`) are the log up to the checkpoint's step.
typedef struct par_ckpt_log {
    char path[1024];            // --log as given
    char tmp[1100];             // the file it was written to: path (before: a temp file)
    long lines;
    uint64_t bytes;
    char sha256[65];
} par_ckpt_log;

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

// ---- the log's place in a checkpoint (par_ckpt_log.c) ----
// Follows the file of a par_log (its path, made absolute) so that checkpoints
// can record where the log stood.
typedef struct par_ckpt_logtrack par_ckpt_logtrack;
par_status par_ckpt_log_track(par_ckpt_logtrack **t, const char *log_path);
// Makes the log durable up to now (fsync) and describes it in *out.
par_status par_ckpt_log_sync(par_ckpt_logtrack *t, par_ckpt_log *out);
void par_ckpt_log_untrack(par_ckpt_logtrack *t);

// Continuing a log, in two steps (the first before par_log_open, which
// could truncate the file that holds the lines, should the pid be reused):
// par_ckpt_log_find reads the first from->bytes bytes recorded by a
// checkpoint (from from->tmp, then from->path, then also_path) into
// *prefix (malloc'd; the file used goes to used) after checking their
// SHA-256; par_ckpt_log_replay writes those lines again through `log`
// (par_log_step and par_log_epoch write the same bytes for the same values)
// and checks that the tracked temp file now holds exactly those bytes.
// Both refuse (PAR_ERR_FORMAT naming the file) a log of parity before
// XXH3-128 step digests ("weights_sha256" step lines): written again, its
// lines would change; par_ckpt_log_find does so before anything is opened.
par_status par_ckpt_log_find(char **prefix, char *used, size_t cap, const par_ckpt_log *from,
                             const char *also_path);
par_status par_ckpt_log_replay(par_log *log, par_ckpt_logtrack *t, const par_ckpt_log *from,
                               const char *prefix, const char *src);

#endif
