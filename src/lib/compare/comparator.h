/* The comparator's steps, shared by pc_compare_files (compare.c) and the plans that spread one
 * run over several processes (plan.c): the walk that pairs the datasets (walk.c), the set-up of
 * a pair that needs no data, reading and folding it (pair.c), and the run-level judgement at
 * the end (conclude.c). Internal to the library. */
#ifndef PC_COMPARATOR_H
#define PC_COMPARATOR_H

#include "arena.h"
#include "envelope.h"
#include "loader.h"
#include "pc_internal.h"
#include "stream.h"

#include <paritycheck/compare.h>

#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */
#include <stdlib.h>  /* free */

/* One pair being compared: A's and B's datasets (either may be NULL: missing) in their files. */
typedef struct pc_pair {
  pc_file *fa, *fb;
  const pc_dataset *a, *b;
  pc_tensor *t;
  pc_arena *names; /* where t's shapes go (the run's pc_run.names), or NULL: malloc'd */
  size_t block;
  pc_stream *stream;
  uint64_t max_memory; /* pc_options.max_memory, its default applied */
  bool quantiles;      /* not pc_options.skip_quantiles */
  bool cross;          /* set by pc_pair_setup: A's and B's dtypes are compared in a third */
  pc_envelope *env;    /* A's file's envelope (pc_pair_envelope_open), or NULL */
  bool trust_b;        /* pc_options.trust_b_metadata: B's attributes may set its tolerance */
  size_t ignored_b;    /* tensors so far whose B attributes were ignored (trust.h) */
} pc_pair;

/** The envelope of the dump of A at a_path (envelope_pair.c): none with o->no_envelope; else
 * o->envelope outside folder mode (`folder` false), else the sidecar beside A when it exists
 * (docs/envelope.md). *out NULL when there is none. PC_EIO naming the file when one exists but
 * cannot be read or is not an envelope (a gate never ignores an envelope it was given),
 * PC_ENOMEM. */
int pc_pair_envelope_open(const pc_options *o, const char *a_path, bool folder, pc_envelope **out,
                          pc_error *err);

/** Before p is streamed: t->envelope from p->env when it holds the tensor, and sd->fe, sd->e
 * its per-element bound. A tensor the envelope holds wrongly becomes an error naming the file
 * and dataset. PC_ENOMEM. */
int pc_pair_envelope_attach(pc_pair *p, pc_stream_sides *sd, pc_error *err);

/** What opening a file under o may spend on metadata (pc_options.max_memory, its default
 * applied) and whom it tells that it goes on (pc_options.progress). Inline, so that every file
 * that opens one (the walk, the envelope's, the plans' runners) reads it from below. */
static inline pc_open_limits pc_options_limits(const pc_options *o) {
  return (pc_open_limits){o->max_memory ? o->max_memory : PC_DEFAULT_MAX_MEMORY, o->progress,
                          o->progress_user};
}

/** Replaces *dst (freed) with a copy of text. PC_ENOMEM. */
static inline int pc_set_text(char **dst, const char *text) {
  free(*dst);
  *dst = pc_strdup(text);
  return *dst ? PC_OK : PC_ENOMEM;
}

/** Everything decided without reading data: the dtypes, shapes and compare dtype, and the
 * verdicts missing, skipped, error, dtype and shape mismatch. *data is true when the pair still
 * has to be read (pc_pair_data). PC_ENOMEM naming the tensor. */
int pc_pair_setup(pc_pair *p, bool *data, pc_error *err);

/** After pc_pair_setup said so: the tolerance (reading A's magnitude where the tolerance model
 * needs it), the product metrics, then elements [from, to) of the pair through p->stream (or
 * the fill values, when neither side was written), judged once done (a whole tensor, outside
 * partial mode). `from` is a block start (pc_reader_seek). */
int pc_pair_data(pc_pair *p, const pc_tolset *tols, uint64_t from, uint64_t to, pc_error *err);

/** Whether a set-up pair may be read in parts by several processes, whose blocks merge into the
 * figures of one read: not when a side is sparse (runs of fill pairs are cut where the read
 * starts) nor when product metrics read it whole. */
bool pc_pair_splittable(const pc_pair *p, const pc_tolset *tols);

/** The stream's pc_stream_config.done for a run read whole: judges a tensor once its figures are
 * complete (pc_judge_tensor). `user` is unused. */
void pc_pair_done(void *user, pc_tensor *t);

/** The stored bytes that pc_pair_data streams for datasets a and b (either may be NULL), for
 * progress reports: both numeric and of one shape, unless neither was written (the fill values
 * stand for them); 0 otherwise. */
uint64_t pc_pair_bytes(const pc_dataset *a, const pc_dataset *b);

/* Instead of reading each pair that needs data, the walk can hand it over: add(user, p, index)
 * with run->tensors[index] == p->t, while p's files are open. */
typedef struct pc_pair_sink {
  int (*add)(void *user, const pc_pair *p, size_t index, pc_error *err);
  void *user;
} pc_pair_sink;

/** pc_compare_files with a sink: walks, pairs and sets up every tensor as pc_compare_files does,
 * hands each pair that needs data to the sink, and leaves the run unjudged (pc_run_conclude). */
int pc_compare_walk(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                    const pc_pair_sink *sink, pc_error *err);

/** Free the strings and shapes a tensor of a run owns (path, file, dims, dims_b, message, note,
 * did_you_mean), except those in `names` (the run's pc_run.names, or NULL: none). */
void pc_tensor_clear(pc_tensor *t, const pc_arena *names);

/** The end of pc_compare_files once every tensor is done: the run-level judgement, PC_EEMPTY
 * for a run that compared nothing unless allow_empty (pc_options.allow_empty), and the
 * warnings about tolerance rules that match nothing. */
int pc_run_conclude(pc_run *run, const pc_tolset *tols, bool allow_empty, pc_error *err);

/** Appends a warning to the run (pc_run.warnings): it fails nothing and is shown on stderr and
 * in JSON. PC_ENOMEM. */
int pc_run_warn(pc_run *run, const char *text);

#endif
