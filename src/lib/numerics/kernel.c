/* Element kernels (kernel.h). Each element is classified, measured and judged by the rules of
 * docs/metrics.md; the figures are folded into pc_stats with exact counts, maxima and a 128-bit
 * ulp sum, so the result is independent of block boundaries. */
#include "kernel.h"
#include "kernel_f32.h"
#include "numerics.h"

#include <math.h>   /* fabs, hypot, isinf, isnan, ldexp, INFINITY */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* memcpy, memset */

/* The figures of one element. */
typedef struct pc_elem {
  double abs, rel;
  uint64_t ulp;
  bool equal;   /* equal in the sense of docs/metrics.md: passes whatever the tolerance */
  bool nan_mis; /* NaN on one side only */
  bool inf_mis; /* an inf the other side does not match */
} pc_elem;

static bool pc_tol_passes(const pc_tol *t, const pc_elem *e, double abs_a) {
  if (e->equal)
    return true;
  if (e->nan_mis || e->inf_mis)
    return false;
  double atol = (t->set & PC_TOL_ATOL) ? t->atol : -1, rtol = (t->set & PC_TOL_RTOL) ? t->rtol : -1;
  bool ulp_ok = (t->set & PC_TOL_MAX_ULP) && e->ulp <= t->max_ulp;
  return PC_ELEMENT_PASSES(false, e->abs, abs_a, atol, rtol, ulp_ok);
}

/* True when the candidate should replace the current worst element: non-finite mismatches
 * first (the first one wins), then mismatches, then passing elements, by largest abs; ties go
 * to the lower index, which is the one already held since elements arrive in order. */
static bool pc_worse(const pc_stats *s, int cls, double abs) {
  if (!s->has_worst || cls > s->worst_class)
    return true;
  return cls == s->worst_class && cls != PC_CLASS_NONFINITE && abs > s->worst_abs;
}

/* Bucket k >= 1 holds [2^(k-1), 2^k): the bit length of ulp. */
static inline int pc_ulp_bucket(uint64_t ulp) {
  return (ulp != 0) * (64 - __builtin_clzll(ulp | 1)); /* no branch: ulp = 0 is common */
}

static inline void pc_hist_add(pc_qhist **h, double abs, double rel, uint64_t ulp) {
  if (!h)
    return;
  pc_qhist_add(h[PC_HIST_ABS], abs);
  pc_qhist_add(h[PC_HIST_REL], rel);
  pc_qhist_add(h[PC_HIST_ULP], (double)ulp);
}

/* Aggregate sums: only where all four parts are finite, so one inf or NaN cannot poison them. */
static void pc_fold_sums(pc_stats *s, const double a[2], const double b[2]) {
  if (!isfinite(a[0]) || !isfinite(a[1]) || !isfinite(b[0]) || !isfinite(b[1]))
    return;
  double d0 = b[0] - a[0], d1 = b[1] - a[1];
  s->finite_terms++;
  s->sum_sq_a += a[0] * a[0] + a[1] * a[1];
  s->sum_sq_b += b[0] * b[0] + b[1] * b[1];
  s->sum_ab += a[0] * b[0] + a[1] * b[1];
  s->sum_sq_diff += d0 * d0 + d1 * d1;
  s->sum_a_diff += a[0] * d0 + a[1] * d1;
}

/* Returns true when the element became the worst one. */
static bool pc_fold(const pc_kernel_args *k, const pc_elem *e, uint64_t idx, const double a[2],
                    const double b[2], double abs_a) {
  pc_stats *s = k->stats;
  bool pass = pc_tol_passes(k->tol, e, abs_a);
  s->count++;
  s->mismatches += !pass;
  s->nan_mismatches += e->nan_mis;
  s->inf_mismatches += e->inf_mis;
  if (!e->nan_mis) {
    s->max_abs = e->abs > s->max_abs ? e->abs : s->max_abs;
    s->max_rel = e->rel > s->max_rel ? e->rel : s->max_rel;
    s->max_ulp = e->ulp > s->max_ulp ? e->ulp : s->max_ulp;
    s->ulp_sum_lo += e->ulp;
    s->ulp_sum_hi += s->ulp_sum_lo < e->ulp; /* carry out of the low word */
    s->ulp_terms++;
    s->sum_abs += e->abs;
    s->sum_rel += e->rel;
    s->ulp_hist[pc_ulp_bucket(e->ulp)]++;
    pc_hist_add(k->hist, e->abs, e->rel, e->ulp);
  }
  pc_fold_sums(s, a, b);
  int cls = (e->nan_mis || e->inf_mis) ? PC_CLASS_NONFINITE
            : pass                     ? PC_CLASS_PASS
                                       : PC_CLASS_MISMATCH;
  if (!pc_worse(s, cls, e->abs))
    return false;
  s->has_worst = true;
  s->worst_is_int = false;
  s->worst_class = cls;
  s->worst_index = idx;
  s->worst_a[0] = a[0];
  s->worst_a[1] = a[1];
  s->worst_b[0] = b[0];
  s->worst_b[1] = b[1];
  s->worst_abs = e->abs;
  s->worst_rel = e->rel;
  s->worst_ulp = e->ulp;
  return true;
}

