/* The format-free half of reading a dataset (loader.h): blocks are cut here, the same way for
 * every format, so that two datasets of the same shape are read side by side block for block
 * whatever their files; the format only reads a block's stored bytes. */
#include "format.h"
#include "numerics.h"
#include "pc_internal.h"

#include <stdlib.h> /* calloc, malloc, free */

/* Blocks align to chunks when that costs at most this factor in block size. */
enum { PC_CHUNK_ALIGN_MAX = 4 };

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
  uint64_t c = r->f->format->chunk_extent(r, r->split);
  if (c && r->step >= c)
    r->step -= r->step % c;
  else if (c && c * inner <= PC_CHUNK_ALIGN_MAX * (uint64_t)block)
    r->step = c;
}

size_t pc_reader_max_block(const pc_reader *r) {
  uint64_t n = r->split < 0 ? r->ds->count : r->step * r->inner;
  return (size_t)(n ? n : 1);
}

int pc_reader_open(pc_reader **out, pc_file *f, const pc_dataset *ds, size_t block_elems,
                   const pc_reader *like, pc_error *err) {
  *out = NULL;
  pc_reader *r = calloc(1, sizeof *r);
  if (!r)
    return pc_error_set(err, PC_ENOMEM, "%s: %s: out of memory", f->path, ds->path);
  r->f = f;
  r->ds = ds;
  int rc = f->format->open_dataset(r, err);
  if (rc < 0) {
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
  r->direct = f->format->direct(r, &r->offset);
  *out = r;
  return PC_OK;
}

/* The next block, advancing past it: the elements [r->done, r->done + b->n) of the dataset. */
static void pc_reader_advance(pc_reader *r, pc_block *b) {
  const pc_dataset *d = r->ds;
  b->first = r->done;
  b->whole = r->split < 0 || d->rank == 0;
  if (b->whole) {
    b->n = d->count;
    return;
  }
  uint64_t left = d->dims[r->split] - r->pos[r->split];
  uint64_t steps = left < r->step ? left : r->step;
  for (int i = 0; i < d->rank; i++) {
    b->start[i] = r->pos[i];
    b->count[i] = i < r->split ? 1 : i == r->split ? steps : d->dims[i];
  }
  /* Advance like an odometer: the split dimension, then the ones before it. */
  r->pos[r->split] += steps;
  for (int i = r->split; i > 0 && r->pos[i] == d->dims[i]; i--) {
    r->pos[i] = 0;
    r->pos[i - 1]++;
  }
  b->n = steps * r->inner;
}

bool pc_reader_direct(const pc_reader *r) {
  return r->direct;
}

int pc_reader_next_span(pc_reader *r, uint64_t *file_offset, size_t *n) {
  pc_block b;
  *n = 0;
  *file_offset = r->offset + r->done * r->ds->elem_size; /* elements [done, done + k) */
  if (!r->direct)
    return PC_EUSAGE;
  if (r->done >= r->ds->count)
    return PC_OK;
  pc_reader_advance(r, &b);
  r->done += b.n;
  *n = (size_t)b.n;
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
  pc_block b;
  *n = 0;
  if (r->done >= r->ds->count)
    return PC_OK;
  pc_reader_advance(r, &b);
  int rc = r->f->format->read(r, &b, raw, err);
  if (rc < 0)
    return rc;
  r->done += b.n;
  *n = (size_t)b.n;
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
  r->f->format->close_dataset(r);
  free(r->raw);
  free(r->values);
  free(r->ints);
  free(r);
}
