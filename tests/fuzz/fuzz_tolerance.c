/* libFuzzer target: the tolerance-file parser (src/lib/judge/tol_parse.c) on arbitrary bytes, after
 * the built-in profile as the CLI loads it. Besides "no crash, no leak, no undefined behaviour"
 * (the sanitizers' part), two properties of docs/tolerances.md:
 *   - a refused file gives PC_EPARSE (or PC_ENOMEM) and a message "NAME:LINE:COLUMN: why";
 *   - an accepted file resolves, for any path and dtype, to criteria inside the schema's ranges.
 * A violation aborts, which libFuzzer reports as a crash with its input. */
#include "tol_resolve.h"

#include <math.h>   /* isfinite */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* abort */
#include <string.h> /* strncmp, strspn */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const char NAME[] = "fuzz.yaml";

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_tolerance: %s: %s\n", what, detail);
  abort();
}

static bool nonneg_finite(double x) {
  return x >= 0 && isfinite(x);
}

static void check_tol(const pc_tol *t) {
  if ((t->set & PC_TOL_ATOL) && !nonneg_finite(t->atol))
    fail("atol out of range", "");
  if ((t->set & PC_TOL_RTOL) && !nonneg_finite(t->rtol))
    fail("rtol out of range", "");
  if ((t->set & PC_TOL_MAX_MISMATCH_FRACTION) &&
      !(t->max_mismatch_fraction >= 0 && t->max_mismatch_fraction <= 1))
    fail("max_mismatch_fraction out of [0, 1]", "");
}

/* "NAME:" then a line and a column, both positive decimal numbers, each followed by ':'. */
static void check_message(const char *msg) {
  size_t n = strlen(NAME);
  if (strncmp(msg, NAME, n) != 0 || msg[n] != ':')
    fail("message does not start with the file name", msg);
  const char *p = msg + n + 1;
  for (int field = 0; field < 2; field++) {
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || p[0] == '0' || p[digits] != ':')
      fail("message lacks line:column", msg);
    p += digits + 1;
  }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  static const char *const paths[] = {"/x", "/enc/layer0/out", "", "/a/b/c[1]/*"};
  pc_error err;
  pc_tolset *set = pc_tolset_new();
  if (!set || pc_tolset_load_builtin(set, &err) != PC_OK)
    fail("cannot load the built-in profile", set ? err.message : "out of memory");
  int rc = pc_tolset_load_string(set, NAME, (const char *)data, size, &err);
  if (rc == PC_OK) {
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
      for (int dt = PC_DTYPE_NONE; dt < PC_DTYPE_COUNT_; dt++) {
        pc_tol t = pc_tolset_resolve(set, paths[i], (pc_dtype)dt);
        check_tol(&t);
      }
  } else if (rc == PC_EPARSE) {
    check_message(err.message);
  } else if (rc != PC_ENOMEM) {
    fail("unexpected status", err.message);
  }
  pc_tolset_free(set);
  return 0;
}
