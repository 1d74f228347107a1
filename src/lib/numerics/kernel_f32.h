/* The vector part of the kernels that fold stored bytes in float32 lanes (kernel_f32.c): float32
 * judged in float32 or bfloat16 (pc_kernel_f32), and float16 judged in float16 (pc_kernel_f16),
 * whose values convert to float32 exactly; both in kernel.c. kernel_f32.c is compiled three times
 * from one source: for baseline x86-64, with AVX2 (pc_f32_run_avx2) and with AVX-512
 * (pc_f32_run_avx512), chosen at run time. All compute each lane with the same operations in the
 * same order, so the figures do not depend on the machine. Internal to the library. */
#ifndef PC_KERNEL_F32_H
#define PC_KERNEL_F32_H

#include "cpu.h" /* pc_f32_widest: which build this processor runs */
#include "kernel.h"
#include "numerics.h"

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* int64_t, uint32_t, uint64_t */
#include <string.h>  /* memcpy */

/* Lanes of the accumulators (lane l folds the pairs whose index is l modulo PC_F32_LANES), and
 * pairs of a group: the unit of the non-finite check. */
enum { PC_F32_LANES = 8, PC_F32_GROUP = 16 };

/* Local ULP buckets: float32, bfloat16 and float16 distances are below 2^32, so their quantile
 * bucket (qhist.h: exponent and 4 mantissa bits of the distance as a double) is one of 0 (distance
 * 0) and the 16 buckets of each octave [2^e, 2^(e+1)), e = 0..31. One copy per lane, so that runs
 * of equal distances (common: honest drift is a few ULPs) do not serialise the increments
 * through memory. */
enum { PC_F32_ULP_KEYS = 1 + 32 * 16, PC_F32_ULP_COPIES = PC_F32_LANES };

/* The key of ULP 1 (the double 1.0's top 16 bits) is local key 1. */
#define PC_F32_ULP_KEY_ONE 0x3FF0u

/* Everything the vector part accumulates over a block. Counts stay below 2^32 per copy as long
 * as one run covers fewer than 2^32 elements (pc_kernel_f32 splits larger blocks). */
typedef struct pc_f32_state {
  /* Settings: the stored dtype (half: float16, 2 bytes an element, judged in float16; else
   * float32), the compare dtype of float32 bytes, which sides count bfloat16 inexact values,
   * the tolerance (atol, rtol: -1 when unset; tol_ulp: -1 when unset) and the quantile
   * histograms (NULL: none). */
  bool half, bf16, a_bf16, b_bf16;
  double atol, rtol;
  int64_t tol_ulp;
  uint64_t base; /* row-major index of the block's first element */
  pc_qhist *h_abs, *h_rel;
  /* Per lane: sums, ULP sums, mismatch counts, maxima, and minima of the nonzero values. */
  double sabs[PC_F32_LANES], srel[PC_F32_LANES], ssa[PC_F32_LANES], ssb[PC_F32_LANES],
      sab[PC_F32_LANES], ssd[PC_F32_LANES], sad[PC_F32_LANES];
  double max_abs; /* over lanes: reduced at each chunk's end for the worst-pair check */
  double max_rel[PC_F32_LANES], min_abs[PC_F32_LANES], min_rel[PC_F32_LANES];
  uint32_t max_ulp[PC_F32_LANES];
  uint64_t ulp_sum[PC_F32_LANES], mism[PC_F32_LANES];
  /* Per lane: the pairs counted into bucket 0 of h_abs and h_rel (exact matches), kept apart
   * until pc_f32_finish adds them, so that runs of matches do not serialise the increments of
   * one count through memory. */
  uint64_t zero_abs[PC_F32_LANES], zero_rel[PC_F32_LANES];
  uint64_t count, inexact_a, inexact_b;
  /* The worst pair of the vector part (wcls -1: none yet), by pc_worse's rules. */
  int wcls;
  double wabs, wrel, wa, wb;
  uint64_t widx, wulp;
  /* The calling thread's local ULP buckets (kernel.c): PC_F32_ULP_COPIES rows, all zero
   * between runs, so that a block of a few thousand pairs neither clears nor reads 16 KiB of
   * counts (only the keys up to that of the largest distance, from max_ulp). */
  uint32_t (*ulp_keys)[PC_F32_ULP_KEYS];
} pc_f32_state;

