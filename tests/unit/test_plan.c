/* Plans (paritycheck/plan.h) against bad bytes and misuse: a plan or results cut at every
 * length, or with one byte changed (at about 400 places spread over it), is refused or read
 * without a crash (ASan and UBSan watch in CI); results merged twice or not at all, and a plan for
 * other options, are refused with a message; and the run a plan gives agrees with pc_compare_files'
 * on the fixtures (every report byte for byte is tests/plan's job). */
#include <paritycheck/paritycheck.h>

#include <stdlib.h> /* free, malloc */
#include <string.h> /* memcpy, strstr */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define A PC_FIXTURES "/layouts_a.h5"
#define B PC_FIXTURES "/layouts_b.h5"
/* Processes: enough that big3d (10500 float32 a side) is more than one's share, and is cut. */
enum { NPROCS = 16 };

typedef struct fixture {
  pc_tolset *tols;
  pc_options o;
  pc_plan *plan;
  const void *bytes;
  size_t size;
  void *results[NPROCS];
  size_t rsize[NPROCS];
} fixture;

/* A plan of A and B for NPROCS processes, with each process's results. */
static int setup(void **state) {
  pc_error err;
  fixture *f = calloc(1, sizeof *f);
  f->tols = pc_tolset_new();
  f->o = (pc_options)PC_OPTIONS_INIT;
  f->o.tols = f->tols;
  f->o.block_elems = 64; /* small blocks: the larger tensors are cut into parts */
  f->o.threads = 1;
  assert_int_equal(pc_tolset_load_builtin(f->tols, &err), PC_OK);
  assert_int_equal(pc_plan_make(&f->plan, A, B, &f->o, NPROCS, &err), PC_OK);
  pc_plan_bytes(f->plan, &f->bytes, &f->size);
  for (unsigned k = 0; k < NPROCS; k++)
    assert_int_equal(
        pc_plan_run(&f->results[k], &f->rsize[k], f->bytes, f->size, k, A, B, &f->o, &err), PC_OK);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  pc_plan_free(f->plan);
  for (unsigned k = 0; k < NPROCS; k++)
    free(f->results[k]);
  pc_tolset_free(f->tols);
  free(f);
  return 0;
}

/* A fresh plan, as setup's, to merge into. */
static pc_plan *fresh_plan(const fixture *f) {
  pc_error err;
  pc_plan *p = NULL;
  assert_int_equal(pc_plan_make(&p, A, B, &f->o, NPROCS, &err), PC_OK);
  return p;
}

/* The plan, then each process's results, agree with one pc_compare_files run: the same
 * tensors, verdicts and figures. */
static void test_same_run(void **state) {
  fixture *f = *state;
  pc_error err;
  pc_run *one = NULL, *run = NULL;
  size_t split = 0;
  assert_true(pc_plan_works(f->plan, &split) > 0);
  assert_true(split > 0);
  for (unsigned k = 0; k < NPROCS; k++)
    assert_int_equal(pc_plan_merge(f->plan, f->results[k], f->rsize[k], &err), PC_OK);
  assert_int_equal(pc_plan_finish(f->plan, &run, &err), PC_OK);
  assert_int_equal(pc_compare_files(&one, A, B, &f->o, &err), PC_OK);
  assert_int_equal(run->ntensors, one->ntensors);
  assert_int_equal(run->verdict, one->verdict);
  for (size_t i = 0; i < run->ntensors; i++) {
    assert_string_equal(run->tensors[i].path, one->tensors[i].path);
    assert_int_equal(run->tensors[i].verdict, one->tensors[i].verdict);
    assert_memory_equal(&run->tensors[i].stats, &one->tensors[i].stats, sizeof(pc_stats));
  }
  pc_run_free(run);
  pc_run_free(one);
}

