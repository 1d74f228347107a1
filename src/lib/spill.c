/* Large arrays held in a temporary file (spill.h). */
#define _GNU_SOURCE      /* MADV_DONTNEED (glibc) */
#define _DARWIN_C_SOURCE /* madvise (macOS, under _POSIX_C_SOURCE) */
#include "spill.h"

#include <fcntl.h>    /* posix_fallocate */
#include <pthread.h>  /* pthread_mutex_* */
#include <stdbool.h>  /* bool */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* getenv, malloc, mkstemp, realloc, free */
#include <string.h>   /* memcpy */
#include <sys/mman.h> /* mmap, munmap, madvise, posix_madvise */
#include <unistd.h>   /* close, unlink, ftruncate */

/* Giving pages back is advice: madvise's MADV_DONTNEED drops them from the process at once
 * (Linux: a shared file mapping reads them back from the file); where there is none,
 * posix_madvise's POSIX_MADV_DONTNEED, which the system may ignore (pages then stay resident
 * until it needs them). Either way the contents stay. */
static void pc_spill_advise_drop(void *p, size_t n) {
#ifdef PC_HAVE_MADVISE
  madvise(p, n, MADV_DONTNEED);
#else
  posix_madvise(p, n, POSIX_MADV_DONTNEED);
#endif
}

/* A fault maps small page-cache folios: 64 KiB, not 256 KiB or more (Linux's fault-around). */
static void pc_spill_advise_random(void *p, size_t n) {
#ifdef PC_HAVE_MADVISE
  madvise(p, n, MADV_RANDOM);
#else
  posix_madvise(p, n, POSIX_MADV_RANDOM);
#endif
}

/* The file's blocks reserved, so that a full disk fails here and not as SIGBUS on a later
 * write to the mapping; without posix_fallocate (macOS), only its size is set: such a fault
 * then ends the run as a crash, which the CLI reports (exit 2). */
static int pc_spill_reserve(int fd, size_t bytes) {
#ifdef PC_HAVE_POSIX_FALLOCATE
  return posix_fallocate(fd, 0, (off_t)bytes);
#else
  return ftruncate(fd, (off_t)bytes);
#endif
}

size_t pc_spill_min = SIZE_MAX;
atomic_uint pc_spill_live;
_Thread_local uintptr_t pc_spill_windows[PC_SPILL_STRIDE];
_Thread_local unsigned pc_spill_nwindows;
_Thread_local unsigned pc_spill_given;

/* The live mappings, for pc_spill_give_back: only their pages may be given back (a heap page
 * would lose its contents), and the lock keeps a give-back off a mapping being unmapped. */
static pthread_mutex_t pc_spill_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void *base;
  size_t len; /* 0: a free slot */
} pc_spill_maps[PC_SPILL_MAX];

/* Enters p in a free slot; false when there is none. */
static bool pc_spill_enter(void *p, size_t len) {
  bool entered = false;
  pthread_mutex_lock(&pc_spill_lock);
  for (int i = 0; !entered && i < PC_SPILL_MAX; i++)
    if (!pc_spill_maps[i].len) {
      pc_spill_maps[i].base = p;
      pc_spill_maps[i].len = len;
      atomic_fetch_add(&pc_spill_live, 1);
      entered = true;
    }
  pthread_mutex_unlock(&pc_spill_lock);
  return entered;
}

/* A new unlinked file of `bytes` in $TMPDIR (else /tmp), its blocks allocated, mapped shared
 * and entered; NULL when any step fails. The mapping keeps the file alive, so the descriptor
 * is closed. */
static void *pc_spill_map(size_t bytes) {
  const char *dir = getenv("TMPDIR");
  char path[4096];
  int len = snprintf(path, sizeof path, "%s/paritycheck-spill-XXXXXX", dir && *dir ? dir : "/tmp");
  if (len < 0 || (size_t)len >= sizeof path || (off_t)bytes < 0)
    return NULL;
  int fd = mkstemp(path);
  if (fd < 0)
    return NULL;
  unlink(path);
  void *p = MAP_FAILED;
  if (pc_spill_reserve(fd, bytes) == 0)
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED)
    pc_spill_advise_random(p, bytes);
  if (p != MAP_FAILED && !pc_spill_enter(p, bytes)) {
    munmap(p, bytes);
    p = MAP_FAILED;
  }
  return p == MAP_FAILED ? NULL : p;
}

/* memcpy, a MiB at a time, giving back the pages of each MiB of a mapped side once copied: a
 * whole copy would hold both arrays resident at once (40 MB when the table of a file of 200,000
 * datasets doubles). */
