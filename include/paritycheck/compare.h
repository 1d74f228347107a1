/* paritycheck comparison: walks two HDF5 files, matches datasets by full path, streams each pair
 * through the numerics of docs/metrics.md and judges it against a pc_tolset. The result is a
 * plain read-only structure that the report writers consume. */
#ifndef PARITYCHECK_COMPARE_H
#define PARITYCHECK_COMPARE_H

#include <paritycheck/error.h>     /* pc_error */
#include <paritycheck/result.h>    /* pc_run */
#include <paritycheck/tolerance.h> /* pc_tolset */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Reports how far a comparison has got: stored bytes read of both files so far, of `total`.
 * Called on the thread that called pc_compare_files. */
typedef void (*pc_progress_fn)(void *user, uint64_t done, uint64_t total);

/* pc_options.block_elems when 0: large enough to amortise one read, small enough that buffers
 * stay a few MiB. */
#define PC_DEFAULT_BLOCK_ELEMS ((size_t)1 << 18)

/* pc_options.max_memory when 0 (docs/robustness.md): far above the chunks that dumpers write,
 * far below the 4 GiB chunk a hostile file can declare. */
#define PC_DEFAULT_MAX_MEMORY ((uint64_t)1 << 30)

#define PC_OPTIONS_VERSION 2
typedef struct pc_options {
  int version;             /* PC_OPTIONS_VERSION */
  const pc_tolset *tols;   /* required */
  size_t block_elems;      /* elements per read block; 0 = PC_DEFAULT_BLOCK_ELEMS */
  unsigned threads;        /* worker threads; 0 = one per online core; 1 = none */
  pc_progress_fn progress; /* may be NULL */
  void *progress_user;
  uint64_t max_memory; /* bytes one dataset may need at once: one whose uncompressed chunk is
                          larger is an error (docs/robustness.md); 0 = PC_DEFAULT_MAX_MEMORY */
  bool skip_quantiles; /* true: no quantiles (stats.has_quantiles false), for callers that show
                          none: every other figure is the same, and float32 folds faster */
} pc_options;
#define PC_OPTIONS_INIT                                                                            \
  { PC_OPTIONS_VERSION, NULL, 0, 0, NULL, NULL, 0, false }

/** Compare the HDF5 files at path_a (reference) and path_b (candidate). On success *out holds
 * the run (free it with pc_run_free); datasets that cannot be read are tensors with verdict
 * error. Returns PC_EIO when either file cannot be opened or walked, PC_EUSAGE for bad options,
 * PC_ENOMEM. */
int pc_compare_files(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                     pc_error *err);

/** Three-way mode: compare the HDF5 file at path_ref (R, e.g. a CPU float64 run) with run's A
 * and with run's B, each as pc_compare_files(R, side) does with R as the reference, and attach
 * each side's distance to R to every tensor of run by path (pc_tensor.vs_reference;
 * docs/metrics.md, "Three-way mode"). A tensor that R lacks, or that R-vs-A or R-vs-B could not
 * compare, has vs_reference.present false. The verdicts and figures of A vs B are left as they
 * are. On success run->path_ref is a copy of path_ref. Returns PC_EIO naming the file when R
 * (or A or B) cannot be opened or walked, PC_EUSAGE for bad arguments, PC_ENOMEM; on error run
 * is unchanged. */
int pc_compare_reference(pc_run *run, const char *path_ref, const pc_options *opts, pc_error *err);

/** Free a run; NULL is accepted. */
void pc_run_free(pc_run *run);

/** When `on`, HDF5's own error stack is printed to stderr (for --debug); off by default. */
void pc_set_debug(bool on);

#ifdef __cplusplus
}
#endif
#endif
