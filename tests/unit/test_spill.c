/* Arrays held in a temporary file (spill.h): where the array lives for each size, that its
 * contents survive every move and every trim, and that a trim gives its pages back. Residency is
 * read from the kernel (/proc/self/smaps, the mapping's own Rss line), not from the module. */
#include "spill.h"

#include <stdio.h>  /* fopen, fgets, sscanf */
#include <stdlib.h> /* malloc, setenv, unsetenv */
#include <string.h> /* memset */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Resident bytes of the mapping that starts at base, from /proc/self/smaps. */
static size_t resident(const void *base) {
  FILE *f = fopen("/proc/self/smaps", "r");
  assert_non_null(f);
  char line[512];
  int found = 0;
  size_t kib = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end;
    if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
      found = start == (uintptr_t)base;
    else if (found && sscanf(line, "Rss: %zu kB", &kib) == 1)
      break;
  }
  fclose(f);
  assert_true(found);
  return kib * 1024;
}

static unsigned char pattern(size_t i) {
  return (unsigned char)(i * 131 % 251);
}

static void fill(unsigned char *p, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    p[i] = pattern(i);
}

/* Bytes [0, n) hold the pattern. */
static void check(const unsigned char *p, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += p[i] != pattern(i);
  assert_int_equal(bad, 0);
}

static const size_t BIG = (size_t)PC_SPILL_MIN + 3 * 4096 + 100; /* not a whole page */

/* A new array of BIG bytes (mapped), holding the pattern. */
static void *new_big(size_t *mapped) {
  void *p = NULL;
  *mapped = 0;
  assert_int_equal(pc_spill_resize(&p, mapped, 0, BIG, PC_SPILL_MIN), 0);
  fill(p, 0, BIG);
  return p;
}

/* Gives back every window of [p, p + n): touches each, then gives back what is left. */
static void drop(const void *p, size_t n) {
  for (size_t at = 0; at < n; at += 65536)
    pc_spill_touch((const char *)p + at);
  pc_spill_touch((const char *)p + n - 1);
  pc_spill_give_back();
}

/* The tests that count resident pages need madvise's MADV_DONTNEED: the portable fallback,
 * posix_madvise, may leave given-back pages resident (-DPC_PORTABLE=ON on Linux). */
static void needs_page_drops(void) {
#ifndef PC_HAVE_MADVISE
  skip();
#endif
}

static void test_heap_up_to_min(void **state) {
  (void)state;
  void *p = NULL;
  size_t mapped = 0;
  assert_int_equal(pc_spill_resize(&p, &mapped, 0, 1000, PC_SPILL_MIN), 0);
  assert_int_equal(mapped, 0);
  fill(p, 0, 1000);
  assert_int_equal(pc_spill_resize(&p, &mapped, 1000, PC_SPILL_MIN, PC_SPILL_MIN), 0);
  assert_int_equal(mapped, 0);
  check(p, 1000);
  pc_spill_free(p, mapped);
}

/* A heap block's windows are never given back, even while arrays are mapped: MADV_DONTNEED
 * would turn its pages into zeros. */
static void test_heap_never_given_back(void **state) {
  (void)state;
  size_t mapped;
  void *big = new_big(&mapped);
  unsigned char *heap = malloc(BIG);
  assert_non_null(heap);
  fill(heap, 0, BIG);
  drop(heap, BIG);
  check(heap, BIG);
  free(heap);
  pc_spill_free(big, mapped);
}

static void test_file_past_min(void **state) {
  (void)state;
  needs_page_drops();
  void *p = NULL;
  size_t mapped = 0;
  assert_int_equal(pc_spill_resize(&p, &mapped, 0, 1 << 20, PC_SPILL_MIN), 0);
  fill(p, 0, 1 << 20);
  assert_int_equal(pc_spill_resize(&p, &mapped, 1 << 20, BIG, PC_SPILL_MIN), 0);
  assert_int_equal(mapped, BIG);
  check(p, 1 << 20);
  fill(p, 1 << 20, BIG);
  assert_true(resident(p) >= BIG - 4096);
  drop(p, BIG);
  assert_int_equal(resident(p), 0);
  check(p, BIG); /* read back from the file */
  assert_true(resident(p) >= BIG - 4096);
  pc_spill_free(p, mapped);
}

static void test_moves_keep_contents(void **state) {
  (void)state;
  needs_page_drops();
  size_t mapped;
  void *p = new_big(&mapped);
  drop(p, BIG);
  assert_int_equal(pc_spill_resize(&p, &mapped, BIG, 2 * BIG, PC_SPILL_MIN),
                   0); /* a new, larger file */
  assert_int_equal(mapped, 2 * BIG);
  assert_int_equal(resident(p), 0); /* copied a MiB at a time, each given back */
  check(p, BIG);
  fill(p, BIG, 2 * BIG);
  assert_int_equal(pc_spill_resize(&p, &mapped, 1000, 1000, PC_SPILL_MIN),
                   0); /* back onto the heap */
  assert_int_equal(mapped, 0);
  check(p, 1000);
  pc_spill_free(p, mapped);
}

static void test_no_temporary_directory(void **state) {
  (void)state;
  const char *old = getenv("TMPDIR");
  char *saved = old ? strdup(old) : NULL;
  assert_int_equal(setenv("TMPDIR", "/nonexistent/paritycheck-test", 1), 0);
  void *p = NULL;
  size_t mapped = 0;
  assert_int_equal(pc_spill_resize(&p, &mapped, 0, 1000, PC_SPILL_MIN), 0);
  fill(p, 0, 1000);
  assert_int_equal(pc_spill_resize(&p, &mapped, 1000, BIG, PC_SPILL_MIN), 0);
  assert_int_equal(mapped, 0); /* no file: the heap holds it */
  check(p, 1000);
  fill(p, 0, BIG);
  check(p, BIG);
  pc_spill_free(p, mapped);
  if (saved)
    setenv("TMPDIR", saved, 1);
  else
    unsetenv("TMPDIR");
  free(saved);
}

