/* Each file's allowances in plain mode (judge_context.h; docs/tolerance-model.md, "The run's
 * trend" and "Noise-level tensors"): a tensor's trend and noise scale come from the tensors
 * before and beside it in its own file, never from another file. A tensor with an envelope takes
 * no part: it is judged on its own (judge_envelope.c). */
#include "judge_context.h"
#include "judge_order.h"
#include "reasons.h"
#include "structure.h"

#include "pc_internal.h"

#include <math.h>   /* fabs, fmax, fmin, isfinite, sqrt */
#include <stdlib.h> /* qsort */
#include <string.h> /* memset */

/* Neighbours on each side, in execution order, whose RMS(A) sets a tensor's noise scale: the
 * other parameters of its module (a conv's weight next to its bias) and the tensors that fed
 * it or took its output. */
enum { PC_NOISE_NEIGHBOURS = 2 };

/* A float tensor whose figures the run-level allowances may reinterpret. */
static bool pc_judgeable(const pc_tensor *t) {
  return pc_dtype_is_float(t->compare) && t->stats.finite_terms > 0 &&
         (t->verdict == PC_VERDICT_PASS || t->verdict == PC_VERDICT_DRIFT);
}

static double pc_rms(double sum_sq, uint64_t n) {
  return n ? sqrt(sum_sq / (double)n) : 0;
}

static int pc_cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The noise scale at position k: the median RMS(A) of the PC_NOISE_NEIGHBOURS nearest judgeable
 * tensors of nonzero RMS(A) on each side within the tensor's own file (the lower middle one of
 * an even count), 0 when there are none. A median, not the largest: neighbours may hold other
 * quantities of another scale (a sum of 4096 terms next to a softmax), and one such must not make
 * a small tensor pass for noise. Its own file only: a verdict depends on the file it is in, never
 * on which other files a run holds, their order or how processes share them (issue 36, item 5). */
static double pc_noise_scale(const pc_run *run, size_t k) {
  double rms[2 * PC_NOISE_NEIGHBOURS];
  size_t n = 0;
  const pc_tensor *self = pc_run_at(run, run->order[k]);
  for (int dir = -1; dir <= 1; dir += 2) {
    int found = 0;
    for (size_t j = k; found < PC_NOISE_NEIGHBOURS;) {
      if ((dir < 0 && j == 0) || (dir > 0 && j + 1 >= run->ntensors))
        break;
      j = dir < 0 ? j - 1 : j + 1;
      const pc_tensor *t = pc_run_at(run, run->order[j]);
      if (!pc_share_file(t, self))
        break;
      double r = pc_rms(t->stats.sum_sq_a, t->stats.finite_terms);
      if (!pc_judgeable(t) || !(r > 0))
        continue;
      found++;
      rms[n++] = r;
    }
  }
  qsort(rms, n, sizeof rms[0], pc_cmp_double);
  return n ? rms[(n - 1) / 2] : 0;
}

/* The largest of v over the trend's window. */
static double pc_trend_max(const pc_trend *tr, const double *v, unsigned window) {
  double m = 0;
  size_t from = tr->n - tr->start > window ? tr->n - window : tr->start;
  for (size_t i = from; i < tr->n; i++)
    m = fmax(m, v[i]);
  return m;
}

/* G for this tensor: gradients may grow more (docs/tolerance-model.md, "Backward"); 1 without a
 * trend. */
double pc_growth(const pc_tensor *t) {
  if (!(t->tol.set & PC_TOL_TREND))
    return 1;
  return fmax(pc_in_backward_group(t) ? t->tol.trend_growth_backward : t->tol.trend_growth, 1);
}

/* Relaxes the magnitude criteria by what the run explains: a noise-level tensor is judged
 * against its noise floor (they are waived), any other's rel_rms against G times the trend (the
 * backward G for gradients), and its element mismatches are forgiven when that allowance is above
 * the profile's rel_rms limit and the error is spread like noise: its largest element at most P
 * (trend_crest) times its RMS, where a zeroed channel or a stray write stands out; its scale error
 * against the forward G times the largest scale error upstream (trend_scale): a scale is
 * inherited from a scale upstream, not from noise, and does not grow the way a backward chain's
 * noise does (the backward G would hide a 1% scale in every gradient). nan and inf mismatches
 * are never explained. */
