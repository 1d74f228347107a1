/* The stored-bytes kernels (float32 vector builds, bfloat16, float16) against the decoded path and
 * by hand (docs/metrics.md); the decoded path itself is tested in test_kernel.c. */
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

/* The float32 path over stored bytes gives exactly what the decoded path gives, histograms
 * included, on values with zeros, subnormals, signs, NaN and inf. */
static void test_f32_bytes_path(void **state) {
  (void)state;
  enum { N = 2048 };
  static float fa[N], fb[N];
  static double da[N], db[N];
  uint32_t x = 2463534242u; /* xorshift32 */
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    float v = ldexpf((float)(x % 2001) - 1000.0f, (int)(x >> 24) % 40 - 160);
    fa[i] = v;
    fb[i] = (x & 7) == 0   ? nextafterf(v, INFINITY)
            : (x & 7) == 1 ? -v
            : (x & 7) == 2 ? (float)NAN
            : (x & 7) == 3 ? INFINITY
                           : v * (1.0f + 1e-6f * (float)(x % 3));
    da[i] = fa[i];
    db[i] = fb[i];
  }
  pc_qhist *h1[PC_NHISTS], *h2[PC_NHISTS];
  for (int w = 0; w < PC_NHISTS; w++) {
    h1[w] = calloc(1, sizeof *h1[w]);
    h2[w] = calloc(1, sizeof *h2[w]);
    pc_qhist_reset(h1[w]);
    pc_qhist_reset(h2[w]);
  }
  pc_tol t = tol_none();
  t.set = PC_TOL_ATOL | PC_TOL_MAX_ULP;
  t.atol = 1e-40;
  t.max_ulp = 1;
  pc_stats s1, s2;
  memset(&s1, 0, sizeof s1);
  memset(&s2, 0, sizeof s2);
  pc_kernel_args k1 = {&s1, h1, &t, PC_DTYPE_FLOAT32, 0, N},
                 k2 = {&s2, h2, &t, PC_DTYPE_FLOAT32, 0, N};
  pc_kernel_f32(&k1, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  pc_kernel_float(&k2, da, db);
  assert_same_stats(&s1, &s2);
  for (int w = 0; w < PC_NHISTS; w++) {
    assert_memory_equal(h1[w], h2[w], sizeof *h1[w]);
    free(h1[w]);
    free(h2[w]);
  }
  assert_true(s1.nan_mismatches > 0 && s1.inf_mismatches > 0 && s1.mismatches > 0);
}

/* Drift data for the vector part of the float32 bytes path: mostly small relative drift, with
 * exact matches, sign crossings, zeros, subnormals, large values, and a NaN or inf every
 * `nonfinite_every` elements (0: none), so that vector groups, groups with a non-finite pair
 * and the partial last group all occur. */
static void drift_f32(float *fa, float *fb, size_t n, unsigned nonfinite_every, uint32_t seed) {
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    float v = ldexpf((float)(int)(x % 20001u) - 10000.0f, (int)(x >> 26) - 40);
    unsigned kind = (x >> 8) % 16;
    fa[i] = kind == 0 ? ldexpf((float)(x % 7u), -149) : v; /* subnormals */
    fb[i] = kind == 1   ? fa[i]
            : kind == 2 ? -fa[i]
            : kind == 3 ? 0.0f
            : kind == 4 ? nextafterf(fa[i], -INFINITY)
                        : fa[i] * (1.0f + 3e-7f * (float)((int)(x % 9u) - 4));
    if (nonfinite_every && i % nonfinite_every == nonfinite_every - 1)
      fb[i] = (x & 1) ? (float)NAN : -INFINITY;
  }
}

/* pc_kernel_f32 against the decoded path (pc_kernel_float), histograms included; the sums also
 * against long double sums in element order. */
