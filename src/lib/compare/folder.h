/* Folder mode (compare.h): the files under a folder, which the comparator pairs by relative
 * path. Internal to the library. */
#ifndef PC_FOLDER_H
#define PC_FOLDER_H

#include <paritycheck/error.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */

/* One entry under the folder: a regular file (why NULL), or something that stands where a file
 * could be but cannot be compared (why says what: a FIFO, a dangling link, a link loop), which
 * the comparator reports rather than drops (docs/robustness.md, "Fail closed"). */
typedef struct pc_tree_item {
  char *rel; /* the path relative to the folder, escaped for tensor paths "FILE:DATASET": '%' as
                "%25" and ':' as "%3A", so that the first ':' of a tensor path ends FILE; join
                it to its folder with pc_tree_path */
  char *why; /* malloc'd, or NULL */
} pc_tree_item;

/* Entries sorted by pc_tree_cmp of rel. */
typedef struct pc_tree {
  pc_tree_item *v;
  size_t n, cap;
} pc_tree;

/** Every entry under folder `root`, recursively, into t (zeroed first): regular files, and
 * symbolic links to them, as files; symbolic links to folders are followed, but one that leads
 * back to a folder above it is an item with a why, as are dangling links, FIFOs, sockets and
 * devices. PC_EIO naming the folder that cannot be read, or one nested deeper than 64;
 * PC_ENOMEM. */
int pc_tree_list(pc_tree *t, const char *root, pc_error *err);

void pc_tree_free(pc_tree *t);

/** Whether rel is a step's file: a digit in its path but for the file name's extension
 * (step_2/rank_0.h5, epoch10.h5; not final.h5, whose ".h5" holds one). */
bool pc_tree_is_step(const char *rel);

/** The order of a folder run's files, which is its execution order (README, "Folders"): files
 * whose relative path holds a digit outside the file name's extension (steps: step_2/rank_0.h5,
 * epoch10.h5; not final.h5) first, in natural order
 * (runs of digits compared by value, step_2 before step_10; the rest byte by byte), then the
 * others (summaries: final.h5) byte by byte. A total order: distinct paths never compare equal. */
int pc_tree_cmp(const char *x, const char *y);

/** "root/rel", malloc'd; NULL when out of memory. rel as the file system spells it. */
char *pc_tree_join(const char *root, const char *rel);

/** "root/" and the file that escaped name (pc_tree_item.rel) stands for, malloc'd; NULL when
 * out of memory. */
char *pc_tree_path(const char *root, const char *name);

#endif
