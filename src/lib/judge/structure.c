/* Structure and diagnosis (structure.h). Every threshold is a rounding bound or a tail
 * probability of the honest model (docs/tolerance-model.md, "Structure"), never a figure fitted
 * to dumps. */
#include "structure.h"

#include <gsl/gsl_cdf.h>   /* gsl_cdf_beta_Q, gsl_cdf_chisq_Qinv, gsl_cdf_fdist_Qinv */
#include <gsl/gsl_errno.h> /* gsl_set_error_handler_off */

#include <float.h>  /* DBL_MIN */
#include <math.h>   /* fabs, sqrt, log10 */
#include <stdio.h>  /* snprintf */
#include <string.h> /* memset */

/* The probability with which a test may call honest rounding noise structure: each tensor
 * runs a handful of tests, and a run holds up to a few hundred thousand tensors. */
static const double PC_FALSE_ALARM = 1e-6;

/* An error of half a value's magnitude leaves it no significant digit (EVIDENCE.md): beyond it
 * a clean factor is not rounding, and a noise-like error cannot be judged at all. */
static const double PC_NO_DIGITS = 0.5;

/* The share of the error along A that makes B "c A" before any other reading: the residual at
 * most half the factor. B unrelated to A (a shuffle) has c near 0 with half the error off A, so
 * a factor with less than this share is tried last, after the permutation, and must hold the
 * greater part of the error (PC_FACTOR_SHARE). */
static const double PC_CLEAN_FACTOR = 0.8;
static const double PC_FACTOR_SHARE = 0.5;

/* A lone zeroed element is a bug when its value is this many times the largest error of every
 * other element, at least PC_LONE_MIN_OTHERS of them: its own honest error would have to stand a
 * decade above all others and land on 0 exactly (with fewer others, their largest error says
 * too little of the error's spread: a BatchNorm bias gradient of 16 elements). A lone flip is
 * never evidence (pc_crossing). */
static const double PC_LONE_ZERO = 10;
enum { PC_LONE_MIN_OTHERS = 32 };

/* Zeros where A has none count at a mean a^2 of this share of A's mean square (a quarter of
 * A's RMS): exact zeros that rounding makes, from two nearly equal values rounded alike, lie an
 * order of magnitude or more below the tensor's RMS. */
static const double PC_ZERO_SIZE = 1.0 / 16;

/* Sign flips on this share of the elements or more are a permutation's (random signs), not a
 * negated part: they are left to the permutation test. */
static const double PC_FLIPS_PART = 0.4;

/* Pairs a shift test needs: below 64, two sums of squares of that many noise terms differ by a
 * factor of 4 too often (an F(64, 64) variable is below 1/4 with probability about 1e-7). */
enum { PC_SHIFT_MIN_PAIRS = 64 };

/* The shift test's bound on the shifted over the unshifted distance: a quarter. An F(p, p)
 * variable lies below it with probability at most PC_FALSE_ALARM for every p from 52 on, so from
 * PC_SHIFT_MIN_PAIRS on the F law's lower quantile never binds and the quarter is the whole
 * limit (tests/unit/test_judge.c, test_shift_limit, checks this against GSL). Inverting the F
 * law per tensor cost about 25 us a tensor, the largest part of judging a small one. */
static const double PC_SHIFT_LIMIT = 0.25;

/* The largest elements the beta law is evaluated for: beyond it the law is so narrow that the
 * clamp only makes the test more lenient. */
static const double PC_BETA_N_MAX = 1e6;

static const char *const pc_diag_names[PC_DIAG_COUNT_] = {
    "none",   "nan_injected", "inf_injected", "zeroed",  "constant", "partly_zeroed",
    "scaled", "negated",      "sign_flips",   "shifted", "permuted", "rounded",
    "slice",  "noise",        "no_digits",    "beyond",  "localized"};

const char *pc_diagnosis_name(pc_diagnosis_kind k) {
  return (unsigned)k < PC_DIAG_COUNT_ ? pc_diag_names[k] : "unknown";
}

static const char *const pc_round_names[3] = {"bfloat16", "float16", "tf32"};

