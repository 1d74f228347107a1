/* The streaming pipeline: reads tensor pairs block by block on the calling thread (HDF5 1.10 is
 * not thread-safe) while worker threads decode and fold the blocks. Each block is folded into a
 * fresh partial, and partials are merged in block order, so every figure is the same for any
 * number of threads. Memory is bounded by the ring of slots, whatever the dataset sizes.
 * Internal to the library. */
#ifndef PC_STREAM_H
#define PC_STREAM_H

#include "kernel.h" /* PC_NHISTS */
#include "loader.h"

#include <paritycheck/result.h>

typedef struct pc_stream pc_stream;

/* Called on the calling thread when a tensor's last block is merged: its stats, quantiles
 * included, are complete (or t->verdict is PC_VERDICT_ERROR with a message). */
typedef void (*pc_stream_done_fn)(void *user, pc_tensor *t);

/* Partial mode (plan.h: a tensor cut across processes): called on the calling thread with each
 * block's figures, in block order, instead of merging them into t->stats. `hist` holds the
 * block's quantile histograms (NULL without quantiles). Not called once t is an error. */
typedef void (*pc_stream_partial_fn)(void *user, const pc_tensor *t, const pc_stats *part,
                                     pc_qhist *const *hist);

typedef struct pc_stream_config {
  unsigned threads;   /* worker threads; 0 or 1: fold on the calling thread */
  size_t block_elems; /* elements per block (> 0) */
  pc_stream_done_fn done;
  void *done_user;
  void (*progress)(void *user, uint64_t done, uint64_t total); /* may be NULL */
  void *progress_user;
  uint64_t total_bytes;         /* stored bytes of every pair to be streamed, for progress */
  bool quantiles;               /* fill the quantile histograms and compute the quantiles */
  pc_stream_partial_fn partial; /* NULL: merge the blocks (the usual mode); else partial mode */
  void *partial_user;
} pc_stream_config;

int pc_stream_new(pc_stream **out, const pc_stream_config *cfg, pc_error *err);

/* What one pair streams: datasets a of fa and b of fb, of one shape and comparable kinds, and
 * optionally e of fe, an envelope's per-element bound of that shape (envelope.h), read beside
 * them for the per-element test with t->envelope's law (NULL: none). */
typedef struct pc_stream_sides {
  pc_file *fa;
  const pc_dataset *a;
  pc_file *fb;
  const pc_dataset *b;
  pc_file *fe;
  const pc_dataset *e;
} pc_stream_sides;

/** Queue tensor t, with t->compare and t->tol set (and t->envelope with an envelope). A read
 * failure makes t an error; other tensors go on. */
int pc_stream_tensor(pc_stream *s, pc_tensor *t, const pc_stream_sides *sd, pc_error *err);

/** Queue elements [from, to) of tensor t as pc_stream_tensor does the whole of it. `from` must
 * be a block start (pc_reader_seek); blocks are cut as for the whole tensor, and a range that
 * ends before the tensor does stops at the first block start at or after `to`, without closing
 * t (no done call): in partial mode, ranges cut at the same block starts hand over exactly the
 * blocks of the whole tensor between them. */
int pc_stream_range(pc_stream *s, pc_tensor *t, const pc_stream_sides *sd, uint64_t from,
                    uint64_t to, pc_error *err);

/** Add `bytes` to the total that progress reports count toward (folder mode learns it file by
 * file). */
void pc_stream_expect(pc_stream *s, uint64_t bytes);

/** Wait for every queued tensor to be done. */
int pc_stream_finish(pc_stream *s, pc_error *err);

/** Stop the workers and free everything; NULL is accepted. */
void pc_stream_free(pc_stream *s);

#endif
