/* Element kernels (kernel.h). Each element is classified, measured and judged by the rules of
 * docs/metrics.md; the figures are folded into pc_stats with exact counts, maxima and a 128-bit
 * ulp sum, so the result is independent of block boundaries. */
#include "kernel.h"
#include "loader.h" /* PC_KIND_COMPLEX */

#include <math.h> /* fabs, hypot, isinf, isnan, ldexp, INFINITY */

/* Ranks of an element for the choice of the worst one (docs/metrics.md, "worst"). */
enum { PC_CLASS_PASS = 0, PC_CLASS_MISMATCH = 1, PC_CLASS_NONFINITE = 2 };

/* The figures of one element. */
typedef struct pc_elem {
  double abs, rel;
  uint64_t ulp;
  bool equal;   /* equal in the sense of docs/metrics.md: passes whatever the tolerance */
  bool nan_mis; /* NaN on one side only */
  bool inf_mis; /* an inf the other side does not match */
} pc_elem;

double pc_stats_mean_ulp(const pc_stats *s) {
  if (s->ulp_terms == 0)
    return 0;
  return (ldexp((double)s->ulp_sum_hi, 64) + (double)s->ulp_sum_lo) / (double)s->ulp_terms;
}

static bool pc_tol_passes(const pc_tol *t, const pc_elem *e, double abs_a) {
  if (e->equal)
    return true;
  if (e->nan_mis || e->inf_mis)
    return false;
  return ((t->set & PC_TOL_ATOL) && e->abs <= t->atol) ||
         ((t->set & PC_TOL_RTOL) && e->abs <= t->rtol * abs_a) ||
         ((t->set & PC_TOL_MAX_ULP) && e->ulp <= t->max_ulp);
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
static int pc_ulp_bucket(uint64_t ulp) {
  int k = 0;
  while (ulp) {
    ulp >>= 1;
    k++;
  }
  return k;
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
}

static void pc_fold(const pc_kernel_args *k, const pc_elem *e, uint64_t idx, const double a[2],
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
  }
  pc_fold_sums(s, a, b);
  int cls = (e->nan_mis || e->inf_mis) ? PC_CLASS_NONFINITE
            : pass                     ? PC_CLASS_PASS
                                       : PC_CLASS_MISMATCH;
  if (!pc_worse(s, cls, e->abs))
    return;
  s->has_worst = true;
  s->worst_class = cls;
  s->worst_index = idx;
  s->worst_a[0] = a[0];
  s->worst_a[1] = a[1];
  s->worst_b[0] = b[0];
  s->worst_b[1] = b[1];
  s->worst_abs = e->abs;
  s->worst_rel = e->rel;
  s->worst_ulp = e->ulp;
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

void pc_kernel_float(const pc_kernel_args *k, const double *a, const double *b) {
  for (size_t i = 0; i < k->n; i++)
    pc_real_element(k, a[i], b[i], k->base + i);
}

static double pc_int_to_double(int64_t v, bool u64) {
  return u64 ? (double)(uint64_t)v : (double)v;
}

void pc_kernel_mixed(const pc_kernel_args *k, const double *a_vals, const int64_t *a_ints,
                     bool a_u64, const double *b_vals, const int64_t *b_ints, bool b_u64) {
  for (size_t i = 0; i < k->n; i++) {
    double a = a_vals ? a_vals[i] : pc_int_to_double(a_ints[i], a_u64);
    double b = b_vals ? b_vals[i] : pc_int_to_double(b_ints[i], b_u64);
    pc_real_element(k, a, b, k->base + i);
  }
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
    pc_fold(k, &e, k->base + i, av, bv, fabs(av[0]));
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
  e.rel = e.inf_mis ? INFINITY : pc_rel(e.abs, hypot(a[0], a[1]));
  uint64_t ur = pc_ulp_distance(a[0], b[0], dt), ui = pc_ulp_distance(a[1], b[1], dt);
  e.ulp = ur > ui ? ur : ui;
  return e;
}

void pc_kernel_complex(const pc_kernel_args *k, const double *a, const double *b) {
  for (size_t i = 0; i < k->n; i++) {
    const double *ai = &a[2 * i], *bi = &b[2 * i];
    pc_elem e = pc_measure_complex(ai, bi, k->compare);
    pc_fold(k, &e, k->base + i, ai, bi, hypot(ai[0], ai[1]));
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

void pc_kernel_magnitude(pc_magnitude *m, int kind, const double *vals, const int64_t *ints,
                         bool u64, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (kind == PC_KIND_COMPLEX)
      pc_magnitude_add(m, hypot(vals[2 * i], vals[2 * i + 1]));
    else
      pc_magnitude_add(m, vals ? vals[i] : pc_int_to_double(ints[i], u64));
  }
}
