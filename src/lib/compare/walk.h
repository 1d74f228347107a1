/* The walk of a comparison (walk.c): the files or folders of A and B, their datasets paired,
 * each pair a tensor of the run. The run (compare.c) drives it; internal to the library. */
#ifndef PC_WALK_H
#define PC_WALK_H

#include "comparator.h"

#include <paritycheck/compare.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/* A comparison in progress, from file pair to file pair. */
typedef struct pc_cmp {
  pc_run *run;
  size_t cap; /* room in run->tensors */
  const pc_options *o;
  const pc_pair_sink *sink; /* NULL: read each pair */
  pc_pair p;
  uint64_t budget;               /* for suggestions (names.h) */
  size_t a_count, b_count, both; /* tensors (and lone files) of each side, and on both */
  char *example[2];              /* the first name of each side, for PC_ENOMATCH */
  bool realign_said;             /* the run's warning on re-aligned call indices is given */
} pc_cmp;

/** Every tensor of the two files path_a and path_b (errors opening them are the run's). Every
 * tensor is done when it returns (or handed to c->sink). */
int pc_walk_files(pc_cmp *c, const char *path_a, const char *path_b, pc_error *err);

/** Every file of the folders root_a and root_b, by relative path: a pair of dumps as
 * pc_walk_files, a file of one side only, not a dump or unreadable as a tensor standing for
 * itself. */
int pc_walk_folders(pc_cmp *c, const char *root_a, const char *root_b, pc_error *err);

#endif
