/* Element kernels: every expected figure below is derived by hand from docs/metrics.md. */
#include "kernel.h"
#include "kernel_f32.h"
#include "kernel_fixture.h"

#include <float.h>  /* FLT_EPSILON */
#include <math.h>   /* INFINITY, NAN, ldexp */
#include <stdlib.h> /* calloc */
#include <string.h> /* memcmp */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static pc_stats run_float(const double *a, const double *b, size_t n, pc_dtype dt, pc_tol t) {
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_kernel_args k = {&s, NULL, &t, dt, 0, n};
  pc_kernel_float(&k, a, b);
  return s;
}

/* 1 + 2^-23 is the next float32 after 1: abs = rel = 2^-23, one ULP. */
static void test_one_ulp_float32(void **state) {
  (void)state;
  const double a[] = {1.0}, b[] = {1.0 + FLT_EPSILON};
  pc_stats s = run_float(a, b, 1, PC_DTYPE_FLOAT32, tol_none());
  assert_int_equal(s.count, 1);
  assert_int_equal(s.mismatches, 1); /* no criterion set: only equal elements pass */
  assert_true(s.max_abs == FLT_EPSILON);
  assert_true(s.max_rel == FLT_EPSILON);
  assert_int_equal(s.max_ulp, 1);
  assert_true(pc_stats_mean_ulp(&s) == 1.0);
  assert_true(s.has_worst);
  assert_int_equal(s.worst_index, 0);
}

/* Zeros: +0 == -0; a = 0, b != 0 gives rel = inf; a sign crossing counts ULPs on both sides. */
static void test_zeros_and_sign_crossing(void **state) {
  (void)state;
  const double tiny = ldexp(1.0, -149); /* float32's smallest subnormal */
  const double a[] = {0.0, 0.0, -tiny}, b[] = {-0.0, 1e-3, tiny};
  pc_stats s = run_float(a, b, 3, PC_DTYPE_FLOAT32, tol_none());
  assert_int_equal(s.mismatches, 2);
  assert_true(isinf(s.max_rel));
  /* -tiny -> +tiny is ordinal -1 -> +1: 2 ULPs; 0 -> 1e-3 is far more. */
  assert_true(s.max_ulp > 2);
  pc_stats s3 = run_float(&a[2], &b[2], 1, PC_DTYPE_FLOAT32, tol_none());
  assert_int_equal(s3.max_ulp, 2);
  assert_true(s3.max_rel == 2.0); /* |tiny - (-tiny)| / tiny */
}

/* NaN in both is equal; NaN on one side is a nan mismatch, kept out of the maxima and mean. */
static void test_nan_rules(void **state) {
  (void)state;
  const double a[] = {NAN, NAN, 1.0, 2.0}, b[] = {NAN, 5.0, 1.0, 2.5};
  pc_tol t = tol_none();
  t.set = PC_TOL_ATOL;
  t.atol = 1e9; /* a huge tolerance still fails a one-sided NaN */
  pc_stats s = run_float(a, b, 4, PC_DTYPE_FLOAT64, t);
  assert_int_equal(s.count, 4);
  assert_int_equal(s.nan_mismatches, 1);
  assert_int_equal(s.mismatches, 1);
  assert_true(s.max_abs == 0.5);
  assert_int_equal(s.ulp_terms, 3);
  assert_int_equal(s.worst_index, 1); /* the nan mismatch is the worst */
  assert_true(isnan(s.worst_b[0]) == 0 && s.worst_b[0] == 5.0);
}

/* inf equals only the same inf; an unmatched inf fails any tolerance, with abs = rel = inf. */
static void test_inf_rules(void **state) {
  (void)state;
  const double a[] = {INFINITY, -INFINITY, INFINITY, 3.0},
               b[] = {INFINITY, -INFINITY, DBL_MAX, 3.0};
  pc_tol t = tol_none();
  t.set = PC_TOL_MAX_ULP;
  t.max_ulp = 10; /* DBL_MAX is 1 ULP from inf, but an inf mismatch fails regardless */
  pc_stats s = run_float(a, b, 4, PC_DTYPE_FLOAT64, t);
  assert_int_equal(s.inf_mismatches, 1);
  assert_int_equal(s.mismatches, 1);
  assert_true(isinf(s.max_abs) && isinf(s.max_rel));
  assert_int_equal(s.max_ulp, 1);
  assert_int_equal(s.worst_index, 2);
}

