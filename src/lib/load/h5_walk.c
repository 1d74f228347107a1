/* Walks an HDF5 file into datasets (h5.h): groups depth first, each dataset classified by its
 * type, shape and attributes. */
#include "h5.h"
#include "numerics.h"
#include "pc_internal.h"

#include <math.h>   /* isfinite */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, calloc, free, strtod */
#include <string.h> /* strlen, strcmp */

/* Deeper nesting than this is not walked (hostile files): the group is an error. */
enum { PC_MAX_DEPTH = 256 };

/* A string attribute longer than this cannot hold a dtype name, so it is not read (a hostile
 * file can declare a string of 4 GiB in a few bytes). */
enum { PC_ATTR_TEXT_MAX = 4096 };

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
    return pc_dataset_set_reason(d, PC_KIND_SKIPPED, pc_class_name(cls));
  }
  if (d->stored != PC_DTYPE_NONE)
    return PC_OK;
  snprintf(why, sizeof why, "%s layout not supported (%zu bytes)",
           cls == H5T_FLOAT ? "float" : "integer", d->elem_size);
  return pc_dataset_set_reason(d, PC_KIND_SKIPPED, why);
}

/* --- the logical dtype attribute -------------------------------------------------------- */

/* The reason an attribute that exists could not be read, for the dataset's error. */
enum { PC_ATTR_WHY = 256 };

/* HDF5's reason, taken at once: the next HDF5 call clears its error stack. */
static int pc_attr_failed(char why[PC_ATTR_WHY]) {
  pc_h5_error(why, PC_ATTR_WHY);
  return -1;
}

/* Reads a scalar string attribute (fixed or variable length) into buf: 1; 0 when it is not one;
 * -1, with why, when it is one that cannot be read (a read error, a corrupt heap, out of
 * memory), which must not pass for an absent one. */
static int pc_read_string_attr(hid_t obj, const char *name, char *buf, size_t size,
                               char why[PC_ATTR_WHY]) {
  int ok = 0;
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (attr < 0)
    return 0;
  hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
  if (type >= 0 && H5Tget_class(type) == H5T_STRING && H5Sget_simple_extent_npoints(space) == 1) {
    if (H5Tis_variable_str(type) > 0) {
      char *s = NULL;
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, H5T_VARIABLE);
      H5Tset_cset(mt, H5Tget_cset(type));
      ok = H5Aread(attr, mt, &s) < 0 ? pc_attr_failed(why) : s != NULL;
      if (ok > 0)
        snprintf(buf, size, "%s", s);
      H5free_memory(s);
      H5Tclose(mt);
    } else if (H5Tget_size(type) <= PC_ATTR_TEXT_MAX) {
      size_t n = H5Tget_size(type);
      char *tmp = calloc(n + 1, 1);
      ok = !tmp                            ? (snprintf(why, PC_ATTR_WHY, "out of memory"), -1)
           : H5Aread(attr, type, tmp) >= 0 ? 1
                                           : pc_attr_failed(why);
      if (ok > 0)
        snprintf(buf, size, "%s", tmp);
      free(tmp);
    }
  }
  H5Tclose(type);
  H5Sclose(space);
  H5Aclose(attr);
  return ok;
}

/* A float32/float64 dataset tagged dtype="bfloat16" (or "float16") holds that dtype upcast.
 * false, with why, when the tag cannot be read. */
static bool pc_logical_dtype(pc_dataset *d, hid_t dset, char why[PC_ATTR_WHY]) {
  char name[64];
  d->logical = d->stored;
  int got = 0;
  if (d->kind != PC_KIND_FLOAT ||
      (d->stored != PC_DTYPE_FLOAT32 && d->stored != PC_DTYPE_FLOAT64) ||
      H5Aexists(dset, "dtype") <= 0 ||
      (got = pc_read_string_attr(dset, "dtype", name, sizeof name, why)) <= 0)
    return got == 0;
  const char *n = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
  pc_dtype dt = pc_dtype_from_name(n);
  if (dt == PC_DTYPE_BFLOAT16 || dt == PC_DTYPE_FLOAT16)
    d->logical = dt;
  return true;
}

