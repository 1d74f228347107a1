/* Re-aligning the dumper's call indices (realign.h). */
#include "realign.h"
#include "pc_internal.h"

#include <stdlib.h> /* malloc, calloc, qsort, strtoull, free */
#include <string.h> /* strcmp, strlen, strspn */

/* A name with a call index, on one side of an entry of the pairing. */
typedef struct pc_call {
  char *key;      /* the name without its call indices (malloc'd) */
  uint64_t index; /* its first call index: call order */
  size_t entry;   /* its entry in the pairing's m */
} pc_call;

/* The length of the call index ("003_") that starts component s, or 0. */
static size_t pc_index_len(const char *s) {
  size_t n = strspn(s, "0123456789");
  return n && s[n] == '_' ? n + 1 : 0;
}

/* name without the call indices of its components into *key (malloc'd) and its first index
 * into *index; *key NULL when it has none. PC_ENOMEM. */
static int pc_call_key(const char *name, char **key, uint64_t *index) {
  char *k = malloc(strlen(name) + 1), *w = k;
  bool found = false;
  *key = NULL;
  if (!k)
    return PC_ENOMEM;
  for (const char *r = name; *r;) { /* r is at the start of a component */
    size_t skip = pc_index_len(r);
    if (skip && !found)
      *index = strtoull(r, NULL, 10); /* saturates: a later index of 20 digits ties */
    found = found || skip;
    r += skip;
    while (*r && *r != '/')
      *w++ = *r++;
    if (*r == '/')
      *w++ = *r++;
  }
  *w = '\0';
  if (found)
    *key = k;
  else
    free(k);
  return PC_OK;
}

static int pc_cmp_call(const void *x, const void *y) {
  const pc_call *a = x, *b = y;
  int c = strcmp(a->key, b->key);
  if (c)
    return c;
  if (a->index != b->index)
    return a->index < b->index ? -1 : 1;
  return a->entry < b->entry ? -1 : a->entry > b->entry;
}

static void pc_calls_free(pc_call *v, size_t n) {
  for (size_t i = 0; v && i < n; i++)
    free(v[i].key);
  free(v);
}

/* The calls of side (0: A, 1: B) of p, only those of lone entries when lone, sorted by key and
 * call order. PC_ENOMEM. */
static int pc_calls(const pc_pairing *p, int side, bool lone, pc_call **out, size_t *n) {
  pc_call *v = malloc((p->n ? p->n : 1) * sizeof *v);
  int rc = v ? PC_OK : PC_ENOMEM;
  *n = 0;
  for (size_t i = 0; rc == PC_OK && i < p->n; i++) {
    const pc_match *m = &p->m[i];
    pc_spill_touch(m);
    const pc_dataset *mine = side ? m->b : m->a, *theirs = side ? m->a : m->b;
    if (!mine || (lone && theirs))
      continue;
    v[*n].entry = i;
    rc = pc_call_key(m->name, &v[*n].key, &v[*n].index);
    *n += rc == PC_OK && v[*n].key;
  }
  if (rc < 0) {
    pc_calls_free(v, *n);
    return rc;
  }
  qsort(v, *n, sizeof *v, pc_cmp_call);
  *out = v;
  return PC_OK;
}

/* Whether two sorted lists of calls share a key. */
static bool pc_share_key(const pc_call *a, size_t na, const pc_call *b, size_t nb) {
  for (size_t i = 0, j = 0; i < na && j < nb;) {
    int c = strcmp(a[i].key, b[j].key);
    if (c == 0)
      return true;
    i += c < 0;
    j += c > 0;
  }
  return false;
}

/* The re-pairing under way: for each A entry the B call it pairs with. */
typedef struct pc_plan {
  const pc_call *ca, *cb;
  size_t na, nb;
  long *partner; /* by A entry: index into cb, -1 none, -2 no call index (keeps its pair) */
  long *call_of; /* by entry: its index into cb, or -1 */
  bool *used;    /* by B call: paired */
} pc_plan;

/* The k-th call of a key in A with the k-th call of that key in B. */
static void pc_plan_pairs(pc_plan *pl, size_t a_count, size_t n) {
  for (size_t i = 0; i < a_count; i++)
    pl->partner[i] = -2;
  for (size_t i = 0; i < n; i++)
    pl->call_of[i] = -1;
  for (size_t i = 0; i < pl->na; i++)
    pl->partner[pl->ca[i].entry] = -1;
  for (size_t j = 0; j < pl->nb; j++)
    pl->call_of[pl->cb[j].entry] = (long)j;
  for (size_t i = 0, j = 0; i < pl->na && j < pl->nb;) {
    int c = strcmp(pl->ca[i].key, pl->cb[j].key);
    if (c == 0) {
      pl->partner[pl->ca[i].entry] = (long)j;
      pl->used[j] = true;
    }
    i += c <= 0;
    j += c >= 0;
  }
}

/* A's entry i under the plan: its new partner in B. */
static const pc_dataset *pc_plan_b(const pc_pairing *p, const pc_plan *pl, size_t i) {
  long j = pl->partner[i];
  return j == -2 ? p->m[i].b : j >= 0 ? p->m[pl->cb[j].entry].b : NULL;
}

static int pc_cmp_lone(const void *x, const void *y) {
  const pc_dataset *a = ((const pc_match *)x)->b, *b = ((const pc_match *)y)->b;
  return a < b ? -1 : a > b; /* one file's table: its order */
}

