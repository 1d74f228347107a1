/* What the flat formats share (flat.h): their per-dataset table, shapes, pread, and reading a
 * block in C order, gathered from the whole array when it is stored in Fortran order. */
#include "flat.h"
#include "pc_internal.h"

#include <errno.h>    /* errno, EINTR */
#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc, realloc, malloc, free */
#include <string.h>   /* memcpy, memset, strerror */
#include <unistd.h>   /* pread */

char *pc_flat_path(const char *name, size_t drop) {
  size_t keep = strlen(name) - drop, len = keep + 2;
  char *path = malloc(len);
  if (path)
    snprintf(path, len, "%s%.*s", name[0] == '/' ? "" : "/", (int)keep, name);
  return path;
}

int pc_flat_init(pc_file *f, pc_error *err) {
  f->impl = calloc(1, sizeof(pc_flat_file));
  return f->impl ? PC_OK : pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
}

void pc_flat_free(pc_file *f) {
  pc_flat_file *s = f->impl;
  if (!s)
    return;
  free(s->arrays);
  free(s);
  f->impl = NULL;
}

int pc_flat_add(pc_file *f, pc_dataset **d, pc_flat_array **a, const char *path, pc_error *err) {
  pc_flat_file *s = f->impl;
  int rc = pc_file_add(f, d, path, err);
  if (rc < 0)
    return rc;
  if (s->cap < f->cap) { /* one pc_flat_array for every room of f->ds */
    pc_flat_array *grown = realloc(s->arrays, f->cap * sizeof *grown);
    if (!grown)
      return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
    s->arrays = grown;
    s->cap = f->cap;
  }
  *a = &s->arrays[f->n - 1];
  memset(*a, 0, sizeof **a);
  (*a)->member = -1;
  return PC_OK;
}

int pc_flat_shape(pc_file *f, pc_dataset *d, int rank, const uint64_t *dims) {
  uint64_t count = 1;
  bool overflow = false;
  for (int i = 0; i < rank; i++) {
    overflow = overflow || (dims[i] && count > UINT64_MAX / dims[i]);
    count *= dims[i];
  }
  d->count = count;
  if (pc_dataset_set_shape(f, d, rank, dims) < 0)
    return PC_ENOMEM;
  return !overflow && (d->elem_size == 0 || count <= UINT64_MAX / d->elem_size) ? PC_OK : PC_EDATA;
}

void pc_flat_set_fortran(pc_dataset *d, pc_flat_array *a, bool fortran) {
  a->fortran = fortran && d->rank > 1; /* one dimension lies the same in either order */
  d->chunk_bytes = a->fortran ? d->count * d->elem_size : 0;
}

bool pc_flat_little_endian(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

int pc_flat_pread(pc_reader *r, uint64_t from, void *dst, uint64_t bytes, pc_error *err) {
  unsigned char *p = dst;
  uint64_t at = pc_flat_array_of(r)->offset + from;
  while (bytes > 0) {
    size_t want = bytes > (1u << 30) ? (1u << 30) : (size_t)bytes;
    ssize_t got = pread(r->f->fd, p, want, (off_t)at);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return pc_error_set(err, PC_EDATA, "%s: %s: cannot read at byte %" PRIu64 ": %s", r->f->path,
                          r->ds->path, at, got < 0 ? strerror(errno) : "the file ends there");
    p += got;
    at += (uint64_t)got;
    bytes -= (uint64_t)got;
  }
  return PC_OK;
}

int pc_flat_open_dataset(pc_reader *r, pc_error *err) {
  r->impl = calloc(1, sizeof(pc_flat_reader));
  return r->impl ? PC_OK
                 : pc_error_set(err, PC_ENOMEM, "%s: %s: out of memory", r->f->path, r->ds->path);
}

void pc_flat_close_dataset(pc_reader *r) {
  pc_flat_reader *s = r->impl;
  if (!s)
    return;
  free(s->whole);
  free(s);
  r->impl = NULL;
}

uint64_t pc_flat_chunk_extent(const pc_reader *r, int k) {
  (void)r;
  (void)k;
  return 0;
}

bool pc_flat_direct(const pc_reader *r, uint64_t *offset) {
  const pc_flat_array *a = pc_flat_array_of(r);
  bool yes = a->in_file && !a->fortran && r->ds->count > 0;
  *offset = yes ? a->offset : 0;
  return yes;
}

/* Copies the elements [first, first + n) in C order out of `whole`, which holds the array in
 * Fortran order: the C index advances like an odometer, last dimension fastest, and the Fortran
 * offset follows it (its stride of dimension k is the product of the dimensions before k). */
static void pc_flat_gather(const pc_dataset *d, const unsigned char *whole, uint64_t first,
                           uint64_t n, unsigned char *out) {
  uint64_t idx[PC_MAX_RANK], stride[PC_MAX_RANK], off = 0, s = 1, rest = first;
  size_t es = d->elem_size;
  for (int k = 0; k < d->rank; k++) {
    stride[k] = s;
    s *= d->dims[k];
  }
  for (int k = d->rank - 1; k >= 0; k--) {
    idx[k] = rest % d->dims[k];
    rest /= d->dims[k];
    off += idx[k] * stride[k];
  }
  for (uint64_t i = 0; i < n; i++) {
    memcpy(out + i * es, whole + off * es, es);
    for (int k = d->rank - 1; k >= 0; k--) {
      off += stride[k];
      if (++idx[k] < d->dims[k])
        break;
      off -= idx[k] * stride[k];
      idx[k] = 0;
    }
  }
}

int pc_flat_read(pc_reader *r, const pc_block *b, void *raw, pc_flat_fetch fetch, pc_error *err) {
  const pc_dataset *d = r->ds;
  pc_flat_reader *s = r->impl;
  if (!pc_flat_array_of(r)->fortran)
    return fetch(r, b->first * d->elem_size, raw, b->n * d->elem_size, err);
  if (!s->whole) {
    uint64_t bytes = d->count * d->elem_size; /* d->chunk_bytes, within the memory limit */
    s->whole = bytes <= SIZE_MAX ? malloc((size_t)bytes) : NULL;
    if (!s->whole)
      return pc_error_set(err, PC_EDATA,
                          "%s: %s: out of memory for the Fortran-order array (%" PRIu64 " bytes)",
                          r->f->path, d->path, bytes);
    int rc = fetch(r, 0, s->whole, bytes, err);
    if (rc < 0) {
      free(s->whole);
      s->whole = NULL;
      return rc;
    }
  }
  pc_flat_gather(d, s->whole, b->first, b->n, raw);
  return PC_OK;
}
