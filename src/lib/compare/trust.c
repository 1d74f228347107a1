/* The trust model's checks (trust.h; docs/robustness.md, "Trust model"). */
#include "trust.h"
#include "arena.h"
#include "loader.h"
#include "pc_internal.h"

#include <paritycheck/dtype.h>

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* strlen, strcmp, memcpy */

int pc_trust_add_note(pc_tensor *t, const char *text) {
  size_t old = t->note ? strlen(t->note) : 0, n = strlen(text);
  char *s = malloc(old + 2 + n + 1);
  if (!s)
    return PC_ENOMEM;
  if (old) {
    memcpy(s, t->note, old);
    memcpy(s + old, "; ", 2);
    old += 2;
  }
  memcpy(s + old, text, n + 1);
  free(t->note);
  t->note = s;
  return PC_OK;
}

/* K of one side, capped at the largest tensor of its file: a reduction cannot sum more terms
 * than the dump holds values of one tensor, and a claim beyond that must not widen anything.
 * A cap is a note. */
static int pc_plausible_k(pc_tensor *t, uint64_t k, const pc_file *f, const char *side,
                          uint64_t *out) {
  char note[256];
  uint64_t cap = pc_file_max_count(f);
  *out = k;
  if (k <= cap)
    return PC_OK;
  *out = cap;
  snprintf(note, sizeof note,
           "%s's reduction_length %" PRIu64 " is beyond the largest tensor of its file (%" PRIu64
           " elements): %" PRIu64 " used",
           side, k, cap, cap);
  return pc_trust_add_note(t, note);
}

/* One attribute's value as text, for the notes. */
typedef struct pc_meta {
  const char *name;
  bool a, b; /* each side has one */
  bool same; /* both have one, and they are equal */
  char va[64], vb[64];
} pc_meta;

/* Notes for an attribute: B's alone ignored (counted in *ignored), or B's overruled by A's. */
static int pc_meta_note(pc_tensor *t, const pc_meta *m, bool trust_b, bool *ignored) {
  char note[320];
  if (m->b && !m->a && !trust_b) {
    *ignored = true;
    snprintf(note, sizeof note,
             "B's %s %s ignored: A has none, and B may not set its own tolerance "
             "(--trust-b-metadata uses it)",
             m->name, m->vb);
  } else if (m->a && m->b && !m->same) {
    snprintf(note, sizeof note, "%s: A says %s, B says %s: A's is used", m->name, m->va, m->vb);
  } else {
    return PC_OK;
  }
  return pc_trust_add_note(t, note);
}

static pc_meta pc_meta_k(uint64_t a, uint64_t b) {
  pc_meta m = {"reduction_length", a != 0, b != 0, a == b, "", ""};
  snprintf(m.va, sizeof m.va, "%" PRIu64, a);
  snprintf(m.vb, sizeof m.vb, "%" PRIu64, b);
  return m;
}

static pc_meta pc_meta_acc(pc_dtype a, pc_dtype b) {
  pc_meta m = {"accumulation_dtype", a != PC_DTYPE_NONE, b != PC_DTYPE_NONE, a == b, "", ""};
  snprintf(m.va, sizeof m.va, "%s", pc_dtype_name(a));
  snprintf(m.vb, sizeof m.vb, "%s", pc_dtype_name(b));
  return m;
}

static pc_meta pc_meta_type(const char *a, const char *b) {
  pc_meta m = {"module_type", a != NULL, b != NULL, a && b && strcmp(a, b) == 0, "", ""};
  snprintf(m.va, sizeof m.va, "%s", a ? a : "");
  snprintf(m.vb, sizeof m.vb, "%s", b ? b : "");
  return m;
}

/* The value a side gives: A's, else B's when trusted. */
static const char *pc_pick_type(const pc_pair *p) {
  return p->a->module_type ? p->a->module_type : p->trust_b ? p->b->module_type : NULL;
}

int pc_trust_metadata(pc_pair *p) {
  pc_tensor *t = p->t;
  const pc_dataset *a = p->a, *b = p->b;
  bool ignored = false;
  uint64_t ka = 0, kb = 0;
  int rc = pc_plausible_k(t, a->reduction_length, p->fa, "A", &ka);
  if (rc == PC_OK && p->trust_b && !a->reduction_length)
    rc = pc_plausible_k(t, b->reduction_length, p->fb, "B", &kb);
  pc_meta m[3] = {pc_meta_k(a->reduction_length, b->reduction_length),
                  pc_meta_acc(a->accumulation, b->accumulation),
                  pc_meta_type(a->module_type, b->module_type)};
  for (int i = 0; rc == PC_OK && i < 3; i++)
    rc = pc_meta_note(t, &m[i], p->trust_b, &ignored);
  const char *type = pc_pick_type(p);
  if (rc == PC_OK && type)
    rc = (t->module_type = p->names ? pc_arena_strdup(p->names, type) : pc_strdup(type))
             ? PC_OK
             : PC_ENOMEM;
  if (rc < 0)
    return rc;
  t->reduction_length = a->reduction_length ? ka : kb;
  t->accumulation = a->accumulation ? a->accumulation
                    : p->trust_b    ? b->accumulation
                                    : PC_DTYPE_NONE;
  p->ignored_b += ignored;
  return PC_OK;
}

