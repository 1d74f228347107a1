/* Tensor names before pairing (names.h). */
#include "names.h"
#include "pc_internal.h"

#include <fnmatch.h> /* fnmatch */
#include <stdlib.h>  /* malloc, calloc, free */
#include <string.h>  /* strlen, strncmp, memcpy, strchr */

/* Stars in one map's `from`: more is no real rename, and each adds a row to the match memo. */
enum { PC_MAP_STARS_MAX = 8 };

static size_t pc_stars(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    n += *s == '*';
  return n;
}

static int pc_check_globs(const char *const *globs, size_t n, const char *opt, pc_error *err) {
  for (size_t i = 0; i < n; i++) {
    const char *why = globs[i] && *globs[i] ? pc_glob_problem(globs[i]) : "empty glob";
    if (why)
      return pc_error_set(err, PC_EUSAGE, "%s '%s': %s", opt, globs[i] ? globs[i] : "", why);
  }
  return PC_OK;
}

int pc_names_check(const pc_options *o, pc_error *err) {
  int rc = pc_check_globs(o->include, o->ninclude, "--include", err);
  if (rc == PC_OK)
    rc = pc_check_globs(o->exclude, o->nexclude, "--exclude", err);
  for (size_t i = 0; rc == PC_OK && i < o->nstrip_prefix; i++) {
    const char *p = o->strip_prefix[i];
    if (!p || !p[strspn(p, "/")])
      rc = pc_error_set(err, PC_EUSAGE, "--strip-prefix '%s': empty prefix", p ? p : "");
  }
  for (size_t i = 0; rc == PC_OK && i < o->nmaps; i++) {
    const pc_name_map *m = &o->maps[i];
    if (!m->from || !*m->from || !m->to)
      rc = pc_error_set(err, PC_EUSAGE, "--map: FROM=TO wants a non-empty FROM");
    else if (pc_stars(m->from) > PC_MAP_STARS_MAX)
      rc = pc_error_set(err, PC_EUSAGE, "--map '%s=%s': more than %d '*'", m->from, m->to,
                        PC_MAP_STARS_MAX);
    else if (pc_stars(m->to) > pc_stars(m->from))
      rc = pc_error_set(err, PC_EUSAGE, "--map '%s=%s': TO has more '*' than FROM", m->from, m->to);
  }
  return rc;
}

/* --- stripping prefixes -------------------------------------------------------------------- */

/* Drops prefix p (without leading '/') at the start of every component of `path` in place,
 * after a call index ("003_", as pcdump writes) where the component has one. A component that
 * was the prefix alone goes with its '/'. */
static void pc_strip(char *path, const char *p) {
  size_t lp = strlen(p);
  char *w = path;
  const char *r = path;
  while (*r) { /* r is at the start of a component */
    const char *q = r;
    while (*q >= '0' && *q <= '9')
      q++;
    q = q != r && *q == '_' ? q + 1 : r;
    if (strncmp(q, p, lp) == 0) {
      bool bare = q == r;
      memmove(w, r, (size_t)(q - r)); /* the call index stays */
      w += q - r;
      r = q + lp;
      if (bare && *r == '/' && (w == path || w[-1] == '/'))
        r++;
    }
    while (*r && *r != '/')
      *w++ = *r++;
    if (*r == '/')
      *w++ = *r++;
  }
  *w = '\0';
}

/* --- maps ------------------------------------------------------------------------------------ */

typedef struct pc_cap {
  const char *s;
  size_t len;
} pc_cap;

/* Whether pattern p (literal characters and '*') matches the whole of s, each star as short as
 * can be; caps[k] receives what the k-th star matched. failed[k * (len + 1) + offset] remembers
 * that star k cannot start at that offset of the whole string (at `base`), which keeps a
 * pattern of many stars linear per star in the string's length. */
typedef struct pc_matcher {
  const char *base;
  size_t len;
  unsigned char *failed;
  pc_cap caps[PC_MAP_STARS_MAX];
} pc_matcher;

static bool pc_star_match(pc_matcher *m, const char *p, const char *s, size_t k) {
  while (*p && *p != '*') {
    if (*p++ != *s++)
      return false;
  }
  if (!*p)
    return *s == '\0';
  unsigned char *seen = &m->failed[k * (m->len + 1) + (size_t)(s - m->base)];
  if (*seen)
    return false;
  for (size_t n = 0;; n++) {
    m->caps[k] = (pc_cap){s, n};
    if (pc_star_match(m, p + 1, s + n, k + 1))
      return true;
    if (s[n] == '\0')
      break;
  }
  *seen = 1;
  return false;
}

