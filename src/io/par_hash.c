// SHA-256 of memory and of files via libsodium, for dataset manifests,
// checkpoints, final weights and the provenance in results.json; XXH3-128
// via libxxhash for the per-step digests of the step log only (fast, not an
// artefact identity). No hashing code of our own.
// Tested by tests/unit/test_io.c (known answers: SHA-256 of "" and "abc",
// XXH3-128 as computed by xxh128sum).
#include "par_hash.h"

#include <errno.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>
#ifdef PARITY_XXH_DISPATCH
#include <xxh_x86dispatch.h>   // XXH3_128bits -> XXH3_128bits_dispatch (AVX2 when the CPU has it)
#endif

// XXH3's output is stable from 0.8.0 on; earlier versions give other digests.
#if XXH_VERSION_NUMBER < 800
#error "libxxhash >= 0.8.0 needed (XXH3-128 is not stable before it)"
#endif

// SHA-256 needs no state from sodium_init; call it anyway, as libsodium
// asks. It is safe to call repeatedly and from several threads.
static void sodium_ready(void)
{
    if (sodium_init() < 0) return;  // hashing works without it
}

void par_sha256_hex(char out[65], const void *data, size_t n)
{
    unsigned char h[crypto_hash_sha256_BYTES];
    sodium_ready();
    crypto_hash_sha256(h, data, n);
    sodium_bin2hex(out, 65, h, sizeof h);
}

void par_sha256_parts(char out[65], const void *const *parts, const size_t *sizes, int n)
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    for (int i = 0; i < n; i++) crypto_hash_sha256_update(&st, parts[i], sizes[i]);
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(out, 65, h, sizeof h);
}

void par_xxh128_hex(char out[33], const void *data, size_t n)
{
    // The canonical form: big-endian, high 64 bits first, as xxh128sum prints it.
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, n));
    sodium_bin2hex(out, 33, c.digest, sizeof c.digest);
}

par_status par_sha256_file(char out[65], const char *path)
{
    out[0] = '\0';
    sodium_ready();
    FILE *f = fopen(path, "rb");
    PAR_FAIL_IF(!f, PAR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[1 << 15];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) crypto_hash_sha256_update(&st, buf, r);
    int bad = ferror(f);
    int err = errno;
    fclose(f);
    PAR_FAIL_IF(bad, PAR_ERR_IO, "cannot read %s: %s", path, strerror(err));
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(out, 65, h, sizeof h);
    return PAR_OK;
}

par_status par_mkdirs(const char *path, unsigned mode)
{
    char p[4096];
    PAR_FAIL_IF(strlen(path) >= sizeof p, PAR_ERR_IO, "%.60s...: path too long", path);
    snprintf(p, sizeof p, "%s", path);
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = '\0';
        mkdir(p, (mode_t)mode);   // an existing parent is fine; the last mkdir reports the rest
        *q = '/';
    }
    PAR_FAIL_IF(mkdir(p, (mode_t)mode) != 0 && errno != EEXIST, PAR_ERR_IO, "cannot create %s: %s",
                path, strerror(errno));
    struct stat sb;
    PAR_FAIL_IF(stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode), PAR_ERR_IO, "%s: not a folder", path);
    return PAR_OK;
}

par_status par_out_check(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return PAR_OK;   // not there yet (or unreadable: the write says)
    PAR_FAIL_IF(!S_ISREG(sb.st_mode), PAR_ERR_IO,
                "%s: not a regular file (parity writes files whole: a temporary file, "
                "then a rename over the old one)", path);
    return PAR_OK;
}
