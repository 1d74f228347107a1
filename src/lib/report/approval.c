/* Approvals (include/paritycheck/approval.h; file format and semantics in docs/review.md). The
 * file is YAML that this module writes itself (every string double-quoted, one key a line, the
 * tensors sorted by path, so that a review diff shows exactly what changed) and reads back with
 * libyaml's document API, each error at its node's line and column. */
#include "content_hash.h"
#include "escape.h" /* pc_report_utf8_len */
#include "json_util.h"
#include "pc_internal.h"
#include "report_file.h" /* pc_report_open, pc_report_close */
#include "run_facts.h"   /* pc_report_accepted, pc_report_mismatch_fraction */

#include <paritycheck/approval.h>

#include <errno.h>    /* errno */
#include <fnmatch.h>  /* fnmatch */
#include <inttypes.h> /* PRIx64, PRIu64 */
#include <math.h>     /* isnan, isinf, fabs */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* FILE, fprintf, fopen */
#include <stdlib.h>   /* calloc, realloc, free, qsort, bsearch, strtod, strtoull, getenv */
#include <string.h>   /* strcmp, strerror, strlen */
#include <time.h>     /* time, gmtime_r, strftime */
#include <yaml.h>     /* yaml_parser_t, yaml_document_t */

enum { APPROVAL_VERSION = 1 };
static const char HASH_PREFIX[] = "fnv1a64:";

/* The figures an approval accepts, in file order. */
enum {
  FIG_REL_RMS,
  FIG_MAX_ABS,
  FIG_MAX_REL,
  FIG_MAX_ULP,
  FIG_MISMATCH_FRACTION,
  FIG_NONFINITE,
  FIG_COUNT
};
static const char *const fig_names[FIG_COUNT] = {"rel_rms", "max_abs",           "max_rel",
                                                 "max_ulp", "mismatch_fraction", "nonfinite"};

typedef struct approval {
  char *tensor, *by, *date, *reason;
  pc_dtype compare;
  double fig[FIG_COUNT];
  unsigned metrics; /* bit per pc_metric recorded */
  double metric[PC_METRIC_COUNT_];
  uint64_t hash_a, hash_b;
} approval;

struct pc_approvals {
  approval *v; /* sorted by tensor path */
  size_t n;
  char *tol_source, *tol_digest; /* the "tolerances" record; NULL when the file has none */
};

static void approval_clear(approval *a) {
  free(a->tensor);
  free(a->by);
  free(a->date);
  free(a->reason);
}

void pc_approvals_free(pc_approvals *ap) {
  if (!ap)
    return;
  for (size_t i = 0; i < ap->n; i++)
    approval_clear(&ap->v[i]);
  free(ap->v);
  free(ap->tol_source);
  free(ap->tol_digest);
  free(ap);
}

const char *pc_approvals_tolerance_mismatch(const pc_approvals *ap, const char *path,
                                            const pc_tol_record *now, char *buf, size_t size) {
  if (!ap)
    return NULL;
  pc_gate g = {.path = (char *)path, .tol_source = ap->tol_source, .tol_digest = ap->tol_digest};
  return pc_gate_tolerance_mismatch(&g, now, buf, size);
}

static int by_tensor(const void *x, const void *y) {
  return strcmp(((const approval *)x)->tensor, ((const approval *)y)->tensor);
}

static const approval *find(const pc_approvals *ap, const char *path) {
  approval key = {.tensor = (char *)path};
  return ap && ap->n ? bsearch(&key, ap->v, ap->n, sizeof key, by_tensor) : NULL;
}

/* ---- figures ------------------------------------------------------------------------------ */

static void figures_of(const pc_tensor *t, double fig[FIG_COUNT]) {
  const pc_stats *s = &t->stats;
  fig[FIG_REL_RMS] = s->finite_terms ? pc_stats_aggregates(s).rel_rms : 0;
  fig[FIG_MAX_ABS] = s->max_abs;
  fig[FIG_MAX_REL] = s->max_rel;
  fig[FIG_MAX_ULP] = (double)s->max_ulp;
  fig[FIG_MISMATCH_FRACTION] = pc_report_mismatch_fraction(s);
  fig[FIG_NONFINITE] = (double)(s->nan_mismatches + s->inf_mismatches);
}

/* x within x0 and its slack; for a floor metric its shortfall from 1 within x0's. NaN never
 * holds. */
static bool holds(double x, double x0, bool floor) {
  if (floor)
    return 1 - x <= (1 - x0) * (1 + PC_APPROVAL_SLACK);
  return x <= x0 * (1 + PC_APPROVAL_SLACK);
}

