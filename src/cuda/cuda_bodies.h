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

// The conv forward's tiles (cuda_kernels.cu's conv_tile_, cuda_emu.c's
// conv_forward_go): a block runs TP consecutive output positions of one
// sample (positions p = oh w_out + ow), one thread each, for CF_CO output
// channels, one chain each; it stages CI input channels at a time, each a
// patch of PH x PW values of the padded input: the rows and columns the
// windows of its positions cover, +0 in the padding. threads: TP rounded up
// to a warp; tiles: the blocks a sample's positions take. The patches and
// weights take at most CF_SMEM bytes of shared memory.
enum { CF_CO = 8, CF_TP = 256, CF_SMEM = 40 * 1024 };
typedef struct cuda_conv_tile {
    size_t TP, CI, PH, PW, threads, tiles;
} cuda_conv_tile;

// The tile of conv layer ly, its shared memory (patches and weights) within
// cap bytes for values of sz bytes; 0 where one channel's patch does not fit.
PAR_HD static inline int cuda_conv_tile_of(const par_layer *ly, size_t sz, size_t cap,
                                           cuda_conv_tile *ct)
{
    const size_t P = ly->h_out * ly->w_out, wo = ly->w_out, S = ly->stride, K = ly->K;
    const size_t most = CF_TP, TP = P < most ? P : wo <= most ? most / wo * wo : most;
    size_t rows = TP % wo == 0 ? TP / wo : (TP - 1) / wo + 2;   // output rows a tile spans
    rows = rows < ly->h_out ? rows : ly->h_out;
    ct->TP = TP;
    ct->PH = (rows - 1) * S + K;
    ct->PW = (wo - 1) * S + K;
    const size_t per_ci = (ct->PH * ct->PW + K * K * CF_CO) * sz;
    if (per_ci > cap) return 0;
    ct->CI = cap / per_ci < ly->c_in ? cap / per_ci : ly->c_in;
    ct->CI = ct->CI < 8 ? ct->CI : 8;   // at most 8: several blocks share a core
    ct->threads = (TP + 31) / 32 * 32;
    ct->tiles = (P + TP - 1) / TP;
    return 1;
}

// The conv weight gradient's tiles (conv_wtile_): the same positions and
// patches, CI = 8 channels a block (all of them below 8); the output gradient
// of the TP positions for CF_CO output channels staged beside them (TP CF_CO
// values). threads: one for each (ci, kh, kw) of the CI channels and one for
// the biases, at least CW_THREADS (the others only stage: a block of one
// warp spent most of its time staging, docs/gpu.md). 0 (one thread a chain
// instead) for kernels past 5 x 5, whose threads would pass a block's CF_TP.
enum { CW_THREADS = 128 };
PAR_HD static inline int cuda_conv_wtile_of(const par_layer *ly, size_t sz, size_t cap,
                                            cuda_conv_tile *ct)
{
    if (!cuda_conv_tile_of(ly, sz, cap, ct)) return 0;
    const size_t CI = ly->c_in < 8 ? ly->c_in : 8;
    const size_t dz = ct->TP * CF_CO * sz, per_ci = ct->PH * ct->PW * sz;
    const size_t threads = (CI * ly->K * ly->K + 1 + 31) / 32 * 32;
    if (dz + CI * per_ci > cap || threads > CF_TP) return 0;
    ct->CI = CI;
    ct->threads = threads < CW_THREADS ? (size_t)CW_THREADS : threads;
    return 1;
}

// The conv input gradient's tiles (conv_dtile_; stride 1): a block takes TR
// whole input rows of one sample and CD_G input channels, one thread an input
// position with CD_G chains. It stages its channels' weights for every output
// channel and tap (K K c_out CD_G values) and the output gradient's padded
// patch that the rows' windows reach, every output channel (c_out DH DW, DH =
// TR + K - 1, DW = w_in + K - 1), within CD_SMEM bytes. threads: TR w_in
// rounded up to a warp, at most CD_TP. 0 (one thread an input element) for a
// stride past 1, padding of K or more, rows wider than CD_TP, or a patch of
// one row past CD_SMEM.
enum { CD_G = 8, CD_TP = 128, CD_SMEM = 128 * 1024 };
typedef struct cuda_conv_dtile {
    size_t TR, DH, DW, threads, tiles;
} cuda_conv_dtile;

PAR_HD static inline int cuda_conv_dtile_of(const par_layer *ly, size_t sz, size_t cap,
                                            cuda_conv_dtile *dt)
{
    const size_t K = ly->K, wi = ly->w_in, w = K * K * ly->c_out * CD_G * sz;
    if (ly->stride != 1 || ly->pad >= K || wi > CD_TP) return 0;
    dt->DW = wi + K - 1;
    size_t TR = CD_TP / wi < ly->h_in ? CD_TP / wi : ly->h_in;
    while (TR > 0 && w + ly->c_out * (TR + K - 1) * dt->DW * sz > cap) TR--;
    if (TR == 0) return 0;
    dt->TR = TR;
    dt->DH = TR + K - 1;
    dt->threads = (TR * wi + 31) / 32 * 32;
    dt->tiles = (ly->h_in + TR - 1) / TR;
    return 1;
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