static double pc_rel(double abs, double abs_a) {
  if (abs_a == 0)
    return abs == 0 ? 0 : INFINITY;
  return abs / abs_a;
}

/* One real pair; neither value is NaN. */
static pc_elem pc_measure_real(double a, double b, pc_dtype dt) {
  pc_elem e = {0, 0, 0, false, false, false};
  if (a == b) {
    e.equal = true; /* covers +0 == -0 and inf == inf */
  } else if (isinf(a) || isinf(b)) {
    e.inf_mis = true;
    e.abs = e.rel = INFINITY;
    e.ulp = pc_ulp_distance(a, b, dt);
  } else {
    e.abs = fabs(b - a);
    e.rel = pc_rel(e.abs, fabs(a));
    e.ulp = pc_ulp_distance(a, b, dt);
  }
  return e;
}

static void pc_real_element(const pc_kernel_args *k, double a, double b, uint64_t idx) {
  const double av[2] = {a, 0}, bv[2] = {b, 0};
  pc_elem e = {0, 0, 0, false, false, false};
  bool na = isnan(a), nb = isnan(b);
  if (na || nb) {
    e.equal = na && nb;
    e.nan_mis = !e.equal;
    e.abs = e.rel = e.nan_mis ? NAN : 0; /* reported for the worst element only */
  } else {
    e = pc_measure_real(a, b, k->compare);
  }
  pc_fold(k, &e, idx, av, bv, fabs(a));
}

/* pc_ord32_bits for a double rounded to float32 (to nearest even, overflowing to inf: IEEE
 * 754, C Annex F). */
static inline int64_t pc_ord32(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return pc_ord32_bits(u);
}

static inline int64_t pc_ord64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  uint64_t m = (uint64_t)0 - (u >> 63);
  return (int64_t)(((u & INT64_MAX) ^ m) - m);
}

/* The running figures of a block's finite pairs. Scalars only, so that once pc_acc_pair is
 * inlined into a loop the compiler keeps every field in a register (a field read and written
 * through memory each element would serialise the loop). */
typedef struct pc_acc {
  double atol, rtol; /* -1 when unset: abs >= 0 never passes them */
  bool use_ulp;
  uint64_t tol_ulp;
  uint64_t count, mism, max_ulp, ulp_lo, ulp_hi;
  double max_abs, max_rel, sabs, srel, ssa, ssb, sab, ssd, sad;
  int wcls; /* the worst element so far: class (-1: none), abs, index, values */
  double wabs, wrel, wa, wb;
  uint64_t widx, wulp;
  /* The smallest nonzero values, for the range of histogram buckets touched (the largest are
   * the maxima above; bucket 0 needs no range: qhist.h), so that the loop need not track
   * bucket ranges itself. */
  double min_abs, min_rel;
  uint64_t min_ulp;
  pc_qhist *h_abs, *h_rel, *h_ulp; /* all NULL: no histograms */
} pc_acc;

static pc_acc pc_acc_init(const pc_kernel_args *k) {
  const pc_tol *t = k->tol;
  pc_acc c;
  memset(&c, 0, sizeof c);
  c.atol = (t->set & PC_TOL_ATOL) ? t->atol : -1;
  c.rtol = (t->set & PC_TOL_RTOL) ? t->rtol : -1;
  c.use_ulp = (t->set & PC_TOL_MAX_ULP) != 0;
  c.tol_ulp = t->max_ulp;
  c.wcls = -1;
  c.min_abs = c.min_rel = INFINITY;
  c.min_ulp = UINT64_MAX;
  if (k->hist) {
    c.h_abs = k->hist[PC_HIST_ABS];
    c.h_rel = k->hist[PC_HIST_REL];
    c.h_ulp = k->hist[PC_HIST_ULP];
  }
  return c;
}

