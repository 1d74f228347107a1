/* The run's conclusion (comparator.h): once every tensor is done, the trust model's run-level
 * checks, the judge's run-level pass, the refusal of a run that compared nothing, and the
 * warnings a run carries (pc_run.warnings). */
#include "comparator.h"
#include "judge.h"
#include "pc_internal.h"
#include "tol_resolve.h"
#include "trust.h"

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, realloc, free */

int pc_run_warn(pc_run *run, const char *text) {
  char **w = realloc(run->warnings, (run->nwarnings + 1) * sizeof *w);
  if (!w)
    return PC_ENOMEM;
  run->warnings = w;
  w[run->nwarnings] = pc_strdup(text);
  return w[run->nwarnings++] ? PC_OK : PC_ENOMEM;
}

static int pc_add_warning(void *user, const char *glob) {
  char text[PC_ERROR_MESSAGE_MAX];
  snprintf(text, sizeof text, "tolerance rule '%s' matches no tensor", glob);
  return pc_run_warn(user, text);
}

/* A rule that matches no tensor is most likely a typo, or names of another model. */
static int pc_warn_unused_rules(pc_run *run, const pc_tolset *tols, pc_error *err) {
  const char **paths = malloc((run->ntensors ? run->ntensors : 1) * sizeof *paths);
  size_t n = 0;
  for (size_t i = 0; paths && i < run->ntensors; i++)
    if (*pc_tensor_dataset(pc_run_at(run, i)))
      paths[n++] = pc_tensor_dataset(pc_run_at(run, i));
  int rc = paths ? pc_tolset_unused_rules(tols, paths, n, pc_add_warning, run) : PC_ENOMEM;
  free(paths);
  return rc < 0 ? pc_error_set(err, rc, "out of memory") : PC_OK;
}

/* A run that would pass without one tensor compared and found within tolerance: no tensor
 * took part, or every one was skipped. A gate's green must mean that something was compared. */
static int pc_check_compared(const pc_run *run, pc_error *err) {
  if (run->verdict != PC_RUN_PASS || run->by_verdict[PC_VERDICT_PASS])
    return PC_OK;
  if (!run->ntensors)
    return pc_error_set(err, PC_EEMPTY,
                        "%s vs %s: nothing was compared: no tensor takes part (the dumps hold "
                        "none, or --include/--exclude left none)",
                        run->path_a, run->path_b);
  const pc_tensor *t = pc_run_at(run, 0);
  return pc_error_set(
      err, PC_EEMPTY, "%s vs %s: nothing was compared: all %zu tensors were skipped (e.g. %s: %s)",
      run->path_a, run->path_b, run->ntensors, t->path, t->message ? t->message : "skipped");
}

/* Once a run, where the judge inferred execution order from names that may not sort into
 * call order (judge.h, pc_order_doubt): the trend, the causes and the first divergence then
 * rest on a guess worth knowing, and the fix is in the dump. */
static int pc_warn_order(pc_run *run, const pc_order_doubt *d, pc_error *err) {
  char text[PC_ERROR_MESSAGE_MAX];
  const char *consequence = "the trend, caused_by and the first divergence follow file "
                            "(alphabetical) order, which may not be call order; dump an "
                            "execution_index attribute or";
  if (d->kind == PC_ORDER_SURE)
    return PC_OK;
  if (d->kind == PC_ORDER_NO_CALL_INDEX)
    snprintf(text, sizeof text,
             "execution order inferred from tensor names, which carry no call index (e.g. %s): "
             "%s NNN_ name prefixes (python/paritycheck/dump.py does)",
             pc_run_at(run, (size_t)d->example)->path, consequence);
  else
    snprintf(text, sizeof text,
             "execution order inferred from tensor names, whose call indices do not increase in "
             "file order (%s comes before %s): %s zero-padded NNN_ name prefixes of one width "
             "(python/paritycheck/dump.py does)",
             pc_run_at(run, (size_t)d->before)->path, pc_run_at(run, (size_t)d->example)->path,
             consequence);
  return pc_run_warn(run, text) < 0 ? pc_error_set(err, PC_ENOMEM, "out of memory") : PC_OK;
}

int pc_run_conclude(pc_run *run, const pc_tolset *tols, bool allow_empty, pc_error *err) {
  pc_order_doubt doubt;
  int rc = pc_trust_claims(run);
  if (rc == PC_OK)
    rc = pc_judge_run(run, &doubt);
  pc_heap_release(); /* the judge's keys lie below the order it keeps: 9 MB at 200,000 tensors */
  if (rc < 0)
    return pc_error_set(err, rc, "out of memory");
  if (!allow_empty &&
      ((rc = pc_check_compared(run, err)) < 0 || (rc = pc_trust_check_finite(run, err)) < 0))
    return rc;
  if ((rc = pc_warn_order(run, &doubt, err)) < 0)
    return rc;
  return pc_warn_unused_rules(run, tols, err);
}
