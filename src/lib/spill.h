/* Large arrays held in a temporary file instead of the heap (docs/performance.md, "Memory at
 * 200,000 tensors"). A run's records grow with its tensor count (1,800 bytes a tensor: 360 MB
 * at 200,000) and are read a few times in passes; on the heap they are anonymous memory, which
 * a machine without swap can never give back. Past PC_SPILL_MIN bytes such an array is a shared
 * mapping of an unlinked temporary file instead: the kernel may write its pages out and drop
 * them, and pc_spill_trim drops the ones the passes have touched, so that a process holds only the
 * pages it is using. Pointers into the array stay valid across trims: a shared file mapping
 * reads a dropped page back from the file (madvise(2), MADV_DONTNEED on Linux).
 *
 * `mapped` travels with each array: the mapping's length, 0 while the array is a heap block
 * (malloc'd, or NULL when empty). Internal to the library. */
#ifndef PC_SPILL_H
#define PC_SPILL_H

#include <stddef.h> /* size_t */

#include <stdatomic.h> /* atomic_load_explicit */

/* Arrays up to this size stay on the heap: below it a file and a mapping cost more than the
 * memory they would save. */
enum { PC_SPILL_MIN = 4 << 20 };

/* Arrays larger than this are spilled: PC_SPILL_MIN, which the tests lower to spill every
 * array of a run. */
extern size_t pc_spill_min;

/* Mappings alive at once, at most; past that, arrays stay on the heap. A run holds one (its
 * records), each open file two (its datasets, its storage notes), a pairing one. */
enum { PC_SPILL_MAX = 16 };

/* A thread that touches spilled arrays gives back their pages every PC_SPILL_STRIDE accesses
 * (pc_spill_step). Counted by accesses on each thread, not by index, since reports visit a
 * run's records sorted by how bad they are. A read fault on a file mapping maps the 16 pages
 * around it that the page cache holds (Linux's fault-around, 64 KiB), so in a random order 32
 * accesses hold at most 2 MiB a thread: the report files are written side by side, on up to
 * six threads at once. A trim is a system call a mapping; a pass over 200,000 records costs a
 * few thousand of them. */
enum { PC_SPILL_STRIDE = 32 };

/* How many mappings are alive, and this thread's accesses (pc_spill_step). */
extern atomic_uint pc_spill_live;
extern _Thread_local unsigned pc_spill_steps;

/** Make the array *base (*mapped as above) hold `bytes`, keeping its first `keep` bytes
 * (keep is at most its current size and `bytes`); it may move, as with realloc. Up to
 * pc_spill_min bytes it is a heap block. Past that it is a new unlinked file in $TMPDIR (else
 * /tmp) of `bytes`, its disk space allocated at once (posix_fallocate), so that a write through
 * the mapping cannot meet a full disk later (SIGBUS); when no such file can be made, or
 * PC_SPILL_MAX mappings are alive, it stays on the heap. 0, or -1 when neither can hold
 * `bytes` (the array is then unchanged). */
int pc_spill_resize(void **base, size_t *mapped, size_t keep, size_t bytes);

/** Drop the resident pages of every mapped array; they are read back from their files when
 * next touched. Safe while other threads read and write the arrays. */
void pc_spill_trim(void);

/** An access to a spilled array (or one that may be): pc_spill_trim at every
 * PC_SPILL_STRIDE-th of this thread while any array is mapped. */
static inline void pc_spill_step(void) {
  if (atomic_load_explicit(&pc_spill_live, memory_order_relaxed) &&
      ++pc_spill_steps % PC_SPILL_STRIDE == 0)
    pc_spill_trim();
}

/** Release the array (unmap, or free a heap block). */
void pc_spill_free(void *base, size_t mapped);

#endif
