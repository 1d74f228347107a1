/* Structural evidence (evidence.h): the sums of pc_evidence over one block. The pairs' terms
 * are computed in vector lanes and summed as evidence_lanes.h defines (the shifted distances and
 * the slices' a^2 in lanes, every other sum exactly as one scalar loop in row-major order); this
 * file cuts a block into ranges of one slice group each, pads the block's ends for the vector
 * code, and merges blocks. */
#include "evidence.h"
#include "cpu.h" /* pc_f32_widest */
#include "evidence_lanes.h"
#include "numerics.h" /* pc_f16_float */

#include <math.h>   /* fmax, isfinite, INFINITY, NAN */
#include <string.h> /* memcpy, memset */

static void pc_evidence_reset(pc_evidence *e) {
  memset(e, 0, sizeof *e);
  e->min_a = e->min_b = INFINITY;
  e->max_a = e->max_b = -INFINITY;
  e->first_a = e->first_b = e->last_a = e->last_b = NAN;
}

/* Where the precision signature is counted: a tensor's first PC_SIGNATURE_SAMPLE elements
 * (evidence.h). The block's pairs below the returned index are in the sample. */
static size_t pc_signature_end(const pc_slicing *s, size_t n, bool signature) {
  uint64_t base = s ? s->base : 0;
  if (!signature || base >= PC_SIGNATURE_SAMPLE)
    return 0;
  return PC_SIGNATURE_SAMPLE - base < n ? (size_t)(PC_SIGNATURE_SAMPLE - base) : n;
}

/* One block to fold: its layout, values, length and the end of its signature sample. */
typedef struct pc_ev_block {
  pc_ev_layout layout;
  const unsigned char *a, *b;
  size_t n, sig_end;
} pc_ev_block;

typedef size_t (*pc_ev_fn)(pc_ev_run *, pc_ev_layout, const unsigned char *, const unsigned char *,
                           size_t, size_t, size_t);

/* The widest build of the vector part this machine runs (cpu.h). */
static pc_ev_fn pc_ev_runner(void) {
#ifdef PC_HAVE_AVX2
  static const pc_ev_fn build[] = {pc_f32_run_base_evidence, pc_f32_run_avx2_evidence,
                                   pc_f32_run_avx512_evidence};
  return build[pc_f32_widest()];
#else
  return pc_f32_run_base_evidence;
#endif
}

/* Value j of side p of the block, exactly, as a double. */
static double pc_ev_value(const pc_ev_block *k, const unsigned char *p, size_t j) {
  if (k->layout == PC_EV_HALF) {
    uint16_t h;
    memcpy(&h, p + 2 * j, sizeof h);
    return pc_f16_float(h);
  }
  if (k->layout == PC_EV_FLOAT) {
    float f;
    memcpy(&f, p + 4 * j, sizeof f);
    return f;
  }
  double d;
  memcpy(&d, p + 8 * j, sizeof d);
  return d;
}

/* Pairs i..i+cnt-1 (cnt <= PC_EV_MAX_STEP): the block's ends and what is left of a range, through
 * the vector code on a copy in doubles, padded with NaN where there is no pair or no
 * neighbour (a NaN pair is not finite, a NaN neighbour makes no shifted pair). */
static void pc_ev_edge(pc_ev_run *r, pc_ev_fn run, const pc_ev_block *k, size_t i, size_t cnt) {
  double pa[PC_EV_MAX_STEP + 2], pb[PC_EV_MAX_STEP + 2];
  for (size_t j = 0; j < PC_EV_MAX_STEP + 2; j++) {
    bool in = i + j >= 1 && i + j - 1 < k->n && j <= cnt + 1; /* a[i + j - 1] */
    pa[j] = in ? pc_ev_value(k, k->a, i + j - 1) : NAN;
    pb[j] = j >= 1 && j <= cnt ? pc_ev_value(k, k->b, i + j - 1) : NAN;
  }
  size_t sig_n = k->sig_end > i ? k->sig_end - i : 0;
  run(r, PC_EV_DOUBLE, (const unsigned char *)pa, (const unsigned char *)pb, 1, 1 + PC_EV_MAX_STEP,
      sig_n < cnt ? sig_n : cnt);
}

/* Pairs lo..hi-1, all in the run's slice group: the vector code where both neighbours are in
 * the block, the edges padded. */
static void pc_ev_range(pc_ev_run *r, pc_ev_fn run, const pc_ev_block *k, size_t lo, size_t hi) {
  size_t i = lo;
  if (i == 0) {
    pc_ev_edge(r, run, k, 0, 1);
    i = 1;
  }
  size_t to = hi < k->n - 1 ? hi : k->n - 1; /* a[to] must be readable */
  if (i < to) {
    size_t sig_n = k->sig_end > i ? k->sig_end - i : 0;
    i = run(r, k->layout, k->a, k->b, i, to, sig_n < to - i ? sig_n : to - i);
  }
  for (; i < hi; i += PC_EV_MAX_STEP)
    pc_ev_edge(r, run, k, i, hi - i < PC_EV_MAX_STEP ? hi - i : PC_EV_MAX_STEP);
}

