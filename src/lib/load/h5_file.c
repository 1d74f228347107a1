/* The HDF5 format (h5.h): opens and closes the file, and reads a dataset's blocks as hyperslabs,
 * in the file's own type (no HDF5 conversion: we decode). */
#include "h5.h"
#include "pc_internal.h"

#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc, malloc, free */
#include <string.h>   /* memcmp */
#include <sys/stat.h> /* fstat */
#include <unistd.h>   /* pread */

/* The chunk cache of one open dataset: room for a row of chunks that blocks cross, bounded
 * so that memory stays small (pc_h5_open_dset). HDF5 keeps at most one chunk per slot. */
enum { PC_CHUNK_CACHE_BYTES = 8 << 20, PC_CHUNK_CACHE_SLOTS = 10007 };

/* The superblock signature lies at byte 0 or at 512, 1024, 2048, ... (after a user block). */
static const unsigned char pc_h5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

static bool pc_debug;

void pc_loader_set_debug(bool on) {
  pc_debug = on;
}

/* HDF5 prints its error stack from inside every failing call unless told not to. */
static void pc_h5_quiet(void) {
  if (pc_debug)
    H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)H5Eprint2, stderr);
  else
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static bool pc_h5_sniff(const pc_file *f) {
  unsigned char head[sizeof pc_h5_signature];
  for (uint64_t at = 0; at + sizeof head <= f->size; at = at ? 2 * at : 512)
    if (pread(f->fd, head, sizeof head, (off_t)at) == (ssize_t)sizeof head &&
        memcmp(head, pc_h5_signature, sizeof head) == 0)
      return true;
  return false;
}

/* HDF5's end of allocation, and whether HDF5 opened the file of f->fd: it opened the file by
 * its path again, so the sec2 driver's descriptor must be the same file, else no reader is
 * direct. */
static void pc_h5_read_eoa(pc_file *f, pc_h5 *h) {
  struct stat ours, theirs;
  int *h5fd = NULL;
  haddr_t eoa = HADDR_UNDEF;
  hsize_t userblock = 0;
  hid_t fcpl = H5Fget_create_plist(h->fid);
  if (fcpl >= 0) {
    H5Pget_userblock(fcpl, &userblock);
    H5Pclose(fcpl);
  }
  h->userblock = userblock;
  h->eoa = H5Fget_eoa(h->fid, &eoa) >= 0 && eoa != HADDR_UNDEF ? (uint64_t)eoa : UINT64_MAX;
  h->same_fd = H5Fget_vfd_handle(h->fid, H5P_DEFAULT, (void **)&h5fd) >= 0 && h5fd &&
               fstat(*h5fd, &theirs) == 0 && fstat(f->fd, &ours) == 0 &&
               pc_same_file(&ours, &theirs);
  H5Eclear2(H5E_DEFAULT);
}

/* The metadata cache holds the object headers read so far, and its size counts their bytes on
 * disk, while their decoded messages take several times that: over 20,000 datasets, peak RSS
 * was 129 MiB at its default (up to 32 MiB), 101 MiB at 1 MiB, 76 MiB at 64 KiB. The walk
 * reads each header once, so a small cache costs no work there (the same instruction count at
 * 2,000 datasets); a dataset of 16,384 chunks, whose index nodes are evicted more often, took
 * 1.5 % more instructions at 64 KiB than at 1 MiB (docs/performance.md). */
enum { PC_H5_MDC_BYTES = 1 << 16 };

static hid_t pc_h5_fapl(void) {
  H5AC_cache_config_t c;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  c.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  if (fapl < 0 || H5Pget_mdc_config(fapl, &c) < 0)
    return fapl;
  c.set_initial_size = true;
  c.initial_size = c.min_size = c.max_size = PC_H5_MDC_BYTES;
  c.incr_mode = H5C_incr__off;
  c.flash_incr_mode = H5C_flash_incr__off;
  c.decr_mode = H5C_decr__off;
  H5Pset_mdc_config(fapl, &c);
  H5Eclear2(H5E_DEFAULT);
  return fapl;
}

