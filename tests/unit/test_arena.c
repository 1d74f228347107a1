/* Small blocks carved from large ones (arena.h): copies hold what they copied across many
 * blocks, shapes are aligned, consecutive copies lie end to end (no per-copy overhead, which is
 * the point), ownership tells arena pointers from malloc'd ones, and a NULL arena mallocs. */
#include "arena.h"

#include <paritycheck/error.h> /* PC_OK */

#include <stdint.h> /* uintptr_t, uint64_t */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* free, malloc */
#include <string.h> /* strlen */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* Copies of 15 bytes with their NUL are 16 apart within a block: nothing between them. */
static void test_copies_end_to_end(void **state) {
  (void)state;
  pc_arena a = {NULL};
  char *p = pc_arena_strdup(&a, "/g0000/t000000");
  char *q = pc_arena_strdup(&a, "/g0000/t000001");
  assert_non_null(p);
  assert_ptr_equal(q, p + 15);
  assert_string_equal(p, "/g0000/t000000");
  assert_string_equal(q, "/g0000/t000001");
  pc_arena_free(&a);
  assert_null(a.head);
}

/* 300,000 names (about 4.5 MB: many blocks of up to PC_ARENA_BLOCK) each read back as written,
 * and each lies in the arena. */
static void test_many_blocks_keep_contents(void **state) {
  (void)state;
  enum { N = 300000 };
  pc_arena a = {NULL};
  char **kept = malloc(N * sizeof *kept);
  assert_non_null(kept);
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "/g%04d/t%06d", i / 100, i);
    assert_non_null(kept[i] = pc_arena_strdup(&a, name));
  }
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "/g%04d/t%06d", i / 100, i);
    assert_string_equal(kept[i], name);
    assert_true(pc_arena_owns(&a, kept[i]));
  }
  free(kept);
  pc_arena_free(&a);
}

/* A shape after a string of odd length is aligned for uint64_t and holds the entries; rank 0 and
 * below give NULL. */
static void test_shapes(void **state) {
  (void)state;
  pc_arena a = {NULL};
  const uint64_t src[3] = {UINT64_MAX, 0, 7};
  int rank = 99;
  uint64_t *dims = NULL;
  assert_non_null(pc_arena_strdup(&a, "ab")); /* 3 bytes: the next free byte is unaligned */
  assert_int_equal(pc_arena_shape(&a, &rank, &dims, 3, src), PC_OK);
  assert_int_equal(rank, 3);
  assert_int_equal((uintptr_t)dims % sizeof(uint64_t), 0);
  assert_true(dims[0] == UINT64_MAX && dims[1] == 0 && dims[2] == 7);
  assert_true(pc_arena_owns(&a, dims));
  assert_int_equal(pc_arena_shape(&a, &rank, &dims, 0, src), PC_OK);
  assert_int_equal(rank, 0);
  assert_null(dims);
  pc_arena_free(&a);
}

/* A copy longer than the largest block gets a block of its own, and copies after it go on. */
static void test_larger_than_a_block(void **state) {
  (void)state;
  pc_arena a = {NULL};
  size_t n = PC_ARENA_BLOCK + 100;
  char *big = malloc(n + 1);
  assert_non_null(big);
  memset(big, 'x', n);
  big[n] = '\0';
  char *before = pc_arena_strdup(&a, "before");
  char *copy = pc_arena_strdup(&a, big);
  char *after = pc_arena_strdup(&a, "after");
  assert_non_null(copy);
  assert_int_equal(strlen(copy), n);
  assert_string_equal(before, "before");
  assert_string_equal(after, "after");
  assert_true(pc_arena_owns(&a, copy) && pc_arena_owns(&a, copy + n));
  free(big);
  pc_arena_free(&a);
}

/* Ownership: a malloc'd block is not the arena's; a NULL arena owns nothing and mallocs (so
 * that free is right for what it gives: ASan and valgrind check the frees below). */
static void test_owns_and_null_arena(void **state) {
  (void)state;
  pc_arena a = {NULL};
  assert_false(pc_arena_owns(&a, "x")); /* empty */
  char *in = pc_arena_strdup(&a, "in");
  char *out = malloc(4);
  assert_non_null(out);
  assert_true(pc_arena_owns(&a, in));
  assert_false(pc_arena_owns(&a, out));
  assert_false(pc_arena_owns(NULL, in));
  char *heap = pc_arena_strdup(NULL, "heap");
  assert_string_equal(heap, "heap");
  assert_null(pc_arena_strdup(&a, NULL));
  const uint64_t src[2] = {2, 3};
  int rank = 0;
  uint64_t *dims = NULL;
  assert_int_equal(pc_arena_shape(NULL, &rank, &dims, 2, src), PC_OK);
  assert_true(rank == 2 && dims[0] == 2 && dims[1] == 3);
  assert_false(pc_arena_owns(&a, dims));
  free(dims);
  free(heap);
  free(out);
  pc_arena_free(&a);
  pc_arena_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copies_end_to_end),
      cmocka_unit_test(test_many_blocks_keep_contents),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_larger_than_a_block),
      cmocka_unit_test(test_owns_and_null_arena),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
