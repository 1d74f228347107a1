/* paritycheck result model: what a comparison found and what the judge decided, per tensor
 * (pc_tensor) and per run (pc_run). The loaders, kernels and the stream fill the figures
 * (pc_stats); one module, the judge (src/lib/judge/judge.c), sets every verdict, the criteria that
 * broke (pc_reason) and the root-cause links (caused_by); the report writers only render them.
 * Every figure is defined in docs/metrics.md, every criterion in docs/tolerance-model.md. */
#ifndef PARITYCHECK_RESULT_H
#define PARITYCHECK_RESULT_H

#include <paritycheck/dtype.h>     /* pc_dtype */
#include <paritycheck/tolerance.h> /* pc_tol */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

enum { PC_MAX_RANK = 32 }; /* HDF5's H5S_MAX_RANK */

typedef enum pc_verdict {
  PC_VERDICT_PASS = 0,
  PC_VERDICT_DRIFT,
  PC_VERDICT_MISSING_IN_A,
  PC_VERDICT_MISSING_IN_B,
  PC_VERDICT_SHAPE_MISMATCH,
  PC_VERDICT_DTYPE_MISMATCH,
  PC_VERDICT_SKIPPED,
  PC_VERDICT_ERROR,
  /* B keeps no significant digit at this tensor (docs/tolerance-model.md, "Indeterminate"): no
   * check can tell a bug from honest drift there. A failure unless the run accepts it
   * (pc_run.accept_indeterminate). */
  PC_VERDICT_INDETERMINATE,
  PC_VERDICT_COUNT_ /* number of enumerators; not a verdict */
} pc_verdict;

/** "pass", "drift", "missing_in_a", "missing_in_b", "shape_mismatch", "dtype_mismatch",
 * "skipped", "error", "indeterminate". */
const char *pc_verdict_name(pc_verdict v);

/** True for the verdicts that make a run drift (everything but pass, skipped and error;
 * indeterminate included: a run that accepts it tallies it apart, pc_run.accept_indeterminate). */
bool pc_verdict_is_failure(pc_verdict v);

enum {
  PC_ULP_BUCKETS = 65, /* log2 buckets of ulp: 0, 1, 2-3, 4-7, ..., [2^63, 2^64) */
  PC_NQUANTILES = 4    /* p50, p90, p99, p99.9 */
};

/** The quantile levels of pc_stats.q_*: 0.5, 0.9, 0.99, 0.999. */
extern const double pc_quantile_levels[PC_NQUANTILES];

/* Shifts the evidence tests (docs/tolerance-model.md, "Structure"): by one element forward and
 * back in row-major order (a roll along the last axis, or of the flattened tensor). */
enum { PC_SHIFT_FWD = 0, PC_SHIFT_BACK, PC_NSHIFTS };

/* Groups of slices of the leading axis whose error energy the evidence keeps apart: each slice
 * its own group up to 8 slices (a batch of 8 samples), else 8 equal runs of slices. */
enum { PC_SLICE_GROUPS = 8 };

/* Sums over the finite pairs of a tensor that rounding cannot move far (docs/tolerance-model.md,
 * "Structure"), gathered in the same pass as the figures and added block by block. "Zeroed":
 * b == 0 where |a| >= 2^-14 (every float format's normal range: an underflow or flush to zero
 * cannot make it; "small": where |a| is a normal float32 below that, out of float16's normal
 * range). "Flipped": a and b nonzero of opposite signs. "Rest": every other pair. */
