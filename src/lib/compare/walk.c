/* The walk (walk.h): file pairs, or the two trees of folder mode merged by relative path,
 * opened one pair at a time so that a folder of many dumps never holds more than two open;
 * their datasets paired by name (pairing.h), each pair a tensor of the run handed to the
 * pipeline (pair.c) or to a plan's sink. */
#include "walk.h"
#include "arena.h"
#include "comparator.h"
#include "folder.h"
#include "loader.h"
#include "names.h"
#include "pairing.h"
#include "pc_internal.h"
#include "spill.h"
#include "stream.h"

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc, malloc, realloc, free */
#include <string.h> /* memset, strcmp */

/* Room for n more tensors. Only between file pairs, when the stream holds none of them. */
static int pc_reserve(pc_cmp *c, size_t n, pc_error *err) {
  if (c->run->ntensors + n <= c->cap)
    return PC_OK;
  size_t cap = 2 * c->cap > c->run->ntensors + n ? 2 * c->cap : c->run->ntensors + n;
  void *t = c->run->tensors;
  if (pc_spill_resize(&t, &c->run->tensors_mapped, c->run->ntensors * sizeof(pc_tensor),
                      cap * sizeof(pc_tensor), PC_SPILL_MIN_RECORDS) != 0)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  c->run->tensors = t;
  c->cap = cap;
  return PC_OK;
}

/* "file:name", "file" (name NULL) or "name" (file NULL), malloc'd. */
static char *pc_display(const char *file, const char *name) {
  return !file ? pc_strdup(name) : name ? pc_names_full(file, name) : pc_strdup(file);
}

/* pc_display's name in the run's arena. */
static char *pc_display_kept(pc_run *run, const char *file, const char *name) {
  char *full = pc_display(file, name);
  char *kept = pc_arena_strdup(run->names, full);
  free(full);
  return kept;
}

/* The next tensor of the run (room reserved), path set, nothing measured. */
static pc_tensor *pc_new_tensor(pc_cmp *c, const char *file, const char *name, pc_error *err) {
  pc_tensor *t = pc_run_at(c->run, c->run->ntensors++);
  memset(t, 0, sizeof *t);
  t->caused_by = -1;
  t->context.exec_index = -1;
  t->rank = t->rank_b = -1;
  t->path = pc_display_kept(c->run, file, name);
  t->file = pc_arena_strdup(c->run->names, file);
  if (!t->path || (file && !t->file)) {
    pc_error_set(err, PC_ENOMEM, "out of memory");
    return NULL;
  }
  return t;
}

static void pc_note_side(pc_cmp *c, int side, const char *name) {
  if (!c->example[side])
    c->example[side] = pc_strdup(name);
}

/* A tensor of B only whose name a map or prefix changed says what B calls it. */
static int pc_renamed(pc_tensor *t, const char *b_path) {
  char why[PC_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof why, "only in B, where it is %s", b_path);
  return pc_set_text(&t->message, why);
}

static int pc_run_match(pc_cmp *c, const pc_pairing *pr, size_t i, const char *file,
                        pc_error *err) {
  const pc_match *m = &pr->m[i];
  pc_spill_touch(m);
  if (m->a)
    pc_spill_touch(m->a);
  if (m->b)
    pc_spill_touch(m->b);
  pc_tensor *t = pc_new_tensor(c, file, m->name, err);
  if (!t)
    return PC_ENOMEM;
  c->p.a = m->a;
  c->p.b = m->b;
  c->p.t = t;
  t->context.exec_index = (m->a ? m->a : m->b)->exec_index;
  if (m->suggest >= 0 && !(t->did_you_mean = pc_display(file, pr->m[m->suggest].name)))
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  bool data = false;
  int rc = pc_pair_setup(&c->p, &data, err);
  if (rc == PC_OK && data)
    rc = c->sink ? c->sink->add(c->sink->user, &c->p, c->run->ntensors - 1, err)
                 : pc_pair_data(&c->p, c->o->tols, 0, m->a->count, err);
  if (rc == PC_OK && m->renamed && (rc = pc_renamed(t, m->b->path)) < 0)
    pc_error_set(err, rc, "out of memory");
  return rc;
}

/* Stored bytes of the pairs that will be streamed, for progress reports. */
static uint64_t pc_pairing_bytes(const pc_pairing *pr) {
  uint64_t total = 0;
  for (size_t i = 0; i < pr->n; i++) {
    pc_spill_touch(&pr->m[i]);
    const pc_dataset *a = pr->m[i].a, *b = pr->m[i].b;
    if (a)
      pc_spill_touch(a);
    if (b)
      pc_spill_touch(b);
    total += pc_pair_bytes(a, b);
  }
  return total;
}

