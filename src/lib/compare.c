/* The comparator (compare.h): pairs datasets by path, streams each pair through the element
 * kernels of docs/metrics.md and judges it against the tolerance. */
#include "kernel.h"
#include "loader.h"
#include "pc_internal.h"

#include <paritycheck/compare.h>

#include <math.h>   /* sqrt */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* strcmp */

/* Large enough to amortise one HDF5 read, small enough that buffers stay a few MiB. */
enum { PC_DEFAULT_BLOCK_ELEMS = 1 << 18 };

static const char *const pc_verdict_names[PC_VERDICT_COUNT_] = {
    "pass",           "drift",          "missing_in_a", "missing_in_b",
    "shape_mismatch", "dtype_mismatch", "skipped",      "error"};

const char *pc_verdict_name(pc_verdict v) {
  return (unsigned)v < PC_VERDICT_COUNT_ ? pc_verdict_names[v] : "unknown";
}

bool pc_verdict_is_failure(pc_verdict v) {
  return v != PC_VERDICT_PASS && v != PC_VERDICT_SKIPPED && v != PC_VERDICT_ERROR;
}

const char *pc_run_verdict_name(pc_run_verdict v) {
  switch (v) {
  case PC_RUN_PASS:
    return "pass";
  case PC_RUN_DRIFT:
    return "drift";
  case PC_RUN_ERROR:
    return "error";
  }
  return "unknown";
}

void pc_set_debug(bool on) {
  pc_loader_set_debug(on);
}

/* --- tensor set-up ---------------------------------------------------------------------- */

static void pc_copy_shape(int *rank, uint64_t *dims, const pc_dataset *d) {
  *rank = d->rank;
  memcpy(dims, d->dims, (size_t)d->rank * sizeof *dims);
}

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

static int pc_set_text(char **dst, const char *text) {
  free(*dst);
  *dst = pc_strdup(text);
  return *dst ? PC_OK : PC_ENOMEM;
}

/* Decides the verdicts that need no data: missing, skipped, error, dtype and shape mismatch.
 * Returns true when the pair still has to be compared. */
static bool pc_pre_verdict(pc_tensor *t, const pc_dataset *a, const pc_dataset *b, int *rc) {
  char why[512];
  *rc = PC_OK;
  if (!a || !b) {
    t->verdict = a ? PC_VERDICT_MISSING_IN_B : PC_VERDICT_MISSING_IN_A;
    *rc = pc_set_text(&t->message, a ? "only in A" : "only in B");
    return false;
  }
  if (a->kind == PC_KIND_ERROR || b->kind == PC_KIND_ERROR) {
    const pc_dataset *bad = a->kind == PC_KIND_ERROR ? a : b;
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
  } else if (!pc_same_shape(a, b)) {
    snprintf(why, sizeof why, "shapes differ");
    t->verdict = PC_VERDICT_SHAPE_MISMATCH;
  } else {
    return true;
  }
  *rc = pc_set_text(&t->message, why);
  return false;
}

/* --- streaming one pair ----------------------------------------------------------------- */

typedef struct pc_pair {
  pc_file *fa, *fb;
  const pc_dataset *a, *b;
  pc_tensor *t;
  size_t block;
} pc_pair;

static void pc_block_stats(pc_tensor *t, const pc_dataset *a, const pc_dataset *b,
                           const pc_reader *ra, const pc_reader *rb, size_t n, uint64_t base) {
  pc_kernel_args k = {&t->stats, &t->tol, t->compare, base, n};
  if (a->kind == PC_KIND_COMPLEX) {
    pc_kernel_complex(&k, pc_reader_values(ra), pc_reader_values(rb));
  } else if (a->kind == PC_KIND_INTEGER && b->kind == PC_KIND_INTEGER) {
    pc_kernel_int(&k, pc_reader_ints(ra), a->stored == PC_DTYPE_UINT64, pc_reader_ints(rb),
                  b->stored == PC_DTYPE_UINT64);
  } else if (a->kind == PC_KIND_FLOAT && b->kind == PC_KIND_FLOAT) {
    pc_kernel_float(&k, pc_reader_values(ra), pc_reader_values(rb));
  } else {
    pc_kernel_mixed(
        &k, a->kind == PC_KIND_INTEGER ? NULL : pc_reader_values(ra),
        a->kind == PC_KIND_INTEGER ? pc_reader_ints(ra) : NULL, a->stored == PC_DTYPE_UINT64,
        b->kind == PC_KIND_INTEGER ? NULL : pc_reader_values(rb),
        b->kind == PC_KIND_INTEGER ? pc_reader_ints(rb) : NULL, b->stored == PC_DTYPE_UINT64);
  }
  /* Only real float datasets carry a logical dtype other than their stored one. */
  if (a->logical != a->stored)
    t->stats.not_representable_a += pc_kernel_unrepresentable(pc_reader_values(ra), n, a->logical);
  if (b->logical != b->stored)
    t->stats.not_representable_b += pc_kernel_unrepresentable(pc_reader_values(rb), n, b->logical);
}

