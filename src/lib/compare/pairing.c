/* Pairing the datasets of two files by name (pairing.h). */
#include "pairing.h"
#include "names.h"
#include "pc_internal.h"
#include "realign.h"

#include <stdlib.h> /* calloc, malloc, qsort, free */
#include <string.h> /* strcmp */

/* A dataset under the name it pairs by; d is NULL once it is paired (16 bytes, not 24 with a
 * flag of its own: the arrays of both sides are most of the pairing's peak memory). */
typedef struct pc_named {
  const char *name;
  const pc_dataset *d;
} pc_named;

/* Whether the names are malloc'd: a prefix or a map may rename a dataset. */
static bool pc_names_owned(const pc_options *o) {
  return o->nstrip_prefix || o->nmaps;
}

/* The datasets of a side that take part, under their names (v: n of them, spill.h). */
typedef struct pc_side {
  pc_named *v;
  size_t n, mapped;
} pc_side;

/* The datasets of f that take part, under their names, in f's order. */
static int pc_side_names(pc_side *out, const pc_file *f, bool b, const char *rel,
                         const pc_options *o) {
  size_t count = pc_file_count(f);
  void *v = NULL;
  int rc =
      pc_spill_resize(&v, &out->mapped, 0, (count ? count : 1) * sizeof *out->v, PC_SPILL_MIN) == 0
          ? PC_OK
          : PC_ENOMEM;
  out->v = v;
  out->n = 0;
  bool owned = pc_names_owned(o);
  for (size_t i = 0; rc == PC_OK && i < count; i++) {
    const pc_dataset *d = pc_file_dataset(f, i);
    char *name = NULL, *full = NULL;
    if (owned)
      rc = pc_names_map(o, b, d->path, &name);
    const char *as = owned ? name : d->path;
    if (rc == PC_OK && rel && !(full = pc_names_full(rel, as)))
      rc = PC_ENOMEM;
    if (rc == PC_OK && pc_names_selected(o, as, full))
      out->v[out->n++] = (pc_named){as, d};
    else
      free(name);
    free(full);
  }
  return rc;
}

static int pc_cmp_named(const void *x, const void *y) {
  return strcmp((*(pc_named *const *)x)->name, (*(pc_named *const *)y)->name);
}

/* The first unpaired entry of sorted (n, by name) named `name`, or NULL. */
static pc_named *pc_find_unused(pc_named **sorted, size_t n, const char *name) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(sorted[mid]->name, name) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < n && strcmp(sorted[lo]->name, name) == 0; lo++)
    if (sorted[lo]->d)
      return sorted[lo];
  return NULL;
}

/* Moves the names into out->m: A's with their namesakes, then B's unpaired. */
static int pc_match_all(pc_pairing *out, pc_named *va, size_t na, pc_named *vb, size_t nb) {
  pc_named **sb = malloc((nb ? nb : 1) * sizeof *sb);
  void *m = NULL;
  if (!sb ||
      pc_spill_resize(&m, &out->m_mapped, 0, (na + nb) * sizeof *out->m, PC_SPILL_MIN) != 0) {
    free(sb);
    return PC_ENOMEM;
  }
  out->m = m;
  for (size_t j = 0; j < nb; j++)
    sb[j] = &vb[j];
  qsort(sb, nb, sizeof *sb, pc_cmp_named);
  for (size_t i = 0; i < na; i++) {
    pc_spill_touch(&va[i]);
    pc_spill_touch(&out->m[out->n]);
    pc_named *hit = pc_find_unused(sb, nb, va[i].name);
    const pc_dataset *b = NULL;
    if (hit) {
      pc_spill_touch(hit);
      b = hit->d;
      hit->d = NULL;
    }
    out->m[out->n++] = (pc_match){va[i].d, b, va[i].name, false, -1};
    va[i].name = NULL;
    out->both += b != NULL;
  }
  for (size_t j = 0; j < nb; j++) {
    pc_spill_touch(&vb[j]);
    if (!vb[j].d)
      continue;
    pc_spill_touch(&out->m[out->n]);
    bool renamed = strcmp(vb[j].name, vb[j].d->path) != 0;
    out->m[out->n++] = (pc_match){NULL, vb[j].d, vb[j].name, renamed, -1};
    vb[j].name = NULL;
  }
  free(sb);
  return PC_OK;
}

/* Each unpaired name's closest unpaired name of the other side (pc_pairing_suggest). When every
 * name is paired, as in most runs, nothing is asked: the arrays it takes were a fifth of the
 * peak memory of a run of 200,000 tensors. */
static int pc_suggest_matches(pc_pairing *p, uint64_t *budget) {
  if (p->both == p->a_count && p->both == p->b_count)
    return PC_OK;
  const char **names = malloc((p->n ? p->n : 1) * sizeof *names);
  bool *in = malloc(2 * (p->n ? p->n : 1) * sizeof *in);
  long *suggest = malloc((p->n ? p->n : 1) * sizeof *suggest);
  int rc = names && in && suggest ? PC_OK : PC_ENOMEM;
  for (size_t i = 0; rc == PC_OK && i < p->n; i++) {
    pc_spill_touch(&p->m[i]);
    names[i] = p->m[i].name;
    in[i] = p->m[i].a != NULL;
    in[p->n + i] = p->m[i].b != NULL;
  }
  if (rc == PC_OK)
    rc = pc_pairing_suggest(names, in, in + p->n, p->n, suggest, budget);
  for (size_t i = 0; rc == PC_OK && i < p->n; i++) {
    pc_spill_touch(&p->m[i]);
    p->m[i].suggest = suggest[i];
  }
  free(names);
  free(in);
  free(suggest);
  return rc;
}

