/* Unit tests of the numerics module (src/lib/numerics/dtype.c) against docs/metrics.md. Every
 * expected value comes from an independent computation: the IEEE-style formula of each format
 * evaluated with ldexp, the position of a bit pattern on the ordered line, C's own float
 * conversion, and (where the compiler has it) _Float16. The 16-bit and 8-bit formats are checked
 * exhaustively. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "numerics.h"

#include <float.h>  /* DBL_*, FLT_* */
#include <math.h>   /* ldexp, nextafter, isnan, signbit */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memcmp, memcpy, strcmp */

/* Failures are counted and the first few printed at full precision, so that one bad format
 * does not drown the log while the test still fails. */
static unsigned long failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond) && failures++ < 10) {                                                              \
      print_error("%s:%d: ", __FILE__, __LINE__);                                                  \
      print_error(__VA_ARGS__);                                                                    \
      print_error("\n");                                                                           \
    }                                                                                              \
  } while (0)

/* Equal as stored values: both NaN, or equal with the same sign (so -0.0 differs from +0.0). */
static bool same(double a, double b) {
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b);
  return a == b && !signbit(a) == !signbit(b);
}

static bool host_is_little_endian(void) {
  uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

static void reverse_each(unsigned char *buf, size_t n, size_t size) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < size / 2; k++) {
      unsigned char t = buf[i * size + k];
      buf[i * size + k] = buf[i * size + size - 1 - k];
      buf[i * size + size - 1 - k] = t;
    }
}

/* splitmix64: a fixed-seed generator, so every run sees the same inputs. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static double double_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* ---- reference model of the 16- and 8-bit formats ---------------------------------------- */

typedef struct narrow {
  pc_dtype dt;
  unsigned exp_bits;
  unsigned mant_bits;
  bool finite_only; /* float8_e4m3fn: no inf, only S.1111.111 is NaN */
  double max;       /* largest finite value, as the format's definition states it */
} narrow;

static const narrow FP16 = {PC_DTYPE_FLOAT16, 5, 10, false, 65504.0};
static const narrow BF16 = {PC_DTYPE_BFLOAT16, 8, 7, false, 0x1.fep127};
static const narrow E4M3 = {PC_DTYPE_FLOAT8_E4M3FN, 4, 3, true, 448.0};
static const narrow E5M2 = {PC_DTYPE_FLOAT8_E5M2, 5, 2, false, 57344.0};

static unsigned sign_bit(const narrow *f) {
  return 1u << (f->exp_bits + f->mant_bits);
}

static unsigned exp_field(unsigned pattern, const narrow *f) {
  return (pattern >> f->mant_bits) & ((1u << f->exp_bits) - 1);
}

static unsigned frac_field(unsigned pattern, const narrow *f) {
  return pattern & ((1u << f->mant_bits) - 1);
}

/* |value| of a pattern by the textbook formula 2^(e-bias) * (1 + frac/2^m), subnormals
 * 2^(1-bias) * frac/2^m, ignoring special values, so that the pattern just above the largest
 * finite one gives the value the format would have there with an unbounded exponent. */
static double ref_magnitude(unsigned pattern, const narrow *f) {
  int bias = (1 << (f->exp_bits - 1)) - 1, m = (int)f->mant_bits;
  unsigned e = exp_field(pattern, f), frac = frac_field(pattern, f);
  if (e == 0)
    return ldexp(frac, 1 - bias - m);
  return ldexp((1u << m) + frac, (int)e - bias - m);
}

static bool ref_is_nan(unsigned pattern, const narrow *f) {
  unsigned all_e = (1u << f->exp_bits) - 1, all_f = (1u << f->mant_bits) - 1;
  unsigned e = exp_field(pattern, f), frac = frac_field(pattern, f);
  return f->finite_only ? e == all_e && frac == all_f : e == all_e && frac != 0;
}

static bool ref_is_inf(unsigned pattern, const narrow *f) {
  return !f->finite_only && exp_field(pattern, f) == (1u << f->exp_bits) - 1 &&
         frac_field(pattern, f) == 0;
}

static double ref_value(unsigned pattern, const narrow *f) {
  bool neg = (pattern & sign_bit(f)) != 0;
  if (ref_is_nan(pattern, f))
    return NAN;
  double mag = ref_is_inf(pattern, f) ? INFINITY : ref_magnitude(pattern, f);
  return neg ? -mag : mag;
}

/* Bit pattern of the largest finite positive value: the one below the all-ones exponent, or for
 * a finite-only format the one below the NaN pattern. */
static unsigned max_pattern(const narrow *f) {
  return f->finite_only ? sign_bit(f) - 2 : (((1u << f->exp_bits) - 1) << f->mant_bits) - 1;
}

/* The position on the ordered line of docs/metrics.md of a non-NaN pattern: positive patterns
 * count up from zero in bit-pattern order, negative ones mirror them. */
static int64_t ref_ordinal(unsigned pattern, const narrow *f) {
  int64_t mag = pattern & (sign_bit(f) - 1);
  return (pattern & sign_bit(f)) ? -mag : mag;
}

