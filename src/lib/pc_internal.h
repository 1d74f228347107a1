/* Helpers shared by the library's modules; not part of the public API. */
#ifndef PC_INTERNAL_H
#define PC_INTERNAL_H

#include "spill.h"

#include <paritycheck/error.h>
#include <paritycheck/result.h> /* pc_run, pc_tensor */

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

/** Fill err (which may be NULL) with code and a printf-style message; returns (int)code so that
 * callers can write `return pc_error_set(err, PC_EIO, "...")`. */
int pc_error_set(pc_error *err, pc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** strdup that returns NULL on NULL input. */
char *pc_strdup(const char *s);

/** A shape as the loaders and pc_tensor hold it: sets *rank and replaces *dims (freed) with a
 * copy of src's rank entries (NULL when rank <= 0). PC_ENOMEM, *dims then NULL. */
int pc_shape_set(int *rank, uint64_t **dims, int src_rank, const uint64_t *src);

/** Give the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere). A
 * closed pair of files of 200,000 datasets, and the judge of such a run, leave tens of MB free
 * below blocks that stay (the run's records and names, the judge's order), which the heap would
 * otherwise keep resident to the end of the run. */
void pc_heap_release(void);

/** Threads to use when `requested` (0: one per online core) were asked for; at least 1. */
unsigned pc_threads_or_cores(unsigned requested);

/** Why `glob` is not a well-formed tolerance-rule glob (fnmatch syntax, flags 0: '*' and '?'
 * match '/' too), or NULL when it is. Every glob the library matches is checked by this. */
const char *pc_glob_problem(const char *glob);

/** &run->tensors[i]. Every access of the library to a run's records goes through this, so that
 * a thread gives back the pages of a spilled run's records as it goes (pc_spill_touch: after
 * PC_SPILL_STRIDE new 64 KiB windows), and a pass over the run holds about 2 MiB of them
 * instead of them all. The pointer stays valid. */
static inline pc_tensor *pc_run_at(const pc_run *run, size_t i) {
  pc_spill_touch(&run->tensors[i]);
  return &run->tensors[i];
}

#endif
