/* The envelope's per-element test in lanes (envelope_lanes.h) against pc_envelope_fold on the
 * decoded doubles, the definition: every build, float32 and float16 pairs, with non-finite
 * values, zero and equal pairs, NaN, negative and zero bounds, a zero scale and floor, and
 * lengths that leave a tail. Two counts and a maximum, compared exactly. */
#include "cpu.h" /* pc_f32_widest */
#include "envelope.h"
#include "envelope_lanes.h"
#include "numerics.h" /* pc_f16_float */

#include <math.h>   /* INFINITY, NAN */
#include <stdint.h> /* uint16_t, uint64_t */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memcpy, memset */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static uint64_t rng_state = 0x243F6A8885A308D3u;

static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Du;
}

/* A float16 pattern: mostly ordinary, now and then a zero, a subnormal, an inf or a NaN. */
static uint16_t half_pattern(void) {
  switch (rnd() % 16) {
  case 0:
    return (uint16_t)(rnd() % 2 ? 0x0000u : 0x8000u);
  case 1:
    return (uint16_t)(rnd() % 0x400u | (rnd() % 2 ? 0x8000u : 0));
  case 2:
    return rnd() % 2 ? 0x7C00u : 0xFE01u;
  default:
    return (uint16_t)((0x3000u + rnd() % 0x1000u) | (rnd() % 2 ? 0x8000u : 0));
  }
}

/* n pairs (float32 bytes, or float16 where half) and float16 bounds, with their doubles. */
typedef struct pairs {
  unsigned char *a, *b, *e;
  double *x, *y, *ev;
} pairs;

static pairs make_pairs(size_t n, bool half) {
  pairs p = {malloc(4 * n + 4), malloc(4 * n + 4), malloc(2 * n + 2),
             malloc(8 * n + 8), malloc(8 * n + 8), malloc(8 * n + 8)};
  for (size_t i = 0; i < n; i++) {
    uint16_t ha = half_pattern(), hb = rnd() % 4 ? ha : half_pattern(), he = half_pattern();
    if (rnd() % 3 == 0)
      hb = (uint16_t)(ha + rnd() % 8); /* a few ULPs apart */
    if (rnd() % 8 == 0)
      he = (uint16_t)(rnd() % 2 ? 0xBC00u : 0x7E00u); /* -1 or a NaN: no width */
    p.ev[i] = pc_f16_float(he);
    memcpy(p.e + 2 * i, &he, 2);
    if (half) {
      memcpy(p.a + 2 * i, &ha, 2);
      memcpy(p.b + 2 * i, &hb, 2);
      p.x[i] = pc_f16_float(ha);
      p.y[i] = pc_f16_float(hb);
    } else { /* float32 values with more bits than float16's */
      float fa = pc_f16_float(ha) * (1.0f + (float)(rnd() % 1000) * 0x1p-20f);
      float fb = hb == ha ? fa : pc_f16_float(hb) * (1.0f + (float)(rnd() % 1000) * 0x1p-20f);
      memcpy(p.a + 4 * i, &fa, 4);
      memcpy(p.b + 4 * i, &fb, 4);
      p.x[i] = fa;
      p.y[i] = fb;
    }
  }
  return p;
}

static void free_pairs(pairs *p) {
  free(p->a);
  free(p->b);
  free(p->e);
  free(p->x);
  free(p->y);
  free(p->ev);
}

static void same_figures(const pc_stats *got, const pc_stats *want) {
  assert_memory_equal(&got->env_max_ratio, &want->env_max_ratio, sizeof want->env_max_ratio);
  assert_int_equal(got->env_beyond, want->env_beyond);
  assert_int_equal(got->env_above_median, want->env_above_median);
}

typedef size_t (*env_fn)(pc_stats *, pc_ev_layout, const unsigned char *, const unsigned char *,
                         const unsigned char *, size_t, const pc_envelope_fig *);

/* The n pairs of p through pc_envelope_fold_bytes and through every build this processor runs
 * (the tail after a build's last step by pc_envelope_fold), each against want. */
static void every_build_is(const pairs *p, size_t n, bool half, const pc_envelope_fig *fig,
                           const pc_stats *want) {
#ifdef PC_HAVE_AVX2
  static const env_fn builds[] = {pc_f32_run_base_envelope, pc_f32_run_avx2_envelope,
                                  pc_f32_run_avx512_envelope};
  int widest = (int)pc_f32_widest();
#else
  static const env_fn builds[] = {pc_f32_run_base_envelope};
  int widest = 0;
#endif
  pc_stats got;
  memset(&got, 0, sizeof got);
  pc_envelope_fold_bytes(&got, half, p->a, p->b, p->e, n, fig);
  same_figures(&got, want);
  for (int v = 0; v <= widest; v++) {
    memset(&got, 0, sizeof got);
    size_t end = builds[v](&got, half ? PC_EV_HALF : PC_EV_FLOAT, p->a, p->b, p->e, n, fig);
    pc_envelope_fold(&got, p->x + end, p->y + end, p->ev + end, n - end, fig);
    same_figures(&got, want);
  }
}

