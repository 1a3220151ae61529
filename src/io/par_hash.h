// Digests and output paths (par_hash.c): SHA-256 (libsodium) of memory
// and files, XXH3-128 (libxxhash) for the step log's per-step digests, and
// the two checks every writer of a file makes first (the path takes a whole
// file; its folder exists). Tests: tests/unit/test_io.c.
#ifndef PAR_HASH_H
#define PAR_HASH_H

#include <stddef.h>

#include "par_status.h"

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
// in the canonical byte order `xxh128sum` prints. Fast (memory speed:
// bench/log.sh) but not cryptographic: for the per-step digests of
// the step log only; artefacts (weights, checkpoints, .npz, results) keep
// SHA-256. data may be NULL when n is 0.
void par_xxh128_hex(char out[33], const void *data, size_t n);

#endif
