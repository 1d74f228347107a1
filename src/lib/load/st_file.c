/* The safetensors format behind the reader interface (format.h, flat.h): an 8-byte little-endian
 * header length N, N bytes of JSON (parsed with jansson), then the data buffer. Each tensor is
 * one little-endian, row-major run of the buffer, read with pread (direct). Tensor NAME is the
 * dataset "/NAME" ("/" + name; a name that starts with "/" is kept as it is), so that the
 * dumper's HDF5 paths and safetensors names of the same tensors compare (docs/formats.md). */
#include "flat.h"
#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <jansson.h>
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, free, qsort */
#include <string.h> /* strcmp */
#include <unistd.h> /* pread */

/* The reference implementation refuses a larger header; so do we, before allocating it. */
enum { PC_ST_HEADER_MAX = 100000000 };

typedef struct pc_st_dtype {
  const char *name;
  pc_dtype dt;
} pc_st_dtype;

static const pc_st_dtype pc_st_dtypes[] = {
    {"F64", PC_DTYPE_FLOAT64},
    {"F32", PC_DTYPE_FLOAT32},
    {"F16", PC_DTYPE_FLOAT16},
    {"BF16", PC_DTYPE_BFLOAT16},
    {"F8_E4M3", PC_DTYPE_FLOAT8_E4M3FN},
    {"F8_E5M2", PC_DTYPE_FLOAT8_E5M2},
    {"I8", PC_DTYPE_INT8},
    {"I16", PC_DTYPE_INT16},
    {"I32", PC_DTYPE_INT32},
    {"I64", PC_DTYPE_INT64},
    {"U8", PC_DTYPE_UINT8},
    {"U16", PC_DTYPE_UINT16},
    {"U32", PC_DTYPE_UINT32},
    {"U64", PC_DTYPE_UINT64},
    {"BOOL", PC_DTYPE_BOOL},
};

static uint64_t pc_le64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | b[i];
  return v;
}

/* No magic number: the JSON object's '{' right after a header length below 2^32 (any text has
 * printable bytes in the length's high half). */
