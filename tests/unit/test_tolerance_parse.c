/* Unit tests of the tolerance grammar (src/lib/judge/tol_yaml.c, tol_parse.c, tol_set.c): invalid
 * YAML, unknown keys, values of the wrong shape, what the reader refuses, the rule cap and
 * files, every error with its exact position. Error positions were counted by hand from the
 * YAML text (1-based line:column of the offending node). */
#include "tolerance_fixture.h"

#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>  /* open */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, free, mkstemp, mkdtemp */
#include <string.h> /* strlen, memcpy, memset */
#include <unistd.h> /* write, close, unlink, ftruncate, rmdir */

/* ---- Errors of the grammar ------------------------------------------------------------- */

static void test_invalid_yaml(void **state) {
  (void)state;
  expect_error("version: 1\ndefaults: \"unterminated\n",
               NAME ":3:1: invalid YAML: found unexpected end of stream"
                    " (while scanning a quoted scalar)");
  expect_error("version: 1\n\tdefaults: {}\n",
               NAME ":2:1: invalid YAML: found a tab character that violates indentation"
                    " (while scanning a plain scalar)");
  /* A reader (encoding) error: positions come from the byte offset. */
  expect_error("version: 1\n\xff\n", NAME ":2:1: invalid YAML: invalid leading UTF-8 octet");
}

static void test_unknown_keys(void **state) {
  (void)state;
  expect_error("version: 1\nrulez: []\n", NAME ":2:1: unknown key 'rulez' in the top level"
                                               " (expected one of: version, defaults, rules)");
  expect_error("version: 1\ndefaults:\n  float33: {}\n",
               NAME ":3:3: unknown key 'float33' in 'defaults' (expected one of: float64, float32,"
                    " float16, bfloat16, float8_e4m3fn, float8_e5m2, integer, all)");
  expect_error("version: 1\ndefaults:\n  float32: {atol: 1, atoll: 2}\n",
               NAME ":3:22: unknown key 'atoll' in 'float32'"
                    " (expected one of: atol, rtol, max_ulp, max_mismatch_fraction, precision,"
                    " accumulation, atol_rms, rtol_u, rtol_sqrt_k, max_rel_rms_u, max_scale_u,"
                    " max_scale_u_sqrt_n, trend_growth, trend_window, trend_crest, noise_floor_u,"
                    " trend_growth_backward, scale_z)");
  expect_error(
      "version: 1\nrules:\n  - match: /a\n    int8: {}\n", NAME
      ":4:5: unknown key 'int8' in a rule (expected one of: float64, float32,"
      " float16, bfloat16, float8_e4m3fn, float8_e5m2, integer, all, match, metrics, elementwise,"
      " match_module_type, match_attr)");
  /* "match" belongs to rules only. */
  expect_error("version: 1\ndefaults: {match: /a}\n",
               NAME ":2:12: unknown key 'match' in 'defaults' (expected one of: float64, float32,"
                    " float16, bfloat16, float8_e4m3fn, float8_e5m2, integer, all)");
}

static void test_wrong_types(void **state) {
  (void)state;
  expect_error("- version: 1\n", NAME ":1:1: the top level must be a mapping, got a sequence");
  expect_error("version: 1\nrules: {match: /a}\n",
               NAME ":2:8: 'rules' must be a sequence, got a mapping");
  expect_error("version: 1\ndefaults: [1]\n",
               NAME ":2:11: 'defaults' must be a mapping, got a sequence");
  expect_error("version: 1\ndefaults: {float32: 1.0}\n",
               NAME ":2:21: 'float32' must be a mapping, got a plain scalar");
  expect_error("version: 1\nrules:\n  - /a\n",
               NAME ":3:5: a rule must be a mapping, got a plain scalar");
  expect_error("version: 1\nrules:\n  - match: {a: 1}\n",
               NAME ":3:12: 'match' must be a string, got a mapping");
  expect_error("version: 1\nrules:\n  - match: null\n",
               NAME ":3:12: 'match' must be a string, got null");
  expect_error("version: 1\n? [a]\n: 1\n",
               NAME ":2:3: a key in the top level must be a string, got a sequence");
  expect_error("version: 1\ndefaults:\n  all: {atol: \"1e-5\"}\n",
               NAME ":3:15: 'atol' must be a number, got a quoted string");
  expect_error("version: '1'\n", NAME ":1:10: 'version' must be a number, got a quoted string");
  expect_error("version: 1\ndefaults: {all: {atol: true}}\n",
               NAME ":2:24: 'atol' must be a number, got 'true'");
  expect_error("version: 1\ndefaults: {all: {atol: 1_000}}\n",
               NAME ":2:24: 'atol' must be a number, got '1_000'");
}