/* Streams both datasets block by block; a read failure makes the tensor an error. */
static int pc_stream_pair(const pc_pair *p) {
  pc_error e = {PC_OK, ""};
  pc_reader *ra = NULL, *rb = NULL;
  int rc = pc_reader_open(&ra, p->fa, p->a, p->block, &e);
  if (rc == PC_OK)
    rc = pc_reader_open(&rb, p->fb, p->b, p->block, &e);
  uint64_t base = 0;
  while (rc == PC_OK) {
    size_t na = 0, nb = 0;
    if ((rc = pc_reader_next(ra, &na, &e)) < 0 || (rc = pc_reader_next(rb, &nb, &e)) < 0)
      break;
    if (na == 0)
      break;
    pc_block_stats(p->t, p->a, p->b, ra, rb, na, base);
    base += na;
  }
  pc_reader_close(ra);
  pc_reader_close(rb);
  if (rc == PC_ENOMEM)
    return rc;
  if (rc < 0) {
    memset(&p->t->stats, 0, sizeof p->t->stats);
    p->t->verdict = PC_VERDICT_ERROR;
    return pc_set_text(&p->t->message, e.message);
  }
  return PC_OK;
}

/* One pass over A for the magnitude that tolerance models may scale with: max |a| and the
 * RMS over finite elements (complex: the modulus). */
static int pc_measure_magnitude(const pc_pair *p, pc_tol_context *ctx) {
  pc_error e = {PC_OK, ""};
  pc_reader *r = NULL;
  pc_magnitude m = {0, 0, 0};
  int rc = pc_reader_open(&r, p->fa, p->a, p->block, &e);
  for (size_t n = 1; rc == PC_OK && n;) {
    if ((rc = pc_reader_next(r, &n, &e)) == PC_OK && n)
      pc_kernel_magnitude(&m, p->a->kind, pc_reader_values(r), pc_reader_ints(r),
                          p->a->stored == PC_DTYPE_UINT64, n);
  }
  pc_reader_close(r);
  if (rc < 0) {
    p->t->verdict = PC_VERDICT_ERROR;
    return rc == PC_ENOMEM ? rc : pc_set_text(&p->t->message, e.message);
  }
  ctx->has_magnitude = true;
  ctx->max_abs_a = m.max_abs;
  ctx->rms_a = m.count ? sqrt(m.sum_squares / (double)m.count) : 0;
  return PC_OK;
}

/* The tolerance, measuring A's magnitude first when the tolerance model needs it. */
static int pc_resolve_tol(pc_pair *p, const pc_tolset *tols) {
  pc_tensor *t = p->t;
  pc_tol_context ctx = {t->reduction_length, t->accumulation, false, 0, 0};
  if (pc_tolset_needs_magnitude(tols, t->path, t->compare)) {
    int rc = pc_measure_magnitude(p, &ctx);
    if (rc < 0 || t->verdict == PC_VERDICT_ERROR)
      return rc;
  }
  t->tol = pc_tolset_resolve_ctx(tols, t->path, t->compare, &ctx);
  return PC_OK;
}

static pc_verdict pc_judge(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  double allowed = (t->tol.set & PC_TOL_MAX_MISMATCH_FRACTION) ? t->tol.max_mismatch_fraction : 0;
  if (s->nan_mismatches || s->inf_mismatches)
    return PC_VERDICT_DRIFT;
  if (s->mismatches == 0)
    return PC_VERDICT_PASS;
  /* count > 0 here: a tensor without elements has no mismatch. */
  return (double)s->mismatches / (double)s->count <= allowed ? PC_VERDICT_PASS : PC_VERDICT_DRIFT;
}

static int pc_note(pc_tensor *t, bool cross_grid) {
  char note[128];
  if (!cross_grid)
    return PC_OK;
  snprintf(note, sizeof note, "%s vs %s compared in %s ULPs", pc_dtype_name(t->dtype_a),
           pc_dtype_name(t->dtype_b), pc_dtype_name(t->compare));
  return pc_set_text(&t->note, note);
}