static size_t narrow_size(const narrow *f) {
  return pc_dtype_size(f->dt);
}

/* All 2^(1+e+m) patterns in native byte order. */
static unsigned char *all_patterns(const narrow *f, unsigned *count) {
  size_t size = narrow_size(f);
  *count = 2 * sign_bit(f);
  unsigned char *buf = malloc(*count * size);
  assert_non_null(buf);
  for (unsigned p = 0; p < *count; p++) {
    uint16_t wide = (uint16_t)p;
    uint8_t byte = (uint8_t)p;
    memcpy(buf + p * size, size == sizeof wide ? (void *)&wide : (void *)&byte, size);
  }
  return buf;
}

/* ---- exhaustive tests of the 16- and 8-bit formats --------------------------------------- */

static void test_reference_model(void **state) {
  const narrow *f = *state;
  assert_true(ref_magnitude(max_pattern(f), f) == f->max);
  /* The reference itself must order patterns as the line says: strictly increasing values. */
  for (unsigned p = 0; p < max_pattern(f); p++)
    assert_true(ref_magnitude(p, f) < ref_magnitude(p + 1, f));
}

static void test_narrow_decode(void **state) {
  const narrow *f = *state;
  unsigned count;
  unsigned char *raw = all_patterns(f, &count);
  double *native = malloc(count * sizeof *native), *swapped = malloc(count * sizeof *swapped);
  assert_non_null(native);
  assert_non_null(swapped);
  pc_dtype_decode_float(f->dt, raw, count, false, native);
  reverse_each(raw, count, narrow_size(f));
  pc_dtype_decode_float(f->dt, raw, count, true, swapped);
  failures = 0;
  for (unsigned p = 0; p < count; p++) {
    double want = ref_value(p, f);
    CHECK(same(native[p], want), "%s 0x%x: got %.17g, want %.17g", pc_dtype_name(f->dt), p,
          native[p], want);
    CHECK(same(swapped[p], want), "%s 0x%x swapped: got %.17g, want %.17g", pc_dtype_name(f->dt), p,
          swapped[p], want);
  }
  assert_int_equal(failures, 0);
  free(raw);
  free(native);
  free(swapped);
}

static void test_bf16_decode_is_upper_half_of_float32(void **state) {
  (void)state;
  failures = 0;
  for (uint32_t p = 0; p <= UINT16_MAX; p++) {
    uint16_t stored = (uint16_t)p;
    uint32_t wide = p << 16;
    float as_float;
    double got;
    memcpy(&as_float, &wide, sizeof as_float);
    pc_dtype_decode_float(PC_DTYPE_BFLOAT16, &stored, 1, false, &got);
    CHECK(same(got, as_float), "bf16 0x%x: got %.17g, want %.17g", (unsigned)p, got,
          (double)as_float);
  }
  assert_int_equal(failures, 0);
}

/* Every non-NaN value sits at its pattern's position, is its own rounding and is representable;
 * NaN patterns are representable and have no distance. */
static void test_narrow_ordinal(void **state) {
  const narrow *f = *state;
  failures = 0;
  for (unsigned p = 0; p < 2 * sign_bit(f); p++) {
    double v = ref_value(p, f);
    if (isnan(v)) {
      CHECK(pc_dtype_representable(v, f->dt), "NaN 0x%x not representable", p);
      CHECK(pc_ulp_distance(v, 1.0, f->dt) == UINT64_MAX, "NaN 0x%x has a distance", p);
      continue;
    }
    CHECK(pc_dtype_ordinal(v, f->dt) == ref_ordinal(p, f), "0x%x (%.17g): ordinal %lld, want %lld",
          p, v, (long long)pc_dtype_ordinal(v, f->dt), (long long)ref_ordinal(p, f));
    CHECK(same(pc_dtype_round(v, f->dt), v), "0x%x (%.17g) rounds to %.17g", p, v,
          pc_dtype_round(v, f->dt));
    CHECK(pc_dtype_representable(v, f->dt), "0x%x (%.17g) not representable", p, v);
  }
  assert_int_equal(failures, 0);
}

/* Walking the whole finite line from the most negative value, the distance to the start grows by
 * one per value, across binades, subnormals and zero; inf sits one past the largest value. */