static void pc_spill_copy(void *to, bool to_mapped, const void *from, bool from_mapped, size_t n) {
  enum { STEP = 1 << 20 }; /* a multiple of the page size: each piece starts on a page */
  for (size_t at = 0; at < n; at += STEP) {
    size_t k = n - at < STEP ? n - at : STEP;
    memcpy((char *)to + at, (const char *)from + at, k);
    if (to_mapped)
      pc_spill_advise_drop((char *)to + at, k);
    if (from_mapped)
      pc_spill_advise_drop((char *)from + at, k);
  }
}

int pc_spill_resize(void **base, size_t *mapped, size_t keep, size_t bytes, size_t min) {
  void *file = bytes > (min < pc_spill_min ? min : pc_spill_min) ? pc_spill_map(bytes) : NULL;
  if (!file && !*mapped) { /* heap to heap: realloc keeps the contents */
    void *p = realloc(*base, bytes ? bytes : 1);
    if (!p)
      return -1;
    *base = p;
    return 0;
  }
  void *p = file ? file : malloc(bytes ? bytes : 1); /* a heap block in place of a mapping */
  if (!p)
    return -1;
  pc_spill_copy(p, file != NULL, *base, *mapped != 0, keep);
  pc_spill_free(*base, *mapped);
  *base = p;
  *mapped = file ? bytes : 0;
  return 0;
}

/* Gives back the part of [lo, hi) that lies in a live mapping. The lock is held. */
static void pc_spill_drop(uintptr_t lo, uintptr_t hi) {
  for (int i = 0; i < PC_SPILL_MAX; i++) {
    uintptr_t b = (uintptr_t)pc_spill_maps[i].base, e = b + pc_spill_maps[i].len;
    uintptr_t from = lo > b ? lo : b, to = hi < e ? hi : e;
    if (pc_spill_maps[i].len && from < to) /* advice: a failure leaves the pages resident */
      pc_spill_advise_drop((void *)from, to - from);
  }
}

static int pc_by_window(const void *x, const void *y) {
  uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
  return a < b ? -1 : a > b;
}

/* The end of the run of adjacent windows that starts at k (the windows sorted). */
static unsigned pc_run_end(unsigned k) {
  unsigned end = k + 1;
  while (end < pc_spill_nwindows && pc_spill_windows[end] <= pc_spill_windows[end - 1] + 1)
    end++;
  return end;
}

/* The thread's windows in order, each run of adjacent ones in one call, or all that lies from
 * the first to the last in one call when they form more than PC_SPILL_RUNS runs. Each call
 * flushes the TLB of every core that runs one of the process's threads: at 200,000 tensors,
 * every report, a call a window spent a sixth of the run in madvise, and the reports' passes in
 * worst-first order touch windows far apart. What lies between scattered windows is given back
 * too, as by a sweep: pages that another thread touches again are read back. */
static void pc_spill_drop_windows(void) {
  unsigned n = pc_spill_nwindows, runs = 0;
  qsort(pc_spill_windows, n, sizeof *pc_spill_windows, pc_by_window);
  for (unsigned k = 0; k < n; k = pc_run_end(k))
    runs++;
  if (runs > PC_SPILL_RUNS) {
    pc_spill_drop(pc_spill_windows[0] << 16, (pc_spill_windows[n - 1] + 1) << 16);
    return;
  }
  for (unsigned k = 0, end; k < n; k = end) {
    end = pc_run_end(k);
    pc_spill_drop(pc_spill_windows[k] << 16, (pc_spill_windows[end - 1] + 1) << 16);
  }
}

void pc_spill_give_back(void) {
  pthread_mutex_lock(&pc_spill_lock);
  if (++pc_spill_given % PC_SPILL_SWEEP == 0)
    pc_spill_drop(0, UINTPTR_MAX);
  else
    pc_spill_drop_windows();
  pthread_mutex_unlock(&pc_spill_lock);
  pc_spill_nwindows = 0;
}

void pc_spill_free(void *base, size_t mapped) {
  if (!mapped) {
    free(base);
    return;
  }
  pthread_mutex_lock(&pc_spill_lock);
  for (int i = 0; i < PC_SPILL_MAX; i++)
    if (pc_spill_maps[i].len && pc_spill_maps[i].base == base) {
      pc_spill_maps[i].len = 0;
      atomic_fetch_sub(&pc_spill_live, 1);
    }
  munmap(base, mapped);
  pthread_mutex_unlock(&pc_spill_lock);
}
