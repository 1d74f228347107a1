/* The judge (judge.h): one tensor against its tolerance (the criteria of docs/tolerance-model.md),
 * then the run's passes in execution order (judge_order.c): each file's allowances
 * (judge_context.c), what a reference or an envelope measured, and the cascade fold
 * (judge_cascade.c), which reads verdicts and never changes them. */
#include "judge.h"
#include "judge_cascade.h"
#include "judge_context.h"
#include "judge_envelope.h"
#include "judge_order.h"
#include "reasons.h"
#include "structure.h"
#include "tol_resolve.h"

#include "pc_internal.h"

#include <math.h>   /* fabs, isfinite, log2, sqrt */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memset */

static const char *const pc_criterion_names[PC_CRIT_METRIC_] = {
    "nan_mismatch", "inf_mismatch", "mismatch_fraction", "rel_rms",        "scale_error",
    "structure",    "envelope",     "envelope_elements", "envelope_scale", "envelope_median"};

const char *pc_criterion_name(pc_criterion c) {
  if ((unsigned)c >= PC_CRIT_COUNT_)
    return "unknown";
  return c < PC_CRIT_METRIC_ ? pc_criterion_names[c]
                             : pc_metric_name((pc_metric)(c - PC_CRIT_METRIC_));
}

bool pc_criterion_is_floor(pc_criterion c) {
  return c >= PC_CRIT_METRIC_ && c < PC_CRIT_COUNT_ &&
         pc_metric_is_floor((pc_metric)(c - PC_CRIT_METRIC_));
}

/* --- one tensor -------------------------------------------------------------------------- */

/* Elements first (nan/inf mismatches, then the mismatch fraction), then the tensor-level
 * criteria on the aggregate figures; written as !(value <= limit) so that NaN breaks. */
static void pc_judge_elements(pc_tensor *t) {
  const pc_stats *s = &t->stats;
  const pc_tol *tol = &t->tol;
  double allowed = (tol->set & PC_TOL_MAX_MISMATCH_FRACTION) ? tol->max_mismatch_fraction : 0;
  if (s->nan_mismatches)
    pc_add_reason(t, PC_CRIT_NAN_MISMATCH, (double)s->nan_mismatches, 0);
  if (s->inf_mismatches)
    pc_add_reason(t, PC_CRIT_INF_MISMATCH, (double)s->inf_mismatches, 0);
  /* count > 0 when there are mismatches: a tensor without elements has none. */
  double fraction = s->count ? (double)s->mismatches / (double)s->count : 0;
  if (s->mismatches && fraction > allowed)
    pc_add_reason(t, PC_CRIT_MISMATCH_FRACTION, fraction, allowed);
  if (s->finite_terms) {
    pc_aggregates g = pc_stats_aggregates(s);
    if ((tol->set & PC_TOL_MAX_REL_RMS) && !(g.rel_rms <= tol->max_rel_rms))
      pc_add_reason(t, PC_CRIT_REL_RMS, g.rel_rms, tol->max_rel_rms);
    double limit = pc_tol_scale_limit(tol, s->finite_terms, isfinite(g.rel_rms) ? g.rel_rms : 0);
    if ((tol->set & PC_TOL_MAX_SCALE) && !(fabs(g.scale_error) <= limit))
      pc_add_reason(t, PC_CRIT_SCALE_ERROR, fabs(g.scale_error), limit);
  }
}

/* The unit roundoff a tensor is judged at: the profile's (the coarser of the compare dtype and
 * its precision), else the compare dtype's. */
static double pc_judged_u(const pc_tensor *t) {
  return t->tol.u > 0 ? t->tol.u : pc_dtype_unit_roundoff(t->compare);
}

/* A signature rounding cannot produce fails whatever the magnitudes (structure.h). NaN and inf
 * mismatches have their own reasons already. */
static void pc_judge_structure(pc_tensor *t) {
  memset(&t->diagnosis, 0, sizeof t->diagnosis);
  if (!pc_dtype_is_float(t->compare) || t->is_complex)
    return;
  if (!pc_structure_find(t, pc_judged_u(t), &t->diagnosis))
    return;
  if (t->diagnosis.kind != PC_DIAG_NAN_INJECTED && t->diagnosis.kind != PC_DIAG_INF_INJECTED)
    pc_add_reason(t, PC_CRIT_STRUCTURE, t->diagnosis.statistic, t->diagnosis.limit);
}

/* Each configured metric against its limit: a floor must be reached, a ceiling kept; written so
 * that NaN breaks either. */
static void pc_judge_metrics(pc_tensor *t) {
  const pc_metric_tol *mt = &t->tol.metrics;
  for (int m = 0; m < PC_METRIC_COUNT_; m++) {
    pc_metric_result *r = &t->metrics[m];
    if (!((mt->set >> m) & 1u) || !r->present)
      continue;
    r->limit = mt->limit[m];
    r->pass = pc_metric_is_floor((pc_metric)m) ? r->value >= r->limit : r->value <= r->limit;
    if (!r->pass)
      pc_add_reason(t, (pc_criterion)(PC_CRIT_METRIC_ + m), r->value, r->limit);
  }
}