/* ---- writing ------------------------------------------------------------------------------ */

/* A YAML double-quoted scalar: backslash, quote and every control character escaped. */
/* s double-quoted for YAML. A byte that is not part of valid UTF-8 is written "\\xff", which
 * YAML reads as U+00FF: the file stays readable (libyaml refuses invalid UTF-8), the text for
 * people; a tensor's exact bytes go into tensor_bytes (put_approval). */
static void put_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t n = *p < 0x80 ? 1 : pc_report_utf8_len(p);
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f || n == 0)
      fprintf(f, "\\x%02x", *p);
    else
      fwrite(p, 1, n, f);
    p += n ? n : 1;
  }
  fputc('"', f);
}

static void put_number(FILE *f, double x) {
  if (isnan(x))
    fputs(".nan", f);
  else if (isinf(x))
    fputs(x > 0 ? ".inf" : "-.inf", f);
  else
    fprintf(f, "%.17g", x);
}

static void put_approval(FILE *f, const approval *a) {
  fputs("  - tensor: ", f);
  put_quoted(f, a->tensor);
  if (!pc_json_valid_utf8(a->tensor)) {
    json_t *hex = pc_json_hex(a->tensor);
    fputs("\n    tensor_bytes: ", f);
    put_quoted(f, hex ? json_string_value(hex) : ""); /* "": unreadable, so never in place */
    json_decref(hex);
  }
  fputs("\n    by: ", f);
  put_quoted(f, a->by);
  fputs("\n    date: ", f);
  put_quoted(f, a->date);
  fputs("\n    reason: ", f);
  put_quoted(f, a->reason);
  fprintf(f, "\n    compare_dtype: %s\n    figures:\n", pc_dtype_name(a->compare));
  for (int k = 0; k < FIG_COUNT; k++) {
    fprintf(f, "      %s: ", fig_names[k]);
    put_number(f, a->fig[k]);
    fputc('\n', f);
  }
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    if ((a->metrics >> m) & 1u) {
      fprintf(f, "      %s: ", pc_metric_name((pc_metric)m));
      put_number(f, a->metric[m]);
      fputc('\n', f);
    }
  fprintf(f, "    provenance:\n      a: \"%s%016" PRIx64 "\"\n      b: \"%s%016" PRIx64 "\"\n",
          HASH_PREFIX, a->hash_a, HASH_PREFIX, a->hash_b);
}

/* The file attributes of both inputs when the approval was written (the dumpers' backend, torch
 * version, device ...), for the reviewer: provenance beside the content hashes, which alone
 * decide staleness (an attribute such as a date differs on every rerun). */
static void put_attributes(FILE *f, const pc_run *run) {
  if (!run->provenance[0].n && !run->provenance[1].n)
    return;
  fputs("attributes:\n", f);
  for (int side = 0; side < 2; side++) {
    const pc_provenance *p = &run->provenance[side];
    fputs(side ? "  b:" : "  a:", f);
    fputs(p->n ? "\n" : " {}\n", f);
    for (size_t i = 0; i < p->n; i++) {
      fputs("    ", f);
      put_quoted(f, p->attrs[i].name);
      fputs(": ", f);
      put_quoted(f, p->attrs[i].value);
      fputc('\n', f);
    }
  }
}

/* The tolerance set the approvals were judged under (pc_tol_record), when the caller gave it. */
static void put_tolerances(FILE *f, const pc_tol_record *t) {
  if (!t || !t->digest)
    return;
  fputs("tolerances:\n  source: ", f);
  put_quoted(f, t->source ? t->source : "");
  fputs("\n  digest: ", f);
  put_quoted(f, t->digest);
  fputc('\n', f);
}

/* An approval file written is read before it replaces the old one (pc_report_file.verify). */
static int reads_back(const char *tmp, pc_error *err) {
  pc_approvals *ap = NULL;
  int rc = pc_approvals_load(&ap, tmp, err);
  pc_approvals_free(ap);
  return rc;
}

static int write_file(const char *path, const approval *v, size_t n, const pc_run *run,
                      const pc_tol_record *tols, pc_error *err) {
  pc_report_file rf;
  int rc = pc_report_open(&rf, path, err);
  if (rc < 0)
    return rc;
  fputs("# paritycheck approvals: figures a reviewer accepted (docs/review.md).\n", rf.f);
  fprintf(rf.f, "version: %d\na: ", APPROVAL_VERSION);
  put_quoted(rf.f, run->path_a);
  fputs("\nb: ", rf.f);
  put_quoted(rf.f, run->path_b);
  fputc('\n', rf.f);
  put_attributes(rf.f, run);
  put_tolerances(rf.f, tols);
  fputs(n ? "approvals:\n" : "approvals: []\n", rf.f);
  for (size_t i = 0; i < n; i++)
    put_approval(rf.f, &v[i]);
  rf.verify = reads_back;
  return pc_report_close(&rf, "the approval file", err);
}