static bool pc_st_sniff(const pc_file *f) {
  unsigned char head[9];
  return f->size >= sizeof head && pread(f->fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
         head[8] == '{' && pc_le64(head) >> 32 == 0;
}

/* A JSON array of n non-negative integers (n = its size, at most `max`) into v; false if not. */
static bool pc_st_uints(const json_t *arr, uint64_t *v, size_t max, size_t *n) {
  if (!json_is_array(arr) || json_array_size(arr) > max)
    return false;
  *n = json_array_size(arr);
  for (size_t i = 0; i < *n; i++) {
    const json_t *x = json_array_get(arr, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return false;
    v[i] = (uint64_t)json_integer_value(x);
  }
  return true;
}

/* pc_st_describe's answer when memory ran out: the run's error, not the tensor's. */
static const char pc_st_nomem[] = "out of memory";

/* Why tensor d (its JSON entry `t`) cannot be read, in why, or NULL when it can: then its dtype,
 * shape and place (a->offset, absolute) are set. pc_st_nomem when memory ran out. */
static const char *pc_st_describe(pc_file *f, pc_dataset *d, pc_flat_array *a, const json_t *t,
                                  uint64_t data_at, uint64_t buffer, char *why, size_t size) {
  uint64_t dims[PC_MAX_RANK], off[2];
  size_t rank = 0, noff = 0;
  const char *dtype = json_string_value(json_object_get(t, "dtype"));
  if (!json_is_object(t) || !dtype)
    return "header entry has no dtype string";
  if (!pc_st_uints(json_object_get(t, "shape"), dims, PC_MAX_RANK, &rank)) {
    snprintf(why, size, "shape is not a list of at most %d non-negative integers", PC_MAX_RANK);
    return why;
  }
  if (!pc_st_uints(json_object_get(t, "data_offsets"), off, 2, &noff) || noff != 2)
    return "data_offsets is not a pair of non-negative integers";
  for (size_t i = 0; i < sizeof pc_st_dtypes / sizeof *pc_st_dtypes; i++)
    if (strcmp(dtype, pc_st_dtypes[i].name) == 0)
      d->stored = pc_st_dtypes[i].dt;
  d->elem_size = pc_dtype_size(d->stored);
  int shape = pc_flat_shape(f, d, (int)rank, dims);
  if (shape < 0)
    return shape == PC_ENOMEM ? pc_st_nomem : "declared shape has more than 2^64 bytes";
  if (off[0] > off[1] || off[1] > buffer) {
    snprintf(why, size,
             "data_offsets [%" PRIu64 ", %" PRIu64 "] lie outside the data buffer of %" PRIu64
             " bytes",
             off[0], off[1], buffer);
    return why;
  }
  if (d->stored != PC_DTYPE_NONE && off[1] - off[0] != d->count * d->elem_size) {
    snprintf(why, size, "data_offsets hold %" PRIu64 " bytes, dtype %s and shape need %" PRIu64,
             off[1] - off[0], dtype, d->count * d->elem_size);
    return why;
  }
  a->offset = data_at + off[0];
  a->in_file = true;
  return NULL;
}

/* One tensor: a dataset, or an entry that says why it cannot be read. */
static int pc_st_tensor(pc_file *f, const char *name, const json_t *t, uint64_t data_at,
                        pc_error *err) {
  char why[256];
  pc_dataset *d;
  pc_flat_array *a;
  char *path = pc_flat_path(name, 0);
  int rc = path ? pc_flat_add(f, &d, &a, path, err)
                : pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  free(path);
  if (rc < 0)
    return rc;
  const char *problem = pc_st_describe(f, d, a, t, data_at, f->size - data_at, why, sizeof why);
  if (problem == pc_st_nomem) {
    rc = PC_ENOMEM;
  } else if (problem) {
    a->in_file = false;
    rc = pc_dataset_set_error(f, d, problem);
  } else if (d->stored == PC_DTYPE_NONE) {
    snprintf(why, sizeof why, "safetensors dtype %s not supported",
             json_string_value(json_object_get(t, "dtype")));
    a->in_file = false;
    rc = pc_dataset_set_reason(d, PC_KIND_SKIPPED, why);
  } else {
    d->kind = pc_dtype_is_float(d->stored) ? PC_KIND_FLOAT : PC_KIND_INTEGER;
    d->logical = d->stored;
    d->swap = !pc_flat_little_endian();
  }
  return rc < 0 ? pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path) : PC_OK;
}

/* The readable datasets' runs, by their first byte. */
typedef struct pc_st_run {
  uint64_t begin, end;
  size_t ds;
} pc_st_run;

static int pc_st_by_begin(const void *x, const void *y) {
  const pc_st_run *a = x, *b = y;
  return a->begin < b->begin ? -1 : a->begin > b->begin;
}

/* Marks d an error whose bytes overlap those of `other`, unless an earlier overlap did. */
static int pc_st_overlap(pc_file *f, pc_dataset *d, const pc_dataset *other) {
  char why[PC_ERROR_MESSAGE_MAX];
  if (d->kind == PC_KIND_ERROR)
    return PC_OK;
  snprintf(why, sizeof why, "its bytes overlap those of %s", other->path);
  return pc_dataset_set_error(f, d, why);
}

/* Two tensors whose bytes overlap are both errors (one write would change the other): every
 * overlapping pair, not only neighbours by offset, since a run that reaches past its neighbour
 * (a = [0, 40) over b = [8, 16) and c = [24, 32)) overlaps later runs too. Runs are taken by
 * their first byte and each is checked against the one that reaches furthest before it. */
static int pc_st_overlaps(pc_file *f, pc_error *err) {
  pc_flat_file *s = pc_flat_of(f);
  pc_st_run *runs = malloc((f->n ? f->n : 1) * sizeof *runs);
  size_t n = 0;
  if (!runs)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < f->n; i++)
    if (s->arrays[i].in_file && f->ds[i].count > 0)
      runs[n++] = (pc_st_run){s->arrays[i].offset,
                              s->arrays[i].offset + f->ds[i].count * f->ds[i].elem_size, i};
  qsort(runs, n, sizeof *runs, pc_st_by_begin);
  int rc = PC_OK;
  size_t far = 0; /* the run before i that ends last */
  for (size_t i = 1; i < n && rc == PC_OK; i++) {
    if (runs[i].begin < runs[far].end) {
      pc_dataset *x = &f->ds[runs[far].ds], *y = &f->ds[runs[i].ds];
      if ((rc = pc_st_overlap(f, x, y)) == PC_OK)
        rc = pc_st_overlap(f, y, x);
    }
    if (runs[i].end > runs[far].end)
      far = i;
  }
  free(runs);
  return rc < 0 ? pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path) : PC_OK;
}

/* The header as read: its text, and what the counting walk found in it. */
typedef struct pc_st_header {
  char *text;
  size_t len;
  size_t entries;     /* top-level keys */
  uint64_t need;      /* metadata bytes they will make (pc_st_count) */
  bool have_metadata; /* __metadata__ seen */
} pc_st_header;