typedef struct pc_evidence {
  bool seen;                   /* a block was folded (its ends are set) */
  uint64_t pairs;              /* finite pairs folded */
  double sum_a, sum_b;         /* sums of a and of b */
  double sum_abs_a, sum_abs_b; /* sums of |a| and of |b| */
  double min_a, max_a;         /* extremes of a and of b (meaningful when finite_terms > 0) */
  double min_b, max_b;
  uint64_t zeros_a;      /* pairs where a == 0 (of either sign) */
  uint64_t zeroed;       /* pairs zeroed in B */
  double zeroed_sq;      /* sum of a^2 over them */
  uint64_t zeroed_small; /* b == 0 where 2^-126 <= |a| < 2^-14: float16 may underflow there */
  double zeroed_small_sq;
  uint64_t flipped;      /* pairs of opposite signs */
  double flipped_sq;     /* sum of a^2 over them */
  double flipped_neg_sq; /* sum of (a + b)^2 over them: how far b is from -a */
  uint64_t rest;         /* the other pairs: their count, sum of (b - a)^2, largest |b - a| */
  double rest_sq;
  double rest_max;
  /* Shifted pairs (b[i], a[i - s]) of finite values, per PC_SHIFT_*: their count, the sum of
   * (b[i] - a[i - s])^2, and the sum of (b[i] - a[i])^2 over the same i. The pairs that straddle
   * two blocks are added when the blocks merge, from the first and last values of each (NaN when
   * not finite), so that the sums do not depend on where blocks are cut. */
  uint64_t shift_pairs[PC_NSHIFTS];
  double shift_sq[PC_NSHIFTS];
  double shift_base_sq[PC_NSHIFTS];
  double first_a, first_b, last_a, last_b;
  /* Per group of slices of the leading axis (PC_SLICE_GROUPS; none below two axes, or for a
   * fill value's run): the sum of (b - a)^2 and of a^2. */
  double slice_sq[PC_SLICE_GROUPS];
  double slice_a2[PC_SLICE_GROUPS];
  /* The same groups' "rest" pairs (neither zeroed nor flipped: count, sum of (b - a)^2,
   * largest |b - a|) and zeroed pairs (count, sum of a^2). Honest error follows the
   * conditioning of its slice (a channel whose BatchNorm cancels), so elements crossing zero
   * are weighed against their own group's error as well as the tensor's. */
  uint64_t slice_rest[PC_SLICE_GROUPS];
  double slice_rest_sq[PC_SLICE_GROUPS];
  double slice_rest_max[PC_SLICE_GROUPS];
  uint64_t slice_zeroed[PC_SLICE_GROUPS];
  double slice_zeroed_sq[PC_SLICE_GROUPS];
  /* Precision signature, for float32 compare dtypes: pairs where a is not representable in
   * bfloat16 / float16 / tf32, and how many of those have b == a rounded to it (nearest even). */
  uint64_t round_cand[3];
  uint64_t round_hit[3];
} pc_evidence;

