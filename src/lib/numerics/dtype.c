/* Numerics of docs/metrics.md: the dtype table, decoding of stored bits, rounding to a compare
 * dtype and positions on the ordered integer line. Rounding is integer arithmetic on the double's
 * bits, so results do not depend on the FPU's rounding mode; nothing holds state, so every
 * function is thread-safe. */
#include "numerics.h"

#include <float.h>  /* DBL_MANT_DIG, DBL_MAX_EXP, FLT_MANT_DIG, FLT_MAX_EXP */
#include <limits.h> /* CHAR_BIT */
#include <math.h>   /* INFINITY, NAN, isnan, isinf, signbit */
#include <string.h> /* memcpy, strcmp */

/* float32 and float64 are decoded by reinterpreting their bits as float and double, and rounding
 * takes the double's fields apart, so both must be the IEEE formats of the table below. */
_Static_assert(FLT_RADIX == 2 && FLT_MANT_DIG == 23 + 1 && FLT_MAX_EXP == 1 << (8 - 1),
               "float must be IEEE binary32");
_Static_assert(DBL_MANT_DIG == 52 + 1 && DBL_MAX_EXP == 1 << (11 - 1),
               "double must be IEEE binary64");
_Static_assert(sizeof(float) == sizeof(uint32_t) && sizeof(double) == sizeof(uint64_t),
               "float and double must have no padding");

/* The fields of a double. */
enum {
  F64_FRAC_BITS = DBL_MANT_DIG - 1,
  F64_BIAS = DBL_MAX_EXP - 1,
  F64_EXP_MASK = 2 * DBL_MAX_EXP - 1,
  F64_SIGN_POS = sizeof(double) * CHAR_BIT - 1,
};

typedef enum dtype_kind { KIND_NONE, KIND_FLOAT, KIND_SIGNED, KIND_UNSIGNED, KIND_BOOL } dtype_kind;

typedef struct dtype_info {
  const char *name;
  size_t size; /* bytes */
  dtype_kind kind;
  /* Floats only. The exponent bias is 2^(exp_bits-1) - 1 for every format of docs/metrics.md;
   * in each layout (sign, exponent, mantissa from the top bit down) the bit pattern of a
   * non-negative value equals its ordinal, which the rounding below relies on. */
  int tier;           /* rank in float64 > float32 > {float16, bfloat16} > float8; two different
                         formats of one tier have no common grid */
  unsigned exp_bits;  /* exponent field width */
  unsigned mant_bits; /* stored mantissa bits, without the implicit leading one */
  bool finite_only;   /* no inf: the all-ones exponent holds finite values and only the all-ones
                         pattern is NaN (the "fn" formats) */
} dtype_info;

#define PC_FLOAT(nm, sz, tr, e, m, fn)                                                             \
  { nm, sz, KIND_FLOAT, tr, e, m, fn }
#define PC_INT(nm, sz, kd)                                                                         \
  { nm, sz, kd, 0, 0, 0, false }

/* The layouts are those of the table in docs/metrics.md. */
static const dtype_info INFO[PC_DTYPE_COUNT_] = {
    [PC_DTYPE_NONE] = PC_INT("none", 0, KIND_NONE),
    [PC_DTYPE_FLOAT64] = PC_FLOAT("float64", 8, 4, 11, 52, false),
    [PC_DTYPE_FLOAT32] = PC_FLOAT("float32", 4, 3, 8, 23, false),
    [PC_DTYPE_FLOAT16] = PC_FLOAT("float16", 2, 2, 5, 10, false),
    [PC_DTYPE_BFLOAT16] = PC_FLOAT("bfloat16", 2, 2, 8, 7, false),
    [PC_DTYPE_FLOAT8_E4M3FN] = PC_FLOAT("float8_e4m3fn", 1, 1, 4, 3, true),
    [PC_DTYPE_FLOAT8_E5M2] = PC_FLOAT("float8_e5m2", 1, 1, 5, 2, false),
    [PC_DTYPE_INT8] = PC_INT("int8", 1, KIND_SIGNED),
    [PC_DTYPE_INT16] = PC_INT("int16", 2, KIND_SIGNED),
    [PC_DTYPE_INT32] = PC_INT("int32", 4, KIND_SIGNED),
    [PC_DTYPE_INT64] = PC_INT("int64", 8, KIND_SIGNED),
    [PC_DTYPE_UINT8] = PC_INT("uint8", 1, KIND_UNSIGNED),
    [PC_DTYPE_UINT16] = PC_INT("uint16", 2, KIND_UNSIGNED),
    [PC_DTYPE_UINT32] = PC_INT("uint32", 4, KIND_UNSIGNED),
    [PC_DTYPE_UINT64] = PC_INT("uint64", 8, KIND_UNSIGNED),
    [PC_DTYPE_BOOL] = PC_INT("bool", 1, KIND_BOOL),
};
#undef PC_FLOAT
#undef PC_INT

