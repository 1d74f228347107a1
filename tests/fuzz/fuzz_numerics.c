/* libFuzzer target: the ULP distance of docs/metrics.md on random bit patterns, for every float
 * dtype. The input picks a dtype and three values, each either a bit pattern of that dtype
 * (decoded: a value on its grid) or any double (rounded by the distance itself). Properties:
 *   - symmetry: ulp(a, b) = ulp(b, a);
 *   - identity: ulp(a, b) = 0 exactly when a and b are equal after rounding to the dtype;
 *   - the ordered line: ulp(a, b) = |ordinal(a) - ordinal(b)|, ordinals never decrease with the
 *     value, and for ordinals in order a <= b <= c, ulp(a, c) = ulp(a, b) + ulp(b, c), so the
 *     triangle inequality holds for every triple;
 *   - rounding is idempotent, and a decoded bit pattern is on the grid: round(x) = x.
 * A violation aborts, which libFuzzer reports as a crash with its input. */
#include "numerics.h"

#include <math.h>   /* isnan, isinf */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* abort */
#include <string.h> /* memcpy */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const pc_dtype floats[] = {PC_DTYPE_FLOAT64,  PC_DTYPE_FLOAT32,       PC_DTYPE_FLOAT16,
                                  PC_DTYPE_BFLOAT16, PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E5M2};
enum { NFLOATS = sizeof floats / sizeof *floats };

typedef struct input {
  const unsigned char *p;
  size_t left;
} input;

static void fail(const char *what, pc_dtype dt, double a, double b, double c) {
  fprintf(stderr, "fuzz_numerics: %s (%s: a=%.17g b=%.17g c=%.17g)\n", what, pc_dtype_name(dt), a,
          b, c);
  abort();
}

/* The next value: a bit pattern of dt when `native`, else any double. False when the input is
 * used up or the value is NaN (the distance is defined for numbers only). */
static bool next_value(input *in, pc_dtype dt, bool native, double *out) {
  size_t n = native ? pc_dtype_size(dt) : sizeof(double);
  if (in->left < n)
    return false;
  if (native)
    pc_dtype_decode_float(dt, in->p, 1, false, out);
  else
    memcpy(out, in->p, sizeof *out);
  in->p += n;
  in->left -= n;
  return !isnan(*out);
}

/* |x - y| of two ordinals, without overflow (they lie within +-2^63). */
static uint64_t ord_distance(int64_t x, int64_t y) {
  return x > y ? (uint64_t)x - (uint64_t)y : (uint64_t)y - (uint64_t)x;
}

static void check_value(pc_dtype dt, double x, bool native) {
  double r = pc_dtype_round(x, dt);
  if (!isinf(r) && !pc_dtype_representable(r, dt))
    fail("a rounded value is not representable", dt, x, r, 0);
  if (!isinf(r) && pc_dtype_round(r, dt) != r)
    fail("rounding is not idempotent", dt, x, r, 0);
  if (native && r != x)
    fail("a decoded bit pattern is not on the grid", dt, x, r, 0);
}

static void check_pair(pc_dtype dt, double a, double b) {
  uint64_t d = pc_ulp_distance(a, b, dt);
  if (d != pc_ulp_distance(b, a, dt))
    fail("ulp distance is not symmetric", dt, a, b, 0);
  if ((d == 0) != (pc_dtype_round(a, dt) == pc_dtype_round(b, dt)))
    fail("ulp distance is 0 but the rounded values differ, or the reverse", dt, a, b, 0);
  int64_t oa = pc_dtype_ordinal(a, dt), ob = pc_dtype_ordinal(b, dt);
  if (d != ord_distance(oa, ob))
    fail("ulp distance is not the ordinal difference", dt, a, b, 0);
  if ((a < b && oa > ob) || (b < a && ob > oa))
    fail("ordinals decrease with the value", dt, a, b, 0);
}

/* Sorted by ordinal, the distances add up along the line. */
static void check_triple(pc_dtype dt, double v[3]) {
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2 - i; j++)
      if (pc_dtype_ordinal(v[j], dt) > pc_dtype_ordinal(v[j + 1], dt)) {
        double t = v[j];
        v[j] = v[j + 1];
        v[j + 1] = t;
      }
  uint64_t ab = pc_ulp_distance(v[0], v[1], dt), bc = pc_ulp_distance(v[1], v[2], dt);
  uint64_t ac = pc_ulp_distance(v[0], v[2], dt);
  if (ac < ab || ac - ab != bc)
    fail("distances do not add up along the ordered line", dt, v[0], v[1], v[2]);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (size < 1)
    return 0;
  pc_dtype dt = floats[data[0] % NFLOATS];
  unsigned natives = data[0] / NFLOATS; /* one bit per value: a bit pattern of dt or a double */
  input in = {data + 1, size - 1};
  double v[3];
  for (int i = 0; i < 3; i++) {
    if (!next_value(&in, dt, (natives >> i) & 1u, &v[i]))
      return 0;
    check_value(dt, v[i], (natives >> i) & 1u);
  }
  check_pair(dt, v[0], v[1]);
  check_pair(dt, v[1], v[2]);
  check_pair(dt, v[0], v[2]);
  check_triple(dt, v);
  return 0;
}
