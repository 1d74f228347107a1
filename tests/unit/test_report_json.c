/* Tests of the JSON report writer (src/lib/report/report_json.c): the hand-made run of
 * report_fixture.h, a gate and diagnoses rendered as JSON and parsed back with jansson. Every
 * expected value is derived by hand in the comments. */
#include "report_fixture.h"

#include <paritycheck/report.h>

#include <jansson.h>

#include <float.h>  /* DBL_TRUE_MIN, DBL_MAX */
#include <math.h>   /* INFINITY, sqrt, log10 */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* fopen, fflush */
#include <stdlib.h> /* free */
#include <string.h> /* memcpy, strstr */
#include <unistd.h> /* close, dup, dup2, unlink */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* ---- helpers ---- */

static uint64_t bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static json_t *render_json(const pc_run *r) {
  const char *path = temp_path();
  pc_error err = {0};
  assert_int_equal(pc_report_json(path, r, NULL, &err), PC_OK);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  unlink(path);
  assert_non_null(root);
  return root;
}

/* The object has exactly these keys, in this order. */
static void assert_keys(const json_t *o, const char *const *keys, size_t n) {
  assert_true(json_is_object(o));
  assert_int_equal(json_object_size(o), n);
  size_t i = 0;
  for (void *it = json_object_iter((json_t *)o); it; it = json_object_iter_next((json_t *)o, it))
    assert_string_equal(json_object_iter_key(it), keys[i++]);
}

static double real_at(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  assert_true(json_is_real(v));
  return json_real_value(v);
}

static json_int_t int_at(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  assert_true(json_is_integer(v));
  return json_integer_value(v);
}

static const char *string_at(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  assert_true(json_is_string(v));
  return json_string_value(v);
}