/* Closes what an attribute probe opened; negative ids were never opened. */
static void pc_attr_close(hid_t attr, hid_t type, hid_t space) {
  if (type >= 0)
    H5Tclose(type);
  if (space >= 0)
    H5Sclose(space);
  if (attr >= 0)
    H5Aclose(attr);
}

/* A scalar integer attribute: 1; 0 when it is absent or not one integer; -1, with why, when it
 * is one that cannot be read. */
static int pc_read_int_attr(hid_t dset, const char *name, long long *out, char why[PC_ATTR_WHY]) {
  if (H5Aexists(dset, name) <= 0)
    return 0;
  hid_t attr = H5Aopen(dset, name, H5P_DEFAULT);
  hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
  hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
  int ok =
      type >= 0 && H5Tget_class(type) == H5T_INTEGER && H5Sget_simple_extent_npoints(space) == 1;
  if (ok && H5Aread(attr, H5T_NATIVE_LLONG, out) < 0)
    ok = pc_attr_failed(why);
  pc_attr_close(attr, type, space);
  return ok;
}

/* The dumper's hints for the tolerance model (docs/tolerances.md): the length K of the
 * reduction that produced the tensor, the dtype it accumulated in, and its place in execution
 * order. Absent or malformed attributes leave the defaults (unknown); false, with why, when one
 * cannot be read. */
static bool pc_reduction_attrs(pc_dataset *d, hid_t dset, char why[PC_ATTR_WHY]) {
  char name[64];
  long long v = 0;
  int got = pc_read_int_attr(dset, "reduction_length", &v, why);
  if (got > 0 && v > 0)
    d->reduction_length = (uint64_t)v;
  if (got >= 0 && (got = pc_read_int_attr(dset, "execution_index", &v, why)) > 0 && v >= 0)
    d->exec_index = v;
  if (got >= 0 && H5Aexists(dset, "accumulation_dtype") > 0 &&
      (got = pc_read_string_attr(dset, "accumulation_dtype", name, sizeof name, why)) > 0)
    d->accumulation = pc_dtype_from_name(strncmp(name, "torch.", 6) == 0 ? name + 6 : name);
  H5Eclear2(H5E_DEFAULT);
  return got >= 0;
}

/* The module's class the dumper names (python/paritycheck/dump.py), for tolerance rules that
 * match on it (docs/tolerances.md). Absent or not a string: unknown. false, with why, when it
 * cannot be read, or out of memory. */
static bool pc_module_type_attr(pc_file *f, pc_dataset *d, hid_t dset, char why[PC_ATTR_WHY]) {
  char name[256];
  int got = 0;
  if (H5Aexists(dset, "module_type") > 0 &&
      (got = pc_read_string_attr(dset, "module_type", name, sizeof name, why)) > 0 &&
      !(d->module_type = pc_arena_strdup(&f->names, name))) {
    snprintf(why, PC_ATTR_WHY, "out of memory");
    got = -1;
  }
  H5Eclear2(H5E_DEFAULT);
  return got >= 0;
}

/* --- shape and storage ------------------------------------------------------------------ */

/* The shape; *overflow when the declared dimensions hold more than 2^64 - 1 elements. PC_EDATA
 * (HDF5's error), PC_ENOMEM. */
static int pc_read_shape(pc_file *f, pc_dataset *d, hid_t dset, bool *overflow) {
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
  uint64_t shape[PC_MAX_RANK];
  d->count = cls == H5S_NULL ? 0 : 1;
  *overflow = false;
  for (int i = 0; i < rank; i++) {
    shape[i] = dims[i];
    *overflow = *overflow || (dims[i] && d->count > UINT64_MAX / dims[i]);
    d->count *= dims[i];
  }
  H5Sclose(space);
  return pc_dataset_set_shape(f, d, rank, shape);
}