/* The mean is exact beyond 2^64: three float64 -inf vs +inf pairs sum to 3 * 2 * 0x7FF0...0. */
static void test_mean_ulp_exact_past_2_64(void **state) {
  (void)state;
  const double a[] = {-INFINITY, -INFINITY, -INFINITY}, b[] = {INFINITY, INFINITY, INFINITY};
  pc_stats s = run_float(a, b, 3, PC_DTYPE_FLOAT64, tol_none());
  const uint64_t one = 2 * UINT64_C(0x7FF0000000000000);
  assert_int_equal(s.max_ulp, one);
  /* 3 * one = 2^64 + (3 * one - 2^64): the high word carries exactly once... twice. */
  uint64_t lo = one, hi = 0;
  for (int i = 1; i < 3; i++) {
    lo += one;
    hi += lo < one;
  }
  assert_int_equal(s.ulp_sum_hi, hi);
  assert_int_equal(s.ulp_sum_lo, lo);
  assert_true(hi == 2);
  assert_true(pc_stats_mean_ulp(&s) == (double)one);
}

/* Each criterion alone, and OR between them: 100 vs 101 has abs 1, rel 0.01. */
static void test_tolerance_criteria(void **state) {
  (void)state;
  const double a[] = {100.0}, b[] = {101.0};
  pc_tol t = tol_none();
  t.set = PC_TOL_ATOL;
  t.atol = 0.999;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT64, t).mismatches, 1);
  t.atol = 1.0;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT64, t).mismatches, 0);
  t.set = PC_TOL_RTOL;
  t.rtol = 0.0099;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT64, t).mismatches, 1);
  t.rtol = 0.01;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT64, t).mismatches, 0);
  /* In float16, 100 and 101 are 16 ULPs apart: the spacing in [64, 128) is 2^-4. */
  t.set = PC_TOL_MAX_ULP;
  t.max_ulp = 15;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT16, t).mismatches, 1);
  t.max_ulp = 16;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT16, t).mismatches, 0);
  t.set = PC_TOL_ATOL | PC_TOL_MAX_ULP;
  t.atol = 0.5;
  assert_int_equal(run_float(a, b, 1, PC_DTYPE_FLOAT16, t).mismatches, 0);
}

/* The worst is the mismatch with the largest abs, even when a passing element has a larger abs. */
static void test_worst_prefers_mismatch(void **state) {
  (void)state;
  const double a[] = {1000.0, 0.0, 0.0, 1.0}, b[] = {1001.0, 0.5, 0.5, 1.0};
  pc_tol t = tol_none();
  t.set = PC_TOL_RTOL;
  t.rtol = 0.01; /* 1000 -> 1001 passes (rel 0.001); 0 -> 0.5 fails */
  pc_stats s = run_float(a, b, 4, PC_DTYPE_FLOAT64, t);
  assert_int_equal(s.mismatches, 2);
  assert_int_equal(s.worst_index, 1); /* the first of two equal mismatches */
  assert_true(s.worst_abs == 0.5);
  assert_true(s.max_abs == 1.0);
}

/* Cutting a tensor into blocks, folded into fresh partials and merged in order, changes none of
 * the exact figures. */
static void test_blocks_do_not_matter(void **state) {
  (void)state;
  double a[100], b[100];
  for (int i = 0; i < 100; i++) {
    a[i] = (i % 7) - 3.0 + i * 0.01;
    b[i] = a[i] + ((i % 5) ? 1e-7 * i : 0) + (i == 50 ? NAN : 0) + (i == 70 ? INFINITY : 0);
  }
  pc_tol t = tol_none();
  t.set = PC_TOL_RTOL;
  t.rtol = 1e-6;
  pc_stats whole = run_float(a, b, 100, PC_DTYPE_FLOAT32, t), parts, part;
  memset(&parts, 0, sizeof parts);
  for (size_t at = 0; at < 100; at += 13) {
    memset(&part, 0, sizeof part);
    pc_kernel_args k = {&part, NULL, &t, PC_DTYPE_FLOAT32, at, at + 13 <= 100 ? 13 : 100 - at};
    pc_kernel_float(&k, a + at, b + at);
    pc_stats_merge(&parts, &part);
  }
  assert_int_equal(whole.nan_mismatches, 1);
  assert_int_equal(whole.inf_mismatches, 1);
  assert_int_equal(whole.worst_index, 50);
  assert_same_stats(&whole, &parts);
}

