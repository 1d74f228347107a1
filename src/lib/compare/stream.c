/* The streaming pipeline (stream.h). The calling thread reads blocks into a ring of slots and
 * merges finished slots from the ring's head, so merges happen in block order; workers take
 * queued slots, decode both sides and fold them with the element kernels, and so does the
 * calling thread with small slots while the ring is full (pc_help).
 *
 * A side whose dataset lies contiguously in its file (pc_reader_direct) is not read by the
 * calling thread: it only records where the block's bytes are, and the worker reads them from the
 * file with pread before it folds them (docs/performance.md, "Direct reads").
 *
 * When both sides are sparse (loader.h), the elements that neither side wrote are not read:
 * the readers seek past them, and a slot holds the whole run of fill pairs, which the worker
 * folds at once (fill.h). Such a run is cut at block starts, so blocks stay where they would be
 * without it. */
#include "stream.h"
#include "envelope.h"
#include "evidence.h"
#include "fill.h"
#include "kernel.h"
#include "pc_internal.h"

#include <errno.h>   /* errno, EINTR */
#include <pthread.h> /* pthread_create, pthread_mutex_t, pthread_cond_t */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* calloc, realloc, free */
#include <string.h>  /* memcmp, memset, strerror_r */
#include <unistd.h>  /* pread */

enum { PC_SLOT_FILLING, PC_SLOT_QUEUED, PC_SLOT_RUNNING, PC_SLOT_DONE };

typedef struct pc_slot {
  int state;
  pc_tensor *t;
  const pc_dataset *a, *b;
  uint64_t base;
  size_t n;
  uint64_t fill_n; /* > 0: instead of a read block, a run of fill_n fill pairs from `base` */
  bool last;       /* closes its tensor */
  void *raw[2];    /* stored bytes of A and B (the worker reads a direct side's into it) */
  size_t raw_cap[2];
  /* Per side, A, B and the envelope's bound (side PC_SIDE_E): >= 0, that side's bytes are still
   * in this file, from byte at[side] (the worker reads them); the files' paths, for read
   * errors. */
  int fd[3];
  uint64_t at[3];
  const char *file[3];
  bool nomem;                     /* the worker could not allocate its scratch */
  char why[PC_ERROR_MESSAGE_MAX]; /* the worker could not read the file: why; "" otherwise */
  pc_stats part;
  pc_qhist *hist[PC_NHISTS];
  const pc_dataset *e; /* the envelope's per-element bound, read beside A and B, or NULL */
  void *env;           /* its stored bytes for this block (the worker reads a direct one's) */
  size_t env_cap;
} pc_slot;

/* Decoding scratch of one worker, grown to the largest block it has met. */
typedef struct pc_worker {
  pc_stream *s;
  pthread_t tid;
  double *vals[2];
  int64_t *ints[2];
  size_t cap;
  double *env; /* the envelope's bound, decoded */
  size_t env_cap;
} pc_worker;

struct pc_stream {
  pc_stream_config cfg;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  bool stop;
  pc_slot *slots;
  size_t nslots, head, used;
  pc_worker *workers;        /* cfg.threads of them, or one used inline */
  unsigned nthreads;         /* threads started */
  unsigned idle;             /* workers waiting for work: a queued slot wakes one only then */
  pc_qhist *hist[PC_NHISTS]; /* of the tensor being merged */
  uint64_t bytes_done;
  /* The first tensor whose block scratch or quantiles could not be allocated: the run then
   * fails with PC_ENOMEM, as every other allocation failure does (compare.h). */
  const pc_tensor *nomem;
};

/* --- workers ------------------------------------------------------------------------------ */

static bool pc_worker_reserve(pc_worker *w, size_t n) {
  if (n <= w->cap)
    return true;
  for (int side = 0; side < 2; side++) {
    double *v = realloc(w->vals[side], 2 * n * sizeof *v); /* complex: two per element */
    int64_t *i = v ? realloc(w->ints[side], n * sizeof *i) : NULL;
    if (v)
      w->vals[side] = v;
    if (i)
      w->ints[side] = i;
    if (!v || !i)
      return false;
  }
  w->cap = n;
  return true;
}

