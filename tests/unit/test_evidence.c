/* The structural evidence (evidence.h): the vector fold against the plain scalar loop that
 * defines every sum (the first version of evidence.c, kept here as the oracle, with the
 * signature's sample rule and the lane sums of evidence_lanes.h for the shifted distances and
 * the slices' a^2), bit for bit, on blocks with every class of pair, non-finite values, slices
 * and block seams; every vector build against the baseline one; and the lane sums against
 * exact sums. */
#include "evidence.h"
#include "evidence_lanes.h"
#include "kernel_f32.h" /* pc_f32_can_avx2, pc_f32_can_avx512; pc_f16_float (numerics.h) */
#include "numerics.h"   /* pc_dtype_round */

#include <float.h>  /* FLT_MIN, FLT_MAX */
#include <math.h>   /* fabs, fmax, isfinite, INFINITY, NAN */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memcpy, memset */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* --- the oracle: one scalar loop, a branch per pair ---------------------------------------- */

static void ref_reset(pc_evidence *e) {
  memset(e, 0, sizeof *e);
  e->min_a = e->min_b = INFINITY;
  e->max_a = e->max_b = -INFINITY;
  e->first_a = e->first_b = e->last_a = e->last_b = NAN;
}

static uint32_t ref_round_bits(uint32_t u, int drop) {
  uint32_t half = (1u << (drop - 1)) - 1, odd = (u >> drop) & 1u;
  return (u + half + odd) & ~((1u << drop) - 1);
}

static void ref_signature(pc_evidence *e, float a, float b) {
  uint32_t ua, ub;
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  uint32_t r16 = ref_round_bits(ua, 16), r13 = ref_round_bits(ua, 13);
  float h = (float)pc_dtype_round(a, PC_DTYPE_FLOAT16);
  bool off[3] = {r16 != ua, h != a, r13 != ua}, hit[3] = {r16 == ub, h == b, r13 == ub};
  for (int k = 0; k < 3; k++) {
    e->round_cand[k] += off[k];
    e->round_hit[k] += off[k] & hit[k];
  }
}

enum { REST, ZEROED, ZEROED_SMALL, FLIPPED };

static int ref_pair(pc_evidence *e, double a, double b) {
  double d = b - a;
  e->pairs++;
  e->sum_a += a;
  e->sum_b += b;
  e->sum_abs_a += fabs(a);
  e->sum_abs_b += fabs(b);
  e->min_a = a < e->min_a ? a : e->min_a;
  e->max_a = a > e->max_a ? a : e->max_a;
  e->min_b = b < e->min_b ? b : e->min_b;
  e->max_b = b > e->max_b ? b : e->max_b;
  e->zeros_a += a == 0;
  if (b == 0 && fabs(a) >= 0x1p-14) {
    e->zeroed++;
    e->zeroed_sq += a * a;
    return ZEROED;
  }
  if (b == 0 && fabs(a) >= FLT_MIN) {
    e->zeroed_small++;
    e->zeroed_small_sq += a * a;
    return ZEROED_SMALL;
  }
  if ((a < 0 && b > 0) || (a > 0 && b < 0)) {
    e->flipped++;
    e->flipped_sq += a * a;
    e->flipped_neg_sq += (a + b) * (a + b);
    return FLIPPED;
  }
  e->rest++;
  e->rest_sq += d * d;
  e->rest_max = fabs(d) > e->rest_max ? fabs(d) : e->rest_max;
  return REST;
}

static void ref_slice(pc_evidence *e, int g, double a, double b, int c) {
  double d2 = (b - a) * (b - a);
  e->slice_sq[g] += d2; /* slice_a2: ref_lane_sums */
  if (c == REST) {
    e->slice_rest[g]++;
    e->slice_rest_sq[g] += d2;
    e->slice_rest_max[g] = fabs(b - a) > e->slice_rest_max[g] ? fabs(b - a) : e->slice_rest_max[g];
  } else if (c == ZEROED) {
    e->slice_zeroed[g]++;
    e->slice_zeroed_sq[g] += a * a;
  }
}

static void ref_shift(pc_evidence *e, int k, double ai, double bi, double as) {
  if (!isfinite(as))
    return;
  double d0 = bi - ai;
  e->shift_pairs[k]++;
  e->shift_base_sq[k] += d0 * d0; /* shift_sq: ref_lane_sums */
}

