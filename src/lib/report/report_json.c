/* JSON report (schema: docs/report-json.md): the run as one object, built with jansson and
 * written with keys in insertion order, doubles at full precision; every statistic of a compared
 * tensor, and with a baseline the gate's judgement. */
#include "envelope.h"
#include "json_util.h"
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <jansson.h>

#include <limits.h> /* LLONG_MAX */
#include <math.h>   /* sqrt */

#include <stdio.h>  /* snprintf, fputs */
#include <stdlib.h> /* free, strtoll, strtoull, strtod */
#include <string.h> /* strcmp, strpbrk, strstr */

static json_t *dtype_json(pc_dtype dt, bool is_complex) {
  char buf[40];
  if (dt == PC_DTYPE_NONE)
    return json_null();
  return json_string(pc_report_dtype_name(buf, sizeof buf, dt, is_complex));
}

static json_t *dims_json(int rank, const uint64_t *dims) {
  json_t *a = json_array();
  int rc = 0;
  for (int k = 0; k < rank; k++)
    rc |= json_array_append_new(a, pc_json_count(dims[k]));
  return pc_json_finish(a, rc);
}

/* An integer of sign and magnitude: a JSON integer where it fits in 64 bits, else a real. Only
 * int64 values are negative, so a negative magnitude is at most 2^63. */
static json_t *int_json(bool neg, uint64_t mag) {
  return neg ? json_integer(-(json_int_t)(mag - 1) - 1) : pc_json_count(mag);
}

/* One side (0: a, 1: b) of the worst pair: an integer exactly; a complex value the pair
 * [re, im]. */
static json_t *value_json(const pc_stats *s, int side, bool is_complex) {
  const double *v = side ? s->worst_b : s->worst_a;
  if (s->worst_is_int)
    return int_json(s->worst_int_neg[side], s->worst_int_mag[side]);
  if (!is_complex)
    return pc_json_real(v[0]);
  json_t *a = json_array();
  int rc = json_array_append_new(a, pc_json_real(v[0]));
  rc |= json_array_append_new(a, pc_json_real(v[1]));
  return pc_json_finish(a, rc);
}

static json_t *worst_json(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  uint64_t index[PC_MAX_RANK];
  if (!s->has_worst)
    return json_null();
  pc_report_worst_index(t, index);
  json_t *o = json_object();
  int rc = json_object_set_new(o, "index", dims_json(t->rank, index));
  rc |= json_object_set_new(o, "a", value_json(s, 0, t->is_complex));
  rc |= json_object_set_new(o, "b", value_json(s, 1, t->is_complex));
  rc |= json_object_set_new(o, "abs", pc_json_real(s->worst_abs));
  rc |= json_object_set_new(o, "rel", pc_json_real(s->worst_rel));
  rc |= json_object_set_new(o, "ulp", pc_json_count(s->worst_ulp));
  return pc_json_finish(o, rc);
}

