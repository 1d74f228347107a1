/* The judge against a measured envelope (judge_envelope.h). The law's factors were set when the
 * envelope was read (envelope.h); here they meet B's figures. */
#include "judge_envelope.h"
#include "envelope.h"
#include "reasons.h"
#include "structure.h"

#include "pc_internal.h"

#include <math.h>   /* fabs, fmax, sqrt */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* free */
#include <string.h> /* memset */

/* A's RMS as the envelope measured it, against this read's: equal to the rounding of a sum in
 * another order, unless the envelope was made for another A. Tested where every finite element
 * of A took part (no NaN or inf mismatch). */
static const double PC_SAME_A = 1e-6;

static double pc_rms_a(const pc_stats *s) {
  return s->finite_terms ? sqrt(s->sum_sq_a / (double)s->finite_terms) : 0;
}

static bool pc_envelope_fits(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  if (s->nan_mismatches || s->inf_mismatches || !s->finite_terms)
    return true;
  double rms = pc_rms_a(s), want = t->envelope.rms_a;
  return fabs(rms - want) <= PC_SAME_A * fmax(rms, want);
}

static void pc_envelope_mismatch(pc_tensor *t) {
  char why[PC_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof why,
           "the envelope was measured on another A: RMS(A) %.9g there, %.9g here "
           "(docs/envelope.md)",
           t->envelope.rms_a, pc_rms_a(&t->stats));
  t->verdict = PC_VERDICT_ERROR;
  t->nreasons = 0;
  memset(&t->diagnosis, 0, sizeof t->diagnosis);
  free(t->message);
  t->message = pc_strdup(why); /* NULL when out of memory: the verdict still says error */
}

/* The profile's magnitude criteria give way to the measurement; NaN and inf mismatches do not:
 * rounding of finite values stays finite. */
static void pc_drop_profile_magnitude(pc_tensor *t) {
  for (size_t i = t->nreasons; i-- > 0;) {
    pc_criterion c = t->reasons[i].criterion;
    if (c == PC_CRIT_MISMATCH_FRACTION || c == PC_CRIT_REL_RMS || c == PC_CRIT_SCALE_ERROR)
      pc_drop_reason(t, i);
  }
}

static void pc_drop_structure(pc_tensor *t) {
  for (size_t i = t->nreasons; i-- > 0;)
    if (t->reasons[i].criterion == PC_CRIT_STRUCTURE)
      pc_drop_reason(t, i);
  memset(&t->diagnosis, 0, sizeof t->diagnosis);
}

/* The median test (pc_stats.env_above_median): B's median element error, the value of rank
 * ceil(n/2) among the n finite pairs' |b - a|, exceeds median_bound exactly when more than
 * floor(n/2) pairs do. Its statistic is the fraction of pairs beyond the bound, its limit
 * floor(n/2) / n. */
static bool pc_median_beyond(const pc_tensor *t, double *fraction, double *limit) {
  const pc_stats *s = &t->stats;
  if (!t->envelope.has_median || !s->finite_terms)
    return false;
  *fraction = (double)s->env_above_median / (double)s->finite_terms;
  *limit = (double)(s->finite_terms / 2) / (double)s->finite_terms;
  return s->env_above_median > s->finite_terms / 2;
}

/* What a failure beyond the envelope looks like: elements far beyond their own bound are a
 * localized structure; otherwise a pattern the evidence proves (a slice, a rounding grid, a
 * small factor); a scale beyond the members' with the rest within the envelope is "scaled by
 * c", proven; else how many times the envelope B's error (or its scale) is, or, where only the
 * median test failed, how many elements lie beyond the members' median. */
