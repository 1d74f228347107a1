/* The HDF5 loader (loader.h): the only module that calls HDF5. */
#include "loader.h"
#include "pc_internal.h"

#include <hdf5.h>

#include <errno.h>    /* errno */
#include <fcntl.h>    /* open, O_RDONLY, O_CLOEXEC, O_NONBLOCK */
#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, qsort, bsearch */
#include <string.h>   /* strcmp, strerror */
#include <sys/stat.h> /* stat, fstat */
#include <unistd.h>   /* close */

/* Deeper nesting than this is not walked (hostile files): the group is an error. */
enum { PC_MAX_DEPTH = 256 };

/* A string attribute longer than this cannot hold a dtype name, so it is not read (a hostile
 * file can declare a string of 4 GiB in a few bytes). */
enum { PC_ATTR_TEXT_MAX = 4096 };

/* Listing a dataset's written chunks costs HDF5 1.10 a walk of its chunk index per chunk
 * (H5Dget_chunk_info(i) visits entries 0 .. i), so n chunks cost n(n + 1)/2 visits. A file
 * spends at most this many; a dataset that would need more is read whole. */
#define PC_CHUNK_VISITS_MAX ((uint64_t)1 << 22)

/* A chunk narrower than the dataset covers many separate row-major runs: at most this many are
 * listed for one chunk; beyond that, runs are widened to whole rows of an outer dimension (more
 * is read, nothing is judged differently). */
enum { PC_CHUNK_RUNS_MAX = 64 };

/* Groups already walked, by object address: an open-addressing hash set, so that a file of many
 * groups is walked in linear time. HADDR_UNDEF marks a free slot. */
typedef struct pc_addr_set {
  haddr_t *slot;
  size_t cap, n; /* cap is 0 or a power of two */
} pc_addr_set;

struct pc_file {
  char *path;
  uint64_t size; /* bytes, as stat saw them before HDF5 opened the file */
  hid_t fid;
  int fd;             /* read-only, for mapping the raw data of direct readers */
  bool same_fd;       /* fd is the very file HDF5 opened */
  uint64_t eoa;       /* HDF5's end of allocation (absolute, like H5Dget_offset); UINT64_MAX when
                         unknown. HDF5 reads no data past it: it returns zeros there */
  uint64_t userblock; /* bytes before the superblock */
  pc_dataset *ds;
  size_t n, cap;
  const pc_dataset **sorted; /* by path, for pc_file_find */
  pc_addr_set visited;       /* groups already walked */
  uint64_t chunk_visits;     /* chunk index entries visited so far (PC_CHUNK_VISITS_MAX) */
};

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

typedef struct pc_h5_walk {
  char *buf;
  size_t size;
} pc_h5_walk;

/* Keeps the deepest entry of the stack: it names the real cause ("file signature not found"),
 * where the top one only repeats the API call that failed. */
static herr_t pc_h5_walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  pc_h5_walk *w = data;
  (void)n;
  if (e->desc && e->desc[0])
    snprintf(w->buf, w->size, "%s", e->desc);
  return 0;
}

/* The current HDF5 error, as text for our messages; clears the stack. */
static const char *pc_h5_error(char *buf, size_t size) {
  pc_h5_walk w = {buf, size};
  snprintf(buf, size, "HDF5 error");
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, pc_h5_walk_cb, &w);
  H5Eclear2(H5E_DEFAULT);
  return buf;
}

static int pc_file_add(pc_file *f, pc_dataset **out, const char *path, pc_error *err) {
  if (f->n == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 64;
    pc_dataset *ds = realloc(f->ds, cap * sizeof *ds);
    if (!ds)
      return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
    f->ds = ds;
    f->cap = cap;
  }
  pc_dataset *d = &f->ds[f->n];
  memset(d, 0, sizeof *d);
  d->exec_index = -1;
  d->path = pc_strdup(path);
  if (!d->path)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  f->n++;
  *out = d;
  return PC_OK;
}

static int pc_set_reason(pc_dataset *d, pc_kind kind, const char *why) {
  d->kind = kind;
  free(d->reason);
  d->reason = pc_strdup(why);
  return d->reason ? PC_OK : PC_ENOMEM;
}

/* An unreadable object: the reason names the file, since a report says only "A" or "B". */
static int pc_set_error(const pc_file *f, pc_dataset *d, const char *why) {
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

/* --- dtype classification --------------------------------------------------------------- */

static bool pc_order_swaps(hid_t type) {
  H5T_order_t order = H5Tget_order(type);
  H5T_order_t native = H5Tget_order(H5T_NATIVE_INT);
  return (order == H5T_ORDER_LE || order == H5T_ORDER_BE) && order != native;
}

static pc_dtype pc_float_dtype(hid_t type) {
  size_t spos, epos, esize, mpos, msize;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0)
    return PC_DTYPE_NONE;
  return pc_dtype_from_layout(H5Tget_size(type), spos, epos, esize, mpos, msize,
                              (unsigned long)H5Tget_ebias(type));
}

static pc_dtype pc_int_dtype(hid_t type) {
  static const pc_dtype sdt[] = {PC_DTYPE_INT8, PC_DTYPE_INT16, PC_DTYPE_NONE, PC_DTYPE_INT32,
                                 PC_DTYPE_NONE, PC_DTYPE_NONE,  PC_DTYPE_NONE, PC_DTYPE_INT64};
  static const pc_dtype udt[] = {PC_DTYPE_UINT8, PC_DTYPE_UINT16, PC_DTYPE_NONE, PC_DTYPE_UINT32,
                                 PC_DTYPE_NONE,  PC_DTYPE_NONE,   PC_DTYPE_NONE, PC_DTYPE_UINT64};
  size_t size = H5Tget_size(type);
  if (size < 1 || size > 8 || H5Tget_precision(type) != 8 * size || H5Tget_offset(type) != 0)
    return PC_DTYPE_NONE;
  return H5Tget_sign(type) == H5T_SGN_2 ? sdt[size - 1] : udt[size - 1];
}