static void test_narrow_ulp_line(void **state) {
  const narrow *f = *state;
  unsigned top = max_pattern(f);
  double lowest = -f->max, min_sub = ref_magnitude(1, f);
  failures = 0;
  for (unsigned k = 0; k <= 2 * top; k++) {
    unsigned p = k < top ? sign_bit(f) | (top - k) : k - top; /* the k-th value upwards */
    double v = ref_value(p, f);
    CHECK(pc_ulp_distance(lowest, v, f->dt) == k, "%.17g: distance %llu from -max, want %u", v,
          (unsigned long long)pc_ulp_distance(lowest, v, f->dt), k);
    CHECK(pc_ulp_distance(v, lowest, f->dt) == k, "%.17g: distance not symmetric", v);
  }
  assert_int_equal(failures, 0);
  assert_true(pc_ulp_distance(-min_sub, min_sub, f->dt) == 2);
  assert_true(pc_ulp_distance(-0.0, 0.0, f->dt) == 0);
  assert_true(pc_ulp_distance(f->max, INFINITY, f->dt) == 1);
  assert_true(pc_ulp_distance(-INFINITY, -f->max, f->dt) == 1);
  assert_true(pc_ulp_distance(-INFINITY, INFINITY, f->dt) == 2 * ((uint64_t)top + 1));
  assert_true(pc_dtype_ordinal(INFINITY, f->dt) == (int64_t)top + 1);
  assert_true(pc_dtype_representable(INFINITY, f->dt) == !f->finite_only);
}

/* x must round to the value at position `ord` (|ord| past the largest finite value: ±inf). */
static void expect_rounds_to(const narrow *f, double x, unsigned pattern) {
  int64_t ord = (int64_t)pattern;
  double mag = pattern > max_pattern(f) ? INFINITY : ref_magnitude(pattern, f);
  double want = signbit(x) ? -mag : mag;
  ord = signbit(x) ? -ord : ord;
  CHECK(pc_dtype_ordinal(x, f->dt) == ord, "%s %.17g: ordinal %lld, want %lld",
        pc_dtype_name(f->dt), x, (long long)pc_dtype_ordinal(x, f->dt), (long long)ord);
  CHECK(same(pc_dtype_round(x, f->dt), want), "%s %.17g: rounds to %.17g, want %.17g",
        pc_dtype_name(f->dt), x, pc_dtype_round(x, f->dt), want);
}

/* Between each pair of neighbours lo < hi (zero and the smallest subnormal, ..., the largest
 * value and the value the next pattern would have), and their negatives: the midpoint, exact in
 * double, goes to the even pattern; the doubles either side of it go to the nearer neighbour.
 * At the top the tie thus gives inf for IEEE-like formats (largest pattern odd) but the largest
 * value for float8_e4m3fn (0x7E even, its neighbour 0x7F odd). */
static void test_narrow_rounding(void **state) {
  const narrow *f = *state;
  failures = 0;
  for (unsigned p = 0; p <= max_pattern(f); p++) {
    double lo = ref_magnitude(p, f), hi = ref_magnitude(p + 1, f), mid = (lo + hi) / 2;
    unsigned even = p % 2 == 0 ? p : p + 1;
    for (int sign = 1; sign >= -1; sign -= 2) {
      expect_rounds_to(f, sign * mid, even);
      expect_rounds_to(f, nextafter(sign * mid, 0.0), p);
      expect_rounds_to(f, nextafter(sign * mid, sign * INFINITY), p + 1);
      CHECK(!pc_dtype_representable(sign * mid, f->dt), "midpoint %.17g representable", mid);
    }
  }
  expect_rounds_to(f, 2 * f->max, max_pattern(f) + 1);
  expect_rounds_to(f, -DBL_MAX, max_pattern(f) + 1);
  expect_rounds_to(f, DBL_TRUE_MIN, 0);
  expect_rounds_to(f, -DBL_TRUE_MIN, 0);
  assert_int_equal(failures, 0);
}

/* ---- float16 against the compiler's _Float16 --------------------------------------------- */

#ifdef __FLT16_MAX__
__extension__ typedef _Float16 half; /* GCC's extension; its conversion rounds directly */

static void test_fp16_random_vs_float16(void **state) {
  (void)state;
  uint64_t rng = 16;
  failures = 0;
  for (int i = 0; i < 1000000; i++) {
    uint64_t r = next_random(&rng);
    /* Exponents from below half the smallest subnormal (2^-24) to past the largest (2^15). */
    double x = ldexp(1.0 + ldexp((double)(r >> 12), -52), (int)(r % 50) - 32);
    x = (r >> 11) & 1 ? -x : x;
    double want = (double)(half)x;
    CHECK(same(pc_dtype_round(x, PC_DTYPE_FLOAT16), want), "%.17g: got %.17g, want %.17g", x,
          pc_dtype_round(x, PC_DTYPE_FLOAT16), want);
  }
  assert_int_equal(failures, 0);
}
#endif

/* A double just above a midpoint must not be pulled onto the midpoint (and then tie to even) by
 * an intermediate float32, as rounding through float would do. */
static void test_no_double_rounding(void **state) {
  (void)state;
  double above_bf16_mid = 1.0 + 0x1p-8 + 0x1p-40;
  double above_fp16_mid = 1.0 + 0x1p-11 + 0x1p-40;
  assert_true((double)(float)above_bf16_mid == 1.0 + 0x1p-8); /* the trap float would set */
  assert_true(pc_dtype_round(above_bf16_mid, PC_DTYPE_BFLOAT16) == 1.0 + 0x1p-7);
  assert_true(pc_dtype_round(above_fp16_mid, PC_DTYPE_FLOAT16) == 1.0 + 0x1p-10);
}

