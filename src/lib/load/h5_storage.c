/* How an HDF5 dataset is stored (h5.h): whether its values can be read at all (external or
 * virtual storage, filters this HDF5 lacks, unwritten storage without a fill value, data past
 * the end of the file), and which parts were written. */
#include "h5.h"
#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* realloc, qsort, free */
#include <string.h>   /* memcpy */

/* Listing a dataset's written chunks costs HDF5 1.10 a walk of its chunk index per chunk
 * (H5Dget_chunk_info(i) visits entries 0 .. i), so n chunks cost n(n + 1)/2 visits. A file
 * spends at most this many; a dataset that would need more is read whole. */
#define PC_CHUNK_VISITS_MAX ((uint64_t)1 << 22)

/* A chunk narrower than the dataset covers many separate row-major runs: at most this many are
 * listed for one chunk; beyond that, runs are widened to whole rows of an outer dimension (more
 * is read, nothing is judged differently). */
enum { PC_CHUNK_RUNS_MAX = 64 };

/* Values that live outside this file are not read: another file named by an untrusted input
 * may be a FIFO that blocks forever, or missing, and HDF5 then returns fill values as data. */
static const char *pc_layout_problem(hid_t dcpl, char *why, size_t size) {
  char name[256] = "";
  off_t offset;
  hsize_t bytes;
  if (H5Pget_layout(dcpl) == H5D_VIRTUAL)
    return "virtual dataset: its values come from other datasets, which are not read";
  if (H5Pget_external_count(dcpl) <= 0)
    return NULL;
  H5Pget_external(dcpl, 0, sizeof name, name, &offset, &bytes);
  snprintf(why, size, "raw data stored in external file '%s', which is not read", name);
  return why;
}

/* A filter this HDF5 cannot apply makes the dataset an error, even an optional one (which a
 * writer may have skipped on some chunks: telling which would take every chunk's filter mask).
 * Records chunk_bytes when the chunks are filtered: HDF5 decompresses a whole chunk to read any
 * part of it. */
static const char *pc_filter_problem(pc_dataset *d, hid_t dcpl, char *why, size_t size) {
  int nf = H5Pget_nfilters(dcpl);
  for (int i = 0; i < nf; i++) {
    unsigned flags = 0, cfg;
    size_t nelem = 0;
    char name[128] = "";
    H5Z_filter_t id =
        H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelem, NULL, sizeof name, name, &cfg);
    if (id >= 0 && H5Zfilter_avail(id) <= 0) {
      snprintf(why, size, "filter '%s' (id %d) is not available", name[0] ? name : "?", (int)id);
      return why;
    }
  }
  hsize_t cdims[H5S_MAX_RANK];
  if (nf <= 0 || H5Pget_layout(dcpl) != H5D_CHUNKED || H5Pget_chunk(dcpl, d->rank, cdims) < 0)
    return NULL;
  d->chunk_bytes = d->elem_size;
  for (int i = 0; i < d->rank; i++)
    d->chunk_bytes =
        cdims[i] && d->chunk_bytes > UINT64_MAX / cdims[i] ? UINT64_MAX : d->chunk_bytes * cdims[i];
  return NULL;
}

/* A growing list of element ranges. */
typedef struct pc_ranges {
  pc_range *r;
  size_t n, cap;
} pc_ranges;

static bool pc_ranges_push(pc_ranges *l, uint64_t begin, uint64_t end) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    pc_range *r = realloc(l->r, cap * sizeof *r);
    if (!r)
      return false;
    l->r = r;
    l->cap = cap;
  }
  l->r[l->n++] = (pc_range){begin, end};
  return true;
}

static int pc_by_begin(const void *x, const void *y) {
  uint64_t a = ((const pc_range *)x)->begin, b = ((const pc_range *)y)->begin;
  return (a > b) - (a < b);
}

/* Sorts l and merges overlapping and adjacent ranges. */
static void pc_ranges_merge(pc_ranges *l) {
  if (l->n == 0)
    return;
  qsort(l->r, l->n, sizeof *l->r, pc_by_begin);
  size_t k = 0;
  for (size_t i = 1; i < l->n; i++) {
    if (l->r[i].begin <= l->r[k].end)
      l->r[k].end = l->r[i].end > l->r[k].end ? l->r[i].end : l->r[k].end;
    else
      l->r[++k] = l->r[i];
  }
  l->n = k + 1;
}