static void assert_dims(const json_t *a, const json_int_t *want, size_t n) {
  assert_true(json_is_array(a));
  assert_int_equal(json_array_size(a), n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(json_integer_value(json_array_get(a, i)), want[i]);
}

static const json_t *tensor_at(const json_t *root, size_t i) {
  return json_array_get(json_object_get(root, "tensors"), i);
}

/* ---- JSON ---- */

static void test_json_top_level(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  static const char *const keys[] = {"version",  "a",          "b",       "profile",
                                     "settings", "provenance", "verdict", "first_divergence",
                                     "tensors",  "summary",    "warnings"};
  assert_keys(root, keys, 11);
  assert_string_equal(string_at(root, "profile"), "default"); /* no options: the default */
  assert_int_equal(json_array_size(json_object_get(root, "settings")), 0); /* none given */
  /* The first failing tensor in run order: /enc/0/out passes, /enc/1/attn drifts. */
  assert_string_equal(string_at(root, "first_divergence"), "/enc/1/attn");
  assert_int_equal(int_at(root, "version"), 2);
  assert_string_equal(string_at(root, "a"), "ref.h5");
  assert_string_equal(string_at(root, "b"), "cand.h5");
  assert_string_equal(string_at(root, "verdict"), "error");
  assert_int_equal(json_array_size(json_object_get(root, "tensors")), T_COUNT);
  for (size_t i = 0; i < T_COUNT; i++)
    assert_string_equal(string_at(tensor_at(root, i), "path"), tensors[i].path);
  json_decref(root);
}

static void test_json_pass_tensor(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  const json_t *t = tensor_at(root, T_PASS);
  static const char *const keys[] = {
      "path",           "verdict",         "dtype_a",     "dtype_b",  "compare_dtype",
      "shape",          "execution_index", "caused_by",   "count",    "mismatches",
      "nan_mismatches", "inf_mismatches",  "max_abs",     "max_rel",  "max_ulp",
      "mean_ulp",       "mean_abs",        "mean_rel",    "rms",      "rel_rms",
      "cosine",         "snr_db",          "scale_error", "ulp_hist", "quantiles",
      "worst",          "tolerance"};
  assert_keys(t, keys, 27); /* a pass has no reasons */
  assert_string_equal(string_at(t, "verdict"), "pass");
  assert_string_equal(string_at(t, "dtype_a"), "float32");
  assert_string_equal(string_at(t, "compare_dtype"), "float32");
  assert_dims(json_object_get(t, "shape"), (const json_int_t[]){2, 3}, 2);
  assert_int_equal(int_at(t, "count"), 6);
  assert_int_equal(int_at(t, "mismatches"), 0);
  assert_int_equal(bits(real_at(t, "max_abs")), bits(0.1));
  assert_int_equal(bits(real_at(t, "max_rel")), bits(1.0 / 3));
  assert_int_equal(int_at(t, "max_ulp"), 2);
  assert_int_equal(bits(real_at(t, "mean_ulp")), bits(1.0)); /* 6 / 6 */
  /* flat 4 of [2,3]: row 4 / 3 = 1, column 4 % 3 = 1 */
  const json_t *w = json_object_get(t, "worst");
  static const char *const wkeys[] = {"index", "a", "b", "abs", "rel", "ulp"};
  assert_keys(w, wkeys, 6);
  assert_dims(json_object_get(w, "index"), (const json_int_t[]){1, 1}, 2);
  assert_int_equal(bits(real_at(w, "a")), bits(DBL_TRUE_MIN));
  assert_int_equal(bits(real_at(w, "b")), bits(-0.0));
  assert_int_equal(int_at(w, "ulp"), 1);
  /* max_ulp is not in tol.set, so it is absent though the struct holds 99 */
  const json_t *tol = json_object_get(t, "tolerance");
  static const char *const tkeys[] = {"atol", "rtol", "max_mismatch_fraction"};
  assert_keys(tol, tkeys, 3);
  assert_int_equal(bits(real_at(tol, "atol")), bits(1e-5));
  assert_int_equal(bits(real_at(tol, "rtol")), bits(1.3e-6));
  assert_int_equal(bits(real_at(tol, "max_mismatch_fraction")), bits(0.0));
  json_decref(root);
}

static void test_json_drift_tensor(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  const json_t *t = tensor_at(root, T_DRIFT);
  static const char *const keys[] = {"path",
                                     "verdict",
                                     "dtype_a",
                                     "dtype_b",
                                     "compare_dtype",
                                     "shape",
                                     "execution_index",
                                     "caused_by",
                                     "reasons",
                                     "count",
                                     "mismatches",
                                     "nan_mismatches",
                                     "inf_mismatches",
                                     "max_abs",
                                     "max_rel",
                                     "max_ulp",
                                     "mean_ulp",
                                     "mean_abs",
                                     "mean_rel",
                                     "rms",
                                     "rel_rms",
                                     "cosine",
                                     "snr_db",
                                     "scale_error",
                                     "ulp_hist",
                                     "worst",
                                     "tolerance",
                                     "not_representable_b",
                                     "note"};
  assert_keys(t, keys, 29); /* no quantiles: the run did not make them */
  assert_string_equal(string_at(t, "dtype_a"), "float32");
  assert_string_equal(string_at(t, "dtype_b"), "bfloat16");
  assert_string_equal(string_at(t, "compare_dtype"), "bfloat16");
  assert_int_equal(int_at(t, "nan_mismatches"), 1);
  assert_int_equal(int_at(t, "inf_mismatches"), 2);
  assert_string_equal(string_at(t, "max_abs"), "inf");
  assert_string_equal(string_at(t, "max_rel"), "nan");
  assert_true(real_at(t, "max_ulp") == 18446744073709551616.0); /* UINT64_MAX as a double */
  assert_true(real_at(t, "mean_ulp") == 4611686018427387904.0); /* 2^62 */
  const json_t *w = json_object_get(t, "worst");
  assert_dims(json_object_get(w, "index"), (const json_int_t[]){2, 1, 2}, 3);
  assert_int_equal(bits(real_at(w, "a")), bits(1.0));
  assert_string_equal(string_at(w, "b"), "nan");
  const json_t *tol = json_object_get(t, "tolerance");
  static const char *const tkeys[] = {"max_ulp", "max_mismatch_fraction"};
  assert_keys(tol, tkeys, 2);
  assert_int_equal(int_at(tol, "max_ulp"), 4);
  assert_int_equal(bits(real_at(tol, "max_mismatch_fraction")), bits(0.01));
  assert_int_equal(int_at(t, "not_representable_b"), 3);
  assert_string_equal(string_at(t, "note"), "compared in bfloat16 ULPs");
  json_decref(root);
}

static void assert_pair(const json_t *a, double re, double im) {
  assert_true(json_is_array(a));
  assert_int_equal(json_array_size(a), 2);
  assert_int_equal(bits(json_real_value(json_array_get(a, 0))), bits(re));
  assert_int_equal(bits(json_real_value(json_array_get(a, 1))), bits(im));
}

static void test_json_complex_tensor(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  const json_t *t = tensor_at(root, T_COMPLEX);
  assert_string_equal(string_at(t, "dtype_a"), "complex64");
  assert_string_equal(string_at(t, "dtype_b"), "complex64");
  assert_string_equal(string_at(t, "compare_dtype"), "float32");
  const json_t *w = json_object_get(t, "worst");
  assert_dims(json_object_get(w, "index"), (const json_int_t[]){5}, 1);
  assert_pair(json_object_get(w, "a"), 0.1, -2.0);
  assert_pair(json_object_get(w, "b"), 0.1, -2.25);
  json_decref(root);
}

/* complex<2 * component bits>, except components that numpy has no complex name for. */
static void test_json_complex_names(void **state) {
  (void)state;
  static const struct {
    pc_dtype component;
    const char *name;
  } cases[] = {{PC_DTYPE_FLOAT64, "complex128"},
               {PC_DTYPE_FLOAT32, "complex64"},
               {PC_DTYPE_FLOAT16, "complex32"},
               {PC_DTYPE_BFLOAT16, "complex_bfloat16"},
               {PC_DTYPE_FLOAT8_E4M3FN, "complex_float8_e4m3fn"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pc_tensor t = tensors[T_COMPLEX];
    t.dtype_a = t.dtype_b = t.compare = cases[i].component;
    pc_run one = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1};
    json_t *root = render_json(&one);
    assert_string_equal(string_at(tensor_at(root, 0), "dtype_a"), cases[i].name);
    assert_string_equal(string_at(tensor_at(root, 0), "compare_dtype"),
                        pc_dtype_name(cases[i].component));
    json_decref(root);
  }
}

/* No figures for tensors that were not compared; the shape stays where it is known. */
static void test_json_uncompared(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  static const char *const keys[] = {"path",          "verdict", "dtype_a",         "dtype_b",
                                     "compare_dtype", "shape",   "execution_index", "caused_by",
                                     "reasons",       "message"};
  const json_t *t = tensor_at(root, T_ONLY_B);
  assert_keys(t, keys, 10);
  assert_string_equal(string_at(t, "verdict"), "missing_in_a");
  assert_true(json_is_null(json_object_get(t, "dtype_a")));
  assert_string_equal(string_at(t, "dtype_b"), "float16");
  assert_true(json_is_null(json_object_get(t, "compare_dtype")));
  assert_dims(json_object_get(t, "shape"), (const json_int_t[]){4}, 1);
  assert_string_equal(string_at(t, "message"), "only in B");
  t = tensor_at(root, T_ONLY_A); /* a scalar: rank 0 */
  assert_keys(t, keys, 10);
  assert_string_equal(string_at(t, "verdict"), "missing_in_b");
  assert_dims(json_object_get(t, "shape"), NULL, 0);
  t = tensor_at(root, T_ERROR);
  assert_keys(t, keys, 10);
  assert_string_equal(string_at(t, "verdict"), "error");
  assert_string_equal(string_at(t, "message"), "filter 32001 not available");
  static const char *const shape[] = {"path",          "verdict", "dtype_a", "dtype_b",
                                      "compare_dtype", "shape",   "shape_b", "execution_index",
                                      "caused_by",     "reasons", "message"};
  t = tensor_at(root, T_SHAPE);
  assert_keys(t, shape, 11);
  assert_dims(json_object_get(t, "shape"), (const json_int_t[]){2, 3}, 2);
  assert_dims(json_object_get(t, "shape_b"), (const json_int_t[]){3, 2}, 2);
  static const char *const skip[] = {"path",      "verdict",       "dtype_a",
                                     "dtype_b",   "compare_dtype", "execution_index",
                                     "caused_by", "reasons",       "message"};
  t = tensor_at(root, T_SKIP); /* rank -1: no shape */
  assert_keys(t, skip, 9);
  assert_string_equal(string_at(t, "message"), "both sides are strings");
  json_decref(root);
}

static void test_json_summary(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  const json_t *s = json_object_get(root, "summary");
  static const char *const keys[] = {
      "tensors",        "pass",    "drift", "missing_in_a",  "missing_in_b", "shape_mismatch",
      "dtype_mismatch", "skipped", "error", "indeterminate", "failures",     "accept_indeterminate",
      "roots"};
  assert_keys(s, keys, 13);
  static const json_int_t counts[] = {8, 1, 2, 1, 1, 1, 0, 1, 1, 0};
  for (size_t i = 0; i < 10; i++)
    assert_int_equal(int_at(s, keys[i]), counts[i]);
  assert_true(json_is_false(json_object_get(s, "accept_indeterminate")));
  assert_int_equal(int_at(s, "failures"), 5); /* 2 drift + missing_in_a/b + shape_mismatch */
  assert_int_equal(int_at(s, "roots"), 4);    /* all but /enc/2/cplx, which attn explains */
  json_decref(root);

  pc_run pass = {
      .path_a = "a", .path_b = "b", .tensors = tensors, .ntensors = 1, .first_divergence = -1};
  pass.by_verdict[PC_VERDICT_PASS] = 1;
  root = render_json(&pass);
  s = json_object_get(root, "summary");
  assert_int_equal(int_at(s, "failures"), 0);
  assert_true(json_is_null(json_object_get(root, "first_divergence")));
  json_decref(root);
}

/* The judge's record is rendered, not recomputed: the reasons with the values and limits set by
 * hand (a limit need not be the tolerance's: the judge may have raised it), the root cause's
 * path, a verdict that is its own reason, and the execution index from the run's order. */
static void test_json_judgement(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  const json_t *d = tensor_at(root, T_DRIFT);
  assert_true(json_is_null(json_object_get(d, "caused_by")));
  const json_t *r = json_object_get(d, "reasons");
  assert_int_equal(json_array_size(r), 3);
  static const char *const rkeys[] = {"criterion", "value", "limit"};
  static const char *const names[] = {"nan_mismatch", "inf_mismatch", "mismatch_fraction"};
  static const double values[] = {1, 2, 7.0 / 60}, limits[] = {0, 0, 0.01};
  for (size_t k = 0; k < 3; k++) {
    const json_t *e = json_array_get(r, k);
    assert_keys(e, rkeys, 3);
    assert_string_equal(string_at(e, "criterion"), names[k]);
    assert_int_equal(bits(real_at(e, "value")), bits(values[k]));
    assert_int_equal(bits(real_at(e, "limit")), bits(limits[k]));
  }
  assert_string_equal(string_at(tensor_at(root, T_COMPLEX), "caused_by"), "/enc/1/attn");
  for (int i = T_ONLY_B; i < T_COUNT; i++) { /* missing, shape, skipped, error */
    const json_t *t = tensor_at(root, i);
    assert_int_equal(json_array_size(json_object_get(t, "reasons")), 1);
    const json_t *e = json_array_get(json_object_get(t, "reasons"), 0);
    assert_string_equal(string_at(e, "criterion"), pc_verdict_name(tensors[i].verdict));
    assert_true(json_is_null(json_object_get(e, "value")));
    assert_true(json_is_null(json_object_get(e, "limit")));
    assert_true(json_is_null(json_object_get(t, "caused_by")));
  }
  assert_null(json_object_get(tensor_at(root, T_PASS), "reasons"));
  for (size_t i = 0; i < T_COUNT; i++) /* no order: execution order is run order */
    assert_int_equal(int_at(tensor_at(root, i), "execution_index"), (json_int_t)i);
  json_decref(root);
  /* the reverse order, a first divergence elsewhere, and a link to a pass, which is none */
  size_t order[T_COUNT];
  for (size_t k = 0; k < T_COUNT; k++) {
    order[k] = T_COUNT - 1 - k;
    tensors[order[k]].context.exec_index = (int64_t)k;
  }
  run.order = order;
  run.first_divergence = T_SHAPE;
  tensors[T_COMPLEX].caused_by = T_PASS;
  root = render_json(&run);
  for (size_t i = 0; i < T_COUNT; i++)
    assert_int_equal(int_at(tensor_at(root, i), "execution_index"), (json_int_t)(T_COUNT - 1 - i));
  assert_string_equal(string_at(root, "first_divergence"), "/dec/reshaped");
  assert_true(json_is_null(json_object_get(tensor_at(root, T_COMPLEX), "caused_by")));
  json_decref(root);
  run.order = NULL;
}

/* Doubles that need all 17 digits, or sit at the ends of the range, come back bit for bit. */
static void test_json_round_trip(void **state) {
  (void)state;
  static const double values[] = {0.1,     1.0 / 3, DBL_TRUE_MIN, DBL_MIN, DBL_MAX,
                                  -1e-300, 2.0 / 3, -0.0,         1e23,    0.30000000000000004};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    pc_tensor t = tensors[T_PASS];
    t.stats.max_abs = values[i];
    pc_run one = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1};
    json_t *root = render_json(&one);
    assert_int_equal(bits(real_at(tensor_at(root, 0), "max_abs")), bits(values[i]));
    json_decref(root);
  }
}

