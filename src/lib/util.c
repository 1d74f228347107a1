/* Small allocation helpers shared by the modules. */
#include "pc_internal.h"

#include <stdlib.h> /* malloc */
#include <string.h> /* strlen, memcpy */

char *pc_strdup(const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy)
    memcpy(copy, s, n);
  return copy;
}
