/* Tests of the baseline gate: runs built by hand are saved, read back and judged. Each expected
 * label follows from docs/reports.md ("Baseline gate") as the comments derive it. */
#include <paritycheck/baseline.h>

#include <jansson.h>

#include <math.h>   /* NAN, INFINITY */
#include <stdint.h> /* UINT64_MAX */
#include <stdio.h>  /* fopen, fputs */
#include <stdlib.h> /* mkstemp */
#include <string.h> /* memset, strcmp, strstr */
#include <unistd.h> /* close, unlink */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

enum { MAX_TENSORS = 16 };

typedef struct fixture_run {
  pc_tensor t[MAX_TENSORS];
  pc_run run;
} fixture_run;

static void add(fixture_run *f, const char *path, pc_verdict v, pc_dtype compare, uint64_t count,
                uint64_t mismatches, uint64_t nan_mm, uint64_t max_ulp) {
  pc_tensor *t = &f->t[f->run.ntensors];
  memset(t, 0, sizeof *t);
  t->path = (char *)path;
  t->verdict = v;
  t->compare = compare;
  t->stats.count = count;
  t->stats.mismatches = mismatches;
  t->stats.nan_mismatches = nan_mm;
  t->stats.max_ulp = max_ulp;
  f->run.tensors = f->t;
  f->run.by_verdict[v]++;
  f->run.ntensors++;
  if (pc_verdict_is_failure(v) && f->run.verdict == PC_RUN_PASS)
    f->run.verdict = PC_RUN_DRIFT;
  if (v == PC_VERDICT_ERROR)
    f->run.verdict = PC_RUN_ERROR;
}

static void start(fixture_run *f) {
  memset(f, 0, sizeof *f);
  f->run.path_a = "a.h5";
  f->run.path_b = "b.h5";
}

static char *temp_path(void) {
  static char path[] = "/tmp/test_baseline_XXXXXX";
  memcpy(path + sizeof path - 7, "XXXXXX", 6);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  return path;
}

/* Save `then`, load it, judge `now` at `factor`. */
static pc_gate *judge(const pc_run *then, const pc_run *now, double factor) {
  const char *path = temp_path();
  pc_error err = {0};
  assert_int_equal(pc_baseline_save(path, then, "strict", &err), PC_OK);
  pc_baseline *base = NULL;
  assert_int_equal(pc_baseline_load(&base, path, &err), PC_OK);
  unlink(path);
  pc_gate *gate = NULL;
  assert_int_equal(pc_gate_new(&gate, base, "base.json", now, factor, &err), PC_OK);
  pc_baseline_free(base);
  return gate;
}

static const pc_gate_tensor *at(const pc_gate *g, const pc_run *r, const char *path) {
  for (size_t i = 0; i < r->ntensors; i++)
    if (strcmp(r->tensors[i].path, path) == 0)
      return &g->tensors[i];
  fail_msg("no tensor %s", path);
  return NULL;
}

static void expect(const pc_gate *g, const pc_run *r, const char *path, pc_change c, bool fails) {
  const pc_gate_tensor *gt = at(g, r, path);
  if (gt->change != c || gt->fails != fails)
    fail_msg("%s: want %s%s, got %s%s", path, pc_change_name(c), fails ? " (fails)" : "",
             pc_change_name(gt->change), gt->fails ? " (fails)" : "");
}

#define F32 PC_DTYPE_FLOAT32
#define BF16 PC_DTYPE_BFLOAT16
#define NONE PC_DTYPE_NONE
#define PASS PC_VERDICT_PASS
#define DRIFT PC_VERDICT_DRIFT
#define ERR PC_VERDICT_ERROR