static void pc_side_free(pc_side *side, bool owned) {
  for (size_t i = 0; owned && side->v && i < side->n; i++) {
    pc_spill_touch(&side->v[i]);
    free((char *)side->v[i].name);
  }
  pc_spill_free(side->v, side->mapped);
}

static int pc_cmp_named_at(const void *x, const void *y) {
  int c = pc_cmp_named(x, y);
  const pc_named *p = *(pc_named *const *)x, *q = *(pc_named *const *)y;
  return c ? c : (p > q) - (p < q); /* one name: in file order */
}

/* Two datasets of one side that a prefix or a map gave one name: which of them pairs would
 * depend on the file's order, so that is an error naming both (PC_EUSAGE), on either side. */
static int pc_side_unique(const pc_side *s, const char *side, const char *rel, pc_error *err) {
  pc_named **v = malloc((s->n ? s->n : 1) * sizeof *v);
  if (!v)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  for (size_t i = 0; i < s->n; i++) {
    pc_spill_touch(&s->v[i]);
    v[i] = &s->v[i];
  }
  qsort(v, s->n, sizeof *v, pc_cmp_named_at);
  int rc = PC_OK;
  for (size_t i = 1; rc == PC_OK && i < s->n; i++)
    if (strcmp(v[i - 1]->name, v[i]->name) == 0)
      rc = pc_error_set(
          err, PC_EUSAGE, "%s%s%s: two tensors map to %s: %s and %s (--strip-prefix, --map)", side,
          rel ? " " : "", rel ? rel : "", v[i]->name, v[i - 1]->d->path, v[i]->d->path);
  free(v);
  return rc;
}

int pc_pairing_build(pc_pairing *out, const pc_file *fa, const pc_file *fb, const char *rel,
                     const pc_options *o, uint64_t *budget, pc_error *err) {
  pc_side a = {NULL, 0, 0}, b = {NULL, 0, 0};
  *out = (pc_pairing){NULL, 0, 0, 0, 0, 0, pc_names_owned(o), 0, -1};
  int rc = pc_side_names(&a, fa, false, rel, o);
  if (rc == PC_OK)
    rc = pc_side_names(&b, fb, true, rel, o);
  if (rc == PC_ENOMEM)
    pc_error_set(err, rc, "out of memory");
  if (rc == PC_OK && out->owns_names && (rc = pc_side_unique(&a, "A", rel, err)) == PC_OK)
    rc = pc_side_unique(&b, "B", rel, err);
  if (rc == PC_OK && (rc = pc_match_all(out, a.v, a.n, b.v, b.n)) < 0)
    pc_error_set(err, rc, "out of memory");
  out->a_count = a.n;
  out->b_count = b.n;
  pc_side_free(&a, out->owns_names); /* the names are the matches' now */
  pc_side_free(&b, out->owns_names);
  if (rc == PC_OK && (rc = pc_realign(out)) < 0)
    pc_error_set(err, rc, "out of memory");
  if (rc == PC_OK && (rc = pc_suggest_matches(out, budget)) < 0)
    pc_error_set(err, rc, "out of memory");
  if (rc < 0)
    pc_pairing_free(out);
  return rc;
}

void pc_pairing_free(pc_pairing *p) {
  for (size_t i = 0; p->owns_names && p->m && i < p->n; i++) {
    pc_spill_touch(&p->m[i]);
    free((char *)p->m[i].name);
  }
  pc_spill_free(p->m, p->m_mapped);
  *p = (pc_pairing){NULL, 0, 0, 0, 0, 0, false, 0, -1};
}

/* The names of the items on `side` only (0: A, 1: B), with their indices. */
static void pc_lone(const char *const *names, const bool *mine, const bool *theirs, size_t n,
                    const char **out, size_t *index) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (mine[i] && !theirs[i]) {
      out[k] = names[i];
      index[k++] = i;
    }
}

int pc_pairing_suggest(const char *const *names, const bool *in_a, const bool *in_b, size_t n,
                       long *suggest, uint64_t *budget) {
  size_t k[2] = {0, 0}; /* the lone names of each side: the arrays hold only those */
  for (size_t i = 0; i < n; i++) {
    suggest[i] = -1;
    k[0] += in_a[i] && !in_b[i];
    k[1] += in_b[i] && !in_a[i];
  }
  const char **lone[2] = {malloc((k[0] ? k[0] : 1) * sizeof(char *)),
                          malloc((k[1] ? k[1] : 1) * sizeof(char *))};
  size_t *index[2] = {malloc((k[0] ? k[0] : 1) * sizeof(size_t)),
                      malloc((k[1] ? k[1] : 1) * sizeof(size_t))};
  int rc = lone[0] && lone[1] && index[0] && index[1] ? PC_OK : PC_ENOMEM;
  if (rc == PC_OK) {
    pc_lone(names, in_a, in_b, n, lone[0], index[0]);
    pc_lone(names, in_b, in_a, n, lone[1], index[1]);
    for (int side = 0; side < 2; side++)
      for (size_t i = 0; i < k[side]; i++) {
        long c = pc_names_closest(lone[side][i], lone[!side], k[!side], budget);
        suggest[index[side][i]] = c < 0 ? -1 : (long)index[!side][c];
      }
  }
  for (int side = 0; side < 2; side++) {
    free(lone[side]);
    free(index[side]);
  }
  return rc;
}