/* Entries between two progress calls: a few milliseconds of parsing. */
enum { PC_ST_BEAT = 1 << 14 };

static int pc_st_bad_json(const pc_file *f, const char *why, size_t at, pc_error *err) {
  return pc_error_set(err, PC_EIO, "%s: safetensors header is not valid JSON: %s (byte %zu)",
                      f->path, why, at);
}

/* The header's text, read whole once its length is known to fit the memory limit (it is the
 * first of the file's metadata); PC_EIO naming the file when it is not a safetensors header. */
static int pc_st_read_header(pc_file *f, pc_st_header *h, pc_error *err) {
  unsigned char head[8];
  if (pread(f->fd, head, sizeof head, 0) != (ssize_t)sizeof head)
    return pc_error_set(err, PC_EIO, "%s: cannot read the safetensors header", f->path);
  uint64_t len = pc_le64(head);
  if (len > PC_ST_HEADER_MAX || len > f->size - sizeof head)
    return pc_error_set(err, PC_EIO,
                        "%s: safetensors header of %" PRIu64 " bytes is %s (the file has %" PRIu64
                        " bytes)",
                        f->path, len, len > PC_ST_HEADER_MAX ? "absurd" : "truncated", f->size);
  if (!pc_file_charge(f, len)) {
    char need[96];
    snprintf(need, sizeof need, "%" PRIu64 " bytes for its safetensors header alone", len);
    return pc_file_over_limit(f, need, err);
  }
  h->len = (size_t)len;
  if (!(h->text = malloc(h->len ? h->len : 1)))
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  if (pread(f->fd, h->text, h->len, sizeof head) != (ssize_t)h->len)
    return pc_error_set(err, PC_EIO, "%s: cannot read the safetensors header", f->path);
  return PC_OK;
}

static size_t pc_st_space(const char *t, size_t len, size_t at) {
  while (at < len && (t[at] == ' ' || t[at] == '\t' || t[at] == '\n' || t[at] == '\r'))
    at++;
  return at;
}

/* Where the JSON value that starts at `at` ends: after its closing quote or bracket, or (a
 * number or literal) at the next delimiter; len when it does not end. Only strings and
 * brackets are followed, to find the end: jansson checks the value itself (pc_st_decode). One
 * pass, no recursion, whatever the nesting. */
static size_t pc_st_value_end(const char *t, size_t len, size_t at) {
  size_t depth = 0;
  bool quoted = false;
  for (size_t i = at; i < len; i++) {
    char c = t[i];
    if (quoted) {
      if (c == '\\')
        i++;
      else if (c == '"' && (quoted = false, depth == 0))
        return i + 1;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth == 0)
        return i; /* a number or literal ends at its container's close */
      if (--depth == 0)
        return i + 1;
    } else if (depth == 0 && strchr(",: \t\n\r", c)) {
      return i;
    }
  }
  return len;
}

/* One top-level entry: the key's text [key, key_end) and the value's [val, val_end). */
typedef struct pc_st_entry {
  size_t key, key_end, val, val_end;
} pc_st_entry;

typedef int (*pc_st_entry_fn)(pc_file *f, pc_st_header *h, const pc_st_entry *e, pc_error *err);

/* The header's object, entry by entry, in order: its keys and values are found by
 * pc_st_value_end, so that the header never becomes one tree of JSON (1.6 M tensors made
 * 1.8 GB of jansson's nodes; issue 30). */
static int pc_st_walk(pc_file *f, pc_st_header *h, pc_st_entry_fn fn, pc_error *err) {
  const char *t = h->text;
  size_t n = h->len, at = pc_st_space(t, n, 0);
  if (at == n || t[at] != '{')
    return pc_error_set(err, PC_EIO, "%s: safetensors header is not a JSON object", f->path);
  at = pc_st_space(t, n, at + 1);
  bool empty = at < n && t[at] == '}';
  for (size_t k = 0; !empty; k++) {
    pc_st_entry e = {at, pc_st_value_end(t, n, at), 0, 0};
    if (at == n || t[at] != '"')
      return pc_st_bad_json(f, "string or '}' expected", at, err);
    at = pc_st_space(t, n, e.key_end);
    if (at == n || t[at] != ':')
      return pc_st_bad_json(f, "':' expected", at, err);
    e.val = pc_st_space(t, n, at + 1);
    e.val_end = pc_st_value_end(t, n, e.val);
    int rc = fn(f, h, &e, err);
    if (rc < 0)
      return rc;
    if (k % PC_ST_BEAT == 0 && f->lim.progress)
      f->lim.progress(f->lim.progress_user, 0, 0);
    at = pc_st_space(t, n, e.val_end);
    if (at < n && t[at] == '}')
      break;
    if (at == n || t[at] != ',')
      return pc_st_bad_json(f, "',' or '}' expected", at, err);
    at = pc_st_space(t, n, at + 1);
  }
  at = pc_st_space(t, n, at + 1);
  return at == n ? PC_OK : pc_st_bad_json(f, "end of header expected", at, err);
}

