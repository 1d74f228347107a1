/* Baseline gate (include/paritycheck/baseline.h; semantics and file format in docs/reports.md,
 * "Baseline gate"). The file is JSON written and read with jansson. */
#include "json_util.h"
#include "pc_internal.h"
#include "run_facts.h" /* pc_report_has_stats, pc_report_accepted */

#include <paritycheck/baseline.h>

#include <jansson.h>

#include <errno.h>  /* errno */
#include <math.h>   /* isfinite, isnan, isinf */
#include <stdint.h> /* INT64_MAX, UINT64_MAX */
#include <stdlib.h> /* calloc, free, qsort, bsearch */
#include <string.h> /* strcmp, strerror */

/* The key that marks a baseline file, and the version of its format. */
#define BASELINE_KEY "paritycheck_baseline"
enum { BASELINE_VERSION = 1 };

typedef struct entry {
  char *path;
  pc_baseline_entry e;
} entry;

struct pc_baseline {
  entry *entries; /* sorted by path (strcmp) */
  size_t n;
  char *profile;                 /* as recorded; NULL when the file has none */
  char *tol_source, *tol_digest; /* the "tolerances" record; NULL when the file has none */
};

const char *pc_change_name(pc_change c) {
  static const char *const names[PC_CHANGE_COUNT_] = {"new", "worse", "better", "unchanged"};
  return c >= 0 && c < PC_CHANGE_COUNT_ ? names[c] : "unknown";
}

/* ---- saving ---- */

/* A baseline written is loaded before it replaces the old one (pc_json_write_checked). */
static int reads_back(const char *tmp, pc_error *err) {
  pc_baseline *b = NULL;
  int rc = pc_baseline_load(&b, tmp, err);
  pc_baseline_free(b);
  return rc;
}

/* A path that is not UTF-8 is "path" with its non-ASCII bytes as '?', for people, and
 * "path_bytes" in hex, exactly: b"/x\xff" and b"/x\xfe" stay two tensors. */
static json_t *tensor_json(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  json_t *o = json_object();
  int rc = json_object_set_new(o, "path", pc_json_string(t->path));
  if (!pc_json_valid_utf8(t->path))
    rc |= json_object_set_new(o, "path_bytes", pc_json_hex(t->path));
  rc |= json_object_set_new(o, "verdict", json_string(pc_verdict_name(t->verdict)));
  if (!pc_report_has_stats(t->verdict)) /* an indeterminate tensor has figures too */
    return pc_json_finish(o, rc);
  rc |= json_object_set_new(o, "compare_dtype", json_string(pc_dtype_name(t->compare)));
  rc |= json_object_set_new(o, "count", pc_json_count(s->count));
  rc |= json_object_set_new(o, "mismatches", pc_json_count(s->mismatches));
  rc |= json_object_set_new(o, "nan_mismatches", pc_json_count(s->nan_mismatches));
  rc |= json_object_set_new(o, "inf_mismatches", pc_json_count(s->inf_mismatches));
  rc |= json_object_set_new(o, "max_ulp", pc_json_count(s->max_ulp));
  rc |= json_object_set_new(o, "max_abs", pc_json_real(s->max_abs));
  rc |= json_object_set_new(o, "max_rel", pc_json_real(s->max_rel));
  rc |= json_object_set_new(o, "mean_ulp", pc_json_real(pc_stats_mean_ulp(s)));
  pc_aggregates g = pc_stats_aggregates(s);
  rc |= json_object_set_new(o, "rel_rms", pc_json_real(g.rel_rms));
  rc |= json_object_set_new(o, "scale_error", pc_json_real(g.scale_error));
  rc |= json_object_set_new(o, "diagnosis", json_string(pc_diagnosis_name(t->diagnosis.kind)));
  rc |= json_object_set_new(o, "structural", json_boolean(t->diagnosis.structural));
  return pc_json_finish(o, rc);
}