/* The float32/float64 fast path and the general path (used for every other compare dtype) give
 * the same figures: checked against a per-element fold through pc_ulp_distance, on random
 * values with zeros, sign crossings, subnormals, values beyond float32's range and non-finites. */
static void test_fast_path_matches_definition(void **state) {
  (void)state;
  enum { N = 4000 };
  static double a[N], b[N];
  uint64_t x = 88172645463325252ull; /* xorshift64 */
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    double m = (double)(x >> 11) / 9007199254740992.0 - 0.5;
    int kind = (int)(x % 11);
    a[i] = ldexp(m, (int)(x >> 3) % 300 - 150);
    b[i] = kind == 0   ? a[i]
           : kind == 1 ? -a[i]
           : kind == 2 ? nextafter(a[i], 1)
           : kind == 3 ? 0.0
           : kind == 4 ? a[i] * 1e39
           : kind == 5 ? ldexp(1, -1070)
           : kind == 6 ? NAN
           : kind == 7 ? -INFINITY
                       : a[i] * (1 + m * 1e-6);
  }
  pc_dtype dts[] = {PC_DTYPE_FLOAT32, PC_DTYPE_FLOAT64};
  for (int d = 0; d < 2; d++) {
    pc_tol t = tol_none();
    t.set = PC_TOL_RTOL | PC_TOL_MAX_ULP;
    t.rtol = 1e-7;
    t.max_ulp = 3;
    pc_stats fast = run_float(a, b, N, dts[d], t);
    uint64_t max_ulp = 0, mism = 0;
    for (int i = 0; i < N; i++) {
      if (isnan(a[i]) != isnan(b[i])) {
        mism++;
        continue;
      }
      if (isnan(a[i]))
        continue;
      uint64_t u = pc_ulp_distance(a[i], b[i], dts[d]);
      bool inf_mis = a[i] != b[i] && (isinf(a[i]) || isinf(b[i]));
      bool pass =
          a[i] == b[i] || (!inf_mis && (fabs(b[i] - a[i]) <= t.rtol * fabs(a[i]) || u <= 3));
      max_ulp = u > max_ulp ? u : max_ulp;
      mism += !pass;
    }
    assert_int_equal(fast.max_ulp, max_ulp);
    assert_int_equal(fast.mismatches, mism);
  }
}

/* Integers are exact across int64 and uint64: -1 vs 1 is 2 apart; INT64_MIN vs UINT64_MAX
 * saturates the ulp distance and gives abs 2^63 + 2^64 in double. */
static void test_int_exact(void **state) {
  (void)state;
  const int64_t a[] = {-1, INT64_MIN, 7}, b[] = {1, -1 /* UINT64_MAX as bits */, 7};
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_tol t = tol_none();
  pc_kernel_args k = {&s, NULL, &t, PC_DTYPE_INT64, 0, 3};
  pc_kernel_int(&k, a, false, b, true);
  assert_int_equal(s.mismatches, 2);
  assert_int_equal(s.max_ulp, UINT64_MAX);
  assert_true(s.max_abs == ldexp(1.0, 63) + ldexp(1.0, 64));
  assert_true(s.worst_a[0] == -ldexp(1.0, 63));
  assert_true(s.worst_b[0] == ldexp(1.0, 64));
  pc_stats s1;
  memset(&s1, 0, sizeof s1);
  pc_kernel_args k1 = {&s1, NULL, &t, PC_DTYPE_INT64, 0, 1};
  pc_kernel_int(&k1, a, false, b, false);
  assert_int_equal(s1.max_ulp, 2);
  assert_true(s1.max_abs == 2.0 && s1.max_rel == 2.0);
}

