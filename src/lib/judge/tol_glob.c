/* The syntax of a glob (pc_internal.h, pc_glob_problem): fnmatch does not validate its pattern
 * (an unbalanced '[' silently matches a literal '['), so every glob the library matches, a
 * tolerance rule's or a name filter's, is checked here first. */
#include "pc_internal.h"

#include <string.h> /* memcmp, strlen, strstr */

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The POSIX character classes fnmatch knows in every locale. */
static const char *const char_classes[] = {"alnum", "alpha", "blank", "cntrl", "digit", "graph",
                                           "lower", "print", "punct", "space", "upper", "xdigit"};

/* At "[:" inside a bracket expression: moves *pos to the ']' of the closing ":]". */
static const char *skip_char_class(const char *g, size_t *pos) {
  const char *name = g + *pos + 2;
  const char *end = strstr(name, ":]");
  if (!end)
    return "unterminated character class";
  size_t i = 0;
  while (i < COUNT_OF(char_classes) && !(strlen(char_classes[i]) == (size_t)(end - name) &&
                                         memcmp(char_classes[i], name, (size_t)(end - name)) == 0))
    i++;
  if (i == COUNT_OF(char_classes))
    return "unknown character class";
  *pos = (size_t)(end - g) + 1;
  return NULL;
}

/* At '[': moves *pos to the closing ']', following fnmatch's bracket syntax (a leading '!' or
 * '^' negates, a ']' right after the opening is a member, '\' escapes). */
static const char *skip_bracket(const char *g, size_t *pos) {
  size_t i = *pos + 1;
  if (g[i] == '!' || g[i] == '^')
    i++;
  if (g[i] == ']')
    i++;
  for (; g[i] != ']'; i++) {
    const char *why = NULL;
    if (g[i] == '\0')
      return "unbalanced '['";
    if (g[i] == '\\') {
      if (g[++i] == '\0')
        return "unbalanced '['";
    } else if (g[i] == '[' && (g[i + 1] == '.' || g[i + 1] == '=')) {
      return "collating symbols and equivalence classes are not supported";
    } else if (g[i] == '[' && g[i + 1] == ':') {
      why = skip_char_class(g, &i);
    }
    if (why)
      return why;
  }
  *pos = i;
  return NULL;
}

/* NULL when g is well formed, else why not. */
const char *pc_glob_problem(const char *g) {
  for (size_t i = 0; g[i] != '\0'; i++) {
    const char *why = NULL;
    if (g[i] == '\\') {
      if (g[++i] == '\0')
        return "trailing backslash";
    } else if (g[i] == '[') {
      why = skip_bracket(g, &i);
    }
    if (why)
      return why;
  }
  return NULL;
}