/* Per-tensor figures, each defined in docs/metrics.md. */
typedef struct pc_stats {
  uint64_t count;
  uint64_t mismatches;
  uint64_t nan_mismatches;
  uint64_t inf_mismatches;
  uint64_t not_representable_a; /* values outside A's logical dtype (dtype attribute) */
  uint64_t not_representable_b;
  double max_abs;
  double max_rel;
  uint64_t max_ulp;
  uint64_t ulp_sum_hi; /* exact 128-bit sum of ulp over the elements of mean_ulp */
  uint64_t ulp_sum_lo;
  uint64_t ulp_terms; /* how many elements the sum holds */
  bool has_worst;
  uint64_t worst_index; /* row-major flat index */
  double worst_a[2];    /* [0] real value, [1] imaginary part (complex only) */
  double worst_b[2];
  double worst_abs;
  double worst_rel;
  uint64_t worst_ulp;
  int worst_class; /* 0 finite, 1 mismatch, 2 inf mismatch, 3 nan mismatch: internal ranking */
  /* Both sides integers: the worst a ([0]) and b ([1]) exactly, as sign and magnitude, since
   * worst_a and worst_b round them to double beyond 2^53. */
  bool worst_is_int;
  bool worst_int_neg[2];
  uint64_t worst_int_mag[2];
  /* Sums over the elements where a and b are both finite (complex: |.|^2 and Re(a conj b)),
   * in row-major order, for the aggregate figures of docs/metrics.md. */
  uint64_t finite_terms;
  double sum_sq_a;    /* sum of a^2 */
  double sum_sq_b;    /* sum of b^2 */
  double sum_ab;      /* sum of a*b */
  double sum_sq_diff; /* sum of (b - a)^2 */
  double sum_a_diff;  /* sum of a*(b - a): scale_error without the cancellation of sum_ab */
  /* Distribution of the errors over the elements of mean_ulp (all but nan mismatches). */
  double sum_abs;                    /* mean_abs = sum_abs / ulp_terms */
  double sum_rel;                    /* mean_rel = sum_rel / ulp_terms */
  uint64_t ulp_hist[PC_ULP_BUCKETS]; /* [0]: ulp 0; [k >= 1]: ulp in [2^(k-1), 2^k) */
  bool has_quantiles;                /* q_* below are filled */
  double q_abs[PC_NQUANTILES];       /* quantiles of abs, rel and ulp at pc_quantile_levels: */
  double q_rel[PC_NQUANTILES];       /* approximations from a log-bucketed histogram, */
  double q_ulp[PC_NQUANTILES];       /* docs/metrics.md says how close */
  pc_evidence ev;                    /* the judge's structural evidence */
  /* With an envelope's per-element bound e (pc_envelope_fig): over finite pairs, with
   * bound_i = s e_i + elem_floor + 2 grid_u |a_i|, the elements where |b - a| > elem_factor
   * bound_i, and the largest |b - a| / bound_i. */
  uint64_t env_beyond;
  double env_max_ratio;
  /* With the envelope's median test (pc_envelope_fig.has_median): the finite pairs where
   * |b - a| > median_bound. B's median error (the value of rank ceil(n/2) among the n finite
   * pairs' |b - a|) exceeds median_bound exactly when this count exceeds floor(n/2). */
  uint64_t env_above_median;
} pc_stats;

/* Aggregate figures of a tensor, derived from pc_stats (docs/metrics.md, "Aggregates"). */
typedef struct pc_aggregates {
  double mean_abs; /* sum_abs / ulp_terms */
  double mean_rel;
  double rms;         /* sqrt(sum_sq_diff / finite_terms) */
  double rel_rms;     /* sqrt(sum_sq_diff / sum_sq_a) */
  double cosine;      /* sum_ab / sqrt(sum_sq_a * sum_sq_b) */
  double snr_db;      /* 10 log10(sum_sq_a / sum_sq_diff) */
  double scale_error; /* sum_a_diff / sum_sq_a: the least-squares scale of B on A, minus 1 */
} pc_aggregates;

/** The aggregate figures of s, with the edge cases of docs/metrics.md (no elements, zero
 * vectors, no error). */
pc_aggregates pc_stats_aggregates(const pc_stats *s);

/** mean_ulp of docs/metrics.md: the exact sum divided by ulp_terms (0 when there are none). */
double pc_stats_mean_ulp(const pc_stats *s);

/* The criteria a tensor can break (docs/tolerance-model.md, "Reasons"), in the order the judge
 * tests them and the reports list them. */
