/* Unit tests of src/lib/judge/tol_parse.c and tol_resolve.c: resolution order, the built-in profile
 * against torch's published defaults, and every error path with its exact position. Error positions
 * were counted by hand from the YAML text (1-based line:column of the offending node). */
#include "tol_resolve.h"

#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>  /* open */
#include <math.h>   /* INFINITY, NAN */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, free, mkstemp, mkdtemp */
#include <string.h> /* strlen, strcmp, memcpy, memset */
#include <unistd.h> /* write, close, unlink, ftruncate, rmdir */

/* The name given to pc_tolset_load_string in these tests. */
#define NAME "t.yaml"

/* A file loaded before each failing one, to check that a failed load leaves the set as it was. */
static const char BASE[] = "version: 1\n"
                           "defaults: {all: {atol: 0.5}}\n"
                           "rules: [{match: /x, all: {rtol: 0.25}}]\n";

static int load(pc_tolset *set, const char *yaml) {
  pc_error err = {0};
  int rc = pc_tolset_load_string(set, NAME, yaml, strlen(yaml), &err);
  if (rc != PC_OK)
    print_error("unexpected error: %s\n", err.message);
  return rc;
}

static pc_tolset *set_of(const char *yaml) {
  pc_tolset *set = pc_tolset_new();
  assert_non_null(set);
  assert_int_equal(load(set, yaml), PC_OK);
  return set;
}

static pc_tol resolve_one(const char *yaml, const char *path, pc_dtype dt) {
  pc_tolset *set = set_of(yaml);
  pc_tol tol = pc_tolset_resolve(set, path, dt);
  pc_tolset_free(set);
  return tol;
}

static void assert_base_intact(const pc_tolset *set) {
  pc_tol tol = pc_tolset_resolve(set, "/x", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.atol == 0.5);
  assert_true(tol.rtol == 0.25);
}

/* Loads `len` bytes of yaml after BASE and expects `code` with exactly `message`. */
static void expect_error_n(const char *yaml, size_t len, pc_status code, const char *message) {
  pc_tolset *set = set_of(BASE);
  pc_error err = {0};
  int rc = pc_tolset_load_string(set, NAME, yaml, len, &err);
  if (rc != (int)code || strcmp(err.message, message) != 0)
    print_error("input:\n%.200s\n", yaml);
  assert_int_equal(rc, code);
  assert_int_equal(err.code, code);
  assert_string_equal(err.message, message);
  assert_base_intact(set);
  pc_tolset_free(set);
}

static void expect_error(const char *yaml, const char *message) {
  expect_error_n(yaml, strlen(yaml), PC_EPARSE, message);
}

/* ---- Resolution ------------------------------------------------------------------------- */

static void test_empty_set_sets_nothing(void **state) {
  (void)state;
  pc_tolset *set = pc_tolset_new();
  assert_non_null(set);
  pc_tol tol = pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, 0);
  tol = pc_tolset_resolve(NULL, "/a", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, 0);
  pc_tolset_free(set);
  pc_tolset_free(NULL);
}

static void test_defaults_apply_to_their_dtype(void **state) {
  (void)state;
  pc_tolset *set =
      set_of("version: 1\n"
             "defaults:\n"
             "  float32: {atol: 1.0e-5, rtol: 1.3e-6}\n"
             "  bfloat16: {rtol: 1.6e-2, atol: 1.0e-5, max_mismatch_fraction: 0.001}\n");
  pc_tol tol = pc_tolset_resolve(set, "/any/path", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.atol == 1.0e-5);
  assert_true(tol.rtol == 1.3e-6);
  tol = pc_tolset_resolve(set, "/any/path", PC_DTYPE_BFLOAT16);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_MISMATCH_FRACTION);
  assert_true(tol.max_mismatch_fraction == 0.001);
  tol = pc_tolset_resolve(set, "/any/path", PC_DTYPE_FLOAT16);
  assert_int_equal(tol.set, 0);
  pc_tolset_free(set);
}

static void test_later_file_wins(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\ndefaults: {float32: {atol: 1.0e-3, rtol: 1.0e-4}}\n");
  assert_int_equal(load(set, "version: 1\ndefaults: {float32: {atol: 2.0e-3}}\n"), PC_OK);
  pc_tol tol = pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.atol == 2.0e-3); /* overridden by the second file */
  assert_true(tol.rtol == 1.0e-4); /* kept: the second file does not mention it */
  pc_tolset_free(set);
}

static void test_rules_follow_all_defaults_in_order(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\n"
                          "rules:\n"
                          "  - {match: /a, float32: {atol: 0.1}}\n"
                          "  - {match: /a, float32: {atol: 0.2, rtol: 0.3}}\n");
  /* A later file's defaults still come before the first file's rules. */
  assert_int_equal(load(set, "version: 1\n"
                             "defaults: {float32: {atol: 9, max_ulp: 5}}\n"
                             "rules: [{match: /a, float32: {rtol: 0.4}}]\n"),
                   PC_OK);
  pc_tol tol = pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_ULP);
  assert_true(tol.atol == 0.2); /* second rule of the first file */
  assert_true(tol.rtol == 0.4); /* the second file's rule comes last */
  assert_int_equal(tol.max_ulp, 5);
  tol = pc_tolset_resolve(set, "/b", PC_DTYPE_FLOAT32); /* no rule matches /b */
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_MAX_ULP);
  assert_true(tol.atol == 9);
  pc_tolset_free(set);
}

