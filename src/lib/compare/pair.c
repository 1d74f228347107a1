/* The tensor pipeline (comparator.h): one pair of datasets from its set-up without data
 * (verdicts missing, skipped, error, dtype and shape mismatch) through its tolerance, product
 * metrics and envelope to its elements streamed (stream.h) and the judge's verdict. The run
 * (compare.c, through walk.c) and the plans' runners (plan_run.c) call it, one pair at a time. */
#include "comparator.h"
#include "fill.h"
#include "judge.h"
#include "kernel.h"
#include "loader.h"
#include "metrics.h"
#include "numerics.h"
#include "pc_internal.h"
#include "stream.h"
#include "tol_resolve.h"
#include "trust.h"

#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* sqrt */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memcpy */

/* --- tensor set-up ---------------------------------------------------------------------- */

static bool pc_same_shape(const pc_dataset *a, const pc_dataset *b) {
  if (a->rank != b->rank || a->count != b->count)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i])
      return false;
  return true;
}

static bool pc_is_numeric(const pc_dataset *d) {
  return d->kind == PC_KIND_FLOAT || d->kind == PC_KIND_COMPLEX || d->kind == PC_KIND_INTEGER;
}

static pc_dtype pc_numeric_dtype(const pc_dataset *d) {
  return d && pc_is_numeric(d) ? d->logical : PC_DTYPE_NONE;
}

static bool pc_is_error(const pc_dataset *d) {
  return d && d->kind == PC_KIND_ERROR;
}

/* Decides the verdicts that need no data: missing, skipped, error, dtype and shape mismatch.
 * Returns true when the pair still has to be compared. An unreadable object is an error even
 * where the other file lacks it (a group that cannot be walked has no namesake), so that
 * unreadable input never passes for a missing dataset. */
static bool pc_pre_verdict(pc_tensor *t, const pc_dataset *a, const pc_dataset *b, int *rc) {
  char why[512];
  *rc = PC_OK;
  if ((!a || !b) && !pc_is_error(a) && !pc_is_error(b)) {
    t->verdict = a ? PC_VERDICT_MISSING_IN_B : PC_VERDICT_MISSING_IN_A;
    *rc = pc_set_text(&t->message, a ? "only in A" : "only in B");
    return false;
  }
  if (pc_is_error(a) || pc_is_error(b)) {
    const pc_dataset *bad = pc_is_error(a) ? a : b;
    snprintf(why, sizeof why, "%s: %s", bad == a ? "A" : "B", bad->reason);
    t->verdict = PC_VERDICT_ERROR;
  } else if (!pc_is_numeric(a) && !pc_is_numeric(b)) {
    snprintf(why, sizeof why, "not numeric: %s", a->reason);
    t->verdict = PC_VERDICT_SKIPPED;
  } else if (pc_is_numeric(a) != pc_is_numeric(b) ||
             (a->kind == PC_KIND_COMPLEX) != (b->kind == PC_KIND_COMPLEX)) {
    snprintf(why, sizeof why, "A is %s, B is %s",
             a->kind == PC_KIND_COMPLEX ? "complex"
             : pc_is_numeric(a)         ? "real"
                                        : a->reason,
             b->kind == PC_KIND_COMPLEX ? "complex"
             : pc_is_numeric(b)         ? "real"
                                        : b->reason);
    t->verdict = PC_VERDICT_DTYPE_MISMATCH;
  } else if ((a->kind == PC_KIND_INTEGER) != (b->kind == PC_KIND_INTEGER)) {
    snprintf(why, sizeof why, "A is %s, B is %s: a float and an integer", pc_dtype_name(a->logical),
             pc_dtype_name(b->logical));
    t->verdict = PC_VERDICT_DTYPE_MISMATCH;
  } else if (!pc_same_shape(a, b)) {
    snprintf(why, sizeof why, "shapes differ");
    t->verdict = PC_VERDICT_SHAPE_MISMATCH;
  } else {
    return true;
  }
  *rc = pc_set_text(&t->message, why);
  return false;
}

