/* Streaming quantiles: every estimate is checked against the exact order statistic of the same
 * values, found by sorting in the test. */
#include "qhist.h"

#include <paritycheck/compare.h> /* pc_quantile_levels */

#include <float.h>  /* DBL_MAX */
#include <math.h>   /* ceil, ldexp, INFINITY */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* memcpy */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static pc_qhist *hist_new(void) {
  pc_qhist *h = calloc(1, sizeof *h);
  assert_non_null(h);
  pc_qhist_reset(h);
  return h;
}

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The exact quantile of docs/metrics.md: the value of rank ceil(p N) of the sorted values. */
static double exact_quantile(const double *sorted, size_t n, double p) {
  size_t t = (size_t)ceil(p * (double)n);
  return sorted[(t ? t : 1) - 1];
}

/* 998 zeros, one 1 and one 2: p99.9 is the 999th value, 1, exactly (a small whole number). */
static void test_small_integers_exact(void **state) {
  (void)state;
  pc_qhist *h = hist_new();
  pc_qhist_add_zeros(h, 998);
  pc_qhist_add(h, 1);
  pc_qhist_add(h, 2);
  double q[PC_NQUANTILES];
  assert_int_equal(pc_qhist_quantiles(h, pc_quantile_levels, PC_NQUANTILES, q), 0);
  assert_true(q[0] == 0 && q[1] == 0 && q[2] == 0); /* p50, p90, p99: zeros */
  assert_true(q[3] == 1);
  for (int v = 1; v < 32; v++) { /* a single whole number is its own quantile */
    pc_qhist_reset(h);
    pc_qhist_add(h, v);
    assert_int_equal(pc_qhist_quantiles(h, pc_quantile_levels, 1, q), 0);
    assert_true(q[0] == v);
  }
  free(h);
}

/* Random magnitudes over 60 octaves: lower edge of the exact quantile's bucket, so
 * estimate <= exact < estimate * (1 + 1/16), and never above the maximum. */
static void test_random_within_one_bucket(void **state) {
  (void)state;
  enum { N = 20000 };
  static double v[N];
  pc_qhist *h = hist_new(), *h1 = hist_new(), *h2 = hist_new();
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = ldexp(1.0 + (double)(x >> 12) / 4503599627370496.0, (int)(x % 60) - 40);
    pc_qhist_add(h, v[i]);
    pc_qhist_add(i % 3 ? h1 : h2, v[i]);
  }
  pc_qhist_merge(h1, h2); /* merging gives the same histogram as adding everything to one */
  assert_memory_equal(h1, h, sizeof *h);
  qsort(v, N, sizeof v[0], by_value);
  const double levels[] = {0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.99999};
  double q[7];
  assert_int_equal(pc_qhist_quantiles(h, levels, 7, q), 0);
  for (int k = 0; k < 7; k++) {
    double e = exact_quantile(v, N, levels[k]);
    assert_true(q[k] <= e && e < q[k] * (1 + 1.0 / 16));
    assert_true(q[k] <= v[N - 1]);
  }
  free(h);
  free(h1);
  free(h2);
}

/* Infinities have their own bucket: a rank past the finite values is +inf. */
static void test_infinities(void **state) {
  (void)state;
  pc_qhist *h = hist_new();
  for (int i = 0; i < 95; i++)
    pc_qhist_add(h, 3.0);
  for (int i = 0; i < 5; i++)
    pc_qhist_add(h, INFINITY);
  double q[PC_NQUANTILES];
  assert_int_equal(pc_qhist_quantiles(h, pc_quantile_levels, PC_NQUANTILES, q), 0);
  assert_true(q[0] == 3 && q[1] == 3); /* ranks 50 and 90 of 100 */
  assert_true(isinf(q[2]) && isinf(q[3]));
  pc_qhist_reset(h); /* empty: every quantile is 0 */
  assert_int_equal(pc_qhist_quantiles(h, pc_quantile_levels, PC_NQUANTILES, q), 0);
  assert_true(q[0] == 0 && q[3] == 0);
  free(h);
}

/* Zeros live outside the bucket range: merging, adding many at once and resetting still carry
 * them. 3 zeros and a 4 merged into 2 zeros give 5 zeros and a 4 (p50 = 0, p90 = 4); 10 more
 * zeros and two more 4s at once, 15 zeros and three 4s (p90 = rank 17 of 18 = 4, p50 = 0);
 * after a reset, nothing (every quantile 0). */
static void test_zeros_merge_add_n_reset(void **state) {
  (void)state;
  pc_qhist *a = hist_new(), *b = hist_new();
  pc_qhist_add_zeros(b, 3);
  pc_qhist_add(b, 0.0);
  pc_qhist_add(b, 4.0);
  pc_qhist_add_zeros(a, 1);
  assert_true(a->lo > a->hi); /* zeros alone touch no range */
  pc_qhist_merge(a, b);
  assert_int_equal(a->count[0], 5);
  const double levels[2] = {0.5, 0.9};
  double q[2];
  assert_int_equal(pc_qhist_quantiles(a, levels, 2, q), 0);
  assert_true(q[0] == 0 && q[1] == 4.0);
  pc_qhist_add_n(a, 0.0, 10);
  pc_qhist_add_n(a, 4.0, 2);
  assert_int_equal(a->count[0], 15);
  assert_int_equal(a->count[pc_qhist_bucket(4.0)], 3);
  assert_int_equal(pc_qhist_quantiles(a, levels, 2, q), 0);
  assert_true(q[0] == 0 && q[1] == 4.0);
  pc_qhist_reset(a);
  assert_int_equal(a->count[0], 0);
  assert_int_equal(a->count[pc_qhist_bucket(4.0)], 0);
  free(a);
  free(b);
}

/* The lower edge of x's bucket, by clearing its low 48 bits: how qhist.h defines a bucket,
 * written out here without the histogram. */
static double bucket_edge(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  bits &= ~(((uint64_t)1 << 48) - 1);
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* Few values over a wide range leave most buckets between them empty (the PDF then skips
 * them): 3 x 1e-30, 4 x 1.5, one 1.9, 2 x 1e30 and one DBL_MAX (the top finite bucket) must give,
 * for every rank t of the 11 values, the edge of the bucket of the t-th smallest value. */
static void test_sparse_buckets_every_rank(void **state) {
  (void)state;
  const double v[] = {1e-30, 1e-30, 1e-30, 1.5, 1.5, 1.5, 1.5, 1.9, 1e30, 1e30, DBL_MAX};
  enum { N = sizeof v / sizeof v[0] };
  pc_qhist *h = hist_new();
  for (int i = N - 1; i >= 0; i--)
    pc_qhist_add(h, v[i]);
  for (int t = 1; t <= N; t++) {
    double level = ((double)t - 0.5) / N, q; /* ceil(level * N) = t */
    assert_int_equal(pc_qhist_quantiles(h, &level, 1, &q), 0);
    assert_true(q == bucket_edge(v[t - 1]));
  }
  assert_true(bucket_edge(1.9) == bucket_edge(1.5) + 0.375); /* two buckets, not one */
  free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_integers_exact),
      cmocka_unit_test(test_random_within_one_bucket),
      cmocka_unit_test(test_infinities),
      cmocka_unit_test(test_zeros_merge_add_n_reset),
      cmocka_unit_test(test_sparse_buckets_every_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