static void test_specific_key_beats_all_in_one_mapping(void **state) {
  (void)state;
  /* "all" is written after float32 here, and still loses to it. */
  const char *yaml = "version: 1\ndefaults:\n  float32: {max_ulp: 2}\n  all: {max_ulp: 4}\n";
  assert_int_equal(resolve_one(yaml, "/a", PC_DTYPE_FLOAT32).max_ulp, 2);
  assert_int_equal(resolve_one(yaml, "/a", PC_DTYPE_FLOAT16).max_ulp, 4);
  assert_int_equal(resolve_one(yaml, "/a", PC_DTYPE_INT32).max_ulp, 4);
  pc_tol none = resolve_one(yaml, "/a", PC_DTYPE_NONE);
  assert_int_equal(none.set, PC_TOL_MAX_ULP);
  assert_int_equal(none.max_ulp, 4);
}

static void test_later_all_beats_earlier_specific(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\ndefaults: {float32: {max_ulp: 2}}\n");
  assert_int_equal(load(set, "version: 1\ndefaults: {all: {max_ulp: 7}}\n"), PC_OK);
  assert_int_equal(pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32).max_ulp, 7);
  pc_tolset_free(set);
}

static void test_null_unsets(void **state) {
  (void)state;
  pc_tolset *set =
      set_of("version: 1\n"
             "defaults: {all: {atol: 1, rtol: 2, max_ulp: 3, max_mismatch_fraction: 0.5}}\n");
  assert_int_equal(load(set, "version: 1\n"
                             "rules:\n"
                             "  - match: /logits\n"
                             "    float32: {atol: null, rtol: ~, max_ulp: }\n"
                             "  - match: /logits\n"
                             "    all: {max_mismatch_fraction: NULL}\n"),
                   PC_OK);
  pc_tol tol = pc_tolset_resolve(set, "/logits", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, 0);
  assert_true(tol.atol == 0 && tol.rtol == 0 && tol.max_ulp == 0);
  tol = pc_tolset_resolve(set, "/logits", PC_DTYPE_FLOAT16);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_ULP);
  tol = pc_tolset_resolve(set, "/other", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set,
                   PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_ULP | PC_TOL_MAX_MISMATCH_FRACTION);
  pc_tolset_free(set);
}

static void test_integer_key_covers_integers_and_bool(void **state) {
  (void)state;
  static const pc_dtype ints[] = {PC_DTYPE_INT8,   PC_DTYPE_INT16,  PC_DTYPE_INT32,
                                  PC_DTYPE_INT64,  PC_DTYPE_UINT8,  PC_DTYPE_UINT16,
                                  PC_DTYPE_UINT32, PC_DTYPE_UINT64, PC_DTYPE_BOOL};
  pc_tolset *set = set_of("version: 1\ndefaults: {integer: {max_ulp: 3}}\n");
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    pc_tol tol = pc_tolset_resolve(set, "/a", ints[i]);
    assert_int_equal(tol.set, PC_TOL_MAX_ULP);
    assert_int_equal(tol.max_ulp, 3);
  }
  assert_int_equal(pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT64).set, 0);
  assert_int_equal(pc_tolset_resolve(set, "/a", PC_DTYPE_NONE).set, 0);
  pc_tolset_free(set);
}

static void test_glob_star_crosses_slash(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\n"
                          "rules:\n"
                          "  - match: \"/encoder/*/attn/*\"\n"
                          "    float32: {rtol: 1.0e-4}\n"
                          "  - match: '/layer[[:digit:]]/out'\n"
                          "    float32: {atol: 3}\n"
                          "  - match: '/lit\\[0]'\n"
                          "    float32: {max_ulp: 8}\n");
  assert_true(pc_tolset_resolve(set, "/encoder/layer0/attn/q", PC_DTYPE_FLOAT32).rtol == 1.0e-4);
  assert_true(pc_tolset_resolve(set, "/encoder/l0/block1/attn/k/bias", PC_DTYPE_FLOAT32).rtol ==
              1.0e-4);
  assert_int_equal(pc_tolset_resolve(set, "/decoder/l0/attn/q", PC_DTYPE_FLOAT32).set, 0);
  assert_int_equal(pc_tolset_resolve(set, "/encoder/attn", PC_DTYPE_FLOAT32).set, 0);
  assert_true(pc_tolset_resolve(set, "/layer7/out", PC_DTYPE_FLOAT32).atol == 3);
  assert_int_equal(pc_tolset_resolve(set, "/layerX/out", PC_DTYPE_FLOAT32).set, 0);
  assert_int_equal(pc_tolset_resolve(set, "/lit[0]", PC_DTYPE_FLOAT32).max_ulp, 8);
  assert_int_equal(pc_tolset_resolve(set, "/lit0", PC_DTYPE_FLOAT32).set, 0);
  assert_int_equal(pc_tolset_resolve(set, NULL, PC_DTYPE_FLOAT32).set, 0);
  pc_tolset_free(set);
}