/* Numeric datasets only: the checks that decide whether it can be read, and how. */
static int pc_describe_numeric(pc_file *f, pc_dataset *d, hid_t dset, hid_t type) {
  char why[PC_ATTR_WHY], text[PC_ATTR_WHY + 32];
  if (!pc_logical_dtype(d, dset, why) || !pc_reduction_attrs(d, dset, why) ||
      !pc_module_type_attr(f, d, dset, why)) {
    snprintf(text, sizeof text, "cannot read its attributes: %s", why);
    return pc_dataset_set_error(f, d, text);
  }
  return pc_h5_describe_storage(f, d, dset, type);
}

/* dset: the dataset, open (the caller closes it). */
static int pc_describe_dataset(pc_file *f, hid_t dset, const char *path, pc_error *err) {
  pc_dataset *d = NULL;
  int rc = pc_file_add(f, &d, path, err);
  if (rc < 0)
    return rc;
  char h5err[256];
  bool overflow = false;
  hid_t type = H5Dget_type(dset);
  int shape = type < 0 ? PC_EDATA : pc_read_shape(f, d, dset, &overflow);
  if (shape == PC_ENOMEM)
    rc = shape;
  else if (shape < 0)
    rc = pc_dataset_set_error(f, d, pc_h5_error(h5err, sizeof h5err));
  else if (overflow)
    rc = pc_dataset_set_error(f, d, "declared shape has more than 2^64 elements");
  else if ((rc = pc_classify_type(d, type)) == PC_OK && d->kind != PC_KIND_SKIPPED)
    rc = pc_describe_numeric(f, d, dset, type);
  if (type >= 0)
    H5Tclose(type);
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
  return pc_addr_add(&pc_h5_of(f)->visited, info.addr, first);
}

static int pc_add_entry(pc_file *f, const char *path, pc_kind kind, const char *why,
                        pc_error *err) {
  pc_dataset *d = NULL;
  int rc = pc_file_add(f, &d, path, err);
  if (rc == PC_OK && (kind == PC_KIND_ERROR ? pc_dataset_set_error(f, d, why)
                                            : pc_dataset_set_reason(d, kind, why)) < 0)
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
    rc = pc_describe_dataset(w->f, obj, path, w->err);
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

int pc_h5_walk(pc_file *f, pc_error *err) {
  char h5err[256];
  hid_t root = H5Gopen2(pc_h5_of(f)->fid, "/", H5P_DEFAULT);
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
  return rc;
}

/* --- file attributes (provenance) ---------------------------------------------------------- */

/* x with the fewest digits that read back as x. */
static void pc_print_double(char *buf, size_t size, double x) {
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(buf, size, "%.*g", digits, x);
    if (strtod(buf, NULL) == x)
      return;
  }
}

/* A scalar number or h5py boolean attribute as text; false when it is neither. */
static bool pc_number_attr(hid_t attr, hid_t type, char *buf, size_t size, pc_attr_kind *kind) {
  H5T_class_t c = H5Tget_class(type);
  *kind = PC_ATTR_NUMBER;
  if (c == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE) {
    unsigned long long v;
    return H5Aread(attr, H5T_NATIVE_ULLONG, &v) >= 0 && snprintf(buf, size, "%llu", v) > 0;
  }
  if (c == H5T_INTEGER) {
    long long v;
    return H5Aread(attr, H5T_NATIVE_LLONG, &v) >= 0 && snprintf(buf, size, "%lld", v) > 0;
  }
  if (c == H5T_FLOAT) {
    double v;
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, &v) < 0)
      return false;
    pc_print_double(buf, size, v);
    *kind = isfinite(v) ? PC_ATTR_NUMBER : PC_ATTR_STRING; /* JSON has no nan or inf */
    return true;
  }
  signed char v;
  *kind = PC_ATTR_BOOL;
  if (c != H5T_ENUM || !pc_is_h5py_bool(type) || H5Aread(attr, type, &v) < 0)
    return false;
  snprintf(buf, size, "%s", v ? "true" : "false");
  return true;
}

