/* Tests of the report writers: a run built by hand (one tensor of each kind) rendered as JSON and
 * parsed back, and as text. Every expected value is derived by hand in the comments. */
#include <paritycheck/compare.h> /* pc_run_accept_indeterminate */
#include <paritycheck/report.h>

#include "json_util.h"     /* pc_json_put_nested */
#include "report_common.h" /* pc_report_put_ordered */

#include <jansson.h>

#include <dirent.h> /* opendir, readdir */
#include <float.h>  /* DBL_TRUE_MIN, DBL_MAX */
#include <math.h>   /* INFINITY, NAN, sqrt, log10 */
#include <stdint.h> /* uint64_t, UINT64_MAX */
#include <stdio.h>  /* open_memstream, fopen */
#include <stdlib.h> /* free, mkstemp */
#include <string.h> /* memcpy, strstr */
#include <unistd.h> /* close, dup, dup2, unlink */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

enum { T_PASS, T_DRIFT, T_COMPLEX, T_ONLY_B, T_ONLY_A, T_SHAPE, T_SKIP, T_ERROR, T_COUNT };

static pc_tensor tensors[T_COUNT];
static pc_run run;

/* The tensors' shapes (pc_tensor.dims points to rank entries), one room per tensor; B's shape
 * of the shape mismatch. */
static uint64_t shapes[T_COUNT][PC_MAX_RANK];
static uint64_t reshaped_b[] = {3, 2};

static void set_dims(pc_tensor *t, int rank, const uint64_t *dims) {
  uint64_t *room = shapes[t - tensors];
  t->rank = rank;
  t->dims = rank > 0 ? memcpy(room, dims, (size_t)rank * sizeof *dims) : NULL;
}

/* A pass whose figures exercise round-tripping: 0.1, 1/3, the smallest subnormal and -0. Its
 * distribution: ulps 0,0,1,1,2,2 (sum 6, buckets [0]=2, [1]=2, [2]=2), sum abs 0.3, sum rel 0.6;
 * sums a^2 = b^2 = 4, ab = 3.995, (b-a)^2 = 0.01; quantiles given as they come. */
static void make_pass(pc_tensor *t) {
  t->path = "/enc/0/out";
  t->verdict = PC_VERDICT_PASS;
  t->dtype_a = t->dtype_b = t->compare = PC_DTYPE_FLOAT32;
  set_dims(t, 2, (const uint64_t[]){2, 3});
  t->tol = (pc_tol){.set = PC_TOL_ATOL | PC_TOL_RTOL,
                    .atol = 1e-5,
                    .rtol = 1.3e-6,
                    .max_ulp = 99,
                    .max_mismatch_fraction = 0.5};
  t->stats = (pc_stats){.count = 6,
                        .max_abs = 0.1,
                        .max_rel = 1.0 / 3,
                        .max_ulp = 2,
                        .ulp_sum_lo = 6,
                        .ulp_terms = 6,
                        .has_worst = true,
                        .worst_index = 4,
                        .worst_a = {DBL_TRUE_MIN},
                        .worst_b = {-0.0},
                        .worst_abs = DBL_TRUE_MIN,
                        .worst_rel = 1,
                        .worst_ulp = 1,
                        .finite_terms = 6,
                        .sum_sq_a = 4,
                        .sum_sq_b = 4,
                        .sum_ab = 3.995,
                        .sum_sq_diff = 0.01,
                        .sum_a_diff = -0.005, /* sum_ab - sum_sq_a */
                        .sum_abs = 0.3,
                        .sum_rel = 0.6,
                        .ulp_hist = {2, 2, 2},
                        .has_quantiles = true,
                        .q_abs = {0, 0.05, 0.09, 0.1},
                        .q_rel = {0.1, 0.2, 0.3, 1.0 / 3},
                        .q_ulp = {1, 2, 2, 2}};
}

/* A drift with non-finite maxima and a max_ulp beyond INT64_MAX, worst at flat 47 of [3,4,5]:
 * 47 = 2*20 + 7, 7 = 1*5 + 2, so the index is [2,1,2]. mean_ulp = 2^64 / 4 = 2^62. */
static void make_drift(pc_tensor *t) {
  t->path = "/enc/1/attn";
  t->verdict = PC_VERDICT_DRIFT;
  t->note = "compared in bfloat16 ULPs";
  t->dtype_a = PC_DTYPE_FLOAT32;
  t->dtype_b = t->compare = PC_DTYPE_BFLOAT16;
  set_dims(t, 3, (const uint64_t[]){3, 4, 5});
  t->tol = (pc_tol){.set = PC_TOL_MAX_ULP | PC_TOL_MAX_MISMATCH_FRACTION,
                    .max_ulp = 4,
                    .max_mismatch_fraction = 0.01};
  t->stats = (pc_stats){.count = 60,
                        .mismatches = 7,
                        .nan_mismatches = 1,
                        .inf_mismatches = 2,
                        .not_representable_b = 3,
                        .max_abs = INFINITY,
                        .max_rel = NAN,
                        .max_ulp = UINT64_MAX,
                        .ulp_sum_hi = 1,
                        .ulp_terms = 4,
                        .has_worst = true,
                        .worst_index = 47,
                        .worst_a = {1.0},
                        .worst_b = {NAN},
                        .worst_abs = NAN,
                        .worst_rel = NAN,
                        .worst_ulp = 0};
  /* the judge's record: both non-finite mismatches, then 7 / 60 against the 1% allowed */
  t->nreasons = 3;
  t->reasons[0] = (pc_reason){PC_CRIT_NAN_MISMATCH, 1, 0};
  t->reasons[1] = (pc_reason){PC_CRIT_INF_MISMATCH, 2, 0};
  t->reasons[2] = (pc_reason){PC_CRIT_MISMATCH_FRACTION, 7.0 / 60, 0.01};
}

/* complex64 drift: worst at flat 5 of [8]; |(0.1-2.25i) - (0.1-2i)| = 0.25, rel 0.25/|a|. The
 * judge found 1 of 8 elements against none allowed, and (set in setup) that /enc/1/attn, the
 * drift before it with nan mismatches, explains it: a cascade of one. */
static void make_complex(pc_tensor *t) {
  t->path = "/enc/2/cplx";
  t->verdict = PC_VERDICT_DRIFT;
  t->dtype_a = t->dtype_b = t->compare = PC_DTYPE_FLOAT32;
  t->is_complex = true;
  set_dims(t, 1, (const uint64_t[]){8});
  t->tol = (pc_tol){.set = PC_TOL_ATOL, .atol = 1e-5};
  t->stats = (pc_stats){.count = 8,
                        .mismatches = 1,
                        .max_abs = 0.25,
                        .max_rel = 0.125,
                        .max_ulp = 262144,
                        .has_worst = true,
                        .worst_index = 5,
                        .worst_a = {0.1, -2.0},
                        .worst_b = {0.1, -2.25},
                        .worst_abs = 0.25,
                        .worst_rel = 0.125,
                        .worst_ulp = 262144};
  t->nreasons = 1;
  t->reasons[0] = (pc_reason){PC_CRIT_MISMATCH_FRACTION, 0.125, 0};
}

static void make_uncompared(void) {
  tensors[T_ONLY_B] = (pc_tensor){.path = "/dec/only_b",
                                  .verdict = PC_VERDICT_MISSING_IN_A,
                                  .message = "only in B",
                                  .dtype_b = PC_DTYPE_FLOAT16,
                                  .rank_b = -1};
  set_dims(&tensors[T_ONLY_B], 1, (const uint64_t[]){4});
  tensors[T_ONLY_A] = (pc_tensor){.path = "/dec/only_a",
                                  .verdict = PC_VERDICT_MISSING_IN_B,
                                  .message = "only in A",
                                  .dtype_a = PC_DTYPE_BFLOAT16,
                                  .rank = 0,
                                  .rank_b = -1};
  tensors[T_SHAPE] = (pc_tensor){.path = "/dec/reshaped",
                                 .verdict = PC_VERDICT_SHAPE_MISMATCH,
                                 .message = "shapes differ",
                                 .dtype_a = PC_DTYPE_FLOAT64,
                                 .dtype_b = PC_DTYPE_FLOAT64,
                                 .rank_b = 2,
                                 .dims_b = reshaped_b};
  set_dims(&tensors[T_SHAPE], 2, (const uint64_t[]){2, 3});
  tensors[T_SKIP] = (pc_tensor){.path = "/meta/names",
                                .verdict = PC_VERDICT_SKIPPED,
                                .message = "both sides are strings",
                                .rank = -1,
                                .rank_b = -1};
  tensors[T_ERROR] = (pc_tensor){.path = "/enc/3/broken",
                                 .verdict = PC_VERDICT_ERROR,
                                 .message = "filter 32001 not available",
                                 .dtype_a = PC_DTYPE_FLOAT32,
                                 .dtype_b = PC_DTYPE_FLOAT32,
                                 .rank_b = -1};
  set_dims(&tensors[T_ERROR], 1, (const uint64_t[]){10});
}