static void test_valid_bracket_forms(void **state) {
  (void)state;
  /* A ']' first in a set is a member; "[!...]" and "[^...]" negate. */
  pc_tolset *set = set_of("version: 1\n"
                          "rules:\n"
                          "  - {match: '/[]a]', all: {max_ulp: 1}}\n"
                          "  - {match: '/[!]]z', all: {max_ulp: 2}}\n"
                          "  - {match: '/[^a]y', all: {max_ulp: 3}}\n");
  assert_int_equal(pc_tolset_resolve(set, "/]", PC_DTYPE_NONE).max_ulp, 1);
  assert_int_equal(pc_tolset_resolve(set, "/bz", PC_DTYPE_NONE).max_ulp, 2);
  assert_int_equal(pc_tolset_resolve(set, "/]z", PC_DTYPE_NONE).set, 0);
  assert_int_equal(pc_tolset_resolve(set, "/by", PC_DTYPE_NONE).max_ulp, 3);
  pc_tolset_free(set);
}

static void test_numbers_in_range_are_read_exactly(void **state) {
  (void)state;
  const char *yaml = "version: 1\n"
                     "defaults:\n"
                     "  all: {atol: 0, rtol: 1, max_ulp: 18446744073709551615,"
                     " max_mismatch_fraction: 1}\n"
                     "  float32: {max_ulp: 1000000, atol: 1e-300, max_mismatch_fraction: 0.0}\n"
                     "  float16: {max_ulp: +4, rtol: 2.5E+3}\n";
  pc_tol tol = resolve_one(yaml, "/a", PC_DTYPE_INT8);
  assert_true(tol.atol == 0 && tol.rtol == 1 && tol.max_mismatch_fraction == 1);
  assert_true(tol.max_ulp == UINT64_MAX);
  tol = resolve_one(yaml, "/a", PC_DTYPE_FLOAT32);
  assert_true(tol.max_ulp == 1000000 && tol.atol == 1e-300 && tol.max_mismatch_fraction == 0);
  tol = resolve_one(yaml, "/a", PC_DTYPE_FLOAT16);
  assert_true(tol.max_ulp == 4 && tol.rtol == 2500);
}

static void test_null_sections_and_version_only(void **state) {
  (void)state;
  assert_int_equal(resolve_one("version: 1\n", "/a", PC_DTYPE_FLOAT32).set, 0);
  assert_int_equal(resolve_one("version: 1\ndefaults:\nrules:\n", "/a", PC_DTYPE_FLOAT32).set, 0);
  assert_int_equal(resolve_one("{version: 1, defaults: {}, rules: []}", "/a", PC_DTYPE_FLOAT32).set,
                   0);
}

/* The example of docs/tolerances.md, with the resolutions that page states. */
static void test_docs_example(void **state) {
  (void)state;
  pc_tolset *set = pc_tolset_new();
  pc_error err = {0};
  assert_int_equal(pc_tolset_load_builtin(set, &err), PC_OK);
  assert_int_equal(load(set,
                        "version: 1                        # required, must be 1\n"
                        "\n"
                        "defaults:\n"
                        "  float32: {atol: 1.0e-5, rtol: 1.3e-6}\n"
                        "  bfloat16: {rtol: 1.6e-2, atol: 1.0e-5, max_mismatch_fraction: 0.001}\n"
                        "  all: {max_ulp: 4}\n"
                        "\n"
                        "rules:\n"
                        "  - match: \"/encoder/*/attn/*\"\n"
                        "    float32: {rtol: 1.0e-4}\n"
                        "    all: {max_mismatch_fraction: 0.01}\n"
                        "  - match: \"/logits\"\n"
                        "    float32: {atol: null}         # null (or ~) unsets a criterion\n"),
                   PC_OK);
  pc_tol tol = pc_tolset_resolve(set, "/encoder/l0/attn/q", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set,
                   PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_ULP | PC_TOL_MAX_MISMATCH_FRACTION);
  assert_true(tol.atol == 1e-5 && tol.rtol == 1e-4 && tol.max_ulp == 4);
  assert_true(tol.max_mismatch_fraction == 0.01);
  tol = pc_tolset_resolve(set, "/logits", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_RTOL | PC_TOL_MAX_ULP | PC_TOL_MAX_MISMATCH_FRACTION);
  assert_true(tol.rtol == 1.3e-6 && tol.max_ulp == 4 && tol.max_mismatch_fraction == 0);
  pc_tolset_free(set);
}

/* ---- The built-in profile --------------------------------------------------------------- */

/* torch.testing.assert_close's documented defaults (rtol, atol), typed in independently of
 * tolerances/default.yaml. */
static void assert_torch_pair(const pc_tolset *set, pc_dtype dt, double rtol, double atol) {
  pc_tol tol = pc_tolset_resolve(set, "/enc/layer0/out", dt);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_MISMATCH_FRACTION);
  assert_true(tol.rtol == rtol);
  assert_true(tol.atol == atol);
  assert_true(tol.max_mismatch_fraction == 0);
}

