// Instantiation of the image-layer kernels (conv_impl.inc) for f32 and f64.
// One portable variant: these kernels only move data, so the CPU's vector
// width does not change a bit of their results.
#include "par_conv.h"

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