/* Only the criteria that took part; max_mismatch_fraction always, since unset means 0. */
static json_t *tolerance_json(const pc_tol *tol) {
  json_t *o = json_object();
  int rc = 0;
  if (tol->set & PC_TOL_ATOL)
    rc |= json_object_set_new(o, "atol", pc_json_real(tol->atol));
  if (tol->set & PC_TOL_RTOL)
    rc |= json_object_set_new(o, "rtol", pc_json_real(tol->rtol));
  if (tol->set & PC_TOL_MAX_ULP)
    rc |= json_object_set_new(o, "max_ulp", pc_json_count(tol->max_ulp));
  double fraction = tol->set & PC_TOL_MAX_MISMATCH_FRACTION ? tol->max_mismatch_fraction : 0;
  rc |= json_object_set_new(o, "max_mismatch_fraction", pc_json_real(fraction));
  if (tol->set & PC_TOL_MAX_REL_RMS)
    rc |= json_object_set_new(o, "max_rel_rms", pc_json_real(tol->max_rel_rms));
  if (tol->set & PC_TOL_MAX_SCALE) {
    rc |= json_object_set_new(o, "max_scale", pc_json_real(tol->max_scale));
    rc |= json_object_set_new(o, "max_scale_sqrt_n", pc_json_real(tol->max_scale_sqrt_n));
    if (tol->scale_z > 0)
      rc |= json_object_set_new(o, "scale_z", pc_json_real(tol->scale_z));
  }
  if (tol->set & PC_TOL_TREND) {
    rc |= json_object_set_new(o, "trend_growth", pc_json_real(tol->trend_growth));
    rc |= json_object_set_new(o, "trend_growth_backward", pc_json_real(tol->trend_growth_backward));
    rc |= json_object_set_new(o, "trend_window", json_integer(tol->trend_window));
    rc |= json_object_set_new(o, "trend_crest", pc_json_real(tol->trend_crest));
  }
  if (tol->set & PC_TOL_NOISE)
    rc |= json_object_set_new(o, "noise_floor_u", pc_json_real(tol->noise_floor_u));
  return pc_json_finish(o, rc);
}

/* What the judge measured of the tensor's place in the run (pc_context). */
static json_t *context_json(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  double n = s->finite_terms ? (double)s->finite_terms : 1;
  json_t *o = json_object();
  int rc = json_object_set_new(o, "trend", pc_json_real(t->context.trend));
  rc |= json_object_set_new(o, "noise_scale", pc_json_real(t->context.noise_scale));
  rc |= json_object_set_new(o, "noise_level", json_boolean(t->context.noise_level));
  rc |= json_object_set_new(o, "rms_a", pc_json_real(sqrt(s->sum_sq_a / n)));
  rc |= json_object_set_new(o, "rms_b", pc_json_real(sqrt(s->sum_sq_b / n)));
  if (t->context.reference_limit > 0)
    rc |= json_object_set_new(o, "reference_limit", pc_json_real(t->context.reference_limit));
  return pc_json_finish(o, rc);
}

/* The buckets up to the last nonempty one: index k is bucket k of docs/metrics.md. */
static json_t *hist_json(const pc_stats *s) {
  json_t *a = json_array();
  int rc = 0, used = pc_report_hist_used(s);
  for (int k = 0; k < used; k++)
    rc |= json_array_append_new(a, pc_json_count(s->ulp_hist[k]));
  return pc_json_finish(a, rc);
}

/* {"p50": {"abs": .., "rel": .., "ulp": ..}, "p90": ...}, named after pc_quantile_levels. */
static json_t *quantiles_json(const pc_stats *s) {
  json_t *o = json_object();
  int rc = 0;
  for (int k = 0; k < PC_NQUANTILES; k++) {
    char name[16];
    snprintf(name, sizeof name, "p%g", 100 * pc_quantile_levels[k]);
    json_t *q = json_object();
    rc |= json_object_set_new(q, "abs", pc_json_real(s->q_abs[k]));
    rc |= json_object_set_new(q, "rel", pc_json_real(s->q_rel[k]));
    rc |= json_object_set_new(q, "ulp", pc_json_real(s->q_ulp[k]));
    rc |= json_object_set_new(o, name, q);
  }
  return pc_json_finish(o, rc);
}

/* Means, aggregates, the ULP histogram and (when the run has them) quantiles. */
static int put_distribution(json_t *o, const pc_stats *s) {
  pc_aggregates g = pc_stats_aggregates(s);
  int rc = json_object_set_new(o, "mean_abs", pc_json_real(g.mean_abs));
  rc |= json_object_set_new(o, "mean_rel", pc_json_real(g.mean_rel));
  rc |= json_object_set_new(o, "rms", pc_json_real(g.rms));
  rc |= json_object_set_new(o, "rel_rms", pc_json_real(g.rel_rms));
  rc |= json_object_set_new(o, "cosine", pc_json_real(g.cosine));
  rc |= json_object_set_new(o, "snr_db", pc_json_real(g.snr_db));
  rc |= json_object_set_new(o, "scale_error", pc_json_real(g.scale_error));
  rc |= json_object_set_new(o, "ulp_hist", hist_json(s));
  if (s->has_quantiles)
    rc |= json_object_set_new(o, "quantiles", quantiles_json(s));
  return rc;
}

