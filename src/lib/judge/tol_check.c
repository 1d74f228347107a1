/* The semantic checks of a tolerance file (tol_check.h): ranges, names and rules that the
 * grammar reads but does not judge. */
#include "tol_check.h"

#include "pc_internal.h"

#include <paritycheck/dtype.h> /* pc_dtype_name, pc_dtype_unit_roundoff */

#include <math.h>   /* INFINITY, ldexp */
#include <string.h> /* strlen */

enum { TOL_SCHEMA_VERSION = 1 };

/* Names `precision` and `accumulation` accept besides the float dtypes of dtype.h: NVIDIA's
 * TensorFloat-32, an fp32 layout whose products keep 10 stored mantissa bits. */
static const char TF32_NAME[] = "tf32";
enum { TF32_PRECISION_BITS = 11 }; /* 10 stored mantissa bits and the implicit one */

/* The float formats `precision` (with tf32) and `accumulation` (without) may name. */
static const pc_dtype format_dtypes[] = {PC_DTYPE_FLOAT64,       PC_DTYPE_FLOAT32,
                                         PC_DTYPE_FLOAT16,       PC_DTYPE_BFLOAT16,
                                         PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E5M2};

/* ---- Criteria ---------------------------------------------------------------------------- */

/* The maxima are about a hundred times the loosest shipped profile's, so that a calibrated
 * profile fits and a file cannot open a gate wide (noise_floor_u: 1e300 passed unrelated
 * tensors). atol and rtol are the user's own plain figures: unbounded. */
double pc_tol_criterion_max(size_t key) {
  switch (key) {
  case CRIT_ATOL_RMS:
  case CRIT_MAX_REL_RMS_U:
  case CRIT_MAX_SCALE_U:
  case CRIT_MAX_SCALE_U_SQRT_N:
    return 1e6;
  case CRIT_RTOL_U:
  case CRIT_NOISE_FLOOR_U:
  case CRIT_TREND_CREST:
    return 1e4;
  case CRIT_RTOL_SQRT_K:
    return 1e3;
  case CRIT_TREND_GROWTH:
  case CRIT_TREND_GROWTH_BACKWARD:
    /* G multiplies the run's own trend, which against a float64 reference is ~2^-53: calibrate
     * fits G of 10^14 there; 10^16 * 2^-53 ~ 1 keeps G trend within the value's size */
    return 1e16;
  case CRIT_SCALE_Z:
    return 100;
  default: /* trend_window is clamped to PC_TREND_WINDOW_MAX where it is applied */
    return INFINITY;
  }
}

int pc_tol_check_format(tol_reader *r, const char *what, bool tf32_ok, double *u) {
  const yaml_event_t *ev = &r->ev;
  if (ev->type != YAML_SCALAR_EVENT)
    return pc_tol_yaml_fail(r, ev->start_mark, "'%s' must be a format name, got %s", what,
                            pc_tol_yaml_node_kind(ev));
  if (tf32_ok && pc_tol_yaml_scalar_is(ev, TF32_NAME)) {
    *u = ldexp(1.0, -TF32_PRECISION_BITS);
    return PC_OK;
  }
  for (size_t i = 0; i < TOL_COUNT_OF(format_dtypes); i++)
    if (pc_tol_yaml_scalar_is(ev, pc_dtype_name(format_dtypes[i]))) {
      *u = pc_dtype_unit_roundoff(format_dtypes[i]);
      return PC_OK;
    }
  return pc_tol_yaml_fail(r, ev->start_mark,
                          "'%s' must be one of float64, float32, %sfloat16, bfloat16, "
                          "float8_e4m3fn, float8_e5m2, got '%.*s'",
                          what, tf32_ok ? "tf32, " : "", TOL_QUOTE_MAX, pc_tol_yaml_text(ev));
}

/* ---- Product metrics -------------------------------------------------------------------- */

/* A probability or fraction lies in [0, 1]; a divergence or a scalar's error is unbounded. */
double pc_tol_metric_bound_max(pc_metric m) {
  return m == PC_METRIC_TOP1_AGREEMENT || m == PC_METRIC_TOPK_OVERLAP ||
                 m == PC_METRIC_MAX_PROB_DIFF
             ? 1.0
             : INFINITY;
}