static void test_deep_nesting(void **state) {
  (void)state;
  expect_error("version: 1\ndefaults:\n  float32:\n    atol:\n      deeper: {x: [1]}\n",
               NAME ":5:7: 'atol' must be a number, got a mapping");
  /* Ten thousand open brackets: refused at the first one the schema does not allow. */
  enum { DEPTH = 10000 };
  static const char head[] = "version: 1\nrules: ";
  char *yaml = malloc(sizeof head + DEPTH);
  assert_non_null(yaml);
  memcpy(yaml, head, sizeof head - 1);
  memset(yaml + sizeof head - 1, '[', DEPTH);
  yaml[sizeof head - 1 + DEPTH] = '\0';
  expect_error(yaml, NAME ":2:9: a rule must be a mapping, got a sequence");
  free(yaml);
}

static void test_missing_required(void **state) {
  (void)state;
  expect_error("", NAME ":1:1: missing version");
  expect_error("# only a comment\n", NAME ":2:1: missing version");
  expect_error("---\n", NAME ":2:1: missing version");
  expect_error("defaults: {}\n", NAME ":1:1: missing version");
  expect_error("version: 1\nrules:\n  - float32: {rtol: 1}\n",
               NAME ":3:5: a rule must have 'match', 'match_module_type' or 'match_attr'");
  /* NULL text with no length is an empty file; no name gives "<string>". */
  pc_tolset *set = pc_tolset_new();
  pc_error err = {0};
  assert_int_equal(pc_tolset_load_string(set, NULL, NULL, 0, &err), PC_EPARSE);
  assert_string_equal(err.message, "<string>:1:1: missing version");
  assert_int_equal(pc_tolset_load_string(set, NAME, NULL, 1, &err), PC_EUSAGE);
  assert_int_equal(pc_tolset_load_string(NULL, NAME, "", 0, &err), PC_EUSAGE);
  pc_tolset_free(set);
}

static void test_duplicate_keys(void **state) {
  (void)state;
  expect_error("version: 1\nversion: 1\n", NAME ":2:1: duplicate key 'version' in the top level");
  expect_error("version: 1\ndefaults:\n  float32: {atol: 1}\n  float32: {rtol: 1}\n",
               NAME ":4:3: duplicate key 'float32' in 'defaults'");
  expect_error("version: 1\ndefaults: {all: {atol: 1, atol: 2}}\n",
               NAME ":2:27: duplicate key 'atol' in 'all'");
  expect_error("version: 1\nrules: [{match: /a, match: /b}]\n",
               NAME ":2:21: duplicate key 'match' in a rule");
}

static void test_anchors_aliases_tags(void **state) {
  (void)state;
  expect_error("version: 1\ndefaults:\n  float32: &f {atol: 1}\n  float16: *f\n",
               NAME ":3:12: anchors are not supported");
  expect_error("version: 1\ndefaults:\n  float16: *f\n", NAME ":3:12: aliases are not supported");
  expect_error("version: 1\ndefaults: {all: {atol: !!float 1}}\n",
               NAME ":2:24: tags are not supported");
}

static void test_multiple_documents(void **state) {
  (void)state;
  expect_error("version: 1\n---\nversion: 1\n", NAME ":2:1: only one YAML document is allowed");
  expect_error("---\nversion: 1\n...\n---\nversion: 1\n",
               NAME ":4:1: only one YAML document is allowed");
}

/* A file with `n` one-line rules, each at column 3 of its line. */
static char *rules_file(size_t n) {
  static const char head[] = "version: 1\nrules:\n";
  static const char rule[] = "- {match: /a}\n";
  size_t len = sizeof head - 1 + n * (sizeof rule - 1);
  char *yaml = malloc(len + 1);
  assert_non_null(yaml);
  memcpy(yaml, head, sizeof head - 1);
  for (size_t i = 0; i < n; i++)
    memcpy(yaml + sizeof head - 1 + i * (sizeof rule - 1), rule, sizeof rule - 1);
  yaml[len] = '\0';
  return yaml;
}