/* The name of a precision by its unit roundoff, for messages. */
static const char *pc_precision_name(double u) {
  static const pc_dtype floats[] = {PC_DTYPE_FLOAT64, PC_DTYPE_FLOAT32, PC_DTYPE_FLOAT16,
                                    PC_DTYPE_BFLOAT16};
  for (size_t i = 0; i < sizeof floats / sizeof *floats; i++)
    if (pc_dtype_unit_roundoff(floats[i]) == u)
      return floats[i] == PC_DTYPE_FLOAT16 ? "float16 or tf32" : pc_dtype_name(floats[i]);
  return "its precision";
}

bool pc_trust_precision(pc_pair *p, double precision_u, int *rc) {
  char why[320];
  pc_tensor *t = p->t;
  double u_b = pc_dtype_unit_roundoff(t->dtype_b);
  *rc = PC_OK;
  /* B as coarse as A is no choice of B's: both runs kept that precision */
  if (!(precision_u > 0) || !pc_dtype_is_float(t->dtype_b) || !(u_b > precision_u) ||
      !(u_b > pc_dtype_unit_roundoff(t->dtype_a)))
    return true;
  snprintf(why, sizeof why,
           "B is %s, coarser than the precision its tolerance claims (%s, unit roundoff %.3g): "
           "a B stored coarser would widen its own allowance",
           pc_dtype_name(t->dtype_b), pc_precision_name(precision_u), precision_u);
  t->verdict = PC_VERDICT_DTYPE_MISMATCH;
  free(t->message);
  *rc = (t->message = pc_strdup(why)) ? PC_OK : PC_ENOMEM;
  return false;
}

/* The error of a tensor whose side `s` contradicts its dtype attribute. */
static int pc_claim_error(pc_tensor *t, const char *root, int s, uint64_t bad) {
  char why[PC_ERROR_MESSAGE_MAX];
  pc_dtype claimed = s == 0 ? t->dtype_a : t->dtype_b;
  snprintf(why, sizeof why,
           "%s: %s%s%s: %s: its dtype attribute says %s, but %" PRIu64 " of %" PRIu64
           " values are not %s values",
           s == 0 ? "A" : "B", root, t->file ? "/" : "", t->file ? t->file : "",
           pc_tensor_dataset(t), pc_dtype_name(claimed), bad, t->stats.count,
           pc_dtype_name(claimed));
  t->verdict = PC_VERDICT_ERROR;
  free(t->message);
  return (t->message = pc_strdup(why)) ? PC_OK : PC_ENOMEM;
}

static bool pc_compared(const pc_tensor *t) {
  return t->verdict == PC_VERDICT_PASS || t->verdict == PC_VERDICT_DRIFT ||
         t->verdict == PC_VERDICT_INDETERMINATE;
}

int pc_trust_claims(pc_run *run) {
  int rc = PC_OK;
  for (size_t i = 0; rc == PC_OK && i < run->ntensors; i++) {
    pc_tensor *t = pc_run_at(run, i);
    if (!pc_compared(t))
      continue;
    if (t->stats.not_representable_a)
      rc = pc_claim_error(t, run->path_a, 0, t->stats.not_representable_a);
    else if (t->stats.not_representable_b)
      rc = pc_claim_error(t, run->path_b, 1, t->stats.not_representable_b);
  }
  return rc;
}

int pc_trust_check_finite(const pc_run *run, pc_error *err) {
  if (run->verdict != PC_RUN_PASS)
    return PC_OK;
  for (size_t i = 0; i < run->ntensors; i++) {
    const pc_tensor *t = pc_run_at(run, i);
    if (pc_compared(t) && t->stats.finite_terms > 0)
      return PC_OK;
  }
  return pc_error_set(err, PC_EEMPTY,
                      "%s vs %s: nothing finite was compared: every compared value is NaN on "
                      "both sides, or every tensor has 0 elements",
                      run->path_a, run->path_b);
}