/* The ends of a block: its first and last pairs when finite, else NaN. */
static void pc_ev_ends(pc_evidence *e, const pc_ev_block *k) {
  double a = pc_ev_value(k, k->a, 0), b = pc_ev_value(k, k->b, 0);
  bool ok = isfinite(a) && isfinite(b);
  e->first_a = ok ? a : NAN;
  e->first_b = ok ? b : NAN;
  a = pc_ev_value(k, k->a, k->n - 1);
  b = pc_ev_value(k, k->b, k->n - 1);
  ok = isfinite(a) && isfinite(b);
  e->last_a = ok ? a : NAN;
  e->last_b = ok ? b : NAN;
}

/* An extreme of the run (zeros as +0) as the scalar loop had it: where it is 0, the first zero
 * met, with its sign. */
static double pc_ev_extreme(double x, double first_zero) {
  return x == 0 ? first_zero : x;
}

/* A block's evidence into e (reset), one range per slice group. */
static void pc_ev_fold(pc_evidence *e, const pc_ev_block *k, const pc_slicing *s) {
  pc_ev_fn run = pc_ev_runner();
  pc_ev_run r = {e, -1, INFINITY, -INFINITY, INFINITY, -INFINITY, false, false, 0, 0};
  bool slices = s && s->stride && s->slices >= 2;
  pc_ev_ends(e, k);
  for (size_t lo = 0, hi; lo < k->n; lo = hi) {
    hi = k->n;
    if (slices) { /* group g holds slices k with k G / slices == g */
      uint64_t g = (s->base + lo) / s->stride * PC_SLICE_GROUPS / s->slices;
      uint64_t next = ((g + 1) * s->slices + PC_SLICE_GROUPS - 1) / PC_SLICE_GROUPS;
      uint64_t end = next * s->stride - s->base;
      hi = end < k->n ? (size_t)end : k->n;
      r.group = (int)g;
    }
    pc_ev_range(&r, run, k, lo, hi);
  }
  e->min_a = pc_ev_extreme(r.min_a, r.zero_a);
  e->max_a = pc_ev_extreme(r.max_a, r.zero_a);
  e->min_b = pc_ev_extreme(r.min_b, r.zero_b);
  e->max_b = pc_ev_extreme(r.max_b, r.zero_b);
  e->seen = true;
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

void pc_evidence_times(pc_evidence *e, uint64_t n, uint64_t base) {
  double dn = (double)n;
  /* The signature counts only the pairs of the run inside the sample (evidence.h). */
  uint64_t sig = base >= PC_SIGNATURE_SAMPLE      ? 0
                 : PC_SIGNATURE_SAMPLE - base < n ? PC_SIGNATURE_SAMPLE - base
                                                  : n;
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
    e->round_cand[k] *= sig;
    e->round_hit[k] *= sig;
  }
  /* n equal pairs hold n - 1 shifted pairs in each direction, each the one pair's difference. */
  if (isfinite(e->first_a) && isfinite(e->first_b) && n > 1)
    for (int k = 0; k < PC_NSHIFTS; k++) {
      double d = e->first_b - e->first_a;
      e->shift_pairs[k] = n - 1;
      e->shift_sq[k] = e->shift_base_sq[k] = d * d * (double)(n - 1);
    }
}

/* A block into s->ev, after the blocks already there. */
static void pc_evidence_add(pc_stats *s, const pc_ev_block *k, const pc_slicing *slicing) {
  if (k->n == 0)
    return;
  pc_evidence e;
  pc_evidence_reset(&e);
  pc_ev_fold(&e, k, slicing);
  pc_evidence_merge(&s->ev, &e);
}

void pc_evidence_add_f64(pc_stats *s, const double *a, const double *b, size_t n,
                         const pc_slicing *slicing, bool signature) {
  pc_ev_block k = {PC_EV_DOUBLE, (const unsigned char *)a, (const unsigned char *)b, n,
                   pc_signature_end(slicing, n, signature)};
  pc_evidence_add(s, &k, slicing);
}

void pc_evidence_add_bytes(pc_stats *s, const unsigned char *a, const unsigned char *b, size_t n,
                           const pc_slicing *slicing, bool half) {
  pc_ev_block k = {half ? PC_EV_HALF : PC_EV_FLOAT, a, b, n, pc_signature_end(slicing, n, !half)};
  pc_evidence_add(s, &k, slicing);
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