static void test_rule_cap_counts_all_files(void **state) {
  (void)state;
  enum { CAP = 100000 };
  char *full = rules_file(CAP);
  pc_tolset *set = set_of(full);
  free(full);
  pc_error err = {0};
  static const char one[] = "version: 1\nrules:\n- {match: /b}\n";
  assert_int_equal(pc_tolset_load_string(set, NAME, one, sizeof one - 1, &err), PC_EPARSE);
  assert_string_equal(err.message,
                      NAME ":3:3: too many rules (at most 100000 in all loaded files)");
  pc_tolset_free(set);

  char *over = rules_file(CAP + 1);
  set = pc_tolset_new();
  assert_int_equal(pc_tolset_load_string(set, NAME, over, strlen(over), &err), PC_EPARSE);
  assert_string_equal(err.message,
                      NAME ":100003:3: too many rules (at most 100000 in all loaded files)");
  assert_int_equal(pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32).set, 0);
  pc_tolset_free(set);
  free(over);
}

/* ---- Files ------------------------------------------------------------------------------ */

static void test_load_file(void **state) {
  (void)state;
  char path[] = "/tmp/test_tolerance_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char yaml[] = "version: 1\n"
                             "rules:\n"
                             "  - match: \"/encoder/*\"\n"
                             "    all: {max_ulp: 4}\n"
                             "    float32: {rtol: 1.0e-4}\n";
  assert_int_equal(write(fd, yaml, sizeof yaml - 1), (ssize_t)(sizeof yaml - 1));
  close(fd);
  pc_tolset *set = pc_tolset_new();
  pc_error err = {0};
  assert_int_equal(pc_tolset_load_file(set, path, &err), PC_OK);
  pc_tol tol = pc_tolset_resolve(set, "/encoder/x", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_MAX_ULP | PC_TOL_RTOL);
  assert_int_equal(tol.max_ulp, 4);
  assert_true(tol.rtol == 1.0e-4);

  /* Errors name the file by its path. */
  fd = open(path, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "version: 3\n", 11), 11);
  close(fd);
  char expected[sizeof path + 64];
  snprintf(expected, sizeof expected, "%s:1:10: unsupported version 3 (this build reads version 1)",
           path);
  assert_int_equal(pc_tolset_load_file(set, path, &err), PC_EPARSE);
  assert_string_equal(err.message, expected);
  assert_int_equal(pc_tolset_resolve(set, "/encoder/x", PC_DTYPE_FLOAT32).max_ulp, 4);
  unlink(path);
  pc_tolset_free(set);
}

static void test_file_errors(void **state) {
  (void)state;
  pc_tolset *set = pc_tolset_new();
  pc_error err = {0};
  assert_int_equal(pc_tolset_load_file(set, "/nonexistent/tol.yaml", &err), PC_EIO);
  assert_int_equal(err.code, PC_EIO);
  assert_string_equal(err.message, "/nonexistent/tol.yaml: No such file or directory");

  char dir[] = "/tmp/test_tolerance_dir_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char expected[sizeof dir + 64];
  snprintf(expected, sizeof expected, "%s: Is a directory", dir);
  assert_int_equal(pc_tolset_load_file(set, dir, &err), PC_EIO);
  assert_string_equal(err.message, expected);
  rmdir(dir);

  /* One byte over the 16 MiB limit (a sparse file, so it costs no disk). */
  char big[] = "/tmp/test_tolerance_big_XXXXXX";
  int fd = mkstemp(big);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, ((off_t)16 << 20) + 1), 0);
  close(fd);
  snprintf(expected, sizeof expected, "%s: File too large (at most 16777216 bytes)", big);
  assert_int_equal(pc_tolset_load_file(set, big, &err), PC_EIO);
  assert_string_equal(err.message, expected);
  unlink(big);

  assert_int_equal(pc_tolset_load_file(NULL, "x", &err), PC_EUSAGE);
  assert_int_equal(pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32).set, 0);
  pc_tolset_free(set);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_invalid_yaml),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_missing_required),
      cmocka_unit_test(test_duplicate_keys),
      cmocka_unit_test(test_anchors_aliases_tags),
      cmocka_unit_test(test_multiple_documents),
      cmocka_unit_test(test_rule_cap_counts_all_files),
      cmocka_unit_test(test_load_file),
      cmocka_unit_test(test_file_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
