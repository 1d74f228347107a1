/* The .npy header (npy.h) and the npy format behind the reader interface (format.h, flat.h):
 * one array, the dataset "/arr_0" (numpy's name for an unnamed array, as np.savez gives it),
 * read with pread from after the header (direct in C order). */
#include "npy.h"
#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memcmp, strcmp, strncmp */
#include <unistd.h>   /* pread */

static const unsigned char pc_npy_sig[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

bool pc_npy_magic(const unsigned char *b, size_t n) {
  return n >= sizeof pc_npy_sig && memcmp(b, pc_npy_sig, sizeof pc_npy_sig) == 0;
}

const char *pc_npy_prefix(const unsigned char *b, size_t n, uint64_t *total) {
  if (!pc_npy_magic(b, n))
    return "no npy magic";
  if (n < 10 || (b[6] != 1 && n < PC_NPY_PREFIX))
    return "npy header truncated";
  if (b[6] < 1 || b[6] > 3 || b[7] != 0)
    return "npy version not 1.0, 2.0 or 3.0";
  uint64_t len = b[6] == 1 ? (uint64_t)b[8] | (uint64_t)b[9] << 8
                           : (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
                                 (uint64_t)b[11] << 24;
  if (len > PC_NPY_HEADER_MAX)
    return "npy header longer than 1 MiB";
  *total = (b[6] == 1 ? 10 : 12) + len;
  /* Shorter than "{}" padded: numpy pads every header to 64 bytes; readers rely on a header
   * being at least the PC_NPY_PREFIX bytes they read first. */
  return *total < PC_NPY_PREFIX ? "npy header too short" : NULL;
}

/* --- the dict literal ------------------------------------------------------------------- */

/* A cursor over the dict's text: the few Python literals numpy writes (strings without
 * escapes, True, False, non-negative integers, tuples, and lists of tuples for structured
 * dtypes, which are only skipped). */
typedef struct pc_py {
  const char *s, *end;
} pc_py;

static void pc_py_space(pc_py *p) {
  while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
    p->s++;
}

static bool pc_py_eat(pc_py *p, char c) {
  pc_py_space(p);
  if (p->s == p->end || *p->s != c)
    return false;
  p->s++;
  return true;
}

static bool pc_py_peek(pc_py *p, char c) {
  pc_py_space(p);
  return p->s < p->end && *p->s == c;
}

/* A quoted string without escapes into out (size bytes with its NUL). */
static bool pc_py_string(pc_py *p, char *out, size_t size) {
  pc_py_space(p);
  if (p->s == p->end || (*p->s != '\'' && *p->s != '"'))
    return false;
  char q = *p->s++;
  size_t n = 0;
  while (p->s < p->end && *p->s != q && *p->s != '\\' && n + 1 < size)
    out[n++] = *p->s++;
  out[n] = '\0';
  return pc_py_eat(p, q);
}

static bool pc_py_word(pc_py *p, const char *w) {
  size_t n = strlen(w);
  pc_py_space(p);
  if ((size_t)(p->end - p->s) < n || strncmp(p->s, w, n) != 0)
    return false;
  p->s += n;
  return true;
}

/* A non-negative integer below 2^64 (Python 2's "L" suffix allowed). */
static bool pc_py_uint(pc_py *p, uint64_t *v) {
  pc_py_space(p);
  const char *start = p->s;
  *v = 0;
  for (; p->s < p->end && *p->s >= '0' && *p->s <= '9'; p->s++) {
    unsigned digit = (unsigned)(*p->s - '0');
    if (*v > (UINT64_MAX - digit) / 10)
      return false;
    *v = *v * 10 + digit;
  }
  if (p->s < p->end && *p->s == 'L')
    p->s++;
  return p->s > start;
}

/* Skips a bracketed value (a structured descr), strings included; false when unbalanced. */
static bool pc_py_skip(pc_py *p) {
  int depth = 0;
  char q = 0;
  pc_py_space(p);
  do {
    if (p->s == p->end)
      return false;
    char c = *p->s++;
    if (q)
      q = c == q ? 0 : q;
    else if (c == '\'' || c == '"')
      q = c;
    else if (c == '[' || c == '(')
      depth++;
    else if (c == ']' || c == ')')
      depth--;
  } while (depth > 0 || q);
  return depth == 0;
}

static bool pc_py_shape(pc_py *p, pc_npy_header *h) {
  if (!pc_py_eat(p, '('))
    return false;
  h->rank = 0;
  while (!pc_py_eat(p, ')')) {
    if (h->rank == PC_MAX_RANK || !pc_py_uint(p, &h->dims[h->rank++]))
      return false;
    if (!pc_py_eat(p, ',') && !pc_py_peek(p, ')'))
      return false;
  }
  return true;
}

/* The value of key `key`; `seen` collects the keys met (1 descr, 2 fortran_order, 4 shape). */
static const char *pc_py_entry(pc_py *p, const char *key, pc_npy_header *h, unsigned *seen) {
  if (strcmp(key, "descr") == 0) {
    *seen |= 1;
    h->descr[0] = '\0';
    return (pc_py_peek(p, '[') ? pc_py_skip(p) : pc_py_string(p, h->descr, sizeof h->descr))
               ? NULL
               : "npy descr is neither a dtype string nor a list";
  }
  if (strcmp(key, "fortran_order") == 0) {
    *seen |= 2;
    h->fortran = pc_py_word(p, "True");
    return h->fortran || pc_py_word(p, "False") ? NULL : "npy fortran_order is not True or False";
  }
  if (strcmp(key, "shape") == 0) {
    *seen |= 4;
    return pc_py_shape(p, h) ? NULL : "npy shape is not a tuple of at most 32 integers";
  }
  return "npy header has a key other than descr, fortran_order and shape";
}

const char *pc_npy_parse(const unsigned char *b, uint64_t total, pc_npy_header *h, char *why,
                         size_t size) {
  char key[32];
  unsigned seen = 0;
  const char *problem = pc_npy_prefix(b, (size_t)total, &h->data_at);
  if (problem)
    return problem;
  pc_py p = {(const char *)b + (b[6] == 1 ? 10 : 12), (const char *)b + total};
  if (!pc_py_eat(&p, '{'))
    return "npy header is not a dict";
  while (!pc_py_eat(&p, '}')) {
    if (!pc_py_string(&p, key, sizeof key) || !pc_py_eat(&p, ':'))
      return "npy header is not a dict of quoted keys";
    if ((problem = pc_py_entry(&p, key, h, &seen)) != NULL)
      return problem;
    if (!pc_py_eat(&p, ',') && !pc_py_peek(&p, '}'))
      return "npy header dict is malformed";
  }
  if (seen != 7) {
    snprintf(why, size, "npy header lacks %s",
             !(seen & 1)   ? "descr"
             : !(seen & 2) ? "fortran_order"
                           : "shape");
    return why;
  }
  return NULL;
}

/* --- classification --------------------------------------------------------------------- */

/* The dtype of descr's kind letter and size in bytes (after the byte-order character); the
 * component's dtype for complex. */
static pc_dtype pc_npy_dtype(char kind, unsigned long bytes) {
  switch (kind) {
  case 'f':
    return bytes == 2   ? PC_DTYPE_FLOAT16
           : bytes == 4 ? PC_DTYPE_FLOAT32
           : bytes == 8 ? PC_DTYPE_FLOAT64
                        : PC_DTYPE_NONE;
  case 'c':
    return bytes == 8 ? PC_DTYPE_FLOAT32 : bytes == 16 ? PC_DTYPE_FLOAT64 : PC_DTYPE_NONE;
  case 'i':
    return bytes == 1   ? PC_DTYPE_INT8
           : bytes == 2 ? PC_DTYPE_INT16
           : bytes == 4 ? PC_DTYPE_INT32
           : bytes == 8 ? PC_DTYPE_INT64
                        : PC_DTYPE_NONE;
  case 'u':
    return bytes == 1   ? PC_DTYPE_UINT8
           : bytes == 2 ? PC_DTYPE_UINT16
           : bytes == 4 ? PC_DTYPE_UINT32
           : bytes == 8 ? PC_DTYPE_UINT64
                        : PC_DTYPE_NONE;
  case 'b':
    return bytes == 1 ? PC_DTYPE_BOOL : PC_DTYPE_NONE;
  default:
    return PC_DTYPE_NONE;
  }
}

/* Sets d's dtype from descr (e.g. "<c8"); false when it is not a numeric dtype we read. */
static bool pc_npy_classify(pc_dataset *d, const char *descr) {
  char *end = NULL;
  if (!descr[0] || !strchr("<>|=", descr[0]) || !descr[1] || descr[2] < '0' || descr[2] > '9')
    return false;
  unsigned long bytes = strtoul(descr + 2, &end, 10);
  d->stored = *end ? PC_DTYPE_NONE : pc_npy_dtype(descr[1], bytes);
  if (d->stored == PC_DTYPE_NONE)
    return false;
  d->kind = descr[1] == 'c' ? PC_KIND_COMPLEX : descr[1] == 'f' ? PC_KIND_FLOAT : PC_KIND_INTEGER;
  d->logical = d->stored;
  d->elem_size = (size_t)bytes;
  d->re_offset = 0;
  d->im_offset = bytes / 2;
  d->swap =
      (descr[0] == '<' && !pc_flat_little_endian()) || (descr[0] == '>' && pc_flat_little_endian());
  return true;
}

int pc_npy_describe(pc_file *f, pc_dataset *d, pc_flat_array *a, const pc_npy_header *h,
                    uint64_t available) {
  char why[160];
  if (!h->descr[0])
    return pc_dataset_set_reason(d, PC_KIND_SKIPPED, "npy structured dtype (not complex)");
  if (!pc_npy_classify(d, h->descr)) {
    snprintf(why, sizeof why, "npy dtype '%s' not supported (not numeric)", h->descr);
    return pc_dataset_set_reason(d, PC_KIND_SKIPPED, why);
  }
  int shape = pc_flat_shape(f, d, h->rank, h->dims);
  if (shape < 0)
    return shape == PC_ENOMEM
               ? shape
               : pc_dataset_set_error(f, d, "declared shape has more than 2^64 bytes");
  if (d->count * d->elem_size > available) {
    snprintf(why, sizeof why, "npy data holds %" PRIu64 " bytes, dtype %s and shape need %" PRIu64,
             available, h->descr, d->count * d->elem_size);
    return pc_dataset_set_error(f, d, why);
  }
  pc_flat_set_fortran(d, a, h->fortran);
  return PC_OK;
}

/* --- the npy format --------------------------------------------------------------------- */

static bool pc_npy_sniff(const pc_file *f) {
  unsigned char head[sizeof pc_npy_sig];
  return pread(f->fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
         pc_npy_magic(head, sizeof head);
}

/* The whole header into h; PC_EIO naming the file when it is not one. */
static int pc_npy_read_header(pc_file *f, pc_npy_header *h, pc_error *err) {
  unsigned char prefix[PC_NPY_PREFIX];
  char why[160];
  uint64_t total = 0;
  ssize_t got = pread(f->fd, prefix, sizeof prefix, 0);
  const char *problem =
      got < 0 ? "cannot read the npy header" : pc_npy_prefix(prefix, (size_t)got, &total);
  if (!problem && total > f->size)
    problem = "npy header truncated";
  unsigned char *b = problem ? NULL : malloc((size_t)total);
  if (!problem && !b)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  if (!problem && pread(f->fd, b, (size_t)total, 0) != (ssize_t)total)
    problem = "cannot read the npy header";
  if (!problem)
    problem = pc_npy_parse(b, total, h, why, sizeof why);
  free(b);
  return problem ? pc_error_set(err, PC_EIO, "%s: %s", f->path, problem) : PC_OK;
}

static int pc_npy_open(pc_file *f, pc_error *err) {
  pc_npy_header h;
  pc_dataset *d;
  pc_flat_array *a;
  int rc = pc_flat_init(f, err);
  if (rc == PC_OK)
    rc = pc_npy_read_header(f, &h, err);
  if (rc == PC_OK)
    rc = pc_flat_add(f, &d, &a, "/arr_0", err);
  if (rc < 0)
    return rc;
  a->offset = h.data_at;
  if (pc_npy_describe(f, d, a, &h, f->size - h.data_at) < 0)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", f->path);
  a->in_file = d->kind != PC_KIND_SKIPPED && d->kind != PC_KIND_ERROR;
  return PC_OK;
}

static int pc_npy_read(pc_reader *r, const pc_block *b, void *raw, pc_error *err) {
  return pc_flat_read(r, b, raw, pc_flat_pread, err);
}

const pc_format pc_format_npy = {
    .name = "npy",
    .sniff = pc_npy_sniff,
    .open = pc_npy_open,
    .close = pc_flat_free,
    .open_dataset = pc_flat_open_dataset,
    .close_dataset = pc_flat_close_dataset,
    .chunk_extent = pc_flat_chunk_extent,
    .direct = pc_flat_direct,
    .read = pc_npy_read,
};