/* -inf is a string too; bytes that are not UTF-8 become \xNN, each its own, so the document
 * stays valid and two such names stay two; path_bytes holds them exactly. */
static void test_json_negative_inf_and_bytes(void **state) {
  (void)state;
  pc_tensor t = tensors[T_PASS];
  t.path = "/x/\xff\xfe";
  t.stats.worst_b[0] = -INFINITY;
  pc_run one = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1};
  json_t *root = render_json(&one);
  assert_string_equal(string_at(tensor_at(root, 0), "path"), "/x/\\xff\\xfe");
  assert_string_equal(string_at(tensor_at(root, 0), "path_bytes"), "2f782ffffe");
  assert_string_equal(string_at(json_object_get(tensor_at(root, 0), "worst"), "b"), "-inf");
  json_decref(root);
}

/* Two-space indent, and the file ends with a newline. */
static void test_json_layout(void **state) {
  (void)state;
  const char *path = temp_path();
  assert_int_equal(pc_report_json(path, &run, NULL, NULL), PC_OK);
  char *text = slurp(path);
  unlink(path);
  assert_true(strncmp(text, "{\n  \"version\": 2,\n  \"a\": \"ref.h5\",\n", 34) == 0);
  assert_int_equal(text[strlen(text) - 1], '\n');
  assert_int_equal(text[strlen(text) - 2], '}');
  free(text);
}

