/* Helpers that every report writer shares (report_common.h). */
#define _XOPEN_SOURCE 700 /* realpath, fchown */
#include "report_common.h"

#include "pc_internal.h"

#include <errno.h>     /* errno */
#include <fcntl.h>     /* open, O_EXCL */
#include <inttypes.h>  /* PRIu64 */
#include <math.h>      /* isnan, INFINITY */
#include <stdarg.h>    /* va_list */
#include <stdatomic.h> /* atomic_ulong, atomic_fetch_add */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, qsort */
#include <string.h>    /* strcmp, strlen, strerror */
#include <sys/stat.h>  /* stat, lstat, fchmod */
#include <time.h>      /* clock_gettime */
#include <unistd.h>    /* fsync, unlink, getpid, fchown */

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

/* Only compared tensors carry figures; other verdicts are decided before any element is read.
 * An indeterminate tensor was compared: its figures are why it is indeterminate. */
bool pc_report_has_stats(pc_verdict v) {
  return v == PC_VERDICT_PASS || v == PC_VERDICT_DRIFT || v == PC_VERDICT_INDETERMINATE;
}

bool pc_report_is_judged(pc_verdict v) {
  return v == PC_VERDICT_DRIFT || v == PC_VERDICT_INDETERMINATE;
}

bool pc_report_accepted(const pc_run *run, size_t i) {
  return run->accept_indeterminate && pc_run_at(run, i)->verdict == PC_VERDICT_INDETERMINATE;
}

bool pc_report_counts(const pc_run *run, pc_verdict v) {
  return pc_verdict_is_failure(v) && !(v == PC_VERDICT_INDETERMINATE && run->accept_indeterminate);
}

size_t pc_report_failures(const pc_run *run) {
  size_t n = 0;
  for (int v = 0; v < PC_VERDICT_COUNT_; v++)
    if (pc_report_counts(run, (pc_verdict)v))
      n += run->by_verdict[v];
  return n;
}