/* Out-of-range enum values read as PC_DTYPE_NONE rather than past the table. */
static const dtype_info *info(pc_dtype dt) {
  return (unsigned)dt < (unsigned)PC_DTYPE_COUNT_ ? &INFO[dt] : &INFO[PC_DTYPE_NONE];
}

/* ---- dtype table ------------------------------------------------------------------------- */

const char *pc_dtype_name(pc_dtype dt) {
  return info(dt)->name;
}

pc_dtype pc_dtype_from_name(const char *name) {
  for (int dt = PC_DTYPE_NONE + 1; name && dt < PC_DTYPE_COUNT_; dt++)
    if (strcmp(name, INFO[dt].name) == 0)
      return (pc_dtype)dt;
  return PC_DTYPE_NONE;
}

bool pc_dtype_is_float(pc_dtype dt) {
  return info(dt)->kind == KIND_FLOAT;
}

bool pc_dtype_is_integer(pc_dtype dt) {
  dtype_kind k = info(dt)->kind;
  return k == KIND_SIGNED || k == KIND_UNSIGNED || k == KIND_BOOL;
}

size_t pc_dtype_size(pc_dtype dt) {
  return info(dt)->size;
}

/* ---- format parameters ------------------------------------------------------------------- */

static int fmt_bias(const dtype_info *f) {
  return (1 << (f->exp_bits - 1)) - 1;
}

/* Exponent of the smallest normal value. */
static int fmt_emin(const dtype_info *f) {
  return 1 - fmt_bias(f);
}

static uint64_t low_ones(unsigned bits) {
  return (UINT64_C(1) << bits) - 1;
}

/* Ordinal (and bit pattern) of the largest finite value; one past it stands for ±inf and, for a
 * format without inf, for "out of range". */
static uint64_t max_finite_ordinal(const dtype_info *f) {
  if (f->finite_only)
    return low_ones(f->exp_bits + f->mant_bits) - 1;
  return (low_ones(f->exp_bits) << f->mant_bits) - 1;
}

/* Functions documented for float dtypes treat any other dtype as float64 rather than misbehave. */
static pc_dtype float_or_f64(pc_dtype dt) {
  return pc_dtype_is_float(dt) ? dt : PC_DTYPE_FLOAT64;
}

pc_dtype pc_dtype_from_layout(size_t size, size_t sign_pos, size_t exp_pos, size_t exp_bits,
                              size_t mant_pos, size_t mant_bits, unsigned long bias) {
  for (int dt = PC_DTYPE_NONE + 1; dt < PC_DTYPE_COUNT_; dt++) {
    const dtype_info *f = &INFO[dt];
    if (f->kind == KIND_FLOAT && size == f->size && sign_pos == f->size * CHAR_BIT - 1 &&
        exp_pos == f->mant_bits && exp_bits == f->exp_bits && mant_pos == 0 &&
        mant_bits == f->mant_bits && bias == (unsigned long)fmt_bias(f))
      return (pc_dtype)dt;
  }
  return PC_DTYPE_NONE;
}

double pc_dtype_unit_roundoff(pc_dtype dt) {
  const dtype_info *f = info(dt);
  return f->kind == KIND_FLOAT ? ldexp(1.0, -(int)(f->mant_bits + 1)) : 0.0;
}

/* ---- compare dtype ----------------------------------------------------------------------- */

static pc_dtype coarser_float(pc_dtype a, pc_dtype b, bool *cross_grid) {
  if (INFO[a].tier != INFO[b].tier)
    return INFO[a].tier < INFO[b].tier ? a : b;
  /* float32 holds every value of each pair of one tier (docs/metrics.md). */
  if (cross_grid)
    *cross_grid = true;
  return PC_DTYPE_FLOAT32;
}

