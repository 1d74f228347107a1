/* Pairing the datasets of two files by name (compare.h): the names after mapping (names.h),
 * the tensors that take part, and for a tensor on one side only the closest unpaired name of
 * the other side. Internal to the library. */
#ifndef PC_PAIRING_H
#define PC_PAIRING_H

#include "loader.h"

#include <paritycheck/compare.h>

/* One tensor of the run: A's dataset with B's of the same name, or a dataset of one side. */
typedef struct pc_match {
  const pc_dataset *a, *b;
  const char *name; /* the name it is paired by: A's path, else B's mapped path; a dataset's
                       own path, not a copy, when no prefix or map applies (owns_names) */
  bool renamed;     /* b's own path is not `name` */
  long suggest; /* one side only: the index of the closest match of the other side only, or -1 */
} pc_match;

/* A's tensors in A's order, each with its namesake in B, then B's own in B's order. */
typedef struct pc_pairing {
  pc_match *m; /* may be spilled (spill.h) */
  size_t m_mapped;
  size_t n;
  size_t a_count, b_count, both; /* tensors on A's side, on B's, on both */
  bool owns_names; /* the names are malloc'd (prefixes or maps); else they are the datasets'
                      paths, which the files own: 13 MB at 200,000 tensors a side not copied */
  /* pairs made by call order, not by name (realign.h), and the first of them in m */
  size_t realigned;
  long realigned_first;
} pc_pairing;

/** Pairs the datasets of fa and fb under options o. `rel` is the files' relative path in folder
 * mode (globs may match "rel:name"), else NULL. Suggestions spend *budget (names.h).
 * PC_EUSAGE naming both when prefixes or maps give two datasets of one side one name;
 * PC_ENOMEM. */
int pc_pairing_build(pc_pairing *out, const pc_file *fa, const pc_file *fb, const char *rel,
                     const pc_options *o, uint64_t *budget, pc_error *err);

void pc_pairing_free(pc_pairing *p);

/** Suggestions among the unpaired of n items: for each i with one side only (in_a[i] !=
 * in_b[i]), suggest[i] = the closest item on the other side only, or -1 (names.h). */
int pc_pairing_suggest(const char *const *names, const bool *in_a, const bool *in_b, size_t n,
                       long *suggest, uint64_t *budget);

#endif