static int pc_compare_pair(pc_pair *p, const pc_tolset *tols) {
  pc_tensor *t = p->t;
  t->dtype_a = pc_numeric_dtype(p->a);
  t->dtype_b = pc_numeric_dtype(p->b);
  pc_copy_shape(&t->rank, t->dims, p->a ? p->a : p->b);
  t->rank_b = -1;
  if (p->a && p->b)
    pc_copy_shape(&t->rank_b, t->dims_b, p->b);
  int rc;
  if (!pc_pre_verdict(t, p->a, p->b, &rc))
    return rc;
  bool cross = false;
  t->reduction_length = p->a->reduction_length ? p->a->reduction_length : p->b->reduction_length;
  t->accumulation = p->a->accumulation ? p->a->accumulation : p->b->accumulation;
  t->is_complex = p->a->kind == PC_KIND_COMPLEX;
  t->compare = pc_dtype_compare(t->dtype_a, t->dtype_b, &cross);
  if ((rc = pc_resolve_tol(p, tols)) < 0 || t->verdict == PC_VERDICT_ERROR ||
      (rc = pc_note(t, cross)) < 0 || (rc = pc_stream_pair(p)) < 0)
    return rc;
  if (t->verdict != PC_VERDICT_ERROR)
    t->verdict = pc_judge(t);
  return PC_OK;
}

/* --- the run ---------------------------------------------------------------------------- */

static int pc_run_alloc(pc_run **out, const char *pa, const char *pb, size_t cap) {
  pc_run *run = calloc(1, sizeof *run);
  if (!run)
    return PC_ENOMEM;
  run->path_a = pc_strdup(pa);
  run->path_b = pc_strdup(pb);
  run->tensors = calloc(cap ? cap : 1, sizeof *run->tensors);
  *out = run;
  return run->path_a && run->path_b && run->tensors ? PC_OK : PC_ENOMEM;
}

static int pc_run_tensor(pc_run *run, pc_pair *p, const pc_tolset *tols) {
  pc_tensor *t = &run->tensors[run->ntensors++];
  p->t = t;
  t->path = pc_strdup((p->a ? p->a : p->b)->path);
  if (!t->path)
    return PC_ENOMEM;
  int rc = pc_compare_pair(p, tols);
  run->by_verdict[t->verdict]++;
  return rc;
}

static void pc_run_finish(pc_run *run) {
  run->verdict = PC_RUN_PASS;
  for (size_t v = 0; v < PC_VERDICT_COUNT_; v++)
    if (run->by_verdict[v] && pc_verdict_is_failure((pc_verdict)v))
      run->verdict = PC_RUN_DRIFT;
  if (run->by_verdict[PC_VERDICT_ERROR])
    run->verdict = PC_RUN_ERROR;
}

/* A's datasets in A's order, each with its namesake in B, then B's own in B's order. */
static int pc_run_all(pc_run *run, pc_file *fa, pc_file *fb, const pc_options *o) {
  pc_pair p = {fa, fb, NULL, NULL, NULL, o->block_elems ? o->block_elems : PC_DEFAULT_BLOCK_ELEMS};
  int rc = PC_OK;
  for (size_t i = 0; i < pc_file_count(fa) && rc == PC_OK; i++) {
    p.a = pc_file_dataset(fa, i);
    p.b = pc_file_find(fb, p.a->path);
    rc = pc_run_tensor(run, &p, o->tols);
  }
  for (size_t i = 0; i < pc_file_count(fb) && rc == PC_OK; i++) {
    p.b = pc_file_dataset(fb, i);
    p.a = NULL;
    if (!pc_file_find(fa, p.b->path))
      rc = pc_run_tensor(run, &p, o->tols);
  }
  pc_run_finish(run);
  return rc;
}

int pc_compare_files(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                     pc_error *err) {
  *out = NULL;
  if (!opts || opts->version != PC_OPTIONS_VERSION || !opts->tols || !path_a || !path_b)
    return pc_error_set(err, PC_EUSAGE, "pc_compare_files: bad arguments");
  pc_file *fa = NULL, *fb = NULL;
  pc_run *run = NULL;
  int rc = pc_file_open(&fa, path_a, err);
  if (rc == PC_OK)
    rc = pc_file_open(&fb, path_b, err);
  if (rc == PC_OK) {
    rc = pc_run_alloc(&run, path_a, path_b, pc_file_count(fa) + pc_file_count(fb));
    if (rc == PC_OK)
      rc = pc_run_all(run, fa, fb, opts);
    if (rc == PC_ENOMEM)
      pc_error_set(err, rc, "out of memory");
  }
  pc_file_close(fa);
  pc_file_close(fb);
  if (rc < 0) {
    pc_run_free(run);
    return rc;
  }
  *out = run;
  return PC_OK;
}

void pc_run_free(pc_run *run) {
  if (!run)
    return;
  for (size_t i = 0; i < run->ntensors; i++) {
    free(run->tensors[i].path);
    free(run->tensors[i].message);
    free(run->tensors[i].note);
  }
  free(run->tensors);
  free(run->path_a);
  free(run->path_b);
  free(run);
}