/* The figures of a compared tensor; a tensor that was not compared has none (and no tolerance was
 * resolved for it, since that needs a compare dtype). */
static int put_stats(json_t *o, const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  int rc = json_object_set_new(o, "count", pc_json_count(s->count));
  rc |= json_object_set_new(o, "mismatches", pc_json_count(s->mismatches));
  rc |= json_object_set_new(o, "nan_mismatches", pc_json_count(s->nan_mismatches));
  rc |= json_object_set_new(o, "inf_mismatches", pc_json_count(s->inf_mismatches));
  rc |= json_object_set_new(o, "max_abs", pc_json_real(s->max_abs));
  rc |= json_object_set_new(o, "max_rel", pc_json_real(s->max_rel));
  rc |= json_object_set_new(o, "max_ulp", pc_json_count(s->max_ulp));
  rc |= json_object_set_new(o, "mean_ulp", pc_json_real(pc_stats_mean_ulp(s)));
  rc |= put_distribution(o, s);
  rc |= json_object_set_new(o, "worst", worst_json(t));
  rc |= json_object_set_new(o, "tolerance", tolerance_json(&t->tol));
  if (t->context.judged)
    rc |= json_object_set_new(o, "context", context_json(t));
  return rc;
}

static int put_identity(json_t *o, const pc_tensor *t) {
  int rc = json_object_set_new(o, "path", pc_json_string(t->path));
  if (!pc_json_valid_utf8(t->path)) /* the exact bytes beside the escaped spelling */
    rc |= json_object_set_new(o, "path_bytes", pc_json_hex(t->path));
  if (t->file)
    rc |= json_object_set_new(o, "file", pc_json_string(t->file));
  rc |= json_object_set_new(o, "verdict", json_string(pc_verdict_name(t->verdict)));
  rc |= json_object_set_new(o, "dtype_a", dtype_json(t->dtype_a, t->is_complex));
  rc |= json_object_set_new(o, "dtype_b", dtype_json(t->dtype_b, t->is_complex));
  rc |= json_object_set_new(o, "compare_dtype", dtype_json(t->compare, false));
  if (t->rank >= 0)
    rc |= json_object_set_new(o, "shape", dims_json(t->rank, t->dims));
  if (t->verdict == PC_VERDICT_SHAPE_MISMATCH && t->rank_b >= 0)
    rc |= json_object_set_new(o, "shape_b", dims_json(t->rank_b, t->dims_b));
  return rc;
}

static int put_remarks(json_t *o, const pc_tensor *t) {
  int rc = 0;
  if (t->stats.not_representable_a)
    rc |=
        json_object_set_new(o, "not_representable_a", pc_json_count(t->stats.not_representable_a));
  if (t->stats.not_representable_b)
    rc |=
        json_object_set_new(o, "not_representable_b", pc_json_count(t->stats.not_representable_b));
  if (t->message)
    rc |= json_object_set_new(o, "message", pc_json_string(t->message));
  if (t->note)
    rc |= json_object_set_new(o, "note", pc_json_string(t->note));
  if (t->did_you_mean)
    rc |= json_object_set_new(o, "did_you_mean", pc_json_string(t->did_you_mean));
  return rc;
}

/* {"criterion": "rel_rms", "value": 1.2e-05, "limit": 8.9e-06}; value and limit null for a
 * verdict that is its own reason (missing, shape or dtype mismatch, skipped, error). */