static int today(char buf[16], const pc_approve_options *o) {
  if (o->date)
    return snprintf(buf, 16, "%s", o->date) < 16 ? PC_OK : PC_EUSAGE;
  const char *epoch = getenv("SOURCE_DATE_EPOCH");
  time_t now = epoch ? (time_t)strtoll(epoch, NULL, 10) : time(NULL);
  struct tm tm;
  return gmtime_r(&now, &tm) && strftime(buf, 16, "%Y-%m-%d", &tm) ? PC_OK : PC_EUSAGE;
}

static bool wanted(const pc_tensor *t, const pc_approve_options *o) {
  return t->verdict == PC_VERDICT_DRIFT && (!o->only || fnmatch(o->only, t->path, 0) == 0);
}

static int new_approval(approval *a, const pc_tensor *t, const pc_approve_options *o,
                        const char *date) {
  a->tensor = pc_strdup(t->path);
  a->by = pc_strdup(o->by);
  a->reason = pc_strdup(o->reason);
  a->date = pc_strdup(date);
  a->compare = t->compare;
  figures_of(t, a->fig);
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    if (t->metrics[m].present) {
      a->metrics |= 1u << m;
      a->metric[m] = t->metrics[m].value;
    }
  return a->tensor && a->by && a->reason && a->date ? PC_OK : PC_ENOMEM;
}

/* The content hashes of both inputs for v's tensors. */
static int hash_inputs(approval *v, size_t n, const pc_run *run, pc_error *err) {
  const char **paths = calloc(n + 1, sizeof *paths);
  uint64_t *h = calloc(2 * n + 1, sizeof *h);
  bool *found = calloc(n + 1, sizeof *found);
  int rc = paths && h && found ? PC_OK : pc_error_set(err, PC_ENOMEM, "out of memory");
  for (size_t i = 0; i < n && rc == PC_OK; i++)
    paths[i] = v[i].tensor;
  if (rc == PC_OK && (rc = pc_content_hashes_at(run->path_a, paths, n, h, found, err)) == PC_OK)
    rc = pc_content_hashes_at(run->path_b, paths, n, h + n, found, err);
  for (size_t i = 0; i < n && rc == PC_OK; i++) {
    v[i].hash_a = h[i];
    v[i].hash_b = h[n + i];
  }
  free(paths);
  free(h);
  free(found);
  return rc;
}

static int copy_approval(approval *dst, const approval *src) {
  *dst = *src;
  dst->tensor = pc_strdup(src->tensor);
  dst->by = pc_strdup(src->by);
  dst->date = pc_strdup(src->date);
  dst->reason = pc_strdup(src->reason);
  return dst->tensor && dst->by && dst->date && dst->reason ? PC_OK : PC_ENOMEM;
}

/* The run's new approvals, then the previous ones of other tensors, sorted. */
static int collect(approval *v, size_t *n, const pc_run *run, const pc_approvals *prev,
                   const pc_approve_options *o, const char *date, pc_error *err) {
  int rc = PC_OK;
  for (size_t i = 0; i < run->ntensors && rc == PC_OK; i++)
    if (wanted(pc_run_at(run, i), o))
      rc = new_approval(&v[(*n)++], pc_run_at(run, i), o, date);
  size_t fresh = *n;
  if (rc == PC_OK)
    rc = hash_inputs(v, fresh, run, err);
  qsort(v, fresh, sizeof *v, by_tensor);
  for (size_t i = 0; prev && i < prev->n && rc == PC_OK; i++) {
    approval key = {.tensor = prev->v[i].tensor};
    if (!fresh || !bsearch(&key, v, fresh, sizeof key, by_tensor))
      rc = copy_approval(&v[(*n)++], &prev->v[i]);
  }
  qsort(v, *n, sizeof *v, by_tensor);
  return rc == PC_ENOMEM ? pc_error_set(err, rc, "out of memory") : rc;
}

