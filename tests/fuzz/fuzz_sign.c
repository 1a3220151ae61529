// libFuzzer: minisign signature and public-key files through their public
// checker (vf_verify_file). At start-up a key pair is made and a fixed
// message signed (in /dev/shm); byte 0 picks what the rest of the input
// replaces: even: the .minisig file, odd: the .pub file. With FUZZ_SEED_OUT set,
// start-up also writes both valid files there as seeds (ci/fuzz.sh).
#include <stdlib.h>

#include "fuzz_common.h"
#include "vf_sign.h"

static char pk[256], sk[256], msg[256], sig[256];
static uint8_t *good_pk, *good_sig;
static size_t good_pk_n, good_sig_n;

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) abort();
    uint8_t *b = malloc(1 << 16);
    if (!b) abort();
    *n = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

static void seed(const char *dir, const char *name, uint8_t tag, const uint8_t *d, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fputc(tag, f);
    fwrite(d, 1, n, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    const long pid = (long)getpid();
    snprintf(pk, sizeof pk, "%s/parity-fuzz-%ld-k.pub", base, pid);
    snprintf(sk, sizeof sk, "%s/parity-fuzz-%ld-k.key", base, pid);
    snprintf(msg, sizeof msg, "%s/parity-fuzz-%ld-results.json", base, pid);
    snprintf(sig, sizeof sig, "%s/parity-fuzz-%ld-results.json.minisig", base, pid);
    FILE *f = fopen(msg, "wb");
    if (!f) abort();
    fputs("{\"verdict\": \"pass\"}\n", f);
    fclose(f);
    char id[17];
    if (vf_key_generate(sk, pk, 1, id) != PAR_OK ||
        vf_sign_file(sk, msg, sig, "fuzz seed", id) != PAR_OK)
        abort();
    good_pk = slurp(pk, &good_pk_n);
    good_sig = slurp(sig, &good_sig_n);
    const char *out = getenv("FUZZ_SEED_OUT");
    if (out) {
        seed(out, "sig", 0, good_sig, good_sig_n);
        seed(out, "pub", 1, good_pk, good_pk_n);
    }
    return 0;
}

static void put(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(d, 1, n, f) != n) abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int fuzz_pub = data[0] & 1;
    put(fuzz_pub ? pk : sig, data + 1, size - 1);
    put(fuzz_pub ? sig : pk, fuzz_pub ? good_sig : good_pk, fuzz_pub ? good_sig_n : good_pk_n);
    char trusted[256];
    par_status st = vf_verify_file(pk, msg, sig, trusted, sizeof trusted);
    if (st == PAR_OK && !memchr(trusted, '\0', sizeof trusted)) abort();
    return 0;
}
