/* "Did you mean" (cli_suggest.h). */
#include "cli_suggest.h"

#include <string.h> /* strlen, strncmp */

/* Edits (insert, delete, substitute, swap two neighbours) from a to b, or more than max when
 * that is cheaper to tell. */
static size_t name_edits(const char *a, const char *b, size_t max) {
  enum { LONGEST = 256 }; /* a listed name is shorter (unknown_profile, long_opts) */
  size_t la = strlen(a), lb = strlen(b), d[3][LONGEST + 1];
  if (la > LONGEST || lb > LONGEST || (la > lb ? la - lb : lb - la) > max)
    return max + 1;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t *row = d[i % 3], *up = d[(i - 1) % 3], *up2 = d[(i + 1) % 3];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t best = up[j - 1] + (a[i - 1] != b[j - 1]);
      best = up[j] + 1 < best ? up[j] + 1 : best;
      best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && up2[j - 2] + 1 < best)
        best = up2[j - 2] + 1;
      row[j] = best;
    }
  }
  return d[la % 3][lb];
}

const char *pc_cli_closest_name(const char *name, const char *const *names, size_t n) {
  size_t len = strlen(name), max = len / 3 > 2 ? len / 3 : 2, best_d = max + 1;
  const char *best = NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(names[i], name, len) == 0)
      return names[i];
  for (size_t i = 0; i < n; i++) {
    size_t d = name_edits(name, names[i], max);
    if (d < best_d) {
      best_d = d;
      best = names[i];
    }
  }
  return best;
}
