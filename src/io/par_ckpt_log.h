// The JSONL log at a checkpoint (par_ckpt_log.c): where it stood (bytes,
// lines, SHA-256), kept up to date as the log grows, and how a resumed run
// finds those lines and writes them again, so that its log equals an
// uninterrupted run's. Tests: tests/cli/test_resume.sh, tests/unit/test_session.c.
#ifndef PAR_CKPT_LOG_H
#define PAR_CKPT_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "par_log.h"

// Where the JSONL log stood at the checkpoint: its first `bytes` bytes
// (`lines` lines, SHA-256 `sha256`) are the log up to the checkpoint's step.
typedef struct par_ckpt_log {
    char path[1024];            // --log as given
    char tmp[1100];             // the file it was written to: path (before: a temp file)
    long lines;
    uint64_t bytes;
    char sha256[65];
} par_ckpt_log;

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