/* The slice group of pair i of a block (-1: no slices). */
static int ref_group(const pc_slicing *s, size_t i) {
  if (!s || !s->stride || s->slices < 2)
    return -1;
  return (int)((s->base + i) / s->stride * PC_SLICE_GROUPS / s->slices);
}

/* Pair i's terms of the lane sums (evidence_lanes.h): (b[i] - a[i - 1])^2, (b[i] - a[i + 1])^2
 * and a[i]^2, each 0 where the pair, or the shift's neighbour within the block, is not finite. */
static void ref_lane_terms(const double *a, const double *b, size_t n, size_t i, double t[3]) {
  bool ok = isfinite(a[i]) && isfinite(b[i]);
  t[0] = ok && i > 0 && isfinite(a[i - 1]) ? (b[i] - a[i - 1]) * (b[i] - a[i - 1]) : 0;
  t[1] = ok && i + 1 < n && isfinite(a[i + 1]) ? (b[i] - a[i + 1]) * (b[i] - a[i + 1]) : 0;
  t[2] = ok ? a[i] * a[i] : 0;
}

/* One run [lo, hi) of the lane sums into e: eight lanes, lane l the pairs lo + l, lo + l + 8,
 * ... in order, added pairwise. */
static void ref_lane_run(pc_evidence *e, const double *a, const double *b, size_t n, int g,
                         size_t lo, size_t hi) {
  double lane[3][8] = {{0}};
  for (size_t i = lo; i < hi; i++) {
    double t[3];
    ref_lane_terms(a, b, n, i, t);
    for (int k = 0; k < 3; k++)
      lane[k][(i - lo) % 8] += t[k];
  }
  double sum[3];
  for (int k = 0; k < 3; k++) {
    const double *l = lane[k];
    sum[k] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }
  e->shift_sq[PC_SHIFT_FWD] += sum[0];
  e->shift_sq[PC_SHIFT_BACK] += sum[1];
  if (g >= 0)
    e->slice_a2[g] += sum[2];
}

/* The lane sums of a block, as evidence_lanes.h cuts it into runs: per slice group's range
 * [lo, hi), the block's first pair alone, then the most pairs short of the block's last pair
 * that make a multiple of 8, then what is left in runs of at most 8. */
static void ref_lane_sums(pc_evidence *e, const double *a, const double *b, size_t n,
                          const pc_slicing *s) {
  for (size_t lo = 0, hi; lo < n; lo = hi) {
    int g = ref_group(s, lo);
    for (hi = lo + 1; hi < n && ref_group(s, hi) == g;)
      hi++;
    size_t i = lo;
    if (i == 0)
      ref_lane_run(e, a, b, n, g, 0, i = 1);
    size_t to = hi < n - 1 ? hi : n - 1;
    if (i + 8 <= to) {
      size_t end = i + (to - i) / 8 * 8;
      ref_lane_run(e, a, b, n, g, i, end);
      i = end;
    }
    for (; i < hi; i += 8)
      ref_lane_run(e, a, b, n, g, i, hi - i < 8 ? hi : i + 8);
  }
}

/* A block of n pairs (doubles) into e, the signature on the pairs whose tensor index is below
 * the sample's end. */
static void ref_block(pc_evidence *e, const double *a, const double *b, size_t n,
                      const pc_slicing *s, bool sig) {
  ref_reset(e);
  bool on = s && s->stride && s->slices >= 2;
  for (size_t i = 0; i < n; i++) {
    bool ok = isfinite(a[i]) && isfinite(b[i]);
    if (i == 0) {
      e->first_a = ok ? a[i] : NAN;
      e->first_b = ok ? b[i] : NAN;
    }
    if (i + 1 == n) {
      e->last_a = ok ? a[i] : NAN;
      e->last_b = ok ? b[i] : NAN;
    }
    if (!ok)
      continue;
    int c = ref_pair(e, a[i], b[i]);
    if (on)
      ref_slice(e, ref_group(s, i), a[i], b[i], c);
    if (sig && (s ? s->base : 0) + i < PC_SIGNATURE_SAMPLE)
      ref_signature(e, (float)a[i], (float)b[i]);
    if (i > 0)
      ref_shift(e, PC_SHIFT_FWD, a[i], b[i], a[i - 1]);
    if (i + 1 < n)
      ref_shift(e, PC_SHIFT_BACK, a[i], b[i], a[i + 1]);
  }
  ref_lane_sums(e, a, b, n, s);
  e->seen = n > 0;
}