static json_t *reason_json(const char *criterion, const pc_reason *r) {
  json_t *o = json_object();
  int rc = json_object_set_new(o, "criterion", json_string(criterion));
  rc |= json_object_set_new(o, "value", r ? pc_json_real(r->value) : json_null());
  rc |= json_object_set_new(o, "limit", r ? pc_json_real(r->limit) : json_null());
  return pc_json_finish(o, rc);
}

/* A drift's criteria as the judge recorded them; any other verdict but a pass is its own. */
static json_t *reasons_json(const pc_tensor *t) {
  json_t *a = json_array();
  int rc = 0;
  bool judged = t->verdict == PC_VERDICT_DRIFT || t->verdict == PC_VERDICT_INDETERMINATE;
  if (!judged)
    rc |= json_array_append_new(a, reason_json(pc_verdict_name(t->verdict), NULL));
  for (size_t k = 0; judged && k < t->nreasons && k < PC_CRIT_COUNT_; k++)
    rc |= json_array_append_new(
        a, reason_json(pc_criterion_name(t->reasons[k].criterion), &t->reasons[k]));
  return pc_json_finish(a, rc);
}

/* {"kind": "scaled", "text": "scaled by 2.000", "structural": true, "value": 2, "statistic":
 * ..., "limit": ...}: what the difference looks like (pc_diagnosis). */
static json_t *diagnosis_json(const pc_diagnosis *d) {
  char text[160];
  json_t *o = json_object();
  int rc = json_object_set_new(o, "kind", json_string(pc_diagnosis_name(d->kind)));
  rc |= json_object_set_new(o, "text", pc_json_string(pc_diagnosis_text(d, text, sizeof text)));
  rc |= json_object_set_new(o, "structural", json_boolean(d->structural));
  rc |= json_object_set_new(o, "value", pc_json_real(d->value));
  rc |= json_object_set_new(o, "statistic", pc_json_real(d->statistic));
  rc |= json_object_set_new(o, "limit", pc_json_real(d->limit));
  if (d->kind == PC_DIAG_SHIFTED) /* which shift: the text says it, a program reads this */
    rc |= json_object_set_new(o, "axis", json_integer(d->axis));
  return pc_json_finish(o, rc);
}

/* {"top1_agreement": {"value": 0.998, "limit": 0.99, "pass": true}, ...}: the product metrics
 * the judge tested, by name; topk_overlap also has its "k". */
static json_t *metrics_json(const pc_tensor *t) {
  json_t *o = json_object();
  int rc = 0;
  for (int m = 0; m < PC_METRIC_COUNT_; m++) {
    const pc_metric_result *r = &t->metrics[m];
    if (!r->present)
      continue;
    json_t *one = json_object();
    int k = json_object_set_new(one, "value", pc_json_real(r->value));
    k |= json_object_set_new(one, "limit", pc_json_real(r->limit));
    k |= json_object_set_new(one, "pass", json_boolean(r->pass));
    if (m == PC_METRIC_TOPK_OVERLAP)
      k |= json_object_set_new(one, "k", pc_json_count(t->tol.metrics.topk));
    rc |= json_object_set_new(o, pc_metric_name((pc_metric)m), pc_json_finish(one, k));
  }
  return pc_json_finish(o, rc);
}

/* The judge's record of tensor i: its place in execution order, its root cause, its reasons
 * (docs/report-json.md, "A tensor"). */
static int put_judgement(json_t *o, const pc_run *run, size_t i) {
  const pc_tensor *t = pc_run_at(run, i);
  long root = pc_report_root(run, i);
  int rc = json_object_set_new(o, "execution_index", pc_json_count(pc_report_exec_index(run, i)));
  rc |= json_object_set_new(o, "caused_by",
                            root >= 0 ? pc_json_string(pc_run_at(run, root)->path) : json_null());
  if (t->verdict != PC_VERDICT_PASS)
    rc |= json_object_set_new(o, "reasons", reasons_json(t));
  if (t->diagnosis.kind != PC_DIAG_NONE)
    rc |= json_object_set_new(o, "diagnosis", diagnosis_json(&t->diagnosis));
  if (pc_report_has_metrics(t))
    rc |= json_object_set_new(o, "metrics", metrics_json(t));
  return rc;
}