/* `ra`, `rb`: the slot's stored bytes of A and B, wherever they are. */
static bool pc_bytes_identical(const pc_slot *sl, const unsigned char *ra,
                               const unsigned char *rb) {
  const pc_dataset *a = sl->a, *b = sl->b;
  return a->kind == PC_KIND_FLOAT && b->kind == PC_KIND_FLOAT && a->stored == b->stored &&
         a->swap == b->swap && memcmp(ra, rb, sl->n * a->elem_size) == 0;
}

/* `same`: the stored bytes of both sides are identical (pc_bytes_identical). */
static void pc_worker_kernels(pc_worker *w, pc_slot *sl, const pc_kernel_args *k, bool same) {
  const pc_dataset *a = sl->a, *b = sl->b;
  const double *va = w->vals[0], *vb = w->vals[1];
  const int64_t *ia = w->ints[0], *ib = w->ints[1];
  bool ua = a->stored == PC_DTYPE_UINT64, ub = b->stored == PC_DTYPE_UINT64;
  if (a->kind == PC_KIND_COMPLEX)
    pc_kernel_complex(k, va, vb);
  else if (a->kind == PC_KIND_INTEGER && b->kind == PC_KIND_INTEGER)
    pc_kernel_int(k, ia, ua, ib, ub);
  else if (a->kind == PC_KIND_FLOAT && b->kind == PC_KIND_FLOAT)
    same ? pc_kernel_identical(k, va) : pc_kernel_float(k, va, vb);
  else
    pc_kernel_mixed(k, a->kind == PC_KIND_INTEGER ? NULL : va, ia, ua,
                    b->kind == PC_KIND_INTEGER ? NULL : vb, ib, ub);
}

static bool pc_f32_logical(pc_dtype dt) {
  return dt == PC_DTYPE_FLOAT32 || dt == PC_DTYPE_BFLOAT16;
}

/* float32 stored on both sides in the machine's byte order, judged as float32 or bfloat16 (the
 * commonest dumps, torch's bf16 saved as tagged float32 included): folded from the stored bytes
 * without decoding. */
static bool pc_f32_direct(const pc_slot *sl) {
  const pc_dataset *a = sl->a, *b = sl->b;
  return a->kind == PC_KIND_FLOAT && b->kind == PC_KIND_FLOAT && a->stored == PC_DTYPE_FLOAT32 &&
         b->stored == PC_DTYPE_FLOAT32 && !a->swap && !b->swap && pc_f32_logical(a->logical) &&
         pc_f32_logical(b->logical) && pc_f32_logical(sl->t->compare);
}

/* float16 stored and judged on both sides, in the machine's byte order: likewise. */
static bool pc_f16_direct(const pc_slot *sl) {
  const pc_dataset *a = sl->a, *b = sl->b;
  return a->kind == PC_KIND_FLOAT && b->kind == PC_KIND_FLOAT && a->stored == PC_DTYPE_FLOAT16 &&
         b->stored == PC_DTYPE_FLOAT16 && !a->swap && !b->swap && a->logical == PC_DTYPE_FLOAT16 &&
         b->logical == PC_DTYPE_FLOAT16 && sl->t->compare == PC_DTYPE_FLOAT16;
}

/* The slot's quantile histograms for the kernels: NULL when the run computes no quantiles. */
static pc_qhist **pc_slot_hists(const pc_stream *s, pc_slot *sl) {
  return s->cfg.quantiles ? sl->hist : NULL;
}

/* Decode and fold one slot's stored bytes (sl->raw) into its own partial, and its structural
 * evidence (evidence.h) for real floats. True when both sides were decoded into w->vals (the
 * float paths that fold stored bytes decode nothing). */