static void pc_tally_pairing(pc_cmp *c, const pc_pairing *pr) {
  c->a_count += pr->a_count;
  c->b_count += pr->b_count;
  c->both += pr->both;
  for (size_t i = 0; i < pr->n; i++) {
    pc_spill_touch(&pr->m[i]);
    if (pr->m[i].a)
      pc_note_side(c, 0, pr->m[i].name);
    if (pr->m[i].b)
      pc_note_side(c, 1, pr->m[i].name);
  }
}

static pc_attr *pc_find_attr(const pc_provenance *p, const char *name) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->attrs[i].name, name) == 0)
      return &p->attrs[i];
  return NULL;
}

/* Folds f's attributes into p: the first file's as they are, a later file's new ones added, a
 * value that differs from an earlier file's replaced by PC_PROVENANCE_VARIES. */
static int pc_merge_attrs(pc_provenance *p, const pc_file *f) {
  for (size_t i = 0; i < pc_file_attr_count(f); i++) {
    const pc_attr *a = pc_file_attr(f, i);
    pc_attr *old = pc_find_attr(p, a->name);
    if (old && strcmp(old->value, a->value) != 0) {
      old->kind = PC_ATTR_STRING;
      if (pc_set_text(&old->value, PC_PROVENANCE_VARIES) < 0)
        return PC_ENOMEM;
    } else if (!old) {
      pc_attr *v = realloc(p->attrs, (p->n + 1) * sizeof *v);
      if (!v)
        return PC_ENOMEM;
      p->attrs = v;
      v[p->n] = (pc_attr){pc_strdup(a->name), pc_strdup(a->value), a->kind};
      if (!v[p->n++].name || !v[p->n - 1].value)
        return PC_ENOMEM;
    }
  }
  return PC_OK;
}

/* Once a run, the first pair of files whose call indices were re-aligned (realign.h) says so:
 * a pairing not by name is worth knowing, and the example shows what was paired. */
static int pc_warn_realigned(pc_cmp *c, const pc_pairing *pr, const char *file) {
  char text[PC_ERROR_MESSAGE_MAX];
  const pc_match *m = &pr->m[pr->realigned_first];
  if (c->realign_said || !pr->realigned)
    return PC_OK;
  c->realign_said = true;
  pc_spill_touch(m);
  snprintf(text, sizeof text,
           "%s%sthe call indices (NNN_) of A and B disagree: %zu tensor%s paired by module path "
           "and call order instead of by name, e.g. A's %s with B's %s",
           file ? file : "", file ? ": " : "", pr->realigned, pr->realigned == 1 ? "" : "s",
           m->a->path, m->b->path);
  return pc_run_warn(c->run, text);
}

/* Every tensor of one pair of files; `file` is their relative path in folder mode. Every
 * tensor is done when it returns, so that the files can be closed. */
static int pc_run_files(pc_cmp *c, pc_file *fa, pc_file *fb, const char *file, pc_error *err) {
  pc_pairing pr;
  int rc = pc_pairing_build(&pr, fa, fb, file, c->o, &c->budget, err);
  if (rc < 0)
    return rc;
  pc_tally_pairing(c, &pr);
  if (pc_warn_realigned(c, &pr, file) < 0 || pc_merge_attrs(&c->run->provenance[0], fa) < 0 ||
      pc_merge_attrs(&c->run->provenance[1], fb) < 0) {
    pc_pairing_free(&pr);
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  }
  c->p.fa = fa;
  c->p.fb = fb;
  rc = pc_pair_envelope_open(c->o, pc_file_path(fa), file != NULL, &c->p.env, err);
  if (rc == PC_OK)
    rc = pc_reserve(c, pr.n, err);
  if (c->p.stream) /* none with a sink */
    pc_stream_expect(c->p.stream, pc_pairing_bytes(&pr));
  for (size_t i = 0; i < pr.n && rc == PC_OK; i++)
    rc = pc_run_match(c, &pr, i, file, err);
  int fin = c->p.stream ? pc_stream_finish(c->p.stream, err) : PC_OK;
  pc_envelope_close(c->p.env);
  c->p.env = NULL;
  pc_pairing_free(&pr);
  return rc < 0 ? rc : fin;
}

/* --- folder mode ------------------------------------------------------------------------- */

