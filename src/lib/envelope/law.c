/* The envelope's law (envelope.h; docs/tolerance-model.md, "Envelope").
 *
 * Each member k of the envelope is one honest rerun; d_k = RMS(m_k - a) over the tensor's
 * elements. Model: an RMS of nu effectively independent errors, d_k^2 = sigma^2 chi2_nu / nu,
 * and an honest B one more exchangeable sample. Then RMS(b - a)^2 / mean_k d_k^2 follows
 * F(nu, K nu) exactly, and the pass factor at a false-alarm rate alpha_t is
 * sqrt(F^-1(1 - alpha_t; nu, K nu)): beyond the sample's maximum, as K exchangeable samples
 * require (a new one exceeds their maximum with probability 1/(K + 1)). nu is not known: the
 * spread of the d_k^2 measures it (their squared coefficient of variation is 2 / nu), and the
 * law takes the lower end of its 95 % confidence interval (chi-square on the sample variance),
 * so that K that happen to agree do not narrow the bound; with K = 2 it takes nu = 1, the
 * widest law (F(1, K) is Student's t_K squared).
 *
 * Per element, r_i = RMS over members of (m_k,i - a_i) is an RMS of K samples of the element's
 * own error: (b_i - a_i) / r_i follows Student's t_K, and the element factor is its quantile at
 * alpha_t / n over the tensor's n elements. The bound adds a floor for an element whose members
 * happened to agree: the *median* member's RMS error (with A's own rounding), not sigma. An event
 * in one or two members (a near-zero gradient whose sign flips, which AdamW's first step turns
 * into a change of 2 lr; a crossed ReLU kink) moves a few elements far, and sigma with it; those
 * elements keep their own wide r_i, but sigma added to every other element hid bugs there
 * (issue 36, the trajectory's optimizer bugs). The median member is one an event missed as long
 * as fewer than half of them met one. The bound also adds one step of the emulated grid at a_i, 2 u
 * |a_i|: B rounds to nearest where members round stochastically, and where a_i lies near a grid
 * point all K members may land on it while B lands one step away (measured on an H200:
 * docs/python.md). Both factors are multiplied by PC_ENVELOPE_GAP, the allowance for a backend
 * whose algorithm, not only its rounding, differs. */
#include "cpu.h" /* pc_f32_widest */
#include "envelope.h"
#include "envelope_lanes.h"
#include "numerics.h" /* pc_dtype_decode_float */

#include <gsl/gsl_cdf.h>               /* gsl_cdf_chisq_Pinv, gsl_cdf_fdist_Q, gsl_cdf_tdist_Qinv */
#include <gsl/gsl_errno.h>             /* gsl_set_error_handler_off, GSL_SUCCESS */
#include <gsl/gsl_sort.h>              /* gsl_sort */
#include <gsl/gsl_statistics_double.h> /* gsl_stats_median_from_sorted_data */

#include <math.h> /* fabs, isfinite, sqrt, INFINITY */

/* Confidence of the lower bound on nu. */
static const double PC_DOF_CONFIDENCE = 0.05;
/* Above this nu the F quantile is 1 to within 1 %: no need to compute it at every n. */
static const double PC_DOF_MAX = 1e5;

/* nu from the members' squared RMS errors (above); at least 1, at most n. */
static double pc_envelope_dof(const double *d, size_t k, uint64_t n) {
  double mean = 0, var = 0, cap = n < PC_DOF_MAX ? (double)(n ? n : 1) : PC_DOF_MAX;
  if (k < 3)
    return 1;
  for (size_t i = 0; i < k; i++)
    mean += d[i] * d[i] / (double)k;
  for (size_t i = 0; i < k; i++)
    var += (d[i] * d[i] - mean) * (d[i] * d[i] - mean) / (double)(k - 1);
  if (!(mean > 0) || !(var > 0))
    return cap; /* all members alike: nothing shows fewer degrees of freedom than the elements */
  double cv2_up = var / (mean * mean) * (double)(k - 1) /
                  gsl_cdf_chisq_Pinv(PC_DOF_CONFIDENCE, (double)(k - 1));
  double nu = 2 / cv2_up;
  return nu < 1 ? 1 : nu > cap ? cap : nu;
}

/* The false-alarm rate of one test of one tensor. */
static double pc_alpha_t(uint64_t tensors, int tests) {
  return PC_ENVELOPE_ALPHA / ((double)tests * (double)(tensors ? tensors : 1));
}

int pc_law_init(pc_law *law, size_t k, uint64_t tensors, int tests) {
  gsl_set_error_handler_off(); /* GSL's default handler aborts */
  law->root = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
  law->k = k;
  law->alpha_t = pc_alpha_t(tensors, tests);
  law->scale_factor = PC_ENVELOPE_GAP * gsl_cdf_tdist_Qinv(law->alpha_t / 2.0, (double)k);
  return law->root ? PC_OK : PC_ENOMEM;
}