const char *pc_diagnosis_text(const pc_diagnosis *d, char *buf, size_t cap) {
  double v = d->value;
  switch (d->kind) {
  case PC_DIAG_NAN_INJECTED:
    snprintf(buf, cap, "NaN injected (%.0f elements)", v);
    break;
  case PC_DIAG_INF_INJECTED:
    snprintf(buf, cap, "inf where A is finite, or the reverse (%.0f elements)", v);
    break;
  case PC_DIAG_ZEROED:
    snprintf(buf, cap, "zeroed");
    break;
  case PC_DIAG_CONSTANT:
    snprintf(buf, cap, "constant (every element %.6g)", v);
    break;
  case PC_DIAG_PARTLY_ZEROED:
    snprintf(buf, cap, "%.1f %% of elements zeroed", 100 * v);
    break;
  case PC_DIAG_SCALED:
    snprintf(buf, cap, "scaled by %.3f", v);
    break;
  case PC_DIAG_NEGATED:
    snprintf(buf, cap, "negated (scaled by %.3f)", v);
    break;
  case PC_DIAG_SIGN_FLIPS:
    snprintf(buf, cap, "%.1f %% of elements changed sign", 100 * v);
    break;
  case PC_DIAG_SHIFTED:
    snprintf(buf, cap, "shifted by %+.0f along the last axis (row-major order)", v);
    break;
  case PC_DIAG_PERMUTED:
    snprintf(buf, cap, "same values, permuted (rel_rms %.3g)", v);
    break;
  case PC_DIAG_ROUNDED:
    snprintf(buf, cap, "looks like A rounded to %s (%.0f %% of elements)",
             pc_round_names[d->axis >= 0 && d->axis < 3 ? d->axis : 0], 100 * v);
    break;
  case PC_DIAG_SLICE:
    if (d->axis > 1)
      snprintf(buf, cap, "only slices %.0f to %.0f of axis 0 differ (%.0f %% of the error)", v,
               v + d->axis - 1, 100 * d->statistic);
    else
      snprintf(buf, cap, "only slice %.0f of axis 0 differs (%.0f %% of the error)", v,
               100 * d->statistic);
    break;
  case PC_DIAG_NOISE:
    snprintf(buf, cap,
             d->axis ? "noise-like, no pattern proven (rel_rms %.3g); a reference run "
                       "(--reference) or an envelope (--envelope) can decide"
                     : "noise-like, no pattern proven (rel_rms %.3g)",
             v);
    break;
  case PC_DIAG_NO_DIGITS:
    snprintf(buf, cap,
             "no significant digit left: the honest %s is %.3g of the value's size, so a bug "
             "and honest drift look alike here",
             d->axis == 2 ? "spread measured by the envelope" : "allowance", v);
    break;
  case PC_DIAG_BEYOND:
    if (d->axis == 4)
      snprintf(buf, cap,
               "B's typical element moved: %.3g %% of the elements beyond %.3g, the members' "
               "median error times its honest factor, no pattern proven",
               100 * v, d->statistic);
    else if (d->axis == 3)
      snprintf(buf, cap,
               "B's scale on A is off by %.3g, %.3g x its honest envelope (it passes within "
               "%.3g x), no pattern proven",
               d->statistic, v, d->limit);
    else if (d->axis == 2)
      snprintf(buf, cap, "%.3g x the honest envelope (it passes within %.3g x), no pattern proven",
               v, d->limit);
    else
      snprintf(
          buf, cap, "%.3g x the honest bound (rel_rms %.3g, allowed %.3g), no pattern proven%s", v,
          d->statistic, d->limit,
          d->axis ? "; a reference run (--reference) or an envelope (--envelope) can decide" : "");
    break;
  case PC_DIAG_LOCALIZED:
    snprintf(buf, cap,
             "localized: %.0f elements beyond their own envelope (the worst %.3g x its bound, "
             "honest within %.3g x)",
             v, d->statistic, d->limit);
    break;
  default:
    snprintf(buf, cap, "none");
  }
  return buf;
}

double pc_rms_ratio_bound(uint64_t n) {
  double m = n < 2 ? 2 : n > 4096 ? 4096 : (double)n;
  gsl_set_error_handler_off();
  return sqrt(gsl_cdf_fdist_Qinv(PC_FALSE_ALARM, m, m));
}

