/* The comparator (compare.h): pairs datasets by name (pairing.h), file pair by file pair in
 * folder mode, streams each pair through the element kernels of docs/metrics.md and judges it
 * against the tolerance. Files are compared one pair at a time, so that a folder of many dumps
 * never holds more than two open. */
#include "arena.h"
#include "comparator.h"
#include "fill.h"
#include "folder.h"
#include "judge.h"
#include "kernel.h"
#include "loader.h"
#include "metrics.h"
#include "names.h"
#include "numerics.h"
#include "pairing.h"
#include "pc_internal.h"
#include "spill.h"
#include "stream.h"
#include "tol_resolve.h"
#include "trust.h"

#include <paritycheck/compare.h>

#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* sqrt, INFINITY */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc, realloc, free */
#include <string.h>   /* strcmp, strchr */
#include <sys/stat.h> /* stat, S_ISDIR */

static const char *const pc_verdict_names[PC_VERDICT_COUNT_] = {
    "pass",           "drift",   "missing_in_a", "missing_in_b", "shape_mismatch",
    "dtype_mismatch", "skipped", "error",        "indeterminate"};

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
    pc_tensor_done(NULL, t);
    return PC_OK;
  }
  pc_stream_sides sd = {p->fa, p->a, p->fb, p->b, NULL, NULL};
  if ((rc = pc_pair_envelope_attach(p, &sd, err)) < 0 || t->verdict == PC_VERDICT_ERROR) {
    if (rc == PC_OK)
      pc_tensor_done(NULL, t);
    return rc;
  }
  return pc_stream_range(p->stream, t, &sd, from, to, err);
}

bool pc_pair_splittable(const pc_pair *p, const pc_tolset *tols) {
  pc_tol_context ctx = pc_pair_context(p);
  pc_tol tol = pc_tolset_resolve_ctx(tols, pc_tensor_dataset(p->t), p->t->compare, &ctx);
  return !p->a->sparse && !p->b->sparse && !tol.metrics.set;
}

/* --- the run ---------------------------------------------------------------------------- */

/* A comparison in progress, from file pair to file pair. */
typedef struct pc_cmp {
  pc_run *run;
  size_t cap; /* room in run->tensors */
  const pc_options *o;
  const pc_pair_sink *sink; /* NULL: read each pair */
  pc_pair p;
  uint64_t budget;               /* for suggestions (names.h) */
  size_t a_count, b_count, both; /* tensors (and lone files) of each side, and on both */
  char *example[2];              /* the first name of each side, for PC_ENOMATCH */
  bool realign_said;             /* the run's warning on re-aligned call indices is given */
} pc_cmp;

const char *pc_tensor_dataset(const pc_tensor *t) {
  if (!t->file)
    return t->path;
  size_t n = strlen(t->file);
  return strncmp(t->path, t->file, n) == 0 && t->path[n] == ':' ? t->path + n + 1 : "";
}

/* Room for n more tensors. Only between file pairs, when the stream holds none of them. */
static int pc_reserve(pc_cmp *c, size_t n, pc_error *err) {
  if (c->run->ntensors + n <= c->cap)
    return PC_OK;
  size_t cap = 2 * c->cap > c->run->ntensors + n ? 2 * c->cap : c->run->ntensors + n;
  void *t = c->run->tensors;
  if (pc_spill_resize(&t, &c->run->tensors_mapped, c->run->ntensors * sizeof(pc_tensor),
                      cap * sizeof(pc_tensor), PC_SPILL_MIN_RECORDS) != 0)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  c->run->tensors = t;
  c->cap = cap;
  return PC_OK;
}

/* "file:name", "file" (name NULL) or "name" (file NULL), malloc'd. */
static char *pc_display(const char *file, const char *name) {
  return !file ? pc_strdup(name) : name ? pc_names_full(file, name) : pc_strdup(file);
}