void pc_law_free(pc_law *law) {
  if (law->root)
    gsl_root_fsolver_free(law->root);
  law->root = NULL;
}

typedef struct pc_f_tail {
  double alpha, n1, n2;
} pc_f_tail;

static double pc_f_excess(double x, void *p) {
  const pc_f_tail *t = p;
  return gsl_cdf_fdist_Q(x, t->n1, t->n2) - t->alpha;
}

/* x with P(F(n1, n2) > x) = alpha, from GSL's upper tail, which holds at any degrees of freedom
 * where GSL's own inverse fails to converge (n1 in the thousands): the root bracketed by
 * doubling, then narrowed by Brent's method (a third of the tail evaluations bisection took) to
 * 1e-13 relative; the bracket's upper end, so the factor never falls short of the quantile. */
static double pc_f_upper(gsl_root_fsolver *root, double alpha, double n1, double n2) {
  pc_f_tail tail = {alpha, n1, n2};
  gsl_function f = {pc_f_excess, &tail};
  double lo = 0, hi = 1;
  while (pc_f_excess(hi, &tail) > 0 && hi < 1e300) {
    lo = hi;
    hi *= 2;
  }
  if (gsl_root_fsolver_set(root, &f, lo, hi) != GSL_SUCCESS) /* no sign change: hi >= 1e300 */
    return hi;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
    if (gsl_root_fsolver_iterate(root) != GSL_SUCCESS)
      break;
    lo = gsl_root_fsolver_x_lower(root);
    hi = gsl_root_fsolver_x_upper(root);
  }
  return hi;
}

void pc_envelope_law(const pc_law *law, pc_envelope_fig *fig, double *d, uint64_t n) {
  size_t k = law->k;
  double sum = 0, top = 0;
  for (size_t i = 0; i < k; i++) {
    sum += d[i] * d[i];
    top = d[i] > top ? d[i] : top;
  }
  fig->present = true;
  fig->members = (uint32_t)k;
  fig->sigma = sqrt(sum / (double)k);
  fig->max_member = top;
  fig->dof = pc_envelope_dof(d, k, n);
  fig->factor =
      PC_ENVELOPE_GAP * sqrt(pc_f_upper(law->root, law->alpha_t, fig->dof, (double)k * fig->dof));
  fig->elem_factor =
      PC_ENVELOPE_GAP * gsl_cdf_tdist_Qinv(law->alpha_t / (2.0 * (double)(n ? n : 1)), (double)k);
  gsl_sort(d, 1, k);
  fig->median_member = gsl_stats_median_from_sorted_data(d, 1, k);
}

/* c_B / sqrt(mean c_k^2) follows Student's t_K when the c_k and c_B are exchangeable normal
 * samples of the scale's rounding error (the projection of each member's error on A): the
 * factor is its two-sided quantile at alpha_t, times PC_ENVELOPE_GAP, the same for every tensor
 * of the envelope (pc_law_init). A member that an event moved (a flipped sign) widens it: heavy
 * tails only make it wider. */
void pc_envelope_scale_law(const pc_law *law, pc_envelope_fig *fig, const double *c) {
  double sum = 0;
  for (size_t i = 0; i < law->k; i++)
    sum += c[i] * c[i];
  fig->has_scale = true;
  fig->member_scale = sqrt(sum / (double)law->k);
  fig->scale_factor = law->scale_factor;
}

/* The members' median element errors q_k are read as the d_k are: q_k^2 = sigma_q^2 chi2_nu /
 * nu with nu from their spread, and B's median one more exchangeable sample, so the factor is
 * the RMS test's at the q_k's own nu. A median moves little between members (it ignores the
 * events that widen sigma: a flip in under half the elements), so nu is large and the bound
 * near G_e times the members' median: a B whose typical element moved (an optimizer bug that
 * shifts every parameter by lr while honest reruns flip a few) fails it. */
void pc_envelope_median_law(const pc_law *law, pc_envelope_fig *fig, const double *q, uint64_t n) {
  size_t k = law->k;
  double sum = 0, dof = pc_envelope_dof(q, k, n);
  for (size_t i = 0; i < k; i++)
    sum += q[i] * q[i];
  fig->has_median = true;
  fig->member_median = sqrt(sum / (double)k);
  fig->median_factor =
      PC_ENVELOPE_GAP * sqrt(pc_f_upper(law->root, law->alpha_t, dof, (double)k * dof));
}

double pc_envelope_b_scale(const pc_stats *s) {
  return s->finite_terms && s->sum_sq_a > 0 ? s->sum_a_diff / s->sum_sq_a : 0;
}

/* x >= 0 in units of a floor: +inf for x > 0 on a zero floor (the envelope allows nothing there:
 * every member equal to a zero A), 0 for x = 0. */