static pc_diagnosis pc_envelope_diagnosis(const pc_tensor *t, double ratio, bool rms_beyond,
                                          bool scale_beyond) {
  const pc_envelope_fig *f = &t->envelope;
  if (f->elements && t->stats.env_beyond)
    return (pc_diagnosis){PC_DIAG_LOCALIZED,      true,          0, (double)t->stats.env_beyond,
                          t->stats.env_max_ratio, f->elem_factor};
  pc_diagnosis d = pc_structure_noise(t);
  if (d.kind != PC_DIAG_NOISE)
    return d;
  double c = pc_envelope_b_scale(&t->stats), c_ratio = pc_envelope_scale_ratio(f, &t->stats);
  if (scale_beyond && pc_envelope_residual_ratio(f, &t->stats) <= f->factor)
    return (pc_diagnosis){PC_DIAG_SCALED, true, 0, 1 + c, c_ratio, f->scale_factor};
  double frac, limit;
  if (!rms_beyond && !scale_beyond && pc_median_beyond(t, &frac, &limit))
    return (pc_diagnosis){PC_DIAG_BEYOND, false, 4, frac, f->median_bound, limit};
  if (rms_beyond || !scale_beyond)
    return (pc_diagnosis){PC_DIAG_BEYOND, false, 2, ratio, ratio, f->factor};
  return (pc_diagnosis){PC_DIAG_BEYOND, false, 3, c_ratio, c, f->scale_factor};
}

void pc_judge_envelope(pc_tensor *t) {
  const pc_envelope_fig *f = &t->envelope;
  if (!f->present || t->verdict == PC_VERDICT_ERROR)
    return;
  if (!pc_envelope_fits(t)) {
    pc_envelope_mismatch(t);
    return;
  }
  pc_drop_profile_magnitude(t);
  double ratio = pc_envelope_rms_ratio(f, &t->stats);
  bool beyond = !(ratio <= f->factor);
  if (beyond && t->stats.finite_terms)
    pc_add_reason(t, PC_CRIT_ENVELOPE, ratio, f->factor);
  if (f->elements && t->stats.env_beyond)
    pc_add_reason(t, PC_CRIT_ENVELOPE_ELEMENTS, t->stats.env_max_ratio, f->elem_factor);
  double c_ratio = pc_envelope_scale_ratio(f, &t->stats);
  bool scale_beyond = f->has_scale && !(c_ratio <= f->scale_factor);
  if (scale_beyond)
    pc_add_reason(t, PC_CRIT_ENVELOPE_SCALE, c_ratio, f->scale_factor);
  double frac, limit;
  bool median_beyond = pc_median_beyond(t, &frac, &limit);
  if (median_beyond)
    pc_add_reason(t, PC_CRIT_ENVELOPE_MEDIAN, frac, limit);
  bool rms_beyond = beyond && t->stats.finite_terms;
  bool outside =
      rms_beyond || (f->elements && t->stats.env_beyond) || scale_beyond || median_beyond;
  /* Within what honest reruns measured, a pattern short of exact is honest: the measured spread
   * is that large here (a factor, crossings, a permutation of a BatchNorm gradient). */
  if (t->diagnosis.structural && !pc_diagnosis_exact(t->diagnosis.kind) && !outside)
    pc_drop_structure(t);
  t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
  if (t->verdict == PC_VERDICT_PASS) {
    memset(&t->diagnosis, 0, sizeof t->diagnosis);
    return;
  }
  if (t->diagnosis.structural || t->diagnosis.kind == PC_DIAG_NAN_INJECTED ||
      t->diagnosis.kind == PC_DIAG_INF_INJECTED)
    return;
  t->diagnosis = pc_envelope_diagnosis(t, ratio, rms_beyond, scale_beyond);
  /* No digit where the measured spread itself reaches half the value's size: honest reruns
   * disagree that much, so B beyond them tells a bug from drift no better. */
  double rms_a = pc_rms_a(&t->stats);
  if (!t->diagnosis.structural && rms_a > 0 && f->floor >= PC_INDETERMINATE_REL * rms_a) {
    t->verdict = PC_VERDICT_INDETERMINATE;
    t->diagnosis = (pc_diagnosis){PC_DIAG_NO_DIGITS,   false, 2, f->floor / rms_a, f->floor / rms_a,
                                  PC_INDETERMINATE_REL};
  }
}