static int setup(void **state) {
  (void)state;
  memset(tensors, 0, sizeof tensors);
  make_pass(&tensors[T_PASS]);
  make_drift(&tensors[T_DRIFT]);
  make_complex(&tensors[T_COMPLEX]);
  make_uncompared();
  for (int i = 0; i < T_COUNT; i++)
    tensors[i].caused_by = -1;
  tensors[T_COMPLEX].caused_by = T_DRIFT;
  /* no order: execution order is run order, so the first failure, /enc/1/attn, is the first
   * divergence */
  run = (pc_run){.path_a = "ref.h5",
                 .path_b = "cand.h5",
                 .tensors = tensors,
                 .ntensors = T_COUNT,
                 .verdict = PC_RUN_ERROR,
                 .first_divergence = T_DRIFT};
  for (int i = 0; i < T_COUNT; i++)
    run.by_verdict[tensors[i].verdict]++;
  return 0;
}

/* ---- helpers ---- */

static uint64_t bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static char *temp_path(void) {
  static char path[] = "/tmp/test_report_XXXXXX";
  memcpy(path + sizeof path - 7, "XXXXXX", 6);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  return path;
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

/* The whole file, however long, as a string to free(). */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size >= 0);
  rewind(f);
  char *buf = malloc((size_t)size + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  buf[size] = '\0';
  return buf;
}

static char *render_text_with(const pc_run *r, const pc_report_options *opts) {
  const char *path = temp_path();
  pc_error err = {0};
  assert_int_equal(pc_report_text(path, r, opts, &err), PC_OK);
  char *text = slurp(path);
  unlink(path);
  return text;
}

static char *render_text(const pc_run *r, bool color, bool quiet) {
  pc_report_options opts = PC_REPORT_OPTIONS_INIT;
  opts.color = color;
  opts.quiet = quiet;
  return render_text_with(r, &opts);
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

/* A gate made by hand (the baseline module has its own tests): which tensor is what. */
static pc_gate_tensor gate_tensors[T_COUNT];
static pc_gate gate;

static void make_gate(void) {
  static const pc_change changes[T_COUNT] = {
      PC_CHANGE_UNCHANGED, PC_CHANGE_WORSE,     PC_CHANGE_UNCHANGED, PC_CHANGE_NEW,
      PC_CHANGE_UNCHANGED, PC_CHANGE_UNCHANGED, PC_CHANGE_UNCHANGED, PC_CHANGE_NEW};
  memset(gate_tensors, 0, sizeof gate_tensors);
  for (int i = 0; i < T_COUNT; i++) {
    gate_tensors[i].change = changes[i];
    gate_tensors[i].in_baseline = changes[i] != PC_CHANGE_NEW;
    gate_tensors[i].base.verdict = tensors[i].verdict;
  }
  gate_tensors[T_DRIFT].fails = gate_tensors[T_ONLY_B].fails = true;
  gate_tensors[T_DRIFT].base = (pc_baseline_entry){.verdict = PC_VERDICT_DRIFT,
                                                   .compare = PC_DTYPE_BFLOAT16,
                                                   .count = 60,
                                                   .mismatches = 2,
                                                   .nonfinite = 1,
                                                   .max_ulp = 7};
  gate = (pc_gate){.path = "base.json",
                   .factor = 2,
                   .tensors = gate_tensors,
                   .ntensors = T_COUNT,
                   .by_change = {2, 1, 0, 5},
                   .failures = 2,
                   .baseline_only = 1,
                   .verdict = PC_RUN_ERROR};
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

/* ---- text ---- */

static void test_text_lines(void **state) {
  (void)state;
  char *text = render_text(&run, false, false);
  static const char *const wanted[] = {
      /* pass: figures at %.3g, ulp as an integer */
      /* snr 10 log10(4 / 0.01) = 26.02 */
      "pass            /enc/0/out     float32           [2,3]    0/6         0.1      0.333    2"
      "                     26\n",
      /* drift: dtypes differ, non-finite maxima, max_ulp beyond INT64_MAX */
      /* no sums: sum (b-a)^2 = 0 gives snr +inf */
      "DRIFT           /enc/1/attn    float32/bfloat16  [3,4,5]  7/60        inf      nan      "
      "18446744073709551615  inf\n",
      /* the judge's reasons with their limits (7 / 60 = 0.117), the cascade it roots */
      "                nan_mismatch 1 > limit 0; inf_mismatch 2 > limit 0; mismatch_fraction "
      "0.117 > limit 0.01 (7 of 60 elements); root cause of 1 tensor; worst [2,1,2]: a=1 b=nan "
      "(abs nan, rel nan, ulp 0); not representable in B's dtype: 3; compared in bfloat16 ULPs\n",
      "                mismatch_fraction 0.125 > limit 0 (1 of 8 elements); caused by "
      "/enc/1/attn; worst [5]: a=(0.10000000000000001, -2) b=(0.10000000000000001, -2.25) "
      "(abs 0.25, rel 0.125, ulp 262144)\n",
      "MISSING_IN_A    /dec/only_b    -/float16         [4]      only in B\n",
      "MISSING_IN_B    /dec/only_a    bfloat16/-        []       only in A\n",
      "SHAPE_MISMATCH  /dec/reshaped  float64           [2,3]    shape [2,3] vs [3,2]\n",
      "skipped         /meta/names    -                 -        both sides are strings\n",
      "ERROR           /enc/3/broken  float32           [10]     filter 32001 not available\n",
      "ERROR: 1 of 8 tensors could not be read (first: /enc/3/broken); 5 fail (2 drift, "
      "1 missing_in_a, 1 missing_in_b, 1 shape_mismatch), 1 skipped; first divergence: "
      "/enc/1/attn\n"};
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
    if (!strstr(text, wanted[i]))
      fail_msg("missing line:\n%s\nin:\n%s", wanted[i], text);
  /* top-down: the verdict line first, then the first divergence, then the table's header */
  assert_true(strncmp(text, "ERROR: 1 of 8 tensors", 21) == 0);
  assert_non_null(strstr(text, "\nfirst divergence: /enc/1/attn (drift): nan_mismatch 1 > limit "
                               "0; inf_mismatch 2 > limit 0; mismatch_fraction 0.117 > limit "
                               "0.01 (7 of 60 elements); root cause of 1 tensor\n"));
  assert_true(strstr(text, "\nfirst divergence") < strstr(text, "\nverdict  "));
  assert_null(strchr(text, '\033'));
  assert_null(strstr(text, "differences"));
  assert_null(strstr(text, "  \n")); /* no trailing blanks */
  free(text);
}

static void test_text_color(void **state) {
  (void)state;
  char *text = render_text(&run, true, false);
  assert_non_null(strstr(text, "\033[32mpass\033[0m"));
  assert_non_null(strstr(text, "\033[31mDRIFT\033[0m"));
  assert_non_null(strstr(text, "\033[31mMISSING_IN_B\033[0m"));
  assert_non_null(strstr(text, "\033[33mskipped\033[0m"));
  assert_non_null(strstr(text, "\033[1;31mERROR\033[0m: 1 of 8"));
  /* colour codes take no room: the columns stay where they are without colour */
  assert_non_null(strstr(text, "\033[31mDRIFT\033[0m           /enc/1/attn"));
  free(text);
}

static void test_text_quiet(void **state) {
  (void)state;
  char *text = render_text(&run, false, true);
  assert_null(strstr(text, "/enc/0/out"));
  assert_null(strstr(text, "/meta/names"));
  for (int i = 0; i < T_COUNT; i++)
    if (i != T_PASS && i != T_SKIP)
      assert_non_null(strstr(text, tensors[i].path));
  assert_true(strncmp(text, "ERROR: 1 of 8 tensors", 21) == 0); /* the verdict first */
  /* in the table: the root causes (and the error) first, in run order, then the tensor attn
   * explains */
  const char *table = strstr(text, "\nverdict  ");
  assert_non_null(table);
  const char *at[T_COUNT] = {0};
  for (int i = 0; i < T_COUNT; i++)
    at[i] = strstr(table, tensors[i].path);
  assert_true(at[T_DRIFT] < at[T_ONLY_B] && at[T_ONLY_B] < at[T_ONLY_A] &&
              at[T_ONLY_A] < at[T_SHAPE] && at[T_SHAPE] < at[T_ERROR] &&
              at[T_ERROR] < at[T_COMPLEX]);
  free(text);

  pc_run pass = {
      .path_a = "a", .path_b = "b", .tensors = tensors, .ntensors = 1, .first_divergence = -1};
  pass.by_verdict[PC_VERDICT_PASS] = 1;
  text = render_text(&pass, false, true);
  assert_string_equal(text, "PASS: 1 tensor within tolerance\n"); /* no header either */
  free(text);
}

static void test_text_summaries(void **state) {
  (void)state;
  pc_tensor some[3] = {tensors[T_PASS], tensors[T_SKIP], tensors[T_ONLY_A]};
  pc_run r = {.path_a = "a", .path_b = "b", .tensors = some, .ntensors = 2, .first_divergence = -1};
  r.by_verdict[PC_VERDICT_PASS] = r.by_verdict[PC_VERDICT_SKIPPED] = 1;
  char *text = render_text(&r, false, false);
  assert_true(strstr(text, "PASS: 1 tensor within tolerance (1 skipped)\n") == text);
  free(text);
  r.ntensors = 3;
  r.first_divergence = 2;
  r.by_verdict[PC_VERDICT_MISSING_IN_B] = 1;
  r.verdict = PC_RUN_DRIFT;
  text = render_text(&r, false, false);
  assert_non_null(strstr(text, "FAIL: 1 of 3 tensors fails (1 missing_in_b), 1 skipped; "
                               "first divergence: /dec/only_a\n"));
  free(text);
}

/* A drift with no mismatching element says which tensor-level criterion it breaks, with the
 * value and the limit the judge recorded: B = 1.1 A over 4 values with sum a^2 = 4 has
 * rel_rms = sqrt(0.04 / 4) = 0.1 and scale_error = 0.4 / 4 = 0.1; the limits are the judge's,
 * 0.08 (a tolerance of 0.05 that a trend raised) and 0.02 + 0.04 / sqrt(4) = 0.04. No element
 * count is a reason here, so none is given as one. */
static void test_text_tensor_level_reason(void **state) {
  (void)state;
  pc_tensor t = tensors[T_PASS];
  t.verdict = PC_VERDICT_DRIFT;
  t.stats.mismatches = 0;
  t.stats.finite_terms = 4;
  t.stats.sum_sq_a = 4;
  t.stats.sum_sq_b = 4.84;
  t.stats.sum_ab = 4.4;
  t.stats.sum_sq_diff = 0.04;
  t.stats.sum_a_diff = 0.4;
  t.tol.set = PC_TOL_MAX_REL_RMS | PC_TOL_MAX_SCALE;
  t.tol.max_rel_rms = 0.05;
  t.tol.max_scale = 0.02;
  t.tol.max_scale_sqrt_n = 0.04;
  t.nreasons = 2;
  t.reasons[0] = (pc_reason){PC_CRIT_REL_RMS, 0.1, 0.08};
  t.reasons[1] = (pc_reason){PC_CRIT_SCALE_ERROR, 0.1, 0.04};
  pc_run r = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1, .first_divergence = 0};
  r.by_verdict[PC_VERDICT_DRIFT] = 1;
  r.verdict = PC_RUN_DRIFT;
  char *text = render_text(&r, false, false);
  assert_non_null(strstr(text, "\n         rel_rms 0.1 > limit 0.08; scale_error 0.1 > limit "
                               "0.04; worst [1,1]:")); /* indent: "verdict" and the gap */
  assert_null(strstr(text, "outside tolerance"));
  assert_null(strstr(text, "mismatch_fraction"));
  assert_null(strstr(text, "root cause")); /* a root of no cascade */
  free(text);
  /* the writer renders what the judge recorded; it does not judge again */
  t.nreasons = 1;
  text = render_text(&r, false, false);
  assert_non_null(strstr(text, "rel_rms 0.1 > limit 0.08; worst"));
  assert_null(strstr(text, "scale_error"));
  free(text);
}

/* A path over 60 bytes keeps its last 57 behind "...". */
static void test_text_long_path(void **state) {
  (void)state;
  char path[101];
  for (int i = 0; i < 100; i++)
    path[i] = (char)('a' + i % 26);
  path[0] = '/';
  path[100] = '\0';
  pc_tensor t = tensors[T_PASS];
  t.path = path;
  pc_run r = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1};
  r.by_verdict[PC_VERDICT_PASS] = 1;
  char *text = render_text(&r, false, false);
  char want[80];
  snprintf(want, sizeof want, "pass     ...%s  float32", path + 43);
  assert_non_null(strstr(text, want));
  free(text);
}

