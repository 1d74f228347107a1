/* The reader interface: open a tensor dump, list its datasets with what each is (dataset
 * info: kind, dtypes, shape, storage), and read one dataset in blocks, decoding the stored bits
 * in our code (docs/metrics.md, "Dtypes"). The format is chosen by the file's magic bytes;
 * file.c and reader.c are format-free, and each format implements format.h (HDF5: h5_*.c), so
 * that the comparator above never sees a format. Internal to the library.
 *
 * HDF5 1.10 is not thread-safe: every function here must be called from one thread, except
 * pc_dataset_decode and pread on pc_file_fd. */
#ifndef PC_LOADER_H
#define PC_LOADER_H

#include <paritycheck/dtype.h>
#include <paritycheck/error.h>
#include <paritycheck/result.h> /* PC_MAX_RANK */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

typedef enum pc_kind {
  PC_KIND_FLOAT,
  PC_KIND_COMPLEX, /* compound {r, i} of two floats of one dtype */
  PC_KIND_INTEGER, /* integers, bool, enums (read as their base integer) */
  PC_KIND_SKIPPED, /* not numeric: `reason` says what it is */
  PC_KIND_ERROR    /* cannot be read: `reason` says why */
} pc_kind;

enum { PC_FILL_MAX = 16 }; /* bytes of the largest numeric element, complex128 */

/* Row-major (flat) element indices begin .. end - 1. */
typedef struct pc_range {
  uint64_t begin, end;
} pc_range;

typedef struct pc_dataset {
  char *path; /* full path from the root, e.g. "/g/x" */
  pc_kind kind;
  pc_dtype stored;  /* the stored dtype (a component's for complex) */
  pc_dtype logical; /* stored, or the dtype named by the `dtype` attribute */
  bool swap;        /* the file's byte order is not the machine's */
  size_t elem_size; /* bytes of one stored element (a whole compound for complex) */
  size_t re_offset; /* complex: byte offsets of the r and i members */
  size_t im_offset;
  int rank;
  uint64_t *dims; /* rank entries, in the file's arena (pc_dataset_set_shape); NULL at rank 0 */
  uint64_t count;
  char *reason;              /* for PC_KIND_SKIPPED and PC_KIND_ERROR */
  uint64_t reduction_length; /* attribute `reduction_length` (K); 0 when absent */
  pc_dtype accumulation;     /* attribute `accumulation_dtype`; PC_DTYPE_NONE when absent */
  int64_t exec_index;        /* attribute `execution_index`; -1 when absent */
  const char *module_type;   /* attribute `module_type` (the module's class, e.g. "Conv2d"), in
                                the file's arena; NULL when absent */
  /* Storage (docs/robustness.md). A dataset never written reads as its fill value everywhere:
   * all_fill, with the value as stored (elem_size bytes, decoded like a read block). */
  bool all_fill;
  unsigned char fill[PC_FILL_MAX];
  /* sparse: every element outside the `nwritten` ranges of `written` (sorted, disjoint, not
   * adjacent; they may cover more than was written) reads as `fill`. Set for all_fill (no
   * ranges) and for a chunked dataset with only some chunks written, when listing them was
   * cheap enough; any other dataset is read whole. */
  bool sparse;
  pc_range *written;
  size_t nwritten;
  uint64_t chunk_bytes; /* bytes a read needs at once: one uncompressed chunk when chunks are
                           filtered (HDF5 then decompresses whole chunks), the whole array in
                           Fortran order (npy, npz: it is transposed); 0 otherwise */
} pc_dataset;

typedef struct pc_file pc_file;

/** Open the tensor dump at `path` (HDF5, safetensors, npy or npz: docs/formats.md) and walk it.
 * PC_EIO (naming the file) when it is missing, not a regular file, of none of these formats,
 * truncated or corrupt, or replaced while being opened. */
int pc_file_open(pc_file **out, const char *path, pc_error *err);

/* What opening a file may spend on its metadata, and whom it tells that it goes on. */
typedef struct pc_open_limits {
  /* Bytes the file's metadata may need: a header read whole (safetensors) and the records made
   * of it (each dataset's, with its path and shape). More is PC_EIO naming the file and what it
   * would need (docs/robustness.md, "Resource limits"). */
  uint64_t max_memory;
  /* Called now and then, with total 0, while a large header is read; may be NULL. */
  void (*progress)(void *user, uint64_t done, uint64_t total);
  void *progress_user;
} pc_open_limits;

/** pc_file_open within `lim` (NULL: pc_file_open's, no limit and no progress). */
int pc_file_open_limited(pc_file **out, const char *path, const pc_open_limits *lim, pc_error *err);

/** Close the file; NULL is accepted. */
void pc_file_close(pc_file *f);

/** *dump: whether `path` is a regular file whose magic bytes some format recognises (it may
 * still be corrupt): what folder mode tells tensor dumps from other files by. PC_EIO (naming
 * the file) when that cannot be told: the file is missing, empty, not a regular file or cannot
 * be opened or read. A file that cannot be read is never "not a dump" (docs/robustness.md,
 * "Fail closed"). */
int pc_file_sniff(const char *path, bool *dump, pc_error *err);

/** The file's datasets, in walk order: each group's links in creation order when the group
 * tracks it, else by name, depth first. A group reached by several links is walked once. */
size_t pc_file_count(const pc_file *f);
const pc_dataset *pc_file_dataset(const pc_file *f, size_t i);

