// minisign-format Ed25519 keys and signatures through libsodium. Layouts
// (jedisct1/minisign, src/minisign.h, src/minisign.c):
//   public key:  "untrusted comment: ..." + base64("Ed" || key id[8] || pk[32])
//   secret key:  "untrusted comment: ..." + base64(sig_alg "Ed" || kdf_alg ||
//                chk_alg "B2" || kdf_salt[32] || opslimit[8] || memlimit[8] ||
//                key id[8] || sk[64] || chk[32]); unencrypted: kdf_alg = {0,0},
//                salt and limits 0; chk = BLAKE2b-256(sig_alg || key id || sk)
//                (minisign -G -W itself leaves chk zero; both are accepted)
//   signature:   "untrusted comment: ...", base64("ED" || key id || sig[64])
//                with sig = Ed25519(BLAKE2b-512(file)), "trusted comment: T",
//                base64(Ed25519(sig || T)).
// Tests: tests/verify/test_verify.sh (sign; minisign interop when installed).
#define _POSIX_C_SOURCE 200809L
#include "vf_sign.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "par_hash.h"

enum { KEYNUM = 8, SK_BYTES = 158, PK_BYTES = 42, SIG_BYTES = 74 };

#define COMMENT_PREFIX "untrusted comment: "
#define TRUSTED_PREFIX "trusted comment: "

static void key_id_hex(char out[17], const unsigned char *keynum)
{
    uint64_t v = 0;
    for (int i = KEYNUM - 1; i >= 0; i--) v = (v << 8) | keynum[i];   // little-endian, as minisign
    snprintf(out, 17, "%016" PRIX64, v);
}

// Reads up to max_lines lines of a small text file (each without its newline).
static par_status read_lines(const char *path, char lines[][8300], int max_lines, int *n)
{
    *n = 0;
    FILE *f = fopen(path, "r");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    while (*n < max_lines && fgets(lines[*n], 8300, f)) {
        lines[*n][strcspn(lines[*n], "\r\n")] = '\0';
        (*n)++;
    }
    fclose(f);
    return PAR_OK;
}

static par_status decode(unsigned char *bin, size_t len, const char *b64, const char *path,
                         const char *what)
{
    size_t got = 0;
    PAR_FAIL_IF(sodium_base642bin(bin, len, b64, strlen(b64), NULL, &got, NULL,
                                  sodium_base64_VARIANT_ORIGINAL) != 0 || got != len,
                PAR_ERR_FORMAT, "%s: not a minisign %s", path, what);
    return PAR_OK;
}

// Writes "untrusted comment: <comment>\n<base64(bin)>\n" (+ extra) to path.
static par_status write_text(const char *path, int mode, int force, const char *comment,
                             const unsigned char *bin, size_t len, const char *extra)
{
    char b64[sodium_base64_ENCODED_LEN(SK_BYTES, sodium_base64_VARIANT_ORIGINAL) + 8];
    sodium_bin2base64(b64, sizeof b64, bin, len, sodium_base64_VARIANT_ORIGINAL);
    const int fd = open(path, O_WRONLY | O_CREAT | (force ? O_TRUNC : O_EXCL), mode);
    PAR_FAIL_IF(fd < 0 && errno == EEXIST, PAR_ERR_CONFIG,
                "%s exists: keep it, or remove it to make a new key", path);
    PAR_FAIL_IF(fd < 0, PAR_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot write %s", path);
    }
    fprintf(f, COMMENT_PREFIX "%s\n%s\n%s", comment, b64, extra ? extra : "");
    PAR_FAIL_IF(fclose(f) != 0, PAR_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return PAR_OK;
}

// The folders a key file goes in, made private (0700) if missing.
static par_status mkparents(const char *path)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) return PAR_OK;
    *slash = '\0';
    return par_mkdirs(p, 0700);
}