static json_t *tols_json(const pc_tol_record *tols) {
  json_t *o = json_object();
  int rc = json_object_set_new(o, "source", pc_json_string(tols->source ? tols->source : ""));
  rc |= json_object_set_new(o, "digest", pc_json_string(tols->digest));
  return pc_json_finish(o, rc);
}

static json_t *baseline_json(const pc_run *run, const char *profile, const pc_tol_record *tols) {
  json_t *o = json_object(), *a = json_array();
  int rc = json_object_set_new(o, BASELINE_KEY, json_integer(BASELINE_VERSION));
  rc |= json_object_set_new(o, "a", pc_json_string(run->path_a));
  rc |= json_object_set_new(o, "b", pc_json_string(run->path_b));
  rc |= json_object_set_new(o, "profile", pc_json_string(profile ? profile : "default"));
  if (tols && tols->digest)
    rc |= json_object_set_new(o, "tolerances", tols_json(tols));
  for (size_t i = 0; i < run->ntensors; i++)
    rc |= json_array_append_new(a, tensor_json(pc_run_at(run, i)));
  rc |= json_object_set_new(o, "tensors", a);
  return pc_json_finish(o, rc);
}

int pc_baseline_save(const char *path, const pc_run *run, const char *profile, pc_error *err) {
  return pc_baseline_save_tols(path, run, profile, NULL, err);
}

int pc_baseline_save_tols(const char *path, const pc_run *run, const char *profile,
                          const pc_tol_record *tols, pc_error *err) {
  if (!path || !run)
    return pc_error_set(err, PC_EUSAGE, "pc_baseline_save: path and run are required");
  json_t *root = baseline_json(run, profile, tols);
  if (!root)
    return pc_error_set(err, PC_ENOMEM, "out of memory building the baseline");
  int rc = pc_json_write_checked(root, path, "the baseline", reads_back, err);
  json_decref(root);
  return rc;
}

/* ---- loading ---- */

static int compare_entries(const void *pa, const void *pb) {
  return strcmp(((const entry *)pa)->path, ((const entry *)pb)->path);
}

void pc_baseline_free(pc_baseline *base) {
  if (!base)
    return;
  for (size_t i = 0; i < base->n; i++)
    free(base->entries[i].path);
  free(base->entries);
  free(base->profile);
  free(base->tol_source);
  free(base->tol_digest);
  free(base);
}

static bool verdict_from_name(const char *name, pc_verdict *out) {
  for (int v = 0; v < PC_VERDICT_COUNT_; v++)
    if (strcmp(pc_verdict_name((pc_verdict)v), name) == 0) {
      *out = (pc_verdict)v;
      return true;
    }
  return false;
}

/* A count: a non-negative integer, or (for values past INT64_MAX) a non-negative double. */
static bool get_count(const json_t *o, const char *key, uint64_t *out) {
  const json_t *j = json_object_get(o, key);
  if (json_is_integer(j) && json_integer_value(j) >= 0) {
    *out = (uint64_t)json_integer_value(j);
    return true;
  }
  if (json_is_real(j) && json_real_value(j) >= 0 && json_real_value(j) <= (double)UINT64_MAX) {
    double v = json_real_value(j);
    *out = v >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
    return true;
  }
  return false;
}

static int bad_file(pc_error *err, const char *path, size_t i, const char *why) {
  return pc_error_set(err, PC_EPARSE, "%s: tensor %zu: %s", path, i, why);
}

/* A double as pc_json_real writes it: a number, or "nan", "inf", "-inf". 1 when read, 0 when
 * the key is absent, -1 when it is something else. */
static int get_real(const json_t *o, const char *key, double *out) {
  const json_t *j = json_object_get(o, key);
  const char *s = json_string_value(j);
  if (!j)
    return 0;
  if (json_is_number(j))
    *out = json_number_value(j);
  else if (s && (strcmp(s, "nan") == 0 || strcmp(s, "inf") == 0 || strcmp(s, "-inf") == 0))
    *out = s[0] == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
  else
    return -1;
  return 1;
}