static void test_lanes_are_the_fold(void **state) {
  (void)state;
  for (int round = 0; round < 200; round++) {
    size_t n = round < 40 ? (size_t)round : 40 + rnd() % 5000;
    bool half = round % 2;
    pairs p = make_pairs(n, half);
    pc_envelope_fig fig = {0};
    fig.scale = round % 5 ? 1e-3 * (double)(1 + rnd() % 100) : 0;
    fig.elem_floor = round % 7 ? 1e-4 : 0;
    fig.grid_u = round % 3 ? 0x1p-24 : 0;
    fig.elem_factor = 0.5 + (double)(rnd() % 8);
    fig.median_bound = 1e-3 * (double)(rnd() % 100);
    fig.has_median = round % 4 != 0;
    pc_stats want;
    memset(&want, 0, sizeof want);
    pc_envelope_fold(&want, p.x, p.y, p.ev, n, &fig);
    every_build_is(&p, n, half, &fig, &want);
    free_pairs(&p);
  }
}

/* Ratios exactly at the factor, counted by hand: bound 1 (no scale, floor 1, no grid), factor
 * 2, A = 1 and B = 3 (ratio 2: not beyond) or B = 3 + 2^-22 (the next float32: beyond), with a
 * tail after the last whole step. */
static void test_ties_at_the_factor(void **state) {
  (void)state;
  enum { N = 61 };
  float a[N], b[N];
  uint16_t e[N];
  unsigned beyond = 0;
  for (int i = 0; i < N; i++) {
    a[i] = 1.0f;
    b[i] = i % 7 == 3 ? 3.0f + 0x1p-22f : 3.0f;
    beyond += i % 7 == 3;
    e[i] = 0x3C00u; /* 1, unused without a scale */
  }
  pc_envelope_fig fig = {0};
  fig.elem_floor = 1;
  fig.elem_factor = 2;
  fig.median_bound = 2;
  fig.has_median = true;
  pc_stats got;
  memset(&got, 0, sizeof got);
  pc_envelope_fold_bytes(&got, false, (const unsigned char *)a, (const unsigned char *)b,
                         (const unsigned char *)e, N, &fig);
  assert_int_equal(got.env_beyond, beyond);
  assert_int_equal(got.env_above_median, beyond);
  assert_true(got.env_max_ratio == 2.0 + 0x1p-22);
}

/* Ordinary pairs, all finite, whose ratios lie far below the factor (none beyond): the maximum
 * ratio is pc_envelope_fold's in every build, for float32 and float16 pairs. */
static void test_maximum_below_the_factor(void **state) {
  (void)state;
  for (int round = 0; round < 40; round++) {
    size_t n = 3000 + rnd() % 3000;
    bool half = round % 2;
    pairs p = make_pairs(n, half);
    for (size_t i = 0; i < n; i++) { /* finite, B a few ULPs off, bounds of A's size */
      uint16_t ha = (uint16_t)(0x3800u + rnd() % 0x800u), he = (uint16_t)(0x3000u + rnd() % 0x800u);
      uint16_t hb = (uint16_t)(ha + rnd() % 3);
      memcpy(p.e + 2 * i, &he, 2);
      p.ev[i] = pc_f16_float(he);
      if (half) {
        memcpy(p.a + 2 * i, &ha, 2);
        memcpy(p.b + 2 * i, &hb, 2);
        p.x[i] = pc_f16_float(ha);
        p.y[i] = pc_f16_float(hb);
      } else {
        float fa = pc_f16_float(ha), fb = fa * (1.0f + (float)(rnd() % 64) * 0x1p-23f);
        memcpy(p.a + 4 * i, &fa, 4);
        memcpy(p.b + 4 * i, &fb, 4);
        p.x[i] = fa;
        p.y[i] = fb;
      }
    }
    pc_envelope_fig fig = {0};
    fig.scale = 1e-2;
    fig.elem_floor = 1e-6;
    fig.grid_u = 0x1p-24;
    fig.elem_factor = 1e6;
    fig.median_bound = 1e-4;
    fig.has_median = true;
    pc_stats want;
    memset(&want, 0, sizeof want);
    pc_envelope_fold(&want, p.x, p.y, p.ev, n, &fig);
    assert_int_equal(want.env_beyond, 0);
    every_build_is(&p, n, half, &fig, &want);
    free_pairs(&p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lanes_are_the_fold),
                                     cmocka_unit_test(test_ties_at_the_factor),
                                     cmocka_unit_test(test_maximum_below_the_factor)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