/* h5py stores numpy bool as an int8 enum {FALSE = 0, TRUE = 1}. */
static bool pc_is_h5py_bool(hid_t type) {
  if (H5Tget_nmembers(type) != 2 || H5Tget_size(type) != 1)
    return false;
  char *m0 = H5Tget_member_name(type, 0), *m1 = H5Tget_member_name(type, 1);
  bool yes = m0 && m1 && strcmp(m0, "FALSE") == 0 && strcmp(m1, "TRUE") == 0;
  H5free_memory(m0);
  H5free_memory(m1);
  return yes;
}

static void pc_classify_enum(pc_dataset *d, hid_t type) {
  hid_t base = H5Tget_super(type);
  d->stored = pc_is_h5py_bool(type) ? PC_DTYPE_BOOL : pc_int_dtype(base);
  d->swap = pc_order_swaps(base);
  H5Tclose(base);
  d->kind = PC_KIND_INTEGER;
}

/* h5py complex: a compound of exactly two members "r" and "i" of one float dtype and nothing
 * else (no padding), so that an element is at most 16 bytes whatever the file declares. */
static bool pc_classify_complex(pc_dataset *d, hid_t type) {
  if (H5Tget_nmembers(type) != 2)
    return false;
  bool ok = true;
  pc_dtype comp[2] = {PC_DTYPE_NONE, PC_DTYPE_NONE};
  for (unsigned m = 0; m < 2 && ok; m++) {
    char *name = H5Tget_member_name(type, m);
    hid_t mt = H5Tget_member_type(type, m);
    ok = name && mt >= 0 && H5Tget_class(mt) == H5T_FLOAT && strlen(name) == 1 &&
         (name[0] == 'r' || name[0] == 'i');
    if (ok) {
      comp[m] = pc_float_dtype(mt);
      size_t off = H5Tget_member_offset(type, m);
      *(name[0] == 'r' ? &d->re_offset : &d->im_offset) = off;
      d->swap = pc_order_swaps(mt);
    }
    H5free_memory(name);
    if (mt >= 0)
      H5Tclose(mt);
  }
  if (!ok || comp[0] == PC_DTYPE_NONE || comp[0] != comp[1] || d->re_offset == d->im_offset ||
      d->elem_size != 2 * pc_dtype_size(comp[0]))
    return false;
  d->kind = PC_KIND_COMPLEX;
  d->stored = comp[0];
  return true;
}

static const char *pc_class_name(H5T_class_t c) {
  switch (c) {
  case H5T_STRING:
    return "string";
  case H5T_OPAQUE:
    return "opaque";
  case H5T_REFERENCE:
    return "reference";
  case H5T_COMPOUND:
    return "compound (not complex)";
  case H5T_VLEN:
    return "variable-length sequence";
  case H5T_ARRAY:
    return "array type";
  case H5T_BITFIELD:
    return "bitfield";
  case H5T_TIME:
    return "time";
  default:
    return "unsupported type";
  }
}

/* Fills kind, stored, swap and elem_size from the dataset's file type. */
static int pc_classify_type(pc_dataset *d, hid_t type) {
  H5T_class_t cls = H5Tget_class(type);
  char why[160];
  d->elem_size = H5Tget_size(type);
  d->kind = PC_KIND_SKIPPED;
  if (cls == H5T_FLOAT) {
    d->stored = pc_float_dtype(type);
    d->kind = PC_KIND_FLOAT;
    d->swap = pc_order_swaps(type);
  } else if (cls == H5T_INTEGER) {
    d->stored = pc_int_dtype(type);
    d->kind = PC_KIND_INTEGER;
    d->swap = pc_order_swaps(type);
  } else if (cls == H5T_ENUM) {
    pc_classify_enum(d, type);
  } else if (cls != H5T_COMPOUND || !pc_classify_complex(d, type)) {
    return pc_set_reason(d, PC_KIND_SKIPPED, pc_class_name(cls));
  }
  if (d->stored != PC_DTYPE_NONE)
    return PC_OK;
  snprintf(why, sizeof why, "%s layout not supported (%zu bytes)",
           cls == H5T_FLOAT ? "float" : "integer", d->elem_size);
  return pc_set_reason(d, PC_KIND_SKIPPED, why);
}

/* --- the logical dtype attribute -------------------------------------------------------- */

/* Reads a scalar string attribute (fixed or variable length) into buf; false if it is not one. */
static bool pc_read_string_attr(hid_t obj, const char *name, char *buf, size_t size) {
  bool ok = false;
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (attr < 0)
    return false;
  hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
  if (type >= 0 && H5Tget_class(type) == H5T_STRING && H5Sget_simple_extent_npoints(space) == 1) {
    if (H5Tis_variable_str(type) > 0) {
      char *s = NULL;
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, H5T_VARIABLE);
      H5Tset_cset(mt, H5Tget_cset(type));
      ok = H5Aread(attr, mt, &s) >= 0 && s;
      if (ok)
        snprintf(buf, size, "%s", s);
      H5free_memory(s);
      H5Tclose(mt);
    } else if (H5Tget_size(type) <= PC_ATTR_TEXT_MAX) {
      size_t n = H5Tget_size(type);
      char *tmp = calloc(n + 1, 1);
      ok = tmp && H5Aread(attr, type, tmp) >= 0;
      if (ok)
        snprintf(buf, size, "%s", tmp);
      free(tmp);
    }
  }
  H5Tclose(type);
  H5Sclose(space);
  H5Aclose(attr);
  return ok;
}

