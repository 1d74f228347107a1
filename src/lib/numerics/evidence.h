/* Structural evidence (pc_evidence, docs/tolerance-model.md "Structure"): sums over a block's
 * finite pairs that the judge tests against what rounding can produce. Gathered beside the
 * kernels' figures, block by block, and merged in block order like them. Internal to the
 * library. */
#ifndef PC_EVIDENCE_H
#define PC_EVIDENCE_H

#include <paritycheck/result.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/* Where a block lies along the tensor's leading axis: the row-major index of its first element,
 * the elements of one slice and the slices. stride 0 (or NULL): no slices are kept. */
typedef struct pc_slicing {
  uint64_t base, stride, slices;
} pc_slicing;

/** The slicing of a block of tensor t that starts at row-major index `base`: none below two
 * axes. */
pc_slicing pc_evidence_slicing(const pc_tensor *t, uint64_t base);

/* The precision signature (round_cand, round_hit) serves only the diagnosis of a failing
 * tensor (docs/tolerance-model.md, "Diagnosis"), so it is counted over a bounded sample: the
 * pairs of a tensor's first PC_SIGNATURE_SAMPLE elements in row-major order (every pair of a
 * tensor up to that size). */
#define PC_SIGNATURE_SAMPLE ((uint64_t)1 << 16)

/** Fold a block of n pairs of real values (doubles) into s->ev, after the blocks already in it.
 * signature: count the precision signature (a float32 compare dtype) over the pairs of the
 * sample; slicing (NULL: none, block at index 0) says where the block lies. */
void pc_evidence_add_f64(pc_stats *s, const double *a, const double *b, size_t n,
                         const pc_slicing *slicing, bool signature);

/** The same from stored bytes in the machine's order: float32 (half false, with the
 * signature) or float16 (half true, without). */
void pc_evidence_add_bytes(pc_stats *s, const unsigned char *a, const unsigned char *b, size_t n,
                           const pc_slicing *slicing, bool half);

/** dst += src, src holding pairs that follow dst's. */
void pc_evidence_merge(pc_evidence *dst, const pc_evidence *src);

/** e, the evidence of one pair, as that of n copies of it (a fill value's run from row-major
 * index `base`; its signature counted on the copies in the sample). */
void pc_evidence_times(pc_evidence *e, uint64_t n, uint64_t base);

#endif