/* One finite pair, folded exactly as pc_real_element would fold it. */
static inline __attribute__((always_inline)) void pc_acc_pair(pc_acc *c, uint64_t *ulp_hist,
                                                              double x, double y, uint64_t ulp,
                                                              double ulp_d, uint64_t idx) {
  double d = y - x, abs = fabs(d), abs_a = fabs(x);
  double rel = abs_a != 0 ? abs / abs_a : abs == 0 ? 0 : INFINITY;
  bool pass =
      PC_ELEMENT_PASSES(x == y, abs, abs_a, c->atol, c->rtol, c->use_ulp & (ulp <= c->tol_ulp));
  c->count++;
  c->mism += !pass;
  c->max_abs = abs > c->max_abs ? abs : c->max_abs;
  c->max_rel = rel > c->max_rel ? rel : c->max_rel;
  c->max_ulp = ulp > c->max_ulp ? ulp : c->max_ulp;
  c->ulp_lo += ulp;
  c->ulp_hi += c->ulp_lo < ulp;
  c->sabs += abs;
  c->srel += rel;
  c->ssa += x * x;
  c->ssb += y * y;
  c->sab += x * y;
  c->ssd += d * d;
  c->sad += x * d;
  ulp_hist[pc_ulp_bucket(ulp)]++;
  c->min_abs = ((abs < c->min_abs) & (abs > 0)) ? abs : c->min_abs;
  c->min_rel = ((rel < c->min_rel) & (rel > 0)) ? rel : c->min_rel;
  c->min_ulp = ((ulp < c->min_ulp) & (ulp != 0)) ? ulp : c->min_ulp;
  if (c->h_abs) {
    c->h_abs->count[pc_qhist_bucket(abs)]++;
    c->h_rel->count[pc_qhist_bucket(rel)]++;
    c->h_ulp->count[pc_qhist_bucket(ulp_d)]++;
  }
  /* pc_worse's rule for classes pass and mismatch: rarely true once a few elements are in. */
  int cls = pass ? PC_CLASS_PASS : PC_CLASS_MISMATCH;
  if (cls > c->wcls || (cls == c->wcls && abs > c->wabs)) {
    c->wcls = cls;
    c->wabs = abs;
    c->wrel = rel;
    c->wa = x;
    c->wb = y;
    c->widx = idx;
    c->wulp = ulp;
  }
}

/* A fast path's worst pair (real values a, b; abs_rel: its abs and rel) into f. */
static void pc_set_worst(pc_stats *f, int cls, uint64_t idx, double a, double b,
                         const double abs_rel[2], uint64_t ulp) {
  f->has_worst = true;
  f->worst_class = cls;
  f->worst_index = idx;
  f->worst_a[0] = a;
  f->worst_b[0] = b;
  f->worst_abs = abs_rel[0];
  f->worst_rel = abs_rel[1];
  f->worst_ulp = ulp;
}

/* Merge the block's fast figures (ulp_hist already counted into) into k->stats, which holds
 * the block's non-finite pairs. */
static void pc_acc_finish(const pc_kernel_args *k, const pc_acc *c, uint64_t *ulp_hist) {
  pc_stats f;
  memset(&f, 0, sizeof f);
  memcpy(f.ulp_hist, ulp_hist, sizeof f.ulp_hist);
  if (c->h_abs && c->count) {
    pc_qhist_touch(c->h_abs, pc_qhist_bucket(c->min_abs), pc_qhist_bucket(c->max_abs));
    pc_qhist_touch(c->h_rel, pc_qhist_bucket(c->min_rel), pc_qhist_bucket(c->max_rel));
    pc_qhist_touch(c->h_ulp, pc_qhist_bucket((double)c->min_ulp),
                   pc_qhist_bucket((double)c->max_ulp));
  }
  f.count = f.ulp_terms = f.finite_terms = c->count;
  f.mismatches = c->mism;
  f.max_abs = c->max_abs;
  f.max_rel = c->max_rel;
  f.max_ulp = c->max_ulp;
  f.ulp_sum_lo = c->ulp_lo;
  f.ulp_sum_hi = c->ulp_hi;
  f.sum_abs = c->sabs;
  f.sum_rel = c->srel;
  f.sum_sq_a = c->ssa;
  f.sum_sq_b = c->ssb;
  f.sum_ab = c->sab;
  f.sum_sq_diff = c->ssd;
  f.sum_a_diff = c->sad;
  if (c->wcls >= 0)
    pc_set_worst(&f, c->wcls, c->widx, c->wa, c->wb, (double[]){c->wabs, c->wrel}, c->wulp);
  pc_stats_merge(k->stats, &f);
}