/* pc_display's name in the run's arena. */
static char *pc_display_kept(pc_run *run, const char *file, const char *name) {
  char *full = pc_display(file, name);
  char *kept = pc_arena_strdup(run->names, full);
  free(full);
  return kept;
}

/* The next tensor of the run (room reserved), path set, nothing measured. */
static pc_tensor *pc_new_tensor(pc_cmp *c, const char *file, const char *name, pc_error *err) {
  pc_tensor *t = pc_run_at(c->run, c->run->ntensors++);
  memset(t, 0, sizeof *t);
  t->caused_by = -1;
  t->context.exec_index = -1;
  t->rank = t->rank_b = -1;
  t->path = pc_display_kept(c->run, file, name);
  t->file = pc_arena_strdup(c->run->names, file);
  if (!t->path || (file && !t->file)) {
    pc_error_set(err, PC_ENOMEM, "out of memory");
    return NULL;
  }
  return t;
}

static void pc_note_side(pc_cmp *c, int side, const char *name) {
  if (!c->example[side])
    c->example[side] = pc_strdup(name);
}

/* A tensor of B only whose name a map or prefix changed says what B calls it. */
static int pc_renamed(pc_tensor *t, const char *b_path) {
  char why[PC_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof why, "only in B, where it is %s", b_path);
  return pc_set_text(&t->message, why);
}

static int pc_run_match(pc_cmp *c, const pc_pairing *pr, size_t i, const char *file,
                        pc_error *err) {
  const pc_match *m = &pr->m[i];
  pc_spill_touch(m);
  if (m->a)
    pc_spill_touch(m->a);
  if (m->b)
    pc_spill_touch(m->b);
  pc_tensor *t = pc_new_tensor(c, file, m->name, err);
  if (!t)
    return PC_ENOMEM;
  c->p.a = m->a;
  c->p.b = m->b;
  c->p.t = t;
  t->context.exec_index = (m->a ? m->a : m->b)->exec_index;
  if (m->suggest >= 0 && !(t->did_you_mean = pc_display(file, pr->m[m->suggest].name)))
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  bool data = false;
  int rc = pc_pair_setup(&c->p, &data, err);
  if (rc == PC_OK && data)
    rc = c->sink ? c->sink->add(c->sink->user, &c->p, c->run->ntensors - 1, err)
                 : pc_pair_data(&c->p, c->o->tols, 0, m->a->count, err);
  if (rc == PC_OK && m->renamed && (rc = pc_renamed(t, m->b->path)) < 0)
    pc_error_set(err, rc, "out of memory");
  return rc;
}

/* Stored bytes of the pairs that will be streamed, for progress reports. */
static uint64_t pc_pairing_bytes(const pc_pairing *pr) {
  uint64_t total = 0;
  for (size_t i = 0; i < pr->n; i++) {
    pc_spill_touch(&pr->m[i]);
    const pc_dataset *a = pr->m[i].a, *b = pr->m[i].b;
    if (a)
      pc_spill_touch(a);
    if (b)
      pc_spill_touch(b);
    if (a && b && pc_is_numeric(a) && pc_is_numeric(b) && pc_same_shape(a, b) &&
        !(a->all_fill && b->all_fill)) /* never-written pairs are not read */
      total += a->count * (a->elem_size + b->elem_size);
  }
  return total;
}

static void pc_tally_pairing(pc_cmp *c, const pc_pairing *pr) {
  c->a_count += pr->a_count;
  c->b_count += pr->b_count;
  c->both += pr->both;
  for (size_t i = 0; i < pr->n; i++) {
    pc_spill_touch(&pr->m[i]);
    if (pr->m[i].a)
      pc_note_side(c, 0, pr->m[i].name);
    if (pr->m[i].b)
      pc_note_side(c, 1, pr->m[i].name);
  }
}

static pc_attr *pc_find_attr(const pc_provenance *p, const char *name) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->attrs[i].name, name) == 0)
      return &p->attrs[i];
  return NULL;
}

