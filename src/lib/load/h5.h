/* The HDF5 format behind the reader interface (format.h), in four files: h5_file.c opens and
 * closes the file and reads blocks, h5_walk.c walks groups and classifies datasets,
 * h5_storage.c checks how a dataset is stored, and h5_error.c turns HDF5's errors into text.
 * The only files that call HDF5.
 *
 * HDF5 1.10 is not thread-safe: every function here must be called from one thread. */
#ifndef PC_H5_H
#define PC_H5_H

#include "format.h"

#include <hdf5.h>

/* Groups already walked, by object address: an open-addressing hash set, so that a file of many
 * groups is walked in linear time. HADDR_UNDEF marks a free slot. */
typedef struct pc_addr_set {
  haddr_t *slot;
  size_t cap, n; /* cap is 0 or a power of two */
} pc_addr_set;

/* How a numeric dataset is stored, noted once by the walk, so that reading a dataset that lies
 * as stored in one run of the file needs no HDF5 call at all (a dump of 20,000 small tensors
 * spent a quarter of its time opening each dataset again to ask). */
typedef struct pc_h5_store {
  bool direct;     /* contiguous, unfiltered, no external file, all written, inside the file and
                      the end HDF5 recorded, in the file HDF5 opened: pread at `offset` */
  uint64_t offset; /* absolute byte offset of the data, user block included */
  uint64_t *chunk; /* chunk extents, one per dimension; NULL when not chunked */
} pc_h5_store;

/* A pc_file's HDF5 state (f->impl). */
typedef struct pc_h5 {
  hid_t fid;
  bool same_fd;          /* f->fd is the very file HDF5 opened */
  uint64_t eoa;          /* HDF5's end of allocation (absolute, like H5Dget_offset); UINT64_MAX when
                            unknown. HDF5 reads no data past it: it returns zeros there */
  uint64_t userblock;    /* bytes before the superblock */
  pc_addr_set visited;   /* groups already walked */
  uint64_t chunk_visits; /* chunk index entries visited so far (h5_storage.c) */
  pc_h5_store *store;    /* by dataset index (f->ds); zero for datasets not described */
  size_t store_cap;
  size_t store_mapped; /* spill.h */
} pc_h5;

static inline pc_h5 *pc_h5_of(const pc_file *f) {
  return f->impl;
}

/** The current HDF5 error, as text for our messages (its deepest entry, which names the real
 * cause); clears the stack. */
const char *pc_h5_error(char *buf, size_t size);

/** For the walk: the store record of dataset d of f (zero until noted), the table grown to
 * hold it; NULL when out of memory. */
pc_h5_store *pc_h5_store_of(pc_file *f, const pc_dataset *d);

/** Walks the file from its root group into f's datasets. */
int pc_h5_walk(pc_file *f, pc_error *err);

/** format.h's `attributes`: the root group's scalar string, integer, float and boolean
 * attributes, in creation order where the file tracks it, else by name. */
int pc_h5_attributes(pc_file *f, pc_error *err);

/** format.h's `dataset_numbers`: dataset d's numeric attributes req[0 .. n), d opened once. */
void pc_h5_dataset_numbers(pc_file *f, const pc_dataset *d, pc_numbers_req *req, size_t n);

/** format.h's `dataset_attribute`: dataset d's scalar string, integer, float or boolean
 * attribute `name` as text. */
bool pc_h5_dataset_attribute(pc_file *f, const pc_dataset *d, const char *name, char *buf,
                             size_t size);

/** Checks whether numeric dataset d (open as dset, of file type `type`) can be read: when not,
 * d becomes an error entry saying why; when it can, notes how it is stored (pc_h5_store) and
 * sets d's fill value, sparse ranges and chunk_bytes. PC_ENOMEM. */
int pc_h5_describe_storage(pc_file *f, pc_dataset *d, hid_t dset, hid_t type);

#endif
