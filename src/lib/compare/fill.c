/* Runs of fill pairs (fill.h): one element through the kernels, then scaled to the run. */
#include "fill.h"
#include "evidence.h"
#include "qhist.h"

#include <string.h> /* memset */

bool pc_fill_pair(const pc_dataset *a, const pc_dataset *b) {
  return a->all_fill && b->all_fill;
}

/* The fill value of d decoded as one element of a read block. */
static void pc_fill_decode(const pc_dataset *d, double vals[2], int64_t *ints) {
  vals[0] = vals[1] = 0;
  *ints = 0;
  pc_dataset_decode(d, d->fill, 1, vals, ints);
}

/* One element pair, dispatched to the kernel that stream.c would fold a block of them with. */
static void pc_fill_fold(const pc_kernel_args *k, const pc_dataset *a, const pc_dataset *b) {
  double va[2], vb[2];
  int64_t ia, ib;
  bool ua = a->stored == PC_DTYPE_UINT64, ub = b->stored == PC_DTYPE_UINT64;
  pc_fill_decode(a, va, &ia);
  pc_fill_decode(b, vb, &ib);
  if (a->kind == PC_KIND_COMPLEX)
    pc_kernel_complex(k, va, vb);
  else if (a->kind == PC_KIND_INTEGER && b->kind == PC_KIND_INTEGER)
    pc_kernel_int(k, &ia, ua, &ib, ub);
  else if (a->kind == PC_KIND_FLOAT && b->kind == PC_KIND_FLOAT) {
    const pc_slicing at = {k->base, 0, 0}; /* the signature's sample is by index */
    pc_kernel_float(k, va, vb);
    pc_evidence_add_f64(k->stats, va, vb, 1, &at, k->compare != PC_DTYPE_FLOAT64);
  } else
    pc_kernel_mixed(k, a->kind == PC_KIND_INTEGER ? NULL : va, &ia, ua,
                    b->kind == PC_KIND_INTEGER ? NULL : vb, &ib, ub);
  if (a->logical != a->stored)
    k->stats->not_representable_a += pc_kernel_unrepresentable(va, 1, a->logical);
  if (b->logical != b->stored)
    k->stats->not_representable_b += pc_kernel_unrepresentable(vb, 1, b->logical);
}

/* hi:lo = x * n, exactly (schoolbook multiplication on 32-bit halves). */
static void pc_mul_128(uint64_t x, uint64_t n, uint64_t *hi, uint64_t *lo) {
  const uint64_t mask = UINT32_MAX;
  uint64_t x0 = x & mask, x1 = x >> 32, n0 = n & mask, n1 = n >> 32;
  uint64_t p00 = x0 * n0, p01 = x0 * n1, p10 = x1 * n0, p11 = x1 * n1;
  uint64_t mid = (p00 >> 32) + (p01 & mask) + (p10 & mask);
  *lo = (p00 & mask) | (mid << 32);
  *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* s = n copies of the one element folded into `one` (count 1), worst included; the run starts
 * at row-major index `base`. */
static void pc_stats_times(pc_stats *s, const pc_stats *one, uint64_t n, uint64_t base) {
  *s = *one;
  s->count = one->count * n;
  s->mismatches = one->mismatches * n;
  s->nan_mismatches = one->nan_mismatches * n;
  s->inf_mismatches = one->inf_mismatches * n;
  s->not_representable_a = one->not_representable_a * n;
  s->not_representable_b = one->not_representable_b * n;
  pc_mul_128(one->ulp_sum_lo, n, &s->ulp_sum_hi, &s->ulp_sum_lo);
  s->ulp_terms = one->ulp_terms * n;
  s->finite_terms = one->finite_terms * n;
  s->sum_sq_a = one->sum_sq_a * (double)n;
  s->sum_sq_b = one->sum_sq_b * (double)n;
  s->sum_ab = one->sum_ab * (double)n;
  s->sum_sq_diff = one->sum_sq_diff * (double)n;
  s->sum_a_diff = one->sum_a_diff * (double)n;
  s->sum_abs = one->sum_abs * (double)n;
  s->sum_rel = one->sum_rel * (double)n;
  for (int i = 0; i < PC_ULP_BUCKETS; i++)
    s->ulp_hist[i] = one->ulp_hist[i] * n;
  pc_evidence_times(&s->ev, n, base);
}

void pc_fill_run(const pc_kernel_args *k, const pc_dataset *a, const pc_dataset *b, uint64_t n) {
  if (n == 0)
    return;
  pc_stats one, run;
  memset(&one, 0, sizeof one);
  pc_kernel_args k1 = {&one, NULL, k->tol, k->compare, k->base, 1};
  pc_fill_fold(&k1, a, b);
  pc_stats_times(&run, &one, n, k->base);
  pc_stats_merge(k->stats, &run);
  /* One element is its own worst: worst_* are its abs, rel and ulp. The quantile histograms
   * hold the elements of the ulp sum (all but nan mismatches). */
  if (k->hist && one.ulp_terms) {
    pc_qhist_add_n(k->hist[PC_HIST_ABS], one.worst_abs, n);
    pc_qhist_add_n(k->hist[PC_HIST_REL], one.worst_rel, n);
    pc_qhist_add_n(k->hist[PC_HIST_ULP], (double)one.worst_ulp, n);
  }
}

int pc_fill_compare(pc_tensor *t, const pc_dataset *a, const pc_dataset *b, bool quantiles) {
  pc_qhist *h[PC_NHISTS] = {NULL};
  if (quantiles && pc_hists_new(h) < 0) {
    pc_hists_free(h);
    return PC_ENOMEM;
  }
  memset(&t->stats, 0, sizeof t->stats);
  pc_kernel_args k = {&t->stats, quantiles ? h : NULL, &t->tol, t->compare, 0, 0};
  pc_fill_run(&k, a, b, a->count);
  if (quantiles)
    pc_stats_quantiles(&t->stats, h);
  pc_hists_free(h);
  return quantiles && !t->stats.has_quantiles ? PC_ENOMEM : PC_OK; /* only allocations fail */
}

void pc_fill_magnitude(const pc_dataset *d, uint64_t n, pc_magnitude *m) {
  double v[2];
  int64_t i;
  pc_magnitude one = {0, 0, 0};
  if (n == 0)
    return;
  pc_fill_decode(d, v, &i);
  pc_kernel_magnitude(&one, d->kind == PC_KIND_COMPLEX, d->kind == PC_KIND_INTEGER ? NULL : v, &i,
                      d->stored == PC_DTYPE_UINT64, 1);
  m->max_abs = one.max_abs > m->max_abs ? one.max_abs : m->max_abs;
  m->sum_squares += one.sum_squares * (double)n;
  m->count += one.count * n;
}
