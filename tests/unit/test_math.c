// Accuracy and special values of par_math (exp, log, tanh, sigmoid; f32, f64).
// The accuracy sweep is the checker's (chk_math_check, the code behind
// `parity check --math`: dense deterministic samples plus hard cases, exact
// values by MPFR at 128 bits); this test asserts max error < 1 ulp
// (faithful) for every function and dtype, and the special values bitwise.
// Run: ctest -R test_math (~10-15 s on 2 cores).
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <string.h>

#include "chk_check.h"
#include "par_math.h"
#include "par_test.h"

// Points per sampling scheme per function and dtype (see chk_math_check).
enum { N_F32 = 500000, N_F64 = 300000 };

static int same64(double a, double b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
}

static int same32(float a, float b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
}

static void check_specials(void)
{
    const double inf = INFINITY, nan = NAN;
    const float inff = INFINITY, nanf = NAN;
    int ok64 = same64(par_exp_f64(nan), nan) && same64(par_exp_f64(inf), inf)
        && same64(par_exp_f64(-inf), 0.0) && same64(par_exp_f64(1000.0), inf)
        && same64(par_exp_f64(-1000.0), 0.0) && same64(par_exp_f64(0.0), 1.0)
        && same64(par_exp_f64(-0.0), 1.0) && same64(par_exp_f64(-745.2), 0.0)
        && same64(par_exp_f64(-745.0), 0x1p-1074) && same64(par_exp_f64(709.79), inf)
        && same64(par_log_f64(nan), nan) && same64(par_log_f64(0.0), -inf)
        && same64(par_log_f64(-0.0), -inf) && same64(par_log_f64(-1.0), nan)
        && same64(par_log_f64(-inf), nan) && same64(par_log_f64(inf), inf)
        && same64(par_log_f64(1.0), 0.0) && same64(par_log_f64(0x1p-1074), -744.4400719213812)
        && same64(par_tanh_f64(nan), nan) && same64(par_tanh_f64(inf), 1.0)
        && same64(par_tanh_f64(-inf), -1.0) && same64(par_tanh_f64(0.0), 0.0)
        && same64(par_tanh_f64(-0.0), -0.0) && same64(par_tanh_f64(-0x1p-1074), -0x1p-1074)
        && same64(par_tanh_f64(30.0), 1.0) && same64(par_tanh_f64(-30.0), -1.0)
        && same64(par_sigmoid_f64(nan), nan) && same64(par_sigmoid_f64(inf), 1.0)
        && same64(par_sigmoid_f64(-inf), 0.0) && same64(par_sigmoid_f64(0.0), 0.5)
        && same64(par_sigmoid_f64(-0.0), 0.5) && same64(par_sigmoid_f64(-1000.0), 0.0)
        && same64(par_sigmoid_f64(1000.0), 1.0);
    par_check(ok64, "specials_f64 bitwise");
    int ok32 = same32(par_exp_f32(nanf), nanf) && same32(par_exp_f32(inff), inff)
        && same32(par_exp_f32(-inff), 0.0f) && same32(par_exp_f32(100.0f), inff)
        && same32(par_exp_f32(-200.0f), 0.0f) && same32(par_exp_f32(0.0f), 1.0f)
        && same32(par_exp_f32(-0.0f), 1.0f) && same32(par_exp_f32(-103.0f), 0x1p-149f)
        && same32(par_log_f32(nanf), nanf) && same32(par_log_f32(0.0f), -inff)
        && same32(par_log_f32(-0.0f), -inff) && same32(par_log_f32(-1.0f), nanf)
        && same32(par_log_f32(-inff), nanf) && same32(par_log_f32(inff), inff)
        && same32(par_log_f32(1.0f), 0.0f)
        && same32(par_tanh_f32(nanf), nanf) && same32(par_tanh_f32(inff), 1.0f)
        && same32(par_tanh_f32(-inff), -1.0f) && same32(par_tanh_f32(0.0f), 0.0f)
        && same32(par_tanh_f32(-0.0f), -0.0f) && same32(par_tanh_f32(-0x1p-149f), -0x1p-149f)
        && same32(par_tanh_f32(30.0f), 1.0f)
        && same32(par_sigmoid_f32(nanf), nanf) && same32(par_sigmoid_f32(inff), 1.0f)
        && same32(par_sigmoid_f32(-inff), 0.0f) && same32(par_sigmoid_f32(0.0f), 0.5f)
        && same32(par_sigmoid_f32(-0.0f), 0.5f) && same32(par_sigmoid_f32(-1000.0f), 0.0f)
        && same32(par_sigmoid_f32(1000.0f), 1.0f);
    par_check(ok32, "specials_f32 bitwise");
}

int main(void)
{
    check_specials();
    chk_math_report r;
    if (!par_check(chk_math_check(&r, N_F32, N_F64, 0) == PAR_OK, "chk_math_check runs")) {
        printf("  %s\n", par_last_error());
        return par_test_exit();
    }
    printf("accuracy sweep: %d threads, %.1f s\n", r.threads, r.seconds);
    for (int k = 0; k < r.n_rows; k++) {
        const chk_math_row *row = &r.rows[k];
        char name[96];
        snprintf(name, sizeof name, "%s_%s faithful (max %.4f ulp over %zu points)",
                 chk_fn_name(row->fn), par_dtype_name(row->dt), row->max_ulp, row->points);
        if (!par_check(row->max_ulp < 1.0, name)) printf("  worst x = %.17g\n", row->worst_x);
    }
    par_check(r.n_rows == 8, "all four functions in both dtypes were measured");
    mpfr_free_cache();
    return par_test_exit();
}