/* A float32/float64 dataset tagged dtype="bfloat16" (or "float16") holds that dtype upcast. */
static void pc_logical_dtype(pc_dataset *d, hid_t dset) {
  char name[64];
  d->logical = d->stored;
  if (d->kind != PC_KIND_FLOAT ||
      (d->stored != PC_DTYPE_FLOAT32 && d->stored != PC_DTYPE_FLOAT64) ||
      H5Aexists(dset, "dtype") <= 0 || !pc_read_string_attr(dset, "dtype", name, sizeof name))
    return;
  const char *n = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
  pc_dtype dt = pc_dtype_from_name(n);
  if (dt == PC_DTYPE_BFLOAT16 || dt == PC_DTYPE_FLOAT16)
    d->logical = dt;
}

/* A scalar integer attribute; false when it is absent or not one integer. */
static bool pc_read_int_attr(hid_t dset, const char *name, long long *out) {
  if (H5Aexists(dset, name) <= 0)
    return false;
  hid_t attr = H5Aopen(dset, name, H5P_DEFAULT);
  hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
  hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
  bool ok = type >= 0 && H5Tget_class(type) == H5T_INTEGER &&
            H5Sget_simple_extent_npoints(space) == 1 && H5Aread(attr, H5T_NATIVE_LLONG, out) >= 0;
  if (type >= 0)
    H5Tclose(type);
  if (space >= 0)
    H5Sclose(space);
  if (attr >= 0)
    H5Aclose(attr);
  return ok;
}

/* The dumper's hints for the tolerance model (docs/tolerances.md): the length K of the
 * reduction that produced the tensor, the dtype it accumulated in, and its place in execution
 * order. Absent or malformed attributes leave the defaults (unknown). */
static void pc_reduction_attrs(pc_dataset *d, hid_t dset) {
  char name[64];
  long long v = 0;
  if (pc_read_int_attr(dset, "reduction_length", &v) && v > 0)
    d->reduction_length = (uint64_t)v;
  if (pc_read_int_attr(dset, "execution_index", &v) && v >= 0)
    d->exec_index = v;
  if (H5Aexists(dset, "accumulation_dtype") > 0 &&
      pc_read_string_attr(dset, "accumulation_dtype", name, sizeof name))
    d->accumulation = pc_dtype_from_name(strncmp(name, "torch.", 6) == 0 ? name + 6 : name);
  H5Eclear2(H5E_DEFAULT);
}

/* --- shape and storage ------------------------------------------------------------------ */

/* The shape; *overflow when the declared dimensions hold more than 2^64 - 1 elements. */
static int pc_read_shape(pc_dataset *d, hid_t dset, bool *overflow) {
  hid_t space = H5Dget_space(dset);
  if (space < 0)
    return PC_EDATA;
  H5S_class_t cls = H5Sget_simple_extent_type(space);
  int rank = cls == H5S_SIMPLE ? H5Sget_simple_extent_ndims(space) : 0;
  hsize_t dims[H5S_MAX_RANK];
  if (rank < 0 || rank > PC_MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
    H5Sclose(space);
    return PC_EDATA;
  }
  d->rank = rank;
  d->count = cls == H5S_NULL ? 0 : 1;
  *overflow = false;
  for (int i = 0; i < rank; i++) {
    d->dims[i] = dims[i];
    *overflow = *overflow || (dims[i] && d->count > UINT64_MAX / dims[i]);
    d->count *= dims[i];
  }
  H5Sclose(space);
  return PC_OK;
}

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
            n * (n + 1) / 2 <= PC_CHUNK_VISITS_MAX - f->chunk_visits;
  if (ok)
    f->chunk_visits += n * (n + 1) / 2;
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

/* Contiguous data must lie inside the file: a size the file cannot hold means a truncated or
 * corrupt file, said before any read. */
static const char *pc_extent_problem(const pc_file *f, pc_dataset *d, hid_t dset, hid_t dcpl,
                                     char *why, size_t size) {
  if (d->count > UINT64_MAX / d->elem_size) {
    snprintf(why, size, "declared size of %" PRIu64 " elements of %zu bytes exceeds 2^64 bytes",
             d->count, d->elem_size);
    return why;
  }
  if (H5Pget_layout(dcpl) != H5D_CONTIGUOUS || d->all_fill)
    return NULL;
  haddr_t at = H5Dget_offset(dset);
  uint64_t bytes = d->count * d->elem_size;
  H5Eclear2(H5E_DEFAULT);
  if (at == HADDR_UNDEF)
    return NULL;
  if (at > f->size || bytes > f->size - at) {
    snprintf(why, size,
             "declares %" PRIu64 " bytes of data at byte %" PRIu64
             ", past the end of the file (%" PRIu64 " bytes)",
             bytes, (uint64_t)at, f->size);
    return why;
  }
  /* Past the end HDF5 recorded, HDF5 would read zeros. The user block is allowed for, in case
   * an HDF5 version counts the end from the superblock: that reads as a shorter file. */
  uint64_t end = f->eoa > UINT64_MAX - f->userblock ? UINT64_MAX : f->eoa + f->userblock;
  if (at + bytes <= end)
    return NULL;
  snprintf(why, size,
           "declares %" PRIu64 " bytes of data at byte %" PRIu64
           ", past the end of the file that HDF5 recorded (byte %" PRIu64 ")",
           bytes, (uint64_t)at, f->eoa);
  return why;
}