static void test_json_stdout(void **state) {
  (void)state;
  const char *path = temp_path();
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  dup2(fileno(f), STDOUT_FILENO);
  int rc = pc_report_json("-", &run, NULL, NULL);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  fclose(f);
  assert_int_equal(rc, PC_OK);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  unlink(path);
  assert_non_null(root);
  assert_string_equal(string_at(root, "verdict"), "error");
  json_decref(root);
}

static void test_json_unwritable(void **state) {
  (void)state;
  pc_error err = {0};
  assert_int_equal(pc_report_json("/nonexistent-dir/r.json", &run, NULL, &err), PC_EIO);
  assert_int_equal(err.code, PC_EIO);
  assert_non_null(strstr(err.message, "/nonexistent-dir/r.json"));
  assert_int_equal(pc_report_json("/dev/full", &run, NULL, &err), PC_EIO);
  assert_non_null(strstr(err.message, "/dev/full"));
}

/* Means, aggregates, histogram and quantiles from the hand-made sums of make_pass. */
static void test_json_distribution(void **state) {
  (void)state;
  json_t *root = render_json(&run);
  const json_t *t = tensor_at(root, T_PASS);
  assert_int_equal(bits(real_at(t, "mean_abs")), bits(0.3 / 6));
  assert_int_equal(bits(real_at(t, "mean_rel")), bits(0.6 / 6));
  assert_int_equal(bits(real_at(t, "rms")), bits(sqrt(0.01 / 6)));
  assert_int_equal(bits(real_at(t, "rel_rms")), bits(sqrt(0.01 / 4)));
  assert_int_equal(bits(real_at(t, "cosine")), bits(3.995 / sqrt(4.0 * 4.0)));
  assert_int_equal(bits(real_at(t, "snr_db")), bits(10 * log10(4 / 0.01)));
  assert_int_equal(bits(real_at(t, "scale_error")), bits(-0.005 / 4));
  assert_dims(json_object_get(t, "ulp_hist"), (const json_int_t[]){2, 2, 2}, 3);
  const json_t *q = json_object_get(t, "quantiles");
  static const char *const levels[] = {"p50", "p90", "p99", "p99.9"};
  static const double qa[] = {0, 0.05, 0.09, 0.1}, qr[] = {0.1, 0.2, 0.3, 1.0 / 3},
                      qu[] = {1, 2, 2, 2};
  assert_keys(q, levels, 4);
  for (int k = 0; k < 4; k++) {
    const json_t *l = json_object_get(q, levels[k]);
    static const char *const fig[] = {"abs", "rel", "ulp"};
    assert_keys(l, fig, 3);
    assert_int_equal(bits(real_at(l, "abs")), bits(qa[k]));
    assert_int_equal(bits(real_at(l, "rel")), bits(qr[k]));
    assert_int_equal(bits(real_at(l, "ulp")), bits(qu[k]));
  }
  /* The drift has no sums: cosine of two zero vectors is 1, snr +inf, histogram empty. */
  t = tensor_at(root, T_DRIFT);
  assert_int_equal(bits(real_at(t, "cosine")), bits(1.0));
  assert_string_equal(string_at(t, "snr_db"), "inf");
  assert_int_equal(bits(real_at(t, "scale_error")), bits(0.0));
  assert_int_equal(json_array_size(json_object_get(t, "ulp_hist")), 0);
  json_decref(root);
}