static void test_builtin_matches_torch(void **state) {
  (void)state;
  pc_tolset *set = pc_tolset_new();
  pc_error err = {0};
  assert_int_equal(pc_tolset_load_builtin(set, &err), PC_OK);
  assert_torch_pair(set, PC_DTYPE_FLOAT16, 1e-3, 1e-5);
  assert_torch_pair(set, PC_DTYPE_BFLOAT16, 1.6e-2, 1e-5);
  assert_torch_pair(set, PC_DTYPE_FLOAT32, 1.3e-6, 1e-5);
  assert_torch_pair(set, PC_DTYPE_FLOAT64, 1e-7, 1e-7);
  /* Exact dtypes: no element criterion, no mismatch allowed. */
  static const pc_dtype exact[] = {PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E5M2, PC_DTYPE_INT8,
                                   PC_DTYPE_INT16,         PC_DTYPE_INT32,       PC_DTYPE_INT64,
                                   PC_DTYPE_UINT8,         PC_DTYPE_UINT16,      PC_DTYPE_UINT32,
                                   PC_DTYPE_UINT64,        PC_DTYPE_BOOL,        PC_DTYPE_NONE};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    pc_tol tol = pc_tolset_resolve(set, "/a", exact[i]);
    assert_int_equal(tol.set, PC_TOL_MAX_MISMATCH_FRACTION);
    assert_true(tol.max_mismatch_fraction == 0);
  }
  pc_tolset_free(set);
}

static void test_builtin_comes_first_once(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\ndefaults: {float32: {atol: 0.5}}\n");
  pc_error err = {0};
  /* Loaded after a user file, it still sits under it; a second load changes nothing. */
  assert_int_equal(pc_tolset_load_builtin(set, &err), PC_OK);
  assert_int_equal(pc_tolset_load_builtin(set, &err), PC_OK);
  pc_tol tol = pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32);
  assert_true(tol.atol == 0.5);
  assert_true(tol.rtol == 1.3e-6);
  assert_int_equal(pc_tolset_load_builtin(NULL, &err), PC_EUSAGE);
  pc_tolset_free(set);
}

/* ---- The reduction-aware model (docs/tolerance-model.md) -------------------------------- */

/* Every coefficient is a power of two times a small integer, so each expected value below is
 * exact: u(bfloat16) = 2^-8, u(float16) = u(tf32) = 2^-11, u(float32) = 2^-24. */
static const char MODEL[] = "version: 1\n"
                            "defaults:\n"
                            "  all: {precision: bfloat16, accumulation: float16, atol_rms: 3,\n"
                            "        rtol_u: 0.5, rtol_sqrt_k: 2, max_rel_rms_u: 4,\n"
                            "        max_scale_u: 0.25, max_scale_u_sqrt_n: 8}\n";

static pc_tol_context ctx_of(uint64_t k, pc_dtype acc, double rms) {
  pc_tol_context c = {.reduction_length = k,
                      .accumulation = acc,
                      .has_magnitude = true,
                      .max_abs_a = 5.0,
                      .rms_a = rms};
  return c;
}

static void test_model_resolves_by_hand(void **state) {
  (void)state;
  pc_tolset *set = set_of(MODEL);
  pc_tol_context c = ctx_of(16, PC_DTYPE_NONE, 2.0);
  pc_tol tol = pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_REL_RMS | PC_TOL_MAX_SCALE);
  /* u = max(u(float32), u(bfloat16)) = 2^-8 */
  assert_true(tol.atol == 3 * 0x1p-8 * 2.0); /* atol_rms * u * rms */
  /* rtol_u * u = 2^-9 loses to rtol_sqrt_k * sqrt(16) * u(float16, from `accumulation`) = 2^-8 */
  assert_true(tol.rtol == 0x1p-8);
  assert_true(tol.max_rel_rms == 0x1p-6);
  assert_true(tol.max_scale == 0x1p-10);
  assert_true(tol.max_scale_sqrt_n == 0x1p-5);
  /* The dataset's own accumulation dtype comes before the profile's: 2 * 4 * 2^-24 < 2^-9. */
  c = ctx_of(16, PC_DTYPE_FLOAT32, 2.0);
  assert_true(pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c).rtol == 0x1p-9);
  /* A coarser compare dtype raises u: float8_e4m3fn has u = 2^-4. */
  tol = pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT8_E4M3FN, &c);
  assert_true(tol.atol == 3 * 0x1p-4 * 2.0);
  assert_true(tol.max_rel_rms == 0x1p-2);
  pc_tolset_free(set);
}

static void test_model_without_context(void **state) {
  (void)state;
  pc_tolset *set = set_of(MODEL);
  /* Nothing known: no K and no magnitude, so only rtol_u and the tensor-level criteria. */
  pc_tol tol = pc_tolset_resolve(set, "/a", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_RTOL | PC_TOL_MAX_REL_RMS | PC_TOL_MAX_SCALE);
  assert_true(tol.rtol == 0x1p-9);
  /* K = 0 (unknown) and an unmeasured magnitude contribute nothing either. */
  pc_tol_context c = ctx_of(0, PC_DTYPE_NONE, 2.0);
  c.has_magnitude = false;
  tol = pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c);
  assert_int_equal(tol.set, PC_TOL_RTOL | PC_TOL_MAX_REL_RMS | PC_TOL_MAX_SCALE);
  assert_true(tol.rtol == 0x1p-9);
  /* The model takes no part for integers or a compare dtype of none. */
  c = ctx_of(16, PC_DTYPE_NONE, 2.0);
  assert_int_equal(pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_INT32, &c).set, 0);
  assert_int_equal(pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_NONE, &c).set, 0);
  pc_tolset_free(set);
}

