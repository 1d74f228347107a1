/* Internal to the tolerance model (include/paritycheck/tolerance.h): the parsed form of a
 * tolerance set, which the grammar (tol_parse.c) builds file by file, tol_set.c gathers and rule
 * resolution (tol_resolve.c) reads. */
#ifndef PC_TOL_INTERNAL_H
#define PC_TOL_INTERNAL_H

#include <paritycheck/tolerance.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/* The dtype keys of a layer, in the order of tol_parse.c's layer_keys. */
typedef enum tol_key {
  KEY_FLOAT64,
  KEY_FLOAT32,
  KEY_FLOAT16,
  KEY_BFLOAT16,
  KEY_FLOAT8_E4M3FN,
  KEY_FLOAT8_E5M2,
  KEY_INTEGER,
  KEY_ALL,
  KEY_COUNT
} tol_key;

/* The criteria keys of tol_parse.c's criterion_keys, in order; the index of each is its bit in
 * tol_entry.set. The first four are pc_tol's own criteria (their bits are the PC_TOL_* bits); the
 * others are the coefficients of the reduction-aware model (docs/tolerance-model.md). */
enum {
  CRIT_ATOL,
  CRIT_RTOL,
  CRIT_MAX_ULP,
  CRIT_MAX_MISMATCH_FRACTION,
  CRIT_PRECISION,
  CRIT_ACCUMULATION,
  CRIT_ATOL_RMS,
  CRIT_RTOL_U,
  CRIT_RTOL_SQRT_K,
  CRIT_MAX_REL_RMS_U,
  CRIT_MAX_SCALE_U,
  CRIT_MAX_SCALE_U_SQRT_N,
  CRIT_TREND_GROWTH,
  CRIT_TREND_WINDOW,
  CRIT_TREND_CREST,
  CRIT_NOISE_FLOOR_U,
  CRIT_TREND_GROWTH_BACKWARD,
  CRIT_SCALE_Z,
  CRIT_COUNT
};
_Static_assert(PC_TOL_ATOL == 1u << CRIT_ATOL && PC_TOL_RTOL == 1u << CRIT_RTOL &&
                   PC_TOL_MAX_ULP == 1u << CRIT_MAX_ULP &&
                   PC_TOL_MAX_MISMATCH_FRACTION == 1u << CRIT_MAX_MISMATCH_FRACTION,
               "criterion order must follow the PC_TOL_* bits");

/* What one layer says about one dtype key: bit k of `set` when it gives criterion_keys[k] a
 * value, of `unset` when it clears it with null. value[k] holds every number but max_ulp's;
 * for `precision` and `accumulation` it is the unit roundoff of the named format. Resolution
 * layers entries into one of the same kind. */
typedef struct tol_entry {
  unsigned set;
  unsigned unset;
  double value[CRIT_COUNT];
  uint64_t max_ulp;
} tol_entry;

/* What one rule says about product metrics: bit m of `set` when it gives pc_metric m a limit,
 * of `unset` when it clears it with null; `elementwise` counts when has_elementwise. */
typedef struct tol_metrics {
  unsigned set;
  unsigned unset;
  double limit[PC_METRIC_COUNT_];
  uint64_t topk;
  bool has_elementwise;
  bool elementwise;
} tol_metrics;

/* A rule's condition on what a tensor is (`match_module_type`, `match_attr`): it holds when
 * attribute `name` of either side's dataset (else of its file) has a text that one of the globs
 * matches. */
typedef struct tol_cond {
  char *name;
  char **globs;
  size_t nglobs;
} tol_cond;

/* The defaults of one file (no glob, conditions or metrics) or one rule. A rule applies to a
 * tensor when its glob (if any) matches the path and every condition holds. */
typedef struct tol_layer {
  char *glob;
  tol_cond *conds;
  size_t nconds;
  tol_entry entry[KEY_COUNT];
  tol_metrics metrics;
} tol_layer;

/** Frees what a layer owns (its glob and conditions); the layer itself is the caller's. */
void pc_tol_layer_clear(tol_layer *layer);

struct pc_tolset {
  tol_layer *defaults; /* one per loaded file, the builtin's first */
  size_t n_defaults;
  tol_layer *rules; /* every file's rules in load order, the builtin's first */
  size_t n_rules;
  bool has_builtin;
};

#endif