int pc_approvals_save(const char *path, const pc_run *run, const pc_approvals *previous,
                      const pc_approve_options *opts, pc_error *err) {
  char date[16];
  if (opts && opts->version != 1 && opts->version != PC_APPROVE_OPTIONS_VERSION)
    return pc_error_set(err, PC_EUSAGE, "pc_approvals_save: options of version %d, not 1 or %d",
                        opts->version, PC_APPROVE_OPTIONS_VERSION);
  if (!path || !run || !opts || !opts->by || !*opts->by || !opts->reason || !*opts->reason)
    return pc_error_set(err, PC_EUSAGE, "approving needs a file, a run, --by NAME and --reason");
  if (today(date, opts) < 0)
    return pc_error_set(err, PC_EUSAGE, "bad approval date");
  size_t cap = run->ntensors + (previous ? previous->n : 0) + 1, n = 0;
  approval *v = calloc(cap, sizeof *v);
  int rc = v ? collect(v, &n, run, previous, opts, date, err)
             : pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK) /* version 1 has no `tolerances` */
    rc = write_file(path, v, n, run, opts->version > 1 ? opts->tolerances : NULL, err);
  for (size_t i = 0; v && i < cap; i++)
    approval_clear(&v[i]);
  free(v);
  return rc;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct reader {
  yaml_document_t doc;
  const char *path;
  pc_error *err;
} reader;