/* A file that stands for itself in the run: on one side only, not a dump, or unreadable. The
 * include and exclude globs, which select tensors, may leave out a skipped one (its path alone);
 * a file missing on one side or unreadable always counts, since it may hold tensors the globs
 * select (docs/robustness.md, "Fail closed"). */
static int pc_file_tensor(pc_cmp *c, const char *file, pc_verdict v, const char *why,
                          const char *suggest, pc_error *err) {
  if (v == PC_VERDICT_SKIPPED && !pc_names_selected(c->o, file, NULL))
    return PC_OK;
  int rc = pc_reserve(c, 1, err);
  pc_tensor *t = rc == PC_OK ? pc_new_tensor(c, file, NULL, err) : NULL;
  if (!t)
    return PC_ENOMEM;
  t->verdict = v;
  if (pc_set_text(&t->message, why) < 0 || (suggest && !(t->did_you_mean = pc_strdup(suggest))))
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  return PC_OK;
}

/* One relative path of the folders: its paths under A and B (NULL for a side without it),
 * whether each is a dump, why a side cannot be compared (NULL when it can: see pc_run_bad_entry),
 * and the closest lone file of the other side, or NULL. */
typedef struct pc_entry {
  const char *rel;
  char *path[2];
  bool dump[2];
  char *bad[2];
  const char *suggest;
} pc_entry;

/* Closes a pair of files (either may be NULL) once compared, and gives the heap's free pages
 * back: their walk freed tens of MB of small blocks at 200,000 datasets. */
static void pc_close_pair(pc_file *a, pc_file *b) {
  pc_file_close(a);
  pc_file_close(b);
  pc_heap_release();
}

static int pc_run_pair_of_files(pc_cmp *c, const pc_entry *e, pc_error *err) {
  pc_file *f[2] = {NULL, NULL};
  pc_error why = {PC_OK, ""};
  pc_open_limits lim = pc_options_limits(c->o);
  int rc = pc_file_open_limited(&f[0], e->path[0], &lim, &why);
  if (rc == PC_OK)
    rc = pc_file_open_limited(&f[1], e->path[1], &lim, &why);
  if (rc == PC_ENOMEM)
    rc = pc_error_set(err, rc, "%s", why.message);
  else if (rc < 0)
    rc = pc_file_tensor(c, e->rel, PC_VERDICT_ERROR, why.message, NULL, err);
  else
    rc = pc_run_files(c, f[0], f[1], e->rel, err);
  pc_close_pair(f[0], f[1]);
  return rc;
}

/* An entry that a side cannot be read for is an error whatever the other side holds: an
 * unreadable or empty file, a FIFO, a dangling link is never "not a dump" nor "missing". */
static int pc_run_bad_entry(pc_cmp *c, const pc_entry *e, pc_error *err) {
  char why[PC_ERROR_MESSAGE_MAX];
  if (e->bad[0] && e->bad[1])
    snprintf(why, sizeof why, "A: %s; B: %s", e->bad[0], e->bad[1]);
  else
    snprintf(why, sizeof why, "%s: %s", e->bad[0] ? "A" : "B", e->bad[0] ? e->bad[0] : e->bad[1]);
  return pc_file_tensor(c, e->rel, PC_VERDICT_ERROR, why, NULL, err);
}

static int pc_run_entry(pc_cmp *c, const pc_entry *e, pc_error *err) {
  bool a = e->path[0] != NULL, b = e->path[1] != NULL;
  if (pc_envelope_is_sidecar(e->rel)) /* A's: read with its dump; B's: never believed */
    return PC_OK;
  if (e->bad[0] || e->bad[1])
    return pc_run_bad_entry(c, e, err);
  if (!(a && e->dump[0]) && !(b && e->dump[1]))
    return pc_file_tensor(c, e->rel, PC_VERDICT_SKIPPED, "not a tensor dump", NULL, err);
  if (!a || !b) {
    c->a_count += a;
    c->b_count += b;
    pc_note_side(c, a ? 0 : 1, e->rel);
    return pc_file_tensor(c, e->rel, a ? PC_VERDICT_MISSING_IN_B : PC_VERDICT_MISSING_IN_A,
                          a ? "file only in A" : "file only in B", e->suggest, err);
  }
  if (!e->dump[0] || !e->dump[1])
    return pc_file_tensor(c, e->rel, PC_VERDICT_ERROR,
                          e->dump[0] ? "B: not a tensor dump" : "A: not a tensor dump", NULL, err);
  return pc_run_pair_of_files(c, e, err);
}