/* ---- float32 and float64 ----------------------------------------------------------------- */

/* float32's position of x according to C's conversion, which rounds to nearest even. */
static int64_t float_cast_ordinal(double x) {
  float v = (float)x;
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  int64_t mag = u & ~(UINT32_C(1) << 31);
  return (u >> 31) ? -mag : mag;
}

static void check_against_cast(double x) {
  CHECK(same(pc_dtype_round(x, PC_DTYPE_FLOAT32), (double)(float)x),
        "%.17g: rounds to %.17g, (float) gives %.17g", x, pc_dtype_round(x, PC_DTYPE_FLOAT32),
        (double)(float)x);
  CHECK(pc_dtype_ordinal(x, PC_DTYPE_FLOAT32) == float_cast_ordinal(x),
        "%.17g: ordinal %lld, want %lld", x, (long long)pc_dtype_ordinal(x, PC_DTYPE_FLOAT32),
        (long long)float_cast_ordinal(x));
}

/* Random doubles across and beyond float32's range, a quarter of them exact float32 values, a
 * quarter exact ties, and midpoints of random neighbouring floats (which reach the subnormals),
 * with the doubles either side of each midpoint. */
static void test_float32_random_vs_cast(void **state) {
  (void)state;
  const int drop = DBL_MANT_DIG - FLT_MANT_DIG; /* double mantissa bits float32 does not keep */
  const uint64_t dropped = (UINT64_C(1) << drop) - 1, tie = UINT64_C(1) << (drop - 1);
  uint64_t rng = 32;
  failures = 0;
  for (int i = 0; i < 1000000; i++) {
    uint64_t r = next_random(&rng), frac = r >> 12;
    int e = (int)(next_random(&rng) % 300) - 165; /* 2^-165 .. 2^134 */
    uint64_t kind = r & 3;
    frac = kind == 0 ? frac : kind == 1 ? frac & ~dropped : (frac & ~dropped) | tie;
    double x = ldexp(1.0 + ldexp((double)frac, 1 - DBL_MANT_DIG), e);
    check_against_cast((r >> 2) & 1 ? -x : x);
  }
  for (int i = 0; i < 1000000; i++) {
    uint32_t u = (uint32_t)(next_random(&rng) % 0x7F800000u); /* a finite positive float */
    float lo_f, hi_f;
    uint32_t u_next = u + 1;
    memcpy(&lo_f, &u, sizeof lo_f);
    memcpy(&hi_f, &u_next, sizeof hi_f);
    double lo = lo_f, hi = isinf(hi_f) ? ldexp(1.0, FLT_MAX_EXP) : hi_f, mid = (lo + hi) / 2;
    check_against_cast(mid);
    check_against_cast(-nextafter(mid, 0.0));
    check_against_cast(nextafter(mid, INFINITY));
  }
  assert_int_equal(failures, 0);
}

static void test_float32_edges(void **state) {
  (void)state;
  const pc_dtype f32 = PC_DTYPE_FLOAT32;
  assert_true(pc_ulp_distance(0.0, -0.0, f32) == 0);
  assert_true(pc_ulp_distance(-FLT_TRUE_MIN, FLT_TRUE_MIN, f32) == 2);
  assert_true(pc_ulp_distance(-FLT_MAX, FLT_MAX, f32) == 2 * UINT64_C(0x7F7FFFFF));
  assert_true(pc_ulp_distance(FLT_MAX, INFINITY, f32) == 1);
  assert_true(pc_dtype_ordinal(1.0, f32) == 0x3F800000);
  assert_true(pc_dtype_ordinal(-FLT_MIN, f32) == -0x00800000);
  assert_true(pc_dtype_round(1.0 + 0x1p-24, f32) == 1.0);               /* tie, 1.0 even */
  assert_true(pc_dtype_round(1.0 + 3 * 0x1p-24, f32) == 1.0 + 0x1p-22); /* tie, upper even */
  assert_true(pc_dtype_round(FLT_MAX + 0x1p103, f32) == INFINITY);      /* max + half ulp */
  assert_true(pc_dtype_round(nextafter(FLT_MAX + 0x1p103, 0.0), f32) == FLT_MAX);
  assert_true(pc_dtype_round((double)FLT_TRUE_MIN / 2, f32) == 0.0);
  assert_true(pc_dtype_round(nextafter((double)FLT_TRUE_MIN / 2, 1.0), f32) == FLT_TRUE_MIN);
  assert_true(same(pc_dtype_round(-DBL_TRUE_MIN, f32), -0.0));
  assert_false(pc_dtype_representable(1.0 + 0x1p-30, f32));
  assert_true(pc_dtype_representable(1.0 + 0x1p-23, f32));
  assert_true(pc_dtype_representable(-INFINITY, f32));
}

