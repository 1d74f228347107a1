/* The cascade fold and the tally (judge_cascade.h; docs/tolerance-model.md, "Cascades"): the only
 * pass over a whole run. It reads verdicts and links failures to their root causes; it never
 * changes a verdict. */
#include "judge_cascade.h"
#include "judge_context.h"
#include "judge_order.h"

#include "pc_internal.h"

#include <math.h>   /* INFINITY, isinf */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memset, strcmp */

/* How far a failing tensor is off, for the cascade test: its rel_rms, infinite with nan/inf
 * mismatches; -1 (neither explains nor is explained) for a structural failure (missing, shape,
 * dtype) and for integers, whose differences do not propagate as rounding does. */
static double pc_severity(const pc_tensor *t) {
  if ((t->verdict != PC_VERDICT_DRIFT && t->verdict != PC_VERDICT_INDETERMINATE) ||
      !pc_dtype_is_float(t->compare))
    return -1;
  if (t->stats.nan_mismatches || t->stats.inf_mismatches)
    return INFINITY;
  return t->stats.finite_terms ? pc_stats_aggregates(&t->stats).rel_rms : -1;
}

/* Failures a cascade may link, kept in execution order: position and index in the run. */
typedef struct pc_failure {
  size_t pos, index;
} pc_failure;

/* Earlier failures of the same file a later one is compared with for a shared module; the
 * room for a module's name, as pc_key gives a gradient's parameter. */
enum { PC_LINK_LOOKBACK = 64, PC_MODULE_MAX = 256 };

/* Whether failure f (earlier) explains t: linked by dataflow (at most W tensors before it in
 * execution order, in the same file, or of the same module), of its kind (a NaN or inf by a NaN
 * or inf; a finite error by a finite one at least 1/G as far off; a structure rounding cannot
 * produce only by another such, which carries it: a shifted input shifts what follows), and
 * never from another file. */
static bool pc_explains(const pc_run *run, const pc_failure *f, size_t pos, const pc_tensor *t,
                        double sev, const char *module) {
  const pc_tensor *w = pc_run_at(run, f->index);
  double wsev = pc_severity(w);
  if (wsev < 0 || sev < 0 || !pc_share_file(t, w))
    return false;
  if (isinf(sev) != isinf(wsev) || (!isinf(sev) && wsev * pc_growth(t) < sev))
    return false;
  if (t->diagnosis.structural && !isinf(sev) && !w->diagnosis.structural)
    return false;
  unsigned window = t->tol.trend_window ? t->tol.trend_window : 8;
  if (pos - f->pos <= window)
    return true;
  char mw[PC_MODULE_MAX];
  pc_module_of(w, mw, sizeof mw);
  return module[0] && strcmp(module, mw) == 0;
}

/* In execution order: a failing tensor is caused by the root of the nearest earlier failure
 * that explains it (pc_explains); every other failure is a root cause, the first one always.
 * A NaN upstream does not explain a finite error downstream: NaN propagates as NaN. */
int pc_link_cascades(pc_run *run) {
  pc_failure *fails = malloc((run->ntensors ? run->ntensors : 1) * sizeof *fails);
  size_t nfails = 0;
  run->first_divergence = -1;
  if (!fails)
    return PC_ENOMEM;
  for (size_t k = 0; k < run->ntensors; k++) {
    size_t i = run->order[k];
    pc_tensor *t = pc_run_at(run, i);
    if (!pc_verdict_is_failure(t->verdict))
      continue;
    if (run->first_divergence < 0)
      run->first_divergence = (long)i;
    double sev = pc_severity(t);
    char module[PC_MODULE_MAX];
    pc_module_of(t, module, sizeof module);
    for (size_t j = nfails; j-- > 0 && nfails - j <= PC_LINK_LOOKBACK;)
      if (pc_explains(run, &fails[j], k, t, sev, module)) {
        const pc_tensor *w = pc_run_at(run, fails[j].index);
        t->caused_by = w->caused_by >= 0 ? w->caused_by : (long)fails[j].index;
        break;
      }
    fails[nfails++] = (pc_failure){k, i};
  }
  free(fails);
  return PC_OK;
}

void pc_tally(pc_run *run) {
  memset(run->by_verdict, 0, sizeof run->by_verdict);
  for (size_t i = 0; i < run->ntensors; i++)
    run->by_verdict[pc_run_at(run, i)->verdict]++;
  run->verdict = PC_RUN_PASS;
  for (size_t v = 0; v < PC_VERDICT_COUNT_; v++)
    if (run->by_verdict[v] && pc_verdict_is_failure((pc_verdict)v) &&
        !(v == PC_VERDICT_INDETERMINATE && run->accept_indeterminate))
      run->verdict = PC_RUN_DRIFT;
  /* Accepting indeterminate tensors never makes a pass of a run with none within tolerance:
   * a B of random values is indeterminate everywhere (docs/robustness.md, "Trust model"). */
  if (run->by_verdict[PC_VERDICT_INDETERMINATE] && !run->by_verdict[PC_VERDICT_PASS])
    run->verdict = PC_RUN_DRIFT;
  if (run->by_verdict[PC_VERDICT_ERROR])
    run->verdict = PC_RUN_ERROR;
}
