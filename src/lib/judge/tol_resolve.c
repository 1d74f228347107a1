/* Rule resolution of the tolerance model (include/paritycheck/tolerance.h): walks the layers
 * that tol_parse.c built and allocates nothing, so any number of threads may resolve against one
 * set. Resolution order: docs/tolerances.md; the model's terms: docs/tolerance-model.md. */
#include "tol_resolve.h"
#include "tol_internal.h"

#include <fnmatch.h> /* fnmatch */
#include <math.h>    /* fmax, fmin, sqrt */

/* The bits of tol_entry.set that are pc_tol.set bits as they are. */
static const unsigned TOL_PLAIN_BITS =
    PC_TOL_ATOL | PC_TOL_RTOL | PC_TOL_MAX_ULP | PC_TOL_MAX_MISMATCH_FRACTION;

/* ---- Resolution -------------------------------------------------------------------------- */

/* The dtype key a compare dtype reads besides "all"; KEY_ALL when it has none of its own. */
static tol_key key_of_dtype(pc_dtype dt) {
  switch (dt) {
  case PC_DTYPE_FLOAT64:
    return KEY_FLOAT64;
  case PC_DTYPE_FLOAT32:
    return KEY_FLOAT32;
  case PC_DTYPE_FLOAT16:
    return KEY_FLOAT16;
  case PC_DTYPE_BFLOAT16:
    return KEY_BFLOAT16;
  case PC_DTYPE_FLOAT8_E4M3FN:
    return KEY_FLOAT8_E4M3FN;
  case PC_DTYPE_FLOAT8_E5M2:
    return KEY_FLOAT8_E5M2;
  default:
    return pc_dtype_is_integer(dt) ? KEY_INTEGER : KEY_ALL;
  }
}

static void apply_entry(tol_entry *acc, const tol_entry *e) {
  unsigned touched = e->set | e->unset;
  for (size_t k = 0; k < CRIT_COUNT; k++)
    if (touched & (1u << k))
      acc->value[k] = e->value[k];
  if (touched & PC_TOL_MAX_ULP)
    acc->max_ulp = e->max_ulp;
  acc->set = (acc->set & ~e->unset) | e->set;
}

/* "all" first, so that the dtype's own entry in the same layer wins. */
static void apply_layer(tol_entry *acc, const tol_layer *layer, tol_key key) {
  apply_entry(acc, &layer->entry[KEY_ALL]);
  if (key != KEY_ALL)
    apply_entry(acc, &layer->entry[key]);
}

/* A condition holds when either side's text of its attribute matches one of its globs. */
static bool cond_holds(const tol_cond *c, const pc_tol_context *ctx) {
  char buf[PC_TOL_ATTR_TEXT_MAX];
  if (!ctx || !ctx->attr)
    return false;
  for (int side = 0; side < 2; side++) {
    const char *text = ctx->attr(ctx->attr_user, side, c->name, buf, sizeof buf);
    for (size_t i = 0; text && i < c->nglobs; i++)
      if (fnmatch(c->globs[i], text, 0) == 0)
        return true;
  }
  return false;
}

/* The path glob first: it is the cheaper test, and most rules fail it. */
static bool rule_applies(const tol_layer *rule, const char *path, const pc_tol_context *ctx) {
  if (!path || (rule->glob && fnmatch(rule->glob, path, 0) != 0))
    return false;
  for (size_t i = 0; i < rule->nconds; i++)
    if (!cond_holds(&rule->conds[i], ctx))
      return false;
  return true;
}

/* Every layer that applies to the tensor, in order (docs/tolerances.md, "Resolution"). */
static tol_entry resolve_entry(const pc_tolset *set, const char *path, pc_dtype compare,
                               const pc_tol_context *ctx) {
  tol_entry acc = {0};
  if (!set)
    return acc;
  tol_key key = key_of_dtype(compare);
  for (size_t i = 0; i < set->n_defaults; i++)
    apply_layer(&acc, &set->defaults[i], key);
  for (size_t i = 0; i < set->n_rules; i++)
    if (rule_applies(&set->rules[i], path, ctx))
      apply_layer(&acc, &set->rules[i], key);
  return acc;
}

static bool has(const tol_entry *e, int crit) {
  return (e->set >> crit) & 1u;
}

