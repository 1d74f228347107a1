/* The vector part of the structural evidence (evidence.c drives it). evidence_lanes.c is compiled
 * three times, as kernel_f32.c is (CMakeLists.txt, pc_f32_variant): pc_f32_run_base_evidence for
 * baseline x86-64, pc_f32_run_avx2_evidence with AVX2 and F16C, pc_f32_run_avx512_evidence with
 * AVX-512; evidence.c picks the widest the processor runs. Every build reaches the same state bit
 * for bit. Internal to the library.
 *
 * How each double sum of pc_evidence is accumulated (docs/performance.md, "Evidence in lanes"),
 * and why: the judge tests thresholds on them, so every sum is defined independently of the
 * build, the number of threads and the machine, and each takes the cheapest accumulation that
 * keeps its definition.
 *  - The shifted distances Σ(b[i] - a[i -+ 1])^2 and the slices' Σa^2: lane sums. The judge
 *    compares them with a quarter of the unshifted distance and with half of A's energy, so
 *    their last bits decide nothing, and a chain in element order cost a third of the evidence
 *    (its terms carry more bits than the sum keeps, so no lane order gives the chain's bits).
 *    Each run of the vector code (a slice group's range of a block; the block's first pair and
 *    the pairs left at a range's end are runs of their own, padded to PC_EV_MAX_STEP pairs)
 *    keeps PC_EV_MAX_STEP double lanes, lane l taking, in order, the terms of the run's pairs
 *    whose offset from its first pair is l modulo 8; at the run's end the lanes are added
 *    pairwise, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), and the result to the block's
 *    sum. Runs are cut at multiples of 8 pairs in every build, so the bits do not depend on the
 *    build; the relative error is at most about (n/8 + 3) u for n terms, below a chain's.
 *  - Every other sum: the chain in row-major order (one chain of additions per sum and block),
 *    bit for bit. The vector code computes each pair's terms (squares, masks for the zero, flip
 *    and rest classes), branch-free, PC_W pairs a step, into a buffer of a chunk (PC_EV_CHUNK
 *    pairs), and each sum takes a chunk's terms in one of two ways:
 *    - summed in double lanes in any order, where that sum is exact (float32 and float16
 *      values: Σa, Σb, Σ|a|, Σ|b| and the (b - a)^2 sums). Every value is a multiple of the
 *      chunk's grain g, the unit in the last place of its smallest float32 exponent, and every
 *      (b - a)^2, rounded or not, of g^2; with gamma the smaller of that grain and the lowest
 *      set bit of the running sum, every partial sum in any order is a multiple of gamma of
 *      magnitude at most |s| + Σ|t|: below 2^53 gamma none rounds, so the chain and the lanes
 *      both give the exact sum;
 *    - else the chain itself: a scalar loop adds the chunk's terms in element order, one chain
 *      per sum, the chains interleaved. Doubles (float64 values and the padded block ends)
 *      always.
 * A term that is masked out is +0, and x + 0 = x for every sum here (none is ever -0), so adding
 * it is skipping it. Counts, maxima and the precision signature are exact in any order and stay
 * in vector lanes; minima and maxima of a and b treat -0 and +0 alike, and the first zero met
 * decides the sign where the extreme is 0, as the scalar loop's strict comparisons do. The rare
 * classes (zeroed, zeroed below float16's normal range, flipped) are added one pair at a time, in
 * order, in the steps that hold one. A chunk of float32 or float16 values whose pairs and both
 * neighbours are all finite (almost every chunk of real data: one integer test of the stored bits
 * a chunk) runs steps without the finiteness masks, whose lanes would all be ones: the same terms,
 * its pairs counted at once, and one row for the (b - a)^2 that two or three hold otherwise. */
#ifndef PC_EVIDENCE_LANES_H
#define PC_EVIDENCE_LANES_H

#include <paritycheck/result.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */

/* How a block's values are stored: doubles, float32 or float16 (native byte order). */
typedef enum { PC_EV_DOUBLE = 0, PC_EV_FLOAT, PC_EV_HALF } pc_ev_layout;

/* A run over part of one block: the block's partial evidence, whose sums and counts the run
 * continues, and what evidence.c finishes at the block's end. */
typedef struct pc_ev_run {
  pc_evidence *e;
  int group; /* the slice group of every pair of the range, or -1: no slices */
  /* Extremes of a and b over the finite pairs, -0 taken as +0, and the first zero of each side
   * (zero_seen: one was met), whose sign the extreme takes where it is 0. */
  double min_a, max_a, min_b, max_b;
  bool zero_a_seen, zero_b_seen;
  double zero_a, zero_b;
} pc_ev_run;

/** Folds pairs from..end-1 of a and b into r, in order, where end is the last multiple of
 * PC_EV_MAX_STEP past `from` at most `to`; returns end. Values from-1 and end of a must be
 * readable (they are the shifted neighbours), so from >= 1 and to < the block's length.
 * sig_n: the first sig_n pairs from `from` count the precision signature. */
size_t pc_f32_run_base_evidence(pc_ev_run *r, pc_ev_layout layout, const unsigned char *a,
                                const unsigned char *b, size_t from, size_t to, size_t sig_n);
size_t pc_f32_run_avx2_evidence(pc_ev_run *r, pc_ev_layout layout, const unsigned char *a,
                                const unsigned char *b, size_t from, size_t to, size_t sig_n);
size_t pc_f32_run_avx512_evidence(pc_ev_run *r, pc_ev_layout layout, const unsigned char *a,
                                  const unsigned char *b, size_t from, size_t to, size_t sig_n);

/* The widest step of any build: evidence.c's padded edges hold this many pairs. */
enum { PC_EV_MAX_STEP = 8 };

/* The smallest normal float16: below it a backend may flush or underflow a value to zero
 * (float16 subnormals, FTZ in float32 and bfloat16), so a zero there is no evidence. */
#define PC_ZERO_EVIDENCE_MIN 0x1p-14

#endif