/* The gate's judgement of one tensor, and what the baseline held for it. */
static json_t *tensor_gate_json(const pc_gate_tensor *g) {
  const pc_baseline_entry *e = &g->base;
  json_t *o = json_object();
  int rc = json_object_set_new(o, "change", json_string(pc_change_name(g->change)));
  rc |= json_object_set_new(o, "fails_gate", json_boolean(g->fails));
  if (g->approval) /* an approvals gate: its judgement in words, no baseline record */
    rc |= json_object_set_new(o, "approval", pc_json_string(g->approval));
  if (!g->in_baseline || g->approval)
    return pc_json_finish(o, rc);
  rc |= json_object_set_new(o, "verdict", json_string(pc_verdict_name(e->verdict)));
  if (!pc_report_has_stats(e->verdict))
    return pc_json_finish(o, rc);
  rc |= json_object_set_new(o, "compare_dtype", dtype_json(e->compare, false));
  rc |= json_object_set_new(o, "count", pc_json_count(e->count));
  rc |= json_object_set_new(o, "mismatches", pc_json_count(e->mismatches));
  rc |= json_object_set_new(o, "nonfinite_mismatches", pc_json_count(e->nonfinite));
  rc |= json_object_set_new(o, "max_ulp", pc_json_count(e->max_ulp));
  return pc_json_finish(o, rc);
}

/* One side's distance to the reference R (docs/metrics.md, "Three-way mode"). */
static json_t *ref_side_json(const pc_ref_side *r) {
  json_t *o = json_object();
  int rc = json_object_set_new(o, "max_abs", pc_json_real(r->max_abs));
  rc |= json_object_set_new(o, "max_rel", pc_json_real(r->max_rel));
  rc |= json_object_set_new(o, "rel_rms", pc_json_real(r->rel_rms));
  rc |= json_object_set_new(o, "max_ulp", pc_json_count(r->max_ulp));
  rc |= json_object_set_new(o, "mean_ulp", pc_json_real(r->mean_ulp));
  return pc_json_finish(o, rc);
}

static json_t *vs_reference_json(const pc_vs_reference *v) {
  json_t *o = json_object();
  int rc = json_object_set_new(o, "a", ref_side_json(&v->a));
  rc |= json_object_set_new(o, "b", ref_side_json(&v->b));
  rc |= json_object_set_new(o, "closer",
                            json_string(v->closer < 0   ? "a"
                                        : v->closer > 0 ? "b"
                                                        : "tie"));
  return pc_json_finish(o, rc);
}

