/* The files under a folder (folder.h). */
#include "folder.h"
#include "pc_internal.h"

#include <dirent.h>   /* opendir, readdir, closedir */
#include <errno.h>    /* errno */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, realloc, qsort, free */
#include <string.h>   /* strcmp, strlen, strerror */
#include <sys/stat.h> /* stat, lstat, S_ISDIR, S_ISREG */

enum { PC_TREE_DEPTH_MAX = 64 };

char *pc_tree_join(const char *root, const char *rel) {
  size_t n = strlen(root) + strlen(rel) + 2;
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s/%s", root, rel);
  return s;
}

static int pc_tree_add(pc_tree *t, char *rel) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    char **r = realloc(t->rel, cap * sizeof *r);
    if (!r)
      return PC_ENOMEM;
    t->rel = r;
    t->cap = cap;
  }
  t->rel[t->n++] = rel;
  return PC_OK;
}

static int pc_tree_walk(pc_tree *t, const char *root, const char *sub, int depth, pc_error *err);

/* One folder entry `name` of folder `sub` (relative, "" for the root). */
static int pc_tree_entry(pc_tree *t, const char *root, const char *sub, const char *name, int depth,
                         pc_error *err) {
  char *rel = *sub ? pc_tree_join(sub, name) : pc_strdup(name);
  char *full = rel ? pc_tree_join(root, rel) : NULL;
  struct stat st, lst;
  int rc = full ? PC_OK : pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK && lstat(full, &lst) == 0 && S_ISDIR(lst.st_mode)) {
    rc = pc_tree_walk(t, root, rel, depth + 1, err);
  } else if (rc == PC_OK && stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
    rc = pc_tree_add(t, rel) < 0 ? pc_error_set(err, PC_ENOMEM, "out of memory") : PC_OK;
    if (rc == PC_OK)
      rel = NULL; /* the tree owns it now */
  }
  free(rel);
  free(full);
  return rc;
}

static int pc_tree_walk(pc_tree *t, const char *root, const char *sub, int depth, pc_error *err) {
  char *dir = *sub ? pc_tree_join(root, sub) : pc_strdup(root);
  if (!dir)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  if (depth > PC_TREE_DEPTH_MAX) {
    int rc = pc_error_set(err, PC_EIO, "%s: folders nested deeper than %d", dir, PC_TREE_DEPTH_MAX);
    free(dir);
    return rc;
  }
  DIR *d = opendir(dir);
  int rc = d ? PC_OK : pc_error_set(err, PC_EIO, "%s: %s", dir, strerror(errno));
  for (struct dirent *e; rc == PC_OK && d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      rc = pc_tree_entry(t, root, sub, e->d_name, depth, err);
  if (d)
    closedir(d);
  free(dir);
  return rc;
}

static int pc_cmp_rel(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

int pc_tree_list(pc_tree *t, const char *root, pc_error *err) {
  t->rel = NULL;
  t->n = t->cap = 0;
  int rc = pc_tree_walk(t, root, "", 0, err);
  if (rc == PC_OK)
    qsort(t->rel, t->n, sizeof *t->rel, pc_cmp_rel);
  return rc;
}

void pc_tree_free(pc_tree *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->rel[i]);
  free(t->rel);
  t->rel = NULL;
  t->n = t->cap = 0;
}
