// parity's side of the step protocol with a trainer it did not build
// (docs/external.md): a private folder with two FIFOs, the trainer started
// as an ordinary command in its own process group, one JSON object per line
// each way, files handed over in the folder. Every failure of the trainer —
// it exits, hangs past the timeout, answers out of turn, writes what does
// not parse — is a PAR_ERR_EXTERNAL with one line saying which; the last
// lines of its log are kept for hints. Nothing is left behind: ext_stop
// ends the trainer's group and removes the folder. Tests:
// tests/external/test_ext_proto.sh.
#ifndef EXT_PROTO_H
#define EXT_PROTO_H

#include <jansson.h>

#include "par_status.h"

typedef struct ext_trainer ext_trainer;

typedef struct ext_opts {
    const char *command;   // the trainer's command line: split into words as a shell
                           //   would (quotes, backslashes), nothing expanded
    double timeout_s;      // the longest wait for one answer (the first includes start-up)
    volatile int *interrupted;   // set by the caller's signal handler: give up (NULL: none)
} ext_opts;

// Makes the folder and its FIFOs, starts the trainer, sends `hello` (the
// caller's object, "op" and "protocol" added) and reads its `hello`
// answer into *reply (owned by the caller). On failure nothing is left.
par_status ext_start(ext_trainer **t, const ext_opts *o, json_t *hello, json_t **reply);

// Sends msg (a JSON object with "op"), reads the answer: an object whose
// "op" is the same (else PAR_ERR_EXTERNAL, naming what came; an "error"
// answer is reported with its message). *reply is the caller's.
par_status ext_request(ext_trainer *t, json_t *msg, json_t **reply);
// The two halves, to work while the trainer does: send, then receive the
// answer to `op`.
par_status ext_send(ext_trainer *t, json_t *msg);
par_status ext_receive(ext_trainer *t, const char *op, json_t **reply);

// The private folder (files handed over live here) and a path inside it.
const char *ext_dir(const ext_trainer *t);
void ext_path(const ext_trainer *t, char *buf, size_t n, const char *name);

// The last lines of the trainer's log (stdout and stderr together), for
// hints: up to `lines` lines into buf.
void ext_log_tail(const ext_trainer *t, char *buf, size_t n, int lines);

// Sends `quit`, waits up to 3 s for the trainer to exit, then ends its
// process group, and removes the folder. Safe on NULL and after a failure.
void ext_stop(ext_trainer *t);

#endif
