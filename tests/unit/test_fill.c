/* Runs of fill pairs (fill.h): every figure of n copies of one element pair, against values
 * worked out by hand from docs/metrics.md. */
#include "fill.h"

#include <math.h>   /* NAN */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* memcpy */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* A dataset of one dtype (stored and logical) whose fill value is the `size` bytes at v. */
static pc_dataset with_fill(pc_kind kind, pc_dtype dtype, const void *v, size_t size) {
  pc_dataset d = {0};
  d.kind = kind;
  d.stored = d.logical = dtype;
  d.elem_size = size;
  memcpy(d.fill, v, size);
  return d;
}

static pc_dataset f32_fill(float v) {
  return with_fill(PC_KIND_FLOAT, PC_DTYPE_FLOAT32, &v, sizeof v);
}

static pc_dataset i64_fill(int64_t v) {
  return with_fill(PC_KIND_INTEGER, PC_DTYPE_INT64, &v, sizeof v);
}

typedef struct fixture {
  pc_stats s;
  pc_qhist *h[PC_NHISTS];
  pc_tol tol;
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  for (int i = 0; i < PC_NHISTS; i++) {
    fx->h[i] = calloc(1, sizeof *fx->h[i]);
    pc_qhist_reset(fx->h[i]);
  }
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  for (int i = 0; i < PC_NHISTS; i++)
    free(fx->h[i]);
  free(fx);
  return 0;
}

static void run(fixture *fx, const pc_dataset *a, const pc_dataset *b, uint64_t base, uint64_t n) {
  pc_kernel_args k = {&fx->s, fx->h, &fx->tol, a->logical, base, 0};
  pc_fill_run(&k, a, b, n);
}

/* 1.0 vs 1.5 in float32, 2^43 times from element 7, atol 0.25: every pair a mismatch of abs and
 * rel 0.5 and 2^22 ulp (float32's spacing in [1, 2) is 2^-23); the ulp sum 2^65 needs the high
 * word (hi 2, lo 0); each double sum is 2^43 times the pair's term, all exact. */
static void test_float_run(void **state) {
  fixture *fx = *state;
  pc_dataset a = f32_fill(1.0f), b = f32_fill(1.5f);
  const uint64_t n = UINT64_C(1) << 43;
  fx->tol.set = PC_TOL_ATOL;
  fx->tol.atol = 0.25;
  run(fx, &a, &b, 7, n);
  const pc_stats *s = &fx->s;
  assert_true(s->count == n && s->mismatches == n && s->ulp_terms == n && s->finite_terms == n);
  assert_true(s->nan_mismatches == 0 && s->inf_mismatches == 0);
  assert_true(s->max_abs == 0.5 && s->max_rel == 0.5 && s->max_ulp == UINT64_C(1) << 22);
  assert_true(s->ulp_sum_hi == 2 && s->ulp_sum_lo == 0);
  assert_true(s->sum_sq_a == 0x1p43 && s->sum_sq_b == 2.25 * 0x1p43 && s->sum_ab == 1.5 * 0x1p43);
  assert_true(s->sum_sq_diff == 0x1p41 && s->sum_a_diff == 0x1p42);
  assert_true(s->sum_abs == 0x1p42 && s->sum_rel == 0x1p42);
  assert_true(s->ulp_hist[23] == n); /* bucket 23 holds [2^22, 2^23) */
  assert_true(s->has_worst && s->worst_index == 7 && s->worst_class == 1);
  assert_true(s->worst_a[0] == 1.0 && s->worst_b[0] == 1.5 && s->worst_abs == 0.5);
  assert_true(fx->h[PC_HIST_ABS]->count[pc_qhist_bucket(0.5)] == n);
  assert_true(fx->h[PC_HIST_REL]->count[pc_qhist_bucket(0.5)] == n);
  assert_true(fx->h[PC_HIST_ULP]->count[pc_qhist_bucket(0x1p22)] == n);
}

/* Runs merged in row-major order: 3 equal pairs (2 vs 2) at 0, 4 mismatches (1 vs 1.5) at 3,
 * 5 more at 10 (a tie: the worst stays at 3), then NaN vs 0 twice at 20 and once at 30 (nan
 * mismatches win, the first one stays). NaN pairs take no part in the maxima, the ulp sum or
 * the histograms. */
