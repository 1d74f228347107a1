/* A tensor's reasons (pc_tensor.reasons) as the judge edits them, and the line of no significant
 * digit; shared by judge.c and judge_envelope.c. Internal to the judge room. */
#ifndef PC_REASONS_H
#define PC_REASONS_H

#include <paritycheck/result.h>

#include <stddef.h> /* size_t */
#include <string.h> /* memmove */

/* An error of half a value's size leaves no significant digit (structure.c): where the honest
 * allowance or spread reaches it, a failure beyond it is indeterminate. */
#define PC_INDETERMINATE_REL 0.5

static inline void pc_add_reason(pc_tensor *t, pc_criterion c, double value, double limit) {
  t->reasons[t->nreasons++] = (pc_reason){c, value, limit};
}

static inline void pc_drop_reason(pc_tensor *t, size_t i) {
  memmove(&t->reasons[i], &t->reasons[i + 1], (t->nreasons - i - 1) * sizeof t->reasons[0]);
  t->nreasons--;
}

static inline pc_reason *pc_find_reason(pc_tensor *t, pc_criterion c) {
  for (size_t i = 0; i < t->nreasons; i++)
    if (t->reasons[i].criterion == c)
      return &t->reasons[i];
  return NULL;
}

/* Drops every magnitude reason: the run-level allowances explain element and tensor errors,
 * never a structure rounding cannot produce, nor what the product sees. */
static inline void pc_drop_element_reasons(pc_tensor *t) {
  for (size_t i = t->nreasons; i-- > 0;)
    if (t->reasons[i].criterion < PC_CRIT_STRUCTURE)
      pc_drop_reason(t, i);
}

#endif
