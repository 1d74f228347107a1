/* Content hashes (content_hash.h). */
#include "content_hash.h"

#include "loader.h"
#include "pc_internal.h"

#include <stdlib.h> /* malloc, free */

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
