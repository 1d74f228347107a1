/* paritycheck comparison: walks two tensor dumps (or two folders of them, file by file), matches
 * datasets by full path (after the name mapping of pc_options), streams each pair through the
 * numerics of docs/metrics.md and judges it against a pc_tolset. The result is a plain read-only
 * structure that the report writers consume. */
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
 * Called on the thread that called pc_compare_files; also with total 0 (no figure) while a
 * file's metadata is read (a large safetensors header), to say that the work goes on. */
typedef void (*pc_progress_fn)(void *user, uint64_t done, uint64_t total);

/* pc_options.block_elems when 0: large enough to amortise one read, small enough that buffers
 * stay a few MiB. */
#define PC_DEFAULT_BLOCK_ELEMS ((size_t)1 << 18)

/* pc_options.max_memory when 0 (docs/robustness.md): far above the chunks that dumpers write,
 * far below the 4 GiB chunk a hostile file can declare. */
#define PC_DEFAULT_MAX_MEMORY ((uint64_t)1 << 30)

/* A rename of B's dataset paths before pairing (README, "Name mapping"). Without '*' in `from`:
 * a path that starts with `from` has that start replaced by `to`. With '*': `from` must match
 * the whole path, each '*' matching any run of characters ('/' included, as few as can be), and
 * the k-th '*' of `to` is replaced by what the k-th '*' of `from` matched. */
typedef struct pc_name_map {
  const char *from;
  const char *to; /* no more '*' than `from` */
} pc_name_map;

#define PC_OPTIONS_VERSION 5
typedef struct pc_options {
  int version;             /* PC_OPTIONS_VERSION */
  const pc_tolset *tols;   /* required */
  size_t block_elems;      /* elements per read block; 0 = PC_DEFAULT_BLOCK_ELEMS */
  unsigned threads;        /* worker threads; 0 = one per online core; 1 = none */
  pc_progress_fn progress; /* may be NULL */
  void *progress_user;
  uint64_t max_memory; /* bytes one dataset may need at once: one whose uncompressed chunk is
                          larger is an error (docs/robustness.md); likewise each file's metadata
                          (a safetensors header, the dataset records): a file that needs more
                          is PC_EIO naming it; 0 = PC_DEFAULT_MAX_MEMORY */
  bool skip_quantiles; /* true: no quantiles (stats.has_quantiles false), for callers that show
                          none: every other figure is the same, and float32 folds faster */
  /* Which tensors take part, applied to the names after mapping (globs as in tolerance rules,
   * matched against the dataset path and, for folders, the tensor path "file:dataset"): with
   * any `include`, only tensors that one matches; never those that an `exclude` matches. */
  const char *const *include;
  size_t ninclude;
  const char *const *exclude;
  size_t nexclude;
  /* Prefixes dropped from both sides' path components, before the maps (README, "Name
   * mapping"): "module." turns "/module.fc/out" and "/activations/003_module.fc" into
   * "/fc/out" and "/activations/003_fc". */
  const char *const *strip_prefix;
  size_t nstrip_prefix;
  const pc_name_map *maps; /* B's paths: the first map that applies renames a path */
  size_t nmaps;
  /* A run that compared nothing (no tensor took part, or every one was skipped) is PC_EEMPTY
   * unless this is set: a gate that compared nothing must not pass (docs/robustness.md). */
  bool allow_empty;
  /* The honest envelope (docs/envelope.md): the file given here judges A's tensors it holds
   * (not in folder mode); NULL: the sidecar beside each file of A (x.h5 -> x.envelope.h5),
   * where there is one. never beside B. no_envelope: none at all. */
  const char *envelope;
  bool no_envelope;
  /* B is the file under test: its tolerance-affecting attributes (reduction_length,
   * accumulation_dtype, module_type and any attribute a rule's match_attr names) are ignored
   * unless this is set (CLI --trust-b-metadata; docs/robustness.md, "Trust model"). Set, B's
   * are used where A has none, and a rule's condition holds on either side's value. */
  bool trust_b_metadata;
} pc_options;
#define PC_OPTIONS_INIT                                                                            \
  {                                                                                                \
    PC_OPTIONS_VERSION, NULL, 0, 0, NULL, NULL, 0, false, NULL, 0, NULL, 0, NULL, 0, NULL, 0,      \
        false, NULL, false, false                                                                  \
  }

/** Compare the tensor dumps at path_a (reference) and path_b (candidate). When both are
 * folders, their files are paired by path relative to the folder (recursively), each pair is
 * compared as two files are, and every tensor's path is "FILE:DATASET" (pc_tensor.file); a
 * file on one side only is one tensor, missing on the other side, a file that is not a tensor
 * dump one skipped tensor, and one that cannot be read (or is empty, a FIFO, a dangling link)
 * one error tensor; symbolic links to folders are followed. The include and exclude globs never
 * leave out a missing or unreadable file. On success *out holds the run (free it with pc_run_free);
 * datasets (and folder files) that cannot be read are tensors with verdict error. Returns PC_EIO
 * when either file cannot be opened or walked (outside folder mode), PC_EUSAGE for bad options
 * (a bad glob or map) or a folder paired with a file, PC_ENOMATCH when both sides hold tensors
 * but no name is on both, PC_EEMPTY when nothing was compared (pc_options.allow_empty),
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