typedef enum pc_criterion {
  PC_CRIT_NAN_MISMATCH = 0,  /* value: NaN mismatches; limit 0 */
  PC_CRIT_INF_MISMATCH,      /* value: inf mismatches; limit 0 */
  PC_CRIT_MISMATCH_FRACTION, /* value: mismatches / count; limit: the fraction allowed */
  PC_CRIT_REL_RMS,           /* value: rel_rms; limit: the largest rel_rms allowed */
  PC_CRIT_SCALE_ERROR,       /* value: |scale_error|; limit: the largest allowed */
  PC_CRIT_STRUCTURE, /* a signature rounding cannot produce (pc_tensor.diagnosis): value: the
                        test's statistic; limit: the largest honest value */
  PC_CRIT_ENVELOPE,  /* B's RMS distance to A beyond the measured envelope (pc_envelope_fig):
                        value: RMS(b - a) / its floor; limit: the pass factor */
  PC_CRIT_ENVELOPE_ELEMENTS, /* elements far beyond their own envelope: value: the largest
                                |b - a| / bound_i (pc_stats.env_max_ratio); limit: the
                                element factor */
  PC_CRIT_ENVELOPE_SCALE,    /* B's least-squares scale on A beyond its members' (pc_envelope_fig):
                                value: |c| / scale_floor; limit: the scale factor */
  PC_CRIT_ENVELOPE_MEDIAN,   /* B's median element error beyond its members' (pc_envelope_fig):
                                value: the fraction of finite pairs beyond median_bound
                                (pc_stats.env_above_median / finite_terms); limit: floor(n/2) / n,
                                so that the value exceeds it when B's median does the bound */
  /* Product metrics, in pc_metric order (PC_CRIT_METRIC_ + m): value: the metric; limit: the
   * tolerance's minimum (pc_metric_is_floor) or maximum. */
  PC_CRIT_METRIC_,
  PC_CRIT_COUNT_ = PC_CRIT_METRIC_ + PC_METRIC_COUNT_ /* number of criteria; not a criterion */
} pc_criterion;

/** "nan_mismatch", "inf_mismatch", "mismatch_fraction", "rel_rms", "scale_error", "structure",
 * "envelope", "envelope_elements", "envelope_scale", "envelope_median", then the metric names
 * of pc_metric_name. */
const char *pc_criterion_name(pc_criterion c);

/** True for a criterion whose value must reach its limit (a floor metric), false for those that
 * must stay within it. */
bool pc_criterion_is_floor(pc_criterion c);

/* One product metric of a tensor (docs/metrics.md, "Product metrics"): the comparator computes
 * the value, the judge sets the limit and whether it holds. */
typedef struct pc_metric_result {
  bool present; /* the tensor's tolerance names this metric and it was computed */
  double value;
  double limit;
  bool pass;
} pc_metric_result;

/* One broken criterion: the tensor's value and the limit the judge applied to it (the limit
 * after every allowance: the profile's, the run's trend, the noise floor). */
typedef struct pc_reason {
  pc_criterion criterion;
  double value;
  double limit;
} pc_reason;

/* What the judge measured of the tensor's place in the run (docs/tolerance-model.md, "The run's
 * trend"); meaningful when `judged` is set, that is for float tensors compared element by element.
 */
typedef struct pc_context {
  bool judged;
  int64_t exec_index; /* position in execution order (pc_run.order), or -1 */
  double trend;       /* the largest rel_rms of the passing tensors just upstream; 0 when none */
  double noise_scale; /* the median RMS(A) of its neighbours: the scale of the computation
                         whose rounding noise a tensor of (near) zero exact value holds */
  bool noise_level;   /* both sides hold only rounding noise of the neighbours' scale */
  double reference_limit; /* three-way mode: the distance of B to R that the tensor's
                             conditioning explains (docs/tolerance-model.md); 0 when none */
} pc_context;

/* Three-way mode (pc_compare_reference, docs/metrics.md "Three-way mode"): one side's distance
 * to the reference R, the figures of docs/metrics.md with R as the reference side and that side
 * as the candidate, ULPs in the compare dtype of that pair. */
typedef struct pc_ref_side {
  double max_abs, max_rel, rel_rms;
  uint64_t max_ulp;
  double mean_ulp;
} pc_ref_side;

typedef struct pc_vs_reference {
  bool present; /* R holds the tensor and both R-vs-A and R-vs-B compared it (pass or drift) */
  pc_ref_side a, b;
  int closer; /* -1 a, +1 b, 0 tie: the smaller rel_rms, then the smaller max_ulp */
} pc_vs_reference;

/* What a failing tensor's difference looks like (docs/tolerance-model.md, "Diagnosis"). The
 * structural kinds are what rounding cannot produce: they fail under every profile and every
 * run-level allowance. */