bool pc_diagnosis_exact(pc_diagnosis_kind k) {
  return k == PC_DIAG_NAN_INJECTED || k == PC_DIAG_INF_INJECTED || k == PC_DIAG_ZEROED ||
         k == PC_DIAG_CONSTANT || k == PC_DIAG_SHIFTED;
}

static bool pc_found(pc_diagnosis *d, pc_diagnosis_kind kind, double value, double statistic,
                     double limit) {
  *d = (pc_diagnosis){kind, true, 0, value, statistic, limit};
  return true;
}

/* B = c A + residual, with c = 1 + scale_error: a factor when the residual holds too little of
 * the error for isotropic noise (beta law of the squared cosine between the error and A, with
 * N - 1 other directions), the factor leaves at most one significant bit (a quarter off, half of
 * PC_NO_DIGITS: an honest error this large would keep no digit either), and at least min_share
 * of the error energy lies along A. */
static bool pc_scale_test(const pc_stats *s, double min_share, double min_factor, pc_diagnosis *d) {
  if (s->ev.pairs < 2 || !(s->sum_sq_a > 0) || !(s->sum_sq_diff > 0))
    return false;
  double c = s->sum_a_diff / s->sum_sq_a;
  double cos2 = c * c * s->sum_sq_a / s->sum_sq_diff; /* share of the error along A */
  cos2 = cos2 > 1 ? 1 : cos2;
  double n = (double)s->ev.pairs < PC_BETA_N_MAX ? (double)s->ev.pairs : PC_BETA_N_MAX;
  double p = gsl_cdf_beta_Q(cos2, 0.5, (n - 1) / 2);
  if (!(fabs(c) >= min_factor) || !(cos2 >= min_share) || !(p < PC_FALSE_ALARM))
    return false;
  bool negated = fabs(c + 2) < 0.1; /* B = -A: 1 + c near -1 */
  /* The tail probability as -log10 p against -log10 PC_FALSE_ALARM: a bug when above. */
  pc_found(d, negated ? PC_DIAG_NEGATED : PC_DIAG_SCALED, 1 + c, -log10(fmax(p, DBL_MIN)),
           -log10(PC_FALSE_ALARM));
  return true;
}

bool pc_scale_dominates(const pc_tensor *t) {
  pc_diagnosis d;
  return pc_scale_test(&t->stats, PC_FACTOR_SHARE, 0, &d);
}

/* B[i] = A[i - s]: under honest noise, the shifted distance is the unshifted one plus A's own
 * variation, never a quarter of it (F law of two sums of `pairs` squares). */
static bool pc_shift_test(const pc_evidence *e, pc_diagnosis *d) {
  static const double shift[PC_NSHIFTS] = {1, -1};
  for (int k = 0; k < PC_NSHIFTS; k++) {
    uint64_t p = e->shift_pairs[k];
    if (p < PC_SHIFT_MIN_PAIRS || 4 * p < e->pairs || !(e->shift_base_sq[k] > 0))
      continue;
    double ratio = e->shift_sq[k] / e->shift_base_sq[k];
    if (ratio < PC_SHIFT_LIMIT) { /* reported as unshifted over shifted distance: a bug above */
      pc_found(d, PC_DIAG_SHIFTED, shift[k], 1 / ratio, 1 / PC_SHIFT_LIMIT);
      d->axis = -1;
      return true;
    }
  }
  return false;
}

/* A permutation's distance: B with A's energy and rel_rms^2 = 2 (1 - cos(A, B)) is no closer
 * to A than to an unrelated tensor of that energy (cos <= 1/2) from rel_rms 1 on. Between
 * PC_NO_DIGITS and this, an honest B without digits keeps A's energy too (a BatchNorm's
 * gradient, renormalised): there the tensor is indeterminate, not a permutation. */
static const double PC_UNRELATED = 1;

/* The same values in other places: B no closer to A than to an unrelated tensor, yet B's energy
 * and mean magnitude are A's, where independent noise of that size would add its energy to
 * B's. */
static bool pc_permutation_test(const pc_stats *s, double rel_rms, pc_diagnosis *d) {
  const pc_evidence *e = &s->ev;
  if (e->pairs < PC_SHIFT_MIN_PAIRS || !(rel_rms >= PC_UNRELATED) || !(e->sum_abs_a > 0))
    return false;
  double energy = (s->sum_sq_b - s->sum_sq_a) / s->sum_sq_diff;
  double mag = e->sum_abs_b / e->sum_abs_a - 1;
  if (!(fabs(energy) <= 0.25) || !(fabs(mag) <= 0.1))
    return false;
  /* The error's energy over the energy it changes: a bug when above 4 (noise adds its own). */
  return pc_found(d, PC_DIAG_PERMUTED, rel_rms, 1 / fabs(energy), 4);
}

