/* Large arrays held in a temporary file (spill.h). */
#define _GNU_SOURCE /* MADV_DONTNEED */
#include "spill.h"

#include <fcntl.h>    /* posix_fallocate */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* getenv, malloc, mkstemp, realloc, free */
#include <string.h>   /* memcpy */
#include <sys/mman.h> /* mmap, munmap, madvise */
#include <unistd.h>   /* close, unlink */

_Thread_local unsigned pc_spill_steps;

/* A new unlinked file of `bytes` in $TMPDIR (else /tmp), its blocks allocated, mapped shared;
 * NULL when any step fails. The mapping keeps the file alive, so the descriptor is closed. */
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
  if (posix_fallocate(fd, 0, (off_t)bytes) == 0)
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

int pc_spill_resize(void **base, size_t *mapped, size_t keep, size_t bytes) {
  void *file = bytes > PC_SPILL_MIN ? pc_spill_map(bytes) : NULL;
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
  if (keep)
    memcpy(p, *base, keep);
  pc_spill_free(*base, *mapped);
  *base = p;
  *mapped = file ? bytes : 0;
  return 0;
}

void pc_spill_trim(void *base, size_t mapped) {
#ifdef MADV_DONTNEED
  if (mapped)
    madvise(base, mapped, MADV_DONTNEED); /* advice: a failure leaves the pages resident */
#else
  (void)base;
  (void)mapped;
#endif
}

void pc_spill_free(void *base, size_t mapped) {
  if (mapped)
    munmap(base, mapped);
  else
    free(base);
}