/* Integers compare exactly, so this only has to be deterministic: bool yields to any integer,
 * then the larger size wins, then signed over unsigned. */
static pc_dtype wider_integer(pc_dtype a, pc_dtype b) {
  if (INFO[a].kind == KIND_BOOL)
    return b;
  if (INFO[b].kind == KIND_BOOL)
    return a;
  if (INFO[a].size != INFO[b].size)
    return INFO[a].size > INFO[b].size ? a : b;
  return INFO[a].kind == KIND_SIGNED ? a : b;
}

pc_dtype pc_dtype_compare(pc_dtype a, pc_dtype b, bool *cross_grid) {
  if (cross_grid)
    *cross_grid = false;
  dtype_kind ka = info(a)->kind, kb = info(b)->kind;
  if (ka == KIND_NONE || kb == KIND_NONE)
    return PC_DTYPE_NONE;
  if (a == b)
    return a;
  if (ka == KIND_FLOAT && kb == KIND_FLOAT)
    return coarser_float(a, b, cross_grid);
  if (ka == KIND_FLOAT || kb == KIND_FLOAT)
    return ka == KIND_FLOAT ? a : b;
  return wider_integer(a, b);
}

/* ---- decoding ---------------------------------------------------------------------------- */

static uint64_t double_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static double bits_double(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static double bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* 2^e, exactly, for e in double's normal exponent range. */
static double pow2(int e) {
  return bits_double((uint64_t)(e + F64_BIAS) << F64_FRAC_BITS);
}

/* Value of a bit pattern of a format whose values are all normal doubles (float16, float8). The
 * sign is moved over bit by bit: signs in real data are random, so a branch on them would stall. */
static inline double narrow_value(uint64_t bits, const dtype_info *f) {
  unsigned m = f->mant_bits;
  uint64_t frac = bits & low_ones(m);
  uint64_t field = (bits >> m) & low_ones(f->exp_bits);
  uint64_t sign = (bits >> (f->exp_bits + m)) << F64_SIGN_POS;
  double mag;
  if (field == low_ones(f->exp_bits) && (!f->finite_only || frac == low_ones(m)))
    mag = frac == 0 ? INFINITY : NAN; /* frac is nonzero in a finite-only format here */
  else if (field == 0) /* frac < 2^m fits an int, whose conversion is cheaper than uint64's */
    mag = (int)frac * pow2(fmt_emin(f) - (int)m);
  else /* a normal value is a normal double: rebias the exponent, left-align the fraction */
    mag = bits_double((uint64_t)((int)field - fmt_bias(f) + F64_BIAS) << F64_FRAC_BITS |
                      frac << (F64_FRAC_BITS - m));
  return bits_double(double_bits(mag) | sign);
}

/* Value of a bit pattern of float dtype dt. bfloat16 is the upper half of a float32. */
static double pattern_value(pc_dtype dt, uint64_t bits) {
  switch (dt) {
  case PC_DTYPE_FLOAT64:
    return bits_double(bits);
  case PC_DTYPE_FLOAT32:
    return bits_float((uint32_t)bits);
  case PC_DTYPE_FLOAT16: /* narrow_value's value, without its branches (numerics.h) */
    return pc_f16_float((uint16_t)bits);
  case PC_DTYPE_BFLOAT16:
    return bits_float((uint32_t)bits << (FLT_MANT_DIG - 1 - INFO[PC_DTYPE_BFLOAT16].mant_bits));
  default:
    return narrow_value(bits, info(dt));
  }
}

/* The low `size` bytes of v in reverse order: swap the 32-bit halves, then the 16-bit halves of
 * each, then the bytes of each (a pattern compilers turn into one bswap), and drop the bytes
 * above `size`, which the full reversal moved to the bottom. */
static inline uint64_t reverse_bytes(uint64_t v, size_t size) {
  v = v >> 32 | v << 32;
  v = (v & UINT64_C(0xFFFF0000FFFF0000)) >> 16 | (v & UINT64_C(0x0000FFFF0000FFFF)) << 16;
  v = (v & UINT64_C(0xFF00FF00FF00FF00)) >> 8 | (v & UINT64_C(0x00FF00FF00FF00FF)) << 8;
  return v >> (sizeof v - size) * CHAR_BIT;
}

/* The element of `size` bytes at p as an unsigned integer, its bytes reversed when swap. */
static inline uint64_t load_bits(const unsigned char *p, size_t size, bool swap) {
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (size) {
  case sizeof(uint8_t):
    return p[0];
  case sizeof u16:
    memcpy(&u16, p, sizeof u16);
    return swap ? reverse_bytes(u16, size) : u16;
  case sizeof u32:
    memcpy(&u32, p, sizeof u32);
    return swap ? reverse_bytes(u32, size) : u32;
  default:
    memcpy(&u64, p, sizeof u64);
    return swap ? reverse_bytes(u64, size) : u64;
  }
}

/* Called with a constant dt, so that each dtype gets its own specialised loop, and one for each
 * byte order (the one without swaps is then a plain conversion the compiler vectorises). */
static inline void decode_floats(pc_dtype dt, const unsigned char *p, size_t n, bool swap,
                                 double *out) {
  size_t size = INFO[dt].size;
  if (swap)
    for (size_t i = 0; i < n; i++)
      out[i] = pattern_value(dt, load_bits(p + i * size, size, true));
  else
    for (size_t i = 0; i < n; i++)
      out[i] = pattern_value(dt, load_bits(p + i * size, size, false));
}

void pc_dtype_decode_float(pc_dtype dt, const void *raw, size_t n, bool swap, double *out) {
  switch (dt) {
  case PC_DTYPE_FLOAT64:
    decode_floats(PC_DTYPE_FLOAT64, raw, n, swap, out);
    break;
  case PC_DTYPE_FLOAT32:
    decode_floats(PC_DTYPE_FLOAT32, raw, n, swap, out);
    break;
  case PC_DTYPE_FLOAT16:
    decode_floats(PC_DTYPE_FLOAT16, raw, n, swap, out);
    break;
  case PC_DTYPE_BFLOAT16:
    decode_floats(PC_DTYPE_BFLOAT16, raw, n, swap, out);
    break;
  case PC_DTYPE_FLOAT8_E4M3FN:
    decode_floats(PC_DTYPE_FLOAT8_E4M3FN, raw, n, swap, out);
    break;
  case PC_DTYPE_FLOAT8_E5M2:
    decode_floats(PC_DTYPE_FLOAT8_E5M2, raw, n, swap, out);
    break;
  default: /* not a float dtype: a defined answer instead of garbage */
    for (size_t i = 0; i < n; i++)
      out[i] = NAN;
  }
}

/* Bool decodes to 0 or 1 whatever nonzero byte stores true. 64-bit values are copied bit for bit
 * (uint64 above INT64_MAX reads as negative, as the header says); narrower signed values are
 * sign-extended by flipping and subtracting the sign bit, which cannot overflow below 64 bits. */
static inline int64_t int_value(uint64_t bits, dtype_kind kind, size_t size) {
  if (kind == KIND_BOOL)
    return bits != 0;
  if (size == sizeof(int64_t)) {
    int64_t v;
    memcpy(&v, &bits, sizeof v);
    return v;
  }
  if (kind == KIND_UNSIGNED)
    return (int64_t)bits;
  uint64_t sign = UINT64_C(1) << (size * CHAR_BIT - 1);
  return (int64_t)(bits ^ sign) - (int64_t)sign;
}

/* Called with a constant size, so that each width gets its own specialised loop. */
static inline void decode_ints(dtype_kind kind, size_t size, const unsigned char *p, size_t n,
                               bool swap, int64_t *out) {
  for (size_t i = 0; i < n; i++)
    out[i] = int_value(load_bits(p + i * size, size, swap), kind, size);
}

void pc_dtype_decode_int(pc_dtype dt, const void *raw, size_t n, bool swap, int64_t *out) {
  dtype_kind kind = info(dt)->kind;
  if (!pc_dtype_is_integer(dt)) { /* a defined answer instead of garbage */
    for (size_t i = 0; i < n; i++)
      out[i] = 0;
    return;
  }
  switch (info(dt)->size) {
  case sizeof(uint8_t):
    decode_ints(kind, sizeof(uint8_t), raw, n, swap, out);
    break;
  case sizeof(uint16_t):
    decode_ints(kind, sizeof(uint16_t), raw, n, swap, out);
    break;
  case sizeof(uint32_t):
    decode_ints(kind, sizeof(uint32_t), raw, n, swap, out);
    break;
  default:
    decode_ints(kind, sizeof(uint64_t), raw, n, swap, out);
  }
}

/* ---- rounding and ordinals --------------------------------------------------------------- */

/* sig / 2^s rounded to nearest, ties to even; sig < 2^DBL_MANT_DIG and s >= 0. */
static uint64_t shift_right_even(uint64_t sig, int s) {
  if (s == 0)
    return sig;
  if (s > DBL_MANT_DIG) /* then sig < 2^(s-1): below one half */
    return 0;
  uint64_t n = sig >> s;
  uint64_t rem = sig & low_ones((unsigned)s);
  uint64_t half = UINT64_C(1) << (s - 1);
  /* Bitwise, not ||: whether to round up is data, and a branch on it would mispredict. */
  return n + ((rem > half) | ((rem == half) & (n & 1)));
}

/* The ordinal of |x| (finite, zero included) rounded to float format f, clamped to one past the
 * largest finite value. The result is n units of quantum 2^q, where q is the weight of the last
 * mantissa bit at |x|'s exponent, or at emin below the normal range. Counting whole binades below q
 * and adding n gives the ordinal even when rounding carries n into the next binade or out of the
 * subnormals. */
static inline uint64_t magnitude_ordinal(double x, const dtype_info *f) {
  uint64_t bits = double_bits(x);
  uint64_t field = (bits >> F64_FRAC_BITS) & F64_EXP_MASK;
  uint64_t frac = bits & low_ones(F64_FRAC_BITS);
  int m = (int)f->mant_bits, emin = fmt_emin(f);
  /* Every format's emin is at least double's, so a subnormal double lies below f's normals. */
  int lead = field != 0 ? (int)field - F64_BIAS : emin;
  int q = (lead > emin ? lead : emin) - m;
  uint64_t sig = field != 0 ? frac | (UINT64_C(1) << F64_FRAC_BITS) : frac;
  int exp2 = (field != 0 ? (int)field : 1) - F64_BIAS - F64_FRAC_BITS; /* |x| = sig * 2^exp2 */
  uint64_t n = shift_right_even(sig, q - exp2); /* q >= exp2: f has at most double's precision */
  uint64_t ord = ((uint64_t)(q - (emin - m)) << m) + n;
  uint64_t limit = max_finite_ordinal(f) + 1;
  return ord < limit ? ord : limit;
}

double pc_dtype_round(double x, pc_dtype dt) {
  dt = float_or_f64(dt);
  const dtype_info *f = info(dt);
  if (isnan(x) || isinf(x))
    return x;
  uint64_t ord = magnitude_ordinal(x, f);
  double mag = ord > max_finite_ordinal(f) ? INFINITY : pattern_value(dt, ord);
  return signbit(x) ? -mag : mag;
}

bool pc_dtype_representable(double x, pc_dtype dt) {
  if (isnan(x))
    return true;
  if (isinf(x))
    return !info(float_or_f64(dt))->finite_only;
  return pc_dtype_round(x, dt) == x;
}

/* The ordinal of a non-NaN x. The sign is applied without a branch: signs in real data are random.
 */
static inline int64_t ordinal_of(double x, const dtype_info *f) {
  int64_t mag = isinf(x) ? (int64_t)max_finite_ordinal(f) + 1 : (int64_t)magnitude_ordinal(x, f);
  int64_t neg = -(int64_t)(double_bits(x) >> F64_SIGN_POS); /* 0 or all ones */
  return (mag ^ neg) - neg;
}

int64_t pc_dtype_ordinal(double x, pc_dtype dt) {
  if (isnan(x)) /* outside the contract: a fixed answer rather than garbage */
    return 0;
  return ordinal_of(x, info(float_or_f64(dt)));
}

uint64_t pc_ulp_distance(double a, double b, pc_dtype dt) {
  if (isnan(a) || isnan(b))
    return UINT64_MAX;
  const dtype_info *f = info(float_or_f64(dt));
  int64_t oa = ordinal_of(a, f), ob = ordinal_of(b, f);
  /* The true distance is below 2^64, so unsigned (modular) subtraction of the smaller from the
   * larger is exact even where the signed difference would overflow. */
  return oa >= ob ? (uint64_t)oa - (uint64_t)ob : (uint64_t)ob - (uint64_t)oa;
}