typedef enum pc_diagnosis_kind {
  PC_DIAG_NONE = 0,
  PC_DIAG_NAN_INJECTED,  /* value: NaN mismatches */
  PC_DIAG_INF_INJECTED,  /* value: inf mismatches */
  PC_DIAG_ZEROED,        /* B is zero where A is not */
  PC_DIAG_CONSTANT,      /* value: B's one value */
  PC_DIAG_PARTLY_ZEROED, /* value: the fraction of A's nonzero elements zeroed in B */
  PC_DIAG_SCALED,        /* value: c, B = c A */
  PC_DIAG_NEGATED,       /* value: c (near -1) */
  PC_DIAG_SIGN_FLIPS,    /* value: the fraction of elements whose sign flipped */
  PC_DIAG_SHIFTED,       /* value: the shift (+1 / -1) in row-major order */
  PC_DIAG_PERMUTED,      /* value: rel_rms */
  PC_DIAG_ROUNDED,       /* value: the fraction that match; axis: 0 bf16, 1 fp16, 2 tf32 */
  PC_DIAG_SLICE,         /* value: the first slice of axis 0 that holds the error; axis: how
                            many slices (from value) the group spans; statistic: its share */
  PC_DIAG_NOISE,         /* value: rel_rms: noise-like, consistent with amplified rounding */
  PC_DIAG_NO_DIGITS,     /* value: rel_rms (or kappa u with a reference): indeterminate */
  PC_DIAG_BEYOND,        /* value: how many times the honest bound B's error is (envelope or
                            allowance): drift, no pattern proven; axis 3: the envelope's scale
                            test alone, value its ratio, statistic B's scale on A minus 1;
                            axis 4: the envelope's median test alone, value the fraction of
                            elements beyond median_bound, statistic median_bound, limit the
                            test's (floor(n/2) / n) */
  PC_DIAG_LOCALIZED,     /* value: elements far beyond their own envelope; statistic: the
                            largest ratio; limit: the element factor (structural) */
  PC_DIAG_COUNT_         /* number of kinds; not a kind */
} pc_diagnosis_kind;

typedef struct pc_diagnosis {
  pc_diagnosis_kind kind;
  bool structural;  /* rounding cannot produce it */
  int axis;         /* PC_DIAG_ROUNDED: 0 bf16, 1 fp16, 2 tf32; PC_DIAG_NOISE: 1 in plain mode */
  double value;     /* per kind, above */
  double statistic; /* the test's statistic, and the largest value honest rounding gives it: */
  double limit;     /* structural when statistic > limit */
} pc_diagnosis;

/** "zeroed", "scaled", ... ("none" for PC_DIAG_NONE): the kind's stable name (JSON "kind"). */
const char *pc_diagnosis_name(pc_diagnosis_kind k);

/** One line for a reader ("scaled by 2.000", "shifted by 1 along axis 0", "12.0 % of elements
 * zeroed") into buf (always terminated); returns buf. */
const char *pc_diagnosis_text(const pc_diagnosis *d, char *buf, size_t cap);

/* The honest envelope of a tensor (docs/envelope.md): what K reruns of A with random rounding
 * that emulates B's arithmetic measured, and the law the judge applies to it
 * (docs/tolerance-model.md, "Envelope"). Set before the tensor is streamed; the streaming pass
 * adds pc_stats.env_beyond and env_max_ratio from the per-element bound. */