/* --- data ----------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Du;
}

static double unif(void) {
  return (double)(rnd() >> 11) * 0x1p-53;
}

/* One value of A: mostly ordinary, with zeros of both signs, tiny and huge values, values at
 * float16's overflow and bfloat16's grid, and non-finite ones. */
static double value_a(bool wide) {
  int k = (int)(rnd() % 40);
  double s = rnd() & 1 ? -1 : 1;
  switch (k) {
  case 0:
    return 0.0;
  case 1:
    return -0.0;
  case 2:
    return s * (FLT_MIN + unif() * 0x1p-15); /* below float16's normal range */
  case 3:
    return s * unif() * 0x1p-130; /* float32 subnormal */
  case 4:
    return s * (65504 + unif() * 40); /* around float16's overflow */
  case 5:
    return rnd() % 4 ? INFINITY * s : NAN;
  case 6:
    return wide ? s * FLT_MAX * (1 + unif()) : s; /* beyond float32 */
  case 7:
    return s * (double)(float)(unif() * 0x1p-20); /* float16 subnormal range */
  default:
    return s * (double)(float)(unif() * 4);
  }
}

/* B for a given a: equal, drifted, zeroed, flipped, negated, rounded to a coarser grid. */
static double value_b(double a) {
  int k = (int)(rnd() % 16);
  switch (k) {
  case 0:
    return a;
  case 1:
    return rnd() & 1 ? 0.0 : -0.0;
  case 2:
    return -a * (1 + 1e-3 * unif());
  case 3:
    return pc_dtype_round(a, PC_DTYPE_BFLOAT16);
  case 4:
    return pc_dtype_round(a, PC_DTYPE_FLOAT16);
  case 5:
    return value_a(false);
  default:
    return (double)(float)(a * (1 + 1e-6 * (unif() - 0.5)));
  }
}

typedef struct block {
  size_t n;
  double *a, *b;          /* as doubles (float32 or float16 values where stored so) */
  unsigned char *ra, *rb; /* stored: float32 or float16 bytes */
} block;

/* n pairs stored as `layout`, values exact in it. */
static block make_block(size_t n, pc_ev_layout layout) {
  block k = {n, malloc(8 * n + 8), malloc(8 * n + 8), malloc(8 * n + 8), malloc(8 * n + 8)};
  for (size_t i = 0; i < n; i++) {
    double a = value_a(layout == PC_EV_DOUBLE), b = value_b(a);
    if (layout == PC_EV_FLOAT) {
      float fa = (float)a, fb = (float)b;
      memcpy(k.ra + 4 * i, &fa, 4);
      memcpy(k.rb + 4 * i, &fb, 4);
      a = fa;
      b = fb;
    } else if (layout == PC_EV_HALF) {
      uint16_t ha = (uint16_t)rnd(), hb = rnd() % 3 ? ha ^ (uint16_t)(rnd() % 4) : (uint16_t)rnd();
      if (rnd() % 8 == 0)
        hb = ha ^ 0x8000u; /* negated */
      memcpy(k.ra + 2 * i, &ha, 2);
      memcpy(k.rb + 2 * i, &hb, 2);
      a = pc_f16_float(ha);
      b = pc_f16_float(hb);
    }
    k.a[i] = a;
    k.b[i] = b;
  }
  return k;
}

static void free_block(block *k) {
  free(k->a);
  free(k->b);
  free(k->ra);
  free(k->rb);
}

/* --- comparison ----------------------------------------------------------------------------- */

