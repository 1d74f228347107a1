/* paritycheck plans: one comparison spread over several processes (docs/scale-out.md), for
 * inputs larger than one machine reads in time. The library moves no data between processes:
 * the plan and each process's results are byte strings that the caller carries (the CLI, built
 * with PC_MPI, carries them over MPI).
 *
 *   process 0:      pc_plan_make, then pc_plan_bytes to every process;
 *   every process:  pc_plan_run on its own share, its results to process 0;
 *   process 0:      pc_plan_merge for each process's results, then pc_plan_finish.
 *
 * Process 0 walks both inputs once (files, or folders of shards) and decides every verdict that
 * needs no data (missing, skipped, shape or dtype mismatch). The pairs that must be read are
 * shared among the processes by bytes, largest first, each to the process with the least so
 * far; a pair larger than one process's share is cut at block starts into parts for several
 * processes. Each process opens only the files of its share, read-only, and folds its blocks as
 * pc_compare_files does; a part's results are its blocks' figures, which process 0 merges in
 * block order. The run pc_plan_finish gives is therefore the one pc_compare_files gives, figure
 * for figure and verdict for verdict, for any number of processes and threads.
 *
 * Every process must be given the same paths and options (tolerances included) and see the
 * same files. Results are in the machine's own layout: every process runs the same build of
 * the library on one architecture, which pc_plan_merge checks. */
#ifndef PARITYCHECK_PLAN_H
#define PARITYCHECK_PLAN_H

#include <paritycheck/compare.h> /* pc_options */
#include <paritycheck/error.h>   /* pc_error */
#include <paritycheck/result.h>  /* pc_run */

#include <stddef.h> /* size_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_plan pc_plan;

/** Process 0: walk and pair path_a and path_b under opts as pc_compare_files does, and share the
 * reading among `nprocs` processes (>= 1). Returns what pc_compare_files returns for the walk
 * (PC_EIO, PC_EUSAGE, PC_ENOMATCH, PC_ENOMEM), nothing having been read. */
int pc_plan_make(pc_plan **out, const char *path_a, const char *path_b, const pc_options *opts,
                 unsigned nprocs, pc_error *err);

/** The plan as bytes, for pc_plan_run in every process; valid while p is. */
void pc_plan_bytes(const pc_plan *p, const void **bytes, size_t *size);

/** How the plan shares the reading: the number of works (a whole tensor, or a part of one), and
 * in *split the number of tensors cut into parts. */
size_t pc_plan_works(const pc_plan *p, size_t *split);

/** Any process: run process `proc`'s share of the plan (bytes from pc_plan_bytes) on path_a and
 * path_b under opts, and give its results as *out (malloc'd, *size bytes; free it with free).
 * A dataset or file that cannot be read is an error tensor in the results, as in
 * pc_compare_files. Returns PC_EUSAGE when the plan is malformed or not for these options'
 * block size, PC_ENOMEM. */
int pc_plan_run(void **out, size_t *size, const void *plan, size_t plan_size, unsigned proc,
                const char *path_a, const char *path_b, const pc_options *opts, pc_error *err);

/** Process 0: take one process's results (from pc_plan_run) into the plan. Returns PC_EUSAGE
 * when they are malformed, from another plan or build, or repeat what was merged. */
int pc_plan_merge(pc_plan *p, const void *results, size_t size, pc_error *err);

/** Process 0, once every process's results are merged: the run, as pc_compare_files gives it
 * (free it with pc_run_free). PC_EUSAGE naming a tensor when some results are missing,
 * PC_ENOMEM. */
int pc_plan_finish(pc_plan *p, pc_run **out, pc_error *err);

/** Free a plan; NULL is accepted. */
void pc_plan_free(pc_plan *p);

#ifdef __cplusplus
}
#endif
#endif