/* Folds f's attributes into p: the first file's as they are, a later file's new ones added, a
 * value that differs from an earlier file's replaced by PC_PROVENANCE_VARIES. */
static int pc_merge_attrs(pc_provenance *p, const pc_file *f) {
  for (size_t i = 0; i < pc_file_attr_count(f); i++) {
    const pc_attr *a = pc_file_attr(f, i);
    pc_attr *old = pc_find_attr(p, a->name);
    if (old && strcmp(old->value, a->value) != 0) {
      old->kind = PC_ATTR_STRING;
      if (pc_set_text(&old->value, PC_PROVENANCE_VARIES) < 0)
        return PC_ENOMEM;
    } else if (!old) {
      pc_attr *v = realloc(p->attrs, (p->n + 1) * sizeof *v);
      if (!v)
        return PC_ENOMEM;
      p->attrs = v;
      v[p->n] = (pc_attr){pc_strdup(a->name), pc_strdup(a->value), a->kind};
      if (!v[p->n++].name || !v[p->n - 1].value)
        return PC_ENOMEM;
    }
  }
  return PC_OK;
}

/* A warning of the run (pc_run.warnings): fails nothing, shown on stderr and in JSON. */
static int pc_run_warn(pc_run *run, const char *text) {
  char **w = realloc(run->warnings, (run->nwarnings + 1) * sizeof *w);
  if (!w)
    return PC_ENOMEM;
  run->warnings = w;
  w[run->nwarnings] = pc_strdup(text);
  return w[run->nwarnings++] ? PC_OK : PC_ENOMEM;
}

/* Once a run, the first pair of files whose call indices were re-aligned (realign.h) says so:
 * a pairing not by name is worth knowing, and the example shows what was paired. */
static int pc_warn_realigned(pc_cmp *c, const pc_pairing *pr, const char *file) {
  char text[PC_ERROR_MESSAGE_MAX];
  const pc_match *m = &pr->m[pr->realigned_first];
  if (c->realign_said || !pr->realigned)
    return PC_OK;
  c->realign_said = true;
  pc_spill_touch(m);
  snprintf(text, sizeof text,
           "%s%sthe call indices (NNN_) of A and B disagree: %zu tensor%s paired by module path "
           "and call order instead of by name, e.g. A's %s with B's %s",
           file ? file : "", file ? ": " : "", pr->realigned, pr->realigned == 1 ? "" : "s",
           m->a->path, m->b->path);
  return pc_run_warn(c->run, text);
}

/* Every tensor of one pair of files; `file` is their relative path in folder mode. Every
 * tensor is done when it returns, so that the files can be closed. */
static int pc_run_files(pc_cmp *c, pc_file *fa, pc_file *fb, const char *file, pc_error *err) {
  pc_pairing pr;
  int rc = pc_pairing_build(&pr, fa, fb, file, c->o, &c->budget, err);
  if (rc < 0)
    return rc;
  pc_tally_pairing(c, &pr);
  if (pc_warn_realigned(c, &pr, file) < 0 || pc_merge_attrs(&c->run->provenance[0], fa) < 0 ||
      pc_merge_attrs(&c->run->provenance[1], fb) < 0) {
    pc_pairing_free(&pr);
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  }
  c->p.fa = fa;
  c->p.fb = fb;
  rc = pc_pair_envelope_open(c->o, pc_file_path(fa), file != NULL, &c->p.env, err);
  if (rc == PC_OK)
    rc = pc_reserve(c, pr.n, err);
  if (c->p.stream) /* none with a sink */
    pc_stream_expect(c->p.stream, pc_pairing_bytes(&pr));
  for (size_t i = 0; i < pr.n && rc == PC_OK; i++)
    rc = pc_run_match(c, &pr, i, file, err);
  int fin = c->p.stream ? pc_stream_finish(c->p.stream, err) : PC_OK;
  pc_envelope_close(c->p.env);
  c->p.env = NULL;
  pc_pairing_free(&pr);
  return rc < 0 ? rc : fin;
}

