/* Behind the reader interface (loader.h): the file and reader state that every format shares,
 * and what a file format implements. file.c and reader.c do the format-free work (checking the
 * path, choosing the format by its magic bytes, listing and finding datasets, cutting blocks,
 * decoding); a format walks its file into datasets and reads a block's stored bytes.
 * Internal to src/lib/load. */
#ifndef PC_FORMAT_H
#define PC_FORMAT_H

#include "arena.h"
#include "loader.h"

#include <sys/stat.h> /* struct stat */

struct pc_format;

/* A dataset under its path, for the sorted index: sorting and searching read the paths, not the
 * datasets' entries, which may live in a file (spill.h). */
typedef struct pc_file_entry {
  const char *path;
  const pc_dataset *d;
} pc_file_entry;

struct pc_file {
  char *path;
  uint64_t size; /* bytes, as stat saw them before the format opened the file */
  int fd;        /* read-only: the file stat checked; direct readers pread from it */
  const struct pc_format *format;
  void *impl;     /* the format's state */
  pc_dataset *ds; /* a table that may be spilled (spill.h): accesses call pc_spill_touch */
  size_t n, cap;
  size_t ds_mapped;      /* spill.h */
  pc_file_entry *sorted; /* by path, for pc_file_find */
  pc_attr *attrs;        /* the file's attributes (pc_file_add_attr) */
  pc_arena names;        /* the datasets' paths and shapes */
  size_t nattrs;
  pc_open_limits lim;  /* as opened */
  uint64_t meta_bytes; /* metadata counted against lim.max_memory so far (pc_file_charge) */
  uint64_t max_count;  /* elements of its largest numeric dataset (pc_file_max_count) */
};

/* One block: the row-major run of elements [first, first + n). Unless `whole` (the dataset in
 * one read), it is also the box start[i] .. start[i] + count[i] - 1 in every dimension i. */
typedef struct pc_block {
  uint64_t first, n;
  bool whole;
  uint64_t start[PC_MAX_RANK], count[PC_MAX_RANK];
} pc_block;

struct pc_reader {
  pc_file *f;
  const pc_dataset *ds;
  void *impl;     /* the format's per-dataset state */
  int split;      /* the dimension stepped through; -1: the whole dataset in one read */
  uint64_t inner; /* elements in one index step of dimension `split` */
  uint64_t step;  /* index steps of dimension `split` per read */
  uint64_t pos[PC_MAX_RANK];
  uint64_t done;
  bool direct; /* the dataset's bytes lie as stored at file offset `offset` */
  uint64_t offset;
  unsigned char *raw; /* for pc_reader_next */
  double *values;
  int64_t *ints;
};

typedef struct pc_format {
  const char *name;
  /* Whether f (fd open, size known) is of this format, from its magic bytes. */
  bool (*sniff)(const pc_file *f);
  /* Walks f into datasets (pc_file_add), keeping the format's state in f->impl. PC_EIO naming
   * the file when it is corrupt; a dataset that cannot be read is a PC_KIND_ERROR entry. */
  int (*open)(pc_file *f, pc_error *err);
  void (*close)(pc_file *f); /* frees f->impl; called after a failed open too */
  /* Per dataset: r->f and r->ds are set; keeps its state in r->impl. PC_EDATA on failure. */
  int (*open_dataset)(pc_reader *r, pc_error *err);
  void (*close_dataset)(pc_reader *r); /* also after a failed open_dataset */
  /* The chunk extent along dimension k, 0 when the storage is not chunked. */
  uint64_t (*chunk_extent)(const pc_reader *r, int k);
  /* True when the dataset's stored bytes lie as stored, contiguous, at *offset of f->fd. */
  bool (*direct)(const pc_reader *r, uint64_t *offset);
  /* Optional (NULL: the format has none): lists the file's own string, number and boolean
   * attributes with pc_file_add_attr, after open. An attribute it cannot read is left out;
   * PC_ENOMEM only. */
  int (*attributes)(pc_file *f, pc_error *err);
  /* Optional (NULL: datasets have no attributes): the text of dataset d's scalar string, number
   * or boolean attribute `name` into buf (size bytes); false when it has none or it cannot be
   * read (a rule that needs it then does not apply). */
  bool (*dataset_attribute)(pc_file *f, const pc_dataset *d, const char *name, char *buf,
                            size_t size);
  /* Optional: dataset d's numeric attributes req[0 .. n) (each a scalar or a 1-D array of at
   * most cap values) as doubles; each req's got its length, or -1 when it has none, is of
   * another kind or longer, or cannot be read. */
  void (*dataset_numbers)(pc_file *f, const pc_dataset *d, pc_numbers_req *req, size_t n);
  /* Reads block b's stored bytes into raw (b->n elements of ds->elem_size bytes). PC_EDATA
   * naming the file and dataset on failure. */
  int (*read)(pc_reader *r, const pc_block *b, void *raw, pc_error *err);
} pc_format;

extern const pc_format pc_format_hdf5;
extern const pc_format pc_format_npy;
extern const pc_format pc_format_npz;
extern const pc_format pc_format_safetensors;

/* What a format calls while it walks its file (file_records.c). */

/** Appends a dataset at `path` (PC_KIND_FLOAT, exec_index -1, the rest zero) to f, counting
 * its record against the memory limit (pc_file_charge). */
int pc_file_add(pc_file *f, pc_dataset **out, const char *path, pc_error *err);

/** Counts `bytes` more of f's metadata against f->lim.max_memory; false (nothing counted) when
 * the total would pass the limit. */
bool pc_file_charge(pc_file *f, uint64_t bytes);

/** PC_EIO: f's metadata would need `need` ("N bytes (why)"), more than the memory limit. */
int pc_file_over_limit(const pc_file *f, const char *need, pc_error *err);

/** The memory one dataset record at `path` holds besides its shape (pc_file_add counts it). */
uint64_t pc_file_record_bytes(size_t path_len);

/* Attributes one file may list: provenance is a handful of them, a hostile file may hold
 * millions. */
enum { PC_FILE_ATTRS_MAX = 256 };

/** Appends attribute name = value of that kind to f; nothing once f has PC_FILE_ATTRS_MAX.
 * PC_ENOMEM. */
int pc_file_add_attr(pc_file *f, const char *name, const char *value, pc_attr_kind kind);

/** Sets d's rank and a copy of its dims (rank <= PC_MAX_RANK) in f's arena; PC_ENOMEM. Each
 * dataset holds only its own rank's entries: an array of PC_MAX_RANK in every entry of a walk
 * over 20,000 datasets was 10 MB of its peak memory (docs/performance.md). */
int pc_dataset_set_shape(pc_file *f, pc_dataset *d, int rank, const uint64_t *dims);

/** Marks d skipped (not numeric) or of another kind, with a reason; PC_ENOMEM. */
int pc_dataset_set_reason(pc_dataset *d, pc_kind kind, const char *why);

/** Marks d unreadable; the reason names the file, since a report says only "A" or "B". */
int pc_dataset_set_error(const pc_file *f, pc_dataset *d, const char *why);

/** Same device, inode and size. */
bool pc_same_file(const struct stat *x, const struct stat *y);

#endif
