/* Streaming quantiles: a histogram of non-negative doubles whose buckets are the values' top 16
 * bits (sign, 11 exponent bits, 4 mantissa bits), so a bucket spans 1/16 of a binary octave and
 * the bucket of a value is one shift, with no branch (real data makes branches on "is it zero"
 * unpredictable). Bucket 0 holds 0 and the subnormals below 2^-1070; the last bucket +inf.
 * Counts are integers, so histograms merge exactly in any order. Internal to the library. */
#ifndef PC_QHIST_H
#define PC_QHIST_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <string.h> /* memcpy */

enum {
  PC_QH_SHIFT = 48,      /* keep sign, exponent and 4 mantissa bits */
  PC_QH_INF = 0x7FF0,    /* +inf's top 16 bits: every finite value is below */
  PC_QH_BUCKETS = 0x7FF1 /* 0 .. PC_QH_INF */
};

typedef struct pc_qhist {
  /* The nonzero buckets in use are lo..hi (lo >= 1; lo > hi when none is). Bucket 0 is kept
   * out of the range: exact matches are common next to drifted values, and a range reaching
   * down to 0 would make every merge and reset walk thousands of empty buckets. */
  uint32_t lo, hi;
  uint64_t count[PC_QH_BUCKETS];
} pc_qhist;

/** Empty h (clears only the buckets in use, so that reuse is cheap). */
void pc_qhist_reset(pc_qhist *h);

/** The bucket of x, which must be >= 0 or +inf (never NaN). */
static inline uint32_t pc_qhist_bucket(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  uint32_t i = (uint32_t)(bits >> PC_QH_SHIFT);
  return i < PC_QH_INF ? i : PC_QH_INF;
}

/** Record that buckets lo..hi may have been counted into directly (h->count[...]++), for a
 * loop that keeps the range in registers; lo > hi records nothing, bucket 0 needs no record. */
static inline void pc_qhist_touch(pc_qhist *h, uint32_t lo, uint32_t hi) {
  lo = lo ? lo : 1;
  if (lo > hi)
    return;
  h->lo = lo < h->lo ? lo : h->lo;
  h->hi = hi > h->hi ? hi : h->hi;
}

/** Add x, which must be >= 0 or +inf (never NaN), n times. */
static inline void pc_qhist_add_n(pc_qhist *h, double x, uint64_t n) {
  uint32_t i = pc_qhist_bucket(x);
  h->count[i] += n;
  pc_qhist_touch(h, i, i);
}

/** Add x once (as pc_qhist_add_n). */
static inline void pc_qhist_add(pc_qhist *h, double x) {
  pc_qhist_add_n(h, x, 1);
}

/** Add n zeros at once. */
void pc_qhist_add_zeros(pc_qhist *h, uint64_t n);

/** dst += src. */
void pc_qhist_merge(pc_qhist *dst, const pc_qhist *src);

/** The quantiles of h at the n levels (each in (0, 1)): for level p, the exact quantile is the
 * value of rank ceil(p * N) among the N values (the smallest x with at least a fraction p of
 * the values <= x); the estimate is the lower edge of the bucket that holds it: never above
 * it, less than 1/16 of an octave below it, exact for integers below 32. 0 when that value is
 * in bucket 0 (and when h is empty), +inf in the inf bucket. Returns 0, or a negative pc_status
 * when GSL cannot allocate. */
int pc_qhist_quantiles(const pc_qhist *h, const double *levels, size_t n, double *out);

#endif