/* Real floats in double, compared in float32 or float64: finite pairs take the inline path, a
 * pair with a NaN or an inf the general one. */
static void pc_fast_float(const pc_kernel_args *k, const double *a, const double *b, bool f64) {
  pc_acc c = pc_acc_init(k);
  uint64_t ulp_hist[PC_ULP_BUCKETS] = {0};
  for (size_t i = 0; i < k->n; i++) {
    double x = a[i], y = b[i];
    if (!isfinite(x) || !isfinite(y)) {
      pc_real_element(k, x, y, k->base + i);
      continue;
    }
    uint64_t ulp =
        f64 ? pc_ord_distance(pc_ord64(x), pc_ord64(y)) : pc_ord_distance(pc_ord32(x), pc_ord32(y));
    pc_acc_pair(&c, ulp_hist, x, y, ulp, (double)ulp, k->base + i);
  }
  pc_acc out = c; /* c's address never escapes, so it can live in registers */
  pc_acc_finish(k, &out, ulp_hist);
}

/* bfloat16 keeps a float32's top 16 bits: a value is representable when the rest are zero, and
 * a NaN always is (docs/metrics.md), whatever its payload. */
static inline uint64_t pc_bf16_inexact(uint32_t u) {
  const uint32_t inf_bits = 0x7F800000u; /* magnitudes above it are NaN */
  return ((u & 0xFFFFu) != 0) & ((u & INT32_MAX) <= inf_bits);
}

/* Pairs lo..hi-1 of a float32 or float16 bytes block, one by one: the groups the vector part
 * leaves (a non-finite pair inside) and the last partial group. */
static void pc_f32_scalar(const pc_kernel_args *k, pc_acc *c, uint64_t *ulp_hist, pc_f32_state *st,
                          const unsigned char *a, const unsigned char *b, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; i++) {
    float x, y;
    uint32_t ux, uy;
    pc_pair_load(st->half, a, b, i, &x, &y, &ux, &uy);
    st->inexact_a += st->a_bf16 & pc_bf16_inexact(ux);
    st->inexact_b += st->b_bf16 & pc_bf16_inexact(uy);
    if (!isfinite(x) || !isfinite(y)) {
      pc_real_element(k, x, y, k->base + i);
      continue;
    }
    uint64_t ulp = pc_f32_ulp(ux, uy, st->bf16);
    /* float32 distances stay below 2^33: the signed conversion is exact and branch-free. */
    pc_acc_pair(c, ulp_hist, x, y, ulp, (double)(int64_t)ulp, k->base + i);
  }
}

/* The local ULP buckets of pc_f32_state, one table per thread; zero between runs: a run starts
 * on a zero table, and pc_f32_flush_ulps clears what it read. */
static _Thread_local uint32_t pc_f32_ulp_table[PC_F32_ULP_COPIES][PC_F32_ULP_KEYS];

static pc_f32_state *pc_f32_start(pc_f32_state *st, const pc_kernel_args *k, const pc_acc *c,
                                  bool half, bool a_bf16, bool b_bf16) {
  memset(st, 0, sizeof *st);
  st->half = half;
  st->bf16 = k->compare == PC_DTYPE_BFLOAT16;
  st->a_bf16 = a_bf16;
  st->b_bf16 = b_bf16;
  st->atol = c->atol;
  st->rtol = c->rtol;
  st->tol_ulp = !c->use_ulp ? -1 : c->tol_ulp > INT64_MAX ? INT64_MAX : (int64_t)c->tol_ulp;
  st->base = k->base;
  st->h_abs = c->h_abs;
  st->h_rel = c->h_rel;
  for (int l = 0; l < PC_F32_LANES; l++)
    st->min_abs[l] = st->min_rel[l] = INFINITY;
  st->wcls = -1;
  st->ulp_keys = pc_f32_ulp_table;
  return st;
}

