/* The comparator through the public API: pairing by path, verdicts, order and the run verdict,
 * on two small files written here with the HDF5 C API. */
#include "arena.h" /* pc_arena_owns */
#include "spill.h" /* pc_spill_min */

#include <paritycheck/paritycheck.h>

#include <hdf5.h>

#include <math.h> /* sqrt */

#include <stdbool.h> /* bool */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* mkdtemp */
#include <string.h>  /* strlen, strstr */
#include <unistd.h>  /* unlink, rmdir, truncate */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static char dir[64], path_a[128], path_b[128], path_r[128];

/* v stored as float32, or as float64 (`wide`: a reference finer than A and B). */
static void put_as(hid_t f, const char *name, hsize_t n, const float *v, bool wide) {
  hid_t s = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(f, name, wide ? H5T_IEEE_F64LE : H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  H5Dclose(d);
  H5Sclose(s);
}

static void put(hid_t f, const char *name, hsize_t n, const float *v) {
  put_as(f, name, n, v, false);
}

static void put_string(hid_t f, const char *name) {
  hsize_t n = 1;
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 3);
  hid_t s = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, "abc");
  H5Dclose(d);
  H5Sclose(s);
  H5Tclose(t);
}

/* Datasets are created in a deliberate non-alphabetical order; neither file tracks creation
 * order, so the report goes by name. */
