/* The files under a folder (folder.h). */
#include "folder.h"
#include "pc_internal.h"

#include <dirent.h>   /* opendir, readdir, closedir */
#include <errno.h>    /* errno, ENOENT */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, realloc, qsort, free */
#include <string.h>   /* strcmp, strncmp, strrchr, strlen, strerror */
#include <sys/stat.h> /* stat, lstat, S_ISDIR, S_ISREG, S_ISLNK */

enum { PC_TREE_DEPTH_MAX = 64 };

/* A walk in progress: the folders from the root down to the one being read, by device and
 * inode, so that a symbolic link back to one of them is told from a folder to walk. */
typedef struct pc_walk {
  pc_tree *t;
  const char *root;
  int depth;
  dev_t dev[PC_TREE_DEPTH_MAX + 1];
  ino_t ino[PC_TREE_DEPTH_MAX + 1];
} pc_walk;

char *pc_tree_join(const char *root, const char *rel) {
  size_t n = strlen(root) + strlen(rel) + 2;
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s/%s", root, rel);
  return s;
}

/* rel with '%' written "%25" and ':' "%3A" (folder.h), malloc'd; NULL when out of memory. */
static char *pc_tree_escape(const char *rel) {
  size_t n = 0;
  for (const char *p = rel; *p; p++)
    n += *p == '%' || *p == ':' ? 3 : 1;
  char *s = malloc(n + 1), *q = s;
  for (const char *p = rel; s && *p; p++)
    if (*p == '%' || *p == ':') {
      memcpy(q, *p == '%' ? "%25" : "%3A", 3);
      q += 3;
    } else {
      *q++ = *p;
    }
  if (s)
    *q = '\0';
  return s;
}

char *pc_tree_path(const char *root, const char *name) {
  size_t lr = strlen(root), ln = strlen(name);
  char *s = malloc(lr + ln + 2), *q = s;
  if (!s)
    return NULL;
  memcpy(q, root, lr);
  q += lr;
  *q++ = '/';
  for (const char *p = name; *p; p++)
    if (p[0] == '%' && p[1] == '2' && p[2] == '5') {
      *q++ = '%';
      p += 2;
    } else if (p[0] == '%' && p[1] == '3' && p[2] == 'A') {
      *q++ = ':';
      p += 2;
    } else {
      *q++ = *p;
    }
  *q = '\0';
  return s;
}

/* Adds rel, escaped, with why (a constant, copied; NULL for a file); the tree owns rel from
 * here on, even on failure. */
static int pc_tree_add(pc_tree *t, char *raw, const char *why) {
  char *rel = pc_tree_escape(raw);
  free(raw);
  char *w = why ? pc_strdup(why) : NULL;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    pc_tree_item *v = realloc(t->v, cap * sizeof *v);
    if (v) {
      t->v = v;
      t->cap = cap;
    }
  }
  if (t->n == t->cap || !rel || (why && !w)) {
    free(rel);
    free(w);
    return PC_ENOMEM;
  }
  t->v[t->n++] = (pc_tree_item){rel, w};
  return PC_OK;
}

static bool pc_walk_above(const pc_walk *w, const struct stat *st) {
  for (int i = 0; i <= w->depth; i++)
    if (w->dev[i] == st->st_dev && w->ino[i] == st->st_ino)
      return true;
  return false;
}

/* What an entry that is neither a folder nor a regular file is. */
static const char *pc_odd_kind(mode_t mode) {
  return S_ISFIFO(mode)                   ? "a FIFO, not a regular file"
         : S_ISSOCK(mode)                 ? "a socket, not a regular file"
         : S_ISCHR(mode) || S_ISBLK(mode) ? "a device, not a regular file"
                                          : "not a regular file";
}

static int pc_tree_walk(pc_walk *w, const char *sub, const struct stat *st, pc_error *err);

/* Entry `rel` (owned from here on) at `full`: a file, a folder to walk, or an odd item. */
static int pc_tree_entry(pc_walk *w, char *rel, const char *full, pc_error *err) {
  struct stat st, lst;
  bool link = lstat(full, &lst) == 0 && S_ISLNK(lst.st_mode);
  int rc = PC_OK;
  if (stat(full, &st) != 0) {
    rc = pc_tree_add(w->t, rel,
                     link && errno == ENOENT  ? "dangling symbolic link"
                     : link && errno == ELOOP ? "symbolic link loop"
                                              : strerror(errno));
  } else if (S_ISDIR(st.st_mode) && pc_walk_above(w, &st)) {
    rc = pc_tree_add(w->t, rel, "symbolic link to a folder above it (a loop)");
  } else if (S_ISDIR(st.st_mode)) {
    rc = pc_tree_walk(w, rel, &st, err);
    free(rel);
    return rc;
  } else {
    rc = pc_tree_add(w->t, rel, S_ISREG(st.st_mode) ? NULL : pc_odd_kind(st.st_mode));
  }
  return rc < 0 ? pc_error_set(err, rc, "out of memory") : PC_OK;
}

