/* The npz format behind the reader interface (format.h, flat.h): a zip archive (read with
 * libzip) of .npy members, stored (np.savez) or deflated (np.savez_compressed). Member NAME.npy
 * is the dataset "/NAME" (a name that starts with "/" is kept as it is); other files are
 * skipped. A member is streamed through libzip, forward only: blocks come in increasing order,
 * and a block further on is reached by reading past what lies between. */
#include "npy.h"
#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memcmp, strlen */
#include <unistd.h>   /* pread, dup, close */
#include <zip.h>

/* Bytes after a member's data that are read to reach its end (pc_npz_check_end). */
enum { PC_NPZ_TAIL_MAX = 1 << 16 };

static zip_t *pc_npz_zip(const pc_file *f) {
  return pc_flat_of(f)->zip;
}

/* A local file header, or the end of central directory record of an empty archive. */
static bool pc_npz_sniff(const pc_file *f) {
  unsigned char head[4];
  return pread(f->fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
         (memcmp(head, "PK\3\4", 4) == 0 || memcmp(head, "PK\5\6", 4) == 0);
}

/* The archive, opened on a duplicate of f->fd (libzip owns and closes it): the file stat
 * checked. */
static int pc_npz_open_zip(pc_file *f, pc_error *err) {
  int zerr = 0;
  int fd = dup(f->fd);
  zip_t *z = fd < 0 ? NULL : zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    pc_error_set(err, PC_EIO, "%s: not a readable zip archive: %s", f->path,
                 fd < 0 ? "cannot duplicate the descriptor" : zip_error_strerror(&e));
    zip_error_fini(&e);
    if (fd >= 0)
      close(fd);
    return PC_EIO;
  }
  pc_flat_of(f)->zip = z;
  return PC_OK;
}

/* pc_npz_header's answer when memory ran out: the run's error, not the member's. */
static const char pc_npz_nomem[] = "out of memory";

/* Reads the member's npy header into h; NULL, or why not (pc_npz_nomem when memory ran out). */
static const char *pc_npz_header(zip_t *z, zip_uint64_t i, pc_npy_header *h, char *why,
                                 size_t size) {
  unsigned char prefix[PC_NPY_PREFIX];
  uint64_t total = 0;
  const char *problem = NULL;
  zip_file_t *zf = zip_fopen_index(z, i, 0);
  if (!zf) {
    snprintf(why, size, "cannot open the member: %s", zip_strerror(z));
    return why;
  }
  zip_int64_t got = zip_fread(zf, prefix, sizeof prefix);
  problem = got < 0 ? "cannot read the member" : pc_npy_prefix(prefix, (size_t)got, &total);
  unsigned char *b = problem ? NULL : malloc((size_t)total);
  if (!problem && !b)
    problem = pc_npz_nomem;
  if (!problem) {
    memcpy(b, prefix, (size_t)got);
    zip_int64_t more = total > (uint64_t)got ? zip_fread(zf, b + got, total - (uint64_t)got) : 0;
    problem = more < 0 || (uint64_t)(got + more) != total ? "npy header truncated"
                                                          : pc_npy_parse(b, total, h, why, size);
  }
  free(b);
  zip_fclose(zf);
  return problem;
}

static bool pc_npz_is_npy(const char *name) {
  size_t n = strlen(name);
  return n > 4 && strcmp(name + n - 4, ".npy") == 0;
}

/* One .npy member: a dataset, or an entry that says why it cannot be read. */
static int pc_npz_member(pc_file *f, zip_uint64_t i, const zip_stat_t *st, pc_error *err) {
  char why[256], text[320];
  pc_npy_header h;
  pc_dataset *d;
  pc_flat_array *a;
  char *path = pc_flat_path(st->name, 4);
  int rc = path ? pc_flat_add(f, &d, &a, path, err)
                : pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  free(path);
  if (rc < 0)
    return rc;
  a->member = (int64_t)i;
  const char *problem =
      (st->valid & ZIP_STAT_ENCRYPTION_METHOD) && st->encryption_method != ZIP_EM_NONE
          ? "member is encrypted"
          : pc_npz_header(pc_npz_zip(f), i, &h, why, sizeof why);
  if (problem == pc_npz_nomem) {
    rc = PC_ENOMEM;
  } else if (problem) {
    snprintf(text, sizeof text, "member %s: %s", st->name, problem);
    rc = pc_dataset_set_error(f, d, text);
  } else {
    a->offset = h.data_at;
    rc = pc_npy_describe(f, d, a, &h, st->size > h.data_at ? st->size - h.data_at : 0);
  }
  return rc < 0 ? pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path) : PC_OK;
}

/* Every file of the archive: .npy members are datasets, other files are skipped, folders are
 * not entries. An archive with no .npy member is not an npz. */
