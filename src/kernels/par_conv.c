// Instantiation of the image-layer kernels (conv_impl.inc) for f32 and f64.
// One variant: they move data and call par_gemm_acc, which picks its own.
#include "par_conv.h"

#include "par_kernels.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SFX f32
#include "conv_impl.inc"
#undef REAL
#undef SFX

#define REAL double
#define SFX f64
#include "conv_impl.inc"