/* Every rule of the gate at the default factor 2. */
static void test_gate_rules(void **state) {
  (void)state;
  static fixture_run then, now;
  start(&then);
  start(&now);
  add(&then, "/p", PASS, F32, 100, 0, 0, 4);
  add(&now, "/p", PASS, F32, 100, 0, 0, 8); /* 8 is not > 2*4: unchanged */
  add(&then, "/q", PASS, F32, 100, 0, 0, 4);
  add(&now, "/q", PASS, F32, 100, 0, 0, 9); /* 9 > 8: worse, but it passes */
  add(&then, "/d", DRIFT, F32, 100, 10, 0, 100);
  add(&now, "/d", DRIFT, F32, 100, 20, 0, 150); /* 0.2 = 2*0.1, 150 < 200: accepted */
  add(&then, "/d2", DRIFT, F32, 100, 10, 0, 100);
  add(&now, "/d2", DRIFT, F32, 100, 21, 0, 100); /* 0.21 > 0.2: worse, fails */
  add(&then, "/d3", DRIFT, F32, 100, 10, 0, 100);
  add(&now, "/d3", DRIFT, F32, 100, 4, 0, 100); /* 0.1 > 2*0.04: better */
  add(&then, "/z", DRIFT, F32, 10, 5, 1, 0);
  add(&now, "/z", DRIFT, F32, 10, 5, 3, 0); /* nan+inf 3 > 2*1: worse, fails */
  add(&then, "/m", PC_VERDICT_MISSING_IN_B, NONE, 0, 0, 0, 0);
  add(&now, "/m", PC_VERDICT_MISSING_IN_B, NONE, 0, 0, 0, 0); /* same failure: accepted */
  add(&then, "/gone", PASS, F32, 1, 0, 0, 0);                 /* only in the baseline */
  add(&then, "/dt", PASS, F32, 10, 0, 0, 0);
  add(&now, "/dt", DRIFT, BF16, 10, 1, 0, 3); /* other compare dtype: new, fails */
  add(&then, "/e", ERR, NONE, 0, 0, 0, 0);
  add(&now, "/e", PASS, F32, 10, 0, 0, 0);   /* no longer bad: better */
  add(&now, "/n", PASS, F32, 10, 0, 0, 0);   /* not in the baseline, passes: new */
  add(&now, "/nf", DRIFT, F32, 10, 1, 0, 5); /* not in the baseline, fails: new, fails */
  add(&then, "/p2", PASS, F32, 10, 0, 0, 1);
  add(&now, "/p2", DRIFT, F32, 10, 1, 0, 1); /* newly fails: worse, fails */
  add(&then, "/s", DRIFT, F32, 10, 1, 0, 1);
  add(&now, "/s", PC_VERDICT_SHAPE_MISMATCH, NONE, 0, 0, 0, 0); /* another failure: worse */
  pc_gate *g = judge(&then.run, &now.run, PC_BASELINE_FACTOR_DEFAULT);
  expect(g, &now.run, "/p", PC_CHANGE_UNCHANGED, false);
  expect(g, &now.run, "/q", PC_CHANGE_WORSE, false);
  expect(g, &now.run, "/d", PC_CHANGE_UNCHANGED, false);
  expect(g, &now.run, "/d2", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/d3", PC_CHANGE_BETTER, false);
  expect(g, &now.run, "/z", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/m", PC_CHANGE_UNCHANGED, false);
  expect(g, &now.run, "/dt", PC_CHANGE_NEW, true);
  expect(g, &now.run, "/e", PC_CHANGE_BETTER, false);
  expect(g, &now.run, "/n", PC_CHANGE_NEW, false);
  expect(g, &now.run, "/nf", PC_CHANGE_NEW, true);
  expect(g, &now.run, "/p2", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/s", PC_CHANGE_WORSE, true);
  assert_int_equal(g->failures, 6); /* d2 z dt nf p2 s */
  assert_int_equal(g->by_change[PC_CHANGE_NEW], 3);
  assert_int_equal(g->by_change[PC_CHANGE_WORSE], 5);
  assert_int_equal(g->by_change[PC_CHANGE_BETTER], 2);
  assert_int_equal(g->by_change[PC_CHANGE_UNCHANGED], 3);
  assert_int_equal(g->baseline_only, 1);
  assert_int_equal(g->verdict, PC_RUN_DRIFT);
  assert_int_equal(g->ntensors, now.run.ntensors);
  assert_string_equal(g->path, "base.json");
  /* what the baseline held comes back with the judgement */
  const pc_gate_tensor *d2 = at(g, &now.run, "/d2");
  assert_true(d2->in_baseline);
  assert_int_equal(d2->base.verdict, PC_VERDICT_DRIFT);
  assert_int_equal(d2->base.compare, PC_DTYPE_FLOAT32);
  assert_int_equal(d2->base.mismatches, 10);
  assert_int_equal(d2->base.count, 100);
  assert_int_equal(d2->base.max_ulp, 100);
  assert_int_equal(at(g, &now.run, "/z")->base.nonfinite, 1);
  assert_false(at(g, &now.run, "/n")->in_baseline);
  pc_gate_free(g);
}

/* Accepted drift only: the gate passes while the run drifts. */
static void test_gate_accepts_old_drift(void **state) {
  (void)state;
  static fixture_run r;
  start(&r);
  add(&r, "/x", DRIFT, F32, 100, 50, 0, 1000);
  add(&r, "/y", PASS, F32, 100, 0, 0, 1);
  pc_gate *g = judge(&r.run, &r.run, 2);
  assert_int_equal(r.run.verdict, PC_RUN_DRIFT);
  assert_int_equal(g->verdict, PC_RUN_PASS);
  assert_int_equal(g->by_change[PC_CHANGE_UNCHANGED], 2);
  assert_int_equal(g->failures, 0);
  pc_gate_free(g);
}

/* From a zero baseline figure any growth counts; factor 1 makes every growth count. */
static void test_gate_zero_and_factor(void **state) {
  (void)state;
  static fixture_run then, now;
  start(&then);
  start(&now);
  add(&then, "/x", DRIFT, F32, 10, 0, 1, 0); /* a nan mismatch, nothing else */
  add(&now, "/x", DRIFT, F32, 10, 1, 1, 1);  /* max_ulp 0 -> 1, fraction 0 -> 0.1 */
  add(&then, "/y", DRIFT, F32, 10, 4, 0, 10);
  add(&now, "/y", DRIFT, F32, 10, 5, 0, 10); /* 0.5 vs 0.4: grew at factor 1 only */
  pc_gate *g = judge(&then.run, &now.run, 1000);
  expect(g, &now.run, "/x", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/y", PC_CHANGE_UNCHANGED, false);
  pc_gate_free(g);
  g = judge(&then.run, &now.run, 1);
  expect(g, &now.run, "/y", PC_CHANGE_WORSE, true);
  pc_gate_free(g);
  /* shrinking to zero is better at any factor */
  g = judge(&now.run, &then.run, 1000);
  expect(g, &then.run, "/x", PC_CHANGE_BETTER, false);
  pc_gate_free(g);
}

/* An unreadable tensor makes the gate an error, as it makes the run one. */
static void test_gate_error_run(void **state) {
  (void)state;
  static fixture_run then, now;
  start(&then);
  start(&now);
  add(&then, "/x", PASS, F32, 10, 0, 0, 0);
  add(&now, "/x", ERR, NONE, 0, 0, 0, 0);
  pc_gate *g = judge(&then.run, &now.run, 2);
  expect(g, &now.run, "/x", PC_CHANGE_WORSE, false); /* an error is not a drift failure */
  assert_int_equal(g->verdict, PC_RUN_ERROR);
  pc_gate_free(g);
}

/* The indeterminate verdict (a compared tensor, with figures) survives the file: read back by
 * name with its figures, judged by them against itself, worse when they grow past the factor
 * (max_ulp 100 -> 1000 at factor 2) and when a drift of the baseline became indeterminate. A run
 * that accepts indeterminate tensors (pc_run.accept_indeterminate) fails no gate with them. */
static void test_gate_indeterminate(void **state) {
  (void)state;
  static fixture_run then, now;
  start(&then);
  start(&now);
  add(&then, "/i", PC_VERDICT_INDETERMINATE, F32, 10, 8, 0, 100);
  add(&then, "/d", DRIFT, F32, 10, 8, 0, 100);
  add(&now, "/i", PC_VERDICT_INDETERMINATE, F32, 10, 8, 0, 1000);
  add(&now, "/d", PC_VERDICT_INDETERMINATE, F32, 10, 8, 0, 100);
  pc_gate *g = judge(&then.run, &then.run, 2);
  const pc_gate_tensor *gi = at(g, &then.run, "/i");
  assert_true(gi->in_baseline);
  assert_int_equal(gi->base.verdict, PC_VERDICT_INDETERMINATE);
  assert_int_equal(gi->base.count, 10);
  assert_int_equal(gi->base.max_ulp, 100);
  expect(g, &then.run, "/i", PC_CHANGE_UNCHANGED, false);
  pc_gate_free(g);
  g = judge(&then.run, &now.run, 2);
  expect(g, &now.run, "/i", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/d", PC_CHANGE_WORSE, true);
  assert_int_equal(g->verdict, PC_RUN_DRIFT);
  pc_gate_free(g);
  now.run.accept_indeterminate = true;
  g = judge(&then.run, &now.run, 2);
  expect(g, &now.run, "/i", PC_CHANGE_WORSE, false);
  expect(g, &now.run, "/d", PC_CHANGE_WORSE, false);
  assert_int_equal(g->failures, 0);
  assert_int_equal(g->verdict, PC_RUN_PASS);
  pc_gate_free(g);
}

/* rel_rms = sqrt(sum_sq_diff / sum_sq_a) and scale_error = sum_a_diff / sum_sq_a
 * (docs/metrics.md, "Aggregates"): with sum_sq_a = 1 they are sqrt(sq_diff) and a_diff. */
static void set_aggregates(fixture_run *f, const char *path, double sq_diff, double a_diff) {
  for (size_t i = 0; i < f->run.ntensors; i++)
    if (strcmp(f->t[i].path, path) == 0) {
      f->t[i].stats.sum_sq_a = 1;
      f->t[i].stats.sum_sq_diff = sq_diff;
      f->t[i].stats.sum_a_diff = a_diff;
    }
}

static void set_diagnosis(fixture_run *f, const char *path, pc_diagnosis_kind kind) {
  for (size_t i = 0; i < f->run.ntensors; i++)
    if (strcmp(f->t[i].path, path) == 0) {
      f->t[i].diagnosis.kind = kind;
      f->t[i].diagnosis.structural = kind != PC_DIAG_NOISE;
    }
}

/* Drift saturated in the counts (every element a mismatch, the same max_ulp) is judged by
 * rel_rms, |scale_error| and structure too (issue 38). Baseline of each: rel_rms 1e-3
 * (sq_diff 1e-6), scale_error 1e-4, noise. At factor 2: rel_rms 3e-3 > 2e-3 and |scale_error|
 * 3e-4 > 2e-4 (sign ignored) grew; a structure the baseline lacked, or of another kind, is
 * worse whatever the figures; the same structure with the same figures is unchanged; rel_rms
 * 4e-4 (< 1e-3 / 2) is better. */
static void test_gate_aggregates_and_structure(void **state) {
  (void)state;
  static fixture_run then, now;
  start(&then);
  start(&now);
  const char *paths[] = {"/rms", "/scale", "/negated", "/same", "/other", "/better"};
  for (size_t i = 0; i < 6; i++) {
    add(&then, paths[i], DRIFT, F32, 100, 100, 0, 1000);
    set_aggregates(&then, paths[i], 1e-6, 1e-4);
    set_diagnosis(&then, paths[i], PC_DIAG_NOISE);
    add(&now, paths[i], DRIFT, F32, 100, 100, 0, 1000);
    set_aggregates(&now, paths[i], 1e-6, 1e-4);
    set_diagnosis(&now, paths[i], PC_DIAG_NOISE);
  }
  set_aggregates(&now, "/rms", 9e-6, 1e-4);
  set_aggregates(&now, "/scale", 1e-6, -3e-4);
  set_diagnosis(&now, "/negated", PC_DIAG_NEGATED);
  set_diagnosis(&then, "/same", PC_DIAG_SCALED);
  set_diagnosis(&now, "/same", PC_DIAG_SCALED);
  set_diagnosis(&then, "/other", PC_DIAG_SCALED);
  set_diagnosis(&now, "/other", PC_DIAG_SHIFTED);
  set_aggregates(&now, "/better", 1.6e-7, 1e-4);
  pc_gate *g = judge(&then.run, &now.run, 2);
  expect(g, &now.run, "/rms", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/scale", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/negated", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/same", PC_CHANGE_UNCHANGED, false);
  expect(g, &now.run, "/other", PC_CHANGE_WORSE, true);
  expect(g, &now.run, "/better", PC_CHANGE_BETTER, false);
  const pc_gate_tensor *gs = at(g, &now.run, "/scale");
  assert_true(gs->base.has_aggregates && gs->base.has_diagnosis);
  assert_true(gs->base.rel_rms == 1e-3 && gs->base.scale_error == 1e-4);
  assert_int_equal(at(g, &now.run, "/same")->base.diagnosis, PC_DIAG_SCALED);
  assert_true(at(g, &now.run, "/same")->base.structural);
  pc_gate_free(g);
}

/* A file written before rel_rms, scale_error, diagnosis and structural existed still loads;
 * they are unknown: the counts alone judge (rel_rms 0.3 is not held against it), and a
 * structure counts as one the baseline did not hold. */
static void test_gate_old_file(void **state) {
  (void)state;
  const char *path = temp_path();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"paritycheck_baseline\": 1, \"tensors\": ["
        "{\"path\": \"/x\", \"verdict\": \"drift\", \"compare_dtype\": \"float32\", \"count\": 10,"
        " \"mismatches\": 10, \"nan_mismatches\": 0, \"inf_mismatches\": 0, \"max_ulp\": 50},"
        "{\"path\": \"/s\", \"verdict\": \"drift\", \"compare_dtype\": \"float32\", \"count\": 10,"
        " \"mismatches\": 10, \"nan_mismatches\": 0, \"inf_mismatches\": 0, \"max_ulp\": 50}]}",
        f);
  fclose(f);
  pc_error err = {0};
  pc_baseline *base = NULL;
  assert_int_equal(pc_baseline_load(&base, path, &err), PC_OK);
  unlink(path);
  static fixture_run now;
  start(&now);
  add(&now, "/x", DRIFT, F32, 10, 10, 0, 50);
  set_aggregates(&now, "/x", 0.09, 0.3);
  add(&now, "/s", DRIFT, F32, 10, 10, 0, 50);
  set_diagnosis(&now, "/s", PC_DIAG_SCALED);
  pc_gate *g = NULL;
  assert_int_equal(pc_gate_new(&g, base, "old.json", &now.run, 2, &err), PC_OK);
  assert_false(g->tensors[0].base.has_aggregates || g->tensors[0].base.has_diagnosis);
  expect(g, &now.run, "/x", PC_CHANGE_UNCHANGED, false);
  expect(g, &now.run, "/s", PC_CHANGE_WORSE, true);
  pc_gate_free(g);
  pc_baseline_free(base);
}

/* A max_ulp past INT64_MAX survives the file (written as a double, read back saturated). */
static void test_save_load_extremes(void **state) {
  (void)state;
  static fixture_run r;
  start(&r);
  add(&r, "/x", DRIFT, F32, 4, 4, 0, UINT64_MAX);
  r.t[0].stats.max_abs = INFINITY;
  r.t[0].stats.max_rel = NAN;
  r.t[0].path = "/bytes\xff";
  pc_gate *g = judge(&r.run, &r.run, 2);
  assert_true(g->tensors[0].in_baseline); /* the non-UTF-8 path matches its stored spelling */
  assert_int_equal(g->tensors[0].base.max_ulp, UINT64_MAX);
  assert_int_equal(g->tensors[0].change, PC_CHANGE_UNCHANGED);
  pc_gate_free(g);
  /* the file: its marker key and version, the profile, the tensors */
  const char *path = temp_path();
  assert_int_equal(pc_baseline_save(path, &r.run, NULL, NULL), PC_OK);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  unlink(path);
  assert_non_null(root);
  assert_int_equal(json_integer_value(json_object_get(root, "paritycheck_baseline")), 1);
  assert_string_equal(json_string_value(json_object_get(root, "profile")), "default");
  const json_t *t = json_array_get(json_object_get(root, "tensors"), 0);
  assert_string_equal(json_string_value(json_object_get(t, "path")), "/bytes\\xff");
  assert_string_equal(json_string_value(json_object_get(t, "max_abs")), "inf");
  assert_string_equal(json_string_value(json_object_get(t, "max_rel")), "nan");
  json_decref(root);
}

static int load_text(const char *text, pc_error *err) {
  const char *path = temp_path();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  pc_baseline *base = NULL;
  int rc = pc_baseline_load(&base, path, err);
  unlink(path);
  assert_true(rc == PC_OK ? base != NULL : base == NULL);
  pc_baseline_free(base);
  return rc;
}

static void expect_parse_error(const char *text, const char *why) {
  pc_error err = {0};
  assert_int_equal(load_text(text, &err), PC_EPARSE);
  if (!strstr(err.message, why))
    fail_msg("message %s lacks %s", err.message, why);
}

static void test_load_errors(void **state) {
  (void)state;
  pc_error err = {0};
  assert_int_equal(pc_baseline_load(&(pc_baseline *){NULL}, "/nonexistent/b.json", &err), PC_EIO);
  assert_non_null(strstr(err.message, "/nonexistent/b.json"));
  expect_parse_error("{", "1:");
  expect_parse_error("{\"version\": 1, \"tensors\": []}", "not a paritycheck baseline");
  expect_parse_error("{\"paritycheck_baseline\": 2, \"tensors\": []}", "version 2");
  expect_parse_error("{\"paritycheck_baseline\": 1}", "\"tensors\" must be an array");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": [3]}", "tensor 0");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": "
                     "[{\"path\": \"/x\", \"verdict\": \"fine\"}]}",
                     "unknown verdict");
  expect_parse_error(
      "{\"paritycheck_baseline\": 1, \"tensors\": "
      "[{\"path\": \"/x\", \"verdict\": \"drift\", \"compare_dtype\": \"float32\"}]}",
      "non-negative integers");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": "
                     "[{\"path\": \"/x\", \"verdict\": \"pass\", \"compare_dtype\": \"float33\"}]}",
                     "compare_dtype");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": [{\"path\": \"/x\", \"verdict\": "
                     "\"pass\", \"compare_dtype\": \"float32\", \"count\": 1, \"mismatches\": 2, "
                     "\"nan_mismatches\": 0, \"inf_mismatches\": 0, \"max_ulp\": 0}]}",
                     "more mismatches than elements");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": ["
                     "{\"path\": \"/x\", \"verdict\": \"skipped\"},"
                     "{\"path\": \"/x\", \"verdict\": \"skipped\"}]}",
                     "listed twice");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": [{\"path\": \"/x\", \"verdict\": "
                     "\"pass\", \"compare_dtype\": \"float32\", \"count\": 1, \"mismatches\": 0, "
                     "\"nan_mismatches\": 0, \"inf_mismatches\": 0, \"max_ulp\": 0, "
                     "\"rel_rms\": 0}]}",
                     "rel_rms and scale_error");
  expect_parse_error("{\"paritycheck_baseline\": 1, \"tensors\": [{\"path\": \"/x\", \"verdict\": "
                     "\"pass\", \"compare_dtype\": \"float32\", \"count\": 1, \"mismatches\": 0, "
                     "\"nan_mismatches\": 0, \"inf_mismatches\": 0, \"max_ulp\": 0, "
                     "\"diagnosis\": \"wobbly\", \"structural\": true}]}",
                     "diagnosis kind");
  assert_int_equal(load_text("{\"paritycheck_baseline\": 1, \"tensors\": []}", &err), PC_OK);
}