/** Fold the groups of PC_F32_GROUP pairs of a and b (stored float32 or float16, native order)
 * from element `from` on, stopping before the first group that holds an inf or NaN on either side
 * or at the last whole group before n. Returns where it stopped (a multiple of PC_F32_GROUP past
 * `from`). The three builds reach the same state, bit for bit. */
size_t pc_f32_run_base(pc_f32_state *st, const unsigned char *a, const unsigned char *b,
                       size_t from, size_t n);
size_t pc_f32_run_avx2(pc_f32_state *st, const unsigned char *a, const unsigned char *b,
                       size_t from, size_t n);
size_t pc_f32_run_avx512(pc_f32_state *st, const unsigned char *a, const unsigned char *b,
                         size_t from, size_t n);

/* Pair i of float32 bytes a and b (native order, any alignment): values and bit patterns. */
static inline void pc_f32_load(const unsigned char *a, const unsigned char *b, size_t i, float *x,
                               float *y, uint32_t *ux, uint32_t *uy) {
  memcpy(x, a + 4 * i, sizeof *x);
  memcpy(y, b + 4 * i, sizeof *y);
  memcpy(ux, x, sizeof *ux);
  memcpy(uy, y, sizeof *uy);
}

/* A float16 pattern's sign moved to bit 31, magnitude kept: bits whose pc_ord32_bits is the
 * float16 ordinal (the magnitude, negated for a negative sign). */
static inline uint32_t pc_f16_ordbits(uint16_t h) {
  return (uint32_t)(h & 0x8000u) << 16 | (h & 0x7FFFu);
}

/* Pair i of stored bytes a and b (native order, any alignment), float16 when `half`, else
 * float32: values, and bits whose pc_ord32_bits is the stored dtype's ordinal. */
static inline void pc_pair_load(bool half, const unsigned char *a, const unsigned char *b, size_t i,
                                float *x, float *y, uint32_t *ux, uint32_t *uy) {
  if (!half) {
    pc_f32_load(a, b, i, x, y, ux, uy);
    return;
  }
  uint16_t ha, hb;
  memcpy(&ha, a + 2 * i, sizeof ha);
  memcpy(&hb, b + 2 * i, sizeof hb);
  *x = pc_f16_float(ha);
  *y = pc_f16_float(hb);
  *ux = pc_f16_ordbits(ha);
  *uy = pc_f16_ordbits(hb);
}

/* Positions on the ordered line of docs/metrics.md for finite float32 bit patterns, judged in
 * float32 or bfloat16; they agree with pc_dtype_ordinal (tests/unit/test_kernel.c checks it).
 * Signs of real data are random, so these avoid branches: with m = 0 or all ones from the
 * sign bit, (magnitude ^ m) - m is the magnitude or its negation. */
static inline int64_t pc_ord32_bits(uint32_t u) {
  uint64_t m = (uint64_t)0 - (u >> 31);
  return (int64_t)(((uint64_t)(u & INT32_MAX) ^ m) - m);
}

/* bfloat16 keeps the top 16 bits, rounded to nearest even: a single rounding, exact for
 * float32 values. A magnitude that carries into the exponent's all-ones pattern is inf, one
 * past the largest finite. */
static inline int64_t pc_ord_bf16_bits(uint32_t u) {
  uint32_t mag = u & INT32_MAX;
  uint64_t r = (mag + 0x7FFFu + ((mag >> 16) & 1u)) >> 16;
  uint64_t m = (uint64_t)0 - (u >> 31);
  return (int64_t)((r ^ m) - m);
}

static inline uint64_t pc_ord_distance(int64_t a, int64_t b) {
  uint64_t d = (uint64_t)a - (uint64_t)b, m = (uint64_t)0 - (uint64_t)(a < b);
  return (d ^ m) - m;
}

/* The ULP distance of two finite float32 bit patterns in the compare dtype (float32 or
 * bfloat16); of two float16 ones in float16 when given as pc_f16_ordbits and bf16 is false. */
static inline uint64_t pc_f32_ulp(uint32_t ux, uint32_t uy, bool bf16) {
  return bf16 ? pc_ord_distance(pc_ord_bf16_bits(ux), pc_ord_bf16_bits(uy))
              : pc_ord_distance(pc_ord32_bits(ux), pc_ord32_bits(uy));
}

#endif