static const char *pc_storage_problem(pc_file *f, pc_dataset *d, hid_t dset, hid_t type, char *why,
                                      size_t size) {
  hid_t dcpl = H5Dget_create_plist(dset);
  if (dcpl < 0)
    return "cannot read its creation properties";
  const char *problem = pc_layout_problem(dcpl, why, size);
  if (!problem)
    problem = pc_filter_problem(d, dcpl, why, size);
  if (!problem)
    problem = pc_fill_problem(f, d, dset, dcpl, type);
  if (!problem)
    problem = pc_extent_problem(f, d, dset, dcpl, why, size);
  H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  return problem;
}

/* Numeric datasets only: the checks that decide whether it can be read, and how. */
static int pc_describe_numeric(pc_file *f, pc_dataset *d, hid_t dset, hid_t type) {
  char why[PC_ERROR_MESSAGE_MAX];
  pc_logical_dtype(d, dset);
  pc_reduction_attrs(d, dset);
  const char *problem = pc_storage_problem(f, d, dset, type, why, sizeof why);
  return problem ? pc_set_error(f, d, problem) : PC_OK;
}

static int pc_describe_dataset(pc_file *f, hid_t loc, const char *name, const char *path,
                               pc_error *err) {
  pc_dataset *d = NULL;
  int rc = pc_file_add(f, &d, path, err);
  if (rc < 0)
    return rc;
  char h5err[256];
  bool overflow = false;
  hid_t dset = H5Dopen2(loc, name, H5P_DEFAULT);
  hid_t type = dset < 0 ? -1 : H5Dget_type(dset);
  if (type < 0 || pc_read_shape(d, dset, &overflow) < 0)
    rc = pc_set_error(f, d, pc_h5_error(h5err, sizeof h5err));
  else if (overflow)
    rc = pc_set_error(f, d, "declared shape has more than 2^64 elements");
  else if ((rc = pc_classify_type(d, type)) == PC_OK && d->kind != PC_KIND_SKIPPED)
    rc = pc_describe_numeric(f, d, dset, type);
  if (type >= 0)
    H5Tclose(type);
  if (dset >= 0)
    H5Dclose(dset);
  if (rc < 0)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  return PC_OK;
}

/* --- the walk --------------------------------------------------------------------------- */

typedef struct pc_walk {
  pc_file *f;
  const char *prefix; /* the group's path, "" for the root */
  int depth;
  int rc;
  pc_error *err;
} pc_walk;

static int pc_walk_group(pc_file *f, hid_t gid, const char *prefix, int depth, pc_error *err);

static size_t pc_addr_slot(const pc_addr_set *s, haddr_t a) {
  /* Fibonacci hashing: multiplying by 2^64 / golden ratio spreads nearby addresses apart. */
  uint64_t h = (uint64_t)a * UINT64_C(0x9E3779B97F4A7C15);
  size_t i = (size_t)(h ^ (h >> 32)) & (s->cap - 1);
  while (s->slot[i] != HADDR_UNDEF && s->slot[i] != a)
    i = (i + 1) & (s->cap - 1);
  return i;
}

/* Keeps the set at most half full, so that probes stay short. */
static int pc_addr_grow(pc_addr_set *s) {
  pc_addr_set g = {NULL, s->cap ? 2 * s->cap : 64, s->n};
  g.slot = malloc(g.cap * sizeof *g.slot);
  if (!g.slot)
    return PC_ENOMEM;
  for (size_t i = 0; i < g.cap; i++)
    g.slot[i] = HADDR_UNDEF;
  for (size_t i = 0; i < s->cap; i++)
    if (s->slot[i] != HADDR_UNDEF)
      g.slot[pc_addr_slot(&g, s->slot[i])] = s->slot[i];
  free(s->slot);
  *s = g;
  return PC_OK;
}

/* Adds a; *added is false when it was already there. */
static int pc_addr_add(pc_addr_set *s, haddr_t a, bool *added) {
  if (2 * (s->n + 1) > s->cap && pc_addr_grow(s) < 0)
    return PC_ENOMEM;
  size_t i = pc_addr_slot(s, a);
  *added = s->slot[i] == HADDR_UNDEF;
  if (*added) {
    s->slot[i] = a;
    s->n++;
  }
  return PC_OK;
}

/* True (and remembered) the first time a group object is met. */
static int pc_first_visit(pc_file *f, hid_t obj, bool *first) {
  H5O_info_t info;
  if (H5Oget_info2(obj, &info, H5O_INFO_BASIC) < 0)
    return PC_EIO;
  return pc_addr_add(&f->visited, info.addr, first);
}

static int pc_add_entry(pc_file *f, const char *path, pc_kind kind, const char *why,
                        pc_error *err) {
  pc_dataset *d = NULL;
  int rc = pc_file_add(f, &d, path, err);
  if (rc == PC_OK &&
      (kind == PC_KIND_ERROR ? pc_set_error(f, d, why) : pc_set_reason(d, kind, why)) < 0)
    rc = pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  return rc;
}

/* An object that cannot be opened, or a group that cannot be walked, is an error entry at its
 * path; the walk goes on with its siblings. */
static int pc_add_h5_error(pc_file *f, const char *path, const char *what, pc_error *err) {
  char h5err[256], why[320];
  snprintf(why, sizeof why, "%s: %s", what, pc_h5_error(h5err, sizeof h5err));
  return pc_add_entry(f, path, PC_KIND_ERROR, why, err);
}