/* --- folder mode ------------------------------------------------------------------------- */

/* A file that stands for itself in the run: on one side only, not a dump, or unreadable. The
 * include and exclude globs, which select tensors, may leave out a skipped one (its path alone);
 * a file missing on one side or unreadable always counts, since it may hold tensors the globs
 * select (docs/robustness.md, "Fail closed"). */
static int pc_file_tensor(pc_cmp *c, const char *file, pc_verdict v, const char *why,
                          const char *suggest, pc_error *err) {
  if (v == PC_VERDICT_SKIPPED && !pc_names_selected(c->o, file, NULL))
    return PC_OK;
  int rc = pc_reserve(c, 1, err);
  pc_tensor *t = rc == PC_OK ? pc_new_tensor(c, file, NULL, err) : NULL;
  if (!t)
    return PC_ENOMEM;
  t->verdict = v;
  if (pc_set_text(&t->message, why) < 0 || (suggest && !(t->did_you_mean = pc_strdup(suggest))))
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  return PC_OK;
}

/* One relative path of the folders: its paths under A and B (NULL for a side without it),
 * whether each is a dump, why a side cannot be compared (NULL when it can: see pc_entry_bad),
 * and the closest lone file of the other side, or NULL. */
typedef struct pc_entry {
  const char *rel;
  char *path[2];
  bool dump[2];
  char *bad[2];
  const char *suggest;
} pc_entry;

/* Closes a pair of files (either may be NULL) once compared, and gives the heap's free pages
 * back: their walk freed tens of MB of small blocks at 200,000 datasets. */
static void pc_close_pair(pc_file *a, pc_file *b) {
  pc_file_close(a);
  pc_file_close(b);
  pc_heap_release();
}

pc_open_limits pc_options_limits(const pc_options *o) {
  return (pc_open_limits){o->max_memory ? o->max_memory : PC_DEFAULT_MAX_MEMORY, o->progress,
                          o->progress_user};
}

static int pc_run_pair_of_files(pc_cmp *c, const pc_entry *e, pc_error *err) {
  pc_file *f[2] = {NULL, NULL};
  pc_error why = {PC_OK, ""};
  pc_open_limits lim = pc_options_limits(c->o);
  int rc = pc_file_open_limited(&f[0], e->path[0], &lim, &why);
  if (rc == PC_OK)
    rc = pc_file_open_limited(&f[1], e->path[1], &lim, &why);
  if (rc == PC_ENOMEM)
    rc = pc_error_set(err, rc, "%s", why.message);
  else if (rc < 0)
    rc = pc_file_tensor(c, e->rel, PC_VERDICT_ERROR, why.message, NULL, err);
  else
    rc = pc_run_files(c, f[0], f[1], e->rel, err);
  pc_close_pair(f[0], f[1]);
  return rc;
}

/* An entry that a side cannot be read for is an error whatever the other side holds: an
 * unreadable or empty file, a FIFO, a dangling link is never "not a dump" nor "missing". */
static int pc_run_bad_entry(pc_cmp *c, const pc_entry *e, pc_error *err) {
  char why[PC_ERROR_MESSAGE_MAX];
  if (e->bad[0] && e->bad[1])
    snprintf(why, sizeof why, "A: %s; B: %s", e->bad[0], e->bad[1]);
  else
    snprintf(why, sizeof why, "%s: %s", e->bad[0] ? "A" : "B", e->bad[0] ? e->bad[0] : e->bad[1]);
  return pc_file_tensor(c, e->rel, PC_VERDICT_ERROR, why, NULL, err);
}