static void make_files(void) {
  const float v3[] = {1, 2, 3}, d3[] = {1, 2, 4}, v4[] = {1, 2, 3, 4}, d4[] = {1, 2, 3, 5};
  hid_t a = H5Fcreate(path_a, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t b = H5Fcreate(path_b, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put(a, "same", 3, v3), put(b, "same", 3, v3);
  put(a, "drift", 3, v3), put(b, "drift", 3, d3);
  put(a, "frac", 4, v4), put(b, "frac", 4, d4);
  put(a, "only_a", 3, v3), put(b, "only_b", 3, v3);
  put(a, "shape", 3, v3), put(b, "shape", 4, v4);
  put_string(a, "text"), put_string(b, "text");
  put_string(a, "kind"), put(b, "kind", 3, v3);
  H5Fclose(a);
  H5Fclose(b);
  /* R: A's values in float64, so finer than A and B (three-way mode refuses one that is not) */
  hid_t r = H5Fcreate(path_r, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put_as(r, "same", 3, v3, true), put_as(r, "drift", 3, v3, true), put_as(r, "frac", 4, v4, true);
  put_as(r, "only_a", 3, v3, true), put_as(r, "shape", 3, v3, true);
  put_string(r, "text"), put_string(r, "kind");
  H5Fclose(r);
}

static const pc_tensor *tensor(const pc_run *run, const char *path) {
  for (size_t i = 0; i < run->ntensors; i++)
    if (strcmp(run->tensors[i].path, path) == 0)
      return &run->tensors[i];
  fail_msg("no tensor %s", path);
  return NULL;
}

static pc_run *compare_paths(const char *a, const char *b, const char *yaml, bool skip_quantiles) {
  pc_tolset *tols = pc_tolset_new();
  pc_error err;
  assert_int_equal(pc_tolset_load_string(tols, "test.yaml", yaml, strlen(yaml), &err), PC_OK);
  pc_options o = PC_OPTIONS_INIT;
  o.tols = tols;
  o.skip_quantiles = skip_quantiles;
  pc_run *run = NULL;
  assert_int_equal(pc_compare_files(&run, a, b, &o, &err), PC_OK);
  pc_tolset_free(tols);
  return run;
}

static pc_run *compare_opts(const char *yaml, bool skip_quantiles) {
  return compare_paths(path_a, path_b, yaml, skip_quantiles);
}

static pc_run *compare_with(const char *yaml) {
  return compare_opts(yaml, false);
}

static const char *const exact = "version: 1\n";

/* skip_quantiles: no quantiles, every other figure the same. Compared tensors of the default
 * run have them (/drift: one ulp of 2^22 and two of 0, so its p50 ulp is 0 and its p99 is at
 * most 2^22 and above 0.9375 * 2^22: the bucket's lower edge). */
static void test_skip_quantiles(void **state) {
  (void)state;
  pc_run *full = compare_opts(exact, false), *lean = compare_opts(exact, true);
  assert_int_equal(full->ntensors, lean->ntensors);
  for (size_t i = 0; i < full->ntensors; i++) {
    const pc_tensor *tf = &full->tensors[i], *tl = &lean->tensors[i];
    const pc_stats *f = &tf->stats, *l = &tl->stats;
    bool compared = tf->verdict == PC_VERDICT_PASS || tf->verdict == PC_VERDICT_DRIFT;
    assert_int_equal(tf->verdict, tl->verdict);
    assert_int_equal(f->has_quantiles, compared);
    assert_false(l->has_quantiles);
    assert_int_equal(f->count, l->count);
    assert_int_equal(f->mismatches, l->mismatches);
    assert_int_equal(f->max_ulp, l->max_ulp);
    assert_int_equal(f->ulp_sum_lo, l->ulp_sum_lo);
    assert_int_equal(f->worst_index, l->worst_index);
    assert_true(f->max_abs == l->max_abs && f->max_rel == l->max_rel);
    assert_true(f->sum_abs == l->sum_abs && f->sum_sq_diff == l->sum_sq_diff);
    assert_memory_equal(f->ulp_hist, l->ulp_hist, sizeof f->ulp_hist);
  }
  const pc_stats *d = &tensor(full, "/drift")->stats;
  assert_true(d->q_ulp[0] == 0);
  assert_true(d->q_ulp[2] > 0.9375 * 4194304.0 && d->q_ulp[2] <= 4194304.0);
  pc_run_free(full);
  pc_run_free(lean);
}

static void test_verdicts(void **state) {
  (void)state;
  pc_run *run = compare_with(exact);
  assert_int_equal(tensor(run, "/same")->verdict, PC_VERDICT_PASS);
  assert_int_equal(tensor(run, "/drift")->verdict, PC_VERDICT_DRIFT);
  assert_int_equal(tensor(run, "/drift")->stats.mismatches, 1);
  assert_int_equal(tensor(run, "/drift")->stats.worst_index, 2);
  assert_int_equal(tensor(run, "/only_a")->verdict, PC_VERDICT_MISSING_IN_B);
  assert_int_equal(tensor(run, "/only_b")->verdict, PC_VERDICT_MISSING_IN_A);
  assert_int_equal(tensor(run, "/shape")->verdict, PC_VERDICT_SHAPE_MISMATCH);
  assert_int_equal(tensor(run, "/shape")->dims_b[0], 4);
  assert_int_equal(tensor(run, "/text")->verdict, PC_VERDICT_SKIPPED);
  assert_int_equal(tensor(run, "/kind")->verdict, PC_VERDICT_DTYPE_MISMATCH);
  assert_int_equal(run->by_verdict[PC_VERDICT_PASS], 1);
  assert_int_equal(run->by_verdict[PC_VERDICT_DRIFT], 2);
  assert_int_equal(run->verdict, PC_RUN_DRIFT);
  assert_string_equal(pc_run_verdict_name(run->verdict), "drift");
  pc_run_free(run);
}

/* A's datasets by name (no creation order tracked), then B's own. */
static void test_order(void **state) {
  (void)state;
  pc_run *run = compare_with(exact);
  const char *want[] = {"/drift", "/frac",  "/kind", "/only_a",
                        "/same",  "/shape", "/text", "/only_b"};
  assert_int_equal(run->ntensors, 8);
  for (size_t i = 0; i < 8; i++)
    assert_string_equal(run->tensors[i].path, want[i]);
  pc_run_free(run);
}

/* The tensors' paths and shapes of a run the library built lie in the run's arena; a path the
 * caller puts in place of one is malloc'd, and pc_run_free frees it and not the arena's (ASan
 * and valgrind would report the leak or the bad free). */
static void test_names_in_arena(void **state) {
  (void)state;
  pc_run *run = compare_with(exact);
  assert_non_null(run->names);
  const pc_tensor *shape = tensor(run, "/shape");
  assert_true(pc_arena_owns(run->names, shape->path));
  assert_true(pc_arena_owns(run->names, shape->dims));
  assert_true(pc_arena_owns(run->names, shape->dims_b));
  assert_int_equal(shape->dims_b[0], 4);
  pc_tensor *same = &run->tensors[tensor(run, "/same") - run->tensors];
  char *mine = malloc(sizeof "/renamed");
  assert_non_null(mine);
  memcpy(mine, "/renamed", sizeof "/renamed");
  same->path = mine;
  assert_false(pc_arena_owns(run->names, same->path));
  pc_run_free(run);
}

/* /frac has 1 mismatch in 4: a fraction of 0.25 passes, 0.24 does not; a rule relaxes /drift
 * (3 -> 4 is rel 1/3). */
static void test_tolerances_applied(void **state) {
  (void)state;
  pc_run *run = compare_with("version: 1\n"
                             "defaults:\n  float32: {max_mismatch_fraction: 0.25}\n"
                             "rules:\n  - match: \"/dr*\"\n    float32: {rtol: 0.34}\n");
  assert_int_equal(tensor(run, "/frac")->verdict, PC_VERDICT_PASS);
  assert_int_equal(tensor(run, "/frac")->stats.mismatches, 1);
  assert_int_equal(tensor(run, "/drift")->verdict, PC_VERDICT_PASS);
  assert_true(tensor(run, "/drift")->tol.rtol == 0.34);
  pc_run_free(run);
  run = compare_with("version: 1\ndefaults:\n  float32: {max_mismatch_fraction: 0.24}\n");
  assert_int_equal(tensor(run, "/frac")->verdict, PC_VERDICT_DRIFT);
  pc_run_free(run);
}

static void test_unreadable_is_an_error(void **state) {
  (void)state;
  pc_tolset *tols = pc_tolset_new();
  pc_options o = PC_OPTIONS_INIT;
  o.tols = tols;
  pc_run *run = NULL;
  pc_error err;
  char missing[160];
  snprintf(missing, sizeof missing, "%s/none.h5", dir);
  assert_int_equal(pc_compare_files(&run, path_a, missing, &o, &err), PC_EIO);
  assert_null(run);
  assert_non_null(strstr(err.message, missing));
  o.version = 99;
  assert_int_equal(pc_compare_files(&run, path_a, path_b, &o, &err), PC_EUSAGE);
  pc_tolset_free(tols);
}

enum { SHRINK_N = 4096, SHRINK_BLOCK = 64 };

/* Truncates the file named by user inside the dataset's data at the first progress report, that
 * is after the first block's offsets were recorded and before any of it was read. */
static void shrink_now(void *user, uint64_t done, uint64_t total) {
  (void)done, (void)total;
  const char *path = user;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "t", H5P_DEFAULT);
  haddr_t at = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  assert_true(at != HADDR_UNDEF);
  assert_int_equal(truncate(path, (off_t)at + 100), 0);
}

/* A file that shrinks while it is compared: its contiguous dataset is read by the workers with
 * pread, which comes up short; the tensor is an error naming the file, and nothing crashes. */
static void test_file_shrinks(void **state) {
  (void)state;
  char pa[160], pb[160];
  snprintf(pa, sizeof pa, "%s/shrink_a.h5", dir);
  snprintf(pb, sizeof pb, "%s/shrink_b.h5", dir);
  static float v[SHRINK_N];
  for (int i = 0; i < SHRINK_N; i++)
    v[i] = (float)i;
  hid_t fa = H5Fcreate(pa, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t fb = H5Fcreate(pb, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put(fa, "t", SHRINK_N, v), put(fb, "t", SHRINK_N, v);
  H5Fclose(fa);
  H5Fclose(fb);
  pc_tolset *tols = pc_tolset_new();
  pc_options o = PC_OPTIONS_INIT;
  o.tols = tols;
  o.threads = 1; /* the inline worker reads right after the progress report */
  o.block_elems = SHRINK_BLOCK;
  o.progress = shrink_now;
  o.progress_user = pb;
  pc_run *run = NULL;
  pc_error err;
  assert_int_equal(pc_compare_files(&run, pa, pb, &o, &err), PC_OK);
  const pc_tensor *t = tensor(run, "/t");
  assert_int_equal(t->verdict, PC_VERDICT_ERROR);
  assert_non_null(strstr(t->message, pb));
  assert_non_null(strstr(t->message, "ended early"));
  assert_int_equal(run->verdict, PC_RUN_ERROR);
  pc_run_free(run);
  pc_tolset_free(tols);
  unlink(pa);
  unlink(pb);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/pc_compare_XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  snprintf(path_a, sizeof path_a, "%s/a.h5", dir);
  snprintf(path_b, sizeof path_b, "%s/b.h5", dir);
  snprintf(path_r, sizeof path_r, "%s/r.h5", dir);
  make_files();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink(path_a);
  unlink(path_b);
  unlink(path_r);
  return rmdir(dir);
}

/* Three-way mode with R = A's values in float64: A's side is exact, B's side is B's distance to
 * A; tensors that R-vs-B could not compare have no figures; A vs B is untouched. R = A itself,
 * float32 like A and B, is no finer than they are: refused. */
static void test_reference(void **state) {
  (void)state;
  pc_tolset *tols = pc_tolset_new();
  pc_error err;
  assert_int_equal(pc_tolset_load_string(tols, "test.yaml", exact, strlen(exact), &err), PC_OK);
  pc_options o = PC_OPTIONS_INIT;
  o.tols = tols;
  pc_run *run = NULL;
  assert_int_equal(pc_compare_files(&run, path_a, path_b, &o, &err), PC_OK);
  pc_verdict before = tensor(run, "/drift")->verdict;
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing.h5", dir);
  assert_int_equal(pc_compare_reference(run, missing, &o, &err), PC_EIO);
  assert_non_null(strstr(err.message, missing));
  assert_null(run->path_ref);
  assert_int_equal(pc_compare_reference(run, NULL, &o, &err), PC_EUSAGE);
  assert_int_equal(pc_compare_reference(run, path_a, &o, &err), PC_EUSAGE);
  assert_non_null(strstr(err.message, "not finer than A and B"));
  assert_null(run->path_ref);
  assert_int_equal(pc_compare_reference(run, path_r, &o, &err), PC_OK);
  assert_string_equal(run->path_ref, path_r);
  const pc_vs_reference *d = &tensor(run, "/drift")->vs_reference;
  assert_true(d->present);
  assert_true(d->a.max_abs == 0 && d->a.rel_rms == 0 && d->a.max_ulp == 0 && d->a.mean_ulp == 0);
  assert_true(d->b.max_abs == 1 && d->b.max_rel == 1.0 / 3);
  assert_true(d->b.rel_rms == sqrt(1.0 / 14));
  assert_int_equal(d->b.max_ulp, 1 << 22); /* 3 to 4 in float32 */
  assert_true(d->b.mean_ulp == (double)(1 << 22) / 3);
  assert_int_equal(d->closer, -1);
  assert_true(tensor(run, "/same")->vs_reference.present);
  assert_int_equal(tensor(run, "/same")->vs_reference.closer, 0);
  assert_false(tensor(run, "/only_a")->vs_reference.present); /* B lacks it */
  assert_false(tensor(run, "/only_b")->vs_reference.present); /* R lacks it */
  assert_false(tensor(run, "/shape")->vs_reference.present);
  assert_false(tensor(run, "/text")->vs_reference.present);
  assert_int_equal(tensor(run, "/drift")->verdict, before);
  assert_int_equal(run->verdict, PC_RUN_DRIFT);
  pc_run_free(run);
  pc_tolset_free(tols);
}

/* A run whose records are held in a temporary file (spill.h): 3,000 tensors of four elements,
 * B = A = 1 but for element k % 4 of tensor k, 1 + (k % 1000 + 1) / 1024, exact in float32.
 * Each figure must read back as constructed after the passes of the comparison and the judge,
 * which gave back the records' pages. The test lowers the threshold to 4 MiB (about 2,300
 * records), then to 1 byte: every array spilled, the walk's tables grown from 64 entries by
 * copies into new files. */
static void test_spilled_run(void **state) {
  (void)state;
  enum { N = 3000 };
  char pa[160], pb[160], name[16];
  snprintf(pa, sizeof pa, "%s/many_a.h5", dir);
  snprintf(pb, sizeof pb, "%s/many_b.h5", dir);
  hid_t a = H5Fcreate(pa, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t b = H5Fcreate(pb, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  for (int k = 0; k < N; k++) {
    float va[4] = {1, 1, 1, 1}, vb[4] = {1, 1, 1, 1};
    vb[k % 4] = 1 + (float)(k % 1000 + 1) / 1024;
    snprintf(name, sizeof name, "t%04d", k);
    put(a, name, 4, va);
    put(b, name, 4, vb);
  }
  H5Fclose(a);
  H5Fclose(b);
  const size_t four_mib = 4 << 20;
  assert_true(N * sizeof(pc_tensor) > four_mib);
  for (int all = 0; all < 2; all++) { /* past 4 MiB (the records), then every array (by copies) */
    pc_spill_min = all ? 1 : four_mib;
    pc_run *run = compare_paths(pa, pb, exact, false);
    pc_spill_min = SIZE_MAX;
    assert_int_equal(run->tensors_mapped, N * sizeof(pc_tensor));
    assert_int_equal(run->ntensors, N);
    for (int k = 0; k < N; k++) {
      const pc_tensor *t = &run->tensors[k]; /* by name: t0000 .. t2999 */
      snprintf(name, sizeof name, "/t%04d", k);
      assert_string_equal(t->path, name);
      assert_int_equal(t->stats.count, 4);
      assert_int_equal(t->stats.mismatches, 1);
      assert_int_equal(t->stats.worst_index, k % 4);
      assert_true(t->stats.max_abs == (double)(k % 1000 + 1) / 1024);
    }
    assert_int_equal(run->by_verdict[PC_VERDICT_DRIFT], N); /* exact: any difference fails */
    pc_run_free(run);
  }
  unlink(pa);
  unlink(pb);
}

/* Every array of the run spilled (spill.h: the walk's tables, the storage notes, the pairing,
 * the records, each grown by copying into a new file): the same tensors and figures as on the
 * heap, which the other tests check against values known by hand. */
static void test_everything_spilled(void **state) {
  (void)state;
  pc_run *heap = compare_with(exact);
  pc_spill_min = 1;
  pc_run *spilled = compare_with(exact);
  pc_spill_min = SIZE_MAX;
  assert_int_equal(heap->tensors_mapped, 0);
  assert_int_equal(spilled->tensors_mapped, spilled->ntensors * sizeof(pc_tensor));
  assert_int_equal(heap->ntensors, spilled->ntensors);
  for (size_t i = 0; i < heap->ntensors; i++) {
    const pc_tensor *h = &heap->tensors[i], *s = &spilled->tensors[i];
    assert_string_equal(h->path, s->path);
    assert_int_equal(h->verdict, s->verdict);
    assert_memory_equal(&h->stats, &s->stats, sizeof h->stats);
  }
  assert_int_equal(spilled->verdict, heap->verdict);
  pc_run_free(heap);
  pc_run_free(spilled);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_verdicts),
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_names_in_arena),
      cmocka_unit_test(test_tolerances_applied),
      cmocka_unit_test(test_unreadable_is_an_error),
      cmocka_unit_test(test_file_shrinks),
      cmocka_unit_test(test_skip_quantiles),
      cmocka_unit_test(test_reference),
      cmocka_unit_test(test_spilled_run),
      cmocka_unit_test(test_everything_spilled),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