typedef struct pc_envelope_fig {
  bool present;         /* the envelope holds this tensor */
  bool elements;        /* its per-element bound was read beside A and B */
  uint32_t members;     /* K */
  double sigma;         /* the envelope's RMS error: sqrt(mean over members of RMS(m_k - a)^2) */
  double max_member;    /* the largest member's RMS(m_k - a) */
  double dof;           /* nu, the degrees of freedom the law credits each member's RMS with */
  double floor;         /* sigma with one rounding of every element at A's precision added:
                           sqrt(sigma^2 + (u_A rms_a)^2), what B is judged against */
  double median_member; /* the median over members of RMS(m_k - a) */
  double elem_floor;    /* the per-element test's floor: sqrt(median_member^2 + (u_A rms_a)^2) */
  double factor;        /* the pass factor: RMS(b - a) <= factor floor */
  double scale;         /* s: an element's bound is s e_i (its members' RMS error, rounded up) */
  double elem_factor;   /* an element fails beyond elem_factor bound_i (pc_stats.env_beyond) */
  double grid_u;        /* the unit roundoff of the arithmetic emulated (the root's `emulate`) */
  double rms_a;         /* RMS(A) the envelope was measured on (checked against A's) */
  /* The scale test, where the envelope measured its members' scales on A (root `scale_test`):
   * c_k = sum (m_k - a) a / sum a^2, and B's c = sum_a_diff / sum_sq_a against them. */
  bool has_scale;
  double member_scale; /* sqrt(mean over members of c_k^2) */
  double scale_floor;  /* sqrt(member_scale^2 + u_A^2): B's own rounding at A's precision added */
  double scale_factor; /* B passes when |c| <= scale_factor scale_floor */
  /* The median test, where the envelope measured its members' median element errors (root
   * `median_test`): q_k = the value of rank ceil(n/2) among |m_k,i - a_i| over finite pairs. */
  bool has_median;
  double member_median; /* sqrt(mean over members of q_k^2) */
  double median_floor;  /* sqrt(member_median^2 + (2 u_A rms_a)^2): one step of A's grid added */
  double median_factor; /* the law's factor for the q_k (as `factor` for the d_k) */
  double median_bound;  /* median_factor median_floor: B passes when its median is within it */
} pc_envelope_fig;

typedef struct pc_tensor {
  char *path; /* the dataset's path; folder mode: "FILE:DATASET", or FILE alone for a tensor
                 that stands for a whole file (only on one side, not a dump, unreadable) */
  char *file; /* folder mode: the file's path relative to the folders; NULL otherwise */
  pc_verdict verdict;
  char *message;    /* why (skipped, error, dtype/shape mismatch), or NULL */
  char *note;       /* e.g. "float16 vs bfloat16 compared in float32 ULPs", or NULL */
  pc_dtype dtype_a; /* logical dtype; PC_DTYPE_NONE when absent or non-numeric */
  pc_dtype dtype_b;
  pc_dtype compare; /* compare dtype (component dtype for complex); NONE when not compared */
  bool is_complex;
  /* Shapes: rank entries each, owned by the tensor (NULL when the rank is 0 or unknown). Not
   * arrays of PC_MAX_RANK: two of those were a quarter of a tensor's record, 10 MB of a run
   * over 20,000 tensors that are nearly all of rank 1 to 4 (docs/performance.md). */
  int rank;       /* A's shape (B's when missing in A); -1 when unknown */
  uint64_t *dims; /* rank entries */
  int rank_b;     /* B's shape, for shape_mismatch; -1 when unknown */
  uint64_t *dims_b;
  uint64_t reduction_length; /* K from the dataset's attributes (A's, else B's); 0 = unknown */
  pc_dtype accumulation;     /* accumulation dtype from the attributes; NONE = unknown */
  char *module_type; /* the dataset attribute `module_type` (A's, else B's), the class of the
                        module that produced the tensor (e.g. "BatchNorm2d"); NULL = unknown */
  pc_tol tol;        /* the tolerance applied */
  pc_stats stats;
  /* The judge's record: the criteria that broke (none for pass, skipped and error; the
   * structural verdicts missing, shape and dtype mismatch need none), and for a failing tensor
   * that its upstream explains, the root cause: an index into pc_run.tensors; -1 for a root
   * cause and for every tensor that does not fail. */
  size_t nreasons;
  pc_reason reasons[PC_CRIT_COUNT_];
  long caused_by;
  pc_context context;
  pc_vs_reference vs_reference; /* three-way mode; present false without a reference */
  pc_envelope_fig envelope;     /* present false without an envelope */
  pc_metric_result metrics[PC_METRIC_COUNT_]; /* product metrics, by pc_metric */
  pc_diagnosis diagnosis; /* a failing or indeterminate float tensor's; kind NONE otherwise */
  char *did_you_mean;     /* missing: the closest unpaired path of the other side (a few edits
                             away, docs/report-json.md), or NULL */
} pc_tensor;