static void test_runs_in_order(void **state) {
  fixture *fx = *state;
  pc_dataset two = f32_fill(2.0f), one = f32_fill(1.0f), half = f32_fill(1.5f);
  pc_dataset nan = f32_fill(NAN), zero = f32_fill(0.0f);
  run(fx, &two, &two, 0, 3);
  run(fx, &one, &half, 3, 4);
  assert_true(fx->s.worst_index == 3 && fx->s.worst_class == 1);
  run(fx, &one, &half, 10, 5);
  assert_true(fx->s.worst_index == 3);
  run(fx, &nan, &zero, 20, 2);
  run(fx, &nan, &zero, 30, 1);
  const pc_stats *s = &fx->s;
  assert_true(s->count == 15 && s->mismatches == 12 && s->nan_mismatches == 3);
  assert_true(s->worst_index == 20 && s->worst_class == 2);
  assert_true(s->ulp_terms == 12 && s->ulp_sum_lo == 9 * (UINT64_C(1) << 22) && s->ulp_sum_hi == 0);
  assert_true(s->max_abs == 0.5 && s->finite_terms == 12);
  assert_true(s->sum_sq_a == 3 * 4.0 + 9 * 1.0 && s->sum_sq_diff == 9 * 0.25);
  assert_true(s->ulp_hist[0] == 3 && s->ulp_hist[23] == 9);
  assert_true(fx->h[PC_HIST_ABS]->count[0] == 3);
  assert_true(fx->h[PC_HIST_ABS]->count[pc_qhist_bucket(0.5)] == 9);
}

/* int64 -3 vs 4, ten times from 100: abs 7, rel 7/3, ulp 7 each, no criterion set. */
static void test_integer_run(void **state) {
  fixture *fx = *state;
  pc_dataset a = i64_fill(-3), b = i64_fill(4);
  run(fx, &a, &b, 100, 10);
  const pc_stats *s = &fx->s;
  assert_true(s->count == 10 && s->mismatches == 10 && s->max_ulp == 7 && s->ulp_sum_lo == 70);
  assert_true(s->max_abs == 7 && s->max_rel == 7.0 / 3 && s->worst_index == 100);
  assert_true(s->worst_a[0] == -3 && s->worst_b[0] == 4);
}

/* A float32 dataset tagged bfloat16 whose fill, 1 + 2^-20, bfloat16 cannot hold: every element
 * of the run is counted as not representable on that side. */
static void test_not_representable(void **state) {
  fixture *fx = *state;
  pc_dataset a = f32_fill(1.0f + 0x1p-20f), b = f32_fill(1.0f);
  a.logical = PC_DTYPE_BFLOAT16;
  pc_kernel_args k = {&fx->s, fx->h, &fx->tol, PC_DTYPE_FLOAT32, 0, 0};
  pc_fill_run(&k, &a, &b, 6);
  assert_true(fx->s.not_representable_a == 6 && fx->s.not_representable_b == 0);
  assert_true(fx->s.max_ulp == 8); /* 2^-20 is 8 float32 steps of 2^-23 */
}

/* A run of nothing changes nothing. */
static void test_empty_run(void **state) {
  fixture *fx = *state;
  pc_dataset a = f32_fill(1.0f), b = f32_fill(3.0f);
  run(fx, &a, &b, 5, 0);
  assert_true(fx->s.count == 0 && !fx->s.has_worst);
  assert_true(fx->h[PC_HIST_ABS]->lo > fx->h[PC_HIST_ABS]->hi); /* no bucket in use */
  assert_true(fx->h[PC_HIST_ABS]->count[0] == 0);
}

/* Both never written: 1.0 vs 1.5 over 10 elements, quantiles included (every abs and rel is
 * 0.5 and every ulp 2^22, which are bucket edges, so the estimates are exact). */
static void test_fill_compare(void **state) {
  (void)state;
  pc_dataset a = f32_fill(1.0f), b = f32_fill(1.5f);
  a.count = b.count = 10;
  a.all_fill = b.all_fill = true;
  pc_tensor t = {0};
  t.compare = PC_DTYPE_FLOAT32;
  assert_true(pc_fill_pair(&a, &b));
  assert_int_equal(pc_fill_compare(&t, &a, &b, true), PC_OK);
  assert_true(t.stats.count == 10 && t.stats.mismatches == 10 && t.stats.has_quantiles);
  for (int i = 0; i < PC_NQUANTILES; i++)
    assert_true(t.stats.q_abs[i] == 0.5 && t.stats.q_rel[i] == 0.5 && t.stats.q_ulp[i] == 0x1p22);
}

/* The magnitude of n fill elements: |-3| joins the maximum, 9 n the sum of squares; 0 elements
 * leave it alone, and a larger maximum stays. */
static void test_magnitude(void **state) {
  (void)state;
  pc_dataset d = f32_fill(-3.0f);
  pc_magnitude m = {1, 1, 1};
  pc_fill_magnitude(&d, 0, &m);
  assert_true(m.max_abs == 1 && m.sum_squares == 1 && m.count == 1);
  pc_fill_magnitude(&d, 4, &m);
  assert_true(m.max_abs == 3 && m.sum_squares == 37 && m.count == 5);
  pc_magnitude e = {5, 0, 0};
  pc_fill_magnitude(&d, 1, &e);
  assert_true(e.max_abs == 5 && e.sum_squares == 9 && e.count == 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_float_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runs_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_integer_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_representable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty_run, setup, teardown),
      cmocka_unit_test(test_fill_compare),
      cmocka_unit_test(test_magnitude),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
