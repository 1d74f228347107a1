/* What a format calls while it walks its file (format.h): the records of the file's datasets
 * and attributes, counted against the memory limit, and the marks of datasets that cannot be
 * compared. Apart from file.c, which lists the formats, so that calls go one way: file.c to the
 * formats, the formats to these. */
#include "format.h"
#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, realloc, free */
#include <string.h>   /* strlen, memset */

uint64_t pc_file_record_bytes(size_t path_len) {
  return sizeof(pc_dataset) + sizeof(pc_file_entry) + path_len + 1;
}

bool pc_file_charge(pc_file *f, uint64_t bytes) {
  if (bytes > f->lim.max_memory || f->meta_bytes > f->lim.max_memory - bytes)
    return false;
  f->meta_bytes += bytes;
  return true;
}

int pc_file_over_limit(const pc_file *f, const char *need, pc_error *err) {
  return pc_error_set(err, PC_EIO,
                      "%s: its metadata would need %s, more than the memory limit of %" PRIu64
                      " bytes (--max-memory)",
                      f->path, need, f->lim.max_memory);
}

int pc_file_add(pc_file *f, pc_dataset **out, const char *path, pc_error *err) {
  uint64_t bytes = pc_file_record_bytes(strlen(path));
  if (!pc_file_charge(f, bytes)) { /* a format that cannot tell the total before: HDF5, npz */
    char need[128];
    snprintf(need, sizeof need, "more than %" PRIu64 " bytes (%zu datasets so far)",
             f->meta_bytes + bytes, f->n + 1);
    return pc_file_over_limit(f, need, err);
  }
  if (f->n == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 64;
    void *ds = f->ds;
    if (pc_spill_resize(&ds, &f->ds_mapped, f->n * sizeof *f->ds, cap * sizeof *f->ds,
                        PC_SPILL_MIN) != 0)
      return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
    f->ds = ds;
    f->cap = cap;
  }
  pc_dataset *d = &f->ds[f->n];
  pc_spill_touch(d);
  memset(d, 0, sizeof *d);
  d->exec_index = -1;
  d->path = pc_arena_strdup(&f->names, path);
  if (!d->path)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  f->n++;
  *out = d;
  return PC_OK;
}

int pc_file_add_attr(pc_file *f, const char *name, const char *value, pc_attr_kind kind) {
  if (f->nattrs == PC_FILE_ATTRS_MAX)
    return PC_OK;
  pc_attr *a = realloc(f->attrs, (f->nattrs + 1) * sizeof *a);
  if (!a)
    return PC_ENOMEM;
  f->attrs = a;
  a[f->nattrs] = (pc_attr){pc_strdup(name), pc_strdup(value), kind};
  if (!a[f->nattrs].name || !a[f->nattrs].value) {
    free(a[f->nattrs].name);
    free(a[f->nattrs].value);
    return PC_ENOMEM;
  }
  f->nattrs++;
  return PC_OK;
}

int pc_dataset_set_shape(pc_file *f, pc_dataset *d, int rank, const uint64_t *dims) {
  f->meta_bytes += (uint64_t)rank * sizeof *dims; /* counted, never refused: at most 256 B */
  return pc_arena_shape(&f->names, &d->rank, &d->dims, rank, dims);
}

int pc_dataset_set_reason(pc_dataset *d, pc_kind kind, const char *why) {
  d->kind = kind;
  free(d->reason);
  d->reason = pc_strdup(why);
  return d->reason ? PC_OK : PC_ENOMEM;
}

int pc_dataset_set_error(const pc_file *f, pc_dataset *d, const char *why) {
  size_t len = strlen(f->path) + strlen(why) + 3;
  char *text = malloc(len);
  if (!text)
    return PC_ENOMEM;
  snprintf(text, len, "%s: %s", f->path, why);
  d->kind = PC_KIND_ERROR;
  free(d->reason);
  d->reason = text;
  return PC_OK;
}

bool pc_same_file(const struct stat *x, const struct stat *y) {
  return x->st_dev == y->st_dev && x->st_ino == y->st_ino && x->st_size == y->st_size;
}