/* --- one pair ---------------------------------------------------------------------------- */

/* Folds A's elements into m block by block, skipping (pc_reader_seek) the elements that A
 * never wrote: those are its fill value (pc_fill_magnitude). */
static int pc_magnitude_pass(const pc_pair *p, pc_magnitude *m, pc_error *e) {
  pc_reader *r = NULL;
  size_t cursor = 0;
  uint64_t done = 0;
  int rc = pc_reader_open(&r, p->fa, p->a, p->block, NULL, e);
  for (size_t n = 1; rc == PC_OK && n; done += n) {
    uint64_t at = pc_reader_seek(r, pc_dataset_next_written(p->a, &cursor, done));
    pc_fill_magnitude(p->a, at - done, m);
    done = at;
    if ((rc = pc_reader_next(r, &n, e)) == PC_OK && n)
      pc_kernel_magnitude(m, p->a->kind == PC_KIND_COMPLEX, pc_reader_values(r), pc_reader_ints(r),
                          p->a->stored == PC_DTYPE_UINT64, n);
  }
  pc_reader_close(r);
  return rc;
}

/* One pass over A for the magnitude that tolerance models may scale with: max |a| and the
 * RMS over finite elements (complex: the modulus). */
static int pc_measure_magnitude(const pc_pair *p, pc_tol_context *ctx) {
  pc_error e = {PC_OK, ""};
  pc_magnitude m = {0, 0, 0};
  int rc = pc_magnitude_pass(p, &m, &e);
  if (rc < 0) {
    p->t->verdict = PC_VERDICT_ERROR;
    return rc == PC_ENOMEM ? rc : pc_set_text(&p->t->message, e.message);
  }
  ctx->has_magnitude = true;
  ctx->max_abs_a = m.max_abs;
  ctx->rms_a = m.count ? sqrt(m.sum_squares / (double)m.count) : 0;
  return PC_OK;
}

/* pc_tol_attr_fn over a pair: the attributes of side A's or B's dataset, else of its file. */
static const char *pc_pair_attr(void *user, int side, const char *name, char *buf, size_t size) {
  const pc_pair *p = user;
  if (side == 1 && !p->trust_b) /* B may not choose its own rule (trust.h) */
    return NULL;
  return side == 0 ? pc_dataset_attr(p->fa, p->a, name, buf, size)
                   : pc_dataset_attr(p->fb, p->b, name, buf, size);
}

/* What the tolerance model may know of a set-up pair before its data is read. */
static pc_tol_context pc_pair_context(const pc_pair *p) {
  return (pc_tol_context){.reduction_length = p->t->reduction_length,
                          .accumulation = p->t->accumulation,
                          .attr = pc_pair_attr,
                          .attr_user = (void *)p};
}

/* The tolerance, measuring A's magnitude first when the tolerance model needs it. */
static int pc_resolve_tol(pc_pair *p, const pc_tolset *tols) {
  pc_tensor *t = p->t;
  pc_tol_context ctx = pc_pair_context(p);
  if (pc_tolset_needs_magnitude(tols, pc_tensor_dataset(t), t->compare, &ctx)) {
    int rc = pc_measure_magnitude(p, &ctx);
    if (rc < 0 || t->verdict == PC_VERDICT_ERROR)
      return rc;
  }
  t->tol = pc_tolset_resolve_ctx(tols, pc_tensor_dataset(t), t->compare, &ctx);
  return PC_OK;
}

/* --- product metrics --------------------------------------------------------------------- */

/* Reads all of dataset d into vals (d->count doubles). */
static int pc_read_whole(const pc_pair *p, pc_file *f, const pc_dataset *d, double *vals,
                         pc_error *e) {
  pc_reader *r = NULL;
  uint64_t done = 0;
  int rc = pc_reader_open(&r, f, d, p->block, NULL, e);
  for (size_t n = 1; rc == PC_OK && n; done += n)
    if ((rc = pc_reader_next(r, &n, e)) == PC_OK && n)
      memcpy(vals + done, pc_reader_values(r), n * sizeof *vals);
  pc_reader_close(r);
  return rc;
}

