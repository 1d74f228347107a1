/* Three-way mode (compare.h, pc_compare_reference): R, a reference such as a CPU float64 run, is
 * compared with A and with B by pc_compare_files itself, R as the reference side, so each side's
 * distance to R is made of exactly the figures of docs/metrics.md. The figures are attached to
 * the tensors of the A-vs-B run by path; nothing of A vs B changes. */
#include "judge.h"
#include "pc_internal.h"

#include <paritycheck/compare.h>

#include <float.h>   /* DBL_EPSILON */
#include <math.h>    /* isnan, sqrt */
#include <stdbool.h> /* bool */
#include <stdlib.h>  /* bsearch, calloc, free, qsort */
#include <string.h>  /* strcmp */

/* A run's tensors sorted by path, for lookups: paths and indices, so that neither the sort nor
 * a search reads the records, which a large run holds in a file (spill.h). */
typedef struct pc_path_entry {
  const char *path;
  size_t index;
} pc_path_entry;

typedef struct pc_by_path {
  const pc_run *run;
  pc_path_entry *sorted;
  size_t n;
} pc_by_path;

static int pc_cmp_entry_path(const void *x, const void *y) {
  return strcmp(((const pc_path_entry *)x)->path, ((const pc_path_entry *)y)->path);
}

static int pc_index_run(pc_by_path *ix, const pc_run *run) {
  ix->run = run;
  ix->n = run->ntensors;
  ix->sorted = calloc(ix->n ? ix->n : 1, sizeof *ix->sorted);
  if (!ix->sorted)
    return PC_ENOMEM;
  for (size_t i = 0; i < ix->n; i++)
    ix->sorted[i] = (pc_path_entry){pc_run_at(run, i)->path, i};
  qsort(ix->sorted, ix->n, sizeof *ix->sorted, pc_cmp_entry_path);
  return PC_OK;
}

/* The tensor of that path that was compared (pass or drift), else NULL. */
static const pc_tensor *pc_find_compared(const pc_by_path *ix, const char *path) {
  pc_path_entry key = {path, 0};
  const pc_path_entry *hit =
      bsearch(&key, ix->sorted, ix->n, sizeof *ix->sorted, pc_cmp_entry_path);
  const pc_tensor *t = hit ? pc_run_at(ix->run, hit->index) : NULL;
  return t && (t->verdict == PC_VERDICT_PASS || t->verdict == PC_VERDICT_DRIFT ||
               t->verdict == PC_VERDICT_INDETERMINATE)
             ? t
             : NULL;
}

static pc_ref_side pc_side(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  pc_ref_side r = {.max_abs = s->max_abs,
                   .max_rel = s->max_rel,
                   .rel_rms = pc_stats_aggregates(s).rel_rms,
                   .max_ulp = s->max_ulp,
                   .mean_ulp = pc_stats_mean_ulp(s)};
  return r;
}

/* -1, 0, +1 as x is smaller than, equal to or larger than y; NaN is larger than any number and
 * equal to itself. */
static int pc_order(double x, double y) {
  if (isnan(x) || isnan(y))
    return isnan(x) - isnan(y);
  return (x > y) - (x < y);
}

/* -1 when a is closer to R, +1 when b is, 0 for a tie: rel_rms, then max_ulp. */
static int pc_closer(const pc_ref_side *a, const pc_ref_side *b) {
  int c = pc_order(a->rel_rms, b->rel_rms);
  return c ? c : (a->max_ulp > b->max_ulp) - (a->max_ulp < b->max_ulp);
}

static pc_vs_reference pc_attach(const pc_by_path *ra, const pc_by_path *rb, const char *path) {
  pc_vs_reference v = {.present = false, .closer = 0};
  const pc_tensor *ta = pc_find_compared(ra, path), *tb = pc_find_compared(rb, path);
  if (!ta || !tb)
    return v;
  v.present = true;
  v.a = pc_side(ta);
  v.b = pc_side(tb);
  v.closer = pc_closer(&v.a, &v.b);
  return v;
}

/* Every dataset R-vs-B compared (rb) holds the same values on both sides, in whatever dtype (a
 * float64 copy of B too): R then says nothing B does not. Also used on R-vs-A. */
