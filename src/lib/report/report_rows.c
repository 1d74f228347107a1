/* The rows of a report's tables (report_common.h): execution order, root causes and their
 * cascades, the first divergence and the order the rows are shown in. */
#include "report_common.h"

#include "pc_internal.h"

#include <math.h>   /* isnan, INFINITY */
#include <stdlib.h> /* malloc, calloc, free, qsort */

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