/* Metrics need whole rows of both sides at once; the tensors they are meant for (logits, a
 * loss) are small, so both are read whole into doubles, 16 bytes an element, bounded by
 * max_memory (docs/metrics.md, "Product metrics"). A tensor they cannot be computed for is an
 * error, never a pass. */
static bool pc_metrics_possible(const pc_pair *p, char *why, size_t size) {
  if (p->a->kind != PC_KIND_FLOAT || p->b->kind != PC_KIND_FLOAT) {
    snprintf(why, size, "metrics need real floating-point tensors");
    return false;
  }
  if (p->a->count > p->max_memory / (2 * sizeof(double))) {
    snprintf(why, size,
             "metrics read the tensor whole, %" PRIu64 " elements of both sides as doubles, more "
             "than the memory limit of %" PRIu64 " bytes (--max-memory)",
             p->a->count, p->max_memory);
    return false;
  }
  return true;
}

static int pc_compute_metrics(const pc_pair *p) {
  pc_tensor *t = p->t;
  char why[PC_ERROR_MESSAGE_MAX];
  pc_error e = {PC_OK, ""};
  if (!pc_metrics_possible(p, why, sizeof why)) {
    t->verdict = PC_VERDICT_ERROR;
    return pc_set_text(&t->message, why);
  }
  uint64_t cols = t->rank > 0 ? t->dims[t->rank - 1] : 1;
  uint64_t rows = cols ? p->a->count / cols : 0;
  double *a = malloc((p->a->count ? p->a->count : 1) * sizeof *a);
  double *b = malloc((p->a->count ? p->a->count : 1) * sizeof *b);
  int rc = a && b ? PC_OK : pc_error_set(&e, PC_ENOMEM, "out of memory");
  if (rc == PC_OK && (rc = pc_read_whole(p, p->fa, p->a, a, &e)) == PC_OK)
    rc = pc_read_whole(p, p->fb, p->b, b, &e);
  if (rc == PC_OK)
    rc = pc_metrics_compute(t->metrics, &t->tol.metrics, a, b, rows, cols, &e);
  free(a);
  free(b);
  if (rc == PC_ENOMEM)
    return rc;
  if (rc < 0) {
    t->verdict = PC_VERDICT_ERROR;
    return pc_set_text(&t->message, e.message);
  }
  return PC_OK;
}

static int pc_note(pc_tensor *t, bool cross_grid) {
  char note[128];
  if (!cross_grid)
    return PC_OK;
  snprintf(note, sizeof note, "%s vs %s compared in %s ULPs", pc_dtype_name(t->dtype_a),
           pc_dtype_name(t->dtype_b), pc_dtype_name(t->compare));
  return pc_trust_add_note(t, note);
}

void pc_pair_done(void *user, pc_tensor *t) {
  (void)user;
  pc_judge_tensor(t);
}

/* HDF5 decompresses a whole chunk to read any part of it, and a small file can declare a chunk
 * of almost 4 GiB: a dataset whose chunk needs more than max_memory is an error, not read. */
static bool pc_within_memory(const pc_pair *p, int *rc) {
  const pc_dataset *big = p->a->chunk_bytes > p->max_memory   ? p->a
                          : p->b->chunk_bytes > p->max_memory ? p->b
                                                              : NULL;
  char why[PC_ERROR_MESSAGE_MAX];
  if (!big)
    return true;
  snprintf(why, sizeof why,
           "%s: %s: reading needs an uncompressed chunk of %" PRIu64
           " bytes at once, more than the memory limit of %" PRIu64 " bytes (--max-memory)",
           big == p->a ? "A" : "B", pc_file_path(big == p->a ? p->fa : p->fb), big->chunk_bytes,
           p->max_memory);
  p->t->verdict = PC_VERDICT_ERROR;
  *rc = pc_set_text(&p->t->message, why);
  return false;
}