/* The measured envelope the tensor was judged against (pc_envelope_fig, docs/envelope.md). */
static json_t *envelope_json(const pc_tensor *t) {
  const pc_envelope_fig *f = &t->envelope;
  const pc_stats *s = &t->stats;
  json_t *o = json_object();
  int rc = json_object_set_new(o, "members", pc_json_count(f->members));
  rc |= json_object_set_new(o, "sigma", pc_json_real(f->sigma));
  rc |= json_object_set_new(o, "max_member", pc_json_real(f->max_member));
  rc |= json_object_set_new(o, "floor", pc_json_real(f->floor));
  rc |= json_object_set_new(o, "dof", pc_json_real(f->dof));
  rc |= json_object_set_new(o, "factor", pc_json_real(f->factor));
  rc |= json_object_set_new(o, "ratio", pc_json_real(pc_envelope_rms_ratio(f, s)));
  if (f->has_scale) {
    rc |= json_object_set_new(o, "member_scale", pc_json_real(f->member_scale));
    rc |= json_object_set_new(o, "scale_floor", pc_json_real(f->scale_floor));
    rc |= json_object_set_new(o, "scale_factor", pc_json_real(f->scale_factor));
    rc |= json_object_set_new(o, "scale_ratio", pc_json_real(pc_envelope_scale_ratio(f, s)));
  }
  if (f->has_median) {
    rc |= json_object_set_new(o, "member_median", pc_json_real(f->member_median));
    rc |= json_object_set_new(o, "median_floor", pc_json_real(f->median_floor));
    rc |= json_object_set_new(o, "median_factor", pc_json_real(f->median_factor));
    rc |= json_object_set_new(o, "median_bound", pc_json_real(f->median_bound));
    rc |= json_object_set_new(o, "above_median", pc_json_count(s->env_above_median));
  }
  rc |= json_object_set_new(o, "elements", json_boolean(f->elements));
  if (f->elements) {
    rc |= json_object_set_new(o, "median_member", pc_json_real(f->median_member));
    rc |= json_object_set_new(o, "elem_floor", pc_json_real(f->elem_floor));
    rc |= json_object_set_new(o, "elem_factor", pc_json_real(f->elem_factor));
    rc |= json_object_set_new(o, "grid_u", pc_json_real(f->grid_u));
    rc |= json_object_set_new(o, "beyond", pc_json_count(s->env_beyond));
    rc |= json_object_set_new(o, "max_ratio", pc_json_real(s->env_max_ratio));
  }
  return pc_json_finish(o, rc);
}

static json_t *tensor_json(const pc_run *run, size_t i, const pc_gate_tensor *g) {
  const pc_tensor *t = pc_run_at(run, i);
  json_t *o = json_object();
  int rc = put_identity(o, t);
  rc |= put_judgement(o, run, i);
  if (pc_report_has_stats(t->verdict))
    rc |= put_stats(o, t);
  rc |= put_remarks(o, t);
  if (t->vs_reference.present)
    rc |= json_object_set_new(o, "vs_reference", vs_reference_json(&t->vs_reference));
  if (t->envelope.present && pc_report_has_stats(t->verdict))
    rc |= json_object_set_new(o, "envelope", envelope_json(t));
  if (g)
    rc |= json_object_set_new(o, "baseline", tensor_gate_json(g));
  return pc_json_finish(o, rc);
}

static json_t *first_divergence_json(const pc_run *run) {
  const pc_tensor *t = pc_report_first_divergence(run);
  return t ? pc_json_string(t->path) : json_null();
}

static json_t *summary_json(const pc_run *run) {
  json_t *o = json_object();
  int rc = json_object_set_new(o, "tensors", pc_json_count(run->ntensors));
  for (int v = 0; v < PC_VERDICT_COUNT_; v++)
    rc |= json_object_set_new(o, pc_verdict_name((pc_verdict)v), pc_json_count(run->by_verdict[v]));
  /* the tensors that fail the run: indeterminate ones it accepts are counted apart */
  rc |= json_object_set_new(o, "failures", pc_json_count(pc_report_failures(run)));
  rc |= json_object_set_new(o, "accept_indeterminate", json_boolean(run->accept_indeterminate));
  uint64_t roots = 0;
  for (size_t i = 0; i < run->ntensors; i++)
    roots += pc_report_is_root(run, i);
  rc |= json_object_set_new(o, "roots", pc_json_count(roots));
  return pc_json_finish(o, rc);
}

/* One element of the tensors array, with the separator before it (pc_report_row_fn). */
typedef struct tensor_rows {
  const pc_run *run;
  const pc_gate *gate;
} tensor_rows;

static int put_tensor(FILE *out, size_t i, void *ctx) {
  const tensor_rows *r = ctx;
  json_t *t = tensor_json(r->run, i, r->gate ? &r->gate->tensors[i] : NULL);
  fputs(i ? ",\n    " : "\n    ", out);
  int rc = t ? pc_json_put_nested(out, t, 4) : PC_ENOMEM;
  json_decref(t);
  return rc;
}

