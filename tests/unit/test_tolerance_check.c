/* Unit tests of the semantic checks of a tolerance file (src/lib/judge/tol_check.c, tol_glob.c):
 * the version, numbers out of range, format names and globs, every error with its exact
 * position. Error positions were counted by hand from the YAML text (1-based line:column of
 * the offending node). */
#include "tolerance_fixture.h"

#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static void test_bad_model_values(void **state) {
  (void)state;
  expect_error("version: 1\ndefaults: {all: {precision: fp32}}\n",
               NAME ":2:29: 'precision' must be one of float64, float32, tf32, float16, bfloat16,"
                    " float8_e4m3fn, float8_e5m2, got 'fp32'");
  expect_error("version: 1\ndefaults: {all: {accumulation: tf32}}\n",
               NAME ":2:32: 'accumulation' must be one of float64, float32, float16, bfloat16,"
                    " float8_e4m3fn, float8_e5m2, got 'tf32'");
  /* A name must match whole: a NUL inside a quoted one does not cut it short. */
  expect_error("version: 1\ndefaults: {all: {precision: \"tf32\\0\"}}\n",
               NAME ":2:29: 'precision' must be one of float64, float32, tf32, float16, bfloat16,"
                    " float8_e4m3fn, float8_e5m2, got 'tf32'");
  expect_error("version: 1\ndefaults: {all: {precision: [float32]}}\n",
               NAME ":2:29: 'precision' must be a format name, got a sequence");
  expect_error("version: 1\ndefaults: {all: {atol_rms: -1}}\n",
               NAME ":2:28: 'atol_rms' must be >= 0, got '-1'");
  expect_error("version: 1\ndefaults: {all: {max_scale_u: .inf}}\n",
               NAME ":2:31: 'max_scale_u' must be finite, got '.inf'");
  expect_error("version: 1\ndefaults: {all: {rtol_sqrt_k: \"1\"}}\n",
               NAME ":2:31: 'rtol_sqrt_k' must be a number, got a quoted string");
}

static void test_bad_version(void **state) {
  (void)state;
  expect_error("version: 2\n", NAME ":1:10: unsupported version 2 (this build reads version 1)");
  expect_error("version: 1.0\n", NAME ":1:10: 'version' must be a non-negative integer, got '1.0'");
}

static void test_bad_numbers(void **state) {
  (void)state;
  /* Every value sits at column 24 of "defaults: {all: {KEY: VALUE}}" when KEY is "atol"/"rtol". */
  expect_error("version: 1\ndefaults: {all: {atol: 1e999}}\n",
               NAME ":2:24: 'atol' is out of range: '1e999'");
  expect_error("version: 1\ndefaults: {all: {rtol: -1e-3}}\n",
               NAME ":2:24: 'rtol' must be >= 0, got '-1e-3'");
  expect_error("version: 1\ndefaults: {all: {atol: .nan}}\n",
               NAME ":2:24: 'atol' must be finite, got '.nan'");
  expect_error("version: 1\ndefaults: {all: {atol: nan}}\n",
               NAME ":2:24: 'atol' must be finite, got 'nan'");
  expect_error("version: 1\ndefaults: {all: {rtol: -.Inf}}\n",
               NAME ":2:24: 'rtol' must be finite, got '-.Inf'");
  expect_error("version: 1\ndefaults: {all: {rtol: inf}}\n",
               NAME ":2:24: 'rtol' must be finite, got 'inf'");
  /* "defaults: {all: {max_ulp: " puts the value at column 27. */
  expect_error("version: 1\ndefaults: {all: {max_ulp: 1.5}}\n",
               NAME ":2:27: 'max_ulp' must be a non-negative integer, got '1.5'");
  expect_error("version: 1\ndefaults: {all: {max_ulp: -1}}\n",
               NAME ":2:27: 'max_ulp' must be a non-negative integer, got '-1'");
  expect_error("version: 1\ndefaults: {all: {max_ulp: 1e6}}\n",
               NAME ":2:27: 'max_ulp' must be a non-negative integer, got '1e6'");
  expect_error("version: 1\ndefaults: {all: {max_ulp: 18446744073709551616}}\n",
               NAME ":2:27: 'max_ulp' is out of range (at most 18446744073709551615):"
                    " '18446744073709551616'");
  expect_error("version: 1\ndefaults: {all: {max_ulp: '4'}}\n",
               NAME ":2:27: 'max_ulp' must be a number, got a quoted string");
  /* "defaults: {all: {max_mismatch_fraction: " puts the value at column 41. */
  expect_error("version: 1\ndefaults: {all: {max_mismatch_fraction: 1.5}}\n",
               NAME ":2:41: 'max_mismatch_fraction' must be <= 1, got '1.5'");
  expect_error("version: 1\ndefaults: {all: {max_mismatch_fraction: -0.1}}\n",
               NAME ":2:41: 'max_mismatch_fraction' must be >= 0, got '-0.1'");
}

static void test_bad_globs(void **state) {
  (void)state;
  /* The value of "  - {match: " starts at column 13. */
  expect_error("version: 1\nrules:\n  - {match: \"/a[b\"}\n",
               NAME ":3:13: bad glob '/a[b': unbalanced '['");
  expect_error("version: 1\nrules:\n  - {match: '/a\\'}\n",
               NAME ":3:13: bad glob '/a\\': trailing backslash");
  expect_error("version: 1\nrules:\n  - {match: '/[a\\]'}\n",
               NAME ":3:13: bad glob '/[a\\]': unbalanced '['");
  expect_error("version: 1\nrules:\n  - {match: '/[[:foo:]]'}\n",
               NAME ":3:13: bad glob '/[[:foo:]]': unknown character class");
  expect_error("version: 1\nrules:\n  - {match: '/[[:alpha]'}\n",
               NAME ":3:13: bad glob '/[[:alpha]': unterminated character class");
  expect_error("version: 1\nrules:\n  - {match: '/[[.a.]]'}\n",
               NAME ":3:13: bad glob '/[[.a.]]': collating symbols and equivalence classes are not"
                    " supported");
  expect_error("version: 1\nrules:\n  - {match: ''}\n", NAME ":3:13: 'match' must not be empty");
  expect_error("version: 1\nrules:\n  - {match: \"/a\\0b\"}\n",
               NAME ":3:13: 'match' must not contain NUL characters");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_version),
      cmocka_unit_test(test_bad_numbers),
      cmocka_unit_test(test_bad_model_values),
      cmocka_unit_test(test_bad_globs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