static void test_float64_edges(void **state) {
  (void)state;
  const pc_dtype f64 = PC_DTYPE_FLOAT64;
  assert_true(pc_ulp_distance(-DBL_MAX, DBL_MAX, f64) == UINT64_C(18437736874454810622));
  assert_true(pc_ulp_distance(-DBL_MAX, DBL_MAX, f64) == 2 * UINT64_C(0x7FEFFFFFFFFFFFFF));
  assert_true(pc_ulp_distance(-INFINITY, INFINITY, f64) == 2 * UINT64_C(0x7FF0000000000000));
  assert_true(pc_ulp_distance(INFINITY, DBL_MAX, f64) == 1);
  assert_true(pc_ulp_distance(-DBL_TRUE_MIN, DBL_TRUE_MIN, f64) == 2);
  assert_true(pc_ulp_distance(-0.0, 0.0, f64) == 0);
  assert_true(pc_ulp_distance(1.0, nextafter(1.0, 2.0), f64) == 1);
  assert_true(pc_ulp_distance(DBL_MIN, nextafter(DBL_MIN, 0.0), f64) == 1);
  assert_true(pc_dtype_ordinal(-INFINITY, f64) == -INT64_C(0x7FF0000000000000));
}

/* In float64 every double is its own rounding and its position is its bit pattern. */
static void test_float64_random_identity(void **state) {
  (void)state;
  uint64_t rng = 64;
  failures = 0;
  for (int i = 0; i < 1000000; i++) {
    uint64_t u = next_random(&rng);
    double x = double_from_bits(u);
    if (isnan(x))
      continue;
    int64_t mag = (int64_t)(u & ~(UINT64_C(1) << 63));
    int64_t want = (u >> 63) ? -mag : mag;
    CHECK(pc_dtype_ordinal(x, PC_DTYPE_FLOAT64) == want, "%.17g: ordinal %lld, want %lld", x,
          (long long)pc_dtype_ordinal(x, PC_DTYPE_FLOAT64), (long long)want);
    CHECK(same(pc_dtype_round(x, PC_DTYPE_FLOAT64), x), "%.17g not its own rounding", x);
  }
  assert_int_equal(failures, 0);
}

static void test_nan_inputs(void **state) {
  (void)state;
  for (pc_dtype dt = PC_DTYPE_FLOAT64; dt <= PC_DTYPE_FLOAT8_E5M2; dt++) {
    assert_true(pc_ulp_distance(NAN, 1.0, dt) == UINT64_MAX);
    assert_true(pc_ulp_distance(0.0, -NAN, dt) == UINT64_MAX);
    assert_true(pc_ulp_distance(NAN, NAN, dt) == UINT64_MAX);
    assert_true(isnan(pc_dtype_round(NAN, dt)));
    assert_true(pc_dtype_representable(NAN, dt));
  }
}

/* ---- decoding ---------------------------------------------------------------------------- */

/* Decode `n` elements written most significant byte first, in both byte orders. */
static void decode_big_endian(pc_dtype dt, const unsigned char *be, size_t n, double *out_be,
                              double *out_le) {
  size_t size = pc_dtype_size(dt);
  unsigned char le[64];
  assert_true(n * size <= sizeof le);
  memcpy(le, be, n * size);
  reverse_each(le, n, size);
  pc_dtype_decode_float(dt, be, n, host_is_little_endian(), out_be);
  pc_dtype_decode_float(dt, le, n, !host_is_little_endian(), out_le);
}

static void expect_floats(pc_dtype dt, const unsigned char *be, size_t n, const double *want) {
  double got_be[8], got_le[8];
  assert_true(n <= 8);
  decode_big_endian(dt, be, n, got_be, got_le);
  for (size_t i = 0; i < n; i++) {
    CHECK(same(got_be[i], want[i]), "%s [%zu]: got %.17g, want %.17g", pc_dtype_name(dt), i,
          got_be[i], want[i]);
    CHECK(same(got_le[i], want[i]), "%s [%zu] le: got %.17g, want %.17g", pc_dtype_name(dt), i,
          got_le[i], want[i]);
  }
}

/* Every float16 pattern, decoded in the machine's byte order and byte-swapped, against the
 * textbook value, bit for bit: (-1)^s 2^(e - 15) (1 + m / 1024), subnormals m 2^-24, inf, and a
 * NaN as the quiet NaN of its sign. */