/* The steps before the data return PC_ENOMEM without a message: it names the tensor. */
static int pc_nomem(int rc, const pc_tensor *t, pc_error *err) {
  return rc == PC_ENOMEM ? pc_error_set(err, rc, "%s: out of memory", t->path) : rc;
}

int pc_pair_setup(pc_pair *p, bool *data, pc_error *err) {
  pc_tensor *t = p->t;
  *data = false;
  t->dtype_a = pc_numeric_dtype(p->a);
  t->dtype_b = pc_numeric_dtype(p->b);
  const pc_dataset *shape = p->a ? p->a : p->b;
  int rc = pc_arena_shape(p->names, &t->rank, &t->dims, shape->rank, shape->dims);
  t->rank_b = -1;
  if (rc == PC_OK && p->a && p->b)
    rc = pc_arena_shape(p->names, &t->rank_b, &t->dims_b, p->b->rank, p->b->dims);
  if (rc < 0)
    return pc_nomem(rc, t, err);
  if (!pc_pre_verdict(t, p->a, p->b, &rc) || !pc_within_memory(p, &rc))
    return pc_nomem(rc, t, err);
  if ((rc = pc_trust_metadata(p)) < 0)
    return pc_nomem(rc, t, err);
  t->is_complex = p->a->kind == PC_KIND_COMPLEX;
  t->compare = pc_dtype_compare(t->dtype_a, t->dtype_b, &p->cross);
  *data = true;
  return PC_OK;
}

int pc_pair_data(pc_pair *p, const pc_tolset *tols, uint64_t from, uint64_t to, pc_error *err) {
  pc_tensor *t = p->t;
  int rc;
  if ((rc = pc_resolve_tol(p, tols)) < 0 || t->verdict == PC_VERDICT_ERROR ||
      (rc = pc_note(t, p->cross)) < 0)
    return pc_nomem(rc, t, err);
  pc_tol_context ctx = pc_pair_context(p);
  double precision_u = pc_tolset_precision_u(tols, pc_tensor_dataset(t), t->compare, &ctx);
  if (!pc_trust_precision(p, precision_u, &rc))
    return pc_nomem(rc, t, err);
  if (t->tol.metrics.set && ((rc = pc_compute_metrics(p)) < 0 || t->verdict == PC_VERDICT_ERROR))
    return pc_nomem(rc, t, err);
  if (pc_fill_pair(p->a, p->b)) {
    if ((rc = pc_fill_compare(t, p->a, p->b, p->quantiles)) < 0)
      return pc_error_set(err, rc, "%s: out of memory", t->path);
    pc_pair_done(NULL, t);
    return PC_OK;
  }
  pc_stream_sides sd = {p->fa, p->a, p->fb, p->b, NULL, NULL};
  if ((rc = pc_pair_envelope_attach(p, &sd, err)) < 0 || t->verdict == PC_VERDICT_ERROR) {
    if (rc == PC_OK)
      pc_pair_done(NULL, t);
    return rc;
  }
  return pc_stream_range(p->stream, t, &sd, from, to, err);
}

bool pc_pair_splittable(const pc_pair *p, const pc_tolset *tols) {
  pc_tol_context ctx = pc_pair_context(p);
  pc_tol tol = pc_tolset_resolve_ctx(tols, pc_tensor_dataset(p->t), p->t->compare, &ctx);
  return !p->a->sparse && !p->b->sparse && !tol.metrics.set;
}

uint64_t pc_pair_bytes(const pc_dataset *a, const pc_dataset *b) {
  if (a && b && pc_is_numeric(a) && pc_is_numeric(b) && pc_same_shape(a, b) &&
      !(a->all_fill && b->all_fill)) /* never-written pairs are not read */
    return a->count * (a->elem_size + b->elem_size);
  return 0;
}
