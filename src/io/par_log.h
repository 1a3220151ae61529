// The JSONL step log (par_log.c), appended line by line in place (whole
// lines, each flushed), so that `tail -f` follows a run and a stopped run
// keeps the lines of the steps it did. Tests: tests/unit/test_io.c.
#ifndef PAR_LOG_H
#define PAR_LOG_H

#include "par_status.h"

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
// {"type":"epoch","epoch":e,"step":s,"val_loss":..,"val_accuracy":..,
//  "test_loss":..,"test_accuracy":..}
par_status par_log_epoch(par_log *log, int epoch, long step, double val_loss, double val_acc,
                         double test_loss, double test_acc);
// Flushes, fsyncs and closes; frees log. Returns the first error seen.
par_status par_log_close(par_log *log);
// Closes without a final fsync (after a failed run), keeping the whole lines
// written so far; frees log.
void par_log_discard(par_log *log);

#endif