/* Frees the room l does not use: a list lives as long as its file, and a file may have many. */
static void pc_ranges_fit(pc_ranges *l) {
  pc_range *r = l->n ? realloc(l->r, l->n * sizeof *r) : NULL;
  if (!l->n)
    free(l->r);
  if (r || !l->n) {
    l->r = r;
    l->cap = l->n;
  }
}

/* The box of a chunk inside the dataset: lo[i] <= index < hi[i] in dimension i. Returns the
 * deepest dimension that the box does not span whole (-1: it spans the dataset), or -2 when
 * the chunk lies past the dataset's extent (then none of it is visible). */
static int pc_chunk_box(const pc_dataset *d, const hsize_t *at, const hsize_t *c, uint64_t *lo,
                        uint64_t *hi) {
  int deepest = -1;
  for (int i = d->rank - 1; i >= 0; i--) {
    if (at[i] >= d->dims[i])
      return -2;
    lo[i] = at[i];
    hi[i] = c[i] < d->dims[i] - at[i] ? at[i] + c[i] : d->dims[i];
    if (deepest < 0 && (lo[i] != 0 || hi[i] != d->dims[i]))
      deepest = i;
  }
  return deepest;
}

/* Appends the row-major runs that cover the chunk at `at` (its first element's coordinates) of
 * extent c: one per index tuple of dimensions 0 .. j - 1 of its box, each spanning the box in
 * dimension j and everything after it. j is the deepest dimension the box does not span whole,
 * made shallower until the tuples number at most PC_CHUNK_RUNS_MAX. false: out of memory. */
static bool pc_chunk_runs(const pc_dataset *d, const hsize_t *at, const hsize_t *c,
                          pc_ranges *out) {
  uint64_t lo[PC_MAX_RANK], hi[PC_MAX_RANK], idx[PC_MAX_RANK], stride[PC_MAX_RANK];
  int deepest = pc_chunk_box(d, at, c, lo, hi);
  if (deepest < 0)
    return deepest == -2 || pc_ranges_push(out, 0, d->count);
  stride[d->rank - 1] = 1;
  for (int i = d->rank - 1; i > 0; i--)
    stride[i - 1] = stride[i] * d->dims[i];
  uint64_t tuples = 1;
  int j = 0;
  for (; j < deepest && hi[j] - lo[j] <= PC_CHUNK_RUNS_MAX / tuples; j++)
    tuples *= hi[j] - lo[j];
  memcpy(idx, lo, sizeof idx);
  for (uint64_t k = 0; k < tuples; k++) {
    uint64_t base = 0;
    for (int i = 0; i < j; i++)
      base += idx[i] * stride[i];
    if (!pc_ranges_push(out, base + lo[j] * stride[j], base + hi[j] * stride[j]))
      return false;
    for (int i = j - 1; i >= 0 && ++idx[i] == hi[i]; i--) /* the next tuple, like an odometer */
      idx[i] = lo[i];
  }
  return true;
}

/* The written ranges of a chunked dataset, from its chunk index. false when HDF5 fails, memory
 * runs out or the listing would take more of the file's budget (PC_CHUNK_VISITS_MAX) than is
 * left: the dataset is then read whole. */
static bool pc_list_chunks(pc_file *f, const pc_dataset *d, hid_t dset, hid_t dcpl,
                           pc_ranges *out) {
  hsize_t c[H5S_MAX_RANK], at[H5S_MAX_RANK], n = 0, size;
  unsigned mask;
  haddr_t addr;
  hid_t space = H5Dget_space(dset);
  bool ok = space >= 0 && H5Pget_chunk(dcpl, d->rank, c) == d->rank &&
            H5Dget_num_chunks(dset, space, &n) >= 0 && n <= PC_CHUNK_VISITS_MAX &&
            n * (n + 1) / 2 <= PC_CHUNK_VISITS_MAX - pc_h5_of(f)->chunk_visits;
  if (ok)
    pc_h5_of(f)->chunk_visits += n * (n + 1) / 2;
  for (hsize_t i = 0; ok && i < n; i++)
    ok = H5Dget_chunk_info(dset, space, i, at, &mask, &addr, &size) >= 0 &&
         pc_chunk_runs(d, at, c, out);
  if (space >= 0)
    H5Sclose(space);
  return ok;
}

/* A chunked dataset with some chunks written: sparse, with their ranges, when they can be
 * listed; else it stays a dataset that is read whole. */