static void check_f32_against_decoded(const float *fa, const float *fb, size_t n, pc_dtype dt,
                                      const pc_tol *t) {
  double *da = malloc(n * sizeof *da), *db = malloc(n * sizeof *db);
  long double ssd = 0, sab = 0;
  for (size_t i = 0; i < n; i++) {
    da[i] = fa[i];
    db[i] = fb[i];
    if (isfinite(da[i]) && isfinite(db[i])) {
      ssd += (long double)(db[i] - da[i]) * (db[i] - da[i]);
      sab += (long double)da[i] * db[i];
    }
  }
  pc_qhist **h1 = hists_new(), **h2 = hists_new();
  pc_stats s1, s2;
  memset(&s1, 0, sizeof s1);
  memset(&s2, 0, sizeof s2);
  pc_kernel_args k1 = {&s1, h1, t, dt, 100, n}, k2 = {&s2, h2, t, dt, 100, n};
  pc_kernel_f32(&k1, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  pc_kernel_float(&k2, da, db);
  assert_same_stats(&s1, &s2);
  assert_true(fabsl(s1.sum_sq_diff - ssd) <= 1e-13L * ssd);
  assert_true(fabsl(s1.sum_ab - sab) <= 1e-13L * fabsl(sab));
  for (int w = 0; w < PC_NHISTS; w++)
    assert_memory_equal(h1[w], h2[w], sizeof *h1[w]);
  hists_free(h1);
  hists_free(h2);
  free(da);
  free(db);
}

/* The vector part on long runs of finite pairs, broken by non-finite ones at several spacings,
 * and block lengths that leave every partial last group, in float32 and bfloat16. */
static void test_f32_vector_path(void **state) {
  (void)state;
  enum { N = 20011 };
  float *fa = malloc(N * sizeof *fa), *fb = malloc(N * sizeof *fb);
  pc_tol t = tol_none();
  t.set = PC_TOL_RTOL | PC_TOL_MAX_ULP;
  t.rtol = 4e-7;
  t.max_ulp = 2;
  const unsigned spacing[] = {0, 3, 9, 300, 2500};
  for (size_t k = 0; k < sizeof spacing / sizeof *spacing; k++) {
    drift_f32(fa, fb, N, spacing[k], 2463534242u + (uint32_t)k);
    for (size_t n = N - 7; n <= N; n++)
      check_f32_against_decoded(fa, fb, n, PC_DTYPE_FLOAT32, &t);
    check_f32_against_decoded(fa, fb, N, PC_DTYPE_BFLOAT16, &t);
  }
  free(fa);
  free(fb);
}

/* The worst pair: among passing pairs the first of the largest abs, even when that abs recurs
 * in a later chunk; once a mismatch appears, the first mismatch of the largest abs. Indices
 * are worked out from the construction. */
static void test_f32_worst_pair(void **state) {
  (void)state;
  enum { N = 4096 };
  static float fa[N], fb[N];
  for (int i = 0; i < N; i++)
    fa[i] = fb[i] = 1.0f;
  fb[700] = fb[3000] = 1.0f + FLT_EPSILON; /* abs 2^-23, 1 ULP: passes with max_ulp 1 */
  pc_tol t = tol_none();
  t.set = PC_TOL_MAX_ULP;
  t.max_ulp = 1;
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_kernel_args k = {&s, NULL, &t, PC_DTYPE_FLOAT32, 0, N};
  pc_kernel_f32(&k, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  assert_int_equal(s.worst_index, 700);
  assert_int_equal(s.worst_class, 0);
  assert_int_equal(s.mismatches, 0);
  fb[2000] = 1.0f + 2 * FLT_EPSILON; /* 2 ULPs: fails, smaller abs than none but a mismatch */
  fb[3500] = 1.0f + 2 * FLT_EPSILON;
  memset(&s, 0, sizeof s);
  pc_kernel_f32(&k, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  assert_int_equal(s.worst_index, 2000);
  assert_int_equal(s.worst_class, 1);
  assert_int_equal(s.mismatches, 2);
  assert_true(s.worst_abs == 2 * FLT_EPSILON);
  assert_int_equal(s.worst_ulp, 2);
  /* All equal: the worst is the first pair. */
  memcpy(fb, fa, sizeof fb);
  fb[5] = -0.0f;
  fa[5] = 0.0f;
  memset(&s, 0, sizeof s);
  pc_kernel_f32(&k, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  assert_int_equal(s.worst_index, 0);
  assert_true(s.worst_abs == 0);
}

/* Each criterion passes at equality in the vector part too: 16 pairs 1 vs 1 + 2^-23 (abs and
 * rel 2^-23, 1 ULP) pass with atol, rtol or max_ulp set exactly there, and fail just below. */
static void test_f32_boundaries(void **state) {
  (void)state;
  enum { N = 16 };
  float fa[N], fb[N];
  for (int i = 0; i < N; i++) {
    fa[i] = 1.0f;
    fb[i] = 1.0f + FLT_EPSILON;
  }
  const unsigned sets[] = {PC_TOL_ATOL, PC_TOL_RTOL, PC_TOL_MAX_ULP};
  for (int c = 0; c < 3; c++)
    for (int below = 0; below < 2; below++) {
      pc_tol t = tol_none();
      t.set = sets[c];
      t.atol = t.rtol = below ? nextafter(FLT_EPSILON, 0) : FLT_EPSILON;
      t.max_ulp = below ? 0 : 1;
      pc_stats s;
      memset(&s, 0, sizeof s);
      pc_kernel_args k = {&s, NULL, &t, PC_DTYPE_FLOAT32, 0, N};
      pc_kernel_f32(&k, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
      assert_int_equal(s.mismatches, below ? N : 0);
    }
}

/* The vector part's ULP counts live in a per-thread table between runs: a run with distances
 * near 2^31 (1.0 against -1.0 and its neighbours) counts the same when run twice, and leaves
 * nothing behind: a following run of 64 pairs exactly 1 ULP apart counts 64 in log2 bucket 1
 * ([1, 2)), and nothing anywhere else, in its log2 and quantile histograms alike. */
static void test_f32_ulp_table_cleared(void **state) {
  (void)state;
  enum { N = 64 };
  float fa[N], fb[N], ga[N], gb[N];
  for (int i = 0; i < N; i++) {
    fa[i] = 1.0f;
    fb[i] = -nextafterf(1.0f, (float)(i % 3)); /* a sign crossing: about 2^31 ULPs */
    ga[i] = (float)(i + 1);
    gb[i] = nextafterf(ga[i], INFINITY);
  }
  pc_tol t = tol_none();
  pc_qhist **h = hists_new();
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_kernel_args k = {&s, h, &t, PC_DTYPE_FLOAT32, 0, N};
  pc_kernel_f32(&k, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  assert_true(s.max_ulp > (uint64_t)1 << 30);
  assert_int_equal(s.ulp_hist[31], N); /* [2^30, 2^31): 2 x 0x3F800000 and +-1 */
  memset(&s, 0, sizeof s);             /* the same run again counts the same, not twice as much */
  pc_kernel_f32(&k, (const unsigned char *)fa, (const unsigned char *)fb, false, false);
  assert_int_equal(s.ulp_hist[31], N);
  pc_qhist **g = hists_new();
  memset(&s, 0, sizeof s);
  k.hist = g;
  pc_kernel_f32(&k, (const unsigned char *)ga, (const unsigned char *)gb, false, false);
  for (int b = 0; b < PC_ULP_BUCKETS; b++)
    assert_int_equal(s.ulp_hist[b], b == 1 ? N : 0);
  const pc_qhist *u = g[PC_HIST_ULP];
  assert_int_equal(u->count[pc_qhist_bucket(1.0)], N);
  for (uint32_t q = 0; q < PC_QH_BUCKETS; q++)
    if (q != pc_qhist_bucket(1.0))
      assert_int_equal(u->count[q], 0);
  hists_free(h);
  hists_free(g);
}

typedef size_t (*f32_run_fn)(pc_f32_state *, const unsigned char *, const unsigned char *, size_t,
                             size_t);

/* Runs the baseline build and `run` over n pairs of bytes a, b (float16 when `half`) and checks
 * that they reach the same state, bit for bit. */
static void check_builds_agree(f32_run_fn run, const unsigned char *a, const unsigned char *b,
                               size_t n, bool half) {
  pc_qhist **h1 = hists_new(), **h2 = hists_new();
  static pc_f32_state s1, s2;
  static uint32_t keys1[PC_F32_ULP_COPIES][PC_F32_ULP_KEYS],
      keys2[PC_F32_ULP_COPIES][PC_F32_ULP_KEYS];
  memset(&s1, 0, sizeof s1);
  memset(keys1, 0, sizeof keys1);
  memset(keys2, 0, sizeof keys2);
  s1.half = half;
  s1.atol = 1e-9;
  s1.rtol = 1e-7;
  s1.tol_ulp = 3;
  s1.wcls = -1;
  for (int l = 0; l < PC_F32_LANES; l++)
    s1.min_abs[l] = s1.min_rel[l] = INFINITY;
  s2 = s1;
  s1.h_abs = h1[PC_HIST_ABS];
  s1.h_rel = h1[PC_HIST_REL];
  s2.h_abs = h2[PC_HIST_ABS];
  s2.h_rel = h2[PC_HIST_REL];
  s1.ulp_keys = keys1;
  s2.ulp_keys = keys2;
  assert_int_equal(pc_f32_run_base(&s1, a, b, 0, n), n - n % PC_F32_GROUP);
  assert_int_equal(run(&s2, a, b, 0, n), n - n % PC_F32_GROUP);
  s1.h_abs = s2.h_abs;
  s1.h_rel = s2.h_rel;
  s1.ulp_keys = s2.ulp_keys;
  assert_memory_equal(&s1, &s2, sizeof s1);
  assert_memory_equal(keys1, keys2, sizeof keys1);
  for (int w = 0; w < PC_NHISTS; w++)
    assert_memory_equal(h1[w], h2[w], sizeof *h1[w]);
  assert_true(s1.count == n - n % PC_F32_GROUP && s1.wcls >= 0);
  hists_free(h1);
  hists_free(h2);
}

/* The baseline build and `run` agree on float32 drift (a length that leaves a partial group) and
 * on every finite float16 pattern against random finite partners: the bit-level conversion and
 * F16C's agree. */
static void check_build(f32_run_fn run) {
  enum { N = 9001 };
  static float fa[N], fb[N];
  drift_f32(fa, fb, N, 0, 88675123u);
  check_builds_agree(run, (const unsigned char *)fa, (const unsigned char *)fb, N, false);
  enum { FINITE = 2 * 0x7C00 }; /* every finite float16 pattern, both signs */
  static uint16_t ha[FINITE], hb[FINITE];
  uint32_t x = 2463534242u;
  for (uint32_t i = 0; i < FINITE; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    ha[i] = (uint16_t)(i < 0x7C00u ? i : (i - 0x7C00u) | 0x8000u);
    hb[i] = (uint16_t)(x % 0x7C00u | (x >> 16 & 0x8000u));
  }
  check_builds_agree(run, (const unsigned char *)ha, (const unsigned char *)hb, FINITE, true);
}

/* The AVX2 and AVX-512 builds of the vector part reach the baseline build's state, bit for bit
 * (each where this processor runs it). */
static void test_f32_builds_agree(void **state) {
  (void)state;
#ifdef PC_HAVE_AVX2
  if (pc_f32_can_avx2())
    check_build(pc_f32_run_avx2);
  if (pc_f32_can_avx512())
    check_build(pc_f32_run_avx512);
  if (!pc_f32_can_avx2() && !pc_f32_can_avx512())
    skip();
#else
  skip();
#endif
}

/* Compared in bfloat16 from float32 bytes (torch's bf16 saved as tagged float32): the bit-level
 * rounding gives the figures of the generic path, which rounds through pc_dtype_ordinal, and the
 * not-representable counts of pc_kernel_unrepresentable. Values include ties, overflow to inf
 * after rounding, signs, zeros and non-finites. */
static void test_bf16_bytes_path(void **state) {
  (void)state;
  enum { N = 4096 };
  static float fa[N], fb[N];
  static double da[N], db[N];
  uint32_t x = 123456789u;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    uint32_t bits = (x & 3) == 0   ? (x & 0xFFFF0000u)
                    : (x & 3) == 1 ? (x | 0x8000u) & 0xFFFF8000u
                                   : x;
    if ((x >> 8) % 97 == 0)
      bits = 0x7F7FFFFFu; /* FLT_MAX: rounds to bfloat16 inf */
    memcpy(&fa[i], &bits, sizeof bits);
    fb[i] = (x & 12) == 0   ? fa[i]
            : (x & 12) == 4 ? -fa[i]
                            : fa[i] * (1.0f + 0.01f * (float)(x % 5));
    if (!isfinite(fa[i]) || !isfinite(fb[i]))
      fb[i] = fa[i];
    da[i] = fa[i];
    db[i] = fb[i];
  }
  pc_tol t = tol_none();
  t.set = PC_TOL_MAX_ULP;
  t.max_ulp = 2;
  pc_stats fast, ref;
  memset(&fast, 0, sizeof fast);
  memset(&ref, 0, sizeof ref);
  pc_kernel_args k1 = {&fast, NULL, &t, PC_DTYPE_BFLOAT16, 0, N};
  pc_kernel_args k2 = {&ref, NULL, &t, PC_DTYPE_BFLOAT16, 0, N};
  pc_kernel_f32(&k1, (const unsigned char *)fa, (const unsigned char *)fb, true, true);
  pc_kernel_float(&k2, da, db);
  ref.not_representable_a = pc_kernel_unrepresentable(da, N, PC_DTYPE_BFLOAT16);
  ref.not_representable_b = pc_kernel_unrepresentable(db, N, PC_DTYPE_BFLOAT16);
  assert_true(fast.not_representable_a > 0 && fast.mismatches > 0 && fast.max_ulp > 2);
  assert_same_stats(&fast, &ref);
}

/* A float16 pattern's value by the textbook formula (IEEE 754 binary16), independent of both
 * dtype.c's decoder and the kernel's bit conversion. */
static double half_value(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* pc_kernel_f16 against the decoded path (pc_kernel_float on half_value, compared in float16),
 * histograms included; the sums also against long double sums in element order. */
static void check_f16_against_decoded(const uint16_t *ha, const uint16_t *hb, size_t n,
                                      const pc_tol *t) {
  double *da = malloc(n * sizeof *da), *db = malloc(n * sizeof *db);
  long double ssd = 0, ssa = 0;
  for (size_t i = 0; i < n; i++) {
    da[i] = half_value(ha[i]);
    db[i] = half_value(hb[i]);
    if (isfinite(da[i]) && isfinite(db[i])) {
      ssd += (long double)(db[i] - da[i]) * (db[i] - da[i]);
      ssa += (long double)da[i] * da[i];
    }
  }
  pc_qhist **h1 = hists_new(), **h2 = hists_new();
  pc_stats s1, s2;
  memset(&s1, 0, sizeof s1);
  memset(&s2, 0, sizeof s2);
  pc_kernel_args k1 = {&s1, h1, t, PC_DTYPE_FLOAT16, 7, n},
                 k2 = {&s2, h2, t, PC_DTYPE_FLOAT16, 7, n};
  pc_kernel_f16(&k1, (const unsigned char *)ha, (const unsigned char *)hb);
  pc_kernel_float(&k2, da, db);
  assert_same_stats(&s1, &s2);
  assert_true(fabsl(s1.sum_sq_diff - ssd) <= 1e-13L * ssd);
  assert_true(fabsl(s1.sum_sq_a - ssa) <= 1e-13L * ssa);
  for (int w = 0; w < PC_NHISTS; w++)
    assert_memory_equal(h1[w], h2[w], sizeof *h1[w]);
  hists_free(h1);
  hists_free(h2);
  free(da);
  free(db);
}

/* float16 from its stored bytes, exhaustively: A holds every one of the 65536 patterns in order
 * (zeros, subnormals, normals, inf and NaN of both signs), B a partner of each: the same
 * pattern, the next one (crossing into inf at the top), the sign flipped, or a pseudo-random
 * one; every partial last group too. */
static void test_f16_all_patterns(void **state) {
  (void)state;
  enum { N = 65536 };
  uint16_t *ha = malloc(N * sizeof *ha), *hb = malloc(N * sizeof *hb);
  pc_tol t = tol_none();
  t.set = PC_TOL_ATOL | PC_TOL_MAX_ULP;
  t.atol = 0x1p-20;
  t.max_ulp = 1;
  uint32_t x = 2463534242u;
  for (int partner = 0; partner < 4; partner++) {
    for (uint32_t i = 0; i < N; i++) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      ha[i] = (uint16_t)i;
      hb[i] = partner == 0   ? ha[i]
              : partner == 1 ? (uint16_t)(i + 1)
              : partner == 2 ? (uint16_t)(i ^ 0x8000u)
                             : (uint16_t)x;
    }
    check_f16_against_decoded(ha, hb, N, &t);
  }
  for (size_t n = 1001; n <= 1008; n++) /* every partial last group, mid-range values */
    check_f16_against_decoded(ha + 15000, hb + 15000, n, &t);
  free(ha);
  free(hb);
}

/* float16 drift as real runs have it: values near 1 a few ULPs apart, a zero, subnormals and a
 * sign crossing, with non-finite pairs at several spacings; one hand-checked figure: 1 vs the
 * next float16 after 1 is abs 2^-10, 1 ULP. */
static void test_f16_drift(void **state) {
  (void)state;
  enum { N = 9001 };
  uint16_t *ha = malloc(N * sizeof *ha), *hb = malloc(N * sizeof *hb);
  pc_tol t = tol_none();
  t.set = PC_TOL_RTOL;
  t.rtol = 1e-3;
  const unsigned spacing[] = {0, 5, 777};
  uint32_t x = 88675123u;
  for (size_t k = 0; k < sizeof spacing / sizeof *spacing; k++) {
    for (size_t i = 0; i < N; i++) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      uint16_t v = (uint16_t)(0x3C00u + x % 512u - 256u);    /* within [0.75, 1.25) of 1 */
      v = (x >> 20) % 50 == 0 ? (uint16_t)(x % 1024u) : v;   /* subnormal */
      v = (x >> 20) % 50 == 1 ? (uint16_t)(0x8000u | v) : v; /* negative */
      ha[i] = v;
      hb[i] = (x >> 12) % 8 == 0 ? (uint16_t)(v ^ 0x8000u) : (uint16_t)(v + (x >> 28) % 4);
      if (spacing[k] && i % spacing[k] == spacing[k] - 1)
        hb[i] = (x & 1) ? 0x7E00u : 0xFC00u; /* NaN, -inf */
    }
    check_f16_against_decoded(ha, hb, N, &t);
  }
  ha[0] = 0x3C00u; /* 1 */
  hb[0] = 0x3C01u; /* 1 + 2^-10 */
  pc_stats s;
  memset(&s, 0, sizeof s);
  pc_kernel_args k1 = {&s, NULL, &t, PC_DTYPE_FLOAT16, 0, 1};
  pc_kernel_f16(&k1, (const unsigned char *)ha, (const unsigned char *)hb);
  assert_true(s.max_abs == 0x1p-10 && s.max_ulp == 1 && s.mismatches == 0);
  free(ha);
  free(hb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f32_bytes_path),   cmocka_unit_test(test_bf16_bytes_path),
      cmocka_unit_test(test_f32_vector_path),  cmocka_unit_test(test_f32_worst_pair),
      cmocka_unit_test(test_f32_boundaries),   cmocka_unit_test(test_f32_ulp_table_cleared),
      cmocka_unit_test(test_f32_builds_agree), cmocka_unit_test(test_f16_all_patterns),
      cmocka_unit_test(test_f16_drift),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