/* B's entries that stay or become lone into out, in B's order; a name A keeps is copied (when
 * the names are owned). *k: how many. PC_ENOMEM (nothing left to free). */
static int pc_plan_lone(const pc_pairing *p, const pc_plan *pl, pc_match *out, bool *copy,
                        size_t *k) {
  *k = 0;
  for (size_t e = 0; e < p->n; e++) {
    long j = pl->call_of[e];
    const pc_match *m = &p->m[e];
    pc_spill_touch(m);
    if (!m->b || (j < 0 && m->a) || (j >= 0 && pl->used[j]))
      continue; /* no B side, or B keeps or finds its pair */
    copy[*k] = m->a && p->owns_names;
    out[(*k)++] = (pc_match){NULL, m->b, m->name, strcmp(m->name, m->b->path) != 0, -1};
  }
  for (size_t q = 0; q < *k; q++)
    if (copy[q] && !(out[q].name = pc_strdup(out[q].name))) {
      while (q--)
        if (copy[q])
          free((char *)out[q].name);
      return PC_ENOMEM;
    }
  qsort(out, *k, sizeof *out, pc_cmp_lone);
  return PC_OK;
}

/* Whether the plan changes any pair; the changed pairs counted into p. */
static bool pc_plan_changes(pc_pairing *p, const pc_plan *pl) {
  bool changes = false;
  p->realigned = 0;
  for (size_t i = 0; i < p->a_count; i++) {
    pc_spill_touch(&p->m[i]);
    const pc_dataset *b = pc_plan_b(p, pl, i);
    if (b == p->m[i].b)
      continue;
    changes = true;
    if (b && !p->realigned++)
      p->realigned_first = (long)i;
  }
  return changes;
}

/* p's matches replaced by the plan's: A's entries with their new partners, then the lone B. */
static int pc_plan_apply(pc_pairing *p, const pc_plan *pl) {
  void *v = NULL;
  size_t mapped = 0, nlone = 0;
  size_t room = p->a_count + p->b_count; /* fewer pairs than before: more entries */
  bool *copy = malloc((p->b_count ? p->b_count : 1) * sizeof *copy);
  if (!copy || pc_spill_resize(&v, &mapped, 0, room * sizeof(pc_match), PC_SPILL_MIN) != 0 ||
      pc_plan_lone(p, pl, (pc_match *)v + p->a_count, copy, &nlone) < 0) {
    free(copy);
    pc_spill_free(v, mapped);
    return PC_ENOMEM;
  }
  free(copy);
  pc_match *m = v;
  size_t both = 0;
  for (size_t i = 0; i < p->a_count; i++) {
    pc_spill_touch(&p->m[i]);
    m[i] = (pc_match){p->m[i].a, pc_plan_b(p, pl, i), p->m[i].name, false, -1};
    both += m[i].b != NULL;
  }
  for (size_t e = p->a_count; p->owns_names && e < p->n; e++) /* lone B now paired */
    if (pl->call_of[e] >= 0 && pl->used[pl->call_of[e]])
      free((char *)p->m[e].name);
  pc_spill_free(p->m, p->m_mapped);
  p->m = m;
  p->m_mapped = mapped;
  p->n = p->a_count + nlone;
  p->both = both;
  return PC_OK;
}

/* Re-pairs every call of p by key and occurrence (pc_realign). */
static int pc_repair(pc_pairing *p, const pc_call *ca, size_t na, const pc_call *cb, size_t nb) {
  pc_plan pl = {ca,
                cb,
                na,
                nb,
                malloc((p->a_count ? p->a_count : 1) * sizeof(long)),
                malloc((p->n ? p->n : 1) * sizeof(long)),
                calloc(nb ? nb : 1, sizeof(bool))};
  int rc = pl.partner && pl.call_of && pl.used ? PC_OK : PC_ENOMEM;
  if (rc == PC_OK) {
    pc_plan_pairs(&pl, p->a_count, p->n);
    if (pc_plan_changes(p, &pl))
      rc = pc_plan_apply(p, &pl);
  }
  free(pl.partner);
  free(pl.call_of);
  free(pl.used);
  return rc;
}

int pc_realign(pc_pairing *p) {
  pc_call *ca = NULL, *cb = NULL;
  size_t na = 0, nb = 0;
  p->realigned = 0;
  p->realigned_first = -1;
  if (p->both == p->a_count && p->both == p->b_count)
    return PC_OK;
  /* the lone names first: in most runs they share no key, and nothing more is asked */
  int rc = pc_calls(p, 0, true, &ca, &na);
  if (rc == PC_OK)
    rc = pc_calls(p, 1, true, &cb, &nb);
  bool shifted = rc == PC_OK && pc_share_key(ca, na, cb, nb);
  pc_calls_free(ca, na);
  pc_calls_free(cb, nb);
  ca = cb = NULL;
  na = nb = 0;
  if (shifted && (rc = pc_calls(p, 0, false, &ca, &na)) == PC_OK &&
      (rc = pc_calls(p, 1, false, &cb, &nb)) == PC_OK)
    rc = pc_repair(p, ca, na, cb, nb);
  pc_calls_free(ca, na);
  pc_calls_free(cb, nb);
  return rc;
}