static void test_decode_float16_every_pattern(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  uint16_t *native = malloc(N * sizeof *native), *swapped = malloc(N * sizeof *swapped);
  double *got = malloc(N * sizeof *got), *got_swapped = malloc(N * sizeof *got_swapped);
  assert_non_null(native && swapped && got && got_swapped);
  for (uint32_t h = 0; h < N; h++) {
    native[h] = (uint16_t)h;
    swapped[h] = (uint16_t)(h >> 8 | (h & 0xFFu) << 8);
  }
  pc_dtype_decode_float(PC_DTYPE_FLOAT16, native, N, false, got);
  pc_dtype_decode_float(PC_DTYPE_FLOAT16, swapped, N, true, got_swapped);
  failures = 0;
  for (uint32_t h = 0; h < N; h++) {
    int e = (int)(h >> 10 & 0x1Fu), m = (int)(h & 0x3FFu);
    double sign = h & 0x8000u ? -1 : 1;
    double want = e == 31  ? (m ? copysign(NAN, sign) : sign * INFINITY)
                  : e == 0 ? sign * ldexp(m, -24)
                           : sign * ldexp(1024 + m, e - 25);
    CHECK(memcmp(&got[h], &want, sizeof want) == 0, "0x%04x: got %.17g, want %.17g", (unsigned)h,
          got[h], want);
    CHECK(memcmp(&got_swapped[h], &want, sizeof want) == 0, "0x%04x swapped: got %.17g, want %.17g",
          (unsigned)h, got_swapped[h], want);
  }
  free(native);
  free(swapped);
  free(got);
  free(got_swapped);
  assert_int_equal(failures, 0);
}

static void test_decode_float_byte_order(void **state) {
  (void)state;
  static const unsigned char f16[] = {0x3C, 0x00, 0xC0, 0x00, 0x7B, 0xFF, 0x00, 0x01, 0xFC, 0x00};
  static const unsigned char b16[] = {0x3F, 0x80, 0xC0, 0x49, 0x00, 0x01, 0x80, 0x00};
  static const unsigned char f32[] = {0x3F, 0x80, 0x00, 0x00, 0xC0, 0x49, 0x0F, 0xDB,
                                      0x00, 0x00, 0x00, 0x01, 0x7F, 0x80, 0x00, 0x00};
  static const unsigned char f64[] = {0x3F, 0xF0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                      0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18,
                                      0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01};
  failures = 0;
  expect_floats(PC_DTYPE_FLOAT16, f16, 5, (double[]){1.0, -2.0, 65504.0, 0x1p-24, -INFINITY});
  expect_floats(PC_DTYPE_BFLOAT16, b16, 4, (double[]){1.0, -3.140625, 0x1p-133, -0.0});
  expect_floats(PC_DTYPE_FLOAT32, f32, 4, (double[]){1.0, -0x1.921fb6p+1, FLT_TRUE_MIN, INFINITY});
  expect_floats(PC_DTYPE_FLOAT64, f64, 3, (double[]){1.0, 0x1.921fb54442d18p+1, -DBL_TRUE_MIN});
  assert_int_equal(failures, 0);
}

static void test_decode_int_byte_order(void **state) {
  (void)state;
  static const unsigned char i16[] = {0x80, 0x00, 0x12, 0x34, 0xFF, 0xFE};
  static const unsigned char u64[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                      0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01};
  unsigned char le[sizeof u64];
  int64_t out[3];
  bool swap_be = host_is_little_endian();

  pc_dtype_decode_int(PC_DTYPE_INT16, i16, 3, swap_be, out);
  assert_true(out[0] == INT16_MIN && out[1] == 0x1234 && out[2] == -2);
  memcpy(le, i16, sizeof i16);
  reverse_each(le, 3, 2);
  pc_dtype_decode_int(PC_DTYPE_INT16, le, 3, !swap_be, out);
  assert_true(out[0] == INT16_MIN && out[1] == 0x1234 && out[2] == -2);

  pc_dtype_decode_int(PC_DTYPE_UINT64, u64, 2, swap_be, out);
  assert_true((uint64_t)out[0] == UINT64_MAX && (uint64_t)out[1] == UINT64_C(0x8000000000000001));
  memcpy(le, u64, sizeof u64);
  reverse_each(le, 2, 8);
  pc_dtype_decode_int(PC_DTYPE_UINT64, le, 2, !swap_be, out);
  assert_true((uint64_t)out[0] == UINT64_MAX && (uint64_t)out[1] == UINT64_C(0x8000000000000001));
}

/* Native-order values of every integer width decode to themselves (uint64 bit for bit). */
static void test_decode_int_widths(void **state) {
  (void)state;
  int64_t out[4];
  const int8_t i8[] = {INT8_MIN, -1, 0, INT8_MAX};
  const uint8_t u8[] = {0, 1, 0x80, UINT8_MAX};
  const int16_t i16[] = {INT16_MIN, -1, 0, INT16_MAX};
  const uint16_t u16[] = {0, 1, 0x8000, UINT16_MAX};
  const int32_t i32[] = {INT32_MIN, -1, 0, INT32_MAX};
  const uint32_t u32[] = {0, 1, UINT32_C(0x80000000), UINT32_MAX};
  const int64_t i64[] = {INT64_MIN, -1, 0, INT64_MAX};
  const uint64_t u64[] = {0, 1, UINT64_C(0x8000000000000000), UINT64_MAX};
  const uint8_t bools[] = {0, 1, 1, 0};

#define EXPECT_INTS(dt, arr, cast)                                                                 \
  do {                                                                                             \
    pc_dtype_decode_int(dt, arr, 4, false, out);                                                   \
    for (int i = 0; i < 4; i++)                                                                    \
      assert_true((cast)out[i] == (cast)(arr)[i]);                                                 \
  } while (0)
  EXPECT_INTS(PC_DTYPE_INT8, i8, int64_t);
  EXPECT_INTS(PC_DTYPE_UINT8, u8, int64_t);
  EXPECT_INTS(PC_DTYPE_INT16, i16, int64_t);
  EXPECT_INTS(PC_DTYPE_UINT16, u16, int64_t);
  EXPECT_INTS(PC_DTYPE_INT32, i32, int64_t);
  EXPECT_INTS(PC_DTYPE_UINT32, u32, int64_t);
  EXPECT_INTS(PC_DTYPE_INT64, i64, int64_t);
  EXPECT_INTS(PC_DTYPE_UINT64, u64, uint64_t);
  EXPECT_INTS(PC_DTYPE_BOOL, bools, int64_t);
#undef EXPECT_INTS
  const uint8_t any_true = 2; /* bool decodes to 0 or 1 whatever byte stores true */
  pc_dtype_decode_int(PC_DTYPE_BOOL, &any_true, 1, false, out);
  assert_true(out[0] == 1);
}