static void seckey_chk(unsigned char chk[32], const unsigned char *sk_struct)
{
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, 32);
    crypto_generichash_update(&hs, sk_struct, 2);              // sig_alg
    crypto_generichash_update(&hs, sk_struct + 54, KEYNUM);    // key id
    crypto_generichash_update(&hs, sk_struct + 62, 64);        // sk
    crypto_generichash_final(&hs, chk, 32);
}

par_status vf_key_generate(const char *sk_path, const char *pk_path, int force, char key_id[17])
{
    PAR_FAIL_IF(sodium_init() < 0, PAR_ERR_IO, "libsodium cannot start");
    struct stat sb;
    PAR_FAIL_IF(!force && stat(sk_path, &sb) == 0, PAR_ERR_CONFIG,
                "%s exists: keep it, or remove it to make a new key", sk_path);
    PAR_FAIL_IF(!force && stat(pk_path, &sb) == 0, PAR_ERR_CONFIG,
                "%s exists: keep it, or remove it to make a new key", pk_path);
    unsigned char sk[SK_BYTES] = {0}, pk[PK_BYTES];
    memcpy(sk, "Ed", 2);                                      // sig_alg
    memcpy(sk + 4, "B2", 2);                                  // chk_alg; kdf_alg stays 0,0
    randombytes_buf(sk + 54, KEYNUM);                         // key id
    crypto_sign_keypair(pk + 10, sk + 62);                    // pk, sk (seed || pk)
    seckey_chk(sk + 126, sk);
    memcpy(pk, "Ed", 2);
    memcpy(pk + 2, sk + 54, KEYNUM);
    key_id_hex(key_id, sk + 54);
    char comment[64];
    snprintf(comment, sizeof comment, "minisign public key %s", key_id);
    par_status st = mkparents(sk_path);
    if (st == PAR_OK) st = mkparents(pk_path);
    if (st == PAR_OK) st = write_text(sk_path, 0600, force, "parity secret key (unencrypted minisign format)",
                               sk, sizeof sk, NULL);
    sodium_memzero(sk, sizeof sk);
    if (st == PAR_OK) st = write_text(pk_path, 0644, force, comment, pk, sizeof pk, NULL);
    if (st != PAR_OK && force == 0) {
        // leave no half key pair behind
        struct stat s2;
        if (stat(pk_path, &s2) != 0) remove(sk_path);
    }
    return st;
}

static par_status load_pk(unsigned char pk[PK_BYTES], const char *pk_path)
{
    char (*lines)[8300] = malloc(2 * sizeof *lines);
    PAR_FAIL_IF(!lines, PAR_ERR_ALLOC, "out of memory");
    int n;
    par_status st = read_lines(pk_path, lines, 2, &n);
    if (st == PAR_OK && (n < 2 || strncmp(lines[0], COMMENT_PREFIX, strlen(COMMENT_PREFIX)) != 0))
        st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: not a minisign public key", pk_path);
    if (st == PAR_OK) st = decode(pk, PK_BYTES, lines[1], pk_path, "public key");
    if (st == PAR_OK && memcmp(pk, "Ed", 2) != 0)
        st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: unsupported key algorithm", pk_path);
    free(lines);
    return st;
}

par_status vf_key_id(const char *pk_path, char key_id[17])
{
    unsigned char pk[PK_BYTES];
    PAR_TRY(load_pk(pk, pk_path));
    key_id_hex(key_id, pk + 2);
    return PAR_OK;
}

