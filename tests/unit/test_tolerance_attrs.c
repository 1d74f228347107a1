/* Unit tests of rules by what a tensor is (src/lib/judge/tol_parse.c, tol_resolve.c):
 * match_module_type and match_attr resolved against attributes given by hand, and their
 * errors with exact positions (1-based line:column of the offending node, counted by hand). */
#include "tolerance_fixture.h"

#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h> /* strcmp */

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
      cmocka_unit_test(test_module_type_rules),
      cmocka_unit_test(test_match_attr),
      cmocka_unit_test(test_attr_lookup_only_after_glob),
      cmocka_unit_test(test_type_rules_not_reported_unused),
      cmocka_unit_test(test_match_attr_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