static void pc_relax(pc_tensor *t, double trend_scale) {
  const pc_tol *tol = &t->tol;
  pc_context *c = &t->context;
  if (pc_find_reason(t, PC_CRIT_NAN_MISMATCH) || pc_find_reason(t, PC_CRIT_INF_MISMATCH))
    return;
  if (c->noise_level) {
    pc_drop_element_reasons(t);
    return;
  }
  if (!(tol->set & PC_TOL_TREND) || c->trend <= 0)
    return;
  double allowed = pc_growth(t) * c->trend;
  double scale_allowed = tol->trend_growth * trend_scale;
  double rms_err = pc_rms(t->stats.sum_sq_diff, t->stats.finite_terms);
  for (size_t i = t->nreasons; i-- > 0;) {
    pc_reason *r = &t->reasons[i];
    if (r->criterion == PC_CRIT_MISMATCH_FRACTION) {
      if (tol->trend_crest > 0 && t->stats.max_abs <= tol->trend_crest * rms_err &&
          !((tol->set & PC_TOL_MAX_REL_RMS) && allowed <= tol->max_rel_rms))
        pc_drop_reason(t, i);
    } else if (r->criterion == PC_CRIT_REL_RMS || r->criterion == PC_CRIT_SCALE_ERROR) {
      r->limit = fmax(r->limit, r->criterion == PC_CRIT_REL_RMS ? allowed : scale_allowed);
      if (r->value <= r->limit)
        pc_drop_reason(t, i);
    }
  }
}

/* The tensor is rounding noise of a computation of scale S (the noise scale): its exact value
 * is (near) zero, so both sides hold only the rounding of a sum of K terms of scale S, within
 * nu u S, nu = max(noise_floor_u, sqrt(K)) in each side's own unit roundoff (K: the dataset's
 * reduction_length, at least PC_NOISE_TERMS: the noise may come from a reduction upstream, as a
 * BatchNorm's backward, rather than from the tensor's own). Such a tensor (a bias gradient that a
 * following normalisation makes exactly 0) has a rel_rms of order 1 between any two honest runs; it
 * is judged against S, not against its own RMS. A tensor whose A is above A's own rounding bound
 * holds a real value, however small beside its neighbours (a softmax over 1024 positions), and
 * is judged as any other. */
static bool pc_noise_level(const pc_tensor *t, double scale) {
  const pc_tol *tol = &t->tol;
  if (!(tol->set & PC_TOL_NOISE) || !(scale > 0))
    return false;
  double k = fmax((double)t->reduction_length, PC_NOISE_TERMS);
  double nu = fmax(tol->noise_floor_u, sqrt(k));
  double u_a = pc_dtype_unit_roundoff(t->dtype_a != PC_DTYPE_NONE ? t->dtype_a : t->compare);
  double u_a_judged = fmin(u_a > 0 ? u_a : tol->u, tol->u); /* A rounds at most at u */
  return pc_rms(t->stats.sum_sq_a, t->stats.finite_terms) <= nu * u_a_judged * scale &&
         pc_rms(t->stats.sum_sq_diff, t->stats.finite_terms) <= nu * tol->u * scale;
}

/* A noise-level tensor's exact value is (near) zero: both sides hold unrelated noise, so a factor,
 * shift or crossing between them is no evidence. B zero or constant, a NaN or an inf still is:
 * rounding noise is neither. */
static void pc_noise_structure(pc_tensor *t) {
  pc_diagnosis_kind k = t->diagnosis.kind;
  if (!t->diagnosis.structural || k == PC_DIAG_ZEROED || k == PC_DIAG_CONSTANT ||
      k == PC_DIAG_NAN_INJECTED || k == PC_DIAG_INF_INJECTED)
    return;
  memset(&t->diagnosis, 0, sizeof t->diagnosis);
  for (size_t i = t->nreasons; i-- > 0;)
    if (t->reasons[i].criterion == PC_CRIT_STRUCTURE)
      pc_drop_reason(t, i);
}

/* Where the trend restarts (pc_trend): a tensor of another file than the previous one, or the
 * first gradient after forward tensors. */
static bool pc_trend_restarts(const pc_run *run, size_t k) {
  if (k == 0)
    return true;
  const pc_tensor *t = pc_run_at(run, run->order[k]), *p = pc_run_at(run, run->order[k - 1]);
  return !pc_share_file(t, p) || (pc_in_backward_group(t) && !pc_in_backward_group(p));
}

void pc_judge_context(pc_run *run, size_t k, pc_trend *tr) {
  pc_tensor *t = pc_run_at(run, run->order[k]);
  pc_context *c = &t->context;
  if (pc_trend_restarts(run, k))
    tr->start = tr->n;
  if (!pc_judgeable(t))
    return;
  pc_aggregates g = pc_stats_aggregates(&t->stats);
  c->judged = true;
  if (t->envelope.present) /* measured on its own: nothing of the run takes part */
    return;
  bool trend = (t->tol.set & PC_TOL_TREND) != 0;
  c->trend = trend ? pc_trend_max(tr, tr->rel_rms, t->tol.trend_window) : 0;
  double trend_scale = trend ? pc_trend_max(tr, tr->scale, t->tol.trend_window) : 0;
  c->noise_scale = pc_noise_scale(run, k);
  c->noise_level = pc_noise_level(t, c->noise_scale);
  if (c->noise_level)
    pc_noise_structure(t);
  bool own_pass = t->nreasons == 0;
  pc_relax(t, trend_scale);
  t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
  if (own_pass && !c->noise_level && isfinite(g.rel_rms) && isfinite(g.scale_error)) {
    tr->scale[tr->n] = fabs(g.scale_error);
    tr->rel_rms[tr->n++] = g.rel_rms;
  }
}