/* Integers against floats exactly: 2^53 + 1 and 2^63 - 1 each 1 from their float (lost when
 * the integer is rounded to double), -2^53 - 1 against -2^53 too, 7 equal to 7.0, 3 against
 * 2.5 half apart; uint64 max against 2^64 is 1 apart as well. */
static void test_mixed_exact(void **state) {
  (void)state;
  const int64_t ints[] = {(1ll << 53) + 1, INT64_MAX, -(1ll << 53) - 1, 7, 3};
  const double vals[] = {0x1p53, 0x1p63, -0x1p53, 7.0, 2.5};
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_tol t = tol_none();
  pc_kernel_args k = {&s, NULL, &t, PC_DTYPE_FLOAT64, 0, 5};
  pc_kernel_mixed(&k, NULL, ints, false, vals, NULL, false);
  assert_int_equal(s.mismatches, 4);
  assert_true(s.max_abs == 1.0 && s.sum_abs == 3.5);
  memset(&s, 0, sizeof s); /* the float as A, the integer as B */
  k.n = 1;
  const int64_t umax[] = {-1};
  const double two64[] = {0x1p64};
  pc_kernel_mixed(&k, two64, NULL, false, NULL, umax, true);
  assert_int_equal(s.mismatches, 1);
  assert_true(s.max_abs == 1.0);
}

/* Complex: 3+4i vs 3.3+4.4i: abs = |0.3+0.4i| = 0.5, rel = 0.5/5 = 0.1. */
static void test_complex(void **state) {
  (void)state;
  const double a[] = {3.0, 4.0, INFINITY, 1.0, NAN, 0.0},
               b[] = {3.0 + 0.3, 4.0 + 0.4, INFINITY, 2.0, NAN, 1.0};
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_tol t = tol_none();
  pc_kernel_args k = {&s, NULL, &t, PC_DTYPE_FLOAT64, 0, 1};
  pc_kernel_complex(&k, a, b);
  assert_true(fabs(s.max_abs - 0.5) < 1e-15);
  assert_true(fabs(s.max_rel - 0.1) < 1e-15);
  /* (inf, 1) vs (inf, 2): the infinities match, so abs is 1, and rel is relative to the finite
   * component: 1/1, not 1/inf = 0. */
  memset(&s, 0, sizeof s);
  k.n = 1;
  pc_kernel_complex(&k, a + 2, b + 2);
  assert_int_equal(s.inf_mismatches, 0);
  assert_true(s.max_abs == 1.0 && s.max_rel == 1.0);
  /* (nan, 0) vs (nan, 1): NaN on both sides is equal whatever the other component. */
  memset(&s, 0, sizeof s);
  pc_kernel_complex(&k, a + 4, b + 4);
  assert_int_equal(s.mismatches, 0);
  assert_int_equal(s.nan_mismatches, 0);
}

/* bfloat16 keeps 8 significant bits: 1 + 2^-7 is representable, 1 + 2^-8 is not. */
static void test_unrepresentable(void **state) {
  (void)state;
  const double v[] = {1.0, 1.0 + ldexp(1.0, -7), 1.0 + ldexp(1.0, -8), NAN, INFINITY};
  assert_int_equal(pc_kernel_unrepresentable(v, 5, PC_DTYPE_BFLOAT16), 1);
  const double big[] = {65504.0, 65520.0, 1e-8}; /* float16 max; beyond it; below its range */
  assert_int_equal(pc_kernel_unrepresentable(big, 3, PC_DTYPE_FLOAT16), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_ulp_float32),
      cmocka_unit_test(test_zeros_and_sign_crossing),
      cmocka_unit_test(test_nan_rules),
      cmocka_unit_test(test_inf_rules),
      cmocka_unit_test(test_mean_ulp_exact_past_2_64),
      cmocka_unit_test(test_tolerance_criteria),
      cmocka_unit_test(test_worst_prefers_mismatch),
      cmocka_unit_test(test_blocks_do_not_matter),
      cmocka_unit_test(test_fast_path_matches_definition),
      cmocka_unit_test(test_int_exact),
      cmocka_unit_test(test_mixed_exact),
      cmocka_unit_test(test_complex),
      cmocka_unit_test(test_unrepresentable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