static void test_json_gate(void **state) {
  (void)state;
  make_gate();
  pc_report_options opts = {
      .version = PC_REPORT_OPTIONS_VERSION, .profile = "strict", .gate = &gate};
  const char *path = temp_path();
  assert_int_equal(pc_report_json(path, &run, &opts, NULL), PC_OK);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  unlink(path);
  assert_non_null(root);
  assert_string_equal(string_at(root, "profile"), "strict");
  const json_t *b = json_object_get(root, "baseline");
  static const char *const keys[] = {"file",  "factor", "verdict",   "fails_gate",   "new",
                                     "worse", "better", "unchanged", "baseline_only"};
  assert_keys(b, keys, 9);
  assert_string_equal(string_at(b, "file"), "base.json");
  assert_true(real_at(b, "factor") == 2);
  assert_string_equal(string_at(b, "verdict"), "error");
  static const json_int_t counts[] = {2, 2, 1, 0, 5, 1};
  for (int k = 0; k < 6; k++)
    assert_int_equal(int_at(b, keys[3 + k]), counts[k]);
  const json_t *d = json_object_get(tensor_at(root, T_DRIFT), "baseline");
  static const char *const dkeys[] = {
      "change",     "fails_gate",           "verdict", "compare_dtype", "count",
      "mismatches", "nonfinite_mismatches", "max_ulp"};
  assert_keys(d, dkeys, 8);
  assert_string_equal(string_at(d, "change"), "worse");
  assert_true(json_is_true(json_object_get(d, "fails_gate")));
  assert_string_equal(string_at(d, "compare_dtype"), "bfloat16");
  assert_int_equal(int_at(d, "mismatches"), 2);
  assert_int_equal(int_at(d, "nonfinite_mismatches"), 1);
  assert_int_equal(int_at(d, "max_ulp"), 7);
  const json_t *n = json_object_get(tensor_at(root, T_ONLY_B), "baseline");
  static const char *const nkeys[] = {"change", "fails_gate"};
  assert_keys(n, nkeys, 2); /* new: nothing from the baseline */
  const json_t *sk = json_object_get(tensor_at(root, T_SKIP), "baseline");
  static const char *const skeys[] = {"change", "fails_gate", "verdict"};
  assert_keys(sk, skeys, 3);
  assert_true(json_is_false(json_object_get(sk, "fails_gate")));
  json_decref(root);
  /* a gate for another run is refused */
  pc_run one = {.path_a = "a", .path_b = "b", .tensors = tensors, .ntensors = 1};
  pc_error err = {0};
  assert_int_equal(pc_report_json("/dev/null", &one, &opts, &err), PC_EUSAGE);
}