/* Attribute `name` of obj as text, when it is one scalar string, number or boolean. */
static bool pc_attr_text(hid_t obj, const char *name, char *buf, size_t size, pc_attr_kind *kind) {
  char why[PC_ATTR_WHY]; /* an unreadable attribute is left out of the provenance */
  *kind = PC_ATTR_STRING;
  if (pc_read_string_attr(obj, name, buf, size, why) > 0)
    return true;
  bool ok = false;
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
  hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
  if (type >= 0 && space >= 0 && H5Sget_simple_extent_npoints(space) == 1)
    ok = pc_number_attr(attr, type, buf, size, kind);
  pc_attr_close(attr, type, space);
  return ok;
}

bool pc_h5_dataset_attribute(pc_file *f, const pc_dataset *d, const char *name, char *buf,
                             size_t size) {
  pc_attr_kind kind;
  hid_t obj = H5Oopen(pc_h5_of(f)->fid, d->path, H5P_DEFAULT);
  bool ok = obj >= 0 && H5Aexists(obj, name) > 0 && pc_attr_text(obj, name, buf, size, &kind);
  if (obj >= 0)
    H5Oclose(obj);
  H5Eclear2(H5E_DEFAULT);
  return ok;
}

/* HDF5 converts any integer or float attribute to doubles (H5T_NATIVE_DOUBLE); anything else is
 * refused before it reads. */
static long pc_h5_numbers(hid_t fid, const char *path, const pc_numbers_req *req) {
  long n = -1;
  hid_t attr = H5Aopen_by_name(fid, path, req->name, H5P_DEFAULT, H5P_DEFAULT);
  hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
  hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
  H5T_class_t cls = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
  hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
  if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && points >= 1 && (size_t)points <= req->cap &&
      H5Sget_simple_extent_ndims(space) <= 1 && H5Aread(attr, H5T_NATIVE_DOUBLE, req->out) >= 0)
    n = (long)points;
  pc_attr_close(attr, type, space);
  return n;
}

/* Each attribute is opened by the dataset's path, from the file: the dataset itself is never
 * opened (H5Oopen of a dataset is a whole H5Dopen, its layout, type, space and fill value read
 * and checked: most of an envelope tensor's cost when it was opened for its attributes). A
 * missing attribute is an error of H5Aopen_by_name, cleared at the end. */
void pc_h5_dataset_numbers(pc_file *f, const pc_dataset *d, pc_numbers_req *req, size_t n) {
  for (size_t i = 0; i < n; i++)
    req[i].got = req[i].out && req[i].cap ? pc_h5_numbers(pc_h5_of(f)->fid, d->path, &req[i]) : -1;
  H5Eclear2(H5E_DEFAULT);
}

typedef struct pc_attr_walk {
  pc_file *f;
  bool nomem;
} pc_attr_walk;

static herr_t pc_attr_cb(hid_t obj, const char *name, const H5A_info_t *info, void *data) {
  pc_attr_walk *w = data;
  char text[1024];
  pc_attr_kind kind;
  (void)info;
  if (!pc_attr_text(obj, name, text, sizeof text, &kind))
    return 0; /* not provenance: arrays, compounds, references */
  w->nomem = pc_file_add_attr(w->f, name, text, kind) < 0;
  return w->nomem ? -1 : 0;
}

/* Attributes that cannot be listed are no error: provenance is informative only. */
int pc_h5_attributes(pc_file *f, pc_error *err) {
  char h5err[256];
  pc_attr_walk w = {f, false};
  hid_t root = H5Gopen2(pc_h5_of(f)->fid, "/", H5P_DEFAULT);
  if (root < 0) {
    pc_h5_error(h5err, sizeof h5err);
    return PC_OK;
  }
  herr_t rc = H5Aiterate2(root, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, pc_attr_cb, &w);
  if (rc < 0 && !w.nomem && f->nattrs == 0) { /* creation order is not tracked */
    pc_h5_error(h5err, sizeof h5err);
    rc = H5Aiterate2(root, H5_INDEX_NAME, H5_ITER_INC, NULL, pc_attr_cb, &w);
  }
  if (rc < 0)
    pc_h5_error(h5err, sizeof h5err);
  H5Gclose(root);
  return w.nomem ? pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path) : PC_OK;
}
