/* Element kernels: fold one block of value pairs into a tensor's pc_stats, exactly as
 * docs/metrics.md defines each figure. Internal to the library. Results do not depend on how
 * a tensor is cut into blocks, as long as blocks arrive in row-major order. */
#ifndef PC_KERNEL_H
#define PC_KERNEL_H

#include "qhist.h"

#include <paritycheck/result.h>

#include <stddef.h> /* size_t */
#include <stdint.h> /* int64_t, uint64_t */

/* The element test (docs/metrics.md, "Tolerance"), the one definition every kernel build uses
 * (the scalar fold, the float32 lane fold and its vector build): a pair passes when it is
 * equal, or |b - a| <= atol, or |b - a| <= rtol |a|, or ulp_ok (its ULP distance within
 * max_ulp, when that is set). An unset atol or rtol is -1, which no abs >= 0 meets. Written with
 * | rather than || so that scalar loops stay branch-free and vectors get lane masks; the
 * operands may be scalars or GCC vectors. Non-finite pairs are the caller's (they never pass
 * unless equal). */
#define PC_ELEMENT_PASSES(equal, abs, abs_a, atol, rtol, ulp_ok)                                   \
  ((equal) | ((abs) <= (atol)) | ((abs) <= (rtol) * (abs_a)) | (ulp_ok))

/* Ranks of an element for the choice of the worst one (docs/metrics.md, "worst"). */
enum { PC_CLASS_PASS = 0, PC_CLASS_MISMATCH = 1, PC_CLASS_NONFINITE = 2 };

enum { PC_HIST_ABS = 0, PC_HIST_REL = 1, PC_HIST_ULP = 2, PC_NHISTS = 3 };

typedef struct pc_kernel_args {
  pc_stats *stats;
  pc_qhist **hist; /* PC_NHISTS histograms of abs, rel and ulp for the quantiles, or NULL */
  const pc_tol *tol;
  pc_dtype compare; /* the compare dtype (component dtype for complex) */
  uint64_t base;    /* row-major index of the block's first element */
  size_t n;         /* elements in the block */
} pc_kernel_args;

/** Allocate PC_NHISTS empty quantile histograms into h; PC_ENOMEM when one cannot be (those
 * allocated stay in h for pc_hists_free, the others are NULL). */
int pc_hists_new(pc_qhist *h[PC_NHISTS]);

/** Free what pc_hists_new allocated (NULL entries are skipped). */
void pc_hists_free(pc_qhist *h[PC_NHISTS]);

/** s's quantiles of abs, rel and ulp at pc_quantile_levels from the histograms h, and
 * s->has_quantiles: false when one could not be computed. */
void pc_stats_quantiles(pc_stats *s, pc_qhist *const h[PC_NHISTS]);

/** dst += src, where src holds the elements that follow dst's in row-major order. Exact for
 * counts, maxima, the ulp sum and the worst element; double sums add in this order. */
void pc_stats_merge(pc_stats *dst, const pc_stats *src);

/** Fold a block whose stored bytes are identical on both sides (so every pair is equal): only
 * the aggregate sums need the values. */
void pc_kernel_identical(const pc_kernel_args *k, const double *a);

/** float32 stored on both sides, compared in float32 or bfloat16, straight from the stored bytes
 * (native byte order, 4 bytes an element): no decoding pass. Same figures as pc_kernel_float,
 * plus the not-representable counts of the sides whose logical dtype is bfloat16 (a_bf16,
 * b_bf16), as pc_kernel_unrepresentable would count them. */
void pc_kernel_f32(const pc_kernel_args *k, const unsigned char *a, const unsigned char *b,
                   bool a_bf16, bool b_bf16);

/** float16 stored on both sides (native byte order, 2 bytes an element), compared in float16,
 * straight from the stored bytes: the figures of pc_kernel_float on the decoded values. */
void pc_kernel_f16(const pc_kernel_args *k, const unsigned char *a, const unsigned char *b);

/** Real floats on both sides. */
void pc_kernel_float(const pc_kernel_args *k, const double *a, const double *b);

/** Real values where either side may be integers: for each side exactly one of `vals` (floats)
 * and `ints` is non-NULL; `u64` says the ints hold uint64 bit for bit. Compared as floats. */
void pc_kernel_mixed(const pc_kernel_args *k, const double *a_vals, const int64_t *a_ints,
                     bool a_u64, const double *b_vals, const int64_t *b_ints, bool b_u64);

/** Integers on both sides: exact comparison. */
void pc_kernel_int(const pc_kernel_args *k, const int64_t *a, bool a_u64, const int64_t *b,
                   bool b_u64);

/** Complex numbers, interleaved (re, im) on both sides. */
void pc_kernel_complex(const pc_kernel_args *k, const double *a, const double *b);

/** How many of the n values are not exactly representable in float dtype `dt`. */
uint64_t pc_kernel_unrepresentable(const double *v, size_t n, pc_dtype dt);

/* Running magnitude of one tensor: max |v| and the sum of v^2 over finite elements. */
typedef struct pc_magnitude {
  double max_abs;
  double sum_squares;
  uint64_t count;
} pc_magnitude;

/** Fold n elements: floats from `vals` (complex: two doubles an element, re and im, measured
 * by their modulus; is_complex), or, when vals is NULL, integers from `ints` (`u64`: uint64 bit for
 * bit). */
void pc_kernel_magnitude(pc_magnitude *m, bool is_complex, const double *vals, const int64_t *ints,
                         bool u64, size_t n);

#endif