static int pc_visit_group(pc_walk *w, hid_t obj, const char *path) {
  bool first = false;
  int rc = pc_first_visit(w->f, obj, &first);
  if (rc == PC_ENOMEM)
    return pc_error_set(w->err, rc, "%s: out of memory", w->f->path);
  if (rc < 0)
    return pc_add_h5_error(w->f, path, "cannot read group", w->err);
  return first ? pc_walk_group(w->f, obj, path, w->depth + 1, w->err) : PC_OK;
}

static int pc_visit_object(pc_walk *w, hid_t gid, const char *name, const char *path) {
  hid_t obj = H5Oopen(gid, name, H5P_DEFAULT);
  if (obj < 0)
    return pc_add_h5_error(w->f, path, "cannot open object", w->err);
  int rc = PC_OK;
  H5I_type_t t = H5Iget_type(obj);
  if (t == H5I_GROUP)
    rc = pc_visit_group(w, obj, path);
  else if (t == H5I_DATASET)
    rc = pc_describe_dataset(w->f, gid, name, path, w->err);
  H5Oclose(obj);
  return rc;
}

static herr_t pc_walk_cb(hid_t gid, const char *name, const H5L_info_t *info, void *data) {
  pc_walk *w = data;
  size_t len = strlen(w->prefix) + strlen(name) + 2;
  char *path = malloc(len);
  if (!path) {
    w->rc = pc_error_set(w->err, PC_ENOMEM, "%s: out of memory", w->f->path);
    return -1;
  }
  snprintf(path, len, "%s/%s", w->prefix, name);
  if (info->type == H5L_TYPE_EXTERNAL) {
    w->rc = pc_add_entry(w->f, path, PC_KIND_SKIPPED, "external link (not followed)", w->err);
  } else if (info->type == H5L_TYPE_SOFT && H5Oexists_by_name(gid, name, H5P_DEFAULT) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    w->rc = pc_add_entry(w->f, path, PC_KIND_SKIPPED, "dangling soft link", w->err);
  } else if (info->type == H5L_TYPE_HARD || info->type == H5L_TYPE_SOFT) {
    w->rc = pc_visit_object(w, gid, name, path);
  } else {
    w->rc = pc_add_entry(w->f, path, PC_KIND_SKIPPED, "user-defined link (not followed)", w->err);
  }
  free(path);
  return w->rc < 0 ? -1 : 0;
}

static bool pc_tracks_order(hid_t gid) {
  unsigned flags = 0;
  hid_t gcpl = H5Gget_create_plist(gid);
  if (gcpl >= 0) {
    H5Pget_link_creation_order(gcpl, &flags);
    H5Pclose(gcpl);
  }
  return (flags & H5P_CRT_ORDER_TRACKED) != 0;
}

/* A group that cannot be walked (too deep, or its link table is corrupt) is an error entry at
 * its path, except the root: then there is nothing to compare. */
static int pc_walk_group(pc_file *f, hid_t gid, const char *prefix, int depth, pc_error *err) {
  char h5err[256], why[64];
  if (depth > PC_MAX_DEPTH) {
    snprintf(why, sizeof why, "groups nested deeper than %d: not walked", PC_MAX_DEPTH);
    return pc_add_entry(f, prefix, PC_KIND_ERROR, why, err);
  }
  pc_walk w = {f, prefix, depth, PC_OK, err};
  hsize_t idx = 0;
  herr_t st = -1;
  if (pc_tracks_order(gid))
    st = H5Literate(gid, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, pc_walk_cb, &w);
  if (st < 0 && w.rc == PC_OK && idx == 0) {
    H5Eclear2(H5E_DEFAULT);
    st = H5Literate(gid, H5_INDEX_NAME, H5_ITER_INC, &idx, pc_walk_cb, &w);
  }
  if (w.rc < 0)
    return w.rc;
  if (st >= 0)
    return PC_OK;
  if (depth > 0)
    return pc_add_h5_error(f, prefix, "cannot list group", err);
  return pc_error_set(err, PC_EIO, "%s: /: %s", f->path, pc_h5_error(h5err, sizeof h5err));
}

/* --- the file --------------------------------------------------------------------------- */

static int pc_by_path(const void *x, const void *y) {
  const pc_dataset *const *a = x, *const *b = y;
  return strcmp((*a)->path, (*b)->path);
}

/* HDF5 would block on a FIFO and give an unhelpful message for a directory: check first. */
static int pc_check_regular(const char *path, struct stat *st, pc_error *err) {
  if (stat(path, st) != 0)
    return pc_error_set(err, PC_EIO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(st->st_mode))
    return pc_error_set(err, PC_EIO, "%s: is a directory", path);
  if (!S_ISREG(st->st_mode))
    return pc_error_set(err, PC_EIO, "%s: not a regular file", path);
  if (st->st_size == 0)
    return pc_error_set(err, PC_EIO, "%s: empty file (not HDF5)", path);
  return PC_OK;
}