static void test_model_widens_plain_criteria(void **state) {
  (void)state;
  pc_tol_context c = ctx_of(0, PC_DTYPE_NONE, 1.0);
  /* atol_rms gives 4 * 2^-11 * 1 = 2^-9; the larger of it and the plain atol applies. */
  pc_tolset *set = set_of("version: 1\n"
                          "defaults: {all: {precision: tf32, atol_rms: 4, atol: 0.5, rtol: 0.125,"
                          " rtol_u: 1}}\n");
  pc_tol tol = pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c);
  assert_true(tol.atol == 0.5);
  assert_true(tol.rtol == 0.125);
  assert_int_equal(load(set, "version: 1\ndefaults: {all: {atol: 0x1p-12, rtol: null}}\n"), PC_OK);
  tol = pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.atol == 0x1p-9);
  assert_true(tol.rtol == 0x1p-11); /* rtol unset: rtol_u * u alone */
  pc_tolset_free(set);
  /* A quoted name is a name too. */
  tol = resolve_one("version: 1\ndefaults: {all: {precision: 'bfloat16', rtol_u: 1}}\n", "/a",
                    PC_DTYPE_FLOAT32);
  assert_true(tol.rtol == 0x1p-8);
}

/* Metrics layer rule by rule, each key on its own; null clears one or (for `metrics`) all; the
 * last `elementwise` wins; unmatched rules take no part. */
static void test_metrics_layer(void **state) {
  (void)state;
  const char *yaml = "version: 1\n"
                     "rules:\n"
                     "  - match: '*/logits'\n"
                     "    elementwise: false\n"
                     "    metrics: {top1_agreement: {min: 0.9}, kl_divergence: {max: 0.5},\n"
                     "              topk_overlap: {k: 3, min: 0.25}}\n"
                     "  - match: /b/logits\n"
                     "    metrics: {top1_agreement: {min: 0.75}, kl_divergence: null}\n"
                     "  - match: /c/logits\n"
                     "    elementwise: true\n"
                     "    metrics: null\n"
                     "  - match: /other\n"
                     "    metrics: {max_prob_diff: {max: 0.125}}\n";
  pc_tol a = resolve_one(yaml, "/a/logits", PC_DTYPE_FLOAT32);
  assert_int_equal(a.metrics.set, 1u << PC_METRIC_TOP1_AGREEMENT | 1u << PC_METRIC_KL_DIVERGENCE |
                                      1u << PC_METRIC_TOPK_OVERLAP);
  assert_true(a.metrics.limit[PC_METRIC_TOP1_AGREEMENT] == 0.9);
  assert_true(a.metrics.limit[PC_METRIC_KL_DIVERGENCE] == 0.5);
  assert_true(a.metrics.limit[PC_METRIC_TOPK_OVERLAP] == 0.25);
  assert_int_equal(a.metrics.topk, 3);
  assert_true(a.metrics.elementwise_off);
  pc_tol b = resolve_one(yaml, "/b/logits", PC_DTYPE_FLOAT32);
  assert_int_equal(b.metrics.set, 1u << PC_METRIC_TOP1_AGREEMENT | 1u << PC_METRIC_TOPK_OVERLAP);
  assert_true(b.metrics.limit[PC_METRIC_TOP1_AGREEMENT] == 0.75);
  assert_true(b.metrics.elementwise_off);
  pc_tol c = resolve_one(yaml, "/c/logits", PC_DTYPE_FLOAT32);
  assert_int_equal(c.metrics.set, 0);
  assert_false(c.metrics.elementwise_off);
  pc_tol none = resolve_one(yaml, "/d/out", PC_DTYPE_FLOAT32);
  assert_int_equal(none.metrics.set, 0);
  assert_string_equal(pc_metric_name(PC_METRIC_SCALAR_REL), "scalar_rel");
  assert_string_equal(pc_metric_name(PC_METRIC_COUNT_), "unknown");
  assert_true(pc_metric_is_floor(PC_METRIC_TOPK_OVERLAP));
  assert_false(pc_metric_is_floor(PC_METRIC_KL_DIVERGENCE));
}