/* Criteria are alternatives (an element passes when any holds), so a model term widens a
 * criterion that is already set, and sets one that is not. */
static void widen(pc_tol *tol, unsigned bit, double *field, double v) {
  *field = (tol->set & bit) && *field > v ? *field : v;
  tol->set |= bit;
}

/* u of docs/tolerance-model.md: the coarsest of the compare dtype and `precision`. */
static double model_u(const tol_entry *e, pc_dtype compare) {
  double u = pc_dtype_unit_roundoff(compare);
  return has(e, CRIT_PRECISION) ? fmax(u, e->value[CRIT_PRECISION]) : u;
}

/* u_acc: the dataset's accumulation dtype, else `accumulation`, else the compare dtype. */
static double model_u_acc(const tol_entry *e, pc_dtype compare, const pc_tol_context *ctx) {
  if (ctx && ctx->accumulation != PC_DTYPE_NONE)
    return pc_dtype_unit_roundoff(ctx->accumulation);
  return has(e, CRIT_ACCUMULATION) ? e->value[CRIT_ACCUMULATION] : pc_dtype_unit_roundoff(compare);
}

/* The run-level terms (docs/tolerance-model.md, "The run's trend" and "Noise-level tensors"):
 * the judge applies them once every tensor of the run is compared. */
static void apply_run_model(pc_tol *tol, const tol_entry *e, double u) {
  const double *c = e->value;
  tol->u = u;
  if (has(e, CRIT_TREND_GROWTH) && c[CRIT_TREND_GROWTH] > 0) {
    tol->set |= PC_TOL_TREND;
    tol->trend_growth = c[CRIT_TREND_GROWTH];
    tol->trend_growth_backward = has(e, CRIT_TREND_GROWTH_BACKWARD)
                                     ? fmax(c[CRIT_TREND_GROWTH_BACKWARD], tol->trend_growth)
                                     : tol->trend_growth;
    tol->trend_window = has(e, CRIT_TREND_WINDOW) && c[CRIT_TREND_WINDOW] >= 1
                            ? (unsigned)fmin(c[CRIT_TREND_WINDOW], PC_TREND_WINDOW_MAX)
                            : PC_TREND_WINDOW_DEFAULT;
    tol->trend_crest = has(e, CRIT_TREND_CREST) ? c[CRIT_TREND_CREST] : 0;
  }
  if (has(e, CRIT_NOISE_FLOOR_U) && c[CRIT_NOISE_FLOOR_U] > 0) {
    tol->set |= PC_TOL_NOISE;
    tol->noise_floor_u = c[CRIT_NOISE_FLOOR_U];
  }
}

/* The model's terms for a float compare dtype (docs/tolerance-model.md). */
static void apply_model(pc_tol *tol, const tol_entry *e, pc_dtype compare,
                        const pc_tol_context *ctx) {
  double u = model_u(e, compare);
  const double *c = e->value;
  if (has(e, CRIT_ATOL_RMS) && ctx && ctx->has_magnitude)
    widen(tol, PC_TOL_ATOL, &tol->atol, c[CRIT_ATOL_RMS] * u * ctx->rms_a);
  if (has(e, CRIT_RTOL_U))
    widen(tol, PC_TOL_RTOL, &tol->rtol, c[CRIT_RTOL_U] * u);
  if (has(e, CRIT_RTOL_SQRT_K) && ctx && ctx->reduction_length > 0)
    widen(tol, PC_TOL_RTOL, &tol->rtol,
          c[CRIT_RTOL_SQRT_K] * sqrt((double)ctx->reduction_length) * model_u_acc(e, compare, ctx));
  if (has(e, CRIT_MAX_REL_RMS_U)) {
    tol->set |= PC_TOL_MAX_REL_RMS;
    tol->max_rel_rms = c[CRIT_MAX_REL_RMS_U] * u;
  }
  if (has(e, CRIT_MAX_SCALE_U) || has(e, CRIT_MAX_SCALE_U_SQRT_N)) {
    tol->set |= PC_TOL_MAX_SCALE;
    tol->max_scale = (has(e, CRIT_MAX_SCALE_U) ? c[CRIT_MAX_SCALE_U] : 0) * u;
    tol->max_scale_sqrt_n = (has(e, CRIT_MAX_SCALE_U_SQRT_N) ? c[CRIT_MAX_SCALE_U_SQRT_N] : 0) * u;
    tol->scale_z = has(e, CRIT_SCALE_Z) ? c[CRIT_SCALE_Z] : 0;
  }
  apply_run_model(tol, e, u);
}

