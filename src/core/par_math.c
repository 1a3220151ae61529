// The project's own exp, log, tanh and sigmoid (par_math.h), in plain IEEE
// double arithmetic: no libm, no FMA, no long double, so any machine that
// evaluates binary64 exactly (FLT_EVAL_METHOD 0) returns the same bits.
// f64: table-driven exp (2^(j/32)) and double-double tails, ~0.55 ulp max;
// f32: evaluated in double, rounded once. The bodies are par_math_body.h's,
// shared with the CUDA kernels. Not vectorised, not a fast variant.
// Checked against MPFR by tests/unit/test_math.c (ctest -R test_math).
#include "par_math.h"

#include "par_math_body.h"

float par_exp_f32(float x) { return par_math_exp_f32(x); }
double par_exp_f64(double x) { return par_math_exp_f64(x); }
float par_log_f32(float x) { return par_math_log_f32(x); }
double par_log_f64(double x) { return par_math_log_f64(x); }
float par_tanh_f32(float x) { return par_math_tanh_f32(x); }
double par_tanh_f64(double x) { return par_math_tanh_f64(x); }
float par_sigmoid_f32(float x) { return par_math_sigmoid_f32(x); }
double par_sigmoid_f64(double x) { return par_math_sigmoid_f64(x); }