static void test_model_keys_layer_and_unset(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\n"
                          "defaults:\n"
                          "  all: {rtol_u: 1, max_scale_u_sqrt_n: 2, atol_rms: 1}\n"
                          "  float16: {rtol_u: 2}\n");
  pc_tol_context c = ctx_of(0, PC_DTYPE_NONE, 1.0);
  /* no precision: u is the compare dtype's own */
  assert_true(pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c).rtol == 0x1p-24);
  assert_true(pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT16, &c).rtol == 0x1p-10);
  pc_tol tol = pc_tolset_resolve_ctx(set, "/a", PC_DTYPE_FLOAT32, &c);
  assert_true(tol.max_scale == 0); /* max_scale_u unset counts as 0 */
  assert_true(tol.max_scale_sqrt_n == 0x1p-23);
  assert_true(pc_tolset_needs_magnitude(set, "/a", PC_DTYPE_FLOAT32, NULL));
  assert_false(pc_tolset_needs_magnitude(set, "/a", PC_DTYPE_INT8, NULL));
  assert_int_equal(load(set, "version: 1\n"
                             "rules: [{match: /b, all: {atol_rms: null, max_scale_u_sqrt_n: ~,"
                             " rtol_u: null}}]\n"),
                   PC_OK);
  assert_int_equal(pc_tolset_resolve_ctx(set, "/b", PC_DTYPE_FLOAT32, &c).set, 0);
  assert_false(pc_tolset_needs_magnitude(set, "/b", PC_DTYPE_FLOAT32, NULL));
  assert_int_equal(load(set, "version: 1\ndefaults: {all: {atol_rms: 0}}\n"), PC_OK);
  assert_false(pc_tolset_needs_magnitude(set, "/a", PC_DTYPE_FLOAT32, NULL));
  assert_false(pc_tolset_needs_magnitude(NULL, "/a", PC_DTYPE_FLOAT32, NULL));
  pc_tolset_free(set);
}

/* max_scale + (max_scale_sqrt_n + scale_z rel_rms) / sqrt(n): 0.25 + (1 + 0) / 2 = 0.75, and
 * 0.25 + (1 + 3 x 0.2) / 4 = 0.65. (The judge applies it: tests/unit/test_judge.c.) */
static void test_scale_limit(void **state) {
  (void)state;
  pc_tol tol = {0};
  tol.set = PC_TOL_MAX_SCALE;
  tol.max_scale = 0.25;
  tol.max_scale_sqrt_n = 1.0;
  assert_true(pc_tol_scale_limit(&tol, 4, 0) == 0.75);
  tol.scale_z = 3;
  assert_true(fabs(pc_tol_scale_limit(&tol, 16, 0.2) - 0.65) < 1e-15);
}

/* ---- Errors ----------------------------------------------------------------------------- */

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

/* ---- Rules by what a tensor is: match_module_type, match_attr ---------------------------- */

/* A tensor's attributes as a pc_tol_attr_fn sees them: name=value pairs per side, NULL ends. */
typedef struct fake_attrs {
  const char *const *side[2];
  int calls;
} fake_attrs;

static const char *fake_attr(void *user, int side, const char *name, char *buf, size_t size) {
  fake_attrs *fa = user;
  (void)buf;
  (void)size;
  fa->calls++;
  for (const char *const *kv = fa->side[side]; kv && kv[0]; kv += 2)
    if (strcmp(kv[0], name) == 0)
      return kv[1];
  return NULL;
}

static pc_tol resolve_with(const pc_tolset *set, const char *path, pc_dtype dt, fake_attrs *fa) {
  pc_tol_context c = {.attr = fake_attr, .attr_user = fa};
  return pc_tolset_resolve_ctx(set, path, dt, &c);
}

/* The profile the issue asks for: conv weights, batchnorm statistics and reduction kernels
 * (softmax, LayerNorm) each with their own figures, chosen by module_type. */
static const char TYPE_RULES[] = "version: 1\n"
                                 "defaults: {float32: {atol: 1.0e-6}}\n"
                                 "rules:\n"
                                 "  - match_module_type: Conv2d\n"
                                 "    float32: {atol: 1.0e-4, rtol: 3.0e-5}\n"
                                 "  - match_module_type: 'BatchNorm*'\n"
                                 "    float32: {rtol: 1.0e-3}\n"
                                 "  - match_module_type: [Softmax, LogSoftmax, LayerNorm]\n"
                                 "    float32: {rtol: 2.0e-4}\n"
                                 "  - match: '/encoder/*'\n"
                                 "    match_module_type: Linear\n"
                                 "    float32: {max_ulp: 9}\n";

