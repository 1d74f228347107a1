/* Tests of what every report writer shares (src/lib/report/report_rows.c, ordered.c,
 * report_file.c): the order of the rows, rows formatted on threads and written in order, the
 * same bytes from every thread count, and a report file that is verified before it replaces
 * the old one. */
#include "report_fixture.h"

#include <paritycheck/report.h>

#include "report_common.h" /* pc_report_put_ordered, pc_report_row_order, pc_report_open */

#include <dirent.h> /* opendir, readdir */
#include <math.h>   /* NAN */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* open_memstream, fopen */
#include <stdlib.h> /* free, malloc, mkdtemp */
#include <string.h> /* memset, strstr */
#include <unistd.h> /* rmdir, unlink */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

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
      cmocka_unit_test(test_row_order_keys),
      cmocka_unit_test(test_ordered_rows),
      cmocka_unit_test(test_report_file_verified),
      cmocka_unit_test_setup(test_report_threads, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