static bool pc_worker_fold_bytes(pc_worker *w, pc_slot *sl) {
  const unsigned char *ra = sl->raw[0], *rb = sl->raw[1];
  pc_kernel_args k = {&sl->part, pc_slot_hists(w->s, sl), &sl->t->tol, sl->t->compare, sl->base,
                      sl->n};
  bool same = pc_bytes_identical(sl, ra, rb); /* one comparison of the bytes serves both paths */
  const pc_slicing slicing = pc_evidence_slicing(sl->t, sl->base);
  if (pc_f32_direct(sl) && !same) {
    pc_kernel_f32(&k, ra, rb, sl->a->logical == PC_DTYPE_BFLOAT16,
                  sl->b->logical == PC_DTYPE_BFLOAT16);
    pc_evidence_add_bytes(&sl->part, ra, rb, sl->n, &slicing, false);
    return false;
  }
  if (pc_f16_direct(sl) && !same) {
    pc_kernel_f16(&k, ra, rb);
    pc_evidence_add_bytes(&sl->part, ra, rb, sl->n, &slicing, true);
    return false;
  }
  if (!pc_worker_reserve(w, sl->n)) {
    sl->nomem = true;
    return false;
  }
  pc_dataset_decode(sl->a, ra, sl->n, w->vals[0], w->ints[0]);
  pc_dataset_decode(sl->b, rb, sl->n, w->vals[1], w->ints[1]);
  pc_worker_kernels(w, sl, &k, same);
  if (sl->a->kind == PC_KIND_FLOAT && sl->b->kind == PC_KIND_FLOAT)
    pc_evidence_add_f64(&sl->part, w->vals[0], w->vals[1], sl->n, &slicing,
                        sl->t->compare != PC_DTYPE_FLOAT64);
  /* Only real float datasets carry a logical dtype other than their stored one. */
  if (sl->a->logical != sl->a->stored)
    sl->part.not_representable_a += pc_kernel_unrepresentable(w->vals[0], sl->n, sl->a->logical);
  if (sl->b->logical != sl->b->stored)
    sl->part.not_representable_b += pc_kernel_unrepresentable(w->vals[1], sl->n, sl->b->logical);
  return true;
}

/* The side of a slot that is the envelope's bound (A and B are 0 and 1). */
enum { PC_SIDE_E = 2 };

/* Side `side` of sl: its dataset and its bytes' buffer. */
static const pc_dataset *pc_slot_ds(const pc_slot *sl, int side) {
  return side == 0 ? sl->a : side == 1 ? sl->b : sl->e;
}

static void *pc_slot_buf(const pc_slot *sl, int side) {
  return side == PC_SIDE_E ? sl->env : sl->raw[side];
}

/* Reads a direct side's bytes of sl into the slot's buffer, which the calling thread reserved
 * for them. Reading rather than mapping the file: mapped pages are slow to touch on some VMs
 * (docs/performance.md), and a file that shrinks after it was opened is then a read error, not
 * SIGBUS. false, with sl->why, on a read error or when the file ends early. */