/* The element and tensor criteria, then the product metrics; with `elementwise: false` the
 * metrics alone. */
void pc_judge_tensor(pc_tensor *t) {
  const pc_tol *tol = &t->tol;
  t->nreasons = 0;
  t->caused_by = -1;
  if (t->verdict == PC_VERDICT_ERROR)
    return;
  if (!(tol->metrics.set && tol->metrics.elementwise_off)) {
    pc_judge_elements(t);
    pc_judge_structure(t);
  }
  pc_judge_metrics(t);
  t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
  if (t->envelope.present && !(tol->metrics.set && tol->metrics.elementwise_off))
    pc_judge_envelope(t);
}

/* A tensor no cause links yet. The write is skipped when it would leave the record as it was
 * (the comparator makes every tensor so): a large run's records live in a file (spill.h),
 * where a write to a page read since it was given back costs a page fault more. */
static void pc_uncaused(pc_tensor *t) {
  if (t->caused_by != -1)
    t->caused_by = -1;
}

/* A failing float tensor without a structure: indeterminate when B keeps no significant digit
 * (its rel_rms `allowance` reaches half the value's size), else drift with what the evidence
 * shows: a slice, a rounding grid, a small factor, else how many times the allowance the error
 * is (never "consistent with rounding": it is beyond what rounding was allowed).
 * `plain`: no reference measured the conditioning, which the diagnosis then suggests. */
static void pc_classify_failure(pc_tensor *t, double allowance, bool plain) {
  if (t->verdict != PC_VERDICT_DRIFT && t->verdict != PC_VERDICT_INDETERMINATE)
    return;
  if (!pc_dtype_is_float(t->compare) || t->is_complex || t->diagnosis.structural ||
      !t->stats.finite_terms)
    return;
  bool magnitude = false, product = false; /* a product metric's failure is the product's */
  for (size_t i = 0; i < t->nreasons; i++) {
    magnitude |= t->reasons[i].criterion < PC_CRIT_STRUCTURE;
    product |= t->reasons[i].criterion >= PC_CRIT_METRIC_;
  }
  double rel_rms = pc_stats_aggregates(&t->stats).rel_rms;
  if (magnitude && !product && allowance >= PC_INDETERMINATE_REL) {
    t->verdict = PC_VERDICT_INDETERMINATE;
    t->diagnosis =
        (pc_diagnosis){PC_DIAG_NO_DIGITS, false, 0, allowance, rel_rms, PC_INDETERMINATE_REL};
    return;
  }
  t->verdict = PC_VERDICT_DRIFT;
  t->diagnosis = pc_structure_noise(t);
  if (t->diagnosis.kind != PC_DIAG_NOISE)
    return;
  t->diagnosis.axis = plain;
  if (allowance > 0 && rel_rms > allowance)
    t->diagnosis =
        (pc_diagnosis){PC_DIAG_BEYOND, false, plain, rel_rms / allowance, rel_rms, allowance};
}

/* The rel_rms the profile allowed the tensor after the run's allowances: its rel_rms reason's
 * limit, else the profile's limit widened by the trend as pc_relax would; 0 without one. */
static double pc_plain_allowance(const pc_tensor *t) {
  for (size_t i = 0; i < t->nreasons; i++)
    if (t->reasons[i].criterion == PC_CRIT_REL_RMS)
      return t->reasons[i].limit;
  if (!(t->tol.set & PC_TOL_MAX_REL_RMS))
    return 0;
  return fmax(t->tol.max_rel_rms, pc_growth(t) * t->context.trend);
}

/* Plain mode: B keeps no significant digit only where the tensor's own allowance reaches half
 * the value's size: honest drift may then have taken every digit. Never because the observed
 * error is large: an error far beyond a small allowance is drift, however large. */
static void pc_classify_plain(pc_tensor *t) {
  if (!t->stats.finite_terms || t->envelope.present)
    return;
  pc_classify_failure(t, pc_plain_allowance(t), true);
}

/* A scale reason the profile kept (after the run's allowances) stands in three-way mode when
 * the greater part of the error lies along A (pc_scale_dominates): with plain's verdict, and
 * where it is a clean factor (pc_structure_noise reads "scaled by c") as drift, so diagnosed. */
static bool pc_scale_stands(pc_tensor *t) {
  if (!pc_find_reason(t, PC_CRIT_SCALE_ERROR))
    return false;
  pc_diagnosis d = pc_structure_noise(t);
  if (d.kind == PC_DIAG_SCALED) {
    t->verdict = PC_VERDICT_DRIFT;
    t->diagnosis = d;
    return true;
  }
  return pc_scale_dominates(t);
}

