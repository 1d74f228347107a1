/* A row's cells as text (report_common.h): dtypes, shapes, figures, reasons, metrics,
 * provenance, the gate's columns and three-way mode's, at reading or round-trip precision. */
#include "report_common.h"

#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* isnan */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* snprintf, vsnprintf, fprintf */
#include <stdlib.h>   /* malloc */
#include <string.h>   /* strcmp, strlen */

/* Significant digits of the figures in tables, and the most a double ever needs. */
enum { READING_DIGITS = 3, ROUND_TRIP_DIGITS = 17 };

const char *pc_report_dtype_name(char *buf, size_t size, pc_dtype dt, bool is_complex) {
  const char *name = pc_dtype_name(dt);
  /* numpy's names count the bits of both components; bfloat16 and float8 have none. */
  if (is_complex && dt == PC_DTYPE_FLOAT64)
    name = "complex128";
  else if (is_complex && dt == PC_DTYPE_FLOAT32)
    name = "complex64";
  else if (is_complex && dt == PC_DTYPE_FLOAT16)
    name = "complex32";
  else if (is_complex && dt != PC_DTYPE_NONE) {
    snprintf(buf, size, "complex_%s", name);
    return buf;
  }
  snprintf(buf, size, "%s", name);
  return buf;
}

void pc_report_dtypes(char *buf, size_t size, const pc_tensor *t) {
  char a[40], b[40];
  const char *na = t->dtype_a == PC_DTYPE_NONE
                       ? "-"
                       : pc_report_dtype_name(a, sizeof a, t->dtype_a, t->is_complex);
  const char *nb = t->dtype_b == PC_DTYPE_NONE
                       ? "-"
                       : pc_report_dtype_name(b, sizeof b, t->dtype_b, t->is_complex);
  if (strcmp(na, nb) == 0)
    snprintf(buf, size, "%s", na);
  else
    snprintf(buf, size, "%s/%s", na, nb);
}

const char *pc_report_dims(char buf[PC_DIMS_TEXT_MAX], int rank, const uint64_t *dims) {
  if (rank < 0)
    return "-";
  size_t n = (size_t)snprintf(buf, PC_DIMS_TEXT_MAX, "[");
  for (int k = 0; k < rank; k++)
    n += (size_t)snprintf(buf + n, PC_DIMS_TEXT_MAX - n, "%s%" PRIu64, k ? "," : "", dims[k]);
  snprintf(buf + n, PC_DIMS_TEXT_MAX - n, "]");
  return buf;
}

void pc_report_diagnosis(char *buf, size_t size, const pc_tensor *t) {
  buf[0] = '\0';
  if (t->diagnosis.kind != PC_DIAG_NONE)
    pc_diagnosis_text(&t->diagnosis, buf, size);
}

/* Row-major: the last dimension varies fastest. A zero dimension means no element, hence no worst;
 * the guard only keeps a malformed run from dividing by zero. */
void pc_report_worst_index(const pc_tensor *t, uint64_t index[PC_MAX_RANK]) {
  uint64_t flat = t->stats.worst_index;
  for (int k = t->rank - 1; k >= 0; k--) {
    uint64_t d = t->dims[k];
    index[k] = d ? flat % d : 0;
    flat = d ? flat / d : 0;
  }
}

/* ---- words ---- */

static const char *plural(uint64_t n) {
  return n == 1 ? "" : "s";
}

void pc_report_put_tally(FILE *out, const pc_run *run) {
  size_t fails = pc_report_failures(run), accepted = pc_report_accepted_count(run);
  fprintf(out, "%zu tensor%s: %zu pass", run->ntensors, plural(run->ntensors),
          run->by_verdict[PC_VERDICT_PASS]);
  if (fails) {
    const char *sep = " (";
    fprintf(out, ", %zu fail", fails);
    for (int v = 0; v < PC_VERDICT_COUNT_; v++) {
      if (!pc_report_counts(run, (pc_verdict)v) || !run->by_verdict[v])
        continue;
      fprintf(out, "%s%zu %s", sep, run->by_verdict[v], pc_verdict_name((pc_verdict)v));
      sep = ", ";
    }
    fputc(')', out);
  }
  if (accepted)
    fprintf(out, ", %zu indeterminate accepted", accepted);
  if (run->by_verdict[PC_VERDICT_ERROR])
    fprintf(out, ", %zu error", run->by_verdict[PC_VERDICT_ERROR]);
  if (run->by_verdict[PC_VERDICT_SKIPPED])
    fprintf(out, ", %zu skipped", run->by_verdict[PC_VERDICT_SKIPPED]);
}

