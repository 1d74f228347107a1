/* The comparator (compare.h): pairs datasets by path, streams each pair through the element
 * kernels of docs/metrics.md and judges it against the tolerance. */
#include "fill.h"
#include "judge.h"
#include "kernel.h"
#include "loader.h"
#include "numerics.h"
#include "metrics.h"
#include "pc_internal.h"
#include "stream.h"

#include <paritycheck/compare.h>

#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* sqrt, INFINITY */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc, free */
#include <string.h>   /* strcmp */
#include <unistd.h>   /* sysconf */

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

typedef struct pc_pair {
  pc_file *fa, *fb;
  const pc_dataset *a, *b;
  pc_tensor *t;
  size_t block;
  pc_stream *stream;
  uint64_t max_memory; /* pc_options.max_memory, its default applied */
  bool quantiles;      /* not pc_options.skip_quantiles */
} pc_pair;

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
  return pc_set_text(&t->note, note);
}

/* The pipeline calls this once the tensor's figures are complete. */
static void pc_tensor_done(void *user, pc_tensor *t) {
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

static int pc_compare_pair(pc_pair *p, const pc_tolset *tols, pc_error *err) {
  pc_tensor *t = p->t;
  t->dtype_a = pc_numeric_dtype(p->a);
  t->dtype_b = pc_numeric_dtype(p->b);
  pc_copy_shape(&t->rank, t->dims, p->a ? p->a : p->b);
  t->rank_b = -1;
  if (p->a && p->b)
    pc_copy_shape(&t->rank_b, t->dims_b, p->b);
  int rc;
  if (!pc_pre_verdict(t, p->a, p->b, &rc) || !pc_within_memory(p, &rc))
    return pc_nomem(rc, t, err);
  bool cross = false;
  t->reduction_length = p->a->reduction_length ? p->a->reduction_length : p->b->reduction_length;
  t->accumulation = p->a->accumulation ? p->a->accumulation : p->b->accumulation;
  t->is_complex = p->a->kind == PC_KIND_COMPLEX;
  t->compare = pc_dtype_compare(t->dtype_a, t->dtype_b, &cross);
  if ((rc = pc_resolve_tol(p, tols)) < 0 || t->verdict == PC_VERDICT_ERROR ||
      (rc = pc_note(t, cross)) < 0)
    return pc_nomem(rc, t, err);
  if (t->tol.metrics.set && ((rc = pc_compute_metrics(p)) < 0 || t->verdict == PC_VERDICT_ERROR))
    return pc_nomem(rc, t, err);
  if (pc_fill_pair(p->a, p->b)) {
    if ((rc = pc_fill_compare(t, p->a, p->b, p->quantiles)) < 0)
      return pc_error_set(err, rc, "%s: out of memory", t->path);
    pc_tensor_done(NULL, t);
    return PC_OK;
  }
  return pc_stream_tensor(p->stream, t, p->fa, p->a, p->fb, p->b, err);
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

static int pc_run_tensor(pc_run *run, pc_pair *p, const pc_tolset *tols, pc_error *err) {
  pc_tensor *t = &run->tensors[run->ntensors++];
  p->t = t;
  t->path = pc_strdup((p->a ? p->a : p->b)->path);
  t->caused_by = -1;
  t->context.exec_index = p->a ? p->a->exec_index : p->b->exec_index;
  if (!t->path)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  return pc_compare_pair(p, tols, err);
}

/* Stored bytes of every pair that will be streamed, for progress reports. */
static uint64_t pc_total_bytes(const pc_file *fa, const pc_file *fb) {
  uint64_t total = 0;
  for (size_t i = 0; i < pc_file_count(fa); i++) {
    const pc_dataset *a = pc_file_dataset(fa, i), *b = pc_file_find(fb, a->path);
    if (b && pc_is_numeric(a) && pc_is_numeric(b) && pc_same_shape(a, b) &&
        !(a->all_fill && b->all_fill)) /* never-written pairs are not read */
      total += a->count * (a->elem_size + b->elem_size);
  }
  return total;
}

static unsigned pc_threads(const pc_options *o) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return o->threads ? o->threads : cores > 0 ? (unsigned)cores : 1;
}

/* A's datasets in A's order, each with its namesake in B, then B's own in B's order. */
static int pc_run_pairs(pc_run *run, pc_pair *p, const pc_tolset *tols, pc_error *err) {
  int rc = PC_OK;
  for (size_t i = 0; i < pc_file_count(p->fa) && rc == PC_OK; i++) {
    p->a = pc_file_dataset(p->fa, i);
    p->b = pc_file_find(p->fb, p->a->path);
    rc = pc_run_tensor(run, p, tols, err);
  }
  for (size_t i = 0; i < pc_file_count(p->fb) && rc == PC_OK; i++) {
    p->b = pc_file_dataset(p->fb, i);
    p->a = NULL;
    if (!pc_file_find(p->fa, p->b->path))
      rc = pc_run_tensor(run, p, tols, err);
  }
  return rc;
}

static int pc_run_all(pc_run *run, pc_file *fa, pc_file *fb, const pc_options *o, pc_error *err) {
  size_t block = o->block_elems ? o->block_elems : PC_DEFAULT_BLOCK_ELEMS;
  pc_stream_config cfg = {.threads = pc_threads(o),
                          .block_elems = block,
                          .done = pc_tensor_done,
                          .progress = o->progress,
                          .progress_user = o->progress_user,
                          .total_bytes = pc_total_bytes(fa, fb),
                          .quantiles = !o->skip_quantiles};
  pc_pair p = {.fa = fa,
               .fb = fb,
               .block = block,
               .max_memory = o->max_memory ? o->max_memory : PC_DEFAULT_MAX_MEMORY,
               .quantiles = !o->skip_quantiles};
  int rc = pc_stream_new(&p.stream, &cfg, err);
  if (rc == PC_OK)
    rc = pc_run_pairs(run, &p, o->tols, err);
  if (rc == PC_OK)
    rc = pc_stream_finish(p.stream, err);
  pc_stream_free(p.stream);
  if (rc == PC_OK && (rc = pc_judge_run(run)) < 0)
    pc_error_set(err, rc, "out of memory");
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
    if (rc == PC_ENOMEM)
      pc_error_set(err, rc, "out of memory");
    else
      rc = pc_run_all(run, fa, fb, opts, err);
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
  free(run->order);
  free(run->path_a);
  free(run->path_b);
  free(run->path_ref);
  free(run);
}