/* Three-way mode (docs/tolerance-model.md, "With a reference"): A's distance to R measures the
 * tensor's conditioning, kappa = rel_rms(R, A) / u_A; B's precision u then explains a distance
 * to R of m kappa u. m is the tensor's growth G when B's precision is coarser than A's (B's
 * rounding then dominates, and kappa u measures it). At A's precision, m also allows B an
 * algorithm of other accuracy than A's: a sum of K terms added one by one errs by about
 * sqrt(K) u, added pairwise by sqrt(log2 K) u, so m = sqrt(K / log2 K) G (K:
 * reduction_length, else PC_NOISE_TERMS): every step may amplify that difference as the
 * profile's growth allows (a recurrence compounds it over its time steps). A tensor that
 * fails only magnitude criteria, and whose B is within that of R, passes; one where kappa u or B's
 * distance to R reaches half the value's size is indeterminate: no digit of B is significant there.
 */
static void pc_relax_by_reference(pc_tensor *t) {
  const pc_vs_reference *v = &t->vs_reference;
  if ((t->verdict != PC_VERDICT_DRIFT && t->verdict != PC_VERDICT_INDETERMINATE) || !v->present ||
      !pc_dtype_is_float(t->compare) || pc_diagnosis_exact(t->diagnosis.kind) ||
      t->envelope.present) /* a measured envelope decides before a modelled allowance */
    return;
  double u_a = pc_dtype_unit_roundoff(t->dtype_a != PC_DTYPE_NONE ? t->dtype_a : t->compare);
  double u = pc_judged_u(t);
  if (!(u_a > 0) || !isfinite(v->a.rel_rms))
    return;
  double k = t->reduction_length > 2 ? (double)t->reduction_length : PC_NOISE_TERMS;
  double m = sqrt(k / log2(k)), g = pc_growth(t);
  m = u > u_a ? g : m * g;
  double kappa_u = (v->a.rel_rms / u_a) * u;
  /* kappa is measured on A's N elements, B's distance on B's: two RMS of N terms each, which
   * honest noise puts up to pc_rms_ratio_bound(N) apart (5x at N = 12, 1.2x at 1024). */
  t->context.reference_limit = m * kappa_u * pc_rms_ratio_bound(t->stats.ev.pairs);
  /* A structure stands as in plain mode: three-way never passes what plain catches. So does a
   * scale the profile caught that holds the greater part of the error (a BatchNorm or LayerNorm
   * eps, a missing correction), a clean factor or not: the reference measures how far honest
   * noise, spread over every direction, may take B, not that a factor is honest (issue 36: a
   * LayerNorm eps with 74 % of its error along A passed three-way). A scale that is a small
   * part of a large honest error (an ill-conditioned BatchNorm net's gradients under bf16: 8 %)
   * is that noise's projection on A, which R's allowance covers. */
  if (t->diagnosis.structural || pc_scale_stands(t))
    return;
  /* B within the allowance and keeping a digit passes. Beyond it, B is indeterminate only where
   * the allowance itself reaches half the value's size (honest drift may have taken every
   * digit); B's own distance to R never makes it so: an error far beyond a small allowance is
   * drift, however large. A B within a large allowance but without a digit is indeterminate:
   * the reference then says the tensor cannot be judged, never that it passes (a B doubled is
   * within a large allowance, not within half the value). */
  if (v->b.rel_rms <= t->context.reference_limit && v->b.rel_rms < PC_INDETERMINATE_REL) {
    pc_drop_element_reasons(t);
    t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
    if (t->verdict == PC_VERDICT_PASS)
      memset(&t->diagnosis, 0, sizeof t->diagnosis);
    return;
  }
  t->verdict = PC_VERDICT_DRIFT;
  pc_classify_failure(t, t->context.reference_limit, false);
}

void pc_run_accept_indeterminate(pc_run *run, bool accept) {
  run->accept_indeterminate = accept;
  pc_tally(run);
}

int pc_judge_reference(pc_run *run) {
  for (size_t i = 0; i < run->ntensors; i++) {
    pc_relax_by_reference(pc_run_at(run, i));
    pc_uncaused(pc_run_at(run, i));
  }
  int rc = pc_link_cascades(run);
  pc_tally(run);
  return rc;
}

int pc_judge_run(pc_run *run, pc_order_doubt *doubt) {
  pc_order_doubt ignored;
  if (!doubt)
    doubt = &ignored;
  *doubt = (pc_order_doubt){PC_ORDER_SURE, -1, -1};
  for (size_t i = 0; i < run->ntensors; i++)
    pc_uncaused(pc_run_at(run, i));
  size_t cap = run->ntensors ? run->ntensors : 1;
  pc_trend tr = {malloc(cap * sizeof *tr.rel_rms), malloc(cap * sizeof *tr.scale), 0, 0};
  int rc = tr.rel_rms && tr.scale ? pc_compute_order(run, doubt) : PC_ENOMEM;
  for (size_t k = 0; rc == PC_OK && k < run->ntensors; k++) {
    pc_judge_context(run, k, &tr);
    pc_classify_plain(pc_run_at(run, run->order[k]));
  }
  if (rc == PC_OK)
    rc = pc_link_cascades(run);
  free(tr.rel_rms);
  free(tr.scale);
  pc_tally(run);
  return rc;
}
