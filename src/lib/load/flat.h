/* The formats whose arrays are flat runs of stored bytes, each dataset one run (safetensors,
 * npy, npz): what they share behind the reader interface (format.h). A run is read by a format's
 * `fetch` (pread from f->fd, or a zip member's stream, which only goes forward); an array in
 * Fortran order is fetched whole once and its blocks are gathered from it in row-major order, so
 * that the comparator sees every format in the row-major order of the logical shape.
 * Internal to src/lib/load. */
#ifndef PC_FLAT_H
#define PC_FLAT_H

#include "format.h"

/* Where one dataset's stored bytes are; f->impl's `arrays` has one per dataset, same index. */
typedef struct pc_flat_array {
  uint64_t offset; /* the run's first byte: in the file (pread), or in the zip member */
  bool in_file;    /* the run lies in f->fd at `offset`, as stored */
  bool fortran;    /* column-major: the first index varies fastest */
  int64_t member;  /* npz: the zip entry's index; -1 otherwise */
} pc_flat_array;

/* A flat format's file state (f->impl). */
typedef struct pc_flat_file {
  pc_flat_array *arrays;
  size_t cap;
  void *zip; /* npz: the open archive (zip_t *) */
} pc_flat_file;

/* A flat format's reader state (r->impl). */
typedef struct pc_flat_reader {
  unsigned char *whole; /* Fortran order: the whole run, fetched on the first read */
  void *member;         /* npz: the member being streamed (zip_file_t *) */
  uint64_t at;          /* npz: bytes of the member consumed so far */
} pc_flat_reader;

/* Reads `bytes` bytes of r's run from byte `from` of it into dst; `from` never decreases from
 * one call to the next for one reader. PC_EDATA naming the file and dataset on failure. */
typedef int (*pc_flat_fetch)(pc_reader *r, uint64_t from, void *dst, uint64_t bytes, pc_error *err);

static inline pc_flat_file *pc_flat_of(const pc_file *f) {
  return f->impl;
}

static inline pc_flat_array *pc_flat_array_of(const pc_reader *r) {
  return &pc_flat_of(r->f)->arrays[r->ds - r->f->ds];
}

/** The dataset path of a tensor or member name without its last `drop` bytes (".npy"),
 * malloc'ed: "/" + name, or name when it starts with "/" (docs/formats.md, "Names"). */
char *pc_flat_path(const char *name, size_t drop);

/** Makes f->impl a pc_flat_file; PC_ENOMEM naming the file. */
int pc_flat_init(pc_file *f, pc_error *err);

/** Frees f->impl (the zip archive is the npz format's to close first). */
void pc_flat_free(pc_file *f);

/** pc_file_add, and the dataset's pc_flat_array (zeroed, member -1) in *a, valid until the next
 * pc_flat_add. */
int pc_flat_add(pc_file *f, pc_dataset **d, pc_flat_array **a, const char *path, pc_error *err);

/** Sets d's shape (rank <= PC_MAX_RANK, checked by the caller) and count; PC_EDATA when the
 * count or its bytes (count * d->elem_size, elem_size set) exceed 2^64 - 1; PC_ENOMEM. */
int pc_flat_shape(pc_file *f, pc_dataset *d, int rank, const uint64_t *dims);

/** A Fortran-order array is read whole: d->chunk_bytes says so, for the memory limit. */
void pc_flat_set_fortran(pc_dataset *d, pc_flat_array *a, bool fortran);

/** Whether the machine stores integers little-endian. */
bool pc_flat_little_endian(void);

/** pread all of [from, from + bytes) of the file; PC_EDATA naming the file and dataset. */
int pc_flat_pread(pc_reader *r, uint64_t from, void *dst, uint64_t bytes, pc_error *err);

/** The format ops that flat formats share. */
int pc_flat_open_dataset(pc_reader *r, pc_error *err);
void pc_flat_close_dataset(pc_reader *r);
uint64_t pc_flat_chunk_extent(const pc_reader *r, int k);
bool pc_flat_direct(const pc_reader *r, uint64_t *offset);

/** Reads block b through `fetch`: the bytes as they lie in C order, gathered from the whole
 * array in Fortran order. */
int pc_flat_read(pc_reader *r, const pc_block *b, void *raw, pc_flat_fetch fetch, pc_error *err);

#endif