static par_status load_sk(unsigned char sk[SK_BYTES], const char *sk_path)
{
    char (*lines)[8300] = malloc(2 * sizeof *lines);
    PAR_FAIL_IF(!lines, PAR_ERR_ALLOC, "out of memory");
    int n;
    par_status st = read_lines(sk_path, lines, 2, &n);
    if (st == PAR_OK && n < 2)
        st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: not a minisign secret key", sk_path);
    if (st == PAR_OK) st = decode(sk, SK_BYTES, lines[1], sk_path, "secret key");
    sodium_memzero(lines, 2 * sizeof *lines);
    free(lines);
    PAR_TRY(st);
    PAR_FAIL_IF(memcmp(sk, "Ed", 2) != 0, PAR_ERR_FORMAT, "%s: unsupported key algorithm", sk_path);
    PAR_FAIL_IF(sk[2] != 0 || sk[3] != 0, PAR_ERR_FORMAT,
                "%s: an encrypted (password) key; parity signs with unencrypted keys "
                "(parity table keygen, or minisign -G -W)", sk_path);
    unsigned char chk[32], zero[32] = {0};
    seckey_chk(chk, sk);
    PAR_FAIL_IF(memcmp(sk + 126, zero, 32) != 0 && memcmp(sk + 126, chk, 32) != 0, PAR_ERR_FORMAT,
                "%s: the key's checksum does not match (damaged key)", sk_path);
    return PAR_OK;
}

// BLAKE2b-512 of a file's bytes (minisign's prehash).
static par_status hash_file(unsigned char out[64], const char *path)
{
    FILE *f = fopen(path, "rb");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, 64);
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) crypto_generichash_update(&hs, buf, n);
    const int err = ferror(f);
    fclose(f);
    PAR_FAIL_IF(err, PAR_ERR_IO, "cannot read %s", path);
    crypto_generichash_final(&hs, out, 64);
    return PAR_OK;
}