static int pc_h5_open(pc_file *f, pc_error *err) {
  char h5err[256];
  pc_h5_quiet();
  pc_h5 *h = calloc(1, sizeof *h);
  if (!h)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  hid_t fapl = pc_h5_fapl();
  h->fid = H5Fopen(f->path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
  f->impl = h;
  if (h->fid < 0) /* HDF5's message first: H5Pclose clears the error stack */
    pc_error_set(err, PC_EIO, "%s: cannot open: %s", f->path, pc_h5_error(h5err, sizeof h5err));
  if (fapl >= 0)
    H5Pclose(fapl);
  if (h->fid < 0)
    return PC_EIO;
  pc_h5_read_eoa(f, h);
  return pc_h5_walk(f, err);
}

static void pc_h5_close(pc_file *f) {
  pc_h5 *h = f->impl;
  if (!h)
    return;
  if (h->fid >= 0)
    H5Fclose(h->fid);
  for (size_t i = 0; i < h->store_cap; i++) {
    pc_spill_touch(&h->store[i]);
    free(h->store[i].chunk);
  }
  pc_spill_free(h->store, h->store_mapped);
  free(h->visited.slot);
  free(h);
  f->impl = NULL;
}

/* --- block reads ------------------------------------------------------------------------ */

/* A pc_reader's HDF5 state (r->impl). The dataset is opened on the first read: a direct
 * reader's blocks are read by pread from its spans, and never need it. */
typedef struct pc_h5_dataset {
  const pc_h5_store *store;
  hid_t dset, fspace, memtype;
} pc_h5_dataset;

/* The chunk cache counts against the memory limit: a sixteenth of it, at most
 * PC_CHUNK_CACHE_BYTES. It holds at least one filtered chunk, though: a smaller cache would
 * decompress a big chunk again for every block that touches it. chunk_bytes was checked against
 * pc_options.max_memory before any read. */
static hid_t pc_h5_open_dset(const pc_file *f, const pc_dataset *ds) {
  uint64_t share = f->lim.max_memory / 16;
  size_t cache = share < PC_CHUNK_CACHE_BYTES ? (size_t)share : PC_CHUNK_CACHE_BYTES;
  if (ds->chunk_bytes > cache && ds->chunk_bytes <= SIZE_MAX)
    cache = (size_t)ds->chunk_bytes;
  hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  if (dapl >= 0)
    H5Pset_chunk_cache(dapl, PC_CHUNK_CACHE_SLOTS, cache, 1.0);
  hid_t dset = H5Dopen2(pc_h5_of(f)->fid, ds->path, dapl >= 0 ? dapl : H5P_DEFAULT);
  if (dapl >= 0)
    H5Pclose(dapl);
  return dset;
}

/* Opens the dataset for H5Dread, once. */
static int pc_h5_ready(pc_reader *r, pc_h5_dataset *h, pc_error *err) {
  char h5err[256];
  if (h->memtype >= 0)
    return PC_OK;
  if (h->dset < 0)
    h->dset = pc_h5_open_dset(r->f, r->ds);
  if (h->dset >= 0 && h->fspace < 0)
    h->fspace = H5Dget_space(h->dset);
  if (h->dset >= 0)
    h->memtype = H5Dget_type(h->dset);
  if (h->memtype < 0 || h->fspace < 0)
    return pc_error_set(err, PC_EDATA, "%s: %s: %s", r->f->path, r->ds->path,
                        pc_h5_error(h5err, sizeof h5err));
  return PC_OK;
}

static int pc_h5_open_dataset(pc_reader *r, pc_error *err) {
  pc_h5_dataset *h = malloc(sizeof *h);
  if (!h)
    return pc_error_set(err, PC_ENOMEM, "%s: %s: out of memory", r->f->path, r->ds->path);
  r->impl = h;
  const pc_h5 *fh = pc_h5_of(r->f);
  size_t i = (size_t)(r->ds - r->f->ds); /* the walk noted what it could, by index */
  h->store = i < fh->store_cap ? &fh->store[i] : NULL;
  if (h->store)
    pc_spill_touch(h->store);
  h->dset = h->fspace = h->memtype = -1;
  return h->store && h->store->direct ? PC_OK : pc_h5_ready(r, h, err);
}

static void pc_h5_close_dataset(pc_reader *r) {
  pc_h5_dataset *h = r->impl;
  if (!h)
    return;
  if (h->memtype >= 0)
    H5Tclose(h->memtype);
  if (h->fspace >= 0)
    H5Sclose(h->fspace);
  if (h->dset >= 0)
    H5Dclose(h->dset);
  free(h);
  r->impl = NULL;
}

static uint64_t pc_h5_chunk_extent(const pc_reader *r, int k) {
  const pc_h5_dataset *h = r->impl;
  return h->store && h->store->chunk ? h->store->chunk[k] : 0;
}

static bool pc_h5_direct(const pc_reader *r, uint64_t *offset) {
  const pc_h5_dataset *h = r->impl;
  bool direct = h->store && h->store->direct;
  *offset = direct ? h->store->offset : 0;
  return direct;
}

/* HDF5 1.10 maps every chunk that one H5Dread touches before it reads any (H5D__chunk_io_init:
 * a record and a file and a memory dataspace per chunk, about 6.4 KiB together, measured, and
 * kept on HDF5's free lists afterwards), so one block of 262,144 one-element chunks took 1.6 GiB
 * whatever --max-memory said. A block that meets more chunks than this is read in tiles of at
 * most this many (about 6.5 MiB of map); any other block is one H5Dread, as before. */
#define PC_H5_READ_CHUNKS ((uint64_t)256)

/* A box of the dataset: start[i] .. start[i] + count[i] - 1 in each dimension i. */
typedef struct pc_h5_box {
  hsize_t start[PC_MAX_RANK], count[PC_MAX_RANK];
} pc_h5_box;

/* Chunks of extent c that the indices start .. start + count - 1 (count >= 1) meet; an extent
 * of 0, which HDF5 refuses to write, counts as one chunk. */
static uint64_t pc_h5_span(uint64_t start, uint64_t count, uint64_t c) {
  return c ? (start + count - 1) / c - start / c + 1 : 1;
}

/* Chunks that box x meets, saturating at PC_H5_READ_CHUNKS + 1. */
static uint64_t pc_h5_box_chunks(const pc_h5_box *x, const uint64_t *chunk, int rank) {
  uint64_t n = 1;
  for (int i = 0; i < rank; i++) {
    uint64_t span = pc_h5_span(x->start[i], x->count[i], chunk[i]);
    if (span > PC_H5_READ_CHUNKS / n)
      return PC_H5_READ_CHUNKS + 1;
    n *= span;
  }
  return n;
}

/* One H5Dread of the file selection in h->fspace into raw through memory space mspace (made by
 * the caller, closed here). PC_EDATA with HDF5's message. */
static int pc_h5_read_into(pc_reader *r, hid_t mspace, void *raw, pc_error *err) {
  char h5err[256];
  const pc_h5_dataset *h = r->impl;
  herr_t st = mspace < 0 ? -1 : H5Dread(h->dset, h->memtype, mspace, h->fspace, H5P_DEFAULT, raw);
  /* Take HDF5's message before H5Sclose, which clears the error stack. */
  if (st < 0)
    pc_h5_error(h5err, sizeof h5err);
  if (mspace >= 0)
    H5Sclose(mspace);
  if (st < 0)
    return pc_error_set(err, PC_EDATA, "%s: %s: cannot read: %s", r->f->path, r->ds->path, h5err);
  return PC_OK;
}

/* Block b (box x) in one H5Dread, its elements row-major into raw. */
static int pc_h5_read_whole(pc_reader *r, const pc_block *b, const pc_h5_box *x, void *raw,
                            pc_error *err) {
  const pc_h5_dataset *h = r->impl;
  hsize_t n = b->n;
  if (b->whole)
    H5Sselect_all(h->fspace);
  else
    H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, x->start, NULL, x->count, NULL);
  return pc_h5_read_into(r, H5Screate_simple(1, &n, NULL), raw, err);
}

