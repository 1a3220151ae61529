// Counter-based randomness: Philox4x32-10 (Salmon et al., SC'11), checked
// against the Random123 known-answer vectors in tests/unit/test_rng.c.
// Every random value is a pure function of (seed, purpose, indices), so no
// result depends on who draws first (arithmetic contract, rule 5).
#ifndef PAR_RNG_H
#define PAR_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "par_status.h"

// One Philox4x32-10 block: out = philox(ctr, key).
void par_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);

// Stream tags: the third counter word, so different uses never share a block.
enum { PAR_RNG_INIT = 1, PAR_RNG_SHUFFLE = 2, PAR_RNG_DATA = 3 };

// 64 random bits: the first half of the Philox block with key = seed and
// counter = (index low, index high, tag, stream).
uint64_t par_rng_bits(uint64_t seed, uint32_t tag, uint32_t stream, uint64_t index);

// Uniform double in [0, 1): the top 53 of those bits times 2^-53.
double par_rng_uniform(uint64_t seed, uint32_t tag, uint32_t stream, uint64_t index);

// order[0..n) = a permutation of 0..n-1, the sample order of epoch `epoch`:
// Fisher-Yates from the top; the partner of position i (i = n-1 .. 1) is
// par_rng_bits(seed, SHUFFLE, epoch, i) mod (i + 1).
void par_rng_shuffle(size_t *order, size_t n, uint64_t seed, uint32_t epoch);

#endif