static void test_module_type_rules(void **state) {
  (void)state;
  pc_tolset *set = set_of(TYPE_RULES);
  const char *const conv[] = {"module_type", "Conv2d", NULL};
  const char *const bn[] = {"module_type", "BatchNorm2d", NULL};
  const char *const ln[] = {"module", "enc.ln", "module_type", "LayerNorm", NULL};
  const char *const lin[] = {"module_type", "Linear", NULL};
  const char *const none[] = {"module", "x", NULL};

  fake_attrs fa = {{conv, conv}, 0};
  pc_tol tol = resolve_with(set, "/any/conv", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.atol == 1.0e-4);
  assert_true(tol.rtol == 3.0e-5);

  fa = (fake_attrs){{bn, bn}, 0}; /* a glob: BatchNorm1d/2d/3d */
  tol = resolve_with(set, "/bn", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.atol == 1.0e-6);
  assert_true(tol.rtol == 1.0e-3);

  fa = (fake_attrs){{ln, ln}, 0}; /* one of a list */
  tol = resolve_with(set, "/ln", PC_DTYPE_FLOAT32, &fa);
  assert_true(tol.rtol == 2.0e-4);

  /* Path glob and type both given: both must match. */
  fa = (fake_attrs){{lin, lin}, 0};
  tol = resolve_with(set, "/encoder/l0/fc", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_MAX_ULP);
  assert_int_equal(tol.max_ulp, 9);
  tol = resolve_with(set, "/decoder/l0/fc", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL);
  fa = (fake_attrs){{conv, conv}, 0};
  tol = resolve_with(set, "/encoder/l0/conv", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL);
  assert_true(tol.rtol == 3.0e-5);

  /* No module_type on either side, no lookup at all, or no path: type rules do not apply, and
   * nothing fails. */
  fa = (fake_attrs){{none, NULL}, 0};
  tol = resolve_with(set, "/encoder/x", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL);
  assert_true(tol.atol == 1.0e-6);
  tol = pc_tolset_resolve(set, "/encoder/x", PC_DTYPE_FLOAT32);
  assert_int_equal(tol.set, PC_TOL_ATOL);
  fa = (fake_attrs){{conv, conv}, 0};
  assert_int_equal(resolve_with(set, NULL, PC_DTYPE_FLOAT32, &fa).set, PC_TOL_ATOL);

  /* Type matching is case-sensitive and whole-name: "Conv2d" is not "conv2d" nor "Conv2dX". */
  const char *const lower[] = {"module_type", "conv2d", NULL};
  const char *const longer[] = {"module_type", "Conv2dX", NULL};
  fa = (fake_attrs){{lower, longer}, 0};
  assert_int_equal(resolve_with(set, "/c", PC_DTYPE_FLOAT32, &fa).set, PC_TOL_ATOL);

  /* Either side's attribute counts: only B is known to be a Conv2d. */
  fa = (fake_attrs){{none, conv}, 0};
  assert_true(resolve_with(set, "/c", PC_DTYPE_FLOAT32, &fa).rtol == 3.0e-5);
  pc_tolset_free(set);
}

static void test_match_attr(void **state) {
  (void)state;
  /* Dataset or file attributes; several names must all hold; values are globs on the text. */
  pc_tolset *set = set_of("version: 1\n"
                          "rules:\n"
                          "  - match_attr: {backend: mps}\n"
                          "    all: {atol: 0.5}\n"
                          "  - match_attr: {module_type: Softmax, accumulation_dtype: [float16, "
                          "bfloat16]}\n"
                          "    all: {rtol: 0.25}\n"
                          "  - match_attr: {reduction_length: 4096}\n"
                          "    all: {max_ulp: 3}\n"
                          "  - match_module_type: GELU\n"
                          "    match_attr: {module: 'enc.*'}\n"
                          "    metrics: {scalar_abs: {max: 0.125}}\n");
  const char *const cpu[] = {"backend", "cpu", "module_type", "Softmax", NULL};
  const char *const mps[] = {
      "backend",          "mps",  "module_type", "Softmax", "accumulation_dtype", "float16",
      "reduction_length", "4096", NULL};
  fake_attrs fa = {{cpu, mps}, 0};
  pc_tol tol = resolve_with(set, "/s", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.set, PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_ULP);
  assert_true(tol.atol == 0.5);
  assert_true(tol.rtol == 0.25);
  assert_int_equal(tol.max_ulp, 3);
  assert_true(fa.calls > 0);

  fa = (fake_attrs){{cpu, cpu}, 0}; /* a Softmax without accumulation_dtype, both on the CPU */
  assert_int_equal(resolve_with(set, "/s", PC_DTYPE_FLOAT32, &fa).set, 0);

  /* Conditions also select metrics. */
  const char *const gelu[] = {"module", "enc.l0.act", "module_type", "GELU", NULL};
  const char *const gelu_dec[] = {"module", "dec.l0.act", "module_type", "GELU", NULL};
  fa = (fake_attrs){{gelu, gelu}, 0};
  tol = resolve_with(set, "/g", PC_DTYPE_FLOAT32, &fa);
  assert_int_equal(tol.metrics.set, 1u << PC_METRIC_SCALAR_ABS);
  assert_true(tol.metrics.limit[PC_METRIC_SCALAR_ABS] == 0.125);
  fa = (fake_attrs){{gelu_dec, gelu_dec}, 0};
  assert_int_equal(resolve_with(set, "/g", PC_DTYPE_FLOAT32, &fa).metrics.set, 0);
  pc_tolset_free(set);
}

/* The path glob is tested first, and a tensor it rules out costs no attribute lookup. */
static void test_attr_lookup_only_after_glob(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\nrules:\n"
                          "  - {match: /a, match_module_type: Conv2d, all: {atol: 1}}\n");
  const char *const conv[] = {"module_type", "Conv2d", NULL};
  fake_attrs fa = {{conv, conv}, 0};
  assert_int_equal(resolve_with(set, "/b", PC_DTYPE_FLOAT32, &fa).set, 0);
  assert_int_equal(fa.calls, 0);
  assert_int_equal(resolve_with(set, "/a", PC_DTYPE_FLOAT32, &fa).set, PC_TOL_ATOL);
  assert_int_equal(fa.calls, 1);
  pc_tolset_free(set);
}

static int count_unused(void *user, const char *glob) {
  (*(int *)user)++;
  assert_string_equal(glob, "/nowhere");
  return 0;
}