/* The ULP keys counted so far, into the ULP quantile histogram (when there is one) and the log2
 * histogram; then cleared, so that no copy's uint32 count can wrap and the table is zero for
 * the next run. Keys grow with the distance, so none is above the key of the largest distance
 * the lanes met (max_ulp, which every counted distance updates). */
static void pc_f32_flush_ulps(pc_f32_state *st, pc_qhist *h_ulp, uint64_t *ulp_hist) {
  uint32_t top = 0;
  for (int l = 0; l < PC_F32_LANES; l++)
    top = st->max_ulp[l] > top ? st->max_ulp[l] : top;
  uint32_t last = top ? pc_qhist_bucket((double)top) - PC_F32_ULP_KEY_ONE + 1 : 0;
  for (uint32_t key = 0; key <= last; key++) {
    uint64_t n = 0;
    for (int c = 0; c < PC_F32_ULP_COPIES; c++)
      n += st->ulp_keys[c][key];
    if (!n)
      continue;
    /* Local key j >= 1 is quantile key j - 1 + key(1); its octave's exponent gives the log2
     * bucket (kernel.c, pc_ulp_bucket: the distance's bit length). */
    uint32_t q = key ? key - 1 + PC_F32_ULP_KEY_ONE : 0;
    ulp_hist[key ? (q >> 4) - 1022 : 0] += n;
    if (h_ulp) {
      h_ulp->count[q] += n;
      pc_qhist_touch(h_ulp, q, q);
    }
  }
  for (int c = 0; c < PC_F32_ULP_COPIES; c++)
    memset(st->ulp_keys[c], 0, (last + 1) * sizeof st->ulp_keys[c][0]);
}

static uint64_t pc_lanes_u64(const uint64_t *v) {
  uint64_t n = 0;
  for (int l = 0; l < PC_F32_LANES; l++)
    n += v[l];
  return n;
}

/* The lanes' sum, added pairwise: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
static double pc_lanes_sum(const double *v) {
  double t[PC_F32_LANES];
  memcpy(t, v, sizeof t);
  for (int w = 1; w < PC_F32_LANES; w *= 2)
    for (int l = 0; l < PC_F32_LANES; l += 2 * w)
      t[l] += t[l + w];
  return t[0];
}

static double pc_lanes_max(const double *v) {
  double m = v[0];
  for (int l = 1; l < PC_F32_LANES; l++)
    m = v[l] > m ? v[l] : m;
  return m;
}

static double pc_lanes_min(const double *v) {
  double m = v[0];
  for (int l = 1; l < PC_F32_LANES; l++)
    m = v[l] < m ? v[l] : m;
  return m;
}

/* The vector part's figures, merged into k->stats (ULP keys already flushed). */
static void pc_f32_finish(const pc_kernel_args *k, const pc_f32_state *st) {
  pc_stats f;
  memset(&f, 0, sizeof f);
  f.count = f.ulp_terms = f.finite_terms = st->count;
  f.mismatches = pc_lanes_u64(st->mism);
  f.max_abs = st->max_abs;
  f.max_rel = pc_lanes_max(st->max_rel);
  for (int l = 0; l < PC_F32_LANES; l++)
    f.max_ulp = st->max_ulp[l] > f.max_ulp ? st->max_ulp[l] : f.max_ulp;
  for (int l = 0; l < PC_F32_LANES; l++) {
    f.ulp_sum_lo += st->ulp_sum[l];
    f.ulp_sum_hi += f.ulp_sum_lo < st->ulp_sum[l]; /* carry out of the low word */
  }
  f.sum_abs = pc_lanes_sum(st->sabs);
  f.sum_rel = pc_lanes_sum(st->srel);
  f.sum_sq_a = pc_lanes_sum(st->ssa);
  f.sum_sq_b = pc_lanes_sum(st->ssb);
  f.sum_ab = pc_lanes_sum(st->sab);
  f.sum_sq_diff = pc_lanes_sum(st->ssd);
  f.sum_a_diff = pc_lanes_sum(st->sad);
  if (st->h_abs) {
    st->h_abs->count[0] += pc_lanes_u64(st->zero_abs);
    st->h_rel->count[0] += pc_lanes_u64(st->zero_rel);
  }
  if (st->h_abs && st->count) {
    pc_qhist_touch(st->h_abs, pc_qhist_bucket(pc_lanes_min(st->min_abs)),
                   pc_qhist_bucket(f.max_abs));
    pc_qhist_touch(st->h_rel, pc_qhist_bucket(pc_lanes_min(st->min_rel)),
                   pc_qhist_bucket(f.max_rel));
  }
  if (st->wcls >= 0)
    pc_set_worst(&f, st->wcls, st->widx, st->wa, st->wb, (double[]){st->wabs, st->wrel}, st->wulp);
  f.not_representable_a = st->inexact_a;
  f.not_representable_b = st->inexact_b;
  pc_stats_merge(k->stats, &f);
}