static void assert_lines(const char *text, const char *const *wanted, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strstr(text, wanted[i]))
      fail_msg("missing line:\n%s\nin:\n%s", wanted[i], text);
}

/* Verbose: the worst element of a pass too, then means and aggregates, quantiles, histogram. */
static void test_text_verbose(void **state) {
  (void)state;
  pc_report_options opts = {.version = PC_REPORT_OPTIONS_VERSION, .verbose = true};
  char *text = render_text_with(&run, &opts);
  static const char *const wanted[] = {
      "\n                worst [1,1]: a=4.9406564584124654e-324 b=-0 (abs 4.94e-324, rel 1, "
      "ulp 1)\n",
      /* sqrt(0.01 / 6) = 0.0408; 3.995 / 4 = 0.99875; 10 log10(400) = 26.0 */
      "\n                mean abs 0.05, rel 0.1, ulp 1; rms 0.0408, rel_rms 0.05, "
      "cosine 0.99875, snr 26 dB\n",
      "\n                p50/p90/p99/p99.9: abs 0/0.05/0.09/0.1, rel 0.1/0.2/0.3/0.333, "
      "ulp 1/2/2/2\n",
      "\n                ulp histogram: 0: 2, 1: 2, 2-3: 2\n",
      /* the drift: no sums, 2^64 / 4 as its mean ulp, no histogram */
      "\n                mean abs 0, rel 0, ulp 4.61e+18; rms 0, rel_rms 0, cosine 1, "
      "snr inf dB\n",
      "\n                ulp histogram: empty\n"};
  assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
  assert_null(strstr(text, "  \n"));
  free(text);
  /* not verbose: no statistics */
  text = render_text(&run, false, false);
  assert_null(strstr(text, "ulp histogram"));
  assert_null(strstr(text, "worst [1,1]"));
  free(text);
}

/* A gate adds a baseline column (upper case where the gate fails) and a last line. */
static void test_text_gate(void **state) {
  (void)state;
  make_gate();
  pc_report_options opts = {.version = PC_REPORT_OPTIONS_VERSION, .gate = &gate};
  char *text = render_text_with(&run, &opts);
  static const char *const wanted[] = {
      "verdict         baseline   tensor         dtype",
      "\npass            unchanged  /enc/0/out     float32",
      "\nDRIFT           WORSE      /enc/1/attn    float32/bfloat16",
      "\nMISSING_IN_A    NEW        /dec/only_b    -/float16",
      "\nERROR           new        /enc/3/broken  float32",
      ("GATE ERROR: 2 tensors fail the baseline base.json at factor 2 (first: /enc/1/attn); "
       "2 new, 1 worse, 0 better, 5 unchanged, 1 only in the baseline\n")};
  assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
  free(text);
}

/* ---- Markdown, against files written by hand (tests/report/expected/) ---- */

static char *render_file(int (*writer)(const char *, const pc_run *, const pc_report_options *,
                                       pc_error *),
                         const pc_run *r, const pc_report_options *opts) {
  const char *path = temp_path();
  pc_error err = {0};
  assert_int_equal(writer(path, r, opts, &err), PC_OK);
  char *text = slurp(path);
  unlink(path);
  return text;
}

