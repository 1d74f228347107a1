/* The format-free half of a loaded file (loader.h): checks the path, opens the descriptor that
 * direct readers read, picks the format by its magic bytes, lists and finds datasets. */
#include "format.h"
#include "pc_internal.h"

#include <errno.h>  /* errno */
#include <fcntl.h>  /* open, O_RDONLY, O_CLOEXEC, O_NONBLOCK */
#include <stdlib.h> /* malloc, qsort, bsearch */
#include <string.h> /* strcmp, strerror, memcmp */
#include <unistd.h> /* close */

/* Tried in this order; the first whose sniff says yes opens the file. safetensors has no magic
 * number, so its sniff, the weakest, comes last. */
static const pc_format *const pc_formats[] = {&pc_format_hdf5, &pc_format_npy, &pc_format_npz,
                                              &pc_format_safetensors};

static int pc_by_path(const void *x, const void *y) {
  return strcmp(((const pc_file_entry *)x)->path, ((const pc_file_entry *)y)->path);
}

/* A format library would block on a FIFO and give an unhelpful message for a directory: check
 * first. */
static int pc_check_regular(const char *path, struct stat *st, pc_error *err) {
  if (stat(path, st) != 0)
    return pc_error_set(err, PC_EIO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(st->st_mode))
    return pc_error_set(err, PC_EIO, "%s: is a directory", path);
  if (!S_ISREG(st->st_mode))
    return pc_error_set(err, PC_EIO, "%s: not a regular file", path);
  if (st->st_size == 0)
    return pc_error_set(err, PC_EIO, "%s: empty file (not a tensor dump)", path);
  return PC_OK;
}

/* The descriptor that direct readers read: the file stat checked, not one that replaced it since.
 * O_NONBLOCK: should a FIFO have taken the path meanwhile, open must not wait for a writer. */
static int pc_open_fd(pc_file *f, const struct stat *checked, pc_error *err) {
  struct stat st;
  f->fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f->fd < 0)
    return pc_error_set(err, PC_EIO, "%s: %s", f->path, strerror(errno));
  if (fstat(f->fd, &st) != 0)
    return pc_error_set(err, PC_EIO, "%s: %s", f->path, strerror(errno));
  if (!S_ISREG(st.st_mode) || !pc_same_file(&st, checked))
    return pc_error_set(err, PC_EIO, "%s: changed while it was being opened", f->path);
  return PC_OK;
}

/* Sorts the datasets by path for pc_file_find; two of one path (names that a format maps to one
 * path, e.g. safetensors "x" and "/x") would make a comparison ambiguous: PC_EIO. */
static int pc_file_sort(pc_file *f, pc_error *err) {
  f->sorted = malloc((f->n ? f->n : 1) * sizeof *f->sorted);
  if (!f->sorted)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < f->n; i++) {
    const pc_dataset *d = &f->ds[i];
    pc_spill_touch(d);
    f->sorted[i] = (pc_file_entry){d->path, d};
    bool numeric =
        d->kind == PC_KIND_FLOAT || d->kind == PC_KIND_COMPLEX || d->kind == PC_KIND_INTEGER;
    if (numeric && d->count > f->max_count)
      f->max_count = d->count;
  }
  qsort(f->sorted, f->n, sizeof *f->sorted, pc_by_path);
  for (size_t i = 1; i < f->n; i++)
    if (strcmp(f->sorted[i - 1].path, f->sorted[i].path) == 0)
      return pc_error_set(err, PC_EIO, "%s: two tensors have the path %s", f->path,
                          f->sorted[i].path);
  return PC_OK;
}

uint64_t pc_file_max_count(const pc_file *f) {
  return f->max_count;
}

/* The format whose magic bytes f starts with, or f->format NULL for none. A read error is said
 * as such: a file that cannot be read is not "not a tensor dump". */
static int pc_sniff_format(pc_file *f, pc_error *err) {
  unsigned char head[16];
  if (pread(f->fd, head, sizeof head, 0) < 0)
    return pc_error_set(err, PC_EIO, "%s: cannot read: %s", f->path, strerror(errno));
  for (size_t i = 0; !f->format && i < sizeof pc_formats / sizeof *pc_formats; i++)
    if (pc_formats[i]->sniff(f))
      f->format = pc_formats[i];
  return PC_OK;
}

/* torch.save's legacy (non-zip) format opens with a pickled magic number: protocol 2, a
 * 10-byte long 0x1950a86a20f9469cfc6c (torch/serialization.py, MAGIC_NUMBER). */