/* Appends to buf at *n, never past size. */
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t size, size_t *n, const char *fmt, ...) {
  if (*n >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, size - *n, fmt, ap);
  va_end(ap);
  if (k > 0)
    *n += (size_t)k;
}

/* How a failing value stands to its limit. The structure criterion's statistic fails on either
 * side, by the test behind it (a scale test's p-value below its limit, a zeroed energy above
 * its own: pc_diagnosis), so its sign is read off the two numbers. */
static const char *reason_sign(const pc_reason *r) {
  if (r->criterion == PC_CRIT_STRUCTURE)
    return r->value < r->limit ? "<" : ">";
  return pc_criterion_is_floor(r->criterion) ? "<" : ">";
}

/* "rel_rms 1.2e-05 > limit 8.9e-06": the criterion, the tensor's value and the limit the judge
 * applied; counts (nan and inf mismatches) as integers, and the mismatch fraction with the
 * count it comes from. */
static void append_reason(char *buf, size_t size, size_t *n, const pc_reason *r, const pc_stats *s,
                          bool full) {
  int digits = full ? ROUND_TRIP_DIGITS : READING_DIGITS;
  append(buf, size, n, "%s ", pc_criterion_name(r->criterion));
  if (r->criterion == PC_CRIT_NAN_MISMATCH || r->criterion == PC_CRIT_INF_MISMATCH)
    append(buf, size, n, "%.0f", r->value);
  else
    append(buf, size, n, "%.*g", digits, r->value);
  append(buf, size, n, " %s limit %.*g", reason_sign(r), digits, r->limit);
  if (r->criterion == PC_CRIT_MISMATCH_FRACTION)
    append(buf, size, n, " (%" PRIu64 " of %" PRIu64 " element%s)", s->mismatches, s->count,
           plural(s->count));
}

void pc_report_reasons(char *buf, size_t size, const pc_tensor *t, bool full) {
  size_t n = 0;
  buf[0] = '\0';
  if (!pc_report_is_judged(t->verdict))
    return;
  if (!t->nreasons)
    append(buf, size, &n, "%s", pc_verdict_name(t->verdict));
  for (size_t k = 0; k < t->nreasons && k < PC_CRIT_COUNT_; k++) {
    if (k)
      append(buf, size, &n, "; ");
    append_reason(buf, size, &n, &t->reasons[k], &t->stats, full);
  }
}

bool pc_report_has_metrics(const pc_tensor *t) {
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    if (t->metrics[m].present)
      return true;
  return false;
}

void pc_report_metrics(char *buf, size_t size, const pc_tensor *t, bool full) {
  int digits = full ? ROUND_TRIP_DIGITS : READING_DIGITS;
  size_t n = 0;
  buf[0] = '\0';
  for (int m = 0; m < PC_METRIC_COUNT_; m++) {
    const pc_metric_result *r = &t->metrics[m];
    if (!r->present)
      continue;
    append(buf, size, &n, "%s%s", n ? ", " : "", pc_metric_name((pc_metric)m));
    if (m == PC_METRIC_TOPK_OVERLAP)
      append(buf, size, &n, "@%" PRIu64, t->tol.metrics.topk);
    append(buf, size, &n, " %.*g (%s %.*g%s)", digits, r->value,
           pc_metric_is_floor((pc_metric)m) ? "min" : "max", digits, r->limit,
           r->pass ? "" : ", fails");
  }
}

static const pc_attr *pc_prov_find(const pc_provenance *p, const char *name) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->attrs[i].name, name) == 0)
      return &p->attrs[i];
  return NULL;
}

int pc_report_provenance(const pc_run *run, pc_prov_row **rows, size_t *n) {
  const pc_provenance *pa = &run->provenance[0], *pb = &run->provenance[1];
  *n = 0;
  *rows = malloc((pa->n + pb->n ? pa->n + pb->n : 1) * sizeof **rows);
  if (!*rows)
    return PC_ENOMEM;
  for (size_t i = 0; i < pa->n; i++) {
    const pc_attr *b = pc_prov_find(pb, pa->attrs[i].name);
    (*rows)[(*n)++] = (pc_prov_row){pa->attrs[i].name, &pa->attrs[i], b,
                                    !b || strcmp(b->value, pa->attrs[i].value) != 0};
  }
  for (size_t i = 0; i < pb->n; i++)
    if (!pc_prov_find(pa, pb->attrs[i].name))
      (*rows)[(*n)++] = (pc_prov_row){pb->attrs[i].name, NULL, &pb->attrs[i], true};
  return PC_OK;
}