/* A rule that selects by type alone is never "unused": a profile may name types a model lacks. */
static void test_type_rules_not_reported_unused(void **state) {
  (void)state;
  pc_tolset *set = set_of("version: 1\nrules:\n"
                          "  - {match_module_type: BatchNorm2d, all: {atol: 1}}\n"
                          "  - {match: /nowhere, match_module_type: Conv2d, all: {atol: 1}}\n");
  const char *const paths[] = {"/a"};
  int n = 0;
  assert_int_equal(pc_tolset_unused_rules(set, paths, 1, count_unused, &n), PC_OK);
  assert_int_equal(n, 1);
  pc_tolset_free(set);
}

static void test_match_attr_errors(void **state) {
  (void)state;
  expect_error("version: 1\nrules:\n  - match_module_type: {a: 1}\n",
               NAME ":3:24: 'match_module_type' must be a string, got a mapping");
  expect_error("version: 1\nrules:\n  - match_module_type:\n",
               NAME ":3:23: 'match_module_type' must be a string, got null");
  expect_error("version: 1\nrules:\n  - match_module_type: []\n",
               NAME ":3:24: 'match_module_type' must not be an empty list");
  expect_error("version: 1\nrules:\n  - match_module_type: [Conv2d, [x]]\n",
               NAME ":3:33: 'match_module_type' must be a string, got a sequence");
  expect_error("version: 1\nrules:\n  - match_module_type: 'Conv[2d'\n",
               NAME ":3:24: bad glob 'Conv[2d': unbalanced '['");
  expect_error("version: 1\nrules:\n  - match_module_type: ''\n",
               NAME ":3:24: 'match_module_type' must not be empty");
  expect_error("version: 1\nrules:\n  - match_attr: {}\n",
               NAME ":3:17: 'match_attr' must not be empty");
  expect_error("version: 1\nrules:\n  - match_attr: Conv2d\n",
               NAME ":3:17: 'match_attr' must be a mapping, got a plain scalar");
  expect_error("version: 1\nrules:\n  - match_attr: {a: x, a: y}\n",
               NAME ":3:24: duplicate key 'a' in 'match_attr'");
  expect_error("version: 1\nrules:\n  - match_attr: {a: {b: c}}\n",
               NAME ":3:21: 'match_attr.a' must be a string, got a mapping");
  expect_error("version: 1\nrules:\n  - match_attr: {a: ~}\n",
               NAME ":3:21: 'match_attr.a' must be a string, got null");
  expect_error("version: 1\nrules:\n  - match_attr: {'': x}\n",
               NAME ":3:18: an attribute name must have 1 to 63 bytes and no NUL character");
  expect_error("version: 1\nrules:\n  - match_attr: {[a]: x}\n",
               NAME ":3:18: a key in 'match_attr' must be a string, got a sequence");
  /* Rule-only, like match. */
  expect_error("version: 1\ndefaults: {match_module_type: Conv2d}\n",
               NAME ":2:12: unknown key 'match_module_type' in 'defaults' (expected one of:"
                    " float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, integer,"
                    " all)");
  expect_error("version: 1\nrules:\n  - match_module_type: Conv2d\n    match_module_type: X\n",
               NAME ":4:5: duplicate key 'match_module_type' in a rule");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_set_sets_nothing),
      cmocka_unit_test(test_defaults_apply_to_their_dtype),
      cmocka_unit_test(test_later_file_wins),
      cmocka_unit_test(test_rules_follow_all_defaults_in_order),
      cmocka_unit_test(test_specific_key_beats_all_in_one_mapping),
      cmocka_unit_test(test_later_all_beats_earlier_specific),
      cmocka_unit_test(test_null_unsets),
      cmocka_unit_test(test_integer_key_covers_integers_and_bool),
      cmocka_unit_test(test_glob_star_crosses_slash),
      cmocka_unit_test(test_valid_bracket_forms),
      cmocka_unit_test(test_numbers_in_range_are_read_exactly),
      cmocka_unit_test(test_null_sections_and_version_only),
      cmocka_unit_test(test_docs_example),
      cmocka_unit_test(test_builtin_matches_torch),
      cmocka_unit_test(test_builtin_comes_first_once),
      cmocka_unit_test(test_model_resolves_by_hand),
      cmocka_unit_test(test_model_without_context),
      cmocka_unit_test(test_model_widens_plain_criteria),
      cmocka_unit_test(test_model_keys_layer_and_unset),
      cmocka_unit_test(test_metrics_layer),
      cmocka_unit_test(test_scale_limit),
      cmocka_unit_test(test_invalid_yaml),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_missing_required),
      cmocka_unit_test(test_bad_version),
      cmocka_unit_test(test_bad_numbers),
      cmocka_unit_test(test_bad_model_values),
      cmocka_unit_test(test_duplicate_keys),
      cmocka_unit_test(test_anchors_aliases_tags),
      cmocka_unit_test(test_multiple_documents),
      cmocka_unit_test(test_bad_globs),
      cmocka_unit_test(test_rule_cap_counts_all_files),
      cmocka_unit_test(test_load_file),
      cmocka_unit_test(test_file_errors),
      cmocka_unit_test(test_module_type_rules),
      cmocka_unit_test(test_match_attr),
      cmocka_unit_test(test_attr_lookup_only_after_glob),
      cmocka_unit_test(test_type_rules_not_reported_unused),
      cmocka_unit_test(test_match_attr_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