static bool pc_legacy_torch(const pc_file *f) {
  static const unsigned char magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                        0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  unsigned char head[sizeof magic];
  return pread(f->fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
         memcmp(head, magic, sizeof head) == 0;
}

static int pc_sniff(pc_file *f, pc_error *err) {
  int rc = pc_sniff_format(f, err);
  if (rc == PC_OK && !f->format && pc_legacy_torch(f))
    return pc_error_set(err, PC_EIO,
                        "%s: not a tensor dump (HDF5, safetensors, npy or npz): a torch.save "
                        "file of the legacy (non-zip) format (convert it: python3 -m "
                        "paritycheck.dump convert FILE OUT.h5)",
                        f->path);
  if (rc == PC_OK && !f->format)
    return pc_error_set(err, PC_EIO, "%s: not a tensor dump (HDF5, safetensors, npy or npz)",
                        f->path);
  return rc;
}

int pc_file_sniff(const char *path, bool *dump, pc_error *err) {
  struct stat st;
  pc_file f = {.path = (char *)path, .fd = -1};
  *dump = false;
  int rc = pc_check_regular(path, &st, err);
  if (rc == PC_OK) {
    f.size = (uint64_t)st.st_size;
    rc = pc_open_fd(&f, &st, err);
  }
  if (rc == PC_OK && (rc = pc_sniff_format(&f, err)) == PC_OK)
    *dump = f.format != NULL;
  if (f.fd >= 0)
    close(f.fd);
  return rc;
}

/* A dump whose writer failed part way says so in a file attribute `incomplete` (its value: why;
 * docs/formats.md): its missing tensors would read as drift of the model, so it is refused. */
static int pc_refuse_incomplete(const pc_file *f, pc_error *err) {
  for (size_t i = 0; i < f->nattrs; i++)
    if (strcmp(f->attrs[i].name, "incomplete") == 0)
      return pc_error_set(err, PC_EIO,
                          "%s: an incomplete dump (attribute incomplete: %s): the run that wrote "
                          "it failed part way; dump again",
                          f->path, f->attrs[i].value);
  return PC_OK;
}

int pc_file_open(pc_file **out, const char *path, pc_error *err) {
  return pc_file_open_limited(out, path, NULL, err);
}

int pc_file_open_limited(pc_file **out, const char *path, const pc_open_limits *lim,
                         pc_error *err) {
  struct stat st;
  *out = NULL;
  int rc = pc_check_regular(path, &st, err);
  if (rc < 0)
    return rc;
  pc_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = pc_strdup(path))) {
    free(f);
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", path);
  }
  f->size = (uint64_t)st.st_size;
  f->fd = -1;
  f->lim = lim ? *lim : (pc_open_limits){UINT64_MAX, NULL, NULL};
  if ((rc = pc_open_fd(f, &st, err)) < 0)
    goto fail;
  if ((rc = pc_sniff(f, err)) < 0 || (rc = f->format->open(f, err)) < 0 ||
      (rc = pc_file_sort(f, err)) < 0 ||
      (f->format->attributes && (rc = f->format->attributes(f, err)) < 0) ||
      (rc = pc_refuse_incomplete(f, err)) < 0)
    goto fail;
  *out = f;
  return PC_OK;
fail:
  pc_file_close(f);
  return rc;
}

void pc_file_close(pc_file *f) {
  if (!f)
    return;
  for (size_t i = 0; i < f->n; i++) {
    pc_spill_touch(&f->ds[i]);
    free(f->ds[i].reason);
    free(f->ds[i].written);
  }
  for (size_t i = 0; i < f->nattrs; i++) {
    free(f->attrs[i].name);
    free(f->attrs[i].value);
  }
  free(f->attrs);
  if (f->format)
    f->format->close(f);
  if (f->fd >= 0)
    close(f->fd);
  pc_spill_free(f->ds, f->ds_mapped);
  free(f->sorted);
  pc_arena_free(&f->names);
  free(f->path);
  free(f);
}

size_t pc_file_count(const pc_file *f) {
  return f->n;
}

const pc_dataset *pc_file_dataset(const pc_file *f, size_t i) {
  if (i >= f->n)
    return NULL;
  pc_spill_touch(&f->ds[i]);
  return &f->ds[i];
}

size_t pc_file_attr_count(const pc_file *f) {
  return f->nattrs;
}

const pc_attr *pc_file_attr(const pc_file *f, size_t i) {
  return i < f->nattrs ? &f->attrs[i] : NULL;
}

const char *pc_dataset_attr(pc_file *f, const pc_dataset *d, const char *name, char *buf,
                            size_t size) {
  static const char module_type[] = "module_type";
  if (!f || !d || !name || !buf || size == 0)
    return NULL;
  pc_spill_touch(d);
  if (strcmp(name, module_type) == 0 && d->module_type)
    return d->module_type;
  if (strcmp(name, module_type) != 0 && f->format->dataset_attribute &&
      f->format->dataset_attribute(f, d, name, buf, size))
    return buf;
  for (size_t i = 0; i < f->nattrs; i++)
    if (strcmp(f->attrs[i].name, name) == 0)
      return f->attrs[i].value;
  return NULL;
}

void pc_dataset_numbers(pc_file *f, const pc_dataset *d, pc_numbers_req *req, size_t n) {
  for (size_t i = 0; i < n; i++)
    req[i].got = -1;
  if (!f || !d || !f->format->dataset_numbers)
    return;
  pc_spill_touch(d);
  f->format->dataset_numbers(f, d, req, n);
}

const char *pc_file_path(const pc_file *f) {
  return f->path;
}

int pc_file_fd(const pc_file *f) {
  return f->fd;
}

const pc_dataset *pc_file_find(const pc_file *f, const char *path) {
  pc_file_entry key = {path, NULL};
  const pc_file_entry *hit = bsearch(&key, f->sorted, f->n, sizeof *f->sorted, pc_by_path);
  return hit ? hit->d : NULL;
}
