// Per-function instruction-set targets for the kernel variants (internal to
// src/kernels and bench/; not part of par_kernels.h's contract). A variant's
// functions carry the attribute, the rest of a file stays portable, and the
// caller picks the variant at run time by a CPU test (par_dense.c). gcc and
// clang both accept the attribute; clang ignores "#pragma GCC target".
// aarch64 needs no attribute: Advanced SIMD (NEON, with its fma) is part of
// the base ARMv8-A architecture every aarch64 compiler targets.
#ifndef PAR_TARGET_H
#define PAR_TARGET_H

#if defined(__x86_64__) && defined(__GNUC__)   // gcc and clang (clang defines __GNUC__)
#define PAR_HAVE_X86_64 1
// On every function that uses AVX2 or FMA intrinsics, static inline helpers
// included (an intrinsic is inlined only into a function with its target).
#define PAR_TARGET_AVX2 __attribute__((target("avx2,fma")))
// AVX2's code with AVX-512VL's 32 vector registers. Its vectors stay 256
// bits wide: CMake adds -mprefer-vector-width=256 to src/kernels, or the
// compilers would vectorize some index and copy loops there with 512.
#define PAR_TARGET_AVX512VL __attribute__((target("avx2,fma,avx512f,avx512vl")))
#include <immintrin.h>   // declares every intrinsic, whatever the -m flags
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#define PAR_HAVE_AARCH64 1
#include <arm_neon.h>
#endif

#endif
