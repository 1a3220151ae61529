// libFuzzer: checkpoint metadata (.json) through par_ckpt_meta_parse, and a
// whole checkpoint folder through par_ckpt_find when byte 0 is odd (the rest
// is written as its newest .json next to an empty .npz). Run: ci/fuzz.sh.
#include <sys/stat.h>

#include "fuzz_common.h"
#include "par_ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    par_ckpt_meta m;
    if (par_ckpt_meta_parse(&m, (const char *)data + 1, size - 1, "fuzz.json") == PAR_OK) {
        char sha[65];
        par_ckpt_config_sha256(sha, &m.cfg);
        if (strcmp(sha, m.config_sha256) != 0) abort();   // parse checks it
    }
    if (data[0] & 1) {
        char dir[256];
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/parity-fuzz-%ld-ck", base, (long)getpid());
        mkdir(dir, 0700);
        char p[300];
        snprintf(p, sizeof p, "%s/ckpt-0000000004.json", dir);
        FILE *f = fopen(p, "wb");
        if (!f) abort();
        fwrite(data + 1, 1, size - 1, f);
        fclose(f);
        char skipped[256];
        (void)par_ckpt_find(&m, dir, skipped, sizeof skipped);
    }
    return 0;
}
