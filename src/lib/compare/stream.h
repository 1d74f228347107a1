/* The streaming pipeline: reads tensor pairs block by block on the calling thread (HDF5 1.10 is
 * not thread-safe) while worker threads decode and fold the blocks. Each block is folded into a
 * fresh partial, and partials are merged in block order, so every figure is the same for any
 * number of threads. Memory is bounded by the ring of slots, whatever the dataset sizes.
 * Internal to the library. */
#ifndef PC_STREAM_H
#define PC_STREAM_H

#include "loader.h"

#include <paritycheck/result.h>

typedef struct pc_stream pc_stream;

/* Called on the calling thread when a tensor's last block is merged: its stats, quantiles
 * included, are complete (or t->verdict is PC_VERDICT_ERROR with a message). */
typedef void (*pc_stream_done_fn)(void *user, pc_tensor *t);

typedef struct pc_stream_config {
  unsigned threads;   /* worker threads; 0 or 1: fold on the calling thread */
  size_t block_elems; /* elements per block (> 0) */
  pc_stream_done_fn done;
  void *done_user;
  void (*progress)(void *user, uint64_t done, uint64_t total); /* may be NULL */
  void *progress_user;
  uint64_t total_bytes; /* stored bytes of every pair to be streamed, for progress */
  bool quantiles;       /* fill the quantile histograms and compute the quantiles */
} pc_stream_config;

int pc_stream_new(pc_stream **out, const pc_stream_config *cfg, pc_error *err);

/** Queue tensor t: datasets a of fa and b of fb, of one shape and comparable kinds, with
 * t->compare and t->tol set. A read failure makes t an error; other tensors go on. */
int pc_stream_tensor(pc_stream *s, pc_tensor *t, pc_file *fa, const pc_dataset *a, pc_file *fb,
                     const pc_dataset *b, pc_error *err);

/** Add `bytes` to the total that progress reports count toward (folder mode learns it file by
 * file). */
void pc_stream_expect(pc_stream *s, uint64_t bytes);

/** Wait for every queued tensor to be done. */
int pc_stream_finish(pc_stream *s, pc_error *err);

/** Stop the workers and free everything; NULL is accepted. */
void pc_stream_free(pc_stream *s);

#endif