const char *pc_report_prov_value(const pc_prov_row *r, int side) {
  const pc_attr *a = side ? r->b : r->a;
  return a ? a->value : "-";
}

/* "rel_rms 0.5 > limit 0.001; diagnosis: scaled by 2.000": the judge's criteria, then what the
 * difference looks like, which is what a reader acts on. */
static void reasons_and_diagnosis(char *buf, size_t size, const pc_tensor *t) {
  char diag[PC_DIAGNOSIS_MAX];
  pc_report_reasons(buf, size, t, false);
  pc_report_diagnosis(diag, sizeof diag, t);
  size_t n = strlen(buf);
  if (diag[0])
    append(buf, size, &n, "%sdiagnosis: %s", n ? "; " : "", diag);
}

void pc_report_reason(char *buf, size_t size, const pc_tensor *t) {
  char a[PC_DIMS_TEXT_MAX], b[PC_DIMS_TEXT_MAX];
  buf[0] = '\0';
  switch (t->verdict) {
  case PC_VERDICT_PASS:
    return;
  case PC_VERDICT_DRIFT:
  case PC_VERDICT_INDETERMINATE:
    reasons_and_diagnosis(buf, size, t);
    return;
  case PC_VERDICT_MISSING_IN_A:
  case PC_VERDICT_MISSING_IN_B:
    snprintf(buf, size, "%s%s%s%s",
             t->message                              ? t->message
             : t->verdict == PC_VERDICT_MISSING_IN_A ? "only in B"
                                                     : "only in A",
             t->did_you_mean ? "; did you mean " : "", t->did_you_mean ? t->did_you_mean : "",
             t->did_you_mean ? "?" : "");
    return;
  case PC_VERDICT_SHAPE_MISMATCH:
    snprintf(buf, size, "shape %s vs %s", pc_report_dims(a, t->rank, t->dims),
             pc_report_dims(b, t->rank_b, t->dims_b));
    return;
  default:
    snprintf(buf, size, "%s", t->message ? t->message : pc_verdict_name(t->verdict));
  }
}

/* The fewest significant digits, from READING_DIGITS up, at which x and y print differently. */
static int telling_digits(double x, double y) {
  char bx[40], by[40];
  for (int p = READING_DIGITS; p < ROUND_TRIP_DIGITS; p++) {
    snprintf(bx, sizeof bx, "%.*g", p, x);
    snprintf(by, sizeof by, "%.*g", p, y);
    if (strcmp(bx, by) != 0)
      return p;
  }
  /* equal values (or NaNs) read best short; distinct ones always differ at 17 digits */
  return x == y || (isnan(x) && isnan(y)) ? READING_DIGITS : ROUND_TRIP_DIGITS;
}

void pc_report_worst_value(char *buf, size_t size, const pc_tensor *t, int side,
                           const int digits[2]) {
  const pc_stats *s = &t->stats;
  const double *v = side ? s->worst_b : s->worst_a;
  size_t n = 0;
  buf[0] = '\0';
  if (s->worst_is_int)
    append(buf, size, &n, "%s%" PRIu64, s->worst_int_neg[side] ? "-" : "", s->worst_int_mag[side]);
  else if (t->is_complex)
    append(buf, size, &n, "(%.*g, %.*g)", digits[0], v[0], digits[1], v[1]);
  else
    append(buf, size, &n, "%.*g", digits[0], v[0]);
}

void pc_report_worst_text(char *buf, size_t size, const pc_tensor *t, bool full) {
  const pc_stats *s = &t->stats;
  uint64_t index[PC_MAX_RANK];
  char dims[PC_DIMS_TEXT_MAX];
  size_t n = 0;
  buf[0] = '\0';
  if (!pc_report_has_stats(t->verdict) || !s->has_worst)
    return;
  pc_report_worst_index(t, index);
  int digits[2] = {full ? ROUND_TRIP_DIGITS : telling_digits(s->worst_a[0], s->worst_b[0]),
                   full ? ROUND_TRIP_DIGITS : telling_digits(s->worst_a[1], s->worst_b[1])};
  char a[PC_WORST_VALUE_MAX], b[PC_WORST_VALUE_MAX];
  pc_report_worst_value(a, sizeof a, t, 0, digits);
  pc_report_worst_value(b, sizeof b, t, 1, digits);
  append(buf, size, &n, "worst %s: a=%s, b=%s",
         pc_report_dims(dims, t->rank < 0 ? 0 : t->rank, index), a, b);
}