static bool pc_same_file(const struct stat *x, const struct stat *y) {
  return x->st_dev == y->st_dev && x->st_ino == y->st_ino && x->st_size == y->st_size;
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

/* HDF5's end of allocation, and whether HDF5 opened the file of f->fd: it opened the file by
 * its path again, so the sec2 driver's descriptor must be the same file, else no reader is
 * direct. */
static void pc_read_eoa(pc_file *f) {
  struct stat ours, theirs;
  int *h5fd = NULL;
  haddr_t eoa = HADDR_UNDEF;
  hsize_t userblock = 0;
  hid_t fcpl = H5Fget_create_plist(f->fid);
  if (fcpl >= 0) {
    H5Pget_userblock(fcpl, &userblock);
    H5Pclose(fcpl);
  }
  f->userblock = userblock;
  f->eoa = H5Fget_eoa(f->fid, &eoa) >= 0 && eoa != HADDR_UNDEF ? (uint64_t)eoa : UINT64_MAX;
  f->same_fd = H5Fget_vfd_handle(f->fid, H5P_DEFAULT, (void **)&h5fd) >= 0 && h5fd &&
               fstat(*h5fd, &theirs) == 0 && fstat(f->fd, &ours) == 0 &&
               pc_same_file(&ours, &theirs);
  H5Eclear2(H5E_DEFAULT);
}

static int pc_file_walk(pc_file *f, pc_error *err) {
  char h5err[256];
  hid_t root = H5Gopen2(f->fid, "/", H5P_DEFAULT);
  if (root < 0)
    return pc_error_set(err, PC_EIO, "%s: %s", f->path, pc_h5_error(h5err, sizeof h5err));
  bool first;
  int rc = pc_first_visit(f, root, &first);
  if (rc == PC_OK)
    rc = pc_walk_group(f, root, "", 0, err);
  else if (rc == PC_ENOMEM)
    rc = pc_error_set(err, rc, "%s: out of memory", f->path);
  else
    rc = pc_error_set(err, PC_EIO, "%s: %s", f->path, pc_h5_error(h5err, sizeof h5err));
  H5Gclose(root);
  if (rc < 0)
    return rc;
  f->sorted = malloc((f->n ? f->n : 1) * sizeof *f->sorted);
  if (!f->sorted)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < f->n; i++)
    f->sorted[i] = &f->ds[i];
  qsort(f->sorted, f->n, sizeof *f->sorted, pc_by_path);
  return PC_OK;
}

int pc_file_open(pc_file **out, const char *path, pc_error *err) {
  char h5err[256];
  struct stat st;
  *out = NULL;
  pc_h5_quiet();
  int rc = pc_check_regular(path, &st, err);
  if (rc < 0)
    return rc;
  if (H5Fis_hdf5(path) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return pc_error_set(err, PC_EIO, "%s: not an HDF5 file", path);
  }
  pc_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = pc_strdup(path))) {
    free(f);
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", path);
  }
  f->size = (uint64_t)st.st_size;
  f->fid = -1;
  rc = pc_open_fd(f, &st, err);
  if (rc < 0)
    goto fail;
  f->fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f->fid < 0) {
    rc = pc_error_set(err, PC_EIO, "%s: cannot open: %s", path, pc_h5_error(h5err, sizeof h5err));
    goto fail;
  }
  pc_read_eoa(f);
  rc = pc_file_walk(f, err);
  if (rc < 0)
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
    free(f->ds[i].path);
    free(f->ds[i].reason);
    free(f->ds[i].written);
  }
  if (f->fid >= 0)
    H5Fclose(f->fid);
  if (f->fd >= 0)
    close(f->fd);
  free(f->ds);
  free(f->sorted);
  free(f->visited.slot);
  free(f->path);
  free(f);
}

size_t pc_file_count(const pc_file *f) {
  return f->n;
}

const pc_dataset *pc_file_dataset(const pc_file *f, size_t i) {
  return i < f->n ? &f->ds[i] : NULL;
}

const char *pc_file_path(const pc_file *f) {
  return f->path;
}

int pc_file_fd(const pc_file *f) {
  return f->fd;
}

const pc_dataset *pc_file_find(const pc_file *f, const char *path) {
  pc_dataset key = {0};
  key.path = (char *)path;
  const pc_dataset *kp = &key;
  const pc_dataset *const *hit = bsearch(&kp, f->sorted, f->n, sizeof *f->sorted, pc_by_path);
  return hit ? *hit : NULL;
}

/* --- block reads ------------------------------------------------------------------------ */

/* The chunk cache of one open dataset: room for a row of chunks that blocks cross, bounded
 * so that memory stays small. */
enum { PC_CHUNK_CACHE_BYTES = 8 << 20, PC_CHUNK_CACHE_SLOTS = 10007, PC_CHUNK_ALIGN_MAX = 4 };

struct pc_reader {
  const pc_file *f;
  const pc_dataset *ds;
  hid_t dset, fspace, memtype;
  int split;      /* the dimension stepped through; -1: the whole dataset in one read */
  uint64_t inner; /* elements in one index step of dimension `split` */
  uint64_t step;  /* index steps of dimension `split` per read */
  hsize_t pos[PC_MAX_RANK];
  uint64_t done;
  bool direct; /* the dataset's bytes lie as stored at file offset `offset` */
  uint64_t offset;
  unsigned char *raw; /* for pc_reader_next */
  double *values;
  int64_t *ints;
};

/* The dataset's chunk extent along dimension k, or 0 when it is not chunked. */
static uint64_t pc_chunk_extent(hid_t dset, int rank, int k) {
  hsize_t cdims[H5S_MAX_RANK];
  hid_t dcpl = H5Dget_create_plist(dset);
  uint64_t c = 0;
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, cdims) == rank)
    c = cdims[k];
  if (dcpl >= 0)
    H5Pclose(dcpl);
  return c;
}

/* Blocks are row-major runs: the largest suffix of dimensions that fits in a block is read
 * whole, stepping through the dimension before it, by whole chunks where the chunk allows. */