/* Compares text (then freed) with the expected file, whole. */
static void assert_file(char *text, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/tests/report/expected/%s", PC_SOURCE_DIR, name);
  char *want = slurp(path); /* whole, however long */
  if (strcmp(text, want) != 0)
    fail_msg("%s differs; got:\n%s", name, text);
  free(want);
  free(text);
}

static void test_markdown_worst(void **state) {
  (void)state;
  pc_report_options opts = {
      .version = PC_REPORT_OPTIONS_VERSION, .profile = "strict", .sort = PC_SORT_WORST};
  assert_file(render_file(pc_report_markdown, &run, &opts), "hand_worst.md");
}

/* Worst first among failures of one group and kind (docs/reports.md, "Row order"): the larger
 * mismatch fraction, then the larger max_ulp, then the larger max_rel (NaN the largest), then
 * run order. The order below is derived by hand from that rule. */
static void test_row_order_keys(void **state) {
  (void)state;
  struct {
    uint64_t mismatches, max_ulp;
    double max_rel;
  } rows[5] = {{2, 10, 0.1}, {2, 20, 0.1}, {2, 20, NAN}, {3, 1, 0.0}, {2, 10, 0.1}};
  pc_tensor t[5];
  memset(t, 0, sizeof t);
  for (size_t i = 0; i < 5; i++) {
    t[i].path = "/x";
    t[i].verdict = PC_VERDICT_DRIFT;
    t[i].caused_by = -1;
    t[i].stats.count = 4;
    t[i].stats.mismatches = rows[i].mismatches;
    t[i].stats.max_ulp = rows[i].max_ulp;
    t[i].stats.max_rel = rows[i].max_rel;
  }
  pc_run r = {.path_a = "a", .path_b = "b", .tensors = t, .ntensors = 5};
  size_t *order = pc_report_row_order(&r, NULL, PC_SORT_WORST);
  assert_non_null(order);
  const size_t want[5] = {3, 2, 1, 0, 4}; /* 3/4 first; 20 ULP with NaN, 20 ULP; ties: 0 then 4 */
  for (size_t k = 0; k < 5; k++)
    assert_int_equal(order[k], want[k]);
  free(order);
}

static void test_markdown_order_cut(void **state) {
  (void)state;
  pc_report_options opts = {
      .version = PC_REPORT_OPTIONS_VERSION, .sort = PC_SORT_ORDER, .max_rows = 3};
  assert_file(render_file(pc_report_markdown, &run, &opts), "hand_order_cut.md");
}

static void test_markdown_gate(void **state) {
  (void)state;
  make_gate();
  pc_report_options opts = {
      .version = PC_REPORT_OPTIONS_VERSION, .sort = PC_SORT_ORDER, .gate = &gate};
  assert_file(render_file(pc_report_markdown, &run, &opts), "hand_gate.md");
}

/* Text from the data cannot break out of its code span or its cell. */
static void test_markdown_escaping(void **state) {
  (void)state;
  pc_tensor t = tensors[T_SKIP];
  t.path = "/a|b/``c`";
  t.message = "x\ny\xff";
  pc_run one = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1};
  char *text = render_file(pc_report_markdown, &one, NULL);
  assert_non_null(strstr(text, "| | ``` /a\\|b/``c` ``` | skipped |"));
  assert_non_null(strstr(text, "| `x\\ny\\xff` |\n")); /* visible escapes, not raw bytes */
  free(text);
}

/* ---- JUnit and HTML: structure here, validation and rendering in tests/report ---- */

static void test_junit_cases(void **state) {
  (void)state;
  char *text = render_file(pc_report_junit, &run, NULL);
  static const char *const wanted[] = {
      "<testsuites name=\"paritycheck\" tests=\"8\" failures=\"5\" errors=\"1\" skipped=\"1\">",
      "<testcase name=\"out\" classname=\"enc.0\"/>",
      "<testcase name=\"attn\" classname=\"enc.1\">\n      <failure type=\"drift\" "
      "message=\"nan_mismatch 1 &gt; limit 0; inf_mismatch 2 &gt; limit 0; mismatch_fraction "
      "0.117 &gt; limit 0.01 (7 of 60 elements); worst [2,1,2]: a=1, b=nan\">path /enc/1/attn\n"
      "dtype float32/bfloat16\nexecution index 1\nreasons nan_mismatch 1 &gt; limit 0; "
      "inf_mismatch 2 &gt; limit 0; mismatch_fraction 0.11666666666666667 &gt; limit "
      "0.01 (7 of 60 elements)\nmismatches 7 of 60",
      /* the cascade member names its root cause in the message and the body */
      "<failure type=\"drift\" message=\"mismatch_fraction 0.125 &gt; limit 0 (1 of 8 "
      "elements); caused by /enc/1/attn; worst [5]: a=(0.1, -2), b=(0.1, -2.25)\">path "
      "/enc/2/cplx\ndtype complex64\nexecution index 2\nreasons mismatch_fraction 0.125 &gt; "
      "limit 0 (1 of 8 elements)\ncaused by /enc/1/attn\n",
      "<testcase name=\"only_b\" classname=\"dec\">\n      <failure type=\"missing_in_a\" "
      "message=\"only in B\">",
      "<testcase name=\"names\" classname=\"meta\">\n      <skipped message=\"both sides are "
      "strings\"/>",
      "<error type=\"error\" message=\"filter 32001 not available\"/>"};
  assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
  /* with the gate only the two tensors that fail it are failures */
  free(text);
  make_gate();
  pc_report_options opts = {.version = PC_REPORT_OPTIONS_VERSION, .gate = &gate};
  text = render_file(pc_report_junit, &run, &opts);
  static const char *const gated[] = {
      "failures=\"2\"", "message=\"worse than the baseline: nan_mismatch 1 &gt; limit 0;",
      "message=\"new failure: only in B",
      ("<system-out>accepted by the baseline (unchanged): drift: mismatch_fraction 0.125 &gt; "
       "limit 0 (1 of 8 elements); caused by /enc/1/attn</system-out>")};
  assert_lines(text, gated, sizeof gated / sizeof gated[0]);
  free(text);
}

static void test_junit_root_and_escaping(void **state) {
  (void)state;
  pc_tensor t = tensors[T_ERROR];
  t.path = "/top<&>\"";
  t.message = "bad\x01\xc3\xa9";
  pc_run one = {.path_a = "a", .path_b = "b", .tensors = &t, .ntensors = 1};
  char *text = render_file(pc_report_junit, &one, NULL);
  assert_non_null(strstr(text, "name=\"top&lt;&amp;&gt;&quot;\" classname=\"(root)\""));
  assert_non_null(strstr(text, "message=\"bad\\x01\xc3\xa9\""));
  free(text);
}

static void test_html_rows(void **state) {
  (void)state;
  pc_report_options opts = {.version = PC_REPORT_OPTIONS_VERSION, .sort = PC_SORT_ORDER};
  char *text = render_file(pc_report_html, &run, &opts);
  assert_true(strncmp(text, "<!DOCTYPE html>\n", 16) == 0);
  /* no network: no URL but the SVG namespace, which is a name, not a fetch */
  assert_null(strstr(text, "src="));
  assert_null(strstr(text, "href="));
  assert_null(strstr(text, "@import"));
  /* the pass row: run position 0, worst-first rank 6, three histogram bars of heights
   * 24 log2(3)/log2(3) = 24 for each of the three buckets */
  assert_non_null(strstr(text, "<tr class=\"ok\"><td class=\"n\" data-v=\"0\">1</td>"
                               "<td data-v=\"6\" class=\"v-pass\">pass</td>"));
  assert_non_null(strstr(text, "<rect x=\"5\" y=\"0\" width=\"4\" height=\"24\">"
                               "<title>1 ULP: 2</title></rect>"));
  assert_non_null(strstr(text, "<title>2-3 ULP: 2</title>"));
  /* NaN sorts as the worst value */
  assert_non_null(strstr(text, "data-v=\"Infinity\">nan</td>"));
  /* the root cause in bold with the button that folds its cascade; the member right after it,
   * marked as such, naming its root */
  assert_non_null(strstr(text, "<td class=\"details\"><strong class=\"root\">root cause</strong> "
                               "nan_mismatch 1 &gt; limit 0; inf_mismatch 2 &gt; limit 0; "
                               "mismatch_fraction 0.117 &gt; limit 0.01 (7 of 60 elements); "
                               "worst [2,1,2]: a=1, b=nan <button type=\"button\" class=\"fold\" "
                               "data-fold=\"1\" aria-expanded=\"true\">1 tensor caused by "
                               "this</button></td></tr>\n<tr class=\"fail cascade\" "
                               "data-root=\"1\"><td class=\"n\" data-v=\"2\">3</td>"));
  assert_non_null(strstr(text, "<td class=\"details\">mismatch_fraction 0.125 &gt; limit 0 (1 of "
                               "8 elements); caused by <bdi>/enc/1/attn</bdi>; worst [5]:"));
  /* names from the data are isolated, <bdi>, in the body; not in the title, which holds text */
  assert_non_null(strstr(text, "<td class=\"path\"><bdi>/enc/0/out</bdi></td>"));
  assert_non_null(strstr(text, "<td class=\"details\"><strong class=\"root\">root cause</strong> "
                               "only in B</td>"));
  free(text);
}

