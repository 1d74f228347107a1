/* paritycheck baseline gate (docs/reports.md, "Baseline gate"): the per-tensor figures of an
 * accepted run are saved as JSON; a later run is judged against them, so that CI stops new drift
 * without failing on drift that was already accepted. */
#ifndef PARITYCHECK_BASELINE_H
#define PARITYCHECK_BASELINE_H

#include <paritycheck/error.h>  /* pc_error */
#include <paritycheck/result.h> /* pc_run, pc_verdict */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

/* How a tensor compares with the baseline. */
typedef enum pc_change {
  PC_CHANGE_NEW = 0,   /* not in the baseline, or compared there in another dtype */
  PC_CHANGE_WORSE,     /* newly fails, or a figure grew beyond the factor */
  PC_CHANGE_BETTER,    /* no longer fails, or a figure shrank beyond the factor (none grew) */
  PC_CHANGE_UNCHANGED, /* anything else */
  PC_CHANGE_COUNT_     /* number of enumerators; not a change */
} pc_change;

/** "new", "worse", "better", "unchanged". */
const char *pc_change_name(pc_change c);

/** The growth factor when the caller gives none: drift may double before the gate fails. */
#define PC_BASELINE_FACTOR_DEFAULT 2.0

/** Write the per-tensor figures of `run` to `path` as a baseline file (docs/reports.md).
 * `profile` names the tolerance profile for the record (NULL: "default"). */
int pc_baseline_save(const char *path, const pc_run *run, const char *profile, pc_error *err);

/* The tolerance set a run was judged under, as its caller loaded it, for a gate's record:
 * `source` names the layers in load order ("built-in defaults + profile tf32 + strict.yaml"),
 * `digest` identifies their content (any text; the CLI's is a hash of the files). Figures judged
 * under another set are not comparable: a gate refuses them (docs/reports.md, "Baseline gate"). */
typedef struct pc_tol_record {
  const char *source;
  const char *digest;
} pc_tol_record;

/** pc_baseline_save that also records `tols` (NULL: no record, as pc_baseline_save). */
int pc_baseline_save_tols(const char *path, const pc_run *run, const char *profile,
                          const pc_tol_record *tols, pc_error *err);

typedef struct pc_baseline pc_baseline;

/** Read a baseline file. PC_EIO when it cannot be read, PC_EPARSE when it is not a baseline
 * (the message says "path: why"), PC_ENOMEM. Free *out with pc_baseline_free. */
int pc_baseline_load(pc_baseline **out, const char *path, pc_error *err);

/** Free a baseline; NULL is accepted. */
void pc_baseline_free(pc_baseline *base);

/* What the baseline holds for one tensor. The figures are meaningful only for the verdicts that
 * carry them (pass, drift). */
typedef struct pc_baseline_entry {
  pc_verdict verdict;
  pc_dtype compare; /* PC_DTYPE_NONE when the tensor was not compared */
  uint64_t count;
  uint64_t mismatches;
  uint64_t nonfinite; /* nan_mismatches + inf_mismatches */
  uint64_t max_ulp;
  /* Figures the format gained later (docs/reports.md, "The baseline file"); a file written
   * before them leaves them unknown: has_aggregates or has_diagnosis false. */
  bool has_aggregates; /* rel_rms and scale_error below are known */
  double rel_rms;
  double scale_error; /* |scale_error| */
  bool has_diagnosis; /* diagnosis and structural below are known */
  pc_diagnosis_kind diagnosis;
  bool structural; /* the diagnosis is one rounding cannot produce */
} pc_baseline_entry;

/* What a gate judges against: a machine-made baseline (this header), or the approvals a reviewer
 * signed (approval.h, docs/review.md). */
typedef enum pc_gate_kind { PC_GATE_BASELINE = 0, PC_GATE_APPROVALS } pc_gate_kind;

/* The gate's judgement of one tensor of the run. */
typedef struct pc_gate_tensor {
  pc_change change;
  bool fails;             /* fails the gate: it fails now and is new or worse */
  bool in_baseline;       /* `base` below is filled (approvals: the tensor has an approval) */
  pc_baseline_entry base; /* the baseline's record of this path */
  char *approval;         /* approvals: "approved by NAME on DATE: REASON", what grew beyond
                             it, or why it is stale; NULL without an approval */
} pc_gate_tensor;

/* A run judged against a baseline or against approvals. */
typedef struct pc_gate {
  pc_gate_kind kind;
  char *path;              /* the baseline or approval file, as given */
  double factor;           /* growth factor, >= 1 */
  pc_gate_tensor *tensors; /* one per run tensor, in run order */
  size_t ntensors;         /* run->ntensors */
  size_t by_change[PC_CHANGE_COUNT_];
  size_t failures;        /* tensors that fail the gate */
  size_t baseline_only;   /* baseline tensors that the run does not have (approvals: stale
                             approvals, of tensors gone or of changed inputs) */
  pc_run_verdict verdict; /* error when the run's is; else drift when failures; else pass */
  char *profile;          /* the profile the baseline was saved with; NULL when it does not say */
  char *tol_source;       /* the tolerance set the file recorded (pc_tol_record); NULL when */
  char *tol_digest;       /* it records none (files written before the record existed) */
} pc_gate;

/** Judge `run` against `base` with growth factor `factor` (finite, >= 1; PC_EUSAGE otherwise).
 * `path` is the baseline's file name for reports. Free *out with pc_gate_free. */
int pc_gate_new(pc_gate **out, const pc_baseline *base, const char *path, const pc_run *run,
                double factor, pc_error *err);

/** When the baseline was saved with another tolerance profile than `profile` (NULL:
 * "default"), the warning to show, written into buf (and returned); else NULL. Figures judged
 * under other tolerances make "new" and "worse" less meaningful. */
const char *pc_gate_profile_warning(const pc_gate *gate, const char *profile, char *buf,
                                    size_t size);

/** When the gate's file recorded a tolerance digest and now->digest differs, why the gate
 * cannot judge this run, written into buf (and returned): its figures were judged under other
 * tolerances, so "new", "worse" and "better" would mean nothing. NULL when the digests agree or
 * either is missing. */
const char *pc_gate_tolerance_mismatch(const pc_gate *gate, const pc_tol_record *now, char *buf,
                                       size_t size);

/** Free a gate; NULL is accepted. */
void pc_gate_free(pc_gate *gate);

#ifdef __cplusplus
}
#endif
#endif