typedef size_t (*pc_f32_run_fn)(pc_f32_state *, const unsigned char *, const unsigned char *,
                                size_t, size_t);

/* The widest build of the vector part this machine can run (cpu.h). */
static pc_f32_run_fn pc_f32_runner(void) {
#ifdef PC_HAVE_AVX2
  static const pc_f32_run_fn build[] = {pc_f32_run_base, pc_f32_run_avx2, pc_f32_run_avx512};
  return build[pc_f32_widest()];
#else
  return pc_f32_run_base;
#endif
}

/* Pairs per vector run: keeps each local ULP count below 2^32 (kernel_f32.h). */
#define PC_F32_PIECE ((size_t)1 << 30)

/* pc_kernel_f32 (half false) and pc_kernel_f16 (half true). */
static void pc_kernel_lanes(const pc_kernel_args *k, const unsigned char *a, const unsigned char *b,
                            bool half, bool a_bf16, bool b_bf16) {
  pc_f32_run_fn run = pc_f32_runner();
  pc_acc c = pc_acc_init(k);
  uint64_t ulp_hist[PC_ULP_BUCKETS] = {0};
  pc_f32_state st_mem, *st = pc_f32_start(&st_mem, k, &c, half, a_bf16, b_bf16);
  pc_qhist *h_ulp = k->hist ? k->hist[PC_HIST_ULP] : NULL;
  for (size_t lo = 0; lo < k->n; lo += PC_F32_PIECE) {
    size_t hi = k->n - lo < PC_F32_PIECE ? k->n : lo + PC_F32_PIECE, i = lo;
    while (i < hi) {
      i = run(st, a, b, i, hi);
      size_t next = hi - i < PC_F32_GROUP ? hi : i + PC_F32_GROUP;
      pc_f32_scalar(k, &c, ulp_hist, st, a, b, i, next);
      i = next;
    }
    pc_f32_flush_ulps(st, h_ulp, ulp_hist);
  }
  pc_acc_finish(k, &c, ulp_hist);
  pc_f32_finish(k, st);
}

void pc_kernel_f32(const pc_kernel_args *k, const unsigned char *a, const unsigned char *b,
                   bool a_bf16, bool b_bf16) {
  pc_kernel_lanes(k, a, b, false, a_bf16, b_bf16);
}

void pc_kernel_f16(const pc_kernel_args *k, const unsigned char *a, const unsigned char *b) {
  pc_kernel_lanes(k, a, b, true, false, false);
}

void pc_kernel_float(const pc_kernel_args *k, const double *a, const double *b) {
  if (k->compare == PC_DTYPE_FLOAT32 || k->compare == PC_DTYPE_FLOAT64) {
    pc_fast_float(k, a, b, k->compare == PC_DTYPE_FLOAT64);
    return;
  }
  for (size_t i = 0; i < k->n; i++)
    pc_real_element(k, a[i], b[i], k->base + i);
}

void pc_kernel_identical(const pc_kernel_args *k, const double *a) {
  pc_stats *s = k->stats;
  /* Every pair is equal, so the worst is the first (abs 0, ties to the lower index). */
  if (k->n && !s->has_worst) {
    s->has_worst = true;
    s->worst_class = PC_CLASS_PASS;
    s->worst_index = k->base;
    s->worst_a[0] = s->worst_b[0] = a[0];
  }
  for (size_t i = 0; i < k->n; i++) {
    if (isfinite(a[i])) {
      double sq = a[i] * a[i];
      s->finite_terms++;
      s->sum_sq_a += sq;
      s->sum_sq_b += sq;
      s->sum_ab += sq;
    }
  }
  s->count += k->n;
  s->ulp_terms += k->n;
  s->ulp_hist[0] += k->n;
  if (k->hist)
    for (int h = 0; h < PC_NHISTS; h++)
      pc_qhist_add_zeros(k->hist[h], k->n);
}