double pc_tolset_precision_u(const pc_tolset *set, const char *path, pc_dtype compare,
                             const pc_tol_context *ctx) {
  if (!pc_dtype_is_float(compare))
    return 0;
  tol_entry e = resolve_entry(set, path, compare, ctx);
  return has(&e, CRIT_PRECISION) ? e.value[CRIT_PRECISION] : 0;
}

static const char *const metric_names[PC_METRIC_COUNT_] = {
    "top1_agreement", "topk_overlap", "kl_divergence", "max_prob_diff", "scalar_abs", "scalar_rel"};

const char *pc_metric_name(pc_metric m) {
  return (unsigned)m < PC_METRIC_COUNT_ ? metric_names[m] : "unknown";
}

bool pc_metric_is_floor(pc_metric m) {
  return m == PC_METRIC_TOP1_AGREEMENT || m == PC_METRIC_TOPK_OVERLAP;
}

/* The metrics of every rule that matches path, in order; each rule overrides only what it says.
 * They do not depend on the compare dtype. */
static pc_metric_tol resolve_metrics(const pc_tolset *set, const char *path,
                                     const pc_tol_context *ctx) {
  pc_metric_tol mt = {0};
  for (size_t i = 0; set && i < set->n_rules; i++) {
    const tol_metrics *r = &set->rules[i].metrics;
    if (!(r->set | r->unset | r->has_elementwise) || !rule_applies(&set->rules[i], path, ctx))
      continue;
    mt.set = (mt.set & ~r->unset) | r->set;
    for (int m = 0; m < PC_METRIC_COUNT_; m++)
      if (r->set & (1u << m))
        mt.limit[m] = r->limit[m];
    if (r->set & (1u << PC_METRIC_TOPK_OVERLAP))
      mt.topk = r->topk;
    if (r->has_elementwise)
      mt.elementwise_off = !r->elementwise;
  }
  return mt;
}

pc_tol pc_tolset_resolve_ctx(const pc_tolset *set, const char *path, pc_dtype compare,
                             const pc_tol_context *ctx) {
  tol_entry e = resolve_entry(set, path, compare, ctx);
  pc_tol tol = {0};
  tol.set = e.set & TOL_PLAIN_BITS;
  tol.atol = e.value[CRIT_ATOL];
  tol.rtol = e.value[CRIT_RTOL];
  tol.max_ulp = e.max_ulp;
  tol.max_mismatch_fraction = e.value[CRIT_MAX_MISMATCH_FRACTION];
  if (pc_dtype_is_float(compare))
    apply_model(&tol, &e, compare, ctx);
  tol.metrics = resolve_metrics(set, path, ctx);
  return tol;
}

pc_tol pc_tolset_resolve(const pc_tolset *set, const char *path, pc_dtype compare) {
  return pc_tolset_resolve_ctx(set, path, compare, NULL);
}

/* Only atol_rms reads the magnitude of A. */
bool pc_tolset_needs_magnitude(const pc_tolset *set, const char *path, pc_dtype compare,
                               const pc_tol_context *ctx) {
  tol_entry e = resolve_entry(set, path, compare, ctx);
  return pc_dtype_is_float(compare) && has(&e, CRIT_ATOL_RMS) && e.value[CRIT_ATOL_RMS] > 0;
}

int pc_tolset_unused_rules(const pc_tolset *set, const char *const *paths, size_t n,
                           int (*fn)(void *user, const char *glob), void *user) {
  int rc = PC_OK;
  for (size_t i = 0; set && i < set->n_rules && rc == PC_OK; i++) {
    if (!set->rules[i].glob)
      continue;
    size_t k = 0;
    while (k < n && fnmatch(set->rules[i].glob, paths[k], 0) != 0)
      k++;
    if (k == n)
      rc = fn(user, set->rules[i].glob);
  }
  return rc;
}

double pc_tol_scale_limit(const pc_tol *tol, uint64_t n, double rel_rms) {
  return tol->max_scale + (tol->max_scale_sqrt_n + tol->scale_z * rel_rms) / sqrt((double)n);
}