#define SAME_BITS(f)                                                                               \
  do {                                                                                             \
    if (memcmp(&x->f, &y->f, sizeof x->f) != 0) {                                                  \
      print_error("%s: field %s differs\n", what, #f);                                             \
                                                                                                   \
      fail();                                                                                      \
    }                                                                                              \
  } while (0)

static void same_evidence(const pc_evidence *x, const pc_evidence *y, const char *what) {
  SAME_BITS(seen);
  SAME_BITS(pairs);
  SAME_BITS(sum_a);
  SAME_BITS(sum_b);
  SAME_BITS(sum_abs_a);
  SAME_BITS(sum_abs_b);
  SAME_BITS(min_a);
  SAME_BITS(max_a);
  SAME_BITS(min_b);
  SAME_BITS(max_b);
  SAME_BITS(zeros_a);
  SAME_BITS(zeroed);
  SAME_BITS(zeroed_sq);
  SAME_BITS(zeroed_small);
  SAME_BITS(zeroed_small_sq);
  SAME_BITS(flipped);
  SAME_BITS(flipped_sq);
  SAME_BITS(flipped_neg_sq);
  SAME_BITS(rest);
  SAME_BITS(rest_sq);
  SAME_BITS(rest_max);
  SAME_BITS(shift_pairs);
  SAME_BITS(shift_sq);
  SAME_BITS(shift_base_sq);
  SAME_BITS(first_a);
  SAME_BITS(first_b);
  SAME_BITS(last_a);
  SAME_BITS(last_b);
  SAME_BITS(slice_sq);
  SAME_BITS(slice_a2);
  SAME_BITS(slice_rest);
  SAME_BITS(slice_rest_sq);
  SAME_BITS(slice_rest_max);
  SAME_BITS(slice_zeroed);
  SAME_BITS(slice_zeroed_sq);
  SAME_BITS(round_cand);
  SAME_BITS(round_hit);
}

/* The library's fold of block k (split into pieces at `cuts`, merged in order) against the
 * oracle's blocks merged the same way. `sig` applies to doubles: float32 bytes always count the
 * signature, float16 bytes never. */
static void check_block(const block *k, pc_ev_layout layout, pc_slicing sl, bool sig,
                        const size_t *cuts, int ncuts) {
  pc_stats got, want;
  memset(&got, 0, sizeof got);
  memset(&want, 0, sizeof want);
  for (int c = 0; c <= ncuts; c++) {
    size_t lo = c ? cuts[c - 1] : 0, hi = c < ncuts ? cuts[c] : k->n;
    pc_slicing at = sl;
    at.base += lo;
    if (layout == PC_EV_DOUBLE)
      pc_evidence_add_f64(&got, k->a + lo, k->b + lo, hi - lo, &at, sig);
    else {
      size_t es = layout == PC_EV_HALF ? 2 : 4;
      pc_evidence_add_bytes(&got, k->ra + es * lo, k->rb + es * lo, hi - lo, &at,
                            layout == PC_EV_HALF);
    }
    pc_evidence e;
    ref_block(&e, k->a + lo, k->b + lo, hi - lo, &at,
              layout == PC_EV_FLOAT || (sig && layout == PC_EV_DOUBLE));
    pc_evidence_merge(&want.ev, &e);
  }
  same_evidence(&got.ev, &want.ev,
                layout == PC_EV_DOUBLE  ? "f64"
                : layout == PC_EV_FLOAT ? "f32"
                                        : "f16");
}

/* Every length up to 70 and longer random blocks, each layout, with and without slices and
 * the signature, cut into pieces or not. */
static void test_against_oracle(void **state) {
  (void)state;
  static const pc_ev_layout layouts[3] = {PC_EV_DOUBLE, PC_EV_FLOAT, PC_EV_HALF};
  for (int round = 0; round < 400; round++) {
    size_t n = round < 70 ? (size_t)round : 70 + rnd() % 3000;
    for (int l = 0; l < 3; l++) {
      block k = make_block(n, layouts[l]);
      uint64_t slices = 2 + rnd() % 40, stride = n / slices + 1 + rnd() % 3;
      pc_slicing plain = {rnd() % 3 ? 0 : PC_SIGNATURE_SAMPLE - rnd() % 200, 0, 0};
      pc_slicing sliced = {0, stride, slices};
      size_t cuts[3] = {n / 3, n / 2, n / 2 + rnd() % (n / 2 + 1)};
      check_block(&k, layouts[l], plain, true, NULL, 0);
      check_block(&k, layouts[l], plain, false, NULL, 0);
      check_block(&k, layouts[l], sliced, true, NULL, 0);
      if (n > 4)
        check_block(&k, layouts[l], sliced, round % 2, cuts, 3);
      free_block(&k);
    }
  }
}

static block make_ordinary(size_t n, pc_ev_layout layout, bool positive);

/* Runs of every build on the same pairs reach the same state, bit for bit: random blocks of each
 * layout, and ordinary float32 and float16 ones, whose chunks are all finite (make_ordinary). */
static void test_builds_agree(void **state) {
  (void)state;
  typedef size_t (*fn)(pc_ev_run *, pc_ev_layout, const unsigned char *, const unsigned char *,
                       size_t, size_t, size_t);
  fn builds[3] = {pc_f32_run_base_evidence, NULL, NULL};
#ifdef PC_HAVE_AVX2
  if (pc_f32_can_avx2())
    builds[1] = pc_f32_run_avx2_evidence;
  if (pc_f32_can_avx512())
    builds[2] = pc_f32_run_avx512_evidence;
#endif
  static const pc_ev_layout layouts[5] = {PC_EV_DOUBLE, PC_EV_FLOAT, PC_EV_HALF, PC_EV_FLOAT,
                                          PC_EV_HALF};
  for (int l = 0; l < 5; l++) {
    size_t n = 4099;
    block k = l < 3 ? make_block(n, layouts[l]) : make_ordinary(n, layouts[l], false);
    const unsigned char *a = layouts[l] == PC_EV_DOUBLE ? (const unsigned char *)k.a : k.ra;
    const unsigned char *b = layouts[l] == PC_EV_DOUBLE ? (const unsigned char *)k.b : k.rb;
    pc_evidence base_e;
    pc_ev_run base_r;
    memset(&base_e, 0, sizeof base_e);
    memset(&base_r, 0, sizeof base_r);
    for (int v = 0; v < 3; v++) {
      if (!builds[v])
        continue;
      pc_evidence e;
      ref_reset(&e);
      pc_ev_run r = {&e,        l % 2 ? 3 : -1, INFINITY, -INFINITY, INFINITY,
                     -INFINITY, false,          false,    0,         0};
      /* 4096 pairs from 1: a multiple of every build's step, the neighbours in the block. */
      assert_int_equal(builds[v](&r, layouts[l], a, b, 1, n - 2, 3000), 4097);
      if (v == 0) {
        base_e = e;
        base_r = r;
        continue;
      }
      same_evidence(&e, &base_e, "build");
      assert_memory_equal(&r.min_a, &base_r.min_a, 4 * sizeof(double));
      assert_int_equal(r.zero_a_seen, base_r.zero_a_seen);
      assert_int_equal(r.zero_b_seen, base_r.zero_b_seen);
      assert_memory_equal(&r.zero_a, &base_r.zero_a, sizeof r.zero_a);
      assert_memory_equal(&r.zero_b, &base_r.zero_b, sizeof r.zero_b);
    }
    free_block(&k);
  }
}

/* The signature's sample (evidence.h): a tensor B = A rounded to bfloat16 counts its
 * candidates only among its first PC_SIGNATURE_SAMPLE elements, whatever the blocks. */
static void test_signature_sample(void **state) {
  (void)state;
  size_t n = PC_SIGNATURE_SAMPLE + 1000;
  float *a = malloc(4 * n), *b = malloc(4 * n);
  for (size_t i = 0; i < n; i++) {
    a[i] = 1.0f + (float)(i % 1000 + 1) * 0x1p-20f; /* off the bfloat16 grid */
    b[i] = (float)pc_dtype_round(a[i], PC_DTYPE_BFLOAT16);
  }
  pc_stats s;
  memset(&s, 0, sizeof s);
  for (size_t lo = 0; lo < n; lo += 7777) {
    size_t m = n - lo < 7777 ? n - lo : 7777;
    pc_slicing at = {lo, 0, 0};
    pc_evidence_add_bytes(&s, (const unsigned char *)(a + lo), (const unsigned char *)(b + lo), m,
                          &at, false);
  }
  assert_int_equal(s.ev.pairs, n);
  assert_int_equal(s.ev.round_cand[0], PC_SIGNATURE_SAMPLE);
  assert_int_equal(s.ev.round_hit[0], PC_SIGNATURE_SAMPLE);
  free(a);
  free(b);
}

/* --- the chunks' sums in lanes (evidence_lanes.c, pc_ev_lane_sums) ------------------------- */

/* A float32 of magnitude in [2^e, 2^(e+1)) with a random mantissa. */
static float near_pow2(int e, bool positive) {
  float v = (float)ldexp(1 + unif(), e);
  return positive || rnd() % 2 ? v : -v;
}

/* A block of ordinary float32 values (layout PC_EV_FLOAT) or float16 patterns (PC_EV_HALF),
 * which the lane sums take, with in about every other run of 128 pairs four values of one
 * magnitude 12 to 27 binades below the others, lower along the block: the grain that decides
 * whether they may (finer than any before it, so that it is what decides), passing where the
 * sums' magnitude (up to 2^15 of the values) reaches 2^53 of it, and more than one such
 * value, so that a chain that rounds twice ends elsewhere than an exact sum. b is a random number
 * of ULPs from a, mostly below 4, now and then up to 2^29. `positive`: every value above 0, so that
 * the sums grow and cross binades. Zeros now and then. */
static block make_ordinary(size_t n, pc_ev_layout layout, bool positive) {
  block k = {n, malloc(8 * n + 8), malloc(8 * n + 8), malloc(8 * n + 8), malloc(8 * n + 8)};
  int e = (int)(rnd() % 20) - 10, low = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % 128 == 0)
      low = rnd() % 2 ? 12 + (int)(16 * i / n) : -1;
    bool edge = low >= 0 && i % 128 >= 60 && i % 128 < 64;
    if (layout == PC_EV_FLOAT) {
      float fa = near_pow2(edge ? e - low : e + (int)(rnd() % 2), positive);
      uint32_t u, ulps = (uint32_t)(rnd() % (UINT64_C(1) << (rnd() % 4 ? 2 : rnd() % 30)));
      memcpy(&u, &fa, 4);
      u += rnd() % 4 ? 0 : ulps;
      float fb;
      memcpy(&fb, &u, 4);
      fa = rnd() % 50 ? fa : 0;
      memcpy(k.ra + 4 * i, &fa, 4);
      memcpy(k.rb + 4 * i, &fb, 4);
      k.a[i] = fa;
      k.b[i] = fb;
    } else {
      int eh = edge ? 1 + low % 10 : 20 + (int)(rnd() % 2);
      uint16_t ha = (uint16_t)(eh << 10 | (rnd() & 0x3FF));
      if (!positive && rnd() % 2)
        ha |= 0x8000u;
      uint16_t hb = (uint16_t)(ha + (rnd() % 4 ? 0 : rnd() % (1u << (rnd() % 10))));
      ha = rnd() % 50 ? ha : 0;
      memcpy(k.ra + 2 * i, &ha, 2);
      memcpy(k.rb + 2 * i, &hb, 2);
      k.a[i] = pc_f16_float(ha);
      k.b[i] = pc_f16_float(hb);
    }
  }
  return k;
}

