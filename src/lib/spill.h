/* Large arrays held in a temporary file instead of the heap (docs/performance.md, "Large
 * arrays in a file"). A run's records grow with its tensor count (1,800 bytes a tensor: 360 MB
 * at 200,000), a file's table with its datasets; on the heap they are anonymous memory, which
 * a machine without swap can never give back. Past a threshold such an array is a shared
 * mapping of an unlinked temporary file instead: the kernel may write its pages out and drop
 * them, and pc_spill_give_back drops the ones a thread has touched, so that a process holds
 * only the pages it is using. Pointers into the array stay valid across trims: a shared file
 * mapping reads a dropped page back from the file (madvise(2), MADV_DONTNEED on Linux).
 *
 * `mapped` travels with each array: the mapping's length, 0 while the array is a heap block
 * (malloc'd, or NULL when empty). Internal to the library. */
#ifndef PC_SPILL_H
#define PC_SPILL_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uintptr_t */

#include <stdatomic.h> /* atomic_load_explicit */

/* Thresholds. Each pass over given-back pages faults them in again, a write fault a page for
 * the passes that write: with every array spilled, 20,000 tensors took 110,000 page faults
 * against 16,000, and the full run about 4.0 s against 2.7-3.0 s. So arrays spill only where
 * memory matters: past PC_SPILL_MIN (8 MiB: a file's table spills past about 55,000 datasets;
 * at 20,000, spilled, every folding thread faulted it back in: 33,000 faults), and a run's
 * records, which the judge and the reports pass over a dozen times, past PC_SPILL_MIN_RECORDS
 * (about 28,000 tensors; up to there they fit the 64 MiB target on the heap). */
enum { PC_SPILL_MIN = 8 << 20, PC_SPILL_MIN_RECORDS = 48 << 20 };

/* A lower bound for every array's threshold: SIZE_MAX, which the tests lower (1: every array
 * spills). */
extern size_t pc_spill_min;

/* Mappings alive at once, at most; past that, arrays stay on the heap. A run holds one (its
 * records), each open file two (its datasets, its storage notes), a pairing one. */
enum { PC_SPILL_MAX = 16 };

/* A thread that touches spilled arrays gives back the pages it touched once it has touched
 * PC_SPILL_STRIDE new 64 KiB windows of them (pc_spill_touch). A read fault on a file mapping
 * maps the 16 pages around it (Linux's fault-around, 64 KiB; with MADV_RANDOM the page cache
 * keeps small folios, which would otherwise map 256 KiB and more), so a thread holds about
 * 2 MiB of them whatever the order of its accesses: the reports visit a run's records worst
 * first, on up to six threads at once. A pass in order gives back once per 2 MiB; counting
 * accesses instead gave back every 32 records and tripled a run's system time (20,000
 * tensors: 66,000 madvise calls). A window is new when it is none of those counted since the
 * last give-back, so that a pass over several arrays in step counts each array's windows once:
 * the comparison steps through six (the pairing's matches, both files' tables and storage
 * notes, the records), and counting only the last four windows as seen gave back every few
 * tensors (150,000 madvise calls at 200,000 tensors). Every PC_SPILL_SWEEP-th give-back of a
 * thread drops every mapping's pages, for those touched without pc_spill_touch (a worker
 * folding into a record, a reader): without it they stayed (162 MiB at 200,000 tensors
 * against 90). */
enum { PC_SPILL_STRIDE = 32, PC_SPILL_SWEEP = 16, PC_SPILL_RUNS = 8 };

/* How many mappings are alive; the new windows this thread touched since it last gave back. */
extern atomic_uint pc_spill_live;
extern _Thread_local uintptr_t pc_spill_windows[PC_SPILL_STRIDE];
extern _Thread_local unsigned pc_spill_nwindows;
extern _Thread_local unsigned pc_spill_given; /* give-backs so far */

/** Make the array *base (*mapped as above) hold `bytes`, keeping its first `keep` bytes
 * (keep is at most its current size and `bytes`); it may move, as with realloc. Up to `min`
 * bytes (or pc_spill_min, when lower) it is a heap block. Past that it is a new unlinked file in
 * $TMPDIR (else /tmp) of `bytes`, its disk space allocated at once (posix_fallocate), so that a
 * write through the mapping cannot meet a full disk later (SIGBUS); when no such file can be made,
 * or PC_SPILL_MAX mappings are alive, it stays on the heap. 0, or -1 when neither can hold `bytes`
 * (the array is then unchanged). */
int pc_spill_resize(void **base, size_t *mapped, size_t keep, size_t bytes, size_t min);

/** Give back the pages of this thread's windows (pc_spill_windows) that lie in mapped arrays,
 * or of every mapped array at every PC_SPILL_SWEEP-th call: they are read back from their files
 * when next touched. Then no window is counted. Safe while other threads read and write the
 * arrays. */
void pc_spill_give_back(void);

/** An access at `at` to an array that may be spilled, while any array is mapped: counts its
 * window when new, and gives back at the PC_SPILL_STRIDE-th. */
static inline void pc_spill_touch(const void *at) {
  if (!atomic_load_explicit(&pc_spill_live, memory_order_relaxed))
    return;
  uintptr_t w = (uintptr_t)at >> 16;
  unsigned n = pc_spill_nwindows;
  for (unsigned i = n; i-- > 0;) /* the newest first: most touches are of the last window */
    if (pc_spill_windows[i] == w)
      return;
  pc_spill_windows[n] = w;
  if ((pc_spill_nwindows = n + 1) == PC_SPILL_STRIDE)
    pc_spill_give_back();
}

/** Release the array (unmap, or free a heap block). */
void pc_spill_free(void *base, size_t mapped);

#endif