static bool diagnosis_from_name(const char *name, pc_diagnosis_kind *out) {
  for (int k = 0; name && k < PC_DIAG_COUNT_; k++)
    if (strcmp(pc_diagnosis_name((pc_diagnosis_kind)k), name) == 0) {
      *out = (pc_diagnosis_kind)k;
      return true;
    }
  return false;
}

/* The figures the format gained later: each pair is all there, or absent (unknown: a file
 * written before them), never half. */
static int read_later_figures(pc_baseline_entry *e, const json_t *o, const char *path, size_t i,
                              pc_error *err) {
  double scale = 0;
  int r = get_real(o, "rel_rms", &e->rel_rms), s = get_real(o, "scale_error", &scale);
  if (r < 0 || s < 0 || r != s)
    return bad_file(err, path, i, "rel_rms and scale_error must both be numbers, or both absent");
  e->has_aggregates = r == 1;
  e->scale_error = fabs(scale);
  const json_t *kind = json_object_get(o, "diagnosis"), *st = json_object_get(o, "structural");
  if ((kind || st) &&
      !(diagnosis_from_name(json_string_value(kind), &e->diagnosis) && json_is_boolean(st)))
    return bad_file(err, path, i,
                    "diagnosis must be a diagnosis kind and structural a boolean, or both absent");
  e->has_diagnosis = kind != NULL;
  e->structural = json_is_true(st);
  return PC_OK;
}

static int read_figures(pc_baseline_entry *e, const json_t *o, const char *path, size_t i,
                        pc_error *err) {
  const char *dt = json_string_value(json_object_get(o, "compare_dtype"));
  uint64_t nan_mm, inf_mm;
  e->compare = dt ? pc_dtype_from_name(dt) : PC_DTYPE_NONE;
  if (e->compare == PC_DTYPE_NONE)
    return bad_file(err, path, i, "compare_dtype is not a dtype name");
  if (!get_count(o, "count", &e->count) || !get_count(o, "mismatches", &e->mismatches) ||
      !get_count(o, "nan_mismatches", &nan_mm) || !get_count(o, "inf_mismatches", &inf_mm) ||
      !get_count(o, "max_ulp", &e->max_ulp))
    return bad_file(err, path, i,
                    "count, mismatches, nan_mismatches, inf_mismatches and "
                    "max_ulp must be non-negative integers");
  if (e->mismatches > e->count)
    return bad_file(err, path, i, "more mismatches than elements");
  /* saturated: a file may hold counts whose sum wraps around */
  e->nonfinite = nan_mm > UINT64_MAX - inf_mm ? UINT64_MAX : nan_mm + inf_mm;
  return read_later_figures(e, o, path, i, err);
}

static int read_entry(entry *out, const json_t *o, const char *path, size_t i, pc_error *err) {
  const char *name = json_string_value(json_object_get(o, "path"));
  const json_t *bytes = json_object_get(o, "path_bytes");
  const char *verdict = json_string_value(json_object_get(o, "verdict"));
  if (!json_is_object(o) || !name || !verdict)
    return bad_file(err, path, i, "wants an object with string keys path and verdict");
  if (!verdict_from_name(verdict, &out->e.verdict))
    return bad_file(err, path, i, "unknown verdict");
  if (pc_report_has_stats(out->e.verdict)) {
    int rc = read_figures(&out->e, o, path, i, err);
    if (rc < 0)
      return rc;
  }
  int rc = !bytes                  ? PC_OK
           : json_is_string(bytes) ? pc_hex_decode(json_string_value(bytes), &out->path)
                                   : PC_EPARSE;
  if (rc == PC_EPARSE)
    return bad_file(err, path, i, "path_bytes must be the hex digits of a path's bytes");
  if (!bytes)
    out->path = pc_strdup(name);
  return out->path ? PC_OK : pc_error_set(err, PC_ENOMEM, "out of memory reading %s", path);
}