const char *pc_report_gate_noun(const pc_gate *gate) {
  return gate->kind == PC_GATE_APPROVALS ? "approvals" : "baseline";
}

void pc_report_gate_tail(char *buf, size_t size, const pc_gate *gate) {
  size_t n = 0;
  buf[0] = '\0';
  if (gate->kind == PC_GATE_BASELINE)
    append(buf, size, &n, " at factor %g", gate->factor);
  else
    append(buf, size, &n, " (slack %g)", gate->factor - 1);
}

void pc_report_gate_extra(char *buf, size_t size, const pc_gate *gate) {
  size_t n = 0;
  buf[0] = '\0';
  if (gate->baseline_only)
    append(buf, size, &n, ", %zu %s", gate->baseline_only,
           gate->kind == PC_GATE_APPROVALS ? "stale approvals" : "only in the baseline");
}

const char *pc_report_gate_column(const pc_gate *gate) {
  return gate->kind == PC_GATE_APPROVALS ? "approval" : "baseline";
}

const char *pc_report_change(const pc_gate *gate, const pc_run *run, size_t i) {
  if (!gate)
    return "";
  const pc_gate_tensor *g = &gate->tensors[i];
  if (gate->kind == PC_GATE_BASELINE || g->fails)
    return pc_change_name(g->change);
  if (pc_verdict_is_failure(pc_run_at(run, i)->verdict))
    return "approved";
  return g->change == PC_CHANGE_BETTER ? pc_change_name(g->change) : "-";
}

void pc_report_bucket_label(char *buf, size_t size, int k) {
  if (k <= 1) {
    snprintf(buf, size, "%d", k);
    return;
  }
  uint64_t lo = (uint64_t)1 << (k - 1);
  snprintf(buf, size, "%" PRIu64 "-%" PRIu64, lo, lo + (lo - 1));
}

int pc_report_hist_used(const pc_stats *s) {
  int used = 0;
  for (int k = 0; k < PC_ULP_BUCKETS; k++)
    if (s->ulp_hist[k])
      used = k + 1;
  return used;
}

bool pc_report_any_quantiles(const pc_run *run) {
  for (size_t i = 0; i < run->ntensors; i++)
    if (pc_report_has_stats(pc_run_at(run, i)->verdict) && pc_run_at(run, i)->stats.has_quantiles)
      return true;
  return false;
}

/* --- three-way mode ---------------------------------------------------------------------- */

static const char *closer_name(int closer) {
  return closer < 0 ? "a" : closer > 0 ? "b" : "tie";
}

void pc_report_closer_text(char *buf, size_t size, const pc_tensor *t) {
  const pc_vs_reference *v = &t->vs_reference;
  size_t n = 0;
  buf[0] = '\0';
  if (!v->present)
    return;
  append(buf, size, &n, "%s (rel_rms %.3g vs %.3g", closer_name(v->closer), v->a.rel_rms,
         v->b.rel_rms);
  /* equal rel_rms (NaN on both sides included): max_ulp decided */
  if (v->a.rel_rms == v->b.rel_rms || (isnan(v->a.rel_rms) && isnan(v->b.rel_rms)))
    append(buf, size, &n, ", max_ulp %" PRIu64 " vs %" PRIu64, v->a.max_ulp, v->b.max_ulp);
  append(buf, size, &n, ")");
}

void pc_report_closer_tally(char *buf, size_t size, const pc_run *run) {
  size_t a = 0, b = 0, tie = 0, n = 0;
  for (size_t i = 0; i < run->ntensors; i++) {
    const pc_vs_reference *v = &pc_run_at(run, i)->vs_reference;
    a += v->present && v->closer < 0;
    b += v->present && v->closer > 0;
    tie += v->present && v->closer == 0;
  }
  buf[0] = '\0';
  append(buf, size, &n, "a closer on %zu tensor%s, b on %zu, %zu tie%s", a, plural(a), b, tie,
         plural(tie));
  if (a + b + tie < run->ntensors)
    append(buf, size, &n, "; %zu not compared with R", run->ntensors - (a + b + tie));
}
