/* Small helpers shared by the modules. */
#include "pc_internal.h"

#include <stdlib.h> /* malloc, free */
#ifdef PC_HAVE_MALLOC_TRIM
#include <malloc.h> /* malloc_trim */
#endif
#include <string.h> /* strlen, memcpy */
#include <unistd.h> /* sysconf */

char *pc_strdup(const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy)
    memcpy(copy, s, n);
  return copy;
}

int pc_shape_set(int *rank, uint64_t **dims, int src_rank, const uint64_t *src) {
  free(*dims);
  *dims = NULL;
  *rank = src_rank;
  if (src_rank <= 0)
    return PC_OK;
  *dims = malloc((size_t)src_rank * sizeof **dims);
  if (!*dims)
    return PC_ENOMEM;
  memcpy(*dims, src, (size_t)src_rank * sizeof **dims);
  return PC_OK;
}

void pc_heap_release(void) {
#ifdef PC_HAVE_MALLOC_TRIM /* glibc's; elsewhere the allocator gives memory back as it sees fit */
  malloc_trim(0);
#endif
}

unsigned pc_threads_or_cores(unsigned requested) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return requested ? requested : cores > 0 ? (unsigned)cores : 1;
}