par_status vf_sign_file(const char *sk_path, const char *file, const char *sig_path,
                        const char *trusted_comment, char key_id[17])
{
    PAR_FAIL_IF(sodium_init() < 0, PAR_ERR_IO, "libsodium cannot start");
    PAR_FAIL_IF(strchr(trusted_comment, '\n') || strlen(trusted_comment) > 8000, PAR_ERR_CONFIG,
                "the trusted comment must be one line of at most 8000 characters");
    unsigned char sk[SK_BYTES], h[64], sig[SIG_BYTES];
    PAR_TRY(load_sk(sk, sk_path));
    par_status st = hash_file(h, file);
    if (st != PAR_OK) {
        sodium_memzero(sk, sizeof sk);
        return st;
    }
    memcpy(sig, "ED", 2);
    memcpy(sig + 2, sk + 54, KEYNUM);
    crypto_sign_detached(sig + 10, NULL, h, sizeof h, sk + 62);
    const size_t tn = strlen(trusted_comment);
    unsigned char *g = malloc(64 + tn), global[64];
    if (!g) {
        sodium_memzero(sk, sizeof sk);
        PAR_FAIL_IF(1, PAR_ERR_ALLOC, "out of memory");
    }
    memcpy(g, sig + 10, 64);
    memcpy(g + 64, trusted_comment, tn);
    crypto_sign_detached(global, NULL, g, 64 + tn, sk + 62);
    free(g);
    key_id_hex(key_id, sk + 54);
    sodium_memzero(sk, sizeof sk);
    char gb64[sodium_base64_ENCODED_LEN(64, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(gb64, sizeof gb64, global, sizeof global, sodium_base64_VARIANT_ORIGINAL);
    char *extra = malloc(tn + sizeof gb64 + 64);
    PAR_FAIL_IF(!extra, PAR_ERR_ALLOC, "out of memory");
    snprintf(extra, tn + sizeof gb64 + 64, TRUSTED_PREFIX "%s\n%s\n", trusted_comment, gb64);
    char tmp[1200];
    PAR_TRY(par_out_check(sig_path));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", sig_path, (long)getpid());
    st = write_text(tmp, 0644, 1, "signature from parity secret key", sig, sizeof sig, extra);
    free(extra);
    if (st == PAR_OK && rename(tmp, sig_path) != 0)
        st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot write %s: %s", sig_path, strerror(errno));
    if (st != PAR_OK) remove(tmp);
    return st;
}

par_status vf_verify_file(const char *pk_path, const char *file, const char *sig_path,
                          char *trusted, size_t trusted_size)
{
    PAR_FAIL_IF(sodium_init() < 0, PAR_ERR_IO, "libsodium cannot start");
    unsigned char pk[PK_BYTES], sig[SIG_BYTES], global[64];
    PAR_TRY(load_pk(pk, pk_path));
    char (*lines)[8300] = malloc(4 * sizeof *lines);
    PAR_FAIL_IF(!lines, PAR_ERR_ALLOC, "out of memory");
    int n;
    par_status st = read_lines(sig_path, lines, 4, &n);
    const size_t tp = strlen(TRUSTED_PREFIX);
    if (st == PAR_OK && (n < 4 || strncmp(lines[0], COMMENT_PREFIX, strlen(COMMENT_PREFIX)) != 0 ||
                         strncmp(lines[2], TRUSTED_PREFIX, tp) != 0))
        st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: not a minisign signature", sig_path);
    if (st == PAR_OK) st = decode(sig, SIG_BYTES, lines[1], sig_path, "signature");
    if (st == PAR_OK) st = decode(global, 64, lines[3], sig_path, "signature (global signature)");
    const int hashed = memcmp(sig, "ED", 2) == 0;
    if (st == PAR_OK && !hashed && memcmp(sig, "Ed", 2) != 0)
        st = par_set_error(PAR_ERR_FORMAT, __FILE__, __LINE__, "%s: unsupported signature algorithm", sig_path);
    if (st == PAR_OK && memcmp(sig + 2, pk + 2, KEYNUM) != 0) {
        char a[17], b[17];
        key_id_hex(a, sig + 2);
        key_id_hex(b, pk + 2);
        st = par_set_error(PAR_ERR_NUMERIC, __FILE__, __LINE__,
                           "%s was made by key %s, not by key %s (%s)", sig_path, a, b, pk_path);
    }
    unsigned char h[64], *msg = NULL;
    size_t msg_len = 0;
    if (st == PAR_OK && hashed) {
        st = hash_file(h, file);
        msg = h;
        msg_len = sizeof h;
    } else if (st == PAR_OK) {
        FILE *f = fopen(file, "rb");
        if (!f) st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot open %s", file);
        else {
            fseek(f, 0, SEEK_END);
            const long len = ftell(f);
            rewind(f);
            msg = malloc(len > 0 ? (size_t)len : 1);
            msg_len = len > 0 ? (size_t)len : 0;
            if (!msg || fread(msg, 1, msg_len, f) != msg_len)
                st = par_set_error(PAR_ERR_IO, __FILE__, __LINE__, "cannot read %s", file);
            fclose(f);
        }
    }
    if (st == PAR_OK && crypto_sign_verify_detached(sig + 10, msg, msg_len, pk + 10) != 0)
        st = par_set_error(PAR_ERR_NUMERIC, __FILE__, __LINE__,
                           "the signature %s does not match %s (the file was changed, or signed by another key)",
                           sig_path, file);
    if (!hashed) free(msg);
    if (st == PAR_OK) {
        const char *tc = lines[2] + tp;
        const size_t tn = strlen(tc);
        unsigned char *g = malloc(64 + tn);
        if (!g) st = par_set_error(PAR_ERR_ALLOC, __FILE__, __LINE__, "out of memory");
        else {
            memcpy(g, sig + 10, 64);
            memcpy(g + 64, tc, tn);
            if (crypto_sign_verify_detached(global, g, 64 + tn, pk + 10) != 0)
                st = par_set_error(PAR_ERR_NUMERIC, __FILE__, __LINE__,
                                   "%s: the trusted comment was changed (global signature fails)", sig_path);
            free(g);
        }
        if (trusted && trusted_size) snprintf(trusted, trusted_size, "%s", tc);
    }
    free(lines);
    return st;
}
