/* Small blocks carved from large ones: the paths and shapes of a file's datasets and of a
 * run's tensors (docs/performance.md, "Names and shapes"). At 200,000 tensors these are
 * 600,000 strings of about 15 bytes and as many one-entry shapes; as malloc blocks each costs
 * 32 bytes, and they lie between the blocks that HDF5 allocates and frees while a file is
 * walked, so that the heap could give back little of that once they were freed. An arena holds
 * them in a few blocks of up to PC_ARENA_BLOCK bytes and frees them all at once. Not
 * thread-safe: one thread allocates (the walk's, the pairing's). Internal to the library. */
#ifndef PC_ARENA_H
#define PC_ARENA_H

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/* Blocks grow from PC_ARENA_FIRST bytes, doubling, to PC_ARENA_BLOCK: a file of ten datasets
 * takes a page, one of 200,000 about 5 MB in blocks of 1 MiB. */
enum { PC_ARENA_FIRST = 4096, PC_ARENA_BLOCK = 1 << 20 };

typedef struct pc_arena_block pc_arena_block;

/* Zero-initialised ({NULL}) is an empty arena. */
typedef struct pc_arena {
  pc_arena_block *head; /* the block being filled; the older ones follow it */
} pc_arena;

/** A copy of s (NULL for NULL) in a, or malloc'd when a is NULL; NULL when out of memory. */
char *pc_arena_strdup(pc_arena *a, const char *s);

/** A shape as the loaders and pc_tensor hold it: sets *rank and points *dims at a copy of src's
 * rank entries in a (NULL when rank <= 0). With a NULL arena, pc_shape_set's malloc'd copy,
 * which frees the old one; in an arena the old copy stays until the arena is freed. PC_ENOMEM,
 * *dims then NULL. */
int pc_arena_shape(pc_arena *a, int *rank, uint64_t **dims, int src_rank, const uint64_t *src);

/** Whether p points into one of a's blocks (false for a NULL arena): what tells a path or shape
 * of a's from one that a caller put in its place. */
bool pc_arena_owns(const pc_arena *a, const void *p);

/** Free every block; a is empty again. NULL is accepted. */
void pc_arena_free(pc_arena *a);

#endif
