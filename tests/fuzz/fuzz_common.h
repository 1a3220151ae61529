// Shared by the libFuzzer harnesses: the input as a temp file (the parsers
// under test read paths), in /dev/shm when it exists. Not a test by itself.
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Writes data to a per-process file named by `tag`; returns its path (static).
static inline const char *fuzz_file(const char *tag, const uint8_t *data, size_t n)
{
    static char path[8][256];
    static int k;
    char *p = path[k++ & 7];
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(p, 256, "%s/parity-fuzz-%ld-%s", dir, (long)getpid(), tag);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
    return p;
}

#endif
