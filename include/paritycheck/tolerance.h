/* paritycheck tolerance model: per-dtype defaults and ordered glob rules, read from YAML files
 * (schema: docs/tolerances.md). Resolution for a dataset path and compare dtype:
 *   1. the built-in profile (tolerances/default.yaml, embedded at build time) if loaded;
 *   2. then the `defaults` of every loaded file, in load order;
 *   3. then every rule of every file, in load order, whose glob matches the path.
 * Each step overrides only the keys it sets (or unsets with null), so a later file wins.
 * Besides fixed criteria, a file may give the coefficients of the reduction-aware model
 * (docs/tolerance-model.md), which scale with the unit roundoff, the reduction length K and the
 * magnitude of A; resolution turns them into the plain figures of a pc_tol. */
#ifndef PARITYCHECK_TOLERANCE_H
#define PARITYCHECK_TOLERANCE_H

#include <paritycheck/dtype.h> /* pc_dtype */
#include <paritycheck/error.h> /* pc_error */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Bits of pc_tol.set: which criteria take part (docs/metrics.md, "Tolerance test"). */
enum {
  PC_TOL_ATOL = 1u << 0,
  PC_TOL_RTOL = 1u << 1,
  PC_TOL_MAX_ULP = 1u << 2,
  PC_TOL_MAX_MISMATCH_FRACTION = 1u << 3,
  /* Tensor-level criteria: rel_rms <= max_rel_rms, and
   * |scale_error| <= max_scale + max_scale_sqrt_n / sqrt(N) over N finite pairs. */
  PC_TOL_MAX_REL_RMS = 1u << 4,
  PC_TOL_MAX_SCALE = 1u << 5,
  /* Run-level allowances, applied by the judge once the whole run is compared
   * (docs/tolerance-model.md): the run's own error trend along execution order, and the noise
   * floor of tensors whose exact value is (near) zero. */
  PC_TOL_TREND = 1u << 6,
  PC_TOL_NOISE = 1u << 7
};

/* trend_window when a file sets trend_growth but not the window, and the largest accepted. */
enum { PC_TREND_WINDOW_DEFAULT = 8, PC_TREND_WINDOW_MAX = 1 << 20 };

/* Product metrics (docs/metrics.md, "Product metrics"), computed row-wise over the last axis of
 * a tensor (every other axis makes rows) on the tensors whose rule names them
 * (docs/tolerances.md, "metrics"). The first two must reach a minimum, the others stay within a
 * maximum. */
typedef enum pc_metric {
  PC_METRIC_TOP1_AGREEMENT = 0, /* fraction of rows whose argmax agrees */
  PC_METRIC_TOPK_OVERLAP,       /* mean over rows of |topk(A) & topk(B)| / k */
  PC_METRIC_KL_DIVERGENCE,      /* mean over rows of KL(softmax(A) || softmax(B)) */
  PC_METRIC_MAX_PROB_DIFF,      /* max |softmax(A) - softmax(B)| */
  PC_METRIC_SCALAR_ABS,         /* |b - a| of a one-element tensor */
  PC_METRIC_SCALAR_REL,         /* |b - a| / |a| of a one-element tensor */
  PC_METRIC_COUNT_              /* number of enumerators; not a metric */
} pc_metric;

/** "top1_agreement", "topk_overlap", "kl_divergence", "max_prob_diff", "scalar_abs",
 * "scalar_rel". */
const char *pc_metric_name(pc_metric m);

/** True for the metrics whose limit is a minimum (top1_agreement, topk_overlap). */
bool pc_metric_is_floor(pc_metric m);

/* The metrics a tensor is judged on: bit m of `set` for each pc_metric configured, with its
 * limit; `topk` is k of topk_overlap (>= 1 when that bit is set). `elementwise_off`: the rule
 * said `elementwise: false`, so the metrics replace the element and tensor criteria. */
typedef struct pc_metric_tol {
  unsigned set;
  double limit[PC_METRIC_COUNT_];
  uint64_t topk;
  bool elementwise_off;
} pc_metric_tol;

/* The tolerance applied to one tensor. A field is meaningful only when its bit is in `set`;
 * an unset max_mismatch_fraction means 0. The last three are tensor-level criteria on the
 * aggregate figures of docs/metrics.md, which the judge tests (docs/tolerance-model.md). */
typedef struct pc_tol {
  unsigned set;
  double atol;                  /* >= 0, finite */
  double rtol;                  /* >= 0, finite */
  uint64_t max_ulp;             /* any value */
  double max_mismatch_fraction; /* in [0, 1] */
  double max_rel_rms;           /* >= 0, finite */
  double max_scale;             /* >= 0, finite: the systematic part of the scale allowance */
  double max_scale_sqrt_n;      /* >= 0, finite: the sampling part, divided by sqrt(N) */
  double scale_z;               /* with PC_TOL_MAX_SCALE: z, a sampling part z rel_rms / sqrt(N) */
  double trend_growth;          /* PC_TOL_TREND: G, the growth allowed over the trend */
  double trend_growth_backward; /* PC_TOL_TREND: G for gradients (>= trend_growth) */
  unsigned trend_window;        /* PC_TOL_TREND: W, upstream tensors the trend looks at */
  double trend_crest;           /* PC_TOL_TREND: P, largest max_abs / (allowed rel_rms RMS(A)) */
  double noise_floor_u;         /* PC_TOL_NOISE: nu, in unit roundoffs of each side's precision */
  double u;                     /* the model's unit roundoff u (float compare dtypes), else 0 */
  pc_metric_tol metrics;        /* product metrics; none when metrics.set is 0 */
} pc_tol;

typedef struct pc_tolset pc_tolset;

/** A new, empty set (no criterion set for any dtype), or NULL when out of memory. */
pc_tolset *pc_tolset_new(void);

/** Free the set; NULL is accepted. */
void pc_tolset_free(pc_tolset *set);

/** Load the built-in profile (tolerances/default.yaml as it was at build time). */
int pc_tolset_load_builtin(pc_tolset *set, pc_error *err);

/** Parse the YAML file at `path` and append it to the set. On error (PC_EIO when it cannot be
 * read, PC_EPARSE for bad YAML, unknown keys, wrong types, out-of-range numbers or bad globs) the
 * set is unchanged and err->message is "path:line:column: why" (1-based). */
int pc_tolset_load_file(pc_tolset *set, const char *path, pc_error *err);

/** The bytes of the tolerance file at `path` as pc_tolset_load_file reads them (a FIFO without
 * a writer reads as empty instead of blocking; more than 16 MiB is PC_EIO) into *text
 * (malloc'd, the caller frees it; NULL on error) and *len, for a caller that records what it
 * loads (a digest) and loads exactly those bytes with pc_tolset_load_string, a pipe included.
 * PC_EIO naming the file. */
int pc_tolset_read_file(const char *path, char **text, size_t *len, pc_error *err);

/** As pc_tolset_load_file, from `len` bytes of `text`; `name` stands for the file in messages. */
int pc_tolset_load_string(pc_tolset *set, const char *name, const char *text, size_t len,
                          pc_error *err);

#ifdef __cplusplus
}
#endif
#endif
