// The run's floating-point type, chosen at run time (--dtype f32|f64).
#ifndef PAR_DTYPE_H
#define PAR_DTYPE_H

#include <stddef.h>

typedef enum par_dtype { PAR_F32 = 0, PAR_F64 = 1 } par_dtype;

static inline size_t par_dtype_size(par_dtype dt) { return dt == PAR_F64 ? 8 : 4; }
static inline const char *par_dtype_name(par_dtype dt) { return dt == PAR_F64 ? "f64" : "f32"; }

// Dtype dispatch: fn##_f32(...) for PAR_F32, else fn##_f64(...), the same
// arguments to both (a function written once per dtype, as the layer ops and
// the reference's step are).
#define PAR_DT_CALL(dt, fn, ...) \
    ((dt) == PAR_F32 ? fn##_f32(__VA_ARGS__) : fn##_f64(__VA_ARGS__))

// Element i of a buffer of dtype dt, as double (exact: every f32 is a double).
static inline double par_get_real(par_dtype dt, const void *p, size_t i)
{
    return dt == PAR_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

// Stores v into element i of a buffer of dtype dt (f32: rounded to nearest).
static inline void par_put_real(par_dtype dt, void *p, size_t i, double v)
{
    if (dt == PAR_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

// x rounded to dtype dt and back: what par_put_real then par_get_real give.
static inline double par_round_real(par_dtype dt, double x)
{
    return dt == PAR_F32 ? (double)(float)x : x;
}

#endif
