/* Tests of the text report writer (src/lib/report/report_text.c): the hand-made run of
 * report_fixture.h, a gate, hostile names, provenance and diagnoses rendered as text. Every
 * expected value is derived by hand in the comments. */
#include "report_fixture.h"

#include <paritycheck/report.h>

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* free */
#include <string.h> /* memset, strstr */
#include <unistd.h> /* unlink */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

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

/* The detail line under each judged tensor: the indent is the verdict column, "INDETERMINATE"
 * (13) and the gap (2). */
#define DETAIL "\n               "

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_text_lines, setup),
      cmocka_unit_test_setup(test_text_color, setup),
      cmocka_unit_test_setup(test_text_quiet, setup),
      cmocka_unit_test_setup(test_text_summaries, setup),
      cmocka_unit_test_setup(test_text_long_path, setup),
      cmocka_unit_test_setup(test_text_tensor_level_reason, setup),
      cmocka_unit_test_setup(test_text_write_error, setup),
      cmocka_unit_test_setup(test_text_verbose, setup),
      cmocka_unit_test_setup(test_text_gate, setup),
      cmocka_unit_test_setup(test_text_untrusted_names, setup),
      cmocka_unit_test_setup(test_text_provenance_width, setup),
      cmocka_unit_test(test_text_diagnosis),
      cmocka_unit_test(test_text_indeterminate_accepted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