static int pc_npz_walk(pc_file *f, pc_error *err) {
  zip_t *z = pc_npz_zip(f);
  zip_int64_t n = zip_get_num_entries(z, 0);
  bool any = false;
  for (zip_int64_t i = 0; i < n; i++) {
    zip_stat_t st;
    int rc = PC_OK;
    if (zip_stat_index(z, (zip_uint64_t)i, 0, &st) < 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE))
      return pc_error_set(err, PC_EIO, "%s: zip entry %" PRId64 ": %s", f->path, (int64_t)i,
                          zip_strerror(z));
    size_t len = strlen(st.name);
    if (pc_npz_is_npy(st.name)) {
      any = true;
      rc = pc_npz_member(f, (zip_uint64_t)i, &st, err);
    } else if (len > 0 && st.name[len - 1] != '/') {
      pc_dataset *d;
      pc_flat_array *a;
      char *path = pc_flat_path(st.name, 0);
      rc = path ? pc_flat_add(f, &d, &a, path, err)
                : pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
      free(path);
      if (rc == PC_OK && pc_dataset_set_reason(d, PC_KIND_SKIPPED, "zip member is not .npy") < 0)
        rc = pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
    }
    if (rc < 0)
      return rc;
  }
  if (!any)
    return pc_error_set(err, PC_EIO,
                        "%s: not a tensor dump (HDF5, safetensors, npy or npz): a zip archive "
                        "without .npy members (a torch.save file? convert it: python3 -m "
                        "paritycheck.dump convert FILE OUT.h5)",
                        f->path);
  return PC_OK;
}

static int pc_npz_open(pc_file *f, pc_error *err) {
  int rc = pc_flat_init(f, err);
  if (rc == PC_OK)
    rc = pc_npz_open_zip(f, err);
  return rc == PC_OK ? pc_npz_walk(f, err) : rc;
}

static void pc_npz_close(pc_file *f) {
  pc_flat_file *s = f->impl;
  if (s && s->zip)
    zip_discard(s->zip);
  pc_flat_free(f);
}

static void pc_npz_close_dataset(pc_reader *r) {
  pc_flat_reader *s = r->impl;
  if (s && s->member)
    zip_fclose(s->member);
  pc_flat_close_dataset(r);
}

static int pc_npz_fail(pc_reader *r, const char *what, pc_error *err) {
  zip_file_t *zf = ((pc_flat_reader *)r->impl)->member;
  return pc_error_set(err, PC_EDATA, "%s: %s: %s: %s", r->f->path, r->ds->path, what,
                      zf ? zip_file_strerror(zf) : zip_strerror(pc_npz_zip(r->f)));
}

/* Reads exactly `bytes` of the member into dst, or past them when dst is NULL. */
static int pc_npz_pull(pc_reader *r, unsigned char *dst, uint64_t bytes, pc_error *err) {
  pc_flat_reader *s = r->impl;
  unsigned char scratch[1 << 14];
  while (bytes > 0) {
    uint64_t want = dst ? bytes : bytes < sizeof scratch ? bytes : sizeof scratch;
    zip_int64_t got = zip_fread(s->member, dst ? dst : scratch, want);
    if (got <= 0)
      return pc_npz_fail(r, got < 0 ? "cannot read the member" : "the member ends early", err);
    s->at += (uint64_t)got;
    bytes -= (uint64_t)got;
    if (dst)
      dst += got;
  }
  return PC_OK;
}

/* After the last element: reads on to the member's end, where libzip compares the CRC-32 of
 * what it inflated with the archive's (the only check that a deflate stream decoded to what was
 * written). Up to PC_NPZ_TAIL_MAX bytes after the data are read for it; a member with more is
 * not checked, rather than inflated on and on. */
static int pc_npz_check_end(pc_reader *r, pc_error *err) {
  pc_flat_reader *s = r->impl;
  unsigned char scratch[256];
  for (uint64_t tail = 0; tail <= PC_NPZ_TAIL_MAX; tail += sizeof scratch) {
    zip_int64_t got = zip_fread(s->member, scratch, sizeof scratch);
    if (got < 0)
      return pc_npz_fail(r, "cannot read the member", err);
    if (got == 0)
      return PC_OK;
    s->at += (uint64_t)got;
  }
  return PC_OK;
}

/* The fetch of flat.h: from the member's stream, opened on the first call. */
static int pc_npz_fetch(pc_reader *r, uint64_t from, void *dst, uint64_t bytes, pc_error *err) {
  pc_flat_reader *s = r->impl;
  const pc_flat_array *a = pc_flat_array_of(r);
  uint64_t at = a->offset + from;
  if (s->member && at < s->at) { /* never for pc_reader's blocks, which only go forward */
    zip_fclose(s->member);
    s->member = NULL;
  }
  if (!s->member) {
    s->member = zip_fopen_index(pc_npz_zip(r->f), (zip_uint64_t)a->member, 0);
    s->at = 0;
    if (!s->member)
      return pc_npz_fail(r, "cannot open the member", err);
  }
  int rc = pc_npz_pull(r, NULL, at - s->at, err);
  if (rc == PC_OK)
    rc = pc_npz_pull(r, dst, bytes, err);
  if (rc == PC_OK && from + bytes == r->ds->count * r->ds->elem_size)
    rc = pc_npz_check_end(r, err);
  return rc;
}

static int pc_npz_read(pc_reader *r, const pc_block *b, void *raw, pc_error *err) {
  return pc_flat_read(r, b, raw, pc_npz_fetch, err);
}

const pc_format pc_format_npz = {
    .name = "npz",
    .sniff = pc_npz_sniff,
    .open = pc_npz_open,
    .close = pc_npz_close,
    .open_dataset = pc_flat_open_dataset,
    .close_dataset = pc_npz_close_dataset,
    .chunk_extent = pc_flat_chunk_extent,
    .direct = pc_flat_direct,
    .read = pc_npz_read,
};