/* The path renamed by map m into *out (malloc'd), or *out NULL when m does not apply. */
static int pc_apply_map(const pc_name_map *m, const char *path, char **out) {
  size_t lf = strlen(m->from), lp = strlen(path), lt = strlen(m->to);
  *out = NULL;
  if (!strchr(m->from, '*')) {
    if (strncmp(path, m->from, lf) != 0)
      return PC_OK;
    if (!(*out = malloc(lt + lp - lf + 1)))
      return PC_ENOMEM;
    memcpy(*out, m->to, lt);
    memcpy(*out + lt, path + lf, lp - lf + 1);
    return PC_OK;
  }
  pc_matcher mt = {path, lp, calloc(pc_stars(m->from) * (lp + 1), 1), {{0}}};
  if (!mt.failed)
    return PC_ENOMEM;
  bool hit = pc_star_match(&mt, m->from, path, 0);
  free(mt.failed);
  if (!hit)
    return PC_OK;
  if (!(*out = malloc(lt + lp + 1))) /* the captures are parts of path, in order */
    return PC_ENOMEM;
  char *w = *out;
  size_t k = 0;
  for (const char *t = m->to; *t; t++) {
    if (*t != '*') {
      *w++ = *t;
      continue;
    }
    memcpy(w, mt.caps[k].s, mt.caps[k].len);
    w += mt.caps[k++].len;
  }
  *w = '\0';
  return PC_OK;
}

int pc_names_map(const pc_options *o, bool b, const char *path, char **out) {
  char *name = pc_strdup(path);
  *out = NULL;
  if (!name)
    return PC_ENOMEM;
  for (size_t i = 0; i < o->nstrip_prefix; i++)
    pc_strip(name, o->strip_prefix[i] + strspn(o->strip_prefix[i], "/"));
  if (!*name) { /* nothing but prefixes: keep the path as it was */
    free(name);
    name = pc_strdup(path);
  }
  for (size_t i = 0; b && name && i < o->nmaps; i++) {
    char *renamed;
    if (pc_apply_map(&o->maps[i], name, &renamed) < 0) {
      free(name);
      return PC_ENOMEM;
    }
    if (renamed) {
      free(name);
      name = renamed;
      break;
    }
  }
  *out = name;
  return name ? PC_OK : PC_ENOMEM;
}

/* --- selection ----------------------------------------------------------------------------- */

static bool pc_any_glob(const char *const *globs, size_t n, const char *name, const char *full) {
  for (size_t i = 0; i < n; i++)
    if (fnmatch(globs[i], name, 0) == 0 || (full && fnmatch(globs[i], full, 0) == 0))
      return true;
  return false;
}

bool pc_names_selected(const pc_options *o, const char *name, const char *full) {
  if (o->ninclude && !pc_any_glob(o->include, o->ninclude, name, full))
    return false;
  return !pc_any_glob(o->exclude, o->nexclude, name, full);
}

char *pc_names_full(const char *file, const char *name) {
  size_t lf = strlen(file), ln = strlen(name);
  char *s = malloc(lf + ln + 2);
  if (s) {
    memcpy(s, file, lf);
    s[lf] = ':';
    memcpy(s + lf + 1, name, ln + 1);
  }
  return s;
}

/* --- suggestions --------------------------------------------------------------------------- */

/* The edit distance of a and b when it is at most k, else k + 1: only the diagonal band of
 * width 2k + 1 of the table is filled, two rows of room for lb + 1 cells each. */
static size_t pc_edits_within(const char *a, size_t la, const char *b, size_t lb, size_t k,
                              size_t *prev, size_t *cur) {
  size_t over = k + 1;
  for (size_t j = 0; j <= lb; j++)
    prev[j] = j <= k ? j : over;
  for (size_t i = 1; i <= la; i++) {
    size_t lo = i > k ? i - k : 1, hi = i + k < lb ? i + k : lb;
    cur[0] = i <= k ? i : over;
    size_t best = lo == 1 ? cur[0] : over;
    if (lo > 1)
      cur[lo - 1] = over;
    for (size_t j = lo; j <= hi; j++) {
      size_t d = prev[j - 1] + (a[i - 1] != b[j - 1]);
      if (prev[j] + 1 < d)
        d = prev[j] + 1;
      if (cur[j - 1] + 1 < d)
        d = cur[j - 1] + 1;
      cur[j] = d < over ? d : over;
      best = cur[j] < best ? cur[j] : best;
    }
    if (hi < lb)
      cur[hi + 1] = over;
    if (best == over) /* the band has gone past k everywhere: it can only grow */
      return over;
    size_t *t = prev;
    prev = cur;
    cur = t;
  }
  return prev[lb];
}

long pc_names_closest(const char *name, const char *const *cand, size_t n, uint64_t *budget) {
  size_t la = strlen(name), k = la / 4 > 1 ? la / 4 : 1, longest = 0;
  for (size_t i = 0; i < n; i++) {
    size_t lb = strlen(cand[i]);
    longest = lb > longest ? lb : longest;
  }
  size_t *rows = malloc(2 * (longest + 1) * sizeof *rows);
  long best = -1;
  size_t best_d = k + 1;
  for (size_t i = 0; rows && i < n; i++) {
    size_t lb = strlen(cand[i]);
    if ((lb > la ? lb - la : la - lb) >= best_d)
      continue;
    uint64_t cost = (uint64_t)(la + 1) * (2 * k + 1);
    if (cost > *budget)
      break;
    *budget -= cost;
    size_t d = pc_edits_within(name, la, cand[i], lb, best_d - 1, rows, rows + longest + 1);
    if (d < best_d) {
      best_d = d;
      best = (long)i;
    }
  }
  free(rows);
  return best;
}