/** The element count of the file's largest numeric dataset (0 when it has none): the bound of
 * a plausible reduction_length (docs/robustness.md, "Trust model"). */
uint64_t pc_file_max_count(const pc_file *f);

/** The dataset at `path`, or NULL. */
const pc_dataset *pc_file_find(const pc_file *f, const char *path);

/** The file's own attributes (provenance), in the file's order; none for a format without
 * them. Values are text (pc_attr of result.h). */
size_t pc_file_attr_count(const pc_file *f);
const pc_attr *pc_file_attr(const pc_file *f, size_t i);

/** The text of attribute `name` of dataset d of f, else of f itself (pc_file_attr), into buf
 * (size bytes, truncated to fit) or as a string owned by f; NULL when neither has one that is a
 * scalar string, number or boolean. `module_type` comes from the walk; any other attribute of
 * the dataset is read now, so this is the loader's thread's to call. */
const char *pc_dataset_attr(pc_file *f, const pc_dataset *d, const char *name, char *buf,
                            size_t size);

/* One numeric attribute to read (pc_dataset_numbers): `name`, room for `cap` doubles at `out`;
 * `got` is set to its length, or -1. */
typedef struct pc_numbers_req {
  const char *name;
  double *out;
  size_t cap;
  long got;
} pc_numbers_req;

/** Dataset d's numeric attributes req[0 .. n) (each a scalar, or a 1-D array of at most cap
 * values) as doubles, with one lookup of d: each req's got is its length, or -1 when d has no
 * such attribute (or the format keeps no dataset attributes), it is not numeric, or it is
 * longer. The loader's thread's to call. */
void pc_dataset_numbers(pc_file *f, const pc_dataset *d, pc_numbers_req *req, size_t n);

/** The path the file was opened with. */
const char *pc_file_path(const pc_file *f);

/** A read-only descriptor of the file HDF5 opened, for reading the raw data of direct readers
 * (pc_reader_direct) with pread; open until pc_file_close. pread on it is thread-safe. */
int pc_file_fd(const pc_file *f);

typedef struct pc_reader pc_reader;

/** Start reading numeric dataset `ds` of `f` in row-major blocks of about `block_elems`
 * elements (> 0): blocks follow the dataset's chunks where that costs at most 4x the size.
 * With `like` (a reader of a dataset of the same shape, or NULL) the blocks are cut exactly as
 * like's, so that two datasets can be read side by side whatever their chunking. */
int pc_reader_open(pc_reader **out, pc_file *f, const pc_dataset *ds, size_t block_elems,
                   const pc_reader *like, pc_error *err);

/** The most elements one block of r can hold. */
size_t pc_reader_max_block(const pc_reader *r);

/** Read the next block's stored bytes, undecoded, into `raw` (room for pc_reader_max_block
 * elements of ds->elem_size bytes); *n = its elements, 0 when done. PC_EDATA on failure. */
int pc_reader_next_raw(pc_reader *r, void *raw, size_t *n, pc_error *err);

/** True when r's dataset lies in the file as stored, in one contiguous run (no filters, no
 * external files, all of it written, inside the file's size and HDF5's end of allocation):
 * its blocks can then be read from pc_file_fd with pc_reader_next_span, without HDF5. */
bool pc_reader_direct(const pc_reader *r);

/** For a direct reader: advance to the next block exactly as pc_reader_next_raw would, but
 * instead of reading it return where its stored bytes lie: *n elements (0 when done) of
 * ds->elem_size bytes from byte *file_offset of the file (an absolute offset, user block
 * included), the very bytes pc_reader_next_raw would give. PC_EUSAGE when r is not direct. */
int pc_reader_next_span(pc_reader *r, uint64_t *file_offset, size_t *n);

/** For a sparse dataset: the first element at or after `from` (<= d->count) that lies in a
 * written range, or d->count when none does; for any other dataset, `from`. *cursor starts at
 * 0 and remembers where the search ended, so successive calls must not decrease `from`. */
uint64_t pc_dataset_next_written(const pc_dataset *d, size_t *cursor, uint64_t from);

/** Move r forward without reading to the last block start at or before element `to` (to the
 * end when `to` >= the element count; never backwards) and return it: the first element of the
 * block that pc_reader_next_raw or pc_reader_next_span gives next. Readers cut alike (`like`)
 * land on the same block start. */
uint64_t pc_reader_seek(pc_reader *r, uint64_t to);

/** Decode n stored elements of `ds` from raw: floats into vals (two doubles an element for
 * complex: re, im), integers into ints (uint64 bit for bit). Pure and thread-safe. */
void pc_dataset_decode(const pc_dataset *ds, const void *raw, size_t n, double *vals,
                       int64_t *ints);

/** Read and decode the next block; *n = its number of elements, 0 when the dataset is done.
 * Floats land in pc_reader_values (two doubles an element for complex: re, im), integers in
 * pc_reader_ints (uint64 bit for bit). PC_EDATA naming the file and dataset on failure. */
int pc_reader_next(pc_reader *r, size_t *n, pc_error *err);
const double *pc_reader_values(const pc_reader *r);
const int64_t *pc_reader_ints(const pc_reader *r);

/** Free the reader; NULL is accepted. */
void pc_reader_close(pc_reader *r);

/** Switch HDF5's automatic error printing on (debug) or off (the default). */
void pc_loader_set_debug(bool on);

#endif
