/* Structural evidence (evidence.h): the sums of pc_evidence over one block, in row-major order.
 * One template serves the three stored layouts the stream folds (doubles, float32 bytes,
 * float16 bytes), so that each loop reads its values without a call per element. */
#include "evidence.h"
#include "kernel_f32.h" /* pc_f16_float */
#include "numerics.h"   /* pc_dtype_round */

#include <float.h>  /* FLT_MIN */
#include <math.h>   /* fabs, fmax, isfinite, INFINITY, NAN */
#include <string.h> /* memcpy, memset */

/* The smallest normal float16: below it a backend may flush or underflow a value to zero
 * (float16 subnormals, FTZ in float32 and bfloat16), so a zero there is no evidence. */
static const double PC_ZERO_EVIDENCE_MIN = 0x1p-14;

static void pc_evidence_reset(pc_evidence *e) {
  memset(e, 0, sizeof *e);
  e->min_a = e->min_b = INFINITY;
  e->max_a = e->max_b = -INFINITY;
  e->first_a = e->first_b = e->last_a = e->last_b = NAN;
}

/* Rounds float32 bits to nearest even, keeping the top `keep` bits of the pattern's 32 (16 for
 * bfloat16, 19 for tf32: sign, 8 exponent bits and 7 or 10 mantissa bits). */
static inline uint32_t pc_round_bits(uint32_t u, int drop) {
  uint32_t half = (1u << (drop - 1)) - 1, odd = (u >> drop) & 1u;
  return (u + half + odd) & ~((1u << drop) - 1);
}

/* The precision signature of one pair whose a is a float32 value (docs/tolerance-model.md,
 * "Diagnosis"): for bfloat16, float16 and tf32, whether a is off that grid and b is a rounded
 * to it. */
static inline void pc_signature(pc_evidence *e, float a, float b) {
  uint32_t ua, ub;
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  uint32_t r16 = pc_round_bits(ua, 16), r13 = pc_round_bits(ua, 13);
  float h = (float)pc_dtype_round(a, PC_DTYPE_FLOAT16);
  bool off[3] = {r16 != ua, h != a, r13 != ua};
  bool hit[3] = {r16 == ub, h == b, r13 == ub};
  for (int k = 0; k < 3; k++) {
    e->round_cand[k] += off[k];
    e->round_hit[k] += off[k] & hit[k];
  }
}

/* What one finite pair is among pc_evidence's classes. */
typedef enum { PC_PAIR_REST, PC_PAIR_ZEROED, PC_PAIR_ZEROED_SMALL, PC_PAIR_FLIPPED } pc_pair_class;

/* One finite pair's sums; returns its class. */
static inline pc_pair_class pc_evidence_pair(pc_evidence *e, double a, double b) {
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
  if (b == 0 && fabs(a) >= PC_ZERO_EVIDENCE_MIN) {
    e->zeroed++;
    e->zeroed_sq += a * a;
    return PC_PAIR_ZEROED;
  }
  if (b == 0 && fabs(a) >= FLT_MIN) {
    e->zeroed_small++;
    e->zeroed_small_sq += a * a;
    return PC_PAIR_ZEROED_SMALL;
  }
  if ((a < 0 && b > 0) || (a > 0 && b < 0)) {
    e->flipped++;
    e->flipped_sq += a * a;
    e->flipped_neg_sq += (a + b) * (a + b);
    return PC_PAIR_FLIPPED;
  }
  e->rest++;
  e->rest_sq += d * d;
  e->rest_max = fabs(d) > e->rest_max ? fabs(d) : e->rest_max;
  return PC_PAIR_REST;
}

/* A pair's share of its slice group's sums. */
static inline void pc_slice_pair(pc_evidence *e, int g, double a, double b, pc_pair_class c) {
  double d2 = (b - a) * (b - a);
  e->slice_sq[g] += d2;
  e->slice_a2[g] += a * a;
  if (c == PC_PAIR_REST) {
    e->slice_rest[g]++;
    e->slice_rest_sq[g] += d2;
    e->slice_rest_max[g] = fabs(b - a) > e->slice_rest_max[g] ? fabs(b - a) : e->slice_rest_max[g];
  } else if (c == PC_PAIR_ZEROED) {
    e->slice_zeroed[g]++;
    e->slice_zeroed_sq[g] += a * a;
  }
}

/* Pair (b[i], a[i - s]) of a shift when both lie in the block and all three values are finite. */
static inline void pc_shift_pair(pc_evidence *e, int k, double ai, double bi, double as) {
  if (!isfinite(as))
    return;
  double ds = bi - as, d0 = bi - ai;
  e->shift_pairs[k]++;
  e->shift_sq[k] += ds * ds;
  e->shift_base_sq[k] += d0 * d0;
}