static int pc_run_entry(pc_cmp *c, const pc_entry *e, pc_error *err) {
  bool a = e->path[0] != NULL, b = e->path[1] != NULL;
  if (pc_envelope_is_sidecar(e->rel)) /* A's: read with its dump; B's: never believed */
    return PC_OK;
  if (e->bad[0] || e->bad[1])
    return pc_run_bad_entry(c, e, err);
  if (!(a && e->dump[0]) && !(b && e->dump[1]))
    return pc_file_tensor(c, e->rel, PC_VERDICT_SKIPPED, "not a tensor dump", NULL, err);
  if (!a || !b) {
    c->a_count += a;
    c->b_count += b;
    pc_note_side(c, a ? 0 : 1, e->rel);
    return pc_file_tensor(c, e->rel, a ? PC_VERDICT_MISSING_IN_B : PC_VERDICT_MISSING_IN_A,
                          a ? "file only in A" : "file only in B", e->suggest, err);
  }
  if (!e->dump[0] || !e->dump[1])
    return pc_file_tensor(c, e->rel, PC_VERDICT_ERROR,
                          e->dump[0] ? "B: not a tensor dump" : "A: not a tensor dump", NULL, err);
  return pc_run_pair_of_files(c, e, err);
}

/* Side s of entry e, from item it of its tree: its path, and whether it is a dump or why it
 * cannot be told. PC_ENOMEM. */
static int pc_entry_side(pc_entry *e, int s, const pc_tree_item *it, const char *root) {
  pc_error why = {PC_OK, ""};
  e->rel = it->rel;
  if (!(e->path[s] = pc_tree_path(root, it->rel)))
    return PC_ENOMEM;
  if (it->why)
    snprintf(why.message, sizeof why.message, "%s: %s", e->path[s], it->why);
  else if (pc_file_sniff(e->path[s], &e->dump[s], &why) == PC_OK)
    return PC_OK;
  return (e->bad[s] = pc_strdup(why.message)) ? PC_OK : PC_ENOMEM;
}

/* The union of the two trees, sorted, with each side's full path and whether it is a dump. */
static int pc_merge_trees(pc_entry **out, size_t *n, const pc_tree t[2], const char *root[2]) {
  pc_entry *v = calloc(t[0].n + t[1].n ? t[0].n + t[1].n : 1, sizeof *v);
  size_t i[2] = {0, 0};
  *out = v;
  *n = 0;
  while (v && (i[0] < t[0].n || i[1] < t[1].n)) {
    int cmp = i[0] == t[0].n   ? 1
              : i[1] == t[1].n ? -1
                               : pc_tree_cmp(t[0].v[i[0]].rel, t[1].v[i[1]].rel);
    pc_entry *e = &v[(*n)++];
    for (int s = 0; s < 2; s++)
      if (!((s == 0 && cmp > 0) || (s == 1 && cmp < 0)) &&
          pc_entry_side(e, s, &t[s].v[i[s]++], root[s]) < 0)
        return PC_ENOMEM;
  }
  return v ? PC_OK : PC_ENOMEM;
}

/* Suggestions for the files of one side only, among the other side's lone dumps. */
static int pc_suggest_files(pc_entry *v, size_t n, uint64_t *budget) {
  const char **names = malloc((n ? n : 1) * sizeof *names);
  bool *in = malloc(2 * (n ? n : 1) * sizeof *in);
  long *suggest = malloc((n ? n : 1) * sizeof *suggest);
  int rc = names && in && suggest ? PC_OK : PC_ENOMEM;
  for (size_t i = 0; rc == PC_OK && i < n; i++) {
    names[i] = v[i].rel;
    in[i] = v[i].path[0] && v[i].dump[0];
    in[n + i] = v[i].path[1] && v[i].dump[1];
  }
  if (rc == PC_OK)
    rc = pc_pairing_suggest(names, in, in + n, n, suggest, budget);
  for (size_t i = 0; rc == PC_OK && i < n; i++)
    v[i].suggest = suggest[i] >= 0 ? v[suggest[i]].rel : NULL;
  free(names);
  free(in);
  free(suggest);
  return rc;
}