/* Results merged twice, or missing at the end, are refused; the message names a tensor. */
static void test_twice_or_missing(void **state) {
  fixture *f = *state;
  pc_error err;
  pc_run *run = NULL;
  pc_plan *p = fresh_plan(f);
  assert_int_equal(pc_plan_merge(p, f->results[0], f->rsize[0], &err), PC_OK);
  assert_int_equal(pc_plan_merge(p, f->results[0], f->rsize[0], &err), PC_EUSAGE);
  assert_int_equal(pc_plan_finish(p, &run, &err), PC_EUSAGE);
  assert_null(run);
  assert_non_null(strstr(err.message, "results missing"));
  pc_plan_free(p);
}

/* Results cut at every length: each prefix is refused, or taken where it ends between records,
 * or refused as a repeat of records an earlier prefix gave; never a crash. */
static void test_cut_results(void **state) {
  fixture *f = *state;
  pc_error err;
  pc_plan *p = fresh_plan(f);
  for (size_t n = 0; n < f->rsize[1]; n++) {
    int rc = pc_plan_merge(p, f->results[1], n, &err);
    assert_true(rc == PC_OK || rc == PC_EUSAGE);
  }
  pc_plan_free(p);
}

/* Every byte i of n that the changed-byte tests try: about 400 spread over the whole. */
static size_t stride(size_t n) {
  return n / 400 + 1;
}

/* Results with one byte changed: refused, or merged into some run; never a crash. */
static void test_changed_results(void **state) {
  fixture *f = *state;
  pc_error err;
  unsigned char *copy = malloc(f->rsize[0]);
  for (size_t i = 0; i < f->rsize[0]; i += stride(f->rsize[0])) {
    memcpy(copy, f->results[0], f->rsize[0]);
    copy[i] ^= 0xA5;
    pc_plan *p = fresh_plan(f);
    pc_run *run = NULL;
    int rc = pc_plan_merge(p, copy, f->rsize[0], &err);
    for (unsigned k = 1; rc == PC_OK && k < NPROCS; k++)
      rc = pc_plan_merge(p, f->results[k], f->rsize[k], &err);
    if (rc == PC_OK && pc_plan_finish(p, &run, &err) == PC_OK)
      pc_run_free(run);
    pc_plan_free(p);
  }
  free(copy);
}

/* A plan cut at any length is refused whole, before anything of it is run; with one byte changed
 * it is refused or run; never a crash. */
static void test_bad_plans(void **state) {
  fixture *f = *state;
  pc_error err;
  unsigned char *copy = malloc(f->size);
  for (size_t i = 0; i < f->size; i++) {
    void *out = NULL;
    size_t size = 0;
    int rc = pc_plan_run(&out, &size, f->bytes, i, 0, A, B, &f->o, &err);
    assert_int_equal(rc, PC_EUSAGE);
    assert_null(out);
    if (i % stride(f->size))
      continue;
    memcpy(copy, f->bytes, f->size);
    copy[i] ^= 0x5A;
    rc = pc_plan_run(&out, &size, copy, f->size, 1, A, B, &f->o, &err);
    assert_true(rc == PC_OK || rc == PC_EUSAGE || rc == PC_ENOMEM);
    free(out);
  }
  free(copy);
}

/* A plan made for other options is refused, not misread. */
static void test_other_options(void **state) {
  fixture *f = *state;
  pc_error err;
  void *out = NULL;
  size_t size = 0;
  pc_options o = f->o;
  o.block_elems = 128;
  assert_int_equal(pc_plan_run(&out, &size, f->bytes, f->size, 0, A, B, &o, &err), PC_EUSAGE);
  assert_non_null(strstr(err.message, "other options"));
  o = f->o;
  assert_int_equal(pc_plan_run(&out, &size, f->bytes, f->size, NPROCS, A, B, &o, &err), PC_EUSAGE);
  assert_null(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_same_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_twice_or_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cut_results, setup, teardown),
      cmocka_unit_test_setup_teardown(test_changed_results, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_plans, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_options, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