/* The tensors array, written one tensor at a time, each built, written and freed before the
 * next, on the options' threads in order (pc_report_put_ordered): the report of a run of 200,000
 * tensors never exists as one tree. The bytes are those jansson writes for the whole array at
 * that depth (two spaces a level). */
static int put_tensors(FILE *f, const pc_run *run, const pc_report_options *opts) {
  tensor_rows rows = {run, opts ? opts->gate : NULL};
  fputs(run->ntensors ? "[" : "[]", f);
  int rc = pc_report_put_ordered(f, run->ntensors, opts, put_tensor, &rows);
  if (run->ntensors)
    fputs("\n  ]", f);
  return rc;
}

static json_t *gate_json(const pc_gate *gate) {
  json_t *o = json_object();
  int rc = json_object_set_new(o, "file", pc_json_string(gate->path));
  if (gate->kind == PC_GATE_APPROVALS) /* a baseline's object predates the key */
    rc |= json_object_set_new(o, "kind", json_string(pc_report_gate_noun(gate)));
  rc |= json_object_set_new(o, "factor", pc_json_real(gate->factor));
  rc |= json_object_set_new(o, "verdict", json_string(pc_run_verdict_name(gate->verdict)));
  rc |= json_object_set_new(o, "fails_gate", pc_json_count(gate->failures));
  for (int c = 0; c < PC_CHANGE_COUNT_; c++)
    rc |= json_object_set_new(o, pc_change_name((pc_change)c), pc_json_count(gate->by_change[c]));
  rc |= json_object_set_new(o, "baseline_only", pc_json_count(gate->baseline_only));
  return pc_json_finish(o, rc);
}

/* The run's warnings, and the gate's when the baseline has another profile. */
static json_t *warnings_json(const pc_run *run, const pc_report_options *opts) {
  char text[PC_REASON_MAX];
  json_t *a = json_array();
  int rc = a ? 0 : -1;
  for (size_t i = 0; a && i < run->nwarnings; i++)
    rc |= json_array_append_new(a, pc_json_string(run->warnings[i]));
  const char *w =
      opts ? pc_gate_profile_warning(opts->gate, opts->profile, text, sizeof text) : NULL;
  if (w)
    rc |= json_array_append_new(a, pc_json_string(w));
  return pc_json_finish(a, rc);
}

/* An attribute's value: numbers and booleans as JSON's own, the rest as strings. */
static json_t *attr_json(const pc_attr *a) {
  if (a->kind == PC_ATTR_BOOL)
    return json_boolean(strcmp(a->value, "true") == 0);
  if (a->kind == PC_ATTR_NUMBER && !strpbrk(a->value, ".eE") && a->value[0] == '-')
    return json_integer(strtoll(a->value, NULL, 10));
  if (a->kind == PC_ATTR_NUMBER && !strpbrk(a->value, ".eE") &&
      strtoull(a->value, NULL, 10) <= (unsigned long long)LLONG_MAX)
    return json_integer((json_int_t)strtoull(a->value, NULL, 10));
  if (a->kind == PC_ATTR_NUMBER)
    return json_real(strtod(a->value, NULL));
  return pc_json_string(a->value);
}

static json_t *attrs_json(const pc_provenance *p) {
  json_t *o = json_object();
  int rc = o ? 0 : -1;
  for (size_t i = 0; o && i < p->n; i++) {
    json_t *key = pc_json_string(p->attrs[i].name); /* keys must be UTF-8 too */
    rc |= key ? json_object_set_new(o, json_string_value(key), attr_json(&p->attrs[i])) : -1;
    json_decref(key);
  }
  return pc_json_finish(o, rc);
}

