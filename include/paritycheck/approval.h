/* paritycheck approvals (docs/review.md): a delta table a reviewer signs. Sign-off writes a
 * YAML file that holds, per tensor, the figures accepted, who accepted them, when and why, and
 * the provenance of both inputs; the gate then passes a tensor that fails the profile as long as
 * it stays within its approved figures. The machine-made variant is the baseline (baseline.h);
 * both are judged into a pc_gate, which the report writers render. */
#ifndef PARITYCHECK_APPROVAL_H
#define PARITYCHECK_APPROVAL_H

#include <paritycheck/baseline.h> /* pc_gate */
#include <paritycheck/compare.h>  /* pc_run */
#include <paritycheck/error.h>    /* pc_error */

#ifdef __cplusplus
extern "C" {
#endif

/** How far an approved figure may grow on a later run before the approval no longer holds: a
 * figure x approved at x0 holds while x <= x0 (1 + slack); a floor metric (top1_agreement,
 * topk_overlap) while 1 - x <= (1 - x0)(1 + slack). Room for reruns on the same backends that
 * are not bitwise reproducible; a real regression grows far more. */
#define PC_APPROVAL_SLACK 0.25

typedef struct pc_approvals pc_approvals;

/* Who signs, and which tensors. pc_approvals_save refuses (PC_EUSAGE) a version other than 1
 * (no `tolerances`) and 2. */
#define PC_APPROVE_OPTIONS_VERSION 2
typedef struct pc_approve_options {
  int version;        /* PC_APPROVE_OPTIONS_VERSION */
  const char *by;     /* required: the reviewer's name */
  const char *reason; /* required: why the deltas are acceptable */
  const char *only; /* a glob (fnmatch, '*' crosses '/'): approve only matching paths; NULL: all */
  const char *date; /* "YYYY-MM-DD"; NULL: today (UTC, or SOURCE_DATE_EPOCH when set) */
  const pc_tol_record *tolerances; /* the run's tolerance set, recorded in the file; NULL: none */
} pc_approve_options;
#define PC_APPROVE_OPTIONS_INIT                                                                    \
  { PC_APPROVE_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL }

/** Write the approval file at `path`: every tensor of `run` that drifts (and matches
 * opts->only) with its figures, opts' signature and the content hashes of both inputs; the
 * approvals of `previous` (may be NULL) for other tensors are kept. Returns PC_EUSAGE without
 * by or reason, PC_EIO when an input or the file cannot be read or written, PC_ENOMEM. */
int pc_approvals_save(const char *path, const pc_run *run, const pc_approvals *previous,
                      const pc_approve_options *opts, pc_error *err);

/** Read an approval file. PC_EIO when it cannot be read, PC_EPARSE with "path:line:column: why"
 * when it is not one. Free *out with pc_approvals_free. */
int pc_approvals_load(pc_approvals **out, const char *path, pc_error *err);

/** pc_gate_tolerance_mismatch for approvals `ap` read from `path`, before any gate: adding
 * approvals made under one tolerance set to a file of another would mix them. */
const char *pc_approvals_tolerance_mismatch(const pc_approvals *ap, const char *path,
                                            const pc_tol_record *now, char *buf, size_t size);

/** Free approvals; NULL is accepted. */
void pc_approvals_free(pc_approvals *ap);

/** Judge `run` against approvals `ap` read from `path` (docs/review.md, "The gate"): a tensor
 * that fails the profile passes while it stays within its approval's figures; growth beyond
 * them fails naming the approval; an approval whose tensor is gone, or whose A input's content
 * changed, is stale. Reads both inputs of the run again for their content hashes. Free *out
 * with pc_gate_free. */
int pc_gate_approvals(pc_gate **out, const pc_approvals *ap, const char *path, const pc_run *run,
                      pc_error *err);

#ifdef __cplusplus
}
#endif
#endif
