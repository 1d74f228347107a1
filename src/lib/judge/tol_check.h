/* The semantic checks of a tolerance file (docs/tolerances.md): what the grammar (tol_parse.c)
 * reads is held here against what it may mean. The widening coefficients' maxima, the float
 * formats a profile may name, the parameters each product metric takes, the glob syntax, the
 * schema version, and a rule as a whole (a selector; no `elementwise: false` beside a metric
 * that cannot fail). Each check reports through the reader (tol_yaml.h), at the position it
 * is given or at the current event. Internal to the tolerance files (tol_*.c). */
#ifndef PC_TOL_CHECK_H
#define PC_TOL_CHECK_H

#include "tol_internal.h"
#include "tol_yaml.h"

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/* The keys of one metric's mapping, in the order of tol_parse.c's names for them: its limit
 * (`min` for a floor metric, `max` for the others) and topk_overlap's k. */
enum { MPARAM_MIN, MPARAM_MAX, MPARAM_K, MPARAM_COUNT };

/* One metric's parameters as read, before they are checked against the metric. */
typedef struct tol_metric_params {
  unsigned seen; /* bit per MPARAM_* */
  double bound;  /* min or max */
  uint64_t k;
  pc_metric m;
} tol_metric_params;

/** The largest value criterion `key` (a CRIT_* of tol_internal.h) may take: the maxima of the
 * model's widening coefficients (docs/tolerances.md, "Maxima"), INFINITY for the others. */
double pc_tol_criterion_max(size_t key);

/** The current event as the name of a float format, its unit roundoff into *u: float64,
 * float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, and tf32 when tf32_ok (`precision`,
 * not `accumulation`). `what` names the key. */
int pc_tol_check_format(tol_reader *r, const char *what, bool tf32_ok, double *u);

/** The largest limit metric m takes: 1 for a probability or fraction, else INFINITY. */
double pc_tol_metric_bound_max(pc_metric m);

/** PC_OK when k, just read from the current event as `what`, is a valid top-k size (>= 1). */
int pc_tol_check_topk(tol_reader *r, const char *what, uint64_t k);

/** PC_OK when a metric's mapping (which started at `at`) gave the limit key its metric needs
 * (min or max, not the other) and k exactly for topk_overlap. */
int pc_tol_check_metric_params(tol_reader *r, yaml_mark_t at, const tol_metric_params *mp);

/** The current event as a well-formed glob (a non-empty string without NUL; pc_glob_problem);
 * `what` names the key. */
int pc_tol_check_glob(tol_reader *r, const char *what);

/** PC_OK when `version`, just read from the current event, is the schema version this build
 * reads. */
int pc_tol_check_version(tol_reader *r, uint64_t version);

/** A rule read whole (it started at `at`): PC_OK when it has a selector (`match`,
 * `match_module_type` or `match_attr`) and, if it says `elementwise: false` (at
 * elementwise_at), none of its metrics is one that cannot fail. */
int pc_tol_check_rule(tol_reader *r, yaml_mark_t at, bool has_selector, const tol_metrics *tm,
                      yaml_mark_t elementwise_at);

#endif