static void test_report_errors(void **state) {
  (void)state;
  pc_error err = {0};
  assert_int_equal(pc_report_markdown("/nonexistent-dir/r.md", &run, NULL, &err), PC_EIO);
  assert_non_null(strstr(err.message, "/nonexistent-dir/r.md"));
  assert_int_equal(pc_report_junit("/dev/full", &run, NULL, &err), PC_EIO);
  assert_non_null(strstr(err.message, "/dev/full"));
  assert_int_equal(pc_report_html("/dev/full", &run, NULL, &err), PC_EIO);
  assert_int_equal(pc_report_markdown(NULL, &run, NULL, &err), PC_EUSAGE);
  assert_int_equal(pc_report_html("x", NULL, NULL, &err), PC_EUSAGE);
}

/* ---- Untrusted names (docs/reports.md, "Untrusted names"): inputs and renderings by hand ---- */

static void assert_escaped(const char *in, pc_escape_context ctx, const char *want) {
  char got[256];
  size_t n = pc_escape(got, sizeof got, in, ctx);
  if (strcmp(got, want) != 0)
    fail_msg("pc_escape(\"%s\") gave \"%s\", want \"%s\"", in, got, want);
  assert_int_equal(n, strlen(want));
}

static void test_escape_terminal(void **state) {
  (void)state;
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"plain/name_0.weight", "plain/name_0.weight"},
      {"esc\x1b[31mRED\x1b[0m", "esc\\x1b[31mRED\\x1b[0m"},
      {"x\nPASS: 24 tensors within tolerance", "x\\nPASS: 24 tensors within tolerance"},
      {"a\tb\rc\x01\x1f", "a\\tb\\rc\\x01\\x1f"},
      {"del\x7f", "del\\x7f"},
      {"back\\slash", "back\\\\slash"},
      {"\\x1b", "\\\\x1b"}, /* the text of an escape is not an escape */
      /* C1 controls: U+0080, U+0085 (NEL), U+009B (CSI), U+009F; U+00A0 is printable */
      {"\xc2\x80\xc2\x85\xc2\x9b\xc2\x9f\xc2\xa0", "\\u0080\\u0085\\u009b\\u009f\xc2\xa0"},
      /* bidi controls: ALM, LRM, RLM, LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI */
      {"\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f", "\\u061c\\u200e\\u200f"},
      {"\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
       "\\u202a\\u202b\\u202c\\u202d\\u202e"},
      {"\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u2066\\u2067\\u2068\\u2069"},
      /* line and paragraph separators, the noncharacters XML cannot hold */
      {"\xe2\x80\xa8\xe2\x80\xa9\xef\xbf\xbe\xef\xbf\xbf", "\\u2028\\u2029\\ufffe\\uffff"},
      /* neighbours that stay: U+200D (ZWJ), U+202F, U+2065, U+FFFD, an emoji, CJK, Latin */
      {"\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xef\xbf\xbd\xf0\x9f\x98\x80\xe6\x97\xa5 caf\xc3\xa9",
       "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xef\xbf\xbd\xf0\x9f\x98\x80\xe6\x97\xa5 caf\xc3\xa9"},
      /* not UTF-8: stray bytes, a cut sequence, an overlong '/', a surrogate, past U+10FFFF */
      {"bad\xff\xfe", "bad\\xff\\xfe"},
      {"e\xc3", "e\\xc3"},
      {"\xe2\x80x", "\\xe2\\x80x"},
      {"\xc0\xaf", "\\xc0\\xaf"},
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      {"|&<>\"'`*_", "|&<>\"'`*_"}, /* no specials on a terminal */
      {"", ""},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    assert_escaped(cases[k].in, PC_ESCAPE_TERMINAL, cases[k].want);
}

static void test_escape_contexts(void **state) {
  (void)state;
  assert_escaped("a|b\\c\n\xe2\x80\xae<&", PC_ESCAPE_MARKDOWN, "a\\|b\\\\c\\n\\u202e<&");
  assert_escaped("<a&b>\"'\t\n\x1b\xe2\x80\xae\xff", PC_ESCAPE_XML,
                 "&lt;a&amp;b&gt;&quot;&apos;\\t\\n\\x1b\\u202e\\xff");
  assert_escaped("x<\xe2\x80\xae|", PC_ESCAPE_HTML, "<bdi>x&lt;\\u202e|</bdi>");
  assert_escaped("", PC_ESCAPE_HTML, "<bdi></bdi>");
}

/* Like snprintf: the whole length back, and a cut only between two characters' renderings. */
static void test_escape_truncation(void **state) {
  (void)state;
  char buf[16];
  assert_int_equal(pc_escape(NULL, 0, "a\x1b", PC_ESCAPE_TERMINAL), 5);
  memset(buf, 'z', sizeof buf);
  assert_int_equal(pc_escape(buf, 4, "a\x1b", PC_ESCAPE_TERMINAL), 5);
  assert_string_equal(buf, "a"); /* "\x1" would fit, but is no escape */
  assert_int_equal(pc_escape(buf, 6, "a\x1b", PC_ESCAPE_TERMINAL), 5);
  assert_string_equal(buf, "a\\x1b");
  assert_int_equal(pc_escape(buf, 3, "\xc3\xa9\xc3\xa9", PC_ESCAPE_TERMINAL), 4);
  assert_string_equal(buf, "\xc3\xa9"); /* never half a character */
  assert_int_equal(pc_escape(buf, 13, "xy", PC_ESCAPE_HTML), 13);
  assert_string_equal(buf, "<bdi>x</bdi>"); /* the closing tag kept */
  assert_int_equal(pc_escape(buf, 5, "xy", PC_ESCAPE_HTML), 13);
  assert_string_equal(buf, "");
  /* pc_escape_put takes a length, so a NUL byte is data too */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  pc_escape_put(f, "a\0b\xe2\x80", 5, PC_ESCAPE_TERMINAL);
  fclose(f);
  assert_string_equal(text, "a\\x00b\\xe2\\x80");
  free(text);
}

/* A nested object as the JSON report writes a tensor: jansson's two-space indentation, every
 * line after the first moved 4 further in, a newline inside a string left escaped; the text
 * written out by hand. */
static void test_json_put_nested(void **state) {
  (void)state;
  json_t *o = json_object(), *q = json_object();
  assert_non_null(o);
  assert_non_null(q);
  json_object_set_new(o, "path", json_string("/a\nb"));
  json_object_set_new(q, "p50", json_real(0.5));
  json_object_set_new(o, "quantiles", q);
  json_object_set_new(o, "shape", json_pack("[ii]", 2, 3));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(pc_json_put_nested(f, o, 4), PC_OK);
  fclose(f);
  assert_string_equal(text, "{\n"
                            "      \"path\": \"/a\\nb\",\n"
                            "      \"quantiles\": {\n"
                            "        \"p50\": 0.5\n"
                            "      },\n"
                            "      \"shape\": [\n"
                            "        2,\n"
                            "        3\n"
                            "      ]\n"
                            "    }");
  free(text);
  json_decref(o);
}

/* Every buffer size over a name that mixes runs of plain characters with escapes: the buffer
 * holds the longest run of whole renderings, listed here by hand, that fits with the NUL. */