/* Touches of windows counted already count nothing, in any order; the PC_SPILL_STRIDE-th new
 * window gives back the thread's windows, and only them. */
static void test_touches_give_back(void **state) {
  (void)state;
  needs_page_drops();
  size_t mapped;
  unsigned char *p = new_big(&mapped);
  pc_spill_give_back(); /* nothing counted before, */
  pc_spill_given = 0;   /* and the next give-back no sweep */
  check(p, BIG);
  size_t full = resident(p);
  assert_true(full >= BIG - 4096);
  unsigned char *w = p + (65536 - (uintptr_t)p % 65536) % 65536; /* the first whole window */
  for (int i = 0; i < 100 * PC_SPILL_STRIDE; i++) /* windows 0 .. STRIDE - 2, scrambled */
    pc_spill_touch(w + (size_t)(i * 7 % (PC_SPILL_STRIDE - 1)) * 65536);
  assert_int_equal(resident(p), full);
  pc_spill_touch(w + (size_t)(PC_SPILL_STRIDE - 1) * 65536);
  assert_int_equal(resident(p), full - (size_t)PC_SPILL_STRIDE * 65536);
  check(p, BIG);
  pc_spill_free(p, mapped);
}

/* The thread's windows touched in reverse, in `runs` runs of adjacent windows one window
 * apart (PC_SPILL_STRIDE a multiple of runs); returns the resident bytes before and after. */
static void touch_runs(unsigned char *w, int runs, size_t *before, size_t *after,
                       const void *base) {
  int len = PC_SPILL_STRIDE / runs;
  pc_spill_give_back();
  pc_spill_given = 0;
  *before = resident(base);
  for (int i = PC_SPILL_STRIDE - 1; i >= 0; i--)
    pc_spill_touch(w + (size_t)(i / len * (len + 1) + i % len) * 65536);
  *after = resident(base);
}

/* Up to PC_SPILL_RUNS runs of windows: those windows are given back and no gap between them;
 * more runs than that: everything from the first window to the last (one call). */
static void test_windows_with_gaps(void **state) {
  (void)state;
  needs_page_drops();
  size_t mapped, before, after;
  unsigned char *p = new_big(&mapped);
  unsigned char *w = p + (65536 - (uintptr_t)p % 65536) % 65536;
  check(p, BIG);
  touch_runs(w, PC_SPILL_RUNS, &before, &after, p);
  assert_int_equal(after, before - (size_t)PC_SPILL_STRIDE * 65536); /* no gap dropped */
  check(p, BIG);
  touch_runs(w, 2 * PC_SPILL_RUNS, &before, &after, p); /* 2 * RUNS - 1 gaps dropped too */
  assert_int_equal(after, before - (size_t)(PC_SPILL_STRIDE + 2 * PC_SPILL_RUNS - 1) * 65536);
  check(p, BIG);
  pc_spill_free(p, mapped);
}

/* Every PC_SPILL_SWEEP-th give-back drops every mapping's pages, touched or not. */
static void test_sweep(void **state) {
  (void)state;
  needs_page_drops();
  size_t mapped;
  void *p = new_big(&mapped);
  pc_spill_given = 0;
  for (int i = 1; i < PC_SPILL_SWEEP; i++)
    pc_spill_give_back(); /* no window: nothing */
  assert_true(resident(p) >= BIG - 4096);
  pc_spill_give_back();
  assert_int_equal(resident(p), 0);
  check(p, BIG);
  pc_spill_free(p, mapped);
}

/* Windows of every mapping are given back; past PC_SPILL_MAX mappings, the heap. */
static void test_every_mapping(void **state) {
  (void)state;
  needs_page_drops();
  void *p[PC_SPILL_MAX + 1];
  size_t mapped[PC_SPILL_MAX + 1];
  for (int i = 0; i <= PC_SPILL_MAX; i++) {
    p[i] = NULL;
    mapped[i] = 0;
    assert_int_equal(pc_spill_resize(&p[i], &mapped[i], 0, PC_SPILL_MIN + 1, PC_SPILL_MIN), 0);
    memset(p[i], i + 1, PC_SPILL_MIN + 1);
  }
  for (int i = 0; i < PC_SPILL_MAX; i++)
    assert_int_equal(mapped[i], PC_SPILL_MIN + 1);
  assert_int_equal(mapped[PC_SPILL_MAX], 0);
  for (int i = 0; i < PC_SPILL_MAX; i++)
    drop(p[i], PC_SPILL_MIN + 1);
  for (int i = 0; i < PC_SPILL_MAX; i++) {
    assert_int_equal(resident(p[i]), 0);
    assert_int_equal(((unsigned char *)p[i])[PC_SPILL_MIN], i + 1);
  }
  for (int i = 0; i <= PC_SPILL_MAX; i++)
    pc_spill_free(p[i], mapped[i]);
  void *q = NULL;
  size_t qm = 0; /* the slots are free again */
  assert_int_equal(pc_spill_resize(&q, &qm, 0, PC_SPILL_MIN + 1, PC_SPILL_MIN), 0);
  assert_int_equal(qm, PC_SPILL_MIN + 1);
  pc_spill_free(q, qm);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heap_up_to_min),         cmocka_unit_test(test_heap_never_given_back),
      cmocka_unit_test(test_file_past_min),          cmocka_unit_test(test_moves_keep_contents),
      cmocka_unit_test(test_no_temporary_directory), cmocka_unit_test(test_touches_give_back),
      cmocka_unit_test(test_windows_with_gaps),      cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_every_mapping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