static void pc_find_written(pc_file *f, pc_dataset *d, hid_t dset, hid_t dcpl) {
  pc_ranges l = {NULL, 0, 0};
  if (H5Pget_layout(dcpl) != H5D_CHUNKED || !pc_list_chunks(f, d, dset, dcpl, &l)) {
    free(l.r);
    return;
  }
  pc_ranges_merge(&l);
  pc_ranges_fit(&l);
  d->written = l.r;
  d->nwritten = l.n;
  d->sparse = true;
}

/* Storage that was never (or only partly) written reads as the fill value; without a fill
 * value HDF5 leaves the reader's buffer as it was, so those values would be garbage. A dataset
 * never written at all is all_fill: compare can judge it from its fill value alone; one partly
 * written is sparse where its written chunks can be listed. */
static const char *pc_fill_problem(pc_file *f, pc_dataset *d, hid_t dset, hid_t dcpl, hid_t type) {
  H5D_space_status_t status;
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  H5D_fill_time_t when = H5D_FILL_TIME_NEVER;
  if (d->count == 0 || H5Pget_layout(dcpl) == H5D_COMPACT)
    return NULL;
  if (H5Dget_space_status(dset, &status) < 0)
    return "cannot tell whether its storage was written";
  if (status == H5D_SPACE_STATUS_ALLOCATED)
    return NULL;
  H5Pfill_value_defined(dcpl, &defined);
  H5Pget_fill_time(dcpl, &when);
  if (defined == H5D_FILL_VALUE_UNDEFINED || when == H5D_FILL_TIME_NEVER)
    return "part of it was never written and it has no fill value: those values are undefined";
  bool have_fill = d->elem_size <= sizeof d->fill && H5Pget_fill_value(dcpl, type, d->fill) >= 0;
  if (status != H5D_SPACE_STATUS_NOT_ALLOCATED) {
    if (have_fill)
      pc_find_written(f, d, dset, dcpl);
    return NULL;
  }
  if (!have_fill)
    return "cannot read its fill value";
  d->all_fill = d->sparse = true;
  return NULL;
}

/* A declared size of 2^64 bytes or more: no storage can hold it. */
static const char *pc_size_problem(const pc_dataset *d, char *why, size_t size) {
  if (d->count <= UINT64_MAX / d->elem_size)
    return NULL;
  snprintf(why, size, "declared size of %" PRIu64 " elements of %zu bytes exceeds 2^64 bytes",
           d->count, d->elem_size);
  return why;
}

/* Contiguous data at `at` (H5Dget_offset: user block included) must lie inside the file: a
 * size the file cannot hold means a truncated or corrupt file, said before any read. */
static const char *pc_extent_problem(const pc_file *f, const pc_dataset *d, haddr_t at, char *why,
                                     size_t size) {
  const char *problem = pc_size_problem(d, why, size);
  if (problem)
    return problem;
  const pc_h5 *h = pc_h5_of(f);
  uint64_t bytes = d->count * d->elem_size;
  if (at > f->size || bytes > f->size - at) {
    snprintf(why, size,
             "declares %" PRIu64 " bytes of data at byte %" PRIu64
             ", past the end of the file (%" PRIu64 " bytes)",
             bytes, (uint64_t)at, f->size);
    return why;
  }
  /* Past the end HDF5 recorded, HDF5 would read zeros. The user block is allowed for, in case
   * an HDF5 version counts the end from the superblock: that reads as a shorter file. */
  uint64_t end = h->eoa > UINT64_MAX - h->userblock ? UINT64_MAX : h->eoa + h->userblock;
  if (at + bytes <= end)
    return NULL;
  snprintf(why, size,
           "declares %" PRIu64 " bytes of data at byte %" PRIu64
           ", past the end of the file that HDF5 recorded (byte %" PRIu64 ")",
           bytes, (uint64_t)at, h->eoa);
  return why;
}

pc_h5_store *pc_h5_store_of(pc_file *f, const pc_dataset *d) {
  pc_h5 *h = pc_h5_of(f);
  size_t i = (size_t)(d - f->ds);
  if (i >= h->store_cap) {
    size_t cap = h->store_cap ? 2 * h->store_cap : 64;
    while (cap <= i)
      cap *= 2;
    void *grown = h->store;
    if (pc_spill_resize(&grown, &h->store_mapped, h->store_cap * sizeof *h->store,
                        cap * sizeof *h->store, PC_SPILL_MIN) != 0)
      return NULL;
    h->store = grown;
    memset(h->store + h->store_cap, 0, (cap - h->store_cap) * sizeof *h->store);
    h->store_cap = cap;
  }
  pc_spill_touch(&h->store[i]);
  return &h->store[i];
}