static void test_escape_every_size(void **state) {
  (void)state;
  static const char *const units[] = {"g", "0", "/", "a", "\\x1b", "b", "c", "\\\\", "d"};
  enum { NU = sizeof units / sizeof units[0] };
  char all[64] = "", want[64], buf[64];
  for (size_t u = 0; u < NU; u++)
    strcat(all, units[u]);
  for (size_t size = 0; size < strlen(all) + 3; size++) {
    want[0] = '\0';
    for (size_t u = 0; u < NU && strlen(want) + strlen(units[u]) + 1 <= size; u++)
      strcat(want, units[u]);
    memset(buf, 'z', sizeof buf);
    assert_int_equal(pc_escape(size ? buf : NULL, size,
                               "g0/a\x1b"
                               "bc\\d",
                               PC_ESCAPE_TERMINAL),
                     strlen(all));
    if (size)
      assert_string_equal(buf, want);
  }
}

/* A hostile name in the text report: no raw control character, no line of its own; a long one
 * keeps a tail that starts at an escape, never inside one. */
static void test_text_untrusted_names(void **state) {
  (void)state;
  pc_tensor t[2] = {tensors[T_DRIFT], tensors[T_ERROR]};
  t[0].path = "/x\nPASS: 24 tensors within tolerance\x1b[2J\xe2\x80\xae";
  t[0].caused_by = -1;
  t[1].path = "/e\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b";
  t[1].message = "cannot read /e\x1b]0;title\x07: \xff";
  t[1].caused_by = -1;
  pc_run two = {.path_a = "a",
                .path_b = "b",
                .tensors = t,
                .ntensors = 2,
                .verdict = PC_RUN_ERROR,
                .first_divergence = 0};
  two.by_verdict[PC_VERDICT_DRIFT] = two.by_verdict[PC_VERDICT_ERROR] = 1;
  char *text = render_text(&two, false, false);
  assert_null(strchr(text, '\x1b'));
  assert_null(strstr(text, "\xe2\x80\xae"));
  assert_null(strstr(text, "\nPASS"));
  assert_non_null(strstr(text, "/x\\nPASS: 24 tensors within tolerance\\x1b[2J\\u202e  "));
  /* "/e" and 20 ESC render as 82 bytes: the last 14 ESC (56) fit 60 with "..." */
  assert_non_null(strstr(text, "  ...\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b"
                               "\\x1b\\x1b  float32"));
  assert_non_null(strstr(text, "cannot read /e\\x1b]0;title\\x07: \\xff\n"));
  assert_non_null(strstr(text, "; first divergence: /x\\nPASS: 24 tensors within tolerance"
                               "\\x1b[2J\\u202e\n"));
  free(text);
}

static void test_text_write_error(void **state) {
  (void)state;
  pc_error err = {0};
  assert_int_equal(pc_report_text("/dev/full", &run, NULL, &err), PC_EIO);
  assert_int_equal(err.code, PC_EIO);
  assert_non_null(strstr(err.message, "No space left on device"));
  /* options of another version are refused, not misread */
  pc_report_options old = PC_REPORT_OPTIONS_INIT;
  old.version = PC_REPORT_OPTIONS_VERSION + 1;
  assert_int_equal(pc_report_text("/dev/full", &run, &old, &err), PC_EUSAGE);
  assert_int_equal(pc_report_json("/dev/full", &run, &old, &err), PC_EUSAGE);
}

/* Row k of test_ordered_rows: its number and k % 13 letters, so that rows differ in length; rows
 * listed in `fail` return their code instead (before writing anything). */
typedef struct numbered {
  size_t fail_at[2];
  int fail_rc[2];
} numbered;

static int put_numbered(FILE *out, size_t k, void *ctx) {
  const numbered *nb = ctx;
  for (int i = 0; i < 2; i++)
    if (nb && nb->fail_rc[i] && k == nb->fail_at[i])
      return nb->fail_rc[i];
  fprintf(out, "%zu %.*s\n", k, (int)(k % 13), "abcdefghijklm");
  return PC_OK;
}

static char *render_rows(size_t n, unsigned threads, const numbered *nb, int *rc) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  assert_non_null(m);
  pc_report_options opts = PC_REPORT_OPTIONS_INIT;
  opts.threads = threads ? threads : 1; /* 0 would mean one per core */
  *rc = pc_report_put_ordered(m, n, &opts, put_numbered, (void *)nb);
  assert_int_equal(fclose(m), 0);
  return text;
}

/* pc_report_put_ordered writes exactly the rows in order whatever the thread count, and reports
 * the first failing row in row order, whichever thread met it first. */
static void test_ordered_rows(void **state) {
  (void)state;
  enum { N = 1000 };
  char *want = malloc(N * 32), *at = want;
  assert_non_null(want);
  for (size_t k = 0; k < N; k++) /* the rows, written out independently */
    at += sprintf(at, "%zu %.*s\n", k, (int)(k % 13), "abcdefghijklm");
  const unsigned threads[] = {0, 1, 2, 3, 7, 64};
  const size_t counts[] = {0, 1, 2, 5, N};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
      int rc;
      char *got = render_rows(counts[c], threads[t], NULL, &rc);
      assert_int_equal(rc, PC_OK);
      size_t len = (size_t)(strchr(want, '\0') - want);
      for (size_t k = 0, nl = 0; k < len; k++) /* the prefix of want holding counts[c] rows */
        if (want[k] == '\n' && ++nl == counts[c]) {
          len = k + 1;
          break;
        }
      assert_int_equal(strlen(got), counts[c] ? len : 0);
      assert_memory_equal(got, want, strlen(got));
      free(got);
    }
  /* rows 700 (PC_EDATA) and 300 (PC_EIO) fail: row 300's error, and only rows before it */
  numbered nb = {{700, 300}, {PC_EDATA, PC_EIO}};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    int rc;
    char *got = render_rows(N, threads[t], &nb, &rc);
    assert_int_equal(rc, PC_EIO);
    const char *row300 = strstr(want, "\n300 ") + 1;
    assert_true(strlen(got) <= (size_t)(row300 - want));
    assert_memory_equal(got, want, strlen(got));
    free(got);
  }
  free(want);
}

/* Every writer that formats rows on threads writes the bytes of one thread; options of version
 * 1, which have no thread count, are still read. */
static void test_report_threads(void **state) {
  (void)state;
  int (*const writers[])(const char *, const pc_run *, const pc_report_options *,
                         pc_error *) = {pc_report_text, pc_report_json, pc_report_html};
  for (size_t w = 0; w < sizeof writers / sizeof *writers; w++)
    for (int quiet = 0; quiet < 2; quiet++) {
      char *text[3];
      const unsigned threads[] = {1, 3, 8};
      for (int k = 0; k < 3; k++) {
        pc_report_options opts = PC_REPORT_OPTIONS_INIT;
        opts.quiet = quiet;
        opts.verbose = !quiet;
        opts.threads = threads[k];
        const char *path = temp_path();
        pc_error err = {0};
        assert_int_equal(writers[w](path, &run, &opts, &err), PC_OK);
        text[k] = slurp(path);
        unlink(path);
      }
      assert_string_equal(text[0], text[1]);
      assert_string_equal(text[0], text[2]);
      pc_report_options v1 = PC_REPORT_OPTIONS_INIT;
      v1.version = 1;
      v1.quiet = quiet;
      v1.verbose = !quiet;
      const char *path = temp_path();
      pc_error err = {0};
      assert_int_equal(writers[w](path, &run, &v1, &err), PC_OK);
      char *old = slurp(path);
      unlink(path);
      assert_string_equal(text[0], old);
      free(old);
      for (int k = 0; k < 3; k++)
        free(text[k]);
    }
}

/* The provenance block, after the verdict line: by default only the attributes that differ, a
 * long value cut to 60 columns with its length; with -v every attribute whole, a value of A
 * longer than 40 characters not widening A's column. Expected lines written out by hand. */