/* Where the lane sums are taken, every sum is still the oracle's chain in element order, bit for
 * bit: ordinary blocks long enough for sums to grow past 2^53 of the values' grain, at the edge
 * of the exactness rule, with and without slices and cuts. */
static void test_lane_sums(void **state) {
  (void)state;
  for (int round = 0; round < 60; round++) {
    size_t n = 20000 + rnd() % 5000;
    pc_ev_layout layout = round % 3 == 2 ? PC_EV_HALF : PC_EV_FLOAT;
    block k = make_ordinary(n, layout, round % 2);
    pc_slicing plain = {PC_SIGNATURE_SAMPLE, 0, 0}, sliced = {0, n / 7 + 1, 7};
    size_t cuts[3] = {n / 3, n / 2, n / 2 + rnd() % (n / 2)};
    check_block(&k, layout, plain, false, NULL, 0);
    check_block(&k, layout, sliced, false, NULL, 0);
    check_block(&k, layout, plain, false, cuts, 3);
    free_block(&k);
  }
}

/* The lane sums' error (evidence_lanes.h): on blocks of ordinary float32 values, each shifted
 * distance and slice a^2 within (n/8 + 8) u of the exact sum of its n terms (each term exact in
 * double, the sum in long double: 11 more bits than the bound needs). */
