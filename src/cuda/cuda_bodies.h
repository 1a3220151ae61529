// The CUDA trainer's kernel bodies for f32 (cuda_*_f32) and f64 (cuda_*_f64):
// cuda_bodies_impl.inc instantiated per dtype as __host__ __device__
// functions under nvcc and plain C functions otherwise, with the project's
// own maths (par_math_body.h) and fma written as __fmaf_rn / __fma_rn on the
// device, fmaf / fma on the host. Not the launches (cuda_kernels.cu).
// Tests: tests/unit/test_cuda_bodies.c (CPU, every body against the CPU
// kernels), tests/gpu/test_cuda.c (the device).
#ifndef CUDA_BODIES_H
#define CUDA_BODIES_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_api.h"   // par_cuda_update
#include "par_kernels.h"
#include "par_math_body.h"
#include "par_model.h"

#ifdef __CUDA_ARCH__
#define CUDA_FMAF(a, b, c) __fmaf_rn(a, b, c)
#define CUDA_FMA(a, b, c) __fma_rn(a, b, c)
#else
#define CUDA_FMAF(a, b, c) fmaf(a, b, c)
#define CUDA_FMA(a, b, c) fma(a, b, c)
#endif

// The end of chunk k of C samples in a batch of B: min((k + 1) C, B).
PAR_HD static inline size_t cuda_chunk_end(size_t k, size_t C, size_t B)
{
    return (k + 1) * C < B ? (k + 1) * C : B;
}

#define REAL float
#define NAME(f) cuda_##f##_f32
#define FMA CUDA_FMAF
#define EXP par_math_exp_f32
#define LOG par_math_log_f32
#define TANH par_math_tanh_f32
#define SIGMOID par_math_sigmoid_f32
#define SQRT sqrtf
#define SINT int32_t
#define INF_BITS INT32_C(0x7f800000)
#include "cuda_bodies_impl.inc"   // undefines the macros above

#define REAL double
#define NAME(f) cuda_##f##_f64
#define FMA CUDA_FMA
#define EXP par_math_exp_f64
#define LOG par_math_log_f64
#define TANH par_math_tanh_f64
#define SIGMOID par_math_sigmoid_f64
#define SQRT sqrt
#define SINT int64_t
#define INF_BITS INT64_C(0x7ff0000000000000)
#include "cuda_bodies_impl.inc"

#endif