/** The dataset's own path in its file: t->path after "FILE:" in folder mode ("" for a tensor
 * that stands for a whole file), else t->path. Tolerances and execution order read this. */
const char *pc_tensor_dataset(const pc_tensor *t);

/* One file-level attribute of a dump (provenance: backend, torch_version, device, ...), as text. */
typedef enum pc_attr_kind { PC_ATTR_STRING = 0, PC_ATTR_NUMBER, PC_ATTR_BOOL } pc_attr_kind;

typedef struct pc_attr {
  char *name;
  char *value; /* numbers as C prints them ("16", "0.5"), booleans "true"/"false" */
  pc_attr_kind kind;
} pc_attr;

/* A side's file attributes in the file's order. In folder mode, merged over its files: an
 * attribute whose value differs between them reads PC_PROVENANCE_VARIES. */
typedef struct pc_provenance {
  pc_attr *attrs;
  size_t n;
} pc_provenance;

#define PC_PROVENANCE_VARIES "(varies across files)"

typedef enum pc_run_verdict { PC_RUN_PASS = 0, PC_RUN_DRIFT = 1, PC_RUN_ERROR = 2 } pc_run_verdict;

/** "pass", "drift", "error". */
const char *pc_run_verdict_name(pc_run_verdict v);

typedef struct pc_run {
  char *path_a;
  char *path_b;
  pc_tensor *tensors; /* A's creation order when A tracks it, else by name; then B-only ones */
  size_t ntensors;
  /* The library's own: how `tensors` is held. 0 for a malloc'd block (or NULL), as in a run
   * the caller builds; else the length of the temporary file mapping that holds the records of
   * a large run (docs/performance.md, "Large arrays in a file"), which pc_run_free unmaps. */
  size_t tensors_mapped;
  /* The library's own: where the tensors' path, file and shapes (dims, dims_b) of a run the
   * library built live, a few large blocks instead of a small one each (docs/performance.md,
   * "Names and shapes"); NULL in a run the caller builds, whose fields are malloc'd.
   * pc_run_free frees both kinds; free such a field yourself only if you malloc'd it. */
  struct pc_arena *names;
  size_t by_verdict[PC_VERDICT_COUNT_];
  pc_run_verdict verdict; /* its value is also the process exit code */
  /* Execution order (docs/tolerance-model.md, "Execution order"): order[k] is the index in
   * `tensors` of the k-th tensor executed; first_divergence is the first root cause in that
   * order, or -1 when nothing fails. */
  size_t *order;
  long first_divergence;
  char *path_ref;              /* the reference R of pc_compare_reference, or NULL when none */
  pc_provenance provenance[2]; /* A's and B's file attributes ([0] A, [1] B) */
  /* Indeterminate tensors do not fail the run (the caller's opt-in, CLI
   * --accept-indeterminate); they are still tallied and reported. Set before judging. */
  bool accept_indeterminate;
  char **warnings; /* things the caller should know that fail nothing (e.g. a tolerance rule
                      that matches no tensor); printed on stderr, listed in reports */
  size_t nwarnings;
} pc_run;

/** Whether the run's indeterminate tensors fail it (accept false, the default) or not, and the
 * run verdict again (CLI --accept-indeterminate; docs/tolerance-model.md, "Indeterminate"). */
void pc_run_accept_indeterminate(pc_run *run, bool accept);

#ifdef __cplusplus
}
#endif
#endif