static void test_lane_sums_error(void **state) {
  (void)state;
  for (int round = 0; round < 6; round++) {
    size_t n = 100000 + rnd() % 5000;
    block k = make_ordinary(n, PC_EV_FLOAT, round % 2);
    pc_slicing sliced = {0, n / 3 + 1, 3};
    pc_stats got;
    memset(&got, 0, sizeof got);
    pc_evidence_add_bytes(&got, k.ra, k.rb, n, &sliced, false);
    long double fwd = 0, back = 0, a2[PC_SLICE_GROUPS] = {0};
    for (size_t i = 0; i < n; i++) {
      double t[3];
      ref_lane_terms(k.a, k.b, n, i, t);
      fwd += t[0];
      back += t[1];
      a2[ref_group(&sliced, i)] += t[2];
    }
    double bound = ((double)n / 8 + 8) * 0x1p-53;
    assert_true(fabsl(got.ev.shift_sq[PC_SHIFT_FWD] - fwd) <= bound * fwd);
    assert_true(fabsl(got.ev.shift_sq[PC_SHIFT_BACK] - back) <= bound * back);
    for (int g = 0; g < PC_SLICE_GROUPS; g++)
      assert_true(fabsl(got.ev.slice_a2[g] - a2[g]) <= bound * a2[g]);
    free_block(&k);
  }
}