/* ---- dtype table ------------------------------------------------------------------------- */

static void test_names_sizes_kinds(void **state) {
  (void)state;
  static const char *const names[PC_DTYPE_COUNT_] = {
      "none",  "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8",
      "int16", "int32",   "int64",   "uint8",   "uint16",   "uint32",        "uint64",      "bool"};
  static const size_t sizes[PC_DTYPE_COUNT_] = {0, 8, 4, 2, 2, 1, 1, 1, 2, 4, 8, 1, 2, 4, 8, 1};
  for (int i = 0; i < PC_DTYPE_COUNT_; i++) {
    pc_dtype dt = (pc_dtype)i;
    assert_string_equal(pc_dtype_name(dt), names[i]);
    assert_int_equal(pc_dtype_from_name(names[i]), dt);
    assert_int_equal(pc_dtype_size(dt), sizes[i]);
    assert_true(pc_dtype_is_float(dt) == (dt >= PC_DTYPE_FLOAT64 && dt <= PC_DTYPE_FLOAT8_E5M2));
    assert_true(pc_dtype_is_integer(dt) == (dt >= PC_DTYPE_INT8 && dt <= PC_DTYPE_BOOL));
  }
  assert_int_equal(pc_dtype_from_name("Float32"), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_name("float"), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_name(""), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_name(NULL), PC_DTYPE_NONE);
  assert_string_equal(pc_dtype_name(PC_DTYPE_COUNT_), "none");
}

static void test_unit_roundoff(void **state) {
  (void)state;
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_FLOAT64) == DBL_EPSILON / 2);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_FLOAT32) == FLT_EPSILON / 2);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_FLOAT16) == 0x1p-11);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_BFLOAT16) == 0x1p-8);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_FLOAT8_E4M3FN) == 0x1p-4);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_FLOAT8_E5M2) == 0x1p-3);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_INT32) == 0.0);
  assert_true(pc_dtype_unit_roundoff(PC_DTYPE_NONE) == 0.0);
}

static void test_from_layout(void **state) {
  (void)state;
  /* size, sign, exp pos, exp bits, mant pos, mant bits, bias: as H5Tget_fields reports them */
  assert_int_equal(pc_dtype_from_layout(8, 63, 52, 11, 0, 52, 1023), PC_DTYPE_FLOAT64);
  assert_int_equal(pc_dtype_from_layout(4, 31, 23, 8, 0, 23, 127), PC_DTYPE_FLOAT32);
  assert_int_equal(pc_dtype_from_layout(2, 15, 10, 5, 0, 10, 15), PC_DTYPE_FLOAT16);
  assert_int_equal(pc_dtype_from_layout(2, 15, 7, 8, 0, 7, 127), PC_DTYPE_BFLOAT16);
  assert_int_equal(pc_dtype_from_layout(1, 7, 3, 4, 0, 3, 7), PC_DTYPE_FLOAT8_E4M3FN);
  assert_int_equal(pc_dtype_from_layout(1, 7, 2, 5, 0, 2, 15), PC_DTYPE_FLOAT8_E5M2);
  /* A 24-bit float, float8_e4m3fnuz (bias 8), float16 with a wrong bias, float32 padded to
   * 8 bytes, a mantissa not at bit 0. */
  assert_int_equal(pc_dtype_from_layout(3, 23, 16, 7, 0, 16, 63), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_layout(1, 7, 3, 4, 0, 3, 8), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_layout(2, 15, 10, 5, 0, 10, 16), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_layout(8, 31, 23, 8, 0, 23, 127), PC_DTYPE_NONE);
  assert_int_equal(pc_dtype_from_layout(4, 31, 24, 7, 1, 23, 63), PC_DTYPE_NONE);
}

