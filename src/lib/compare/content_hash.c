/* Content hashes (content_hash.h). */
#include "content_hash.h"

#include "folder.h"
#include "loader.h"
#include "pc_internal.h"

#include <errno.h>    /* errno, ENOENT */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* strchr, strlen, memcpy */
#include <sys/stat.h> /* stat, S_ISDIR */

/* FNV-1a, 64 bits (Fowler, Noll, Vo): cheap, streaming, and enough to tell a changed input from
 * the approved one; it is no defence against a forger. */
static const uint64_t FNV_OFFSET = 0xcbf29ce484222325u;
static const uint64_t FNV_PRIME = 0x100000001b3u;

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * FNV_PRIME;
  return h;
}

enum { HASH_BLOCK_ELEMS = 1 << 16 };

static int hash_dataset(pc_file *f, const pc_dataset *d, uint64_t *out, pc_error *err) {
  pc_reader *r = NULL;
  unsigned char *raw = NULL;
  uint64_t h = FNV_OFFSET;
  int rc = pc_reader_open(&r, f, d, HASH_BLOCK_ELEMS, NULL, err);
  if (rc == PC_OK && !(raw = malloc(pc_reader_max_block(r) * d->elem_size + 1)))
    rc = pc_error_set(err, PC_ENOMEM, "out of memory hashing %s", d->path);
  for (size_t n = 1; rc == PC_OK && n;)
    if ((rc = pc_reader_next_raw(r, raw, &n, err)) == PC_OK)
      h = fnv1a(h, raw, n * d->elem_size);
  free(raw);
  pc_reader_close(r);
  *out = h;
  return rc;
}

static bool numeric(const pc_dataset *d) {
  return d &&
         (d->kind == PC_KIND_FLOAT || d->kind == PC_KIND_COMPLEX || d->kind == PC_KIND_INTEGER);
}

int pc_content_hashes(const char *file_path, const char *const *paths, size_t n, uint64_t *out,
                      bool *found, pc_error *err) {
  pc_file *f = NULL;
  int rc = pc_file_open(&f, file_path, err);
  for (size_t i = 0; i < n && rc == PC_OK; i++) {
    const pc_dataset *d = pc_file_find(f, paths[i]);
    out[i] = 0;
    found[i] = numeric(d);
    if (found[i])
      rc = hash_dataset(f, d, &out[i], err);
  }
  pc_file_close(f);
  return rc;
}

/* One dataset "FILE:DATASET" of folder root, with *f the file last opened (*at its FILE, a
 * malloc'd "root/FILE"); paths of one file in a row open it once. */
static int hash_in_folder(const char *root, const char *path, pc_file **f, char **at, uint64_t *out,
                          bool *found, pc_error *err) {
  const char *colon = strchr(path, ':');
  *out = 0;
  *found = false;
  if (!colon)
    return PC_OK;
  size_t nf = (size_t)(colon - path);
  char *name = malloc(nf + 1);
  char *file = NULL;
  if (name) {
    memcpy(name, path, nf);
    name[nf] = '\0';
    file = pc_tree_path(root, name); /* FILE is escaped as in tensor paths (folder.h) */
    free(name);
  }
  if (!file)
    return pc_error_set(err, PC_ENOMEM, "out of memory hashing %s", path);
  struct stat st;
  int rc = PC_OK;
  if (*at && strcmp(*at, file) == 0) {
    free(file);
  } else {
    pc_file_close(*f);
    *f = NULL;
    free(*at);
    *at = file;
    if (stat(file, &st) != 0 && errno == ENOENT)
      return PC_OK; /* a file gone: the tensor is not found */
    rc = pc_file_open(f, file, err);
  }
  const pc_dataset *d = rc == PC_OK && *f ? pc_file_find(*f, colon + 1) : NULL;
  *found = numeric(d);
  return *found ? hash_dataset(*f, d, out, err) : rc;
}

int pc_content_hashes_at(const char *root, const char *const *paths, size_t n, uint64_t *out,
                         bool *found, pc_error *err) {
  struct stat st;
  if (n == 0) /* nothing to hash: the side is not read */
    return PC_OK;
  if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
    return pc_content_hashes(root, paths, n, out, found, err);
  pc_file *f = NULL;
  char *at = NULL;
  int rc = PC_OK;
  for (size_t i = 0; i < n && rc == PC_OK; i++)
    rc = hash_in_folder(root, paths[i], &f, &at, &out[i], &found[i], err);
  pc_file_close(f);
  free(at);
  return rc;
}
