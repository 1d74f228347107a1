/* Tests of the Markdown, JUnit, HTML and GitHub report writers (src/lib/report/report_markdown.c,
 * report_junit.c, report_html.c, report_github.c): the hand-made run of report_fixture.h
 * against files written by hand, escaping, the gate and diagnoses. Every expected value is
 * derived by hand in the comments. */
#include "report_fixture.h"

#include <paritycheck/report.h>

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* free */
#include <string.h> /* strcmp, strstr */
#include <unistd.h> /* unlink */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_markdown_worst, setup),
      cmocka_unit_test_setup(test_markdown_order_cut, setup),
      cmocka_unit_test_setup(test_markdown_gate, setup),
      cmocka_unit_test_setup(test_markdown_escaping, setup),
      cmocka_unit_test_setup(test_junit_cases, setup),
      cmocka_unit_test_setup(test_junit_root_and_escaping, setup),
      cmocka_unit_test_setup(test_html_rows, setup),
      cmocka_unit_test_setup(test_report_errors, setup),
      cmocka_unit_test(test_markdown_diagnosis),
      cmocka_unit_test(test_junit_diagnosis),
      cmocka_unit_test(test_github_diagnosis),
      cmocka_unit_test(test_html_diagnosis),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