/* Folder `sub` (relative, "" for the root), whose stat is st. */
static int pc_tree_walk(pc_walk *w, const char *sub, const struct stat *st, pc_error *err) {
  char *dir = *sub ? pc_tree_join(w->root, sub) : pc_strdup(w->root);
  if (!dir)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  if (w->depth >= PC_TREE_DEPTH_MAX) {
    int rc = pc_error_set(err, PC_EIO, "%s: folders nested deeper than %d", dir, PC_TREE_DEPTH_MAX);
    free(dir);
    return rc;
  }
  w->depth++;
  w->dev[w->depth] = st->st_dev;
  w->ino[w->depth] = st->st_ino;
  DIR *d = opendir(dir);
  int rc = d ? PC_OK : pc_error_set(err, PC_EIO, "%s: %s", dir, strerror(errno));
  for (struct dirent *e; rc == PC_OK && d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char *rel = *sub ? pc_tree_join(sub, e->d_name) : pc_strdup(e->d_name);
    char *full = rel ? pc_tree_join(w->root, rel) : NULL;
    if (!full) {
      free(rel);
      rc = pc_error_set(err, PC_ENOMEM, "out of memory");
    } else {
      rc = pc_tree_entry(w, rel, full, err);
    }
    free(full);
  }
  if (d)
    closedir(d);
  w->depth--;
  free(dir);
  return rc;
}

static bool pc_is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool pc_tree_is_step(const char *s) {
  const char *base = strrchr(s, '/'), *dot = strrchr(base ? base : s, '.');
  for (const char *p = s; *p && p != dot; p++)
    if (pc_is_digit(*p))
      return true;
  return false;
}

/* Two runs of digits by value (leading zeros aside: "2" before "010"); equal values are 0. */
static int pc_cmp_number(const char **x, const char **y) {
  while (**x == '0' && pc_is_digit((*x)[1]))
    ++*x;
  while (**y == '0' && pc_is_digit((*y)[1]))
    ++*y;
  size_t nx = 0, ny = 0;
  while (pc_is_digit((*x)[nx]))
    nx++;
  while (pc_is_digit((*y)[ny]))
    ny++;
  int c = nx != ny ? (nx > ny) - (nx < ny) : strncmp(*x, *y, nx);
  *x += nx;
  *y += ny;
  return c;
}

int pc_tree_cmp(const char *x, const char *y) {
  bool step_x = pc_tree_is_step(x), step_y = pc_tree_is_step(y);
  if (step_x != step_y)
    return step_x ? -1 : 1; /* summaries (no number) after the steps */
  const char *p = x, *q = y;
  while (*p && *q) {
    int c;
    if (pc_is_digit(*p) && pc_is_digit(*q)) {
      c = pc_cmp_number(&p, &q);
    } else {
      c = (unsigned char)*p - (unsigned char)*q;
      p++, q++;
    }
    if (c)
      return c < 0 ? -1 : 1;
  }
  if (*p || *q)
    return *p ? 1 : -1;
  return strcmp(x, y); /* equal but for leading zeros ("step_01", "step_1"): still two files */
}

static int pc_cmp_rel(const void *x, const void *y) {
  return pc_tree_cmp(((const pc_tree_item *)x)->rel, ((const pc_tree_item *)y)->rel);
}

int pc_tree_list(pc_tree *t, const char *root, pc_error *err) {
  struct stat st;
  *t = (pc_tree){NULL, 0, 0};
  if (stat(root, &st) != 0)
    return pc_error_set(err, PC_EIO, "%s: %s", root, strerror(errno));
  pc_walk w = {.t = t, .root = root, .depth = -1};
  int rc = pc_tree_walk(&w, "", &st, err);
  if (rc == PC_OK)
    qsort(t->v, t->n, sizeof *t->v, pc_cmp_rel);
  return rc;
}

void pc_tree_free(pc_tree *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->v[i].rel);
    free(t->v[i].why);
  }
  free(t->v);
  *t = (pc_tree){NULL, 0, 0};
}