/* The honest error around crossing elements (zeroed or flipped, below): the largest |b - a|
 * met, squared, the mean squared error, both at least the rounding of A's RMS at u (a tensor
 * whose other elements agree bit for bit still rounds), and how many elements they come from. */
typedef struct pc_hood {
  double top2, var;
  uint64_t others;
} pc_hood;

static pc_hood pc_hood_of(uint64_t n, double sq, double max, double floor) {
  return (pc_hood){fmax(max * max, floor), n ? fmax(sq / (double)n, floor) : floor, n};
}

/* The tensor's rest pairs, with the mean squared error of the noisiest group of slices of the
 * leading axis when it is larger: honest error follows the conditioning of its slice, and the
 * crossing elements may all lie in the worst one (one output channel of a weight gradient whose
 * BatchNorm cancels). */
static pc_hood pc_tensor_hood(const pc_evidence *e, double floor) {
  pc_hood h = pc_hood_of(e->rest, e->rest_sq, e->rest_max, floor);
  for (int g = 0; g < PC_SLICE_GROUPS; g++)
    if (e->slice_rest[g] >= 2)
      h.var = fmax(h.var, e->slice_rest_sq[g] / (double)e->slice_rest[g]);
  return h;
}

/* Zeroed or sign-flipped elements of real size. Rounding zeroes or flips an element only where
 * its error reaches its value, |a| <= |b - a|, so those elements are small beside the honest
 * errors around them: each within the largest error met there, whatever the errors'
 * distribution, and together within that error plus the chi-square bound on n squares of the
 * noise. A bug that zeroes or negates elements whatever their value takes them at A's typical
 * size. So n >= 2 such elements of energy `sq` are a bug when their mean square is beyond the
 * largest honest error's square by the chi-square tail of one element, or when it is a quarter
 * of A's mean square (half its RMS: typical elements, not the near-zero ones rounding moves) and
 * `sq` is beyond that bound; alpha: the false-alarm probability of the test. One element alone
 * is evidence only when zeroed (PC_LONE_ZERO): a flip's own error may be the one outlier of the
 * tensor (a channel whose BatchNorm gradient cancels, a ReLU mask that flips). `share`: the
 * diagnosis' value. */
static bool pc_crossing(pc_diagnosis_kind kind, uint64_t n, double sq, double share, pc_hood h,
                        double alpha, double rms_a, pc_diagnosis *d) {
  bool lone = n == 1 && kind == PC_DIAG_PARTLY_ZEROED && h.others >= PC_LONE_MIN_OTHERS;
  if (n < 2 && !lone)
    return false;
  double mean = sq / (double)n;
  double q = lone ? PC_LONE_ZERO * PC_LONE_ZERO : gsl_cdf_chisq_Qinv(alpha, 1);
  if (mean > q * h.top2) /* reported as the mean square against its bound */
    return pc_found(d, kind, share, mean, q * h.top2);
  if (lone)
    return false;
  double limit = h.top2 + h.var * gsl_cdf_chisq_Qinv(alpha, (double)n);
  return mean >= 0.25 * rms_a * rms_a && sq > limit && pc_found(d, kind, share, sq, limit);
}

/* Zeroed elements, over the tensor and group by group: a bug zeroes elements in every slice
 * alike, while honest zeros gather where their slice's own error is large, so each group's zeros
 * are also weighed against that group's error alone (each group at alpha / PC_SLICE_GROUPS). */