/* The counting walk: the metadata each entry will make, before any is made. */
static int pc_st_count(pc_file *f, pc_st_header *h, const pc_st_entry *e, pc_error *err) {
  (void)f;
  (void)err;
  h->entries++;
  h->need += pc_file_record_bytes(e->key_end - e->key) + sizeof(pc_flat_array);
  return PC_OK;
}

/* The header and the records its entries will make, against the memory limit: the need is
 * known before the first record is made. */
static int pc_st_afford(pc_file *f, const pc_st_header *h, pc_error *err) {
  char need[160];
  if (pc_file_charge(f, h->need)) {
    f->meta_bytes -= h->need; /* pc_file_add counts each record as it is made */
    return PC_OK;
  }
  snprintf(need, sizeof need,
           "%" PRIu64 " bytes (a safetensors header of %zu bytes and the records of %zu tensors)",
           f->meta_bytes + h->need, h->len, h->entries);
  return pc_file_over_limit(f, need, err);
}

/* [from, to) of the header as one JSON value; PC_EIO with jansson's reason and the byte. */
static int pc_st_decode(const pc_file *f, const pc_st_header *h, size_t from, size_t to,
                        json_t **out, pc_error *err) {
  json_error_t jerr;
  *out = json_loadb(h->text + from, to - from, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
  return *out ? PC_OK : pc_st_bad_json(f, jerr.text, from + (size_t)jerr.position, err);
}

/* __metadata__ maps names to strings (the specification; the reference implementation refuses
 * anything else). */
static bool pc_st_metadata_ok(const json_t *meta) {
  const char *key;
  const json_t *v;
  if (!json_is_object(meta))
    return false;
  json_object_foreach((json_t *)meta, key, v) {
    if (!json_is_string(v))
      return false;
  }
  return true;
}

/* The building walk: a tensor, or the __metadata__ map (at most once). */
static int pc_st_build(pc_file *f, pc_st_header *h, const pc_st_entry *e, pc_error *err) {
  json_t *key = NULL, *value = NULL;
  int rc = pc_st_decode(f, h, e->key, e->key_end, &key, err);
  if (rc == PC_OK && !json_is_string(key))
    rc = pc_st_bad_json(f, "string or '}' expected", e->key, err);
  if (rc == PC_OK)
    rc = pc_st_decode(f, h, e->val, e->val_end, &value, err);
  const char *name = rc == PC_OK ? json_string_value(key) : NULL;
  bool meta = name && strcmp(name, "__metadata__") == 0;
  if (name && !meta)
    rc = pc_st_tensor(f, name, value, 8 + h->len, err);
  else if (meta && h->have_metadata)
    rc = pc_st_bad_json(f, "duplicate object key", e->key, err);
  else if (meta && !pc_st_metadata_ok(value))
    rc = pc_error_set(err, PC_EIO, "%s: safetensors __metadata__ is not a map of strings", f->path);
  h->have_metadata = h->have_metadata || meta;
  json_decref(key);
  json_decref(value);
  return rc;
}

static int pc_st_open(pc_file *f, pc_error *err) {
  pc_st_header h = {NULL, 0, 0, 0, false};
  int rc = pc_flat_init(f, err);
  if (rc == PC_OK)
    rc = pc_st_read_header(f, &h, err);
  if (rc == PC_OK)
    rc = pc_st_walk(f, &h, pc_st_count, err);
  if (rc == PC_OK)
    rc = pc_st_afford(f, &h, err);
  if (rc == PC_OK)
    rc = pc_st_walk(f, &h, pc_st_build, err);
  free(h.text);
  return rc == PC_OK ? pc_st_overlaps(f, err) : rc;
}

static int pc_st_read(pc_reader *r, const pc_block *b, void *raw, pc_error *err) {
  return pc_flat_read(r, b, raw, pc_flat_pread, err);
}

const pc_format pc_format_safetensors = {
    .name = "safetensors",
    .sniff = pc_st_sniff,
    .open = pc_st_open,
    .close = pc_flat_free,
    .open_dataset = pc_flat_open_dataset,
    .close_dataset = pc_flat_close_dataset,
    .chunk_extent = pc_flat_chunk_extent,
    .direct = pc_flat_direct,
    .read = pc_st_read,
};