/* Where a block lies among the slices of the leading axis (pc_slicing): the group of its
 * element i, advanced at each slice's end without a division per element. */
typedef struct pc_slice_cursor {
  bool on;
  uint64_t slice, next; /* the slice of the current element; the block index where it ends */
  const pc_slicing *s;
} pc_slice_cursor;

static pc_slice_cursor pc_slice_start(const pc_slicing *s) {
  pc_slice_cursor c = {s && s->stride && s->slices >= 2, 0, 0, s};
  if (c.on) {
    c.slice = s->base / s->stride;
    c.next = (c.slice + 1) * s->stride - s->base;
  }
  return c;
}

static inline int pc_slice_group(pc_slice_cursor *c, size_t i) {
  while (i >= c->next) {
    c->slice++;
    c->next += c->s->stride;
  }
  return (int)(c->slice * PC_SLICE_GROUPS / c->s->slices);
}

/* The loop over a block: LOAD(j, x) sets double x to a's or b's value j. Non-finite pairs take
 * part only as a block's ends (NaN there: no straddling pair). */
#define PC_EVIDENCE_LOOP(LOAD_A, LOAD_B, SIG)                                                      \
  pc_slice_cursor cur = pc_slice_start(slicing);                                                   \
  for (size_t i = 0; i < n; i++) {                                                                 \
    double a, b;                                                                                   \
    LOAD_A(i, a);                                                                                  \
    LOAD_B(i, b);                                                                                  \
    bool ok = isfinite(a) && isfinite(b);                                                          \
    if (i == 0) {                                                                                  \
      e->first_a = ok ? a : NAN;                                                                   \
      e->first_b = ok ? b : NAN;                                                                   \
    }                                                                                              \
    if (i + 1 == n) {                                                                              \
      e->last_a = ok ? a : NAN;                                                                    \
      e->last_b = ok ? b : NAN;                                                                    \
    }                                                                                              \
    if (!ok)                                                                                       \
      continue;                                                                                    \
    pc_pair_class cls = pc_evidence_pair(e, a, b);                                                 \
    if (cur.on)                                                                                    \
      pc_slice_pair(e, pc_slice_group(&cur, i), a, b, cls);                                        \
    if (SIG)                                                                                       \
      pc_signature(e, (float)a, (float)b);                                                         \
    double as;                                                                                     \
    if (i > 0) {                                                                                   \
      LOAD_A(i - 1, as);                                                                           \
      pc_shift_pair(e, PC_SHIFT_FWD, a, b, as);                                                    \
    }                                                                                              \
    if (i + 1 < n) {                                                                               \
      LOAD_A(i + 1, as);                                                                           \
      pc_shift_pair(e, PC_SHIFT_BACK, a, b, as);                                                   \
    }                                                                                              \
  }

static void pc_evidence_f64(pc_evidence *e, const double *va, const double *vb, size_t n,
                            const pc_slicing *slicing, bool signature) {
#define LA(j, x) (x) = va[j]
#define LB(j, x) (x) = vb[j]
  PC_EVIDENCE_LOOP(LA, LB, signature)
#undef LA
#undef LB
}

/* Value j of a float32 (half false) or float16 bytes block. */
static inline double pc_load_stored(const unsigned char *r, size_t j, bool half) {
  if (half) {
    uint16_t h;
    memcpy(&h, r + 2 * j, sizeof h);
    return pc_f16_float(h);
  }
  float f;
  memcpy(&f, r + 4 * j, sizeof f);
  return f;
}

static void pc_evidence_bytes(pc_evidence *e, const unsigned char *ra, const unsigned char *rb,
                              size_t n, const pc_slicing *slicing, bool half) {
#define LA(j, x) (x) = pc_load_stored(ra, (j), half)
#define LB(j, x) (x) = pc_load_stored(rb, (j), half)
  PC_EVIDENCE_LOOP(LA, LB, !half)
#undef LA
#undef LB
}

/* The shifted pairs that straddle dst's last element and src's first. */
static void pc_evidence_seam(pc_evidence *dst, const pc_evidence *src) {
  if (isfinite(dst->last_a) && isfinite(src->first_b))
    pc_shift_pair(dst, PC_SHIFT_FWD, src->first_a, src->first_b, dst->last_a);
  if (isfinite(dst->last_b) && isfinite(src->first_a))
    pc_shift_pair(dst, PC_SHIFT_BACK, dst->last_a, dst->last_b, src->first_a);
}