static bool pc_zeroed_test(const pc_evidence *e, bool small_zeros, double floor, double rms_a,
                           pc_diagnosis *d) {
  uint64_t nz = e->zeroed + (small_zeros ? e->zeroed_small : 0);
  double sq = e->zeroed_sq + (small_zeros ? e->zeroed_small_sq : 0);
  double share = (double)nz / (double)e->pairs;
  if (pc_crossing(PC_DIAG_PARTLY_ZEROED, nz, sq, share, pc_tensor_hood(e, floor), PC_FALSE_ALARM,
                  rms_a, d))
    return true;
  /* Zeros of real size (PC_ZERO_SIZE) where A has none, one or more. Rounding reaches 0
   * exactly only through an operation that outputs it (a ReLU, a mask), whose zeros A shares,
   * or at values far below the tensor's size (two nearly equal values rounded alike); this holds
   * however large the honest error elsewhere, where the chi-square bounds above lose their
   * power (a gradient of 96 elements 27 % off under bf16; a channel of a 16-element BatchNorm
   * gradient zeroed under tf32). */
  if (nz >= 1 && e->zeros_a == 0 && sq / (double)nz >= PC_ZERO_SIZE * rms_a * rms_a)
    return pc_found(d, PC_DIAG_PARTLY_ZEROED, share, sq / (double)nz / (rms_a * rms_a),
                    PC_ZERO_SIZE);
  for (int g = 0; g < PC_SLICE_GROUPS; g++) {
    pc_hood h = pc_hood_of(e->slice_rest[g], e->slice_rest_sq[g], e->slice_rest_max[g], floor);
    if (e->slice_zeroed[g] >= 2 &&
        pc_crossing(PC_DIAG_PARTLY_ZEROED, e->slice_zeroed[g], e->slice_zeroed_sq[g], share, h,
                    PC_FALSE_ALARM / PC_SLICE_GROUPS, rms_a, d))
      return true;
  }
  return false;
}

/* Sign flips of real size that are negations, b = -a up to the noise: the sum of (a + b)^2 over
 * them within the chi-square bound of as many noise terms of the tensor's rest. A bug that
 * negates keeps every such residual at the element's own rounding; an honest flip is an outlier
 * error of any size, which lands on -a only by chance. Flips on PC_FLIPS_PART of the elements or
 * more are left to the permutation test. */
static bool pc_flips_test(const pc_evidence *e, double floor, double rms_a, pc_diagnosis *d) {
  uint64_t n = e->flipped;
  if (n < 2 || !((double)n < PC_FLIPS_PART * (double)e->pairs))
    return false;
  double var = pc_hood_of(e->rest, e->rest_sq, e->rest_max, floor).var;
  if (!(e->flipped_neg_sq <= var * gsl_cdf_chisq_Qinv(PC_FALSE_ALARM, (double)n)))
    return false;
  return pc_crossing(PC_DIAG_SIGN_FLIPS, n, e->flipped_sq, (double)n / (double)e->pairs,
                     pc_tensor_hood(e, floor), PC_FALSE_ALARM, rms_a, d);
}

/* B constant (every element equal) where A's values are further apart than rounding at u can
 * merge: 2 u of A's largest magnitude. */
static bool pc_constant_test(const pc_evidence *e, double u, pc_diagnosis *d) {
  if (e->pairs < 2 || e->min_b != e->max_b)
    return false;
  double big = fabs(e->max_a) > fabs(e->min_a) ? fabs(e->max_a) : fabs(e->min_a);
  double spread = e->max_a - e->min_a;
  if (!(spread > 2 * u * big))
    return false;
  return pc_found(d, PC_DIAG_CONSTANT, e->min_b, spread / big, 2 * u);
}

/* Zeros below float16's normal range count as evidence unless float16 may have computed B: a
 * float16 side, or a model whose u is float16's (tf32's is the same, and loses them too). */
static bool pc_small_zeros_count(const pc_tensor *t, double u) {
  return t->dtype_a != PC_DTYPE_FLOAT16 && t->dtype_b != PC_DTYPE_FLOAT16 &&
         t->compare != PC_DTYPE_FLOAT16 && u != pc_dtype_unit_roundoff(PC_DTYPE_FLOAT16);
}

