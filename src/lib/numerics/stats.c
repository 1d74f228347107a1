/* Figures derived from a tensor's pc_stats (docs/metrics.md, "Aggregate sums" and "Error
 * distribution"). */
#include "evidence.h" /* pc_evidence_merge */
#include "kernel.h"   /* pc_hists_*, pc_stats_quantiles, pc_stats_merge */

#include <paritycheck/result.h>

#include <math.h>   /* sqrt, log10, ldexp, INFINITY */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* memcpy */

const double pc_quantile_levels[PC_NQUANTILES] = {0.5, 0.9, 0.99, 0.999};

static double pc_mean(double sum, uint64_t n) {
  return n ? sum / (double)n : 0;
}

static double pc_rel_rms(const pc_stats *s) {
  if (s->sum_sq_a == 0)
    return s->sum_sq_diff == 0 ? 0 : INFINITY;
  return sqrt(s->sum_sq_diff / s->sum_sq_a);
}

static double pc_cosine(const pc_stats *s) {
  if (s->sum_sq_a == 0 || s->sum_sq_b == 0)
    return s->sum_sq_a == s->sum_sq_b ? 1 : 0;
  return s->sum_ab / sqrt(s->sum_sq_a * s->sum_sq_b);
}

static double pc_snr_db(const pc_stats *s) {
  if (s->sum_sq_diff == 0)
    return INFINITY;
  if (s->sum_sq_a == 0)
    return -INFINITY;
  return 10 * log10(s->sum_sq_a / s->sum_sq_diff);
}

static double pc_scale_error(const pc_stats *s) {
  if (s->sum_sq_a == 0)
    return s->sum_sq_b == 0 ? 0 : INFINITY;
  /* Σab/Σa² − 1 would cancel: honest drift puts the ratio within 1e-8 of 1. */
  return s->sum_a_diff / s->sum_sq_a;
}

pc_aggregates pc_stats_aggregates(const pc_stats *s) {
  pc_aggregates g;
  g.mean_abs = pc_mean(s->sum_abs, s->ulp_terms);
  g.mean_rel = pc_mean(s->sum_rel, s->ulp_terms);
  g.rms = sqrt(pc_mean(s->sum_sq_diff, s->finite_terms));
  g.rel_rms = pc_rel_rms(s);
  g.cosine = pc_cosine(s);
  g.snr_db = pc_snr_db(s);
  g.scale_error = pc_scale_error(s);
  return g;
}

double pc_stats_mean_ulp(const pc_stats *s) {
  if (s->ulp_terms == 0)
    return 0;
  return (ldexp((double)s->ulp_sum_hi, 64) + (double)s->ulp_sum_lo) / (double)s->ulp_terms;
}

/* True when src's worst element should replace dst's: a higher class, or the same class with a
 * larger abs (non-finite: any), ties to the lower index. */
static bool pc_merge_worse(const pc_stats *dst, const pc_stats *src) {
  if (!src->has_worst)
    return false;
  if (!dst->has_worst || src->worst_class != dst->worst_class)
    return !dst->has_worst || src->worst_class > dst->worst_class;
  if (src->worst_class != PC_CLASS_NONFINITE && src->worst_abs != dst->worst_abs)
    return src->worst_abs > dst->worst_abs;
  return src->worst_index < dst->worst_index;
}

int pc_hists_new(pc_qhist *h[PC_NHISTS]) {
  for (int i = 0; i < PC_NHISTS; i++)
    h[i] = NULL;
  for (int i = 0; i < PC_NHISTS; i++) {
    h[i] = calloc(1, sizeof *h[i]);
    if (!h[i])
      return PC_ENOMEM;
    pc_qhist_reset(h[i]);
  }
  return PC_OK;
}

void pc_hists_free(pc_qhist *h[PC_NHISTS]) {
  for (int i = 0; i < PC_NHISTS; i++)
    free(h[i]);
}

void pc_stats_quantiles(pc_stats *s, pc_qhist *const h[PC_NHISTS]) {
  double *q[PC_NHISTS] = {s->q_abs, s->q_rel, s->q_ulp};
  bool ok = true;
  for (int i = 0; i < PC_NHISTS && ok; i++)
    ok = pc_qhist_quantiles(h[i], pc_quantile_levels, PC_NQUANTILES, q[i]) == PC_OK;
  s->has_quantiles = ok;
}

void pc_stats_merge(pc_stats *dst, const pc_stats *src) {
  dst->count += src->count;
  dst->mismatches += src->mismatches;
  dst->nan_mismatches += src->nan_mismatches;
  dst->inf_mismatches += src->inf_mismatches;
  dst->not_representable_a += src->not_representable_a;
  dst->not_representable_b += src->not_representable_b;
  dst->max_abs = src->max_abs > dst->max_abs ? src->max_abs : dst->max_abs;
  dst->max_rel = src->max_rel > dst->max_rel ? src->max_rel : dst->max_rel;
  dst->max_ulp = src->max_ulp > dst->max_ulp ? src->max_ulp : dst->max_ulp;
  dst->ulp_sum_lo += src->ulp_sum_lo;
  dst->ulp_sum_hi += src->ulp_sum_hi + (dst->ulp_sum_lo < src->ulp_sum_lo);
  dst->ulp_terms += src->ulp_terms;
  dst->finite_terms += src->finite_terms;
  dst->sum_sq_a += src->sum_sq_a;
  dst->sum_sq_b += src->sum_sq_b;
  dst->sum_ab += src->sum_ab;
  dst->sum_sq_diff += src->sum_sq_diff;
  dst->env_beyond += src->env_beyond;
  dst->env_above_median += src->env_above_median;
  dst->env_max_ratio =
      src->env_max_ratio > dst->env_max_ratio ? src->env_max_ratio : dst->env_max_ratio;
  dst->sum_a_diff += src->sum_a_diff;
  dst->sum_abs += src->sum_abs;
  dst->sum_rel += src->sum_rel;
  for (int i = 0; i < PC_ULP_BUCKETS; i++)
    dst->ulp_hist[i] += src->ulp_hist[i];
  pc_evidence_merge(&dst->ev, &src->ev);
  if (pc_merge_worse(dst, src)) {
    dst->has_worst = true;
    dst->worst_class = src->worst_class;
    dst->worst_index = src->worst_index;
    memcpy(dst->worst_a, src->worst_a, sizeof dst->worst_a);
    memcpy(dst->worst_b, src->worst_b, sizeof dst->worst_b);
    dst->worst_is_int = src->worst_is_int;
    memcpy(dst->worst_int_neg, src->worst_int_neg, sizeof dst->worst_int_neg);
    memcpy(dst->worst_int_mag, src->worst_int_mag, sizeof dst->worst_int_mag);
    dst->worst_abs = src->worst_abs;
    dst->worst_rel = src->worst_rel;
    dst->worst_ulp = src->worst_ulp;
  }
}