size_t pc_report_accepted_count(const pc_run *run) {
  return run->accept_indeterminate ? run->by_verdict[PC_VERDICT_INDETERMINATE] : 0;
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

/* An indeterminate tensor that the run accepts is no place to start looking: the first tensor
 * that fails the run, in execution order, is named instead (none when nothing does). */
const pc_tensor *pc_report_first_divergence(const pc_run *run) {
  long i = run->first_divergence;
  if (i < 0 || (size_t)i >= run->ntensors)
    return NULL;
  if (!pc_report_accepted(run, (size_t)i))
    return pc_run_at(run, i);
  for (size_t k = 0; k < run->ntensors; k++)
    if (pc_report_fails(run, NULL, pc_report_exec_at(run, k)))
      return pc_run_at(run, pc_report_exec_at(run, k));
  return NULL;
}

/* The judge writes context.exec_index = k for order[k]; a run made elsewhere is searched. */
size_t pc_report_exec_index(const pc_run *run, size_t i) {
  if (!run->order)
    return i;
  int64_t k = pc_run_at(run, i)->context.exec_index;
  if (k >= 0 && (uint64_t)k < run->ntensors && run->order[k] == i)
    return (size_t)k;
  for (size_t j = 0; j < run->ntensors; j++)
    if (run->order[j] == i)
      return j;
  return i;
}

size_t pc_report_exec_at(const pc_run *run, size_t k) {
  return run->order ? run->order[k] : k;
}

/* The link of a failing tensor to another failing tensor, or -1. */
static long cause_of(const pc_run *run, size_t i) {
  long c = pc_run_at(run, i)->caused_by;
  if (!pc_verdict_is_failure(pc_run_at(run, i)->verdict) || c < 0 || (size_t)c >= run->ntensors ||
      (size_t)c == i || !pc_verdict_is_failure(pc_run_at(run, c)->verdict))
    return -1;
  return c;
}

/* The judge links every member to its root directly; a chain is followed, at most ntensors
 * steps, so that a cycle ends too. */
long pc_report_root(const pc_run *run, size_t i) {
  long root = cause_of(run, i);
  for (size_t steps = 0; root >= 0 && steps < run->ntensors; steps++) {
    long up = cause_of(run, (size_t)root);
    if (up < 0 || (size_t)up == i)
      break;
    root = up;
  }
  return root;
}

bool pc_report_is_root(const pc_run *run, size_t i) {
  return pc_verdict_is_failure(pc_run_at(run, i)->verdict) && pc_report_root(run, i) < 0;
}

int pc_report_cascades(pc_cascades *c, const pc_run *run) {
  size_t n = run->ntensors;
  c->first = calloc(n + 1, sizeof *c->first);
  c->members = malloc((n ? n : 1) * sizeof *c->members);
  size_t *fill = calloc(n + 1, sizeof *fill);
  if (!c->first || !c->members || !fill) {
    free(fill);
    pc_report_cascades_free(c);
    return PC_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) { /* counts, then where each root's members start */
    long r = pc_report_root(run, i);
    if (r >= 0)
      c->first[r + 1]++;
  }
  for (size_t i = 0; i < n; i++)
    c->first[i + 1] += c->first[i];
  for (size_t k = 0; k < n; k++) {
    size_t i = pc_report_exec_at(run, k);
    long r = pc_report_root(run, i);
    if (r >= 0)
      c->members[c->first[r] + fill[r]++] = i;
  }
  free(fill);
  return PC_OK;
}

size_t pc_report_caused_count(const pc_cascades *c, size_t i) {
  return c->first ? c->first[i + 1] - c->first[i] : 0;
}

void pc_report_cascades_free(pc_cascades *c) {
  free(c->first);
  free(c->members);
  c->first = c->members = NULL;
}

double pc_report_mismatch_fraction(const pc_stats *s) {
  return s->count ? (double)s->mismatches / (double)s->count : 0;
}

bool pc_report_fails(const pc_run *run, const pc_gate *gate, size_t i) {
  if (!pc_verdict_is_failure(pc_run_at(run, i)->verdict) || pc_report_accepted(run, i))
    return false;
  return !gate || gate->tensors[i].fails;
}

pc_run_verdict pc_report_verdict(const pc_run *run, const pc_gate *gate) {
  return gate ? gate->verdict : run->verdict;
}

/* ---- row order ---- */

/* The sort key of one row, most significant first (docs/reports.md, "Row order"); the run order
 * breaks ties. */
typedef struct row_key {
  int group;       /* 0 error, 1 failing, 2 failure accepted by the gate, 3 pass, 4 skipped */
  int kind;        /* 0 not compared, 1 with nan/inf mismatches, 2 other compared */
  double fraction; /* mismatch fraction; larger first */
  uint64_t max_ulp;
  double max_rel; /* NaN counts as the largest */
} row_key;

static int row_group(const pc_run *run, const pc_gate *gate, size_t i) {
  pc_verdict v = pc_run_at(run, i)->verdict;
  if (v == PC_VERDICT_ERROR)
    return 0;
  if (pc_verdict_is_failure(v))
    return pc_report_fails(run, gate, i) ? 1 : 2;
  return v == PC_VERDICT_PASS ? 3 : 4;
}

static row_key make_key(const pc_run *run, const pc_gate *gate, size_t i) {
  const pc_tensor *t = pc_run_at(run, i);
  row_key k = {row_group(run, gate, i), 0, 0, 0, 0};
  if (!pc_report_has_stats(t->verdict))
    return k;
  k.kind = t->stats.nan_mismatches + t->stats.inf_mismatches ? 1 : 2;
  k.fraction = pc_report_mismatch_fraction(&t->stats);
  k.max_ulp = t->stats.max_ulp;
  k.max_rel = isnan(t->stats.max_rel) ? INFINITY : t->stats.max_rel;
  return k;
}

/* -1 when x should come first, for fields where the larger value is the worse. */
static int larger_first(double x, double y) {
  return x > y ? -1 : x < y ? 1 : 0;
}

/* The keys that compare_rows reads: qsort passes no context in C11, and each thread sorts its
 * own report's rows. */
static _Thread_local const row_key *sort_keys;

/* Sorts row indices, not keys with their index: at 200,000 tensors the keys and qsort's copy of
 * them were 16 MB for each report that sorts; now the keys (32 bytes a row) and the copied
 * indices are 8 MB (docs/performance.md, "Names and shapes"). */
static int compare_rows(const void *pa, const void *pb) {
  size_t i = *(const size_t *)pa, j = *(const size_t *)pb;
  const row_key *a = &sort_keys[i], *b = &sort_keys[j];
  int c;
  if (a->group != b->group)
    return a->group < b->group ? -1 : 1;
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  if ((c = larger_first(a->fraction, b->fraction)) != 0)
    return c;
  if (a->max_ulp != b->max_ulp)
    return a->max_ulp > b->max_ulp ? -1 : 1;
  if ((c = larger_first(a->max_rel, b->max_rel)) != 0)
    return c;
  return i < j ? -1 : i > j;
}

size_t *pc_report_row_order(const pc_run *run, const pc_gate *gate, pc_sort sort) {
  size_t n = run->ntensors;
  size_t *order = malloc((n ? n : 1) * sizeof *order);
  row_key *keys = sort == PC_SORT_WORST ? malloc((n ? n : 1) * sizeof *keys) : NULL;
  if (!order || (sort == PC_SORT_WORST && !keys)) {
    free(order);
    free(keys);
    return NULL;
  }
  for (size_t i = 0; i < n; i++)
    order[i] = i;
  if (sort == PC_SORT_WORST) {
    for (size_t i = 0; i < n; i++)
      keys[i] = make_key(run, gate, i);
    sort_keys = keys;
    qsort(order, n, sizeof *order, compare_rows);
    sort_keys = NULL;
  }
  free(keys);
  return order;
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

int pc_report_check(const pc_run *run, const pc_report_options *opts, const char *who,
                    pc_error *err) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  if (!run)
    return pc_error_set(err, PC_EUSAGE, "%s: a run is required", who);
  if (opts && (opts->version < 1 || opts->version > PC_REPORT_OPTIONS_VERSION))
    return pc_error_set(err, PC_EUSAGE, "%s: options of version %d, not %d", who, opts->version,
                        PC_REPORT_OPTIONS_VERSION);
  if (gate && gate->ntensors != run->ntensors)
    return pc_error_set(err, PC_EUSAGE, "%s: the gate was made for another run", who);
  return PC_OK;
}

int pc_report_write(const char *path, const pc_run *run, const pc_report_options *opts,
                    const char *who, const char *what, pc_report_put_fn put, pc_error *err) {
  int rc = pc_report_check(run, opts, who, err);
  if (rc < 0 || !path)
    return rc < 0 ? rc : pc_error_set(err, PC_EUSAGE, "%s: a path is required", who);
  pc_report_file f;
  if ((rc = pc_report_open(&f, path, err)) < 0)
    return rc;
  bool oom = put(f.f, run, opts) < 0;
  f.failed = f.failed || oom; /* no partial report stays behind */
  rc = pc_report_close(&f, what, err);
  return oom ? pc_error_set(err, PC_ENOMEM, "out of memory writing %s", what) : rc;
}

unsigned pc_report_threads(const pc_report_options *opts) {
  if (opts && opts->version < 2) /* no such field */
    return 1;
  return pc_threads_or_cores(opts ? opts->threads : 0); /* NULL: PC_REPORT_OPTIONS_INIT's 0 */
}

void pc_report_beat(const pc_report_options *opts) {
  if (opts && opts->version >= 3 && opts->progress)
    opts->progress(opts->progress_user);
}

size_t pc_report_nsettings(const pc_report_options *opts) {
  return opts && opts->version >= 4 && opts->settings ? opts->nsettings : 0;
}

const char *pc_report_profile(const pc_report_options *opts) {
  return opts && opts->profile ? opts->profile : "default";
}

/* Overlong forms, surrogates and code points above U+10FFFF are not valid (RFC 3629). */
size_t pc_report_utf8_len(const unsigned char *p) {
  if (p[0] < 0x80)
    return 1;
  size_t len = p[0] >= 0xC2 && p[0] <= 0xDF   ? 2
               : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
               : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4
                                              : 0;
  for (size_t k = 1; k < len; k++)
    if ((p[k] & 0xC0) != 0x80)
      return 0;
  if ((len == 3 && p[0] == 0xE0 && p[1] < 0xA0) || (len == 3 && p[0] == 0xED && p[1] >= 0xA0) ||
      (len == 4 && p[0] == 0xF0 && p[1] < 0x90) || (len == 4 && p[0] == 0xF4 && p[1] >= 0x90))
    return 0;
  return len;
}

void pc_report_put_xml(FILE *out, const char *s) {
  pc_escape_put(out, s, strlen(s), PC_ESCAPE_XML);
}

void pc_report_put_escaped(FILE *out, const char *s, pc_escape_context ctx) {
  pc_escape_put(out, s, strlen(s), ctx);
}

/* ---- report files ---- */

/* A temporary name's six characters: different in each process, thread and call (O_EXCL makes
 * a clash harmless; it is only tried again). */
static void temp_suffix(char *out) {
  static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static atomic_ulong counter; /* report files may be written on several threads at once */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t x = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^
               (uint64_t)(uintptr_t)&now ^
               ((uint64_t)(atomic_fetch_add(&counter, 1) + 1) * 0x9E3779B97F4A7C15u);
  x ^= x >> 31; /* splitmix64's finaliser */
  x *= 0xBF58476D1CE4E5B9u;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBu;
  x ^= x >> 31;
  for (int k = 0; k < 6; k++, x /= sizeof chars - 1)
    out[k] = chars[x % (sizeof chars - 1)];
  out[6] = '\0';
}

/* Creates ".NAME.XXXXXX" beside dest with the mode a new file gets (0666 less the umask, applied
 * by open itself), or an existing file's mode and owner where it has one (as far as this
 * process may set them); -1 when none can be made. */
static int open_temp(char **tmp, const char *dest, const struct stat *old) {
  const char *slash = strrchr(dest, '/');
  size_t dir_len = slash ? (size_t)(slash - dest) + 1 : 0, len = strlen(dest);
  char *name = malloc(len + 9); /* ".", ".XXXXXX", NUL */
  if (!name)
    return -1;
  for (int attempt = 0; attempt < 100; attempt++) {
    char suffix[7];
    temp_suffix(suffix);
    snprintf(name, len + 9, "%.*s.%s.%s", (int)dir_len, dest, dest + dir_len, suffix);
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      if (old) {
        if (fchown(fd, old->st_uid, old->st_gid) != 0) { /* only root may give a file away */
        }
        (void)fchmod(fd, old->st_mode & 07777);
      }
      *tmp = name;
      return fd;
    }
    if (errno != EEXIST)
      break;
  }
  free(name);
  return -1;
}