/* Contiguous storage at `at` (pc_h5_describe_contiguous), all of it written, lying inside the
 * file and the end HDF5 recorded (where HDF5 itself stops reading), in the very file HDF5
 * opened: then a block's stored bytes are the file's bytes from offset + first element *
 * elem_size, the very bytes H5Dread copies (the memory type is the file type: no conversion). */
static bool pc_h5_is_direct(const pc_file *f, const pc_dataset *d, hid_t dset, haddr_t at) {
  const pc_h5 *h = pc_h5_of(f);
  if (d->count == 0 || !h->same_fd)
    return false;
  uint64_t bytes = d->count * d->elem_size;
  uint64_t end = h->eoa < f->size ? h->eoa : f->size;
  return H5Dget_storage_size(dset) == bytes && at <= end && bytes <= end - at;
}

/* Notes a chunked dataset's chunk extents (pc_h5_store), from its creation properties.
 * PC_ENOMEM. */
static int pc_h5_note_chunks(pc_file *f, const pc_dataset *d, hid_t dcpl) {
  hsize_t c[H5S_MAX_RANK];
  if (d->rank == 0 || H5Pget_layout(dcpl) != H5D_CHUNKED ||
      H5Pget_chunk(dcpl, d->rank, c) != d->rank)
    return PC_OK;
  pc_h5_store *s = pc_h5_store_of(f, d);
  if (!s)
    return PC_ENOMEM;
  s->chunk = malloc((size_t)d->rank * sizeof *s->chunk);
  if (!s->chunk)
    return PC_ENOMEM;
  for (int i = 0; i < d->rank; i++)
    s->chunk[i] = c[i];
  return PC_OK;
}

/* A dataset that H5Dget_offset places at `at` (not HADDR_UNDEF): HDF5 1.10 gives an address
 * only for contiguous storage that is allocated in this very file, never for chunked, compact,
 * virtual or external storage nor for storage not yet allocated (each checked on 1.10.8; the
 * tests hold compact storage, tests/cli/test_cli_reads.py, and external and virtual storage, the
 * hostile corpus). Such a dataset has none of the problems read from the creation properties: no
 * external or virtual data, no filters (HDF5 filters chunked data only), no unwritten part.
 * So its creation properties, the dearest part of walking many small datasets
 * (docs/performance.md), are not read: only where its data lies. */
static int pc_h5_describe_contiguous(pc_file *f, pc_dataset *d, hid_t dset, haddr_t at) {
  char why[PC_ERROR_MESSAGE_MAX];
  const char *problem = pc_extent_problem(f, d, at, why, sizeof why);
  if (problem)
    return pc_dataset_set_error(f, d, problem);
  pc_h5_store *s = pc_h5_store_of(f, d);
  if (!s)
    return PC_ENOMEM;
  s->direct = pc_h5_is_direct(f, d, dset, at);
  s->offset = s->direct ? (uint64_t)at : 0;
  H5Eclear2(H5E_DEFAULT);
  return PC_OK;
}

int pc_h5_describe_storage(pc_file *f, pc_dataset *d, hid_t dset, hid_t type) {
  char why[PC_ERROR_MESSAGE_MAX];
  haddr_t at = H5Dget_offset(dset);
  H5Eclear2(H5E_DEFAULT);
  if (at != HADDR_UNDEF)
    return pc_h5_describe_contiguous(f, d, dset, at);
  hid_t dcpl = H5Dget_create_plist(dset);
  if (dcpl < 0) {
    H5Eclear2(H5E_DEFAULT);
    return pc_dataset_set_error(f, d, "cannot read its creation properties");
  }
  const char *problem = pc_layout_problem(dcpl, why, sizeof why);
  if (!problem)
    problem = pc_filter_problem(d, dcpl, why, sizeof why);
  if (!problem)
    problem = pc_fill_problem(f, d, dset, dcpl, type);
  if (!problem)
    problem = pc_size_problem(d, why, sizeof why);
  int rc = problem ? pc_dataset_set_error(f, d, problem) : pc_h5_note_chunks(f, d, dcpl);
  H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  return rc;
}