/* nan_mismatches + inf_mismatches past 2^64 - 1 saturates (it wrapped to 0 here, which hid the
 * file's non-finite mismatches from the gate). */
static void test_load_saturates(void **state) {
  (void)state;
  const char *path = temp_path();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"paritycheck_baseline\": 1, \"tensors\": [{\"path\": \"/x\", \"verdict\": \"drift\", "
        "\"compare_dtype\": \"float32\", \"count\": 4, \"mismatches\": 4, "
        "\"nan_mismatches\": 1.8446744073709552e19, \"inf_mismatches\": 1, \"max_ulp\": 9}]}",
        f);
  fclose(f);
  pc_baseline *base = NULL;
  pc_error err = {0};
  assert_int_equal(pc_baseline_load(&base, path, &err), PC_OK);
  unlink(path);
  static fixture_run r;
  start(&r);
  add(&r, "/x", DRIFT, F32, 4, 4, 0, 9);
  pc_gate *g = NULL;
  assert_int_equal(pc_gate_new(&g, base, "base.json", &r.run, 2, &err), PC_OK);
  assert_true(g->tensors[0].base.nonfinite == UINT64_MAX);
  expect(g, &r.run, "/x", PC_CHANGE_BETTER, false);
  pc_gate_free(g);
  pc_baseline_free(base);
}