static double pc_int_to_double(int64_t v, bool u64) {
  return u64 ? (double)(uint64_t)v : (double)v;
}

static void pc_mixed_element(const pc_kernel_args *k, double f, int64_t v, bool u64, bool int_is_a,
                             uint64_t idx);

/* One side integers, the other floats: pc_mixed_element (below, with the integers' helpers). */
void pc_kernel_mixed(const pc_kernel_args *k, const double *a_vals, const int64_t *a_ints,
                     bool a_u64, const double *b_vals, const int64_t *b_ints, bool b_u64) {
  for (size_t i = 0; i < k->n; i++)
    if (a_vals)
      pc_mixed_element(k, a_vals[i], b_ints[i], b_u64, false, k->base + i);
    else
      pc_mixed_element(k, b_vals[i], a_ints[i], a_u64, true, k->base + i);
}

/* An integer as sign and magnitude, so that int64 and uint64 values compare exactly. */
typedef struct pc_sm {
  bool neg;
  uint64_t mag;
} pc_sm;

static pc_sm pc_to_sm(int64_t v, bool u64) {
  pc_sm s = {!u64 && v < 0, (uint64_t)v};
  if (s.neg)
    s.mag = (uint64_t)0 - (uint64_t)v; /* |INT64_MIN| fits in uint64 */
  return s;
}

static double pc_sm_double(pc_sm s) {
  return s.neg ? -(double)s.mag : (double)s.mag;
}

/* |b - a| exactly, saturating at UINT64_MAX (only int64 min vs uint64 max and the like). */
static uint64_t pc_sm_distance(pc_sm a, pc_sm b) {
  if (a.neg == b.neg)
    return a.mag > b.mag ? a.mag - b.mag : b.mag - a.mag;
  return a.mag > UINT64_MAX - b.mag ? UINT64_MAX : a.mag + b.mag;
}

/* The worst pair's exact values, which worst_a and worst_b round beyond 2^53. */
static void pc_set_worst_int(pc_stats *s, pc_sm a, pc_sm b) {
  s->worst_is_int = true;
  s->worst_int_neg[0] = a.neg;
  s->worst_int_mag[0] = a.mag;
  s->worst_int_neg[1] = b.neg;
  s->worst_int_mag[1] = b.mag;
}

/* |f - i| for a finite double f and an integer i, zero only when they are equal: i is split
 * into its bits above the lowest 11 (at most 53 significant bits) and those 11, each exact in
 * double, so that int64 2^53 + 1 is not taken for float64 2^53, as i rounded to double would
 * be. f - hi is exact when they are within a factor of two (Sterbenz), and far larger than the
 * low part otherwise. */
static double pc_mixed_distance(double f, pc_sm i) {
  uint64_t low = i.mag & 0x7FF;
  double hi = (double)(i.mag - low), lo = (double)low;
  return i.neg ? fabs((f + hi) + lo) : fabs((f - hi) - lo);
}

/* An integer v against a float f (docs/metrics.md, "Per element"): a non-finite f is judged
 * as floats are; else equal only when f is that integer exactly, with abs = |f - v| from
 * pc_mixed_distance; ulp as for floats, from v rounded to the compare dtype. */
static void pc_mixed_element(const pc_kernel_args *k, double f, int64_t v, bool u64, bool int_is_a,
                             uint64_t idx) {
  pc_sm i = pc_to_sm(v, u64);
  double id = pc_sm_double(i), a = int_is_a ? id : f, b = int_is_a ? f : id;
  if (!isfinite(f)) {
    pc_real_element(k, a, b, idx);
    return;
  }
  const double av[2] = {a, 0}, bv[2] = {b, 0};
  pc_elem e = {0, 0, 0, false, false, false};
  e.abs = pc_mixed_distance(f, i);
  e.equal = e.abs == 0;
  e.rel = pc_rel(e.abs, fabs(a));
  e.ulp = pc_ulp_distance(a, b, k->compare);
  pc_fold(k, &e, idx, av, bv, fabs(a));
}