static int bad_at(const reader *r, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* PC_EPARSE with "path:line:column: why" at the node (1-based). */
static int bad_at(const reader *r, const yaml_node_t *node, const char *fmt, ...) {
  char why[PC_ERROR_MESSAGE_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return pc_error_set(r->err, PC_EPARSE, "%s:%zu:%zu: %s", r->path, node->start_mark.line + 1,
                      node->start_mark.column + 1, why);
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of `key` in mapping m, or NULL. */
static yaml_node_t *get(const reader *r, const yaml_node_t *m, const char *key) {
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    const char *k = scalar(yaml_document_get_node((yaml_document_t *)&r->doc, p->key));
    if (k && strcmp(k, key) == 0)
      return yaml_document_get_node((yaml_document_t *)&r->doc, p->value);
  }
  return NULL;
}

/* Every key of mapping m is one of names[0..n). */
static int known_keys(const reader *r, const yaml_node_t *m, const char *const *names, size_t n,
                      const char *where) {
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    yaml_node_t *key = yaml_document_get_node((yaml_document_t *)&r->doc, p->key);
    const char *k = scalar(key);
    size_t i = 0;
    while (k && i < n && strcmp(k, names[i]) != 0)
      i++;
    if (!k || i == n)
      return bad_at(r, key, "unknown key '%.64s' in %s", k ? k : "?", where);
  }
  return PC_OK;
}

static int need_string(const reader *r, const yaml_node_t *m, const char *key, char **out) {
  const yaml_node_t *v = get(r, m, key);
  if (!v)
    return bad_at(r, m, "missing '%s'", key);
  if (!scalar(v) || !*scalar(v))
    return bad_at(r, v, "'%s' must be a non-empty string", key);
  *out = pc_strdup(scalar(v));
  return *out ? PC_OK : pc_error_set(r->err, PC_ENOMEM, "out of memory reading %s", r->path);
}

static int need_number(const reader *r, const yaml_node_t *v, const char *key, double *out) {
  const char *s = scalar(v);
  char *end = NULL;
  if (s && (strcmp(s, ".nan") == 0 || strcmp(s, ".inf") == 0 || strcmp(s, "-.inf") == 0)) {
    *out = s[0] == '-' ? -INFINITY : s[1] == 'n' ? NAN : INFINITY;
    return PC_OK;
  }
  errno = 0;
  if (s && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
    *out = strtod(s, &end);
  if (!s || !end || end == s || *end || errno == ERANGE || *out < 0)
    return bad_at(r, v, "'%s' must be a number >= 0", key);
  return PC_OK;
}

static int read_figures(const reader *r, const yaml_node_t *m, approval *a) {
  const char *names[FIG_COUNT + PC_METRIC_COUNT_];
  for (int k = 0; k < FIG_COUNT; k++)
    names[k] = fig_names[k];
  for (int k = 0; k < PC_METRIC_COUNT_; k++)
    names[FIG_COUNT + k] = pc_metric_name((pc_metric)k);
  if (!m || m->type != YAML_MAPPING_NODE)
    return bad_at(r, m, "'figures' must be a mapping");
  int rc = known_keys(r, m, names, FIG_COUNT + PC_METRIC_COUNT_, "'figures'");
  for (int k = 0; k < FIG_COUNT && rc == PC_OK; k++) {
    const yaml_node_t *v = get(r, m, names[k]);
    rc = v ? need_number(r, v, names[k], &a->fig[k]) : bad_at(r, m, "missing '%s'", names[k]);
  }
  for (int k = 0; k < PC_METRIC_COUNT_ && rc == PC_OK; k++) {
    const yaml_node_t *v = get(r, m, names[FIG_COUNT + k]);
    if (v && (rc = need_number(r, v, names[FIG_COUNT + k], &a->metric[k])) == PC_OK)
      a->metrics |= 1u << k;
  }
  return rc;
}

static int read_hash(const reader *r, const yaml_node_t *m, const char *key, uint64_t *out) {
  const yaml_node_t *v = m ? get(r, m, key) : NULL;
  const char *s = scalar(v);
  size_t plen = sizeof HASH_PREFIX - 1;
  char *end = NULL;
  if (s && strncmp(s, HASH_PREFIX, plen) == 0 && strlen(s) == plen + 16)
    *out = strtoull(s + plen, &end, 16);
  if (!end || *end)
    return bad_at(r, v ? v : m, "'provenance.%s' must be \"%s\" and 16 hex digits", key,
                  HASH_PREFIX);
  return PC_OK;
}

/* tensor_bytes: the exact bytes of a tensor path that is not UTF-8, which replace `tensor`. */
static int read_tensor_bytes(const reader *r, const yaml_node_t *v, approval *a) {
  char *path = NULL;
  int rc = scalar(v) ? pc_hex_decode(scalar(v), &path) : PC_EPARSE;
  if (rc == PC_EPARSE)
    return bad_at(r, v, "'tensor_bytes' must be the hex digits of a tensor path's bytes");
  if (rc < 0)
    return pc_error_set(r->err, PC_ENOMEM, "out of memory reading %s", r->path);
  free(a->tensor);
  a->tensor = path;
  return PC_OK;
}

static int read_approval(const reader *r, const yaml_node_t *m, approval *a) {
  static const char *const keys[] = {"tensor", "tensor_bytes",  "by",      "date",
                                     "reason", "compare_dtype", "figures", "provenance"};
  if (m->type != YAML_MAPPING_NODE)
    return bad_at(r, m, "an approval must be a mapping");
  int rc = known_keys(r, m, keys, sizeof keys / sizeof keys[0], "an approval");
  char *dt = NULL;
  if (rc == PC_OK && !(rc = need_string(r, m, "tensor", &a->tensor)) &&
      !(rc = need_string(r, m, "by", &a->by)) && !(rc = need_string(r, m, "date", &a->date)) &&
      !(rc = need_string(r, m, "reason", &a->reason)) &&
      !(rc = need_string(r, m, "compare_dtype", &dt)) &&
      (a->compare = pc_dtype_from_name(dt)) == PC_DTYPE_NONE)
    rc = bad_at(r, get(r, m, "compare_dtype"), "'compare_dtype' is not a dtype name");
  free(dt);
  if (rc == PC_OK && get(r, m, "tensor_bytes"))
    rc = read_tensor_bytes(r, get(r, m, "tensor_bytes"), a);
  const yaml_node_t *prov = rc == PC_OK ? get(r, m, "provenance") : NULL;
  if (rc == PC_OK && (!prov || prov->type != YAML_MAPPING_NODE))
    rc = bad_at(r, prov ? prov : m, "'provenance' must be a mapping with a and b");
  const yaml_node_t *figs = rc == PC_OK ? get(r, m, "figures") : NULL;
  if (rc == PC_OK && !figs)
    rc = bad_at(r, m, "missing 'figures'");
  if (rc == PC_OK && !(rc = read_figures(r, figs, a)) &&
      !(rc = read_hash(r, prov, "a", &a->hash_a)))
    rc = read_hash(r, prov, "b", &a->hash_b);
  return rc;
}

/* The "tolerances" record, when there is one: a mapping of source and digest. */
static int read_tolerances(const reader *r, const yaml_node_t *t, pc_approvals *ap) {
  static const char *const keys[] = {"source", "digest"};
  if (!t)
    return PC_OK;
  if (t->type != YAML_MAPPING_NODE)
    return bad_at(r, t, "'tolerances' must be a mapping of source and digest");
  int rc = known_keys(r, t, keys, 2, "'tolerances'");
  if (rc == PC_OK)
    rc = need_string(r, t, "source", &ap->tol_source);
  return rc == PC_OK ? need_string(r, t, "digest", &ap->tol_digest) : rc;
}

static int read_root(const reader *r, pc_approvals *ap) {
  static const char *const keys[] = {"version", "a", "b", "attributes", "tolerances", "approvals"};
  yaml_node_t *root = yaml_document_get_root_node((yaml_document_t *)&r->doc);
  if (!root || root->type != YAML_MAPPING_NODE)
    return pc_error_set(r->err, PC_EPARSE, "%s:1:1: not an approval file (no mapping)", r->path);
  int rc = known_keys(r, root, keys, 6, "the top level");
  if (rc == PC_OK)
    rc = read_tolerances(r, get(r, root, "tolerances"), ap);
  const yaml_node_t *version = get(r, root, "version"), *list = get(r, root, "approvals");
  const yaml_node_t *attrs = get(r, root, "attributes");
  if (rc == PC_OK && attrs && attrs->type != YAML_MAPPING_NODE)
    rc = bad_at(r, attrs, "'attributes' must be a mapping (a and b: the inputs' attributes)");
  if (rc == PC_OK && (!scalar(version) || strcmp(scalar(version), "1") != 0))
    rc = bad_at(r, version ? version : root, "'version' must be %d", APPROVAL_VERSION);
  if (rc == PC_OK && (!list || list->type != YAML_SEQUENCE_NODE))
    rc = bad_at(r, list ? list : root, "'approvals' must be a sequence");
  if (rc < 0)
    return rc;
  size_t n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
  if (!(ap->v = calloc(n + 1, sizeof *ap->v)))
    return pc_error_set(r->err, PC_ENOMEM, "out of memory reading %s", r->path);
  for (size_t i = 0; i < n && rc == PC_OK; i++, ap->n++) {
    const yaml_node_t *item =
        yaml_document_get_node((yaml_document_t *)&r->doc, list->data.sequence.items.start[i]);
    rc = read_approval(r, item, &ap->v[i]);
  }
  if (rc < 0) /* the approval that failed may lack its tensor: nothing to sort */
    return rc;
  qsort(ap->v, ap->n, sizeof *ap->v, by_tensor);
  for (size_t i = 1; i < ap->n && rc == PC_OK; i++)
    if (strcmp(ap->v[i - 1].tensor, ap->v[i].tensor) == 0)
      rc = pc_error_set(r->err, PC_EPARSE, "%s: tensor %s is approved twice", r->path,
                        ap->v[i].tensor);
  return rc;
}

/* Nesting an approval file may have: it needs four levels (the file, its list, an approval,
 * its figures), and libyaml's scanner takes time quadratic in the depth (each token revisits
 * every open level): 40,000 nested '[' took 9 s, so a hostile file would stall the run
 * (issue 30). */
enum { MAX_DEPTH = 32 };

static int yaml_problem(const reader *r, const yaml_parser_t *parser) {
  return pc_error_set(r->err, PC_EPARSE, "%s:%zu:%zu: invalid YAML: %s", r->path,
                      parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                      parser->problem ? parser->problem : "unknown error");
}

/* The file's events, up to its end or to the first that opens level MAX_DEPTH + 1: PC_EPARSE
 * naming the file and the line there, before libyaml ever builds or scans that deep. */
static int check_depth(const unsigned char *text, size_t len, const reader *r) {
  yaml_parser_t parser;
  yaml_event_t ev;
  if (!yaml_parser_initialize(&parser))
    return pc_error_set(r->err, PC_ENOMEM, "out of memory reading %s", r->path);
  yaml_parser_set_input_string(&parser, text, len);
  int rc = PC_OK, depth = 0;
  for (bool end = false; rc == PC_OK && !end;) {
    if (!yaml_parser_parse(&parser, &ev))
      break; /* the load below says why, as it always did */
    end = ev.type == YAML_STREAM_END_EVENT;
    if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
      depth++;
    else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
      depth--;
    if (depth > MAX_DEPTH)
      rc = pc_error_set(r->err, PC_EPARSE, "%s:%zu:%zu: nested deeper than %d levels", r->path,
                        ev.start_mark.line + 1, ev.start_mark.column + 1, MAX_DEPTH);
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&parser);
  return rc;
}

/* All of f, read once for the two parses (it may be a pipe: --approved <(...)). */
static int read_all(FILE *f, const reader *r, unsigned char **text, size_t *len) {
  size_t cap = 1 << 16;
  *len = 0;
  for (unsigned char *grown; (grown = realloc(*text, cap)) != NULL; cap *= 2) {
    *text = grown;
    *len += fread(*text + *len, 1, cap - *len, f);
    if (*len < cap)
      return ferror(f)
                 ? pc_error_set(r->err, PC_EIO, "%s: cannot read: %s", r->path, strerror(errno))
                 : PC_OK;
  }
  return pc_error_set(r->err, PC_ENOMEM, "out of memory reading %s", r->path);
}

static int parse_file(FILE *f, reader *r, pc_approvals *ap) {
  yaml_parser_t parser;
  unsigned char *text = NULL;
  size_t len = 0;
  int rc = read_all(f, r, &text, &len);
  if (rc == PC_OK)
    rc = check_depth(text, len, r);
  if (rc == PC_OK && !yaml_parser_initialize(&parser))
    rc = pc_error_set(r->err, PC_ENOMEM, "out of memory reading %s", r->path);
  if (rc < 0) {
    free(text);
    return rc;
  }
  yaml_parser_set_input_string(&parser, text, len);
  if (!yaml_parser_load(&parser, &r->doc)) {
    rc = yaml_problem(r, &parser);
  } else {
    rc = read_root(r, ap);
    yaml_document_delete(&r->doc);
  }
  yaml_parser_delete(&parser);
  free(text);
  return rc;
}

int pc_approvals_load(pc_approvals **out, const char *path, pc_error *err) {
  if (!out || !path)
    return pc_error_set(err, PC_EUSAGE, "pc_approvals_load: out and path are required");
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return pc_error_set(err, PC_EIO, "%s: cannot open: %s", path, strerror(errno));
  reader r = {.path = path, .err = err};
  pc_approvals *ap = calloc(1, sizeof *ap);
  int rc = ap ? parse_file(f, &r, ap) : pc_error_set(err, PC_ENOMEM, "out of memory");
  fclose(f);
  if (rc < 0) {
    pc_approvals_free(ap);
    return rc;
  }
  *out = ap;
  return PC_OK;
}

/* ---- the gate ----------------------------------------------------------------------------- */

static int set_note(pc_gate_tensor *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int set_note(pc_gate_tensor *g, const char *fmt, ...) {
  char buf[PC_REASON_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g->approval = pc_strdup(buf);
  return g->approval ? PC_OK : PC_ENOMEM;
}

/* The first figure of t that grew beyond a's, as "rel_rms 0.003 > approved 0.0012", or "". */
static void growth(char *buf, size_t size, const pc_tensor *t, const approval *a) {
  double fig[FIG_COUNT];
  figures_of(t, fig);
  buf[0] = '\0';
  for (int k = 0; k < FIG_COUNT; k++)
    if (!holds(fig[k], a->fig[k], false)) {
      snprintf(buf, size, "%s %.3g > approved %.3g", fig_names[k], fig[k], a->fig[k]);
      return;
    }
  for (int m = 0; m < PC_METRIC_COUNT_; m++) {
    bool floor = pc_metric_is_floor((pc_metric)m);
    if (!((a->metrics >> m) & 1u) || !t->metrics[m].present)
      continue;
    if (!holds(t->metrics[m].value, a->metric[m], floor)) {
      snprintf(buf, size, "%s %.3g %s approved %.3g", pc_metric_name((pc_metric)m),
               t->metrics[m].value, floor ? "<" : ">", a->metric[m]);
      return;
    }
  }
}

/* One tensor with an approval whose A input is unchanged. */
static int judge_approved(pc_gate_tensor *g, const pc_tensor *t, const approval *a) {
  char grew[256];
  if (t->verdict == PC_VERDICT_PASS) {
    g->change = PC_CHANGE_BETTER;
    return set_note(g, "within the profile; approved by %s on %s: %s", a->by, a->date, a->reason);
  }
  if (t->verdict != PC_VERDICT_DRIFT || t->compare != a->compare) {
    g->change = PC_CHANGE_WORSE;
    g->fails = pc_verdict_is_failure(t->verdict);
    return set_note(g, "stale approval by %s on %s: now %s in %s", a->by, a->date,
                    pc_verdict_name(t->verdict), pc_dtype_name(t->compare));
  }
  growth(grew, sizeof grew, t, a);
  g->change = grew[0] ? PC_CHANGE_WORSE : PC_CHANGE_UNCHANGED;
  g->fails = grew[0] != '\0';
  if (grew[0])
    return set_note(g, "exceeds the approval by %s on %s (%s): %s", a->by, a->date, a->reason,
                    grew);
  return set_note(g, "approved by %s on %s: %s", a->by, a->date, a->reason);
}

static int judge_tensor(pc_gate *gate, size_t i, const pc_tensor *t, const approval *a,
                        bool a_changed) {
  pc_gate_tensor *g = &gate->tensors[i];
  g->in_baseline = a != NULL;
  int rc = PC_OK;
  if (!a) {
    g->fails = pc_verdict_is_failure(t->verdict);
    g->change = g->fails ? PC_CHANGE_NEW : PC_CHANGE_UNCHANGED;
  } else if (a_changed) {
    g->fails = pc_verdict_is_failure(t->verdict);
    g->change = g->fails ? PC_CHANGE_NEW : PC_CHANGE_UNCHANGED;
    gate->baseline_only++;
    rc = set_note(g, "stale approval by %s on %s: A's content changed", a->by, a->date);
  } else {
    rc = judge_approved(g, t, a);
  }
  gate->by_change[g->change]++;
  gate->failures += g->fails;
  return rc;
}

/* A's content hash of every approved tensor, in approval order; changed[k] when the run's A no
 * longer holds approval k's content (or no longer has it). */
static int a_changes(const pc_approvals *ap, const pc_run *run, bool *changed, pc_error *err) {
  const char **paths = calloc(ap->n + 1, sizeof *paths);
  uint64_t *h = calloc(ap->n + 1, sizeof *h);
  bool *found = calloc(ap->n + 1, sizeof *found);
  int rc = paths && h && found ? PC_OK : pc_error_set(err, PC_ENOMEM, "out of memory");
  for (size_t k = 0; k < ap->n && rc == PC_OK; k++)
    paths[k] = ap->v[k].tensor;
  if (rc == PC_OK)
    rc = pc_content_hashes_at(run->path_a, paths, ap->n, h, found, err);
  for (size_t k = 0; k < ap->n && rc == PC_OK; k++)
    changed[k] = !found[k] || h[k] != ap->v[k].hash_a;
  free(paths);
  free(h);
  free(found);
  return rc;
}

static int judge_all(pc_gate *gate, const pc_approvals *ap, const pc_run *run, bool *changed,
                     bool *seen, pc_error *err) {
  int rc = a_changes(ap, run, changed, err);
  for (size_t i = 0; i < run->ntensors && rc == PC_OK; i++) {
    const approval *a = find(ap, pc_run_at(run, i)->path);
    size_t k = a ? (size_t)(a - ap->v) : 0;
    if (a)
      seen[k] = true;
    rc = judge_tensor(gate, i, pc_run_at(run, i), a, a && changed[k]);
    /* an indeterminate tensor the run accepts fails no gate either (as in baseline.c) */
    if (gate->tensors[i].fails && pc_report_accepted(run, i)) {
      gate->tensors[i].fails = false;
      gate->failures--;
    }
    if (rc == PC_ENOMEM)
      pc_error_set(err, rc, "out of memory");
  }
  for (size_t k = 0; k < ap->n && rc == PC_OK; k++)
    gate->baseline_only += !seen[k]; /* the approved tensor is gone */
  gate->verdict = run->verdict == PC_RUN_ERROR ? PC_RUN_ERROR
                  : gate->failures             ? PC_RUN_DRIFT
                                               : PC_RUN_PASS;
  return rc;
}

int pc_gate_approvals(pc_gate **out, const pc_approvals *ap, const char *path, const pc_run *run,
                      pc_error *err) {
  if (!out || !ap || !path || !run)
    return pc_error_set(err, PC_EUSAGE, "pc_gate_approvals: out, ap, path and run are required");
  *out = NULL;
  pc_gate *g = calloc(1, sizeof *g);
  bool *changed = calloc(ap->n + 1, sizeof *changed), *seen = calloc(ap->n + 1, sizeof *seen);
  if (g) {
    g->kind = PC_GATE_APPROVALS;
    g->factor = 1 + PC_APPROVAL_SLACK;
    g->path = pc_strdup(path);
    g->tol_source = pc_strdup(ap->tol_source);
    g->tol_digest = pc_strdup(ap->tol_digest);
    g->ntensors = run->ntensors;
    g->tensors = calloc(run->ntensors + 1, sizeof *g->tensors);
  }
  int rc = g && changed && seen && g->path && g->tensors && (!ap->tol_source || g->tol_source) &&
                   (!ap->tol_digest || g->tol_digest)
               ? judge_all(g, ap, run, changed, seen, err)
               : pc_error_set(err, PC_ENOMEM, "out of memory judging the run against %s", path);
  free(changed);
  free(seen);
  if (rc < 0) {
    pc_gate_free(g);
    return rc;
  }
  *out = g;
  return PC_OK;
}