void pc_evidence_merge(pc_evidence *dst, const pc_evidence *src) {
  if (!src->seen)
    return;
  if (!dst->seen) {
    *dst = *src;
    return;
  }
  pc_evidence_seam(dst, src);
  dst->last_a = src->last_a;
  dst->last_b = src->last_b;
  dst->pairs += src->pairs;
  dst->sum_a += src->sum_a;
  dst->sum_b += src->sum_b;
  dst->sum_abs_a += src->sum_abs_a;
  dst->sum_abs_b += src->sum_abs_b;
  dst->min_a = src->min_a < dst->min_a ? src->min_a : dst->min_a;
  dst->max_a = src->max_a > dst->max_a ? src->max_a : dst->max_a;
  dst->min_b = src->min_b < dst->min_b ? src->min_b : dst->min_b;
  dst->max_b = src->max_b > dst->max_b ? src->max_b : dst->max_b;
  dst->zeros_a += src->zeros_a;
  dst->zeroed += src->zeroed;
  dst->zeroed_sq += src->zeroed_sq;
  dst->zeroed_small += src->zeroed_small;
  dst->zeroed_small_sq += src->zeroed_small_sq;
  dst->flipped += src->flipped;
  dst->flipped_sq += src->flipped_sq;
  dst->flipped_neg_sq += src->flipped_neg_sq;
  dst->rest += src->rest;
  dst->rest_sq += src->rest_sq;
  dst->rest_max = src->rest_max > dst->rest_max ? src->rest_max : dst->rest_max;
  for (int k = 0; k < PC_NSHIFTS; k++) {
    dst->shift_pairs[k] += src->shift_pairs[k];
    dst->shift_sq[k] += src->shift_sq[k];
    dst->shift_base_sq[k] += src->shift_base_sq[k];
  }
  for (int k = 0; k < 3; k++) {
    dst->round_cand[k] += src->round_cand[k];
    dst->round_hit[k] += src->round_hit[k];
  }
  for (int g = 0; g < PC_SLICE_GROUPS; g++) {
    dst->slice_sq[g] += src->slice_sq[g];
    dst->slice_a2[g] += src->slice_a2[g];
    dst->slice_rest[g] += src->slice_rest[g];
    dst->slice_rest_sq[g] += src->slice_rest_sq[g];
    dst->slice_rest_max[g] = fmax(dst->slice_rest_max[g], src->slice_rest_max[g]);
    dst->slice_zeroed[g] += src->slice_zeroed[g];
    dst->slice_zeroed_sq[g] += src->slice_zeroed_sq[g];
  }
}

void pc_evidence_times(pc_evidence *e, uint64_t n) {
  double dn = (double)n;
  e->pairs *= n;
  e->sum_a *= dn;
  e->sum_b *= dn;
  e->sum_abs_a *= dn;
  e->sum_abs_b *= dn;
  e->zeros_a *= n;
  e->zeroed *= n;
  e->zeroed_sq *= dn;
  e->zeroed_small *= n;
  e->zeroed_small_sq *= dn;
  e->flipped *= n;
  e->flipped_sq *= dn;
  e->flipped_neg_sq *= dn;
  e->rest *= n;
  e->rest_sq *= dn;
  for (int k = 0; k < 3; k++) {
    e->round_cand[k] *= n;
    e->round_hit[k] *= n;
  }
  /* n equal pairs hold n - 1 shifted pairs in each direction, each the one pair's difference. */
  if (isfinite(e->first_a) && isfinite(e->first_b) && n > 1)
    for (int k = 0; k < PC_NSHIFTS; k++) {
      double d = e->first_b - e->first_a;
      e->shift_pairs[k] = n - 1;
      e->shift_sq[k] = e->shift_base_sq[k] = d * d * (double)(n - 1);
    }
}

void pc_evidence_add_f64(pc_stats *s, const double *a, const double *b, size_t n,
                         const pc_slicing *slicing, bool signature) {
  pc_evidence e;
  pc_evidence_reset(&e);
  pc_evidence_f64(&e, a, b, n, slicing, signature);
  e.seen = n > 0;
  pc_evidence_merge(&s->ev, &e);
}

void pc_evidence_add_bytes(pc_stats *s, const unsigned char *a, const unsigned char *b, size_t n,
                           const pc_slicing *slicing, bool half) {
  pc_evidence e;
  pc_evidence_reset(&e);
  pc_evidence_bytes(&e, a, b, n, slicing, half);
  e.seen = n > 0;
  pc_evidence_merge(&s->ev, &e);
}

pc_slicing pc_evidence_slicing(const pc_tensor *t, uint64_t base) {
  pc_slicing s = {base, 0, 0};
  if (t->rank < 2 || !t->dims || t->dims[0] < 2)
    return s;
  uint64_t stride = 1;
  for (int i = 1; i < t->rank; i++)
    stride *= t->dims[i];
  s.stride = stride;
  s.slices = t->dims[0];
  return s;
}