static void test_usage_errors(void **state) {
  (void)state;
  static fixture_run r;
  start(&r);
  add(&r, "/x", PASS, F32, 1, 0, 0, 0);
  pc_gate *g = judge(&r.run, &r.run, 2);
  pc_gate_free(g);
  pc_error err = {0};
  assert_int_equal(pc_baseline_save("/nonexistent/b.json", &r.run, NULL, &err), PC_EIO);
  assert_int_equal(pc_baseline_save("/dev/full", &r.run, NULL, &err), PC_EIO);
  assert_non_null(strstr(err.message, "/dev/full"));
  const char *path = temp_path();
  pc_baseline *base = NULL;
  assert_int_equal(pc_baseline_save(path, &r.run, NULL, &err), PC_OK);
  assert_int_equal(pc_baseline_load(&base, path, &err), PC_OK);
  unlink(path);
  static const double bad[] = {0.5, 0, -1, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(pc_gate_new(&g, base, "b", &r.run, bad[i], &err), PC_EUSAGE);
  assert_int_equal(pc_gate_new(&g, NULL, "b", &r.run, 2, &err), PC_EUSAGE);
  pc_baseline_free(base);
  pc_baseline_free(NULL);
  pc_gate_free(NULL);
  assert_string_equal(pc_change_name(PC_CHANGE_NEW), "new");
  assert_string_equal(pc_change_name(PC_CHANGE_UNCHANGED), "unchanged");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gate_rules),
      cmocka_unit_test(test_gate_accepts_old_drift),
      cmocka_unit_test(test_gate_zero_and_factor),
      cmocka_unit_test(test_gate_error_run),
      cmocka_unit_test(test_save_load_extremes),
      cmocka_unit_test(test_load_errors),
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_load_saturates),
      cmocka_unit_test(test_gate_indeterminate),
      cmocka_unit_test(test_gate_aggregates_and_structure),
      cmocka_unit_test(test_gate_old_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