static bool pc_ref_is_b(const pc_run *rb) {
  size_t n = 0;
  for (size_t i = 0; i < rb->ntensors; i++) {
    const pc_tensor *t = pc_run_at(rb, i);
    const pc_stats *s = &t->stats;
    if (t->verdict != PC_VERDICT_PASS && t->verdict != PC_VERDICT_DRIFT &&
        t->verdict != PC_VERDICT_INDETERMINATE)
      continue;
    if (s->mismatches || s->max_ulp || s->sum_sq_diff != 0 || s->nan_mismatches ||
        s->inf_mismatches)
      return false;
    n++;
  }
  return n > 0;
}

/* On most float tensors R's dtype is as coarse as A's and B's, or coarser (docs/metrics.md,
 * "Three-way mode"): rounding R's values carries as much error as the sides it would judge.
 * *example: one such tensor of ra. */
static bool pc_ref_coarse(const pc_by_path *ia, const pc_by_path *ib, const pc_tensor **example) {
  size_t n = 0, k = 0;
  for (size_t i = 0; i < ia->n; i++) {
    const pc_tensor *ta = pc_find_compared(ia, ia->sorted[i].path);
    const pc_tensor *tb = pc_find_compared(ib, ia->sorted[i].path);
    if (!ta || !tb || !pc_dtype_is_float(ta->dtype_a) || !pc_dtype_is_float(ta->dtype_b) ||
        !pc_dtype_is_float(tb->dtype_b))
      continue;
    double u = pc_dtype_unit_roundoff(ta->dtype_a);
    bool coarse =
        u >= pc_dtype_unit_roundoff(ta->dtype_b) && u >= pc_dtype_unit_roundoff(tb->dtype_b);
    n++;
    k += coarse;
    if (coarse && !*example)
      *example = ta;
  }
  return 2 * k > n;
}

/* R judges B only when it is finer than A and B and is not B (docs/metrics.md, "Three-way
 * mode", "A reference that cannot judge"): PC_EUSAGE saying why, else PC_OK. */
static int pc_ref_trusted(const pc_run *ra, const pc_run *rb, const pc_by_path *ia,
                          const pc_by_path *ib, const char *path_ref, pc_error *err) {
  const pc_tensor *ex = NULL;
  /* R equal to A as well means A and B agree: nothing to judge, nothing forged */
  if (pc_ref_is_b(rb) && !pc_ref_is_b(ra))
    return pc_error_set(err, PC_EUSAGE,
                        "%s: the reference is B (every dataset compared holds B's values): a "
                        "reference made from the candidate cannot judge it",
                        path_ref);
  if (pc_ref_coarse(ia, ib, &ex))
    return pc_error_set(err, PC_EUSAGE,
                        "%s: the reference is not finer than A and B: on most tensors its dtype "
                        "is as coarse as theirs (e.g. %s: R %s, A %s); use a more precise run, "
                        "such as float64 on the CPU",
                        path_ref, ex->path, pc_dtype_name(ex->dtype_a), pc_dtype_name(ex->dtype_b));
  return PC_OK;
}

int pc_compare_reference(pc_run *run, const char *path_ref, const pc_options *opts, pc_error *err) {
  if (!run || !path_ref || !opts || opts->version != PC_OPTIONS_VERSION || !opts->tols)
    return pc_error_set(err, PC_EUSAGE, "pc_compare_reference: bad arguments");
  pc_options o = *opts;
  o.skip_quantiles = true; /* no figure of vs_reference needs them */
  pc_run *ra = NULL, *rb = NULL;
  pc_by_path ia = {NULL, NULL, 0}, ib = {NULL, NULL, 0};
  char *path = NULL;
  pc_options oa = o;
  oa.nmaps = 0; /* the maps rename B's paths only */
  int rc = pc_compare_files(&ra, path_ref, run->path_a, &oa, err);
  if (rc == PC_OK)
    rc = pc_compare_files(&rb, path_ref, run->path_b, &o, err);
  if (rc == PC_OK &&
      (pc_index_run(&ia, ra) < 0 || pc_index_run(&ib, rb) < 0 || !(path = pc_strdup(path_ref))))
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK && (rc = pc_ref_trusted(ra, rb, &ia, &ib, path_ref, err)) < 0)
    free(path); /* not yet the run's */
  if (rc == PC_OK) {
    for (size_t i = 0; i < run->ntensors; i++)
      pc_run_at(run, i)->vs_reference = pc_attach(&ia, &ib, pc_run_at(run, i)->path);
    free(run->path_ref);
    run->path_ref = path;
    if (pc_judge_reference(run) < 0)
      rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  }
  free(ia.sorted);
  free(ib.sorted);
  pc_run_free(ra);
  pc_run_free(rb);
  return rc;
}