/* The file that the report replaces: path itself, or the file a symlink points to (renaming
 * over the link would turn it into a file). NULL when it is written directly. */
static char *atomic_dest(const char *path, struct stat *st, bool *exists) {
  struct stat lst;
  *exists = stat(path, st) == 0;
  if (*exists && !S_ISREG(st->st_mode))
    return NULL; /* a device or a FIFO: it cannot be replaced, only written */
  if (!*exists && (errno != ENOENT || lstat(path, &lst) == 0))
    return NULL; /* a dangling symlink, a path through a file: fopen says what it makes of it */
  if (*exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
    return realpath(path, NULL);
  return pc_strdup(path);
}

int pc_report_open(pc_report_file *rf, const char *path, pc_error *err) {
  *rf = (pc_report_file){NULL, path, NULL, NULL, false, NULL};
  if (strcmp(path, "-") == 0) {
    rf->f = stdout;
    return PC_OK;
  }
  struct stat st;
  bool exists;
  errno = 0;
  rf->dest = atomic_dest(path, &st, &exists);
  int fd = rf->dest ? open_temp(&rf->tmp, rf->dest, exists ? &st : NULL) : -1;
  if (fd >= 0 && !(rf->f = fdopen(fd, "w"))) {
    int e = errno;
    close(fd);
    unlink(rf->tmp);
    errno = e;
  }
  /* Out of memory is an error, not a reason to give up writing atomically. */
  if (!rf->f && errno == ENOMEM) {
    free(rf->dest);
    free(rf->tmp);
    rf->dest = rf->tmp = NULL;
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", path);
  }
  if (!rf->f) { /* written directly: no temporary file could be made beside it */
    free(rf->dest);
    free(rf->tmp);
    rf->dest = rf->tmp = NULL;
    rf->f = fopen(path, "w");
  }
  if (!rf->f)
    return pc_error_set(err, PC_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
  return PC_OK;
}

int pc_report_close(pc_report_file *rf, const char *what, pc_error *err) {
  bool to_stdout = rf->f == stdout;
  /* A stream that failed earlier fails its flush again (what is buffered stays), with the
   * reason; the errno of the earlier failure otherwise. */
  int seen = errno;
  errno = 0;
  int e = fflush(rf->f) != 0 ? errno : 0;
  if (!e && (ferror(rf->f) || rf->failed))
    e = seen ? seen : EIO;
  /* A file system without fsync for regular files (EINVAL) has nothing to make durable. */
  if (!e && rf->tmp && fsync(fileno(rf->f)) != 0 && errno != EINVAL)
    e = errno;
  if (!to_stdout && fclose(rf->f) != 0 && !e)
    e = errno;
  pc_error why = {PC_OK, ""};
  bool refused = !e && rf->tmp && rf->verify && rf->verify(rf->tmp, &why) < 0;
  if (!e && !refused && rf->tmp && rename(rf->tmp, rf->dest) != 0)
    e = errno;
  if (refused)
    unlink(rf->tmp);
  if (e && rf->tmp)
    unlink(rf->tmp);
  free(rf->tmp);
  free(rf->dest);
  rf->f = NULL;
  rf->tmp = rf->dest = NULL;
  if (e)
    return pc_error_set(err, PC_EIO, "%s: cannot write %s: %s",
                        to_stdout ? "standard output" : rf->path, what, strerror(e));
  if (refused)
    return pc_error_set(err, PC_EIO, "%s: %s not written, it would not read back (%s)", rf->path,
                        what, why.message);
  return PC_OK;
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
