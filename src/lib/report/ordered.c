/* A report's rows formatted by several threads and written in order (report_common.h,
 * pc_report_put_ordered). Over 20,000 small tensors the report writers were most of a full
 * run's time after the comparison, each on one core (docs/performance.md, "Many small
 * tensors"); formatting is nearly all of that work and needs nothing but the finished run, so
 * chunks of rows are formatted side by side, each into its own memory stream, and copied to the
 * report in row order. */
#include "report_common.h"

#include <paritycheck/error.h> /* PC_OK, PC_ENOMEM */

#include <pthread.h> /* pthread_create, pthread_mutex_*, pthread_cond_* */
#include <stdio.h>   /* open_memstream, fwrite */
#include <stdlib.h>  /* free, malloc */

/* Rows a chunk holds at most: a chunk of JSON tensors is then about 64 KiB, and the report's
 * memory is a chunk per thread. */
enum { CHUNK_MAX = 32 };

typedef struct ordered {
  FILE *out;
  size_t n, chunk;
  pc_report_row_fn put;
  void *ctx;
  const pc_report_options *opts; /* its progress, called as chunks are written */
  pthread_mutex_t lock;
  pthread_cond_t turn; /* broadcast when `written` moves */
  size_t next;         /* the first row no thread has claimed */
  size_t written;      /* the first row not yet copied to `out` */
  int rc;              /* the first error in row order */
} ordered;

/* Rows [lo, hi) into a new buffer (*text, *len: free *text). PC_OK, the first row's error, or
 * PC_ENOMEM when the stream could not grow. */
static int format_chunk(const ordered *o, size_t lo, size_t hi, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *m = open_memstream(text, len);
  if (!m)
    return PC_ENOMEM;
  int rc = PC_OK;
  for (size_t k = lo; rc == PC_OK && k < hi; k++)
    rc = o->put(m, k, o->ctx);
  bool grown = !ferror(m);
  if (fclose(m) != 0) /* the final flush into the buffer */
    grown = false;
  return rc == PC_OK && !grown ? PC_ENOMEM : rc;
}

/* Claims chunks in row order until none is left or a row failed. A chunk waits for its turn
 * after it is formatted; the owner of the earliest unwritten chunk never waits, so the threads
 * cannot all wait, and each holds at most one chunk's text. */
static void *work(void *arg) {
  ordered *o = arg;
  pthread_mutex_lock(&o->lock);
  while (o->next < o->n && o->rc == PC_OK) {
    size_t lo = o->next, hi = o->n - lo > o->chunk ? lo + o->chunk : o->n;
    o->next = hi;
    pthread_mutex_unlock(&o->lock);
    char *text;
    size_t len;
    int rc = format_chunk(o, lo, hi, &text, &len);
    pthread_mutex_lock(&o->lock);
    while (o->written != lo)
      pthread_cond_wait(&o->turn, &o->lock);
    if (o->rc == PC_OK && rc == PC_OK)
      fwrite(text, 1, len, o->out); /* a write error stays in `out`, for its owner */
    else if (o->rc == PC_OK)
      o->rc = rc;
    pc_report_beat(o->opts); /* under the lock: one thread at a time calls it */
    o->written = hi;
    pthread_cond_broadcast(&o->turn);
    free(text);
  }
  pthread_mutex_unlock(&o->lock);
  return NULL;
}

/* Rows a chunk holds: up to CHUNK_MAX, fewer when the run is small, so that every thread gets
 * several chunks (and a small run is formatted in parallel too, as the tests need). */
static size_t chunk_rows(size_t n, unsigned threads) {
  size_t rows = n / ((size_t)threads * 8);
  return rows < 1 ? 1 : rows > CHUNK_MAX ? CHUNK_MAX : rows;
}

/* Rows between two calls of the progress function when one thread writes them all. */
enum { BEAT_ROWS = 1024 };

int pc_report_put_ordered(FILE *out, size_t n, const pc_report_options *opts, pc_report_row_fn put,
                          void *ctx) {
  unsigned threads = pc_report_threads(opts);
  if (threads <= 1 || n <= 1) {
    int rc = PC_OK;
    for (size_t k = 0; rc == PC_OK && k < n; k++) {
      rc = put(out, k, ctx);
      if (k % BEAT_ROWS == 0)
        pc_report_beat(opts);
    }
    return rc;
  }
  ordered o = {
      .out = out, .n = n, .chunk = chunk_rows(n, threads), .put = put, .ctx = ctx, .opts = opts};
  size_t chunks = (n + o.chunk - 1) / o.chunk;
  if (threads > chunks) /* a thread without a chunk would only be started and joined */
    threads = (unsigned)chunks;
  pthread_t *tids = malloc((threads - 1) * sizeof *tids);
  if (!tids || pthread_mutex_init(&o.lock, NULL) != 0) {
    free(tids);
    return PC_ENOMEM;
  }
  if (pthread_cond_init(&o.turn, NULL) != 0) {
    pthread_mutex_destroy(&o.lock);
    free(tids);
    return PC_ENOMEM;
  }
  unsigned started = 0; /* a thread that cannot be started leaves its share to the others */
  while (started < threads - 1 && pthread_create(&tids[started], NULL, work, &o) == 0)
    started++;
  work(&o);
  for (unsigned t = 0; t < started; t++)
    pthread_join(tids[t], NULL);
  pthread_cond_destroy(&o.turn);
  pthread_mutex_destroy(&o.lock);
  free(tids);
  return o.rc;
}