static void test_text_provenance_width(void **state) {
  (void)state;
  char repr[61], long_a[1062], long_b[1062];
  memset(repr, 'x', 60);
  repr[60] = '\0';
  memset(long_a, 'a', 1061);
  long_a[1061] = '\0';
  memset(long_b, 'b', 1061);
  long_b[1061] = '\0';
  pc_attr a[] = {{"backend", "cpu", PC_ATTR_STRING},
                 {"model_repr", repr, PC_ATTR_STRING},
                 {"device", "x86", PC_ATTR_STRING},
                 {"long", long_a, PC_ATTR_STRING}};
  pc_attr b[] = {{"backend", "cuda", PC_ATTR_STRING},
                 {"model_repr", repr, PC_ATTR_STRING},
                 {"device", "x86", PC_ATTR_STRING},
                 {"long", long_b, PC_ATTR_STRING}};
  pc_run r = run;
  r.provenance[0] = (pc_provenance){a, 4};
  r.provenance[1] = (pc_provenance){b, 4};
  char *text = render_text(&r, false, false);
  char want[4096];
  /* 60 columns of the value, "...", its length: A's column is 63 wide, over 40, so it does not
   * widen the column (3 for "cpu"), and its own line runs on */
  snprintf(want, sizeof want,
           "\nprovenance: 2 of 4 attributes differ (A | B; -v shows all)\n"
           "* backend  cpu | cuda\n"
           "* long     %.60s... (1061 characters; -v or JSON for all) | "
           "%.60s... (1061 characters; -v or JSON for all)\n\n",
           long_a, long_b);
  assert_non_null(strstr(text, want));
  assert_true(strstr(text, want) > strstr(text, "ERROR: 1 of 8")); /* after the verdict */
  assert_null(strstr(text, "model_repr"));
  free(text);
  pc_report_options opts = PC_REPORT_OPTIONS_INIT;
  opts.verbose = true;
  text = render_text_with(&r, &opts);
  snprintf(want, sizeof want,
           "\nprovenance (A | B; * differs: 2 of 4)\n"
           "* backend     cpu | cuda\n"
           "  model_repr  %s | %s\n"
           "  device      x86 | x86\n"
           "* long        %s | %s\n\n",
           repr, repr, long_a, long_b);
  assert_non_null(strstr(text, want));
  free(text);
}

/* ---- diagnoses and the indeterminate verdict ---- */

/* A run of five float32 tensors of [4] as the judge leaves them (docs/reports.md,
 * "Indeterminate tensors"): a pass, an indeterminate gradient (rel_rms 0.8 against 0.001, no
 * digit left), and three structural drifts, each with the structure criterion's statistic and
 * limit as the judge's tests set them: B = 2 A (the scale test's p-value 0 below 1e-6), B
 * shifted by one slice of axis 0 (shifted over unshifted distance 0.01 below 0.25), 12 % of A's
 * nonzero elements zeroed in B (their energy 60 above 3): a failing statistic on either side
 * of its limit reads "<" or ">".
 * The judge's first divergence is the indeterminate tensor. */
enum { D_PASS, D_INDET, D_SCALED, D_SHIFTED, D_ZEROED, D_COUNT };
static pc_tensor diag_tensors[D_COUNT];
static uint64_t four[] = {4};

static pc_tensor diag_tensor(const char *path, pc_verdict v, pc_reason why, pc_diagnosis d) {
  pc_tensor t = {.path = (char *)path, .verdict = v, .rank = 1, .dims = four, .caused_by = -1};
  t.dtype_a = t.dtype_b = t.compare = PC_DTYPE_FLOAT32;
  t.stats = (pc_stats){.count = 4,
                       .mismatches = v == PC_VERDICT_PASS ? 0 : 4,
                       .max_abs = 1,
                       .max_rel = 0.5,
                       .max_ulp = 8,
                       .finite_terms = 4};
  t.nreasons = v == PC_VERDICT_PASS ? 0 : 1;
  t.reasons[0] = why;
  t.diagnosis = d;
  return t;
}

/* n tensors of the run above, tallied by the library (pc_run_accept_indeterminate) with or
 * without accepting indeterminate tensors. */
static pc_run diag_run(size_t n, bool accept) {
  diag_tensors[D_PASS] = diag_tensor("/l0/out", PC_VERDICT_PASS, (pc_reason){0}, (pc_diagnosis){0});
  diag_tensors[D_INDET] =
      diag_tensor("/l1/grad", PC_VERDICT_INDETERMINATE, (pc_reason){PC_CRIT_REL_RMS, 0.8, 0.001},
                  (pc_diagnosis){PC_DIAG_NO_DIGITS, false, 0, 0.8, 0.8, 0.5});
  diag_tensors[D_SCALED] =
      diag_tensor("/l2/scaled", PC_VERDICT_DRIFT, (pc_reason){PC_CRIT_STRUCTURE, 0, 1e-6},
                  (pc_diagnosis){PC_DIAG_SCALED, true, 0, 2.0, 0, 1e-6});
  diag_tensors[D_SHIFTED] =
      diag_tensor("/l3/shifted", PC_VERDICT_DRIFT, (pc_reason){PC_CRIT_STRUCTURE, 0.01, 0.25},
                  (pc_diagnosis){PC_DIAG_SHIFTED, true, 0, 1, 0.01, 0.25});
  diag_tensors[D_ZEROED] =
      diag_tensor("/l4/zeroed", PC_VERDICT_DRIFT, (pc_reason){PC_CRIT_STRUCTURE, 60, 3},
                  (pc_diagnosis){PC_DIAG_PARTLY_ZEROED, true, 0, 0.12, 60, 3});
  pc_run r = {.path_a = "a.h5",
              .path_b = "b.h5",
              .tensors = diag_tensors,
              .ntensors = n,
              .first_divergence = D_INDET};
  pc_run_accept_indeterminate(&r, accept);
  return r;
}

/* The detail line under each judged tensor: the indent is the verdict column, "INDETERMINATE"
 * (13) and the gap (2); the reason as pc_report_reasons gives it, then the diagnosis as
 * pc_diagnosis_text words it. */
#define DETAIL "\n               "
#define INDET_WHY                                                                                  \
  "rel_rms 0.8 > limit 0.001; diagnosis: no significant digit left: the honest allowance is 0.8 "  \
  "of the value's size, so a bug and honest drift look alike here"

static void test_text_diagnosis(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, false);
  assert_int_equal(r.verdict, PC_RUN_DRIFT);
  assert_int_equal(r.by_verdict[PC_VERDICT_INDETERMINATE], 1);
  for (int quiet = 0; quiet < 2; quiet++) { /* quiet mode keeps every failure */
    char *text = render_text(&r, false, quiet);
    static const char *const wanted[] = {
        "\nINDETERMINATE  /l1/grad ",
        DETAIL INDET_WHY "\n",
        "\nDRIFT          /l2/scaled ",
        DETAIL "structure 0 < limit 1e-06; diagnosis: scaled by 2.000\n",
        DETAIL "structure 0.01 < limit 0.25; diagnosis: shifted by +1 along the last axis "
               "(row-major order)\n",
        DETAIL "structure 60 > limit 3; diagnosis: 12.0 % of elements zeroed\n",
        "FAIL: 4 of 5 tensors fail (3 drift, 1 indeterminate); first divergence: /l1/grad\n"};
    assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
    free(text);
  }
}

/* Accepted, the indeterminate tensor is still listed (quiet mode too), in lower case as no
 * failure, with the acceptance on its detail line; the summary counts it apart and names it,
 * and the first divergence moves to the first tensor that fails the run. With nothing else
 * failing the run passes. */
static void test_text_indeterminate_accepted(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, true);
  assert_int_equal(r.verdict, PC_RUN_DRIFT); /* the three drifts */
  for (int quiet = 0; quiet < 2; quiet++) {
    char *text = render_text(&r, false, quiet);
    static const char *const wanted[] = {
        "\nindeterminate  /l1/grad ",
        DETAIL INDET_WHY "; accepted: the run accepts indeterminate tensors\n",
        ("FAIL: 3 of 5 tensors fail (3 drift); 1 indeterminate accepted (first: /l1/grad); "
         "first divergence: /l2/scaled\n")};
    assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
    assert_null(strstr(text, "INDETERMINATE"));
    free(text);
  }
  r = diag_run(2, true);
  assert_int_equal(r.verdict, PC_RUN_PASS);
  char *text = render_text(&r, false, false);
  assert_non_null(strstr(
      text, "PASS: 1 tensor within tolerance; 1 indeterminate accepted (first: /l1/grad)\n"));
  free(text);
  r = diag_run(2, false);
  assert_int_equal(r.verdict, PC_RUN_DRIFT);
  text = render_text(&r, false, false);
  assert_non_null(
      strstr(text, "FAIL: 1 of 2 tensors fails (1 indeterminate); first divergence: /l1/grad\n"));
  free(text);
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

/* Markdown: the verdict cell (bold as a failure, "(accepted)" when the run accepts it), the
 * reason with its diagnosis in the details cell, and the tally. */