static void test_compare_table(void **state) {
  (void)state;
  static const struct {
    pc_dtype a, b, want;
    bool cross;
  } rows[] = {
      {PC_DTYPE_FLOAT64, PC_DTYPE_FLOAT64, PC_DTYPE_FLOAT64, false},
      {PC_DTYPE_FLOAT64, PC_DTYPE_FLOAT32, PC_DTYPE_FLOAT32, false},
      {PC_DTYPE_FLOAT64, PC_DTYPE_FLOAT16, PC_DTYPE_FLOAT16, false},
      {PC_DTYPE_FLOAT32, PC_DTYPE_BFLOAT16, PC_DTYPE_BFLOAT16, false},
      {PC_DTYPE_FLOAT16, PC_DTYPE_BFLOAT16, PC_DTYPE_FLOAT32, true},
      {PC_DTYPE_BFLOAT16, PC_DTYPE_BFLOAT16, PC_DTYPE_BFLOAT16, false},
      {PC_DTYPE_FLOAT16, PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E4M3FN, false},
      {PC_DTYPE_BFLOAT16, PC_DTYPE_FLOAT8_E5M2, PC_DTYPE_FLOAT8_E5M2, false},
      {PC_DTYPE_FLOAT64, PC_DTYPE_FLOAT8_E5M2, PC_DTYPE_FLOAT8_E5M2, false},
      {PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E5M2, PC_DTYPE_FLOAT32, true},
      {PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E4M3FN, false},
      {PC_DTYPE_INT8, PC_DTYPE_INT32, PC_DTYPE_INT32, false},
      {PC_DTYPE_UINT16, PC_DTYPE_INT8, PC_DTYPE_UINT16, false},
      {PC_DTYPE_INT32, PC_DTYPE_UINT32, PC_DTYPE_INT32, false},
      {PC_DTYPE_UINT64, PC_DTYPE_INT64, PC_DTYPE_INT64, false},
      {PC_DTYPE_UINT8, PC_DTYPE_UINT8, PC_DTYPE_UINT8, false},
      {PC_DTYPE_BOOL, PC_DTYPE_BOOL, PC_DTYPE_BOOL, false},
      {PC_DTYPE_BOOL, PC_DTYPE_UINT8, PC_DTYPE_UINT8, false},
      {PC_DTYPE_INT64, PC_DTYPE_FLOAT16, PC_DTYPE_FLOAT16, false},
      {PC_DTYPE_BOOL, PC_DTYPE_FLOAT32, PC_DTYPE_FLOAT32, false},
      {PC_DTYPE_UINT8, PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E4M3FN, false},
      {PC_DTYPE_NONE, PC_DTYPE_FLOAT32, PC_DTYPE_NONE, false},
      {PC_DTYPE_INT8, PC_DTYPE_NONE, PC_DTYPE_NONE, false},
      {PC_DTYPE_NONE, PC_DTYPE_NONE, PC_DTYPE_NONE, false},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    bool cross = !rows[i].cross; /* must be overwritten */
    assert_int_equal(pc_dtype_compare(rows[i].a, rows[i].b, &cross), rows[i].want);
    assert_true(cross == rows[i].cross);
    cross = !rows[i].cross;
    assert_int_equal(pc_dtype_compare(rows[i].b, rows[i].a, &cross), rows[i].want);
    assert_true(cross == rows[i].cross);
    assert_int_equal(pc_dtype_compare(rows[i].a, rows[i].b, NULL), rows[i].want);
  }
}

#define NARROW_TESTS(f)                                                                            \
  cmocka_unit_test_prestate(test_reference_model, (void *)&(f)),                                   \
      cmocka_unit_test_prestate(test_narrow_decode, (void *)&(f)),                                 \
      cmocka_unit_test_prestate(test_narrow_ordinal, (void *)&(f)),                                \
      cmocka_unit_test_prestate(test_narrow_ulp_line, (void *)&(f)),                               \
      cmocka_unit_test_prestate(test_narrow_rounding, (void *)&(f))

int main(void) {
  const struct CMUnitTest tests[] = {
      NARROW_TESTS(FP16),
      NARROW_TESTS(BF16),
      NARROW_TESTS(E4M3),
      NARROW_TESTS(E5M2),
      cmocka_unit_test(test_bf16_decode_is_upper_half_of_float32),
#ifdef __FLT16_MAX__
      cmocka_unit_test(test_fp16_random_vs_float16),
#endif
      cmocka_unit_test(test_no_double_rounding),
      cmocka_unit_test(test_float32_random_vs_cast),
      cmocka_unit_test(test_float32_edges),
      cmocka_unit_test(test_float64_edges),
      cmocka_unit_test(test_float64_random_identity),
      cmocka_unit_test(test_nan_inputs),
      cmocka_unit_test(test_decode_float_byte_order),
      cmocka_unit_test(test_decode_int_byte_order),
      cmocka_unit_test(test_decode_int_widths),
      cmocka_unit_test(test_decode_float16_every_pattern),
      cmocka_unit_test(test_names_sizes_kinds),
      cmocka_unit_test(test_unit_roundoff),
      cmocka_unit_test(test_from_layout),
      cmocka_unit_test(test_compare_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