bool pc_structure_find(const pc_tensor *t, double u, pc_diagnosis *d) {
  const pc_stats *s = &t->stats;
  const pc_evidence *e = &s->ev;
  memset(d, 0, sizeof *d);
  gsl_set_error_handler_off(); /* GSL's default handler aborts */
  if (s->nan_mismatches)
    return pc_found(d, PC_DIAG_NAN_INJECTED, (double)s->nan_mismatches, 0, 0);
  if (s->inf_mismatches)
    return pc_found(d, PC_DIAG_INF_INJECTED, (double)s->inf_mismatches, 0, 0);
  if (!e->pairs)
    return false;
  bool small_zeros = pc_small_zeros_count(t, u);
  uint64_t zeroed = e->zeroed + (small_zeros ? e->zeroed_small : 0);
  if (s->sum_sq_b == 0 && zeroed)
    return pc_found(d, PC_DIAG_ZEROED, 0, (double)zeroed, 0);
  double rms_a = sqrt(s->sum_sq_a / (double)e->pairs);
  double rel_rms = s->sum_sq_a > 0 ? sqrt(s->sum_sq_diff / s->sum_sq_a) : 0;
  double floor = (u * rms_a) * (u * rms_a);
  if (pc_constant_test(e, u, d) || pc_shift_test(e, d) ||
      pc_scale_test(s, PC_CLEAN_FACTOR, PC_NO_DIGITS / 2, d) ||
      pc_zeroed_test(e, small_zeros, floor, rms_a, d) || pc_flips_test(e, floor, rms_a, d) ||
      pc_permutation_test(s, rel_rms, d) || pc_scale_test(s, PC_FACTOR_SHARE, PC_NO_DIGITS / 2, d))
    return true;
  memset(d, 0, sizeof *d);
  return false;
}

/* B is A rounded to a coarser grid on at least this share of the elements A has off it. */
static const double PC_ROUNDED_SHARE = 0.9;

/* The error in one group of slices of the leading axis: at least PC_SLICE_SHARE of its energy
 * where A holds at most half of its own. Honest rounding error follows A's magnitude wherever it
 * lies, so this is what a bug confined to one sample, step or channel looks like; it stays a
 * diagnosis, not a structure, since one sample's conditioning may honestly differ (a saturated
 * softmax). */
static const double PC_SLICE_SHARE = 0.9;

static bool pc_slice_diagnosis(const pc_tensor *t, pc_diagnosis *d) {
  const pc_evidence *e = &t->stats.ev;
  double sd = 0, sa = 0;
  int top = 0;
  for (int g = 0; g < PC_SLICE_GROUPS; g++) {
    sd += e->slice_sq[g];
    sa += e->slice_a2[g];
    top = e->slice_sq[g] > e->slice_sq[top] ? g : top;
  }
  if (!(sd > 0) || !(sa > 0) || t->rank < 2 || !t->dims || t->dims[0] < 2)
    return false;
  double share = e->slice_sq[top] / sd;
  if (!(share >= PC_SLICE_SHARE) || !(e->slice_a2[top] <= 0.5 * sa))
    return false;
  uint64_t n = t->dims[0], g = (uint64_t)top; /* group g: slices k with k G / n == g */
  uint64_t first = (g * n + PC_SLICE_GROUPS - 1) / PC_SLICE_GROUPS;
  uint64_t end = ((g + 1) * n + PC_SLICE_GROUPS - 1) / PC_SLICE_GROUPS;
  *d = (pc_diagnosis){PC_DIAG_SLICE, false, (int)(end - first),
                      (double)first, share, PC_SLICE_SHARE};
  return true;
}

pc_diagnosis pc_structure_noise(const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  const pc_evidence *e = &s->ev;
  double rel_rms = s->sum_sq_a > 0 ? sqrt(s->sum_sq_diff / s->sum_sq_a) : 0;
  pc_diagnosis found;
  if (pc_slice_diagnosis(t, &found))
    return found;
  if (pc_scale_test(s, PC_CLEAN_FACTOR, 0, &found)) { /* a small factor: drift, not structure */
    found.structural = false;
    return found;
  }
  for (int k = 0; k < 3; k++)
    if (e->round_cand[k] >= PC_SHIFT_MIN_PAIRS &&
        (double)e->round_hit[k] >= PC_ROUNDED_SHARE * (double)e->round_cand[k])
      return (pc_diagnosis){PC_DIAG_ROUNDED,
                            false,
                            k,
                            (double)e->round_hit[k] / (double)e->round_cand[k],
                            (double)e->round_hit[k],
                            PC_ROUNDED_SHARE * (double)e->round_cand[k]};
  return (pc_diagnosis){PC_DIAG_NOISE, false, 0, rel_rms, rel_rms, 0};
}