/* Sets value i of side p (raw bytes r, doubles v) of a block of `layout` to the float32 or
 * float16 pattern of the double x (an inf, a NaN, a zero or a value's negation: exact in both). */
static void set_value(unsigned char *r, double *v, size_t i, pc_ev_layout layout, double x) {
  if (layout == PC_EV_FLOAT) {
    float f = (float)x;
    memcpy(r + 4 * i, &f, 4);
    v[i] = f;
    return;
  }
  uint16_t h;
  memcpy(&h, r + 2 * i, 2);
  h = isnan(x)                ? 0x7E00u
      : isinf(x)              ? (uint16_t)(x > 0 ? 0x7C00u : 0xFC00u)
      : x == 0                ? 0
      : x == -pc_f16_float(h) ? (uint16_t)(h ^ 0x8000u)
                              : h;
  memcpy(r + 2 * i, &h, 2);
  v[i] = pc_f16_float(h);
}

/* Chunks whose pairs and neighbours are all finite take a path of their own (evidence_lanes.c,
 * pc_ev_all_finite): ordinary blocks with zeroed and flipped pairs (the rare classes), one inf
 * or NaN put just inside or just outside a chunk of the first run (pairs 1 to 256, 257 to 512,
 * ...), on either side, and none, against the oracle, with the signature, slices and cuts. */
static void test_finite_chunks(void **state) {
  (void)state;
  static const size_t at[] = {0, 1, 255, 256, 257, 258, 512, 513};
  enum { NAT = sizeof at / sizeof at[0] };
  for (int round = 0; round < 2 * (2 * NAT + 1); round++) {
    pc_ev_layout layout = round % 2 ? PC_EV_HALF : PC_EV_FLOAT;
    size_t n = 1500 + rnd() % 300;
    block k = make_ordinary(n, layout, false);
    for (size_t i = 0; i < n; i++) {
      if (rnd() % 64 == 0)
        set_value(k.rb, k.b, i, layout, 0); /* zeroed, where a is not 0 */
      else if (rnd() % 64 == 0)
        set_value(k.rb, k.b, i, layout, -k.a[i]); /* flipped */
    }
    int c = round / 2; /* 0: none; then at[] on a, then on b */
    if (c > 0) {
      bool on_a = c <= NAT;
      size_t i = at[(c - 1) % NAT];
      double x = rnd() % 2 ? NAN : -INFINITY;
      set_value(on_a ? k.ra : k.rb, on_a ? k.a : k.b, i, layout, x);
    }
    pc_slicing plain = {0, 0, 0}, sliced = {0, n / 5 + 1, 5};
    size_t cuts[3] = {n / 3, n / 2, n / 2 + rnd() % (n / 2)};
    check_block(&k, layout, plain, false, NULL, 0);
    check_block(&k, layout, sliced, false, NULL, 0);
    check_block(&k, layout, plain, false, cuts, 3);
    free_block(&k);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_oracle),   cmocka_unit_test(test_builds_agree),
      cmocka_unit_test(test_signature_sample), cmocka_unit_test(test_lane_sums),
      cmocka_unit_test(test_finite_chunks),    cmocka_unit_test(test_lane_sums_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
