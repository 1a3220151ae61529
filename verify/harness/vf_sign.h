// Ed25519 signatures of results tables in the minisign file formats
// (libsodium; layouts from jedisct1/minisign, src/minisign.h and
// src/minisign.c), so that `minisign -Vm results.json -p KEY.pub` (which
// reads results.json.minisig) checks our signatures and keys made by `minisign -G -W`
// sign with parity. Unencrypted secret keys only. No printing.
#ifndef VF_SIGN_H
#define VF_SIGN_H

#include <stddef.h>

#include "par_status.h"

// Makes a key pair: sk_path (mode 0600, an unencrypted minisign secret key)
// and pk_path (a minisign public key). Refuses to overwrite either file
// (PAR_ERR_CONFIG) unless force. key_id: 16 uppercase hex digits, as
// minisign prints it. Creates missing parent folders (mode 0700).
par_status vf_key_generate(const char *sk_path, const char *pk_path, int force, char key_id[17]);

// The key id of a public key file (PAR_ERR_FORMAT if it is not one).
par_status vf_key_id(const char *pk_path, char key_id[17]);

// Signs `file` (prehashed, BLAKE2b-512: minisign's "ED" algorithm) with the
// secret key into sig_path, with a one-line trusted comment (no newline).
par_status vf_sign_file(const char *sk_path, const char *file, const char *sig_path,
                        const char *trusted_comment, char key_id[17]);

// Checks sig_path over `file` with the public key: key id, signature and
// the global signature over the signature and the trusted comment (copied
// to trusted). PAR_ERR_NUMERIC when the signature does not verify (a
// changed byte, a wrong key), PAR_ERR_FORMAT for a malformed file,
// PAR_ERR_IO when a file cannot be read. Legacy "Ed" (unhashed)
// signatures are accepted as minisign does.
par_status vf_verify_file(const char *pk_path, const char *file, const char *sig_path,
                          char *trusted, size_t trusted_size);

#endif