static double pc_over_floor(double x, double floor) {
  return floor > 0 ? x / floor : x > 0 ? INFINITY : 0;
}

double pc_envelope_rms_ratio(const pc_envelope_fig *fig, const pc_stats *s) {
  double err = s->finite_terms ? sqrt(s->sum_sq_diff / (double)s->finite_terms) : 0;
  return pc_over_floor(err, fig->floor);
}

double pc_envelope_residual_ratio(const pc_envelope_fig *fig, const pc_stats *s) {
  double left = s->sum_sq_diff - s->sum_a_diff * pc_envelope_b_scale(s);
  return pc_over_floor(s->finite_terms && left > 0 ? sqrt(left / (double)s->finite_terms) : 0,
                       fig->floor);
}

double pc_envelope_scale_ratio(const pc_envelope_fig *fig, const pc_stats *s) {
  return pc_over_floor(fabs(pc_envelope_b_scale(s)), fig->scale_floor);
}

/* B rounds its own output at A's precision at least once, which members that share A's last
 * rounding (an exact op) do not show: one rounding of every element, RMS u_A RMS(A), is added in
 * quadrature, to sigma for the RMS test and to the median member for the elements; to the
 * scale, u_A (a bound: the rounding's projection on A is at most u_A of A). To the median, a
 * whole step of A's grid at RMS(A), 2 u_A RMS(A): where every member reproduces A's bits in
 * most elements (an optimizer's float32 update under autocast), B's own kernels (a fused
 * multiply-add in place of two roundings) may move most of them by one ulp, which is at most
 * 2 u_A |a_i|, and the median |a_i| is at most sqrt(2) RMS(A) (Markov), which the factor's G_e
 * covers. */
void pc_envelope_set_floor(pc_envelope_fig *fig, double u_a) {
  double r = u_a * fig->rms_a, m = fig->median_member, q = fig->member_median;
  fig->floor = sqrt(fig->sigma * fig->sigma + r * r);
  fig->elem_floor = sqrt(m * m + r * r);
  fig->scale_floor = sqrt(fig->member_scale * fig->member_scale + u_a * u_a);
  if (fig->has_median) {
    fig->median_floor = sqrt(q * q + 4 * r * r);
    fig->median_bound = fig->median_factor * fig->median_floor;
  }
}

void pc_envelope_fold(pc_stats *part, const double *a, const double *b, const double *e, size_t n,
                      const pc_envelope_fig *fig) {
  double top = part->env_max_ratio;
  uint64_t beyond = 0, above = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(a[i]) || !isfinite(b[i]))
      continue;
    double ei = e[i] >= 0 ? e[i] : 0; /* a NaN or negative bound widens nothing */
    double d = fabs(b[i] - a[i]);
    double bound =
        (fig->scale > 0 ? fig->scale * ei : 0) + fig->elem_floor + 2 * fig->grid_u * fabs(a[i]);
    double ratio = d == 0 ? 0 : bound > 0 ? d / bound : INFINITY;
    top = ratio > top ? ratio : top;
    beyond += ratio > fig->elem_factor;
    above += d > fig->median_bound;
  }
  part->env_max_ratio = top;
  part->env_beyond += beyond;
  part->env_above_median += fig->has_median ? above : 0;
}

typedef size_t (*pc_env_fn)(pc_stats *, pc_ev_layout, const unsigned char *, const unsigned char *,
                            const unsigned char *, size_t, const pc_envelope_fig *);

/* The widest build of the vector part this machine runs (cpu.h). */
static pc_env_fn pc_env_runner(void) {
#ifdef PC_HAVE_AVX2
  static const pc_env_fn build[] = {pc_f32_run_base_envelope, pc_f32_run_avx2_envelope,
                                    pc_f32_run_avx512_envelope};
  return build[pc_f32_widest()];
#else
  return pc_f32_run_base_envelope;
#endif
}

void pc_envelope_fold_bytes(pc_stats *part, bool half, const unsigned char *a,
                            const unsigned char *b, const unsigned char *e, size_t n,
                            const pc_envelope_fig *fig) {
  size_t done = pc_env_runner()(part, half ? PC_EV_HALF : PC_EV_FLOAT, a, b, e, n, fig);
  /* The last pairs, fewer than a step, decoded and folded one by one. */
  double x[PC_EV_MAX_STEP], y[PC_EV_MAX_STEP], ev[PC_EV_MAX_STEP];
  size_t left = n - done, es = half ? 2 : 4;
  pc_dtype dt = half ? PC_DTYPE_FLOAT16 : PC_DTYPE_FLOAT32;
  pc_dtype_decode_float(dt, a + es * done, left, false, x);
  pc_dtype_decode_float(dt, b + es * done, left, false, y);
  pc_dtype_decode_float(PC_DTYPE_FLOAT16, e + 2 * done, left, false, ev);
  pc_envelope_fold(part, x, y, ev, left, fig);
}