/* Side s of entry e, from item it of its tree: its path, and whether it is a dump or why it
 * cannot be told. PC_ENOMEM. */
static int pc_entry_side(pc_entry *e, int s, const pc_tree_item *it, const char *root) {
  pc_error why = {PC_OK, ""};
  e->rel = it->rel;
  if (!(e->path[s] = pc_tree_path(root, it->rel)))
    return PC_ENOMEM;
  if (it->why)
    snprintf(why.message, sizeof why.message, "%s: %s", e->path[s], it->why);
  else if (pc_file_sniff(e->path[s], &e->dump[s], &why) == PC_OK)
    return PC_OK;
  return (e->bad[s] = pc_strdup(why.message)) ? PC_OK : PC_ENOMEM;
}

/* The union of the two trees, sorted, with each side's full path and whether it is a dump. */
static int pc_merge_trees(pc_entry **out, size_t *n, const pc_tree t[2], const char *root[2]) {
  pc_entry *v = calloc(t[0].n + t[1].n ? t[0].n + t[1].n : 1, sizeof *v);
  size_t i[2] = {0, 0};
  *out = v;
  *n = 0;
  while (v && (i[0] < t[0].n || i[1] < t[1].n)) {
    int cmp = i[0] == t[0].n   ? 1
              : i[1] == t[1].n ? -1
                               : pc_tree_cmp(t[0].v[i[0]].rel, t[1].v[i[1]].rel);
    pc_entry *e = &v[(*n)++];
    for (int s = 0; s < 2; s++)
      if (!((s == 0 && cmp > 0) || (s == 1 && cmp < 0)) &&
          pc_entry_side(e, s, &t[s].v[i[s]++], root[s]) < 0)
        return PC_ENOMEM;
  }
  return v ? PC_OK : PC_ENOMEM;
}

/* Suggestions for the files of one side only, among the other side's lone dumps. */
static int pc_suggest_files(pc_entry *v, size_t n, uint64_t *budget) {
  const char **names = malloc((n ? n : 1) * sizeof *names);
  bool *in = malloc(2 * (n ? n : 1) * sizeof *in);
  long *suggest = malloc((n ? n : 1) * sizeof *suggest);
  int rc = names && in && suggest ? PC_OK : PC_ENOMEM;
  for (size_t i = 0; rc == PC_OK && i < n; i++) {
    names[i] = v[i].rel;
    in[i] = v[i].path[0] && v[i].dump[0];
    in[n + i] = v[i].path[1] && v[i].dump[1];
  }
  if (rc == PC_OK)
    rc = pc_pairing_suggest(names, in, in + n, n, suggest, budget);
  for (size_t i = 0; rc == PC_OK && i < n; i++)
    v[i].suggest = suggest[i] >= 0 ? v[suggest[i]].rel : NULL;
  free(names);
  free(in);
  free(suggest);
  return rc;
}

int pc_walk_folders(pc_cmp *c, const char *root_a, const char *root_b, pc_error *err) {
  pc_tree t[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
  const char *root[2] = {root_a, root_b};
  pc_entry *v = NULL;
  size_t n = 0;
  int rc = pc_tree_list(&t[0], root_a, err);
  if (rc == PC_OK)
    rc = pc_tree_list(&t[1], root_b, err);
  if (rc == PC_OK &&
      (pc_merge_trees(&v, &n, t, root) < 0 || pc_suggest_files(v, n, &c->budget) < 0))
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  for (size_t i = 0; rc == PC_OK && i < n; i++)
    rc = pc_run_entry(c, &v[i], err);
  for (size_t i = 0; v && i < n; i++)
    for (int s = 0; s < 2; s++) {
      free(v[i].path[s]);
      free(v[i].bad[s]);
    }
  free(v);
  pc_tree_free(&t[0]);
  pc_tree_free(&t[1]);
  return rc;
}

int pc_walk_files(pc_cmp *c, const char *path_a, const char *path_b, pc_error *err) {
  pc_file *fa = NULL, *fb = NULL;
  pc_open_limits lim = pc_options_limits(c->o);
  int rc = pc_file_open_limited(&fa, path_a, &lim, err);
  if (rc == PC_OK)
    rc = pc_file_open_limited(&fb, path_b, &lim, err);
  if (rc == PC_OK)
    rc = pc_run_files(c, fa, fb, NULL, err);
  pc_close_pair(fa, fb);
  return rc;
}
