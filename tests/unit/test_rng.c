// Counter-based RNG: Philox4x32-10 against the Random123 known-answer
// vectors (kat_vectors), and the properties the contract relies on: the
// epoch order is a permutation, a pure function of (seed, epoch).
#include <stdint.h>
#include <stdlib.h>

#include "par_rng.h"
#include "par_test.h"

static void kat(const char *name, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                uint32_t k1, uint32_t e0, uint32_t e1, uint32_t e2, uint32_t e3)
{
    const uint32_t ctr[4] = {c0, c1, c2, c3}, key[2] = {k0, k1};
    uint32_t out[4];
    par_philox4x32_10(out, ctr, key);
    if (!par_check(out[0] == e0 && out[1] == e1 && out[2] == e2 && out[3] == e3, name))
        printf("  got %08x %08x %08x %08x\n", out[0], out[1], out[2], out[3]);
}

static int is_permutation(const size_t *p, size_t n)
{
    char *seen = calloc(n, 1);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        ok = p[i] < n && !seen[p[i]];
        if (ok) seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

int main(void)
{
    // Random123 kat_vectors, "philox4x32 10" lines: counter, key, expected.
    kat("philox kat zeros", 0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
    kat("philox kat ones", ~0u, ~0u, ~0u, ~0u, ~0u, ~0u, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
        0x6d5451fd);
    kat("philox kat pi", 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
        0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);

    enum { N = 54000 };
    size_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    par_rng_shuffle(a, N, 42, 3);
    par_rng_shuffle(b, N, 42, 3);
    par_rng_shuffle(c, N, 42, 4);
    par_check(is_permutation(a, N), "shuffle gives a permutation");
    par_check(memcmp(a, b, N * sizeof *a) == 0, "same (seed, epoch) gives the same order");
    par_check(memcmp(a, c, N * sizeof *a) != 0, "another epoch gives another order");
    size_t fixed = 0;
    for (size_t i = 0; i < N; i++) fixed += a[i] == i;
    // A uniform permutation has Poisson(1) fixed points: more than 10 has
    // probability below 1e-7.
    par_check(fixed <= 10, "shuffle is not close to the identity");
    par_rng_shuffle(a, 1, 42, 0);
    par_check(a[0] == 0, "shuffle of one element");

    double lo = 1, hi = 0, mean = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        double u = par_rng_uniform(7, PAR_RNG_INIT, 1, i);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        mean += u;
    }
    mean /= 100000;
    par_check(lo >= 0 && hi < 1, "uniform in [0, 1)");
    // Standard error of the mean of 1e5 uniforms is 0.0009; 5 sigma.
    par_check(mean > 0.5 - 0.0046 && mean < 0.5 + 0.0046, "uniform mean near 1/2");
    par_check(par_rng_uniform(7, PAR_RNG_INIT, 1, 5) == par_rng_uniform(7, PAR_RNG_INIT, 1, 5) &&
                  par_rng_uniform(7, PAR_RNG_INIT, 1, 5) != par_rng_uniform(7, PAR_RNG_INIT, 2, 5),
              "uniform is a function of (seed, tag, stream, index)");
    free(a);
    free(b);
    free(c);
    return par_test_exit();
}
