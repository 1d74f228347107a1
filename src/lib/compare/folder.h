/* Folder mode (compare.h): the files under a folder, which the comparator pairs by relative
 * path. Internal to the library. */
#ifndef PC_FOLDER_H
#define PC_FOLDER_H

#include <paritycheck/error.h>

#include <stddef.h> /* size_t */

/* Paths relative to a folder, sorted by strcmp. */
typedef struct pc_tree {
  char **rel;
  size_t n, cap;
} pc_tree;

/** Every regular file under folder `root`, recursively, into t (zeroed first): symbolic links
 * to files count as files, links to folders are not followed (no cycles). PC_EIO naming the
 * folder that cannot be read, or one nested deeper than 64; PC_ENOMEM. */
int pc_tree_list(pc_tree *t, const char *root, pc_error *err);

void pc_tree_free(pc_tree *t);

/** "root/rel", malloc'd; NULL when out of memory. */
char *pc_tree_join(const char *root, const char *rel);

#endif