int pc_tol_check_topk(tol_reader *r, const char *what, uint64_t k) {
  if (k == 0)
    return pc_tol_yaml_fail(r, r->ev.start_mark, "'%s' must be >= 1", what);
  return PC_OK;
}

int pc_tol_check_metric_params(tol_reader *r, yaml_mark_t at, const tol_metric_params *mp) {
  const char *name = pc_metric_name(mp->m);
  bool floor = pc_metric_is_floor(mp->m);
  unsigned want = 1u << (floor ? MPARAM_MIN : MPARAM_MAX);
  if (mp->seen & (1u << (floor ? MPARAM_MAX : MPARAM_MIN)))
    return pc_tol_yaml_fail(r, at, "'%s' takes '%s', not '%s'", name, floor ? "min" : "max",
                            floor ? "max" : "min");
  if (!(mp->seen & want))
    return pc_tol_yaml_fail(r, at, "'%s' needs '%s'", name, floor ? "min" : "max");
  bool topk = mp->m == PC_METRIC_TOPK_OVERLAP;
  if (topk != !!(mp->seen & (1u << MPARAM_K)))
    return pc_tol_yaml_fail(r, at, topk ? "'%s' needs 'k'" : "'%s' takes no 'k'", name);
  return PC_OK;
}

/* ---- Globs and the version --------------------------------------------------------------- */

int pc_tol_check_glob(tol_reader *r, const char *what) {
  const yaml_event_t *ev = &r->ev;
  if (ev->type != YAML_SCALAR_EVENT || pc_tol_yaml_is_null(ev))
    return pc_tol_yaml_fail(r, ev->start_mark, "'%s' must be a string, got %s", what,
                            pc_tol_yaml_node_kind(ev));
  const char *glob = pc_tol_yaml_text(ev);
  if (strlen(glob) != ev->data.scalar.length)
    return pc_tol_yaml_fail(r, ev->start_mark, "'%s' must not contain NUL characters", what);
  if (*glob == '\0')
    return pc_tol_yaml_fail(r, ev->start_mark, "'%s' must not be empty", what);
  const char *why = pc_glob_problem(glob);
  if (why)
    return pc_tol_yaml_fail(r, ev->start_mark, "bad glob '%.*s': %s", TOL_QUOTE_MAX, glob, why);
  return PC_OK;
}

int pc_tol_check_version(tol_reader *r, uint64_t version) {
  if (version != TOL_SCHEMA_VERSION)
    return pc_tol_yaml_fail(r, r->ev.start_mark,
                            "unsupported version %.*s (this build reads version %d)", TOL_QUOTE_MAX,
                            pc_tol_yaml_text(&r->ev), TOL_SCHEMA_VERSION);
  return PC_OK;
}

/* ---- Rules ------------------------------------------------------------------------------- */

/* A metric whose limit every value meets: a floor of 0 or less, max_prob_diff up to 1 (a
 * difference of probabilities never exceeds it). */
static bool metric_cannot_fail(pc_metric m, double limit) {
  return pc_metric_is_floor(m) ? limit <= 0 : m == PC_METRIC_MAX_PROB_DIFF && limit >= 1;
}

/* `elementwise: false` judges a tensor on the rule's metrics alone: one of them that cannot
 * fail would pass whatever B holds (docs/tolerances.md, "Product metrics"). */
static int check_elementwise_off(tol_reader *r, const tol_metrics *tm, yaml_mark_t at) {
  if (!tm->has_elementwise || tm->elementwise)
    return PC_OK;
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    if ((tm->set >> m & 1u) && metric_cannot_fail((pc_metric)m, tm->limit[m]))
      return pc_tol_yaml_fail(
          r, at,
          "'elementwise: false' with metric '%s' %s %g, which cannot fail: the tensor would "
          "pass whatever B holds",
          pc_metric_name((pc_metric)m), pc_metric_is_floor((pc_metric)m) ? "min" : "max",
          tm->limit[m]);
  return PC_OK;
}

int pc_tol_check_rule(tol_reader *r, yaml_mark_t at, bool has_selector, const tol_metrics *tm,
                      yaml_mark_t elementwise_at) {
  if (!has_selector)
    return pc_tol_yaml_fail(r, at, "a rule must have 'match', 'match_module_type' or 'match_attr'");
  return check_elementwise_off(r, tm, elementwise_at);
}