/* Chunk rows per tile along each dimension: from the last dimension back, as many of the
 * chunks that box x meets there as still fit in PC_H5_READ_CHUNKS, so that a tile is a run of
 * whole rows of chunks where it can be, and every chunk lies in one tile. */
static void pc_h5_tile_shape(const pc_h5_box *x, const uint64_t *chunk, int rank, uint64_t *take) {
  uint64_t left = PC_H5_READ_CHUNKS;
  for (int i = rank - 1; i >= 0; i--) {
    uint64_t span = pc_h5_span(x->start[i], x->count[i], chunk[i]);
    take[i] = span < left ? span : left;
    left /= take[i];
  }
}

/* The tile of box x that starts at `at` in every dimension: take[i] chunk rows along i, cut
 * at the box's end. */
static void pc_h5_tile(const pc_h5_box *x, const uint64_t *chunk, const uint64_t *take,
                       const hsize_t *at, int rank, pc_h5_box *y) {
  for (int i = 0; i < rank; i++) {
    hsize_t end = x->start[i] + x->count[i];
    hsize_t stop = chunk[i] ? (at[i] / chunk[i] + take[i]) * chunk[i] : end;
    y->start[i] = at[i];
    y->count[i] = (stop < end ? stop : end) - at[i];
  }
}