/* [{"name": ..., "value": ...}, ...]: the caller's settings (docs/report-json.md). */
static json_t *settings_json(const pc_report_options *opts) {
  json_t *a = json_array();
  int rc = a ? 0 : -1;
  for (size_t i = 0; a && i < pc_report_nsettings(opts); i++) {
    json_t *s = json_object();
    rc |= s ? 0 : -1;
    rc |= json_object_set_new(s, "name", pc_json_string(opts->settings[i].name));
    rc |= json_object_set_new(s, "value", pc_json_string(opts->settings[i].value));
    rc |= json_array_append_new(a, s);
  }
  return pc_json_finish(a, rc);
}

/* {"a": {...}, "b": {...}, "differs": [names]} (docs/report-json.md, "Provenance"). */
static json_t *provenance_json(const pc_run *run) {
  pc_prov_row *rows;
  size_t n;
  if (pc_report_provenance(run, &rows, &n) < 0)
    return NULL;
  json_t *o = json_object(), *differs = json_array();
  int rc = o && differs ? 0 : -1;
  for (size_t i = 0; differs && i < n; i++)
    if (rows[i].differs)
      rc |= json_array_append_new(differs, pc_json_string(rows[i].name));
  free(rows);
  rc |= json_object_set_new(o, "a", attrs_json(&run->provenance[0]));
  rc |= json_object_set_new(o, "b", attrs_json(&run->provenance[1]));
  rc |= json_object_set_new(o, "differs", differs);
  return pc_json_finish(o, rc);
}

static json_t *run_json(const pc_run *run, const pc_report_options *opts) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  json_t *o = json_object();
  int rc = json_object_set_new(o, "version", json_integer(2));
  rc |= json_object_set_new(o, "a", pc_json_string(run->path_a));
  rc |= json_object_set_new(o, "b", pc_json_string(run->path_b));
  if (run->path_ref)
    rc |= json_object_set_new(o, "reference", pc_json_string(run->path_ref));
  rc |= json_object_set_new(o, "profile", pc_json_string(pc_report_profile(opts)));
  rc |= json_object_set_new(o, "settings", settings_json(opts));
  rc |= json_object_set_new(o, "provenance", provenance_json(run));
  rc |= json_object_set_new(o, "verdict", json_string(pc_run_verdict_name(run->verdict)));
  rc |= json_object_set_new(o, "first_divergence", first_divergence_json(run));
  rc |= json_object_set_new(o, "tensors", json_array()); /* put_tensors fills it in */
  rc |= json_object_set_new(o, "summary", summary_json(run));
  if (gate)
    rc |= json_object_set_new(o, "baseline", gate_json(gate));
  rc |= json_object_set_new(o, "warnings", warnings_json(run, opts));
  return pc_json_finish(o, rc);
}

int pc_report_json(const char *path, const pc_run *run, const pc_report_options *opts,
                   pc_error *err) {
  int rc = pc_report_check(run, opts, "pc_report_json", err);
  if (rc < 0 || !path)
    return rc < 0 ? rc : pc_error_set(err, PC_EUSAGE, "pc_report_json: a path is required");
  json_t *root = run_json(run, opts);
  char *text = root ? pc_json_dumps(root) : NULL;
  json_decref(root);
  /* The run without its tensors, split where the empty array stands: a top-level key, so the
   * only place this text can occur (a newline inside a string is written "\n"). */
  static const char marker[] = "\n  \"tensors\": []";
  char *at = text ? strstr(text, marker) : NULL;
  pc_report_file f;
  if (!at)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory building the JSON report");
  else if ((rc = pc_report_open(&f, path, err)) == PC_OK) {
    size_t head = (size_t)(at - text) + sizeof marker - 3; /* up to the array */
    fwrite(text, 1, head, f.f);
    bool oom = put_tensors(f.f, run, opts) < 0;
    f.failed = f.failed || oom; /* no partial report stays behind */
    fprintf(f.f, "%s\n", at + sizeof marker - 1);
    rc = pc_report_close(&f, "the JSON report", err);
    if (oom)
      rc = pc_error_set(err, PC_ENOMEM, "out of memory building the JSON report");
  }
  free(text);
  return rc;
}
