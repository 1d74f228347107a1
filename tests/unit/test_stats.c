/* Aggregate figures and the error distribution, on inputs small enough to derive by hand. */
#include "kernel.h"

#include <paritycheck/compare.h>

#include <math.h>   /* sqrt, log10, INFINITY, NAN */
#include <string.h> /* memset */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static pc_stats fold(const double *a, const double *b, size_t n, pc_dtype dt) {
  pc_stats s;
  pc_tol t = {0};
  memset(&s, 0, sizeof s);
  pc_kernel_args k = {&s, NULL, &t, dt, 0, n};
  pc_kernel_float(&k, a, b);
  return s;
}

/* a = (3, 4), b = (3, 5): sum a^2 = 25, sum b^2 = 34, sum ab = 29, sum (b-a)^2 = 1. */
static void test_aggregates_by_hand(void **state) {
  (void)state;
  const double a[] = {3, 4}, b[] = {3, 5};
  pc_stats s = fold(a, b, 2, PC_DTYPE_FLOAT64);
  pc_aggregates g = pc_stats_aggregates(&s);
  assert_true(s.sum_sq_a == 25 && s.sum_sq_b == 34 && s.sum_ab == 29 && s.sum_sq_diff == 1);
  assert_true(g.rms == sqrt(0.5));
  assert_true(g.rel_rms == sqrt(1.0 / 25));
  assert_true(g.cosine == 29 / sqrt(25.0 * 34));
  assert_true(g.snr_db == 10 * log10(25.0));
  assert_true(s.sum_a_diff == 4); /* 3*0 + 4*1 */
  assert_true(g.scale_error == 4.0 / 25);
  assert_true(g.mean_abs == 0.5);   /* (0 + 1) / 2 */
  assert_true(g.mean_rel == 0.125); /* (0 + 1/4) / 2 */
}

/* Non-finite pairs stay out of the sums; NaN mismatches out of the means. */
static void test_aggregates_skip_non_finite(void **state) {
  (void)state;
  const double a[] = {1, INFINITY, NAN, 2}, b[] = {1, INFINITY, 7, 2};
  pc_stats s = fold(a, b, 4, PC_DTYPE_FLOAT64);
  pc_aggregates g = pc_stats_aggregates(&s);
  assert_int_equal(s.finite_terms, 2);
  assert_true(s.sum_sq_a == 5 && s.sum_sq_diff == 0);
  assert_true(isinf(g.snr_db) && g.snr_db > 0);
  assert_true(g.rel_rms == 0 && g.cosine == 1);
  assert_int_equal(s.ulp_terms, 3);
  assert_true(g.mean_abs == 0);
}

static void test_aggregates_edges(void **state) {
  (void)state;
  const double z[] = {0, 0}, one[] = {0, 1};
  pc_stats s = fold(z, z, 2, PC_DTYPE_FLOAT64);
  pc_aggregates g = pc_stats_aggregates(&s);
  assert_true(g.cosine == 1 && g.rel_rms == 0 && g.rms == 0 && isinf(g.snr_db));
  assert_true(g.scale_error == 0);
  s = fold(z, one, 2, PC_DTYPE_FLOAT64); /* zero reference, nonzero candidate */
  g = pc_stats_aggregates(&s);
  assert_true(g.cosine == 0 && isinf(g.rel_rms) && isinf(g.snr_db) && g.snr_db < 0);
  assert_true(isinf(g.scale_error) && g.scale_error > 0);
  s = fold(one, z, 0, PC_DTYPE_FLOAT64); /* empty */
  g = pc_stats_aggregates(&s);
  assert_true(g.rms == 0 && g.mean_abs == 0 && g.mean_rel == 0);
}

/* float16 around 1 has spacing 2^-10: distances 0, 1, 2, 3, 4 ULPs land in buckets 0, 1, 2, 2, 3.
 */
static void test_ulp_histogram(void **state) {
  (void)state;
  const double u = 1.0 / 1024;
  const double a[] = {1, 1, 1, 1, 1}, b[] = {1, 1 + u, 1 + 2 * u, 1 + 3 * u, 1 + 4 * u};
  pc_stats s = fold(a, b, 5, PC_DTYPE_FLOAT16);
  const uint64_t want[PC_ULP_BUCKETS] = {1, 1, 2, 1};
  assert_memory_equal(s.ulp_hist, want, sizeof want);
  /* The widest distance, float64 -inf to +inf, is in the top bucket (2^63 <= ulp < 2^64). */
  const double lo[] = {-INFINITY}, hi[] = {INFINITY};
  s = fold(lo, hi, 1, PC_DTYPE_FLOAT64);
  assert_int_equal(s.ulp_hist[64], 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_aggregates_by_hand),
      cmocka_unit_test(test_aggregates_skip_non_finite),
      cmocka_unit_test(test_aggregates_edges),
      cmocka_unit_test(test_ulp_histogram),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
