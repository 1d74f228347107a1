/* The trajectory of a training run compared as folders (docs/training-runs.md, "The trajectory
 * view"): each step's loss on A and B, found by name, for the Markdown table and the HTML plot. */
#include "folder.h"
#include "pc_internal.h"
#include "report_common.h"

#include <ctype.h>  /* tolower */
#include <math.h>   /* fabs, INFINITY */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* strlen */

/* Whether the dataset path names a loss: "loss" in any case anywhere in it ("/outputs/loss",
 * "/train_loss", "/Loss/total"). */
static bool names_loss(const char *path) {
  static const char word[] = "loss";
  for (size_t i = 0; path[i]; i++) {
    size_t k = 0;
    while (k < sizeof word - 1 && tolower((unsigned char)path[i + k]) == word[k])
      k++;
    if (k == sizeof word - 1)
      return true;
  }
  return false;
}

/* A step's loss: a compared scalar (one element, its worst pair is its value) of a step's file
 * whose dataset path names a loss. */
static bool is_step_loss(const pc_tensor *t) {
  return t->file && pc_tree_is_step(t->file) && pc_report_has_stats(t->verdict) &&
         t->stats.count == 1 && t->stats.has_worst && !t->is_complex &&
         names_loss(pc_tensor_dataset(t));
}

static bool same_file(const pc_tensor *x, const pc_tensor *y) {
  return x->file && y->file && strcmp(x->file, y->file) == 0;
}

int pc_report_trajectory(const pc_run *run, pc_traj_step **steps, size_t *n, long *first) {
  const pc_tensor *div = pc_report_first_divergence(run);
  *steps = malloc((run->ntensors ? run->ntensors : 1) * sizeof **steps);
  *n = 0;
  *first = -1;
  if (!*steps)
    return PC_ENOMEM;
  for (size_t i = 0; i < run->ntensors; i++) {
    const pc_tensor *t = pc_run_at(run, i);
    /* the first loss of each file, in run order (folder runs add a file's tensors together) */
    if (!is_step_loss(t) || (*n && same_file(pc_run_at(run, (*steps)[*n - 1].tensor), t)))
      continue;
    double a = t->stats.worst_a[0], b = t->stats.worst_b[0];
    double gap = a != 0 ? fabs(b - a) / fabs(a) : b != 0 ? INFINITY : 0;
    if (div && same_file(div, t))
      *first = (long)*n;
    const pc_envelope_fig *env = &pc_run_at(run, i)->envelope;
    double band = env->present ? env->factor * env->floor : 0;
    (*steps)[(*n)++] = (pc_traj_step){i, a, b, gap, band};
  }
  if (*n < 2) { /* one point is no trajectory */
    *n = 0;
    *first = -1;
  }
  return PC_OK;
}