void pc_kernel_int(const pc_kernel_args *k, const int64_t *a, bool a_u64, const int64_t *b,
                   bool b_u64) {
  for (size_t i = 0; i < k->n; i++) {
    pc_sm sa = pc_to_sm(a[i], a_u64), sb = pc_to_sm(b[i], b_u64);
    const double av[2] = {pc_sm_double(sa), 0}, bv[2] = {pc_sm_double(sb), 0};
    pc_elem e = {0, 0, 0, false, false, false};
    e.ulp = pc_sm_distance(sa, sb);
    e.equal = e.ulp == 0;
    /* Opposite signs: the magnitudes add; in double that sum is the rounded exact distance. */
    e.abs = sa.neg == sb.neg ? (double)e.ulp : (double)sa.mag + (double)sb.mag;
    e.rel = pc_rel(e.abs, fabs(av[0]));
    if (pc_fold(k, &e, k->base + i, av, bv, fabs(av[0])))
      pc_set_worst_int(k->stats, sa, sb);
  }
}

/* One component of a complex pair: its difference (0 when equal, so matching infinities add
 * nothing) and whether it is an unmatched inf. */
static double pc_component_diff(double a, double b, bool *inf_mis) {
  if (a == b)
    return 0;
  if (isinf(a) || isinf(b))
    *inf_mis = true;
  return b - a;
}

/* The modulus of a's finite components: the scale that rel and the rtol test judge the error
 * by. An inf that both sides match adds nothing to abs (pc_component_diff), and must not make
 * the other component's error relative to an infinite |a| (inf+0j vs inf+1j: rel 0, passing
 * any rtol); without it, that error is judged against what is left. */
static double pc_finite_modulus(const double *a) {
  return hypot(isinf(a[0]) ? 0 : a[0], isinf(a[1]) ? 0 : a[1]);
}

static pc_elem pc_measure_complex(const double *a, const double *b, pc_dtype dt) {
  pc_elem e = {0, 0, 0, false, false, false};
  bool na = isnan(a[0]) || isnan(a[1]), nb = isnan(b[0]) || isnan(b[1]);
  if (na || nb) {
    e.equal = na && nb;
    e.nan_mis = !e.equal;
    e.abs = e.rel = e.nan_mis ? NAN : 0; /* reported for the worst element only */
    return e;
  }
  double dr = pc_component_diff(a[0], b[0], &e.inf_mis);
  double di = pc_component_diff(a[1], b[1], &e.inf_mis);
  e.equal = dr == 0 && di == 0;
  e.abs = e.inf_mis ? INFINITY : hypot(dr, di);
  e.rel = e.inf_mis ? INFINITY : pc_rel(e.abs, pc_finite_modulus(a));
  uint64_t ur = pc_ulp_distance(a[0], b[0], dt), ui = pc_ulp_distance(a[1], b[1], dt);
  e.ulp = ur > ui ? ur : ui;
  return e;
}

void pc_kernel_complex(const pc_kernel_args *k, const double *a, const double *b) {
  for (size_t i = 0; i < k->n; i++) {
    const double *ai = &a[2 * i], *bi = &b[2 * i];
    pc_elem e = pc_measure_complex(ai, bi, k->compare);
    pc_fold(k, &e, k->base + i, ai, bi, pc_finite_modulus(ai));
  }
}

uint64_t pc_kernel_unrepresentable(const double *v, size_t n, pc_dtype dt) {
  uint64_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += !pc_dtype_representable(v[i], dt);
  return bad;
}

static void pc_magnitude_add(pc_magnitude *m, double v) {
  if (!isfinite(v))
    return;
  double x = fabs(v);
  m->max_abs = x > m->max_abs ? x : m->max_abs;
  m->sum_squares += x * x;
  m->count++;
}

void pc_kernel_magnitude(pc_magnitude *m, bool is_complex, const double *vals, const int64_t *ints,
                         bool u64, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (is_complex)
      pc_magnitude_add(m, hypot(vals[2 * i], vals[2 * i + 1]));
    else
      pc_magnitude_add(m, vals ? vals[i] : pc_int_to_double(ints[i], u64));
  }
}
