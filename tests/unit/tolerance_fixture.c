/* The tolerance tests' shared helpers (tolerance_fixture.h): loading YAML text into a set, and
 * expecting a load to fail with an exact message while leaving the set as it was. */
#include "tolerance_fixture.h"

#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h> /* strcmp, strlen */

/* A file loaded before each failing one, to check that a failed load leaves the set as it was. */
static const char BASE[] = "version: 1\n"
                           "defaults: {all: {atol: 0.5}}\n"
                           "rules: [{match: /x, all: {rtol: 0.25}}]\n";

int load(pc_tolset *set, const char *yaml) {
  pc_error err = {0};
  int rc = pc_tolset_load_string(set, NAME, yaml, strlen(yaml), &err);
  if (rc != PC_OK)
    print_error("unexpected error: %s\n", err.message);
  return rc;
}

pc_tolset *set_of(const char *yaml) {
  pc_tolset *set = pc_tolset_new();
  assert_non_null(set);
  assert_int_equal(load(set, yaml), PC_OK);
  return set;
}

pc_tol resolve_one(const char *yaml, const char *path, pc_dtype dt) {
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

void expect_error(const char *yaml, const char *message) {
  expect_error_n(yaml, strlen(yaml), PC_EPARSE, message);
}