static int pc_run_folders(pc_cmp *c, const char *root_a, const char *root_b, pc_error *err) {
  pc_tree t[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
  const char *root[2] = {root_a, root_b};
  pc_entry *v = NULL;
  size_t n = 0;
  int rc = pc_tree_list(&t[0], root_a, err);
  if (rc == PC_OK)
    rc = pc_tree_list(&t[1], root_b, err);
  if (rc == PC_OK &&
      (pc_merge_trees(&v, &n, t, root) < 0 || pc_suggest_files(v, n, &c->budget) < 0))
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  for (size_t i = 0; rc == PC_OK && i < n; i++)
    rc = pc_run_entry(c, &v[i], err);
  for (size_t i = 0; v && i < n; i++)
    for (int s = 0; s < 2; s++) {
      free(v[i].path[s]);
      free(v[i].bad[s]);
    }
  free(v);
  pc_tree_free(&t[0]);
  pc_tree_free(&t[1]);
  return rc;
}

/* --- the whole comparison ---------------------------------------------------------------- */

static int pc_run_single(pc_cmp *c, const char *path_a, const char *path_b, pc_error *err) {
  pc_file *fa = NULL, *fb = NULL;
  pc_open_limits lim = pc_options_limits(c->o);
  int rc = pc_file_open_limited(&fa, path_a, &lim, err);
  if (rc == PC_OK)
    rc = pc_file_open_limited(&fb, path_b, &lim, err);
  if (rc == PC_OK)
    rc = pc_run_files(c, fa, fb, NULL, err);
  pc_close_pair(fa, fb);
  return rc;
}

/* Both sides hold tensors, but none is on both: nothing was compared, which a report of
 * "everything missing" would hide behind a drift. */
static int pc_check_common(const pc_cmp *c, pc_error *err) {
  if (c->both || !c->a_count || !c->b_count)
    return PC_OK;
  return pc_error_set(err, PC_ENOMATCH,
                      "A and B have no tensor in common: A has %zu, e.g. %s; B has %zu, e.g. %s",
                      c->a_count, c->example[0], c->b_count, c->example[1]);
}

static int pc_add_warning(void *user, const char *glob) {
  char text[PC_ERROR_MESSAGE_MAX];
  snprintf(text, sizeof text, "tolerance rule '%s' matches no tensor", glob);
  return pc_run_warn(user, text);
}

/* A rule that matches no tensor is most likely a typo, or names of another model. */
static int pc_warn_unused_rules(pc_run *run, const pc_tolset *tols, pc_error *err) {
  const char **paths = malloc((run->ntensors ? run->ntensors : 1) * sizeof *paths);
  size_t n = 0;
  for (size_t i = 0; paths && i < run->ntensors; i++)
    if (*pc_tensor_dataset(pc_run_at(run, i)))
      paths[n++] = pc_tensor_dataset(pc_run_at(run, i));
  int rc = paths ? pc_tolset_unused_rules(tols, paths, n, pc_add_warning, run) : PC_ENOMEM;
  free(paths);
  return rc < 0 ? pc_error_set(err, rc, "out of memory") : PC_OK;
}

static int pc_check_args(const char *path_a, const char *path_b, const pc_options *o, bool *dirs,
                         pc_error *err) {
  struct stat sa, sb;
  if (!o || o->version != PC_OPTIONS_VERSION || !o->tols || !path_a || !path_b)
    return pc_error_set(err, PC_EUSAGE, "pc_compare_files: bad arguments");
  int rc = pc_names_check(o, err);
  if (rc < 0)
    return rc;
  bool da = stat(path_a, &sa) == 0 && S_ISDIR(sa.st_mode);
  bool db = stat(path_b, &sb) == 0 && S_ISDIR(sb.st_mode);
  *dirs = da && db;
  if (*dirs && o->envelope)
    return pc_error_set(err, PC_EUSAGE,
                        "an envelope file is for one file of A; in folder mode each file's "
                        "sidecar (x.envelope.h5 beside x.h5) is used");
  if (da != db)
    return pc_error_set(err, PC_EUSAGE,
                        "%s: is a directory and %s is not: compare two files or two directories",
                        da ? path_a : path_b, da ? path_b : path_a);
  return PC_OK;
}

/* A run that would pass without one tensor compared and found within tolerance: no tensor
 * took part, or every one was skipped. A gate's green must mean that something was compared. */
static int pc_check_compared(const pc_run *run, pc_error *err) {
  if (run->verdict != PC_RUN_PASS || run->by_verdict[PC_VERDICT_PASS])
    return PC_OK;
  if (!run->ntensors)
    return pc_error_set(err, PC_EEMPTY,
                        "%s vs %s: nothing was compared: no tensor takes part (the dumps hold "
                        "none, or --include/--exclude left none)",
                        run->path_a, run->path_b);
  const pc_tensor *t = pc_run_at(run, 0);
  return pc_error_set(
      err, PC_EEMPTY, "%s vs %s: nothing was compared: all %zu tensors were skipped (e.g. %s: %s)",
      run->path_a, run->path_b, run->ntensors, t->path, t->message ? t->message : "skipped");
}

/* Once a run, where the judge inferred execution order from names that may not sort into
 * call order (judge.h, pc_order_doubt): the trend, the causes and the first divergence then
 * rest on a guess worth knowing, and the fix is in the dump. */
static int pc_warn_order(pc_run *run, const pc_order_doubt *d, pc_error *err) {
  char text[PC_ERROR_MESSAGE_MAX];
  const char *consequence = "the trend, caused_by and the first divergence follow file "
                            "(alphabetical) order, which may not be call order; dump an "
                            "execution_index attribute or";
  if (d->kind == PC_ORDER_SURE)
    return PC_OK;
  if (d->kind == PC_ORDER_NO_CALL_INDEX)
    snprintf(text, sizeof text,
             "execution order inferred from tensor names, which carry no call index (e.g. %s): "
             "%s NNN_ name prefixes (python/paritycheck/dump.py does)",
             pc_run_at(run, (size_t)d->example)->path, consequence);
  else
    snprintf(text, sizeof text,
             "execution order inferred from tensor names, whose call indices do not increase in "
             "file order (%s comes before %s): %s zero-padded NNN_ name prefixes of one width "
             "(python/paritycheck/dump.py does)",
             pc_run_at(run, (size_t)d->before)->path, pc_run_at(run, (size_t)d->example)->path,
             consequence);
  return pc_run_warn(run, text) < 0 ? pc_error_set(err, PC_ENOMEM, "out of memory") : PC_OK;
}

int pc_run_conclude(pc_run *run, const pc_tolset *tols, bool allow_empty, pc_error *err) {
  pc_order_doubt doubt;
  int rc = pc_trust_claims(run);
  if (rc == PC_OK)
    rc = pc_judge_run(run, &doubt);
  pc_heap_release(); /* the judge's keys lie below the order it keeps: 9 MB at 200,000 tensors */
  if (rc < 0)
    return pc_error_set(err, rc, "out of memory");
  if (!allow_empty &&
      ((rc = pc_check_compared(run, err)) < 0 || (rc = pc_trust_check_finite(run, err)) < 0))
    return rc;
  if ((rc = pc_warn_order(run, &doubt, err)) < 0)
    return rc;
  return pc_warn_unused_rules(run, tols, err);
}

/* Once a run: B's tolerance-affecting attributes were ignored somewhere (trust.h). */
static int pc_warn_ignored_b(pc_run *run, size_t n, pc_error *err) {
  char text[PC_ERROR_MESSAGE_MAX];
  snprintf(text, sizeof text,
           "B's tolerance-affecting attributes (reduction_length, accumulation_dtype, "
           "module_type) were ignored on %zu tensors where A has none (each tensor's note names "
           "them): B may not set its own tolerance; --trust-b-metadata uses them",
           n);
  return pc_run_warn(run, text) < 0 ? pc_error_set(err, PC_ENOMEM, "out of memory") : PC_OK;
}

static int pc_run_all(pc_cmp *c, const char *path_a, const char *path_b, bool dirs, pc_error *err) {
  const pc_options *o = c->o;
  size_t block = o->block_elems ? o->block_elems : PC_DEFAULT_BLOCK_ELEMS;
  pc_stream_config cfg = {.threads = pc_threads_or_cores(o->threads),
                          .block_elems = block,
                          .done = pc_tensor_done,
                          .progress = o->progress,
                          .progress_user = o->progress_user,
                          .total_bytes = 0,
                          .quantiles = !o->skip_quantiles};
  c->p = (pc_pair){.names = c->run->names,
                   .block = block,
                   .max_memory = o->max_memory ? o->max_memory : PC_DEFAULT_MAX_MEMORY,
                   .quantiles = !o->skip_quantiles,
                   .trust_b = o->trust_b_metadata};
  int rc = c->sink ? PC_OK : pc_stream_new(&c->p.stream, &cfg, err); /* a sink reads nothing */
  if (rc == PC_OK)
    rc = dirs ? pc_run_folders(c, path_a, path_b, err) : pc_run_single(c, path_a, path_b, err);
  pc_stream_free(c->p.stream);
  if (rc == PC_OK)
    rc = pc_check_common(c, err);
  if (rc == PC_OK && c->p.ignored_b)
    rc = pc_warn_ignored_b(c->run, c->p.ignored_b, err);
  if (rc == PC_OK && !c->sink)
    rc = pc_run_conclude(c->run, o->tols, o->allow_empty, err);
  return rc;
}

int pc_compare_walk(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                    const pc_pair_sink *sink, pc_error *err) {
  bool dirs = false;
  *out = NULL;
  int rc = pc_check_args(path_a, path_b, opts, &dirs, err);
  if (rc < 0)
    return rc;
  pc_cmp c = {.o = opts, .sink = sink, .budget = PC_SUGGEST_BUDGET};
  if (!(c.run = calloc(1, sizeof *c.run)) || !(c.run->names = calloc(1, sizeof *c.run->names)) ||
      !(c.run->path_a = pc_strdup(path_a)) || !(c.run->path_b = pc_strdup(path_b)))
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK)
    rc = pc_run_all(&c, path_a, path_b, dirs, err);
  free(c.example[0]);
  free(c.example[1]);
  if (rc < 0) {
    pc_run_free(c.run);
    return rc;
  }
  *out = c.run;
  return PC_OK;
}

