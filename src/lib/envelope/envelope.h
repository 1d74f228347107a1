/* The honest envelope (docs/envelope.md, docs/tolerance-model.md "Envelope"): a sidecar file of
 * A that holds, for each tensor, how far K reruns of A with random rounding emulating B's
 * arithmetic landed from A. This room reads it (envelope.c) and holds its law (law.c): the
 * factors, derived from K and a false-alarm rate, that turn the measured spread into a pass
 * bound. The judge applies them to figures in pc_tensor only; the comparator reads the file.
 * Internal to the library. */
#ifndef PC_ENVELOPE_H
#define PC_ENVELOPE_H

#include "loader.h"

#include <paritycheck/result.h>

#include <gsl/gsl_roots.h> /* gsl_root_fsolver */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */

/* Members an envelope may hold: at least 2 (a spread needs two), at most 4096. */
enum { PC_ENVELOPE_MIN_MEMBERS = 2, PC_ENVELOPE_MAX_MEMBERS = 4096 };

/* The false-alarm rate of one envelope file: the chance that an honest B fails any of its
 * tensors, split evenly over its tensors' tests (the RMS and the per-element one, and the scale
 * and median tests where the envelope holds the members' scales and medians). */
#define PC_ENVELOPE_ALPHA 0.01

/* How far a real backend may land beyond the emulation's spread: the emulation rounds as B
 * does, but a backend with another algorithm (a reduction tree, a fused kernel) differs more.
 * EVIDENCE.md's first check found no tensor's real drift beyond 3x the ensemble's median. */
#define PC_ENVELOPE_GAP 3.0

typedef struct pc_envelope pc_envelope;

/** Open the envelope at `path` for the dump of A at `a_path`: checks the format version and the
 * root attributes (docs/envelope.md). PC_EIO naming the file when it cannot be read or is not an
 * envelope; PC_ENOMEM. */
int pc_envelope_open(pc_envelope **out, const char *path, const pc_open_limits *lim, pc_error *err);

void pc_envelope_close(pc_envelope *env);

/** The envelope's file (its per-element bounds are read through it like any dataset). */
pc_file *pc_envelope_file(const pc_envelope *env);

/** The sidecar of the dump at `a_path` (`x.h5` -> `x.envelope.h5`, any extension replaced)
 * into buf; false when it does not fit. */
bool pc_envelope_sidecar(const char *a_path, char *buf, size_t size);

/** True when `path` names an envelope sidecar (`*.envelope.h5`): never a dump to pair. */
bool pc_envelope_is_sidecar(const char *path);

/** The envelope of A's dataset `a` (of A's file, at the same path): fills *fig with the law's
 * figures and the bound's scale and A's RMS as measured (the judge checks it against A's), and
 * *bound with the per-element bound's dataset. Returns 1 when found, 0 when the envelope does
 * not hold the tensor, PC_EDATA naming the file and dataset when it holds it wrongly (another
 * shape, missing or bad attributes), PC_ENOMEM. */
int pc_envelope_find(pc_envelope *env, const pc_dataset *a, pc_envelope_fig *fig,
                     const pc_dataset **bound, pc_error *err);

/* --- the law (law.c) --------------------------------------------------------------------- */

/** What the law of one envelope shares over its tensors: K, the false-alarm rate of one test
 * alpha_t = PC_ENVELOPE_ALPHA / (tests x tensors) (tests: 2, plus the scale and the median test
 * where the envelope holds them), the scale test's factor (the same for every tensor), and a
 * root finder for the F quantiles. */
typedef struct pc_law {
  gsl_root_fsolver *root;
  size_t k;
  double alpha_t;
  double scale_factor;
} pc_law;

/** Fill *law for an envelope of K = k members; PC_ENOMEM when the root finder cannot be had
 * (release with pc_law_free either way). */
int pc_law_init(pc_law *law, size_t k, uint64_t tensors, int tests);

void pc_law_free(pc_law *law);

/** Fill fig's law from its K members' RMS errors d (absolute) and the tensor's element count n:
 * present, members, sigma, max_member, median_member, dof, factor, elem_factor
 * (docs/tolerance-model.md, "Envelope"). Sorts d in place. */
void pc_envelope_law(const pc_law *law, pc_envelope_fig *fig, double *d, uint64_t n);

/** The scale test's law from the K members' scales on A, c_k = sum (m_k - a) a / sum a^2:
 * has_scale, member_scale and scale_factor. */
void pc_envelope_scale_law(const pc_law *law, pc_envelope_fig *fig, const double *c);

/** The median test's law from the K members' median element errors q_k (the value of rank
 * ceil(n/2) among |m_k,i - a_i| over finite pairs): has_median, member_median and
 * median_factor. */
void pc_envelope_median_law(const pc_law *law, pc_envelope_fig *fig, const double *q, uint64_t n);

/** The per-element test of n pairs (a, b) with their bounds e (decoded), added to
 * part->env_beyond and part->env_max_ratio: over pairs where a and b are finite,
 * ratio_i = |b_i - a_i| / (scale e_i + elem_floor + 2 grid_u |a_i|) (0 / 0 = 0, x / 0 = inf);
 * with the median test, also part->env_above_median: the pairs where |b_i - a_i| > median_bound. */
void pc_envelope_fold(pc_stats *part, const double *a, const double *b, const double *e, size_t n,
                      const pc_envelope_fig *fig);

/** pc_envelope_fold on stored bytes, in vector lanes (envelope_lanes.h): A and B float32
 * (half false) or float16 (half true), the bounds float16, all in the machine's byte order; the
 * same figures bit for bit. */
void pc_envelope_fold_bytes(pc_stats *part, bool half, const unsigned char *a,
                            const unsigned char *b, const unsigned char *e, size_t n,
                            const pc_envelope_fig *fig);

/** B's least-squares scale on A, minus 1: c_B = sum (b - a) a / sum a^2 over finite pairs (0
 * without any, or where A is zero there). */
double pc_envelope_b_scale(const pc_stats *s);

/** B's RMS distance to A in units of the envelope's floor, RMS(b - a) / fig->floor over finite
 * pairs (+inf where the floor is 0, every member equal to a zero A, yet B differs): the RMS
 * test's statistic, which the judge and the reports both show. */
double pc_envelope_rms_ratio(const pc_envelope_fig *fig, const pc_stats *s);

/** What is left of B's error once its scale on A is taken out, RMS(b - (1 + c_B) a) over finite
 * pairs (sum d^2 - (sum a d)^2 / sum a^2, clamped at 0 against cancellation), in units of the
 * envelope's floor as pc_envelope_rms_ratio: whether c_B explains B's error ("scaled by"). */
double pc_envelope_residual_ratio(const pc_envelope_fig *fig, const pc_stats *s);

/** |c_B| in units of the members' scale spread, |c_B| / fig->scale_floor (+inf for c_B != 0 on a
 * zero floor): the scale test's statistic, which the judge and the reports both show. */
double pc_envelope_scale_ratio(const pc_envelope_fig *fig, const pc_stats *s);

/** fig->floor, elem_floor, scale_floor and (with the median test) median_floor and
 * median_bound from A's unit roundoff (its dtype's) and fig->rms_a. */
void pc_envelope_set_floor(pc_envelope_fig *fig, double u_a);

#endif
