/* Small blocks carved from large ones (arena.h). */
#include "arena.h"
#include "pc_internal.h"

#include <paritycheck/error.h> /* PC_OK, PC_ENOMEM */

#include <stdalign.h> /* alignof */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memcpy, strlen */

struct pc_arena_block {
  pc_arena_block *next;
  size_t used, size; /* bytes of data */
  alignas(uint64_t) unsigned char data[];
};

/* n bytes aligned to `align` (a power of two, at most uint64_t's) from a's head block, or from
 * a new block that becomes the head: twice the head's size up to PC_ARENA_BLOCK, or n when
 * larger. The rest of a full head block is left unused. */
static void *pc_arena_alloc(pc_arena *a, size_t n, size_t align) {
  pc_arena_block *b = a->head;
  size_t at = b ? (b->used + align - 1) & ~(align - 1) : 0;
  if (!b || at > b->size || n > b->size - at) {
    size_t size = !b ? PC_ARENA_FIRST : b->size < PC_ARENA_BLOCK / 2 ? 2 * b->size : PC_ARENA_BLOCK;
    if (n > size)
      size = n;
    pc_arena_block *fresh = malloc(sizeof *fresh + size);
    if (!fresh)
      return NULL;
    *fresh = (pc_arena_block){b, 0, size};
    a->head = b = fresh;
    at = 0;
  }
  b->used = at + n;
  return b->data + at;
}

char *pc_arena_strdup(pc_arena *a, const char *s) {
  if (!a || !s)
    return pc_strdup(s);
  size_t n = strlen(s) + 1;
  char *copy = pc_arena_alloc(a, n, 1);
  if (copy)
    memcpy(copy, s, n);
  return copy;
}

int pc_arena_shape(pc_arena *a, int *rank, uint64_t **dims, int src_rank, const uint64_t *src) {
  if (!a)
    return pc_shape_set(rank, dims, src_rank, src);
  *dims = NULL;
  *rank = src_rank;
  if (src_rank <= 0)
    return PC_OK;
  size_t bytes = (size_t)src_rank * sizeof **dims;
  if (!(*dims = pc_arena_alloc(a, bytes, alignof(uint64_t))))
    return PC_ENOMEM;
  memcpy(*dims, src, bytes);
  return PC_OK;
}

bool pc_arena_owns(const pc_arena *a, const void *p) {
  uintptr_t at = (uintptr_t)p; /* as integers: p may point into none of the blocks */
  for (const pc_arena_block *b = a ? a->head : NULL; b; b = b->next)
    if (at >= (uintptr_t)b->data && at - (uintptr_t)b->data < b->size)
      return true;
  return false;
}

void pc_arena_free(pc_arena *a) {
  for (pc_arena_block *b = a ? a->head : NULL, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  if (a)
    a->head = NULL;
}