static void pc_reader_plan(pc_reader *r, size_t block) {
  const pc_dataset *d = r->ds;
  uint64_t inner = 1;
  int j = d->count == 0 ? 0 : d->rank; /* an empty dataset is one (empty) read */
  while (j > 0 && d->dims[j - 1] <= block / inner) {
    inner *= d->dims[j - 1];
    j--;
  }
  r->split = j - 1;
  r->inner = inner;
  r->step = block / inner;
  if (r->split < 0)
    return;
  uint64_t c = pc_chunk_extent(r->dset, d->rank, r->split);
  if (c && r->step >= c)
    r->step -= r->step % c;
  else if (c && c * inner <= PC_CHUNK_ALIGN_MAX * (uint64_t)block)
    r->step = c;
}

size_t pc_reader_max_block(const pc_reader *r) {
  uint64_t n = r->split < 0 ? r->ds->count : r->step * r->inner;
  return (size_t)(n ? n : 1);
}

/* The chunk cache holds at least one filtered chunk: a smaller cache would decompress a big
 * chunk again for every block that touches it. chunk_bytes was checked against
 * pc_options.max_memory before any read. */
static hid_t pc_open_dataset(const pc_file *f, const pc_dataset *ds) {
  size_t cache = PC_CHUNK_CACHE_BYTES;
  if (ds->chunk_bytes > cache && ds->chunk_bytes <= SIZE_MAX)
    cache = (size_t)ds->chunk_bytes;
  hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  if (dapl >= 0)
    H5Pset_chunk_cache(dapl, PC_CHUNK_CACHE_SLOTS, cache, 1.0);
  hid_t dset = H5Dopen2(f->fid, ds->path, dapl >= 0 ? dapl : H5P_DEFAULT);
  if (dapl >= 0)
    H5Pclose(dapl);
  return dset;
}

/* Contiguous storage without filters or external files, all of it written, lying inside the
 * file and the end HDF5 recorded (where HDF5 itself stops reading), in the very file HDF5
 * opened: then a block's stored bytes are the file's bytes from offset + first element *
 * elem_size, the very bytes H5Dread copies (the memory type is the file type: no conversion). */
static bool pc_reader_is_direct(pc_reader *r) {
  const pc_dataset *d = r->ds;
  const pc_file *f = r->f;
  if (d->all_fill || d->count == 0 || !f->same_fd || d->count > UINT64_MAX / d->elem_size)
    return false;
  uint64_t bytes = d->count * d->elem_size;
  hid_t dcpl = H5Dget_create_plist(r->dset);
  bool ok = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
            H5Pget_external_count(dcpl) == 0;
  if (dcpl >= 0)
    H5Pclose(dcpl);
  haddr_t at = ok ? H5Dget_offset(r->dset) : HADDR_UNDEF;
  uint64_t end = f->eoa < f->size ? f->eoa : f->size;
  ok = ok && at != HADDR_UNDEF && H5Dget_storage_size(r->dset) == bytes && at <= end &&
       bytes <= end - at;
  H5Eclear2(H5E_DEFAULT);
  r->offset = ok ? (uint64_t)at : 0;
  return ok;
}

int pc_reader_open(pc_reader **out, pc_file *f, const pc_dataset *ds, size_t block_elems,
                   const pc_reader *like, pc_error *err) {
  char h5err[256];
  *out = NULL;
  pc_reader *r = calloc(1, sizeof *r);
  if (!r)
    return pc_error_set(err, PC_ENOMEM, "%s: %s: out of memory", f->path, ds->path);
  r->f = f;
  r->ds = ds;
  r->dset = pc_open_dataset(f, ds);
  r->fspace = r->dset < 0 ? -1 : H5Dget_space(r->dset);
  r->memtype = r->dset < 0 ? -1 : H5Dget_type(r->dset);
  if (r->memtype < 0 || r->fspace < 0) {
    int rc = pc_error_set(err, PC_EDATA, "%s: %s: %s", f->path, ds->path,
                          pc_h5_error(h5err, sizeof h5err));
    pc_reader_close(r);
    return rc;
  }
  if (like) {
    r->split = like->split;
    r->inner = like->inner;
    r->step = like->step;
  } else {
    pc_reader_plan(r, block_elems);
  }
  r->direct = pc_reader_is_direct(r);
  *out = r;
  return PC_OK;
}

/* The next block's hyperslab (start and count, when `count` is not NULL), advancing past it;
 * returns its element count. Blocks are row-major runs: this one holds the elements
 * [r->done, r->done + count) of the dataset. */
static uint64_t pc_reader_advance(pc_reader *r, hsize_t *start, hsize_t *count) {
  const pc_dataset *d = r->ds;
  if (r->split < 0 || d->rank == 0)
    return d->count;
  uint64_t left = d->dims[r->split] - r->pos[r->split];
  uint64_t steps = left < r->step ? left : r->step;
  for (int i = 0; count && i < d->rank; i++) {
    start[i] = r->pos[i];
    count[i] = i < r->split ? 1 : i == r->split ? steps : d->dims[i];
  }
  /* Advance like an odometer: the split dimension, then the ones before it. */
  r->pos[r->split] += steps;
  for (int i = r->split; i > 0 && r->pos[i] == d->dims[i]; i--) {
    r->pos[i] = 0;
    r->pos[i - 1]++;
  }
  return steps * r->inner;
}

/* Selects the next block in the file space; returns its element count. */
static uint64_t pc_reader_select(pc_reader *r) {
  hsize_t start[PC_MAX_RANK], count[PC_MAX_RANK];
  if (r->split < 0 || r->ds->rank == 0) {
    H5Sselect_all(r->fspace);
    return pc_reader_advance(r, NULL, NULL);
  }
  uint64_t k = pc_reader_advance(r, start, count);
  H5Sselect_hyperslab(r->fspace, H5S_SELECT_SET, start, NULL, count, NULL);
  return k;
}