/* JSON: the diagnosis object as the judge set it, figures for the indeterminate tensor (it was
 * compared), and the summary's failures without the accepted one. */
static void test_json_diagnosis(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, false);
  json_t *root = render_json(&r);
  const json_t *ts = json_object_get(root, "tensors");
  const json_t *d = json_object_get(json_array_get(ts, D_SCALED), "diagnosis");
  assert_string_equal(json_string_value(json_object_get(d, "kind")), "scaled");
  assert_string_equal(json_string_value(json_object_get(d, "text")), "scaled by 2.000");
  assert_true(json_is_true(json_object_get(d, "structural")));
  assert_true(real_at(d, "value") == 2.0);
  assert_null(json_object_get(d, "axis")); /* only a shift has one */
  d = json_object_get(json_array_get(ts, D_SHIFTED), "diagnosis");
  assert_string_equal(json_string_value(json_object_get(d, "text")),
                      "shifted by +1 along the last axis (row-major order)");
  assert_int_equal(int_at(d, "axis"), 0);
  const json_t *indet = json_array_get(ts, D_INDET);
  assert_string_equal(json_string_value(json_object_get(indet, "verdict")), "indeterminate");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(indet, "diagnosis"), "kind")), "no_digits");
  assert_int_equal(int_at(indet, "mismatches"), 4); /* it was compared: figures */
  assert_null(json_object_get(json_array_get(ts, D_PASS), "diagnosis"));
  const json_t *s = json_object_get(root, "summary");
  assert_int_equal(int_at(s, "indeterminate"), 1);
  assert_int_equal(int_at(s, "failures"), 4);
  json_decref(root);
  r = diag_run(D_COUNT, true);
  root = render_json(&r);
  s = json_object_get(root, "summary");
  assert_int_equal(int_at(s, "failures"), 3);
  assert_true(json_is_true(json_object_get(s, "accept_indeterminate")));
  json_decref(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_json_top_level, setup),
      cmocka_unit_test_setup(test_json_pass_tensor, setup),
      cmocka_unit_test_setup(test_json_drift_tensor, setup),
      cmocka_unit_test_setup(test_json_complex_tensor, setup),
      cmocka_unit_test_setup(test_json_complex_names, setup),
      cmocka_unit_test_setup(test_json_uncompared, setup),
      cmocka_unit_test_setup(test_json_summary, setup),
      cmocka_unit_test_setup(test_json_judgement, setup),
      cmocka_unit_test_setup(test_json_round_trip, setup),
      cmocka_unit_test_setup(test_json_negative_inf_and_bytes, setup),
      cmocka_unit_test_setup(test_json_layout, setup),
      cmocka_unit_test_setup(test_json_stdout, setup),
      cmocka_unit_test_setup(test_json_unwritable, setup),
      cmocka_unit_test_setup(test_json_distribution, setup),
      cmocka_unit_test_setup(test_json_gate, setup),
      cmocka_unit_test(test_json_diagnosis),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