static int read_entries(pc_baseline *base, const json_t *tensors, const char *path, pc_error *err) {
  base->entries = calloc(json_array_size(tensors) + 1, sizeof *base->entries);
  if (!base->entries)
    return pc_error_set(err, PC_ENOMEM, "out of memory reading %s", path);
  for (size_t i = 0; i < json_array_size(tensors); i++) {
    int rc = read_entry(&base->entries[i], json_array_get(tensors, i), path, i, err);
    if (rc < 0)
      return rc;
    base->n++;
  }
  qsort(base->entries, base->n, sizeof *base->entries, compare_entries);
  for (size_t i = 1; i < base->n; i++)
    if (strcmp(base->entries[i - 1].path, base->entries[i].path) == 0)
      return pc_error_set(err, PC_EPARSE, "%s: tensor %s is listed twice", path,
                          base->entries[i].path);
  return PC_OK;
}

/* The "tolerances" record, when there is one: {"source": text, "digest": text}. */
static int read_tols(pc_baseline *base, const json_t *t, const char *path, pc_error *err) {
  const json_t *source = json_object_get(t, "source"), *digest = json_object_get(t, "digest");
  if (!t)
    return PC_OK;
  if (!json_is_object(t) || !json_is_string(source) || !json_is_string(digest))
    return pc_error_set(err, PC_EPARSE,
                        "%s: \"tolerances\" must be an object of two strings, source and digest",
                        path);
  base->tol_source = pc_strdup(json_string_value(source));
  base->tol_digest = pc_strdup(json_string_value(digest));
  return base->tol_source && base->tol_digest
             ? PC_OK
             : pc_error_set(err, PC_ENOMEM, "out of memory reading %s", path);
}

static int read_root(pc_baseline *base, const json_t *root, const char *path, pc_error *err) {
  const json_t *version = json_object_get(root, BASELINE_KEY);
  const json_t *tensors = json_object_get(root, "tensors");
  if (!json_is_integer(version))
    return pc_error_set(err, PC_EPARSE, "%s: not a paritycheck baseline (no \"%s\" key)", path,
                        BASELINE_KEY);
  if (json_integer_value(version) != BASELINE_VERSION)
    return pc_error_set(err, PC_EPARSE, "%s: baseline version %lld, this paritycheck reads %d",
                        path, (long long)json_integer_value(version), BASELINE_VERSION);
  if (!json_is_array(tensors))
    return pc_error_set(err, PC_EPARSE, "%s: \"tensors\" must be an array", path);
  const json_t *profile = json_object_get(root, "profile");
  if (json_is_string(profile) && !(base->profile = pc_strdup(json_string_value(profile))))
    return pc_error_set(err, PC_ENOMEM, "out of memory reading %s", path);
  int rc = read_tols(base, json_object_get(root, "tolerances"), path, err);
  return rc < 0 ? rc : read_entries(base, tensors, path, err);
}