bool pc_reader_direct(const pc_reader *r) {
  return r->direct;
}

int pc_reader_next_span(pc_reader *r, uint64_t *file_offset, size_t *n) {
  *n = 0;
  *file_offset = r->offset + r->done * r->ds->elem_size; /* elements [done, done + k) */
  if (!r->direct)
    return PC_EUSAGE;
  if (r->done >= r->ds->count)
    return PC_OK;
  uint64_t k = pc_reader_advance(r, NULL, NULL);
  r->done += k;
  *n = (size_t)k;
  return PC_OK;
}

uint64_t pc_dataset_next_written(const pc_dataset *d, size_t *cursor, uint64_t from) {
  if (!d->sparse)
    return from;
  while (*cursor < d->nwritten && d->written[*cursor].end <= from)
    ++*cursor;
  if (*cursor == d->nwritten)
    return d->count;
  uint64_t begin = d->written[*cursor].begin;
  return begin > from ? begin : from;
}

/* Block starts are r->step apart along dimension `split`, from 0 in every row of the
 * dimensions before it (whose last block may be shorter). */
uint64_t pc_reader_seek(pc_reader *r, uint64_t to) {
  const pc_dataset *d = r->ds;
  if (to >= d->count) {
    r->done = d->count; /* pc_reader_next_raw and _span then give nothing more */
    return r->done;
  }
  if (to <= r->done || r->split < 0 || d->rank == 0)
    return r->done;
  uint64_t sweep = d->dims[r->split] * r->inner; /* elements of one row of dims 0 .. split */
  uint64_t row = to / sweep, s = to % sweep / r->inner;
  s -= s % r->step;
  uint64_t at = row * sweep + s * r->inner;
  if (at <= r->done)
    return r->done;
  r->pos[r->split] = s;
  for (int i = r->split - 1; i >= 0; i--) {
    r->pos[i] = row % d->dims[i];
    row /= d->dims[i];
  }
  r->done = at;
  return at;
}

void pc_dataset_decode(const pc_dataset *d, const void *raw, size_t n, double *vals,
                       int64_t *ints) {
  if (d->kind == PC_KIND_INTEGER) {
    pc_dtype_decode_int(d->stored, raw, n, d->swap, ints);
  } else if (d->kind == PC_KIND_FLOAT) {
    pc_dtype_decode_float(d->stored, raw, n, d->swap, vals);
  } else {
    const unsigned char *bytes = raw;
    for (size_t i = 0; i < n; i++) {
      const unsigned char *e = bytes + i * d->elem_size;
      pc_dtype_decode_float(d->stored, e + d->re_offset, 1, d->swap, &vals[2 * i]);
      pc_dtype_decode_float(d->stored, e + d->im_offset, 1, d->swap, &vals[2 * i + 1]);
    }
  }
}

int pc_reader_next_raw(pc_reader *r, void *raw, size_t *n, pc_error *err) {
  char h5err[256];
  *n = 0;
  if (r->done >= r->ds->count)
    return PC_OK;
  uint64_t k = pc_reader_select(r);
  hsize_t mdims[1] = {k};
  hid_t mspace = H5Screate_simple(1, mdims, NULL);
  herr_t st = mspace < 0 ? -1 : H5Dread(r->dset, r->memtype, mspace, r->fspace, H5P_DEFAULT, raw);
  /* Take HDF5's message before H5Sclose, which clears the error stack. */
  if (st < 0)
    pc_h5_error(h5err, sizeof h5err);
  if (mspace >= 0)
    H5Sclose(mspace);
  if (st < 0)
    return pc_error_set(err, PC_EDATA, "%s: %s: cannot read: %s", r->f->path, r->ds->path, h5err);
  r->done += k;
  *n = (size_t)k;
  return PC_OK;
}

/* Buffers for pc_reader_next, made on first use: the streaming pipeline brings its own. */
static int pc_reader_buffers(pc_reader *r) {
  size_t cap = pc_reader_max_block(r);
  size_t per = r->ds->kind == PC_KIND_COMPLEX ? 2 : 1;
  r->raw = malloc(cap * r->ds->elem_size);
  if (r->ds->kind == PC_KIND_INTEGER)
    r->ints = malloc(cap * sizeof *r->ints);
  else
    r->values = malloc(cap * per * sizeof *r->values);
  return r->raw && (r->ints || r->values) ? PC_OK : PC_ENOMEM;
}

int pc_reader_next(pc_reader *r, size_t *n, pc_error *err) {
  *n = 0;
  if (!r->raw && pc_reader_buffers(r) < 0)
    return pc_error_set(err, PC_ENOMEM, "%s: %s: out of memory", r->f->path, r->ds->path);
  int rc = pc_reader_next_raw(r, r->raw, n, err);
  if (rc == PC_OK)
    pc_dataset_decode(r->ds, r->raw, *n, r->values, r->ints);
  return rc;
}

const double *pc_reader_values(const pc_reader *r) {
  return r->values;
}

const int64_t *pc_reader_ints(const pc_reader *r) {
  return r->ints;
}

void pc_reader_close(pc_reader *r) {
  if (!r)
    return;
  if (r->memtype >= 0)
    H5Tclose(r->memtype);
  if (r->fspace >= 0)
    H5Sclose(r->fspace);
  if (r->dset >= 0)
    H5Dclose(r->dset);
  free(r->raw);
  free(r->values);
  free(r->ints);
  free(r);
}
