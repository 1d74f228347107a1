/* Product metrics (metrics.h). Every definition and edge case is docs/metrics.md's, "Product
 * metrics": rows whose values hold a NaN never agree, softmax follows the limits of +inf and
 * -inf logits, and everything is computed in double. */
#include "metrics.h"

#include "pc_internal.h"

#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* exp, log, isnan, isinf, fabs, fmax, NAN, INFINITY */
#include <stdbool.h>  /* bool */
#include <stdlib.h>   /* malloc, calloc, free, qsort */

static bool has_nan(const double *x, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (isnan(x[i]))
      return true;
  return false;
}

/* The first index of the largest value, as numpy's argmax (the row holds no NaN). */
static uint64_t argmax(const double *x, uint64_t n) {
  uint64_t best = 0;
  for (uint64_t i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

/* ---- softmax ------------------------------------------------------------------------------ */

/* log softmax of a row without NaN, in double with a stable log-sum-exp: log p_i = x_i - m -
 * log sum exp(x_j - m), m the largest value. With +inf values, those share the mass equally
 * (the limit as they grow together) and every other value gets none; a row of only -inf has no
 * distribution: false. */
static bool log_softmax(const double *x, uint64_t n, double *out) {
  double m = x[argmax(x, n)];
  if (isinf(m) && m < 0)
    return false;
  if (isinf(m)) {
    double ninf = 0;
    for (uint64_t i = 0; i < n; i++)
      ninf += x[i] == m;
    for (uint64_t i = 0; i < n; i++)
      out[i] = x[i] == m ? -log(ninf) : -INFINITY;
    return true;
  }
  double sum = 0;
  for (uint64_t i = 0; i < n; i++)
    sum += exp(x[i] - m);
  double lse = m + log(sum);
  for (uint64_t i = 0; i < n; i++)
    out[i] = x[i] - lse;
  return true;
}

/* KL(p || q) = sum p_i (log p_i - log q_i), a term with p_i = 0 counting 0 whatever q_i. */
static double kl_row(const double *lp, const double *lq, uint64_t n) {
  double kl = 0;
  for (uint64_t i = 0; i < n; i++)
    if (lp[i] > -INFINITY)
      kl += exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

static double max_diff_row(const double *lp, const double *lq, uint64_t n) {
  double d = 0;
  for (uint64_t i = 0; i < n; i++)
    d = fmax(d, fabs(exp(lp[i]) - exp(lq[i])));
  return d;
}

/* ---- top-k -------------------------------------------------------------------------------- */

typedef struct ranked {
  double v;
  uint64_t i;
} ranked;

/* Larger values first; equal values by lower index (numpy's stable argsort of -x). */
static int cmp_ranked(const void *x, const void *y) {
  const ranked *a = x, *b = y;
  if (a->v != b->v)
    return a->v > b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* Marks in `in` the k largest values of x; scratch holds n entries. */
static void mark_topk(const double *x, uint64_t n, uint64_t k, ranked *scratch, bool *in) {
  for (uint64_t i = 0; i < n; i++) {
    scratch[i] = (ranked){x[i], i};
    in[i] = false;
  }
  qsort(scratch, n, sizeof *scratch, cmp_ranked);
  for (uint64_t j = 0; j < k; j++)
    in[scratch[j].i] = true;
}

/* |topk(a) & topk(b)| / k with k at most n. */
static double overlap_row(const double *a, const double *b, uint64_t n, uint64_t k, ranked *scratch,
                          bool *in_a, bool *in_b) {
  mark_topk(a, n, k, scratch, in_a);
  mark_topk(b, n, k, scratch, in_b);
  uint64_t both = 0;
  for (uint64_t i = 0; i < n; i++)
    both += in_a[i] && in_b[i];
  return (double)both / (double)k;
}

/* ---- per metric --------------------------------------------------------------------------- */

/* The sums over rows, and the scratch they need. */
typedef struct acc {
  double agree, overlap, kl, max_diff;
  bool no_distribution; /* a row had a NaN, or only -inf: kl and max_diff are NaN */
  double *lp, *lq;
  ranked *scratch;
  bool *in_a, *in_b;
} acc;

static bool wants(const pc_metric_tol *mt, pc_metric m) {
  return (mt->set >> m) & 1u;
}

static void fold_row(acc *s, const pc_metric_tol *mt, const double *a, const double *b,
                     uint64_t n) {
  bool nan = has_nan(a, n) || has_nan(b, n);
  if (!nan && wants(mt, PC_METRIC_TOP1_AGREEMENT))
    s->agree += argmax(a, n) == argmax(b, n);
  if (!nan && wants(mt, PC_METRIC_TOPK_OVERLAP)) {
    uint64_t k = mt->topk < n ? mt->topk : n;
    s->overlap += overlap_row(a, b, n, k, s->scratch, s->in_a, s->in_b);
  }
  if (!wants(mt, PC_METRIC_KL_DIVERGENCE) && !wants(mt, PC_METRIC_MAX_PROB_DIFF))
    return;
  if (nan || !log_softmax(a, n, s->lp) || !log_softmax(b, n, s->lq)) {
    s->no_distribution = true;
    return;
  }
  s->kl += kl_row(s->lp, s->lq, n);
  s->max_diff = fmax(s->max_diff, max_diff_row(s->lp, s->lq, n));
}

/* |b - a|, and |b - a| / |a|, 0 when a == b (infinities included), +inf for a = 0 != b or an
 * infinite a != b; NaN when either is NaN. */
static double scalar_abs(double a, double b) {
  return a == b ? 0 : fabs(b - a);
}

static double scalar_rel(double a, double b) {
  if (a == b)
    return 0;
  if (isnan(a) || isnan(b))
    return NAN;
  return a == 0 || isinf(a) ? INFINITY : fabs(b - a) / fabs(a);
}

static void set(pc_metric_result *out, const pc_metric_tol *mt, pc_metric m, double v) {
  if (wants(mt, m))
    out[m] = (pc_metric_result){.present = true, .value = v};
}

static int alloc_scratch(acc *s, uint64_t cols) {
  size_t n = cols ? (size_t)cols : 1;
  s->lp = malloc(n * sizeof *s->lp);
  s->lq = malloc(n * sizeof *s->lq);
  s->scratch = malloc(n * sizeof *s->scratch);
  s->in_a = malloc(n * sizeof *s->in_a);
  s->in_b = malloc(n * sizeof *s->in_b);
  return s->lp && s->lq && s->scratch && s->in_a && s->in_b ? PC_OK : PC_ENOMEM;
}

static void free_scratch(acc *s) {
  free(s->lp);
  free(s->lq);
  free(s->scratch);
  free(s->in_a);
  free(s->in_b);
}

int pc_metrics_compute(pc_metric_result out[PC_METRIC_COUNT_], const pc_metric_tol *mt,
                       const double *a, const double *b, uint64_t rows, uint64_t cols,
                       pc_error *err) {
  uint64_t count = rows * cols;
  if ((wants(mt, PC_METRIC_SCALAR_ABS) || wants(mt, PC_METRIC_SCALAR_REL)) && count != 1)
    return pc_error_set(err, PC_EDATA,
                        "scalar_abs and scalar_rel need a tensor of one element, this has %" PRIu64,
                        count);
  acc s = {0};
  int rc = alloc_scratch(&s, cols);
  for (uint64_t r = 0; rc == PC_OK && cols && r < rows; r++)
    fold_row(&s, mt, a + r * cols, b + r * cols, cols);
  free_scratch(&s);
  if (rc < 0)
    return pc_error_set(err, rc, "out of memory computing metrics");
  /* Without rows every mean is NaN, as numpy's mean of nothing: a metric on an empty tensor
   * fails. */
  double nrows = cols ? (double)rows : 0;
  set(out, mt, PC_METRIC_TOP1_AGREEMENT, nrows ? s.agree / nrows : NAN);
  set(out, mt, PC_METRIC_TOPK_OVERLAP, nrows ? s.overlap / nrows : NAN);
  bool dist = nrows && !s.no_distribution;
  set(out, mt, PC_METRIC_KL_DIVERGENCE, dist ? s.kl / nrows : NAN);
  set(out, mt, PC_METRIC_MAX_PROB_DIFF, dist ? s.max_diff : NAN);
  if (count == 1) {
    set(out, mt, PC_METRIC_SCALAR_ABS, scalar_abs(a[0], b[0]));
    set(out, mt, PC_METRIC_SCALAR_REL, scalar_rel(a[0], b[0]));
  }
  return PC_OK;
}