static void test_markdown_diagnosis(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, false);
  char *text = render_file(pc_report_markdown, &r, NULL);
  static const char *const wanted[] = {
      "- **verdict**: drift; 5 tensors: 1 pass, 4 fail (3 drift, 1 indeterminate)\n",
      "| `/l1/grad` | **indeterminate** |",
      "`" INDET_WHY "`",
      "`structure 0 < limit 1e-06; diagnosis: scaled by 2.000`",
      ("`structure 0.01 < limit 0.25; diagnosis: shifted by +1 along the last axis (row-major "
       "order)`"),
      "`structure 60 > limit 3; diagnosis: 12.0 % of elements zeroed`"};
  assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
  free(text);
  r = diag_run(D_COUNT, true);
  text = render_file(pc_report_markdown, &r, NULL);
  static const char *const accepted[] = {
      "- **verdict**: drift; 5 tensors: 1 pass, 3 fail (3 drift), 1 indeterminate accepted\n",
      "| `/l1/grad` | indeterminate (accepted) |", "- **first divergence**: `/l2/scaled`\n"};
  assert_lines(text, accepted, sizeof accepted / sizeof accepted[0]);
  free(text);
}

/* JUnit: the failure's message carries the diagnosis, and so does its body; an accepted
 * indeterminate tensor is a pass for CI with its reason kept. */
static void test_junit_diagnosis(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, false);
  char *text = render_file(pc_report_junit, &r, NULL);
  static const char *const wanted[] = {
      "<failure type=\"drift\" message=\"structure 0 &lt; limit 1e-06; diagnosis: scaled by "
      "2.000\">",
      "\ndiagnosis scaled by 2.000\n",
      "<failure type=\"drift\" message=\"structure 60 &gt; limit 3; diagnosis: 12.0 % of "
      "elements zeroed\">",
      "<failure type=\"indeterminate\" message=\"rel_rms 0.8 &gt; limit 0.001; diagnosis: no "
      "significant digit left: the honest allowance is 0.8 of the value&apos;s size, so a bug and "
      "honest drift look alike here\">"};
  assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
  assert_non_null(strstr(text, " failures=\"4\""));
  free(text);
  r = diag_run(D_COUNT, true);
  text = render_file(pc_report_junit, &r, NULL);
  assert_non_null(strstr(text, "<system-out>accepted by the run (indeterminate): rel_rms 0.8 "
                               "&gt; limit 0.001; diagnosis: no significant digit left"));
  assert_null(strstr(text, "<failure type=\"indeterminate\""));
  assert_non_null(strstr(text, " failures=\"3\""));
  free(text);
}

/* GitHub: the diagnosis on each ::error line, '%' as %25; an accepted indeterminate tensor a
 * ::warning that says who accepted it. */
static void test_github_diagnosis(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, false);
  char *text = render_file(pc_report_github, &r, NULL);
  assert_string_equal(
      text,
      "::error title=paritycheck INDETERMINATE::/l1/grad: " INDET_WHY "\n"
      "::error title=paritycheck DRIFT::/l2/scaled: structure 0 < limit 1e-06; diagnosis: scaled "
      "by 2.000\n"
      "::error title=paritycheck DRIFT::/l3/shifted: structure 0.01 < limit 0.25; diagnosis: "
      "shifted "
      "by +1 along the last axis (row-major order)\n"
      "::error title=paritycheck DRIFT::/l4/zeroed: structure 60 > limit 3; diagnosis: 12.0 %25 "
      "of elements zeroed\n");
  free(text);
  r = diag_run(2, true);
  text = render_file(pc_report_github, &r, NULL);
  assert_string_equal(text, "::warning title=paritycheck INDETERMINATE::/l1/grad: " INDET_WHY
                            " (accepted by the run: indeterminate)\n");
  free(text);
}

/* HTML: the verdict's own class, the diagnosis in the details cell, an accepted row's class. */
static void test_html_diagnosis(void **state) {
  (void)state;
  pc_run r = diag_run(D_COUNT, false);
  char *text = render_file(pc_report_html, &r, NULL);
  static const char *const wanted[] = {
      "class=\"v-indeterminate\">indeterminate</td>",
      "structure 0 &lt; limit 1e-06; diagnosis: scaled by 2.000",
      "no significant digit left: the honest allowance is 0.8 of the value&apos;s size"};
  assert_lines(text, wanted, sizeof wanted / sizeof wanted[0]);
  assert_non_null(strstr(text, "<tr class=\"fail\"><td class=\"n\" data-v=\"1\">2</td>"));
  free(text);
  r = diag_run(D_COUNT, true);
  text = render_file(pc_report_html, &r, NULL);
  assert_non_null(strstr(text, "<tr class=\"accepted\"><td class=\"n\" data-v=\"1\">2</td>"));
  assert_non_null(strstr(text, "; accepted by the run (indeterminate)"));
  free(text);
}

static int refuse_to_read_back(const char *tmp, pc_error *err) {
  FILE *f = fopen(tmp, "rb");
  char got[8] = "";
  size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
  if (f)
    fclose(f);
  got[n] = '\0';
  /* the temporary file holds what was written when it is checked */
  snprintf(err->message, sizeof err->message, "%s",
           strcmp(got, "new") == 0 ? "refused" : "not complete");
  err->code = PC_EPARSE;
  return PC_EPARSE;
}

/* A file whose verify refuses it never replaces the old one, and no temporary file stays. */
static void test_report_file_verified(void **state) {
  (void)state;
  char dir[] = "/tmp/pc_verify_XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/r.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("old", f);
  fclose(f);
  pc_report_file rf;
  pc_error err;
  assert_int_equal(pc_report_open(&rf, path, &err), PC_OK);
  fputs("new", rf.f);
  rf.verify = refuse_to_read_back;
  assert_int_equal(pc_report_close(&rf, "the test file", &err), PC_EIO);
  assert_non_null(strstr(err.message, "would not read back (refused)"));
  char got[8] = "";
  f = fopen(path, "rb");
  got[fread(got, 1, sizeof got - 1, f)] = '\0';
  fclose(f);
  assert_string_equal(got, "old");
  size_t entries = 0; /* r.txt alone: no temporary file stays */
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    entries += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
  closedir(d);
  assert_int_equal(entries, 1);
  unlink(path);
  rmdir(dir);
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
      cmocka_unit_test_setup(test_text_lines, setup),
      cmocka_unit_test_setup(test_text_color, setup),
      cmocka_unit_test_setup(test_text_quiet, setup),
      cmocka_unit_test_setup(test_text_summaries, setup),
      cmocka_unit_test_setup(test_text_long_path, setup),
      cmocka_unit_test_setup(test_text_tensor_level_reason, setup),
      cmocka_unit_test_setup(test_text_write_error, setup),
      cmocka_unit_test_setup(test_text_verbose, setup),
      cmocka_unit_test_setup(test_text_gate, setup),
      cmocka_unit_test_setup(test_markdown_worst, setup),
      cmocka_unit_test(test_row_order_keys),
      cmocka_unit_test_setup(test_markdown_order_cut, setup),
      cmocka_unit_test_setup(test_markdown_gate, setup),
      cmocka_unit_test_setup(test_markdown_escaping, setup),
      cmocka_unit_test_setup(test_junit_cases, setup),
      cmocka_unit_test_setup(test_junit_root_and_escaping, setup),
      cmocka_unit_test_setup(test_html_rows, setup),
      cmocka_unit_test_setup(test_report_errors, setup),
      cmocka_unit_test(test_escape_terminal),
      cmocka_unit_test(test_escape_contexts),
      cmocka_unit_test(test_escape_truncation),
      cmocka_unit_test(test_escape_every_size),
      cmocka_unit_test(test_json_put_nested),
      cmocka_unit_test_setup(test_text_untrusted_names, setup),
      cmocka_unit_test(test_ordered_rows),
      cmocka_unit_test(test_report_file_verified),
      cmocka_unit_test_setup(test_text_provenance_width, setup),
      cmocka_unit_test_setup(test_report_threads, setup),
      cmocka_unit_test(test_text_diagnosis),
      cmocka_unit_test(test_text_indeterminate_accepted),
      cmocka_unit_test(test_json_diagnosis),
      cmocka_unit_test(test_markdown_diagnosis),
      cmocka_unit_test(test_junit_diagnosis),
      cmocka_unit_test(test_github_diagnosis),
      cmocka_unit_test(test_html_diagnosis),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
