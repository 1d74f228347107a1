/* Figures derived from a tensor's pc_stats (docs/metrics.md, "Aggregate sums" and "Error
 * distribution"). */
#include <paritycheck/result.h>

#include <math.h> /* sqrt, log10, INFINITY */

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