static bool pc_slot_pread(pc_slot *sl, int side) {
  unsigned char *buf = pc_slot_buf(sl, side);
  size_t bytes = sl->n * pc_slot_ds(sl, side)->elem_size, got = 0;
  while (got < bytes) {
    ssize_t r = pread(sl->fd[side], buf + got, bytes - got, (off_t)(sl->at[side] + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      char text[256] = "the file ended early (it shrank while being compared)";
      if (r < 0 && strerror_r(errno, text, sizeof text) != 0)
        snprintf(text, sizeof text, "error %d", errno);
      snprintf(sl->why, sizeof sl->why, "%s: %s: cannot read: %s", sl->file[side],
               pc_slot_ds(sl, side)->path, text);
      return false;
    }
    got += (size_t)r;
  }
  return true;
}

/* The envelope's per-element test of a block (envelope.h): in lanes on the stored bytes where
 * the lane kernels took A and B (the fold did not decode them: `decoded` false; the caller skips
 * a slot whose fold ran out of memory) and the bound is float16 in the machine's order, else on
 * doubles, A and B decoded here unless the fold already did, the bound always. */
static void pc_worker_envelope(pc_worker *w, pc_slot *sl, bool decoded) {
  const pc_dataset *e = sl->e;
  if (!decoded && e->kind == PC_KIND_FLOAT && e->stored == PC_DTYPE_FLOAT16 && !e->swap) {
    pc_envelope_fold_bytes(&sl->part, sl->a->stored == PC_DTYPE_FLOAT16, sl->raw[0], sl->raw[1],
                           sl->env, sl->n, &sl->t->envelope);
    return;
  }
  if (sl->n > w->env_cap) {
    double *v = realloc(w->env, sl->n * sizeof *v);
    if (!v) {
      sl->nomem = true;
      return;
    }
    w->env = v;
    w->env_cap = sl->n;
  }
  if (!pc_worker_reserve(w, sl->n)) {
    sl->nomem = true;
    return;
  }
  if (!decoded) {
    pc_dataset_decode(sl->a, sl->raw[0], sl->n, w->vals[0], w->ints[0]);
    pc_dataset_decode(sl->b, sl->raw[1], sl->n, w->vals[1], w->ints[1]);
  }
  pc_dataset_decode(sl->e, sl->env, sl->n, w->env, NULL);
  pc_envelope_fold(&sl->part, w->vals[0], w->vals[1], w->env, sl->n, &sl->t->envelope);
}

/* Fold one slot, reading first what is still in the files. The loader checked that the bytes
 * lie inside the file, so the offsets fit in off_t. */
static void pc_worker_fold(pc_worker *w, pc_slot *sl) {
  if (sl->fill_n) {
    pc_kernel_args k = {&sl->part, pc_slot_hists(w->s, sl), &sl->t->tol, sl->t->compare, sl->base,
                        0};
    pc_fill_run(&k, sl->a, sl->b, sl->fill_n);
    return;
  }
  if (sl->n == 0)
    return;
  for (int side = 0; side <= PC_SIDE_E; side++)
    if (sl->fd[side] >= 0 && !pc_slot_pread(sl, side))
      return;
  bool decoded = pc_worker_fold_bytes(w, sl);
  if (sl->e && !sl->nomem)
    pc_worker_envelope(w, sl, decoded);
}

/* The oldest queued slot, or NULL. Called with the lock held. */
static pc_slot *pc_next_queued(pc_stream *s) {
  for (size_t j = 0; j < s->used; j++) {
    pc_slot *sl = &s->slots[(s->head + j) % s->nslots];
    if (sl->state == PC_SLOT_QUEUED)
      return sl;
  }
  return NULL;
}

static void *pc_worker_main(void *arg) {
  pc_worker *w = arg;
  pc_stream *s = w->s;
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    pc_slot *sl = pc_next_queued(s);
    if (!sl) {
      s->idle++;
      pthread_cond_wait(&s->work, &s->mu);
      s->idle--;
      continue;
    }
    sl->state = PC_SLOT_RUNNING;
    pthread_mutex_unlock(&s->mu);
    pc_worker_fold(w, sl);
    pthread_mutex_lock(&s->mu);
    sl->state = PC_SLOT_DONE;
    pthread_cond_broadcast(&s->done);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* --- merging, on the calling thread ------------------------------------------------------- */

/* A block of at most this many elements (or a run of fill pairs) is small: the calling thread
 * helps fold such blocks while it waits (pc_help). */
enum { PC_SMALL_ELEMS = 1 << 15 };

static void pc_tensor_fail(pc_tensor *t, const char *why) {
  t->verdict = PC_VERDICT_ERROR;
  free(t->message);
  t->message = pc_strdup(why);
}

/* The tensor's last block is in: quantiles, then hand it over. */
static void pc_tensor_close(pc_stream *s, pc_tensor *t) {
  if (t->verdict == PC_VERDICT_ERROR) {
    memset(&t->stats, 0, sizeof t->stats);
  } else if (s->cfg.quantiles && !s->cfg.partial) {
    pc_stats_quantiles(&t->stats, s->hist);
    if (!t->stats.has_quantiles && !s->nomem) /* only an allocation fails there */
      s->nomem = t;
  }
  for (int i = 0; i < PC_NHISTS; i++)
    pc_qhist_reset(s->hist[i]);
  s->cfg.done(s->cfg.done_user, t);
}

static void pc_merge_slot(pc_stream *s, pc_slot *sl) {
  pc_tensor *t = sl->t;
  /* The first failure of the tensor is the one worth reporting. */
  if (t->verdict != PC_VERDICT_ERROR && (sl->nomem || sl->why[0]))
    pc_tensor_fail(t, sl->nomem ? "out of memory" : sl->why);
  if (sl->nomem && !s->nomem)
    s->nomem = t;
  if (t->verdict != PC_VERDICT_ERROR && s->cfg.partial) {
    s->cfg.partial(s->cfg.partial_user, t, &sl->part, pc_slot_hists(s, sl));
  } else if (t->verdict != PC_VERDICT_ERROR) {
    pc_stats_merge(&t->stats, &sl->part);
    for (int i = 0; i < PC_NHISTS; i++)
      pc_qhist_merge(s->hist[i], sl->hist[i]);
  }
  if (sl->last)
    pc_tensor_close(s, t);
}

/* Merge the head slot once it is done; with `wait`, wait for it. Returns false when there is
 * nothing (more) to merge now. */
static bool pc_merge_head(pc_stream *s, bool wait) {
  pthread_mutex_lock(&s->mu);
  pc_slot *sl = s->used ? &s->slots[s->head] : NULL;
  while (sl && wait && sl->state != PC_SLOT_DONE)
    pthread_cond_wait(&s->done, &s->mu);
  bool ready = sl && sl->state == PC_SLOT_DONE;
  pthread_mutex_unlock(&s->mu);
  if (!ready)
    return false;
  pc_merge_slot(s, sl);
  pthread_mutex_lock(&s->mu);
  s->head = (s->head + 1) % s->nslots;
  s->used--;
  pthread_mutex_unlock(&s->mu);
  return true;
}

/* Folds sl on the calling thread, with its own scratch, and marks it done. */
static void pc_fold_here(pc_stream *s, pc_slot *sl) {
  pc_worker_fold(&s->workers[s->nthreads], sl);
  pthread_mutex_lock(&s->mu);
  sl->state = PC_SLOT_DONE;
  pthread_mutex_unlock(&s->mu);
}

/* Folds the oldest queued small slot on the calling thread, with its own scratch; false when
 * there is none. While the ring is full the calling thread has nothing to read, and many small
 * tensors keep every core folding this way: waiting for the head would leave one idle. A large
 * block is left to the workers, so that reading the next ones is not held up. */
static bool pc_help(pc_stream *s) {
  pthread_mutex_lock(&s->mu);
  pc_slot *sl = pc_next_queued(s);
  bool small = sl && sl->n <= PC_SMALL_ELEMS;
  if (small)
    sl->state = PC_SLOT_RUNNING;
  pthread_mutex_unlock(&s->mu);
  if (small)
    pc_fold_here(s, sl);
  return small;
}

/* Merges what is done at the head; with `wait`, makes progress until at least one slot is
 * merged: helping with a small queued slot, or waiting for the head. */
static void pc_drain(pc_stream *s, bool wait) {
  bool merged = false;
  while (pc_merge_head(s, false))
    merged = true;
  while (wait && !merged && s->used) {
    if (!pc_help(s))
      merged = pc_merge_head(s, true);
    while (pc_merge_head(s, false))
      merged = true;
  }
}

/* A slot to fill, merging finished ones first (at least one when the ring is full). */
static pc_slot *pc_acquire(pc_stream *s) {
  pc_drain(s, s->used == s->nslots);
  pc_slot *sl = &s->slots[(s->head + s->used) % s->nslots];
  sl->state = PC_SLOT_FILLING;
  memset(&sl->part, 0, sizeof sl->part);
  for (int i = 0; i < PC_NHISTS; i++)
    pc_qhist_reset(sl->hist[i]);
  sl->nomem = false;
  sl->fill_n = 0;
  sl->why[0] = '\0';
  sl->fd[0] = sl->fd[1] = sl->fd[PC_SIDE_E] = -1;
  pthread_mutex_lock(&s->mu);
  s->used++;
  pthread_mutex_unlock(&s->mu);
  return sl;
}

/* Without workers, every slot is folded at once on the calling thread. With them, every slot
 * is queued, and a worker is woken only when one waits: when all are busy, a slot of a small
 * tensor costs a lock, not a wake-up (docs/performance.md, "Small blocks on every core"). */
static void pc_submit(pc_stream *s, pc_slot *sl) {
  if (s->nthreads == 0) {
    pc_fold_here(s, sl);
    return;
  }
  pthread_mutex_lock(&s->mu);
  sl->state = PC_SLOT_QUEUED;
  if (s->idle)
    pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
}

/* --- reading, on the calling thread ------------------------------------------------------- */

static bool pc_slot_reserve(pc_slot *sl, int side, size_t bytes) {
  if (bytes <= sl->raw_cap[side])
    return true;
  void *p = realloc(sl->raw[side], bytes);
  if (!p)
    return false;
  sl->raw[side] = p;
  sl->raw_cap[side] = bytes;
  return true;
}

/* One side of a pair being streamed: its reader and its file. */
typedef struct pc_side {
  pc_reader *r;
  pc_file *f;
} pc_side;

/* Reads side's next block into its buffer, or for a direct reader only records where its bytes
 * are, for the worker. */
static int pc_read_side(pc_slot *sl, int side, const pc_side *sd, size_t *n, pc_error *e) {
  if (!pc_reader_direct(sd->r))
    return pc_reader_next_raw(sd->r, pc_slot_buf(sl, side), n, e);
  pc_reader_next_span(sd->r, &sl->at[side], n);
  sl->fd[side] = *n ? pc_file_fd(sd->f) : -1;
  sl->file[side] = pc_file_path(sd->f);
  return PC_OK;
}

/* Read one block of each side into sl; *n = 0 at the end. The buffers are reserved for direct
 * sides too: the worker reads into them. */
static int pc_read_block(pc_slot *sl, const pc_side sides[2], size_t cap, size_t *n, pc_error *e) {
  size_t nb = 0;
  if (!pc_slot_reserve(sl, 0, cap * sl->a->elem_size) ||
      !pc_slot_reserve(sl, 1, cap * sl->b->elem_size))
    return pc_error_set(e, PC_ENOMEM, "out of memory");
  int rc = pc_read_side(sl, 0, &sides[0], n, e);
  if (rc == PC_OK)
    rc = pc_read_side(sl, 1, &sides[1], &nb, e);
  if (rc == PC_OK && nb != *n)
    rc = pc_error_set(e, PC_EDATA, "A and B were read in different blocks");
  return rc;
}

static void pc_progress(pc_stream *s, const pc_slot *sl) {
  s->bytes_done += (sl->n + sl->fill_n) * (sl->a->elem_size + sl->b->elem_size);
  if (s->cfg.progress)
    s->cfg.progress(s->cfg.progress_user, s->bytes_done, s->cfg.total_bytes);
}

/* One pair being streamed. */
typedef struct pc_job {
  pc_tensor *t;
  const pc_dataset *a, *b;
  pc_side sides[2];
  pc_side env; /* the envelope's per-element bound, cut as A (reader NULL: none) */
  const pc_dataset *e;
  size_t cursor[2]; /* pc_dataset_next_written's, of A and B */
  uint64_t base;    /* the next block's first element */
  uint64_t end;     /* stop at the first block start at or after it, unless it is the count */
} pc_job;

/* Whether the job goes on: to the closing (empty) block when it runs to the tensor's end, else
 * up to its end. */
static bool pc_job_more(const pc_job *j, size_t n) {
  return n && (j->end >= j->a->count || j->base < j->end);
}

static pc_slot *pc_job_slot(pc_stream *s, const pc_job *j) {
  pc_slot *sl = pc_acquire(s);
  sl->t = j->t;
  sl->a = j->a;
  sl->b = j->b;
  sl->e = j->e;
  sl->base = j->base;
  return sl;
}

/* Queues the elements from j->base that neither side wrote, up to the block start before the
 * next element that one side wrote, as one run of fill pairs; nothing when there are none (or
 * when a side is not sparse: then its next written element is j->base itself). */
static void pc_stream_skip(pc_stream *s, pc_job *j) {
  uint64_t wa = pc_dataset_next_written(j->a, &j->cursor[0], j->base);
  uint64_t wb = pc_dataset_next_written(j->b, &j->cursor[1], j->base);
  uint64_t to = wa < wb ? wa : wb;
  uint64_t at = pc_reader_seek(j->sides[0].r, to);
  if (at == j->base)
    return;
  pc_reader_seek(j->sides[1].r, to); /* cut alike: the same block start */
  if (j->env.r)
    pc_reader_seek(j->env.r, to);
  pc_slot *sl = pc_job_slot(s, j);
  sl->n = 0;
  sl->fill_n = at - j->base;
  sl->last = false;
  j->base = at;
  pc_progress(s, sl);
  pc_submit(s, sl);
}

/* The envelope's block beside A's and B's n elements: the same cut. */
static int pc_read_envelope(pc_slot *sl, const pc_side *env, size_t cap, size_t n, pc_error *e) {
  size_t ne = 0;
  if (cap * sl->e->elem_size > sl->env_cap) {
    void *p = realloc(sl->env, cap * sl->e->elem_size);
    if (!p)
      return pc_error_set(e, PC_ENOMEM, "out of memory");
    sl->env = p;
    sl->env_cap = cap * sl->e->elem_size;
  }
  int rc = pc_read_side(sl, PC_SIDE_E, env, &ne, e);
  if (rc == PC_OK && ne != n)
    rc = pc_error_set(e, PC_EDATA, "the envelope was read in other blocks than A");
  return rc;
}

/* Queue every block of the pair (runs of fill pairs in place of what neither side wrote), then
 * a closing slot. */
static int pc_stream_blocks(pc_stream *s, pc_job *j) {
  pc_error e = {PC_OK, ""};
  size_t cap = pc_reader_max_block(j->sides[0].r), n = 1;
  int rc = PC_OK;
  while (pc_job_more(j, n)) {
    pc_stream_skip(s, j);
    pc_slot *sl = pc_job_slot(s, j);
    rc = pc_read_block(sl, j->sides, cap, &n, &e);
    if (rc == PC_OK && j->env.r)
      rc = pc_read_envelope(sl, &j->env, cap, n, &e);
    if (rc < 0) {
      pc_tensor_fail(j->t, e.message);
      n = 0;
    }
    sl->n = n;
    sl->last = n == 0;
    j->base += n;
    pc_progress(s, sl);
    pc_submit(s, sl);
  }
  return rc == PC_ENOMEM ? rc : PC_OK;
}

int pc_stream_range(pc_stream *s, pc_tensor *t, const pc_stream_sides *sd, uint64_t from,
                    uint64_t to, pc_error *err) {
  pc_error e = {PC_OK, ""};
  pc_reader *ra = NULL, *rb = NULL, *re = NULL;
  int rc = pc_reader_open(&ra, sd->fa, sd->a, s->cfg.block_elems, NULL, &e);
  if (rc == PC_OK)
    rc = pc_reader_open(&rb, sd->fb, sd->b, s->cfg.block_elems, ra, &e);
  if (rc == PC_OK && sd->e)
    rc = pc_reader_open(&re, sd->fe, sd->e, s->cfg.block_elems, ra, &e);
  if (rc == PC_OK) {
    uint64_t at = pc_reader_seek(ra, from);
    pc_reader_seek(rb, from); /* cut alike: the same block start */
    if (re)
      pc_reader_seek(re, from);
    pc_job j = {t, sd->a, sd->b, {{ra, sd->fa}, {rb, sd->fb}}, {re, sd->fe}, sd->e, {0, 0}, at, to};
    rc = pc_stream_blocks(s, &j);
  } else if (rc != PC_ENOMEM) {
    /* Nothing of this tensor is queued: close it at once. */
    pc_tensor_fail(t, e.message);
    memset(&t->stats, 0, sizeof t->stats);
    s->cfg.done(s->cfg.done_user, t);
    rc = PC_OK;
  }
  pc_reader_close(ra);
  pc_reader_close(rb);
  pc_reader_close(re);
  if (rc == PC_ENOMEM)
    return pc_error_set(err, rc, "%s: out of memory", t->path);
  return s->nomem ? pc_error_set(err, PC_ENOMEM, "%s: out of memory", s->nomem->path) : PC_OK;
}

int pc_stream_tensor(pc_stream *s, pc_tensor *t, const pc_stream_sides *sd, pc_error *err) {
  return pc_stream_range(s, t, sd, 0, sd->a->count, err);
}

void pc_stream_expect(pc_stream *s, uint64_t bytes) {
  s->cfg.total_bytes += bytes;
}

int pc_stream_finish(pc_stream *s, pc_error *err) {
  while (s->used)
    pc_drain(s, true);
  return s->nomem ? pc_error_set(err, PC_ENOMEM, "%s: out of memory", s->nomem->path) : PC_OK;
}

/* --- set-up ------------------------------------------------------------------------------- */

/* The worker threads' scratch, and one more for the calling thread (pc_submit). */
static unsigned pc_scratch_count(const pc_stream *s) {
  return (s->cfg.threads > 1 ? s->cfg.threads : 0) + 1;
}

static int pc_stream_alloc(pc_stream *s) {
  unsigned nw = pc_scratch_count(s);
  s->nslots = s->cfg.threads > 1 ? 2 * (size_t)s->cfg.threads + 2 : 1;
  s->slots = calloc(s->nslots, sizeof *s->slots);
  s->workers = calloc(nw, sizeof *s->workers);
  if (!s->slots || !s->workers || pc_hists_new(s->hist) < 0)
    return PC_ENOMEM;
  for (size_t i = 0; i < s->nslots; i++)
    if (pc_hists_new(s->slots[i].hist) < 0)
      return PC_ENOMEM;
  for (unsigned i = 0; i < nw; i++)
    s->workers[i].s = s;
  return PC_OK;
}

int pc_stream_new(pc_stream **out, const pc_stream_config *cfg, pc_error *err) {
  *out = NULL;
  pc_stream *s = calloc(1, sizeof *s);
  if (!s)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  s->cfg = *cfg;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->done, NULL);
  if (pc_stream_alloc(s) < 0) {
    pc_stream_free(s);
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  }
  for (unsigned i = 0; cfg->threads > 1 && i < cfg->threads; i++) {
    if (pthread_create(&s->workers[i].tid, NULL, pc_worker_main, &s->workers[i]) != 0)
      break;
    s->nthreads++;
  }
  if (cfg->threads > 1 && s->nthreads == 0) {
    pc_stream_free(s);
    return pc_error_set(err, PC_ENOMEM, "cannot start worker threads");
  }
  *out = s;
  return PC_OK;
}

void pc_stream_free(pc_stream *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_broadcast(&s->work);
  pthread_mutex_unlock(&s->mu);
  for (unsigned i = 0; i < s->nthreads; i++)
    pthread_join(s->workers[i].tid, NULL);
  unsigned nw = pc_scratch_count(s);
  for (unsigned i = 0; s->workers && i < nw; i++)
    for (int side = 0; side < 2; side++) {
      free(s->workers[i].vals[side]);
      free(s->workers[i].ints[side]);
    }
  for (unsigned i = 0; s->workers && i < nw; i++)
    free(s->workers[i].env);
  for (size_t i = 0; s->slots && i < s->nslots; i++) {
    free(s->slots[i].raw[0]);
    free(s->slots[i].raw[1]);
    free(s->slots[i].env);
    pc_hists_free(s->slots[i].hist);
  }
  pc_hists_free(s->hist);
  free(s->slots);
  free(s->workers);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