int pc_baseline_load(pc_baseline **out, const char *path, pc_error *err) {
  if (!out || !path)
    return pc_error_set(err, PC_EUSAGE, "pc_baseline_load: out and path are required");
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return pc_error_set(err, PC_EIO, "%s: cannot open: %s", path, strerror(errno));
  json_error_t jerr;
  json_t *root = json_loadf(f, 0, &jerr);
  fclose(f);
  if (!root)
    return pc_error_set(err, PC_EPARSE, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
  pc_baseline *base = calloc(1, sizeof *base);
  int rc = base ? read_root(base, root, path, err)
                : pc_error_set(err, PC_ENOMEM, "out of memory reading %s", path);
  json_decref(root);
  if (rc < 0) {
    pc_baseline_free(base);
    return rc;
  }
  *out = base;
  return PC_OK;
}

/* ---- judging ---- */

static bool compared(pc_verdict v) {
  return pc_report_has_stats(v);
}

/* A verdict the gate has to look at: a failure, or a tensor that could not be read. */
static bool bad(pc_verdict v) {
  return pc_verdict_is_failure(v) || v == PC_VERDICT_ERROR;
}

/* x grew beyond f times x0; with x0 = 0 any x > 0 has. */
static bool grew(double x, double x0, double f) {
  return x > f * x0;
}

/* The figures the gate watches (docs/reports.md, "How a tensor is judged"). */
enum { FIG_FRACTION, FIG_MAX_ULP, FIG_NONFINITE, FIG_REL_RMS, FIG_SCALE, FIG_COUNT_ };

typedef struct figures {
  double v[FIG_COUNT_];
  bool aggregates; /* FIG_REL_RMS and FIG_SCALE are known */
} figures;

static figures current(const pc_stats *s) {
  pc_aggregates a = pc_stats_aggregates(s);
  figures g = {{s->count ? (double)s->mismatches / (double)s->count : 0, (double)s->max_ulp,
                (double)(s->nan_mismatches + s->inf_mismatches), a.rel_rms, fabs(a.scale_error)},
               true};
  return g;
}

static figures recorded(const pc_baseline_entry *e) {
  figures g = {{e->count ? (double)e->mismatches / (double)e->count : 0, (double)e->max_ulp,
                (double)e->nonfinite, e->rel_rms, e->scale_error},
               e->has_aggregates};
  return g;
}

/* Any figure known on both sides grew from `from` to `to` beyond the factor. */
static bool any_grew(const figures *to, const figures *from, double f) {
  int n = to->aggregates && from->aggregates ? FIG_COUNT_ : FIG_REL_RMS;
  for (int k = 0; k < n; k++)
    if (grew(to->v[k], from->v[k], f))
      return true;
  return false;
}

/* Same verdict on both sides, both compared: the figures decide. */
static pc_change by_figures(figures now, figures then, double f) {
  if (any_grew(&now, &then, f))
    return PC_CHANGE_WORSE;
  if (any_grew(&then, &now, f))
    return PC_CHANGE_BETTER;
  return PC_CHANGE_UNCHANGED;
}

/* A structural diagnosis the baseline does not hold, in the same kind: rounding cannot produce
 * it, so no earlier acceptance covers it. A baseline that does not know the tensor's diagnosis
 * (a file written before the field) holds none. */
static bool structure_new(const pc_tensor *t, const pc_baseline_entry *e) {
  return t->diagnosis.structural &&
         !(e->has_diagnosis && e->structural && e->diagnosis == t->diagnosis.kind);
}

static pc_change judge_change(const pc_tensor *t, const pc_baseline_entry *e, double f) {
  if (!e || (compared(t->verdict) && compared(e->verdict) && t->compare != e->compare))
    return PC_CHANGE_NEW;
  if (structure_new(t, e))
    return PC_CHANGE_WORSE;
  if (bad(t->verdict) && t->verdict != e->verdict)
    return PC_CHANGE_WORSE;
  if (!bad(t->verdict) && bad(e->verdict))
    return PC_CHANGE_BETTER;
  if (compared(t->verdict) && t->verdict == e->verdict)
    return by_figures(current(&t->stats), recorded(e), f);
  return PC_CHANGE_UNCHANGED;
}

static const entry *find_entry(const pc_baseline *base, const char *name) {
  entry key = {(char *)name, {0}};
  return bsearch(&key, base->entries, base->n, sizeof *base->entries, compare_entries);
}

/* The baseline holds paths exactly ("path_bytes" for one that is not UTF-8); a file written
 * before that spelled such a path with '?' for its non-ASCII bytes (pc_json_string), so a path
 * that is not UTF-8 and not found is looked up in that spelling too. */
static const pc_baseline_entry *lookup(const pc_baseline *base, const char *path, bool *seen) {
  const entry *hit = find_entry(base, path);
  if (!hit && !pc_json_valid_utf8(path)) {
    json_t *spelled = pc_json_string(path);
    hit = spelled ? find_entry(base, json_string_value(spelled)) : NULL;
    json_decref(spelled);
  }
  if (!hit)
    return NULL;
  seen[hit - base->entries] = true;
  return &hit->e;
}

static void judge(pc_gate *g, const pc_baseline *base, const pc_run *run, bool *seen) {
  for (size_t i = 0; i < run->ntensors; i++) {
    const pc_tensor *t = pc_run_at(run, i);
    pc_gate_tensor *gt = &g->tensors[i];
    const pc_baseline_entry *e = lookup(base, t->path, seen);
    gt->in_baseline = e != NULL;
    if (e)
      gt->base = *e;
    gt->change = judge_change(t, e, g->factor);
    /* an indeterminate tensor the run accepts fails no gate either: the gate sets the exit code */
    gt->fails = pc_verdict_is_failure(t->verdict) && !pc_report_accepted(run, i) &&
                (gt->change == PC_CHANGE_NEW || gt->change == PC_CHANGE_WORSE);
    g->by_change[gt->change]++;
    g->failures += gt->fails;
  }
  for (size_t k = 0; k < base->n; k++)
    g->baseline_only += !seen[k];
  g->verdict = run->verdict == PC_RUN_ERROR ? PC_RUN_ERROR
               : g->failures                ? PC_RUN_DRIFT
                                            : PC_RUN_PASS;
}

const char *pc_gate_profile_warning(const pc_gate *gate, const char *profile, char *buf,
                                    size_t size) {
  const char *now = profile ? profile : "default";
  if (!gate || !gate->profile || strcmp(gate->profile, now) == 0)
    return NULL;
  snprintf(buf, size, "the baseline %s was saved with profile '%s', this run uses '%s'", gate->path,
           gate->profile, now);
  return buf;
}

const char *pc_gate_tolerance_mismatch(const pc_gate *gate, const pc_tol_record *now, char *buf,
                                       size_t size) {
  if (!gate || !gate->tol_digest || !now || !now->digest ||
      strcmp(gate->tol_digest, now->digest) == 0)
    return NULL;
  snprintf(
      buf, size,
      "%s was made under other tolerances (%s; digest %s) than this run's (%s; digest %s): its "
      "figures were judged by other rules, so the gate cannot compare with them",
      gate->path, gate->tol_source ? gate->tol_source : "?", gate->tol_digest,
      now->source ? now->source : "?", now->digest);
  return buf;
}

void pc_gate_free(pc_gate *gate) {
  if (!gate)
    return;
  free(gate->path);
  for (size_t i = 0; gate->tensors && i < gate->ntensors; i++)
    free(gate->tensors[i].approval);
  free(gate->profile);
  free(gate->tol_source);
  free(gate->tol_digest);
  free(gate->tensors);
  free(gate);
}

int pc_gate_new(pc_gate **out, const pc_baseline *base, const char *path, const pc_run *run,
                double factor, pc_error *err) {
  if (!out || !base || !path || !run)
    return pc_error_set(err, PC_EUSAGE, "pc_gate_new: out, base, path and run are required");
  if (!isfinite(factor) || factor < 1)
    return pc_error_set(err, PC_EUSAGE, "the baseline factor must be a finite number >= 1");
  *out = NULL;
  pc_gate *g = calloc(1, sizeof *g);
  bool *seen = calloc(base->n + 1, sizeof *seen);
  if (g) {
    g->path = pc_strdup(path);
    g->profile = pc_strdup(base->profile);
    g->tol_source = pc_strdup(base->tol_source);
    g->tol_digest = pc_strdup(base->tol_digest);
    g->tensors = calloc(run->ntensors + 1, sizeof *g->tensors);
  }
  if (!g || !seen || !g->path || !g->tensors || (base->profile && !g->profile) ||
      (base->tol_source && !g->tol_source) || (base->tol_digest && !g->tol_digest)) {
    pc_gate_free(g);
    free(seen);
    return pc_error_set(err, PC_ENOMEM, "out of memory judging the run against %s", path);
  }
  g->factor = factor;
  g->ntensors = run->ntensors;
  judge(g, base, run, seen);
  free(seen);
  *out = g;
  return PC_OK;
}