/* Box x in tiles of at most PC_H5_READ_CHUNKS chunks, each read into its place in raw (x's
 * elements row-major) through a memory selection of the tile's shape. */
static int pc_h5_read_tiled(pc_reader *r, const pc_h5_box *x, void *raw, pc_error *err) {
  const pc_h5_dataset *h = r->impl;
  const uint64_t *chunk = h->store->chunk;
  int rank = r->ds->rank;
  uint64_t take[PC_MAX_RANK];
  hsize_t at[PC_MAX_RANK], in_box[PC_MAX_RANK];
  pc_h5_tile_shape(x, chunk, rank, take);
  memcpy(at, x->start, sizeof at);
  for (int k = 0; k >= 0;) {
    pc_h5_box y;
    pc_h5_tile(x, chunk, take, at, rank, &y);
    for (int i = 0; i < rank; i++)
      in_box[i] = at[i] - x->start[i];
    H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, y.start, NULL, y.count, NULL);
    hid_t mspace = H5Screate_simple(rank, x->count, NULL);
    if (mspace >= 0)
      H5Sselect_hyperslab(mspace, H5S_SELECT_SET, in_box, NULL, y.count, NULL);
    int rc = pc_h5_read_into(r, mspace, raw, err);
    if (rc < 0)
      return rc;
    /* The next tile, like an odometer: the last dimension first. */
    for (k = rank - 1; k >= 0; k--) {
      at[k] += y.count[k];
      if (at[k] < x->start[k] + x->count[k])
        break;
      at[k] = x->start[k];
    }
  }
  return PC_OK;
}

static int pc_h5_read(pc_reader *r, const pc_block *b, void *raw, pc_error *err) {
  pc_h5_dataset *h = r->impl;
  int rc = pc_h5_ready(r, h, err);
  if (rc < 0)
    return rc;
  pc_h5_box x;
  const pc_dataset *d = r->ds;
  for (int i = 0; i < d->rank; i++) {
    x.start[i] = b->whole ? 0 : b->start[i];
    x.count[i] = b->whole ? d->dims[i] : b->count[i];
  }
  const uint64_t *chunk = h->store ? h->store->chunk : NULL;
  if (!chunk || b->n == 0 || pc_h5_box_chunks(&x, chunk, d->rank) <= PC_H5_READ_CHUNKS)
    return pc_h5_read_whole(r, b, &x, raw, err);
  return pc_h5_read_tiled(r, &x, raw, err);
}

const pc_format pc_format_hdf5 = {
    .name = "HDF5",
    .sniff = pc_h5_sniff,
    .open = pc_h5_open,
    .close = pc_h5_close,
    .open_dataset = pc_h5_open_dataset,
    .close_dataset = pc_h5_close_dataset,
    .chunk_extent = pc_h5_chunk_extent,
    .direct = pc_h5_direct,
    .read = pc_h5_read,
    .attributes = pc_h5_attributes,
    .dataset_attribute = pc_h5_dataset_attribute,
    .dataset_numbers = pc_h5_dataset_numbers,
};
