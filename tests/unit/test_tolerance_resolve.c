/* Unit tests of src/lib/judge/tol_resolve.c: resolution order, the built-in profile against
 * torch's published defaults, the reduction-aware model's figures by hand and the metrics
 * layer. */
#include "tolerance_fixture.h"

#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h> /* fabs */

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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