int pc_compare_files(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                     pc_error *err) {
  return pc_compare_walk(out, path_a, path_b, opts, NULL, err);
}

/* Frees x unless it lies in `names`. */
static void pc_free_unless_in(const pc_arena *names, void *x) {
  if (!pc_arena_owns(names, x))
    free(x);
}

void pc_tensor_clear(pc_tensor *t, const pc_arena *names) {
  pc_free_unless_in(names, t->dims);
  pc_free_unless_in(names, t->dims_b);
  pc_free_unless_in(names, t->path);
  pc_free_unless_in(names, t->file);
  pc_free_unless_in(names, t->module_type);
  free(t->message);
  free(t->note);
  free(t->did_you_mean);
}

void pc_run_free(pc_run *run) {
  if (!run)
    return;
  for (size_t i = 0; i < run->ntensors; i++)
    pc_tensor_clear(pc_run_at(run, i), run->names);
  for (int side = 0; side < 2; side++) {
    for (size_t i = 0; i < run->provenance[side].n; i++) {
      free(run->provenance[side].attrs[i].name);
      free(run->provenance[side].attrs[i].value);
    }
    free(run->provenance[side].attrs);
  }
  for (size_t i = 0; i < run->nwarnings; i++)
    free(run->warnings[i]);
  free(run->warnings);
  pc_spill_free(run->tensors, run->tensors_mapped);
  free(run->order);
  free(run->path_a);
  free(run->path_b);
  free(run->path_ref);
  pc_arena_free(run->names);
  free(run->names);
  free(run);
}
