/* What the report writers share, by the file that defines it; internal to the library. What
 * the baseline and approval gates share with the writers has headers of its own, below this
 * one: json_util.h, and the room's bottom, run_facts.h, escape.h and report_file.h. */
#ifndef PC_REPORT_COMMON_H
#define PC_REPORT_COMMON_H

#include "escape.h"      /* pc_report_put_xml, pc_report_columns, ... */
#include "report_file.h" /* pc_report_file */
#include "run_facts.h"   /* pc_report_has_stats, pc_report_fails, ... */

#include <paritycheck/baseline.h> /* pc_gate */
#include <paritycheck/error.h>    /* pc_error */
#include <paritycheck/report.h>   /* pc_sort, pc_report_options */
#include <paritycheck/result.h>   /* pc_tensor, pc_verdict */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */
#include <stdio.h>   /* FILE */

/* ---- report_rows.c: the rows, their causes and their order ---- */

/** The first divergence of a run as the judge recorded it (pc_run.first_divergence: the first
 * root cause in execution order); NULL when it is -1 (nothing fails) or out of range. When the
 * run accepts that tensor (an indeterminate one), the first tensor that fails the run in
 * execution order, or NULL. */
const pc_tensor *pc_report_first_divergence(const pc_run *run);

/** Position of run tensor i in execution order (pc_run.order); i itself for a run without one. */
size_t pc_report_exec_index(const pc_run *run, size_t i);

/** The tensor executed k-th: run->order[k], or k for a run without an order. */
size_t pc_report_exec_at(const pc_run *run, size_t k);

/** The root cause of run tensor i as the judge recorded it (pc_tensor.caused_by, followed to
 * its root), or -1 when i is not a failing tensor that an upstream failure explains (a root, a
 * pass, ...). A link that does not name another failing tensor of the run counts as none. */
long pc_report_root(const pc_run *run, size_t i);

/** A failing tensor that no upstream failure explains (docs/reports.md, "Reasons and root
 * causes"). */
bool pc_report_is_root(const pc_run *run, size_t i);

/* The cascades of a run: the tensors each root cause explains, in execution order. */
typedef struct pc_cascades {
  size_t *first;   /* members of root i: members[first[i]] .. members[first[i + 1] - 1] */
  size_t *members; /* indices into run->tensors */
} pc_cascades;

/** Build c from the run's caused_by links: PC_OK, or PC_ENOMEM (c is then empty). */
int pc_report_cascades(pc_cascades *c, const pc_run *run);

/** The number of tensors that root i explains (0 for any other tensor). */
size_t pc_report_caused_count(const pc_cascades *c, size_t i);

void pc_report_cascades_free(pc_cascades *c);

/** The rows of a table in `sort` order (docs/reports.md, "Row order"): a malloc'ed permutation
 * of 0 .. ntensors - 1 that the caller frees, or NULL when out of memory. */
size_t *pc_report_row_order(const pc_run *run, const pc_gate *gate, pc_sort sort);

/* ---- report_cells.c: a row's cells as text ---- */

/* "[" and "]", up to 20 digits and a comma per dimension, NUL. */
enum { PC_DIMS_TEXT_MAX = 2 + PC_MAX_RANK * 21 + 1 };

/* One value of the worst pair: "(re, im)" at 17 digits, each at most 24 characters, or a
 * 64-bit integer with its sign; NUL. */
enum { PC_WORST_VALUE_MAX = 2 * 24 + 5 };

/** The name of a tensor's dtype for reports: the dtype's own name, or for complex data numpy's
 * name ("complex64" for float32 components), "complex_<name>" where numpy has none. Writes into
 * buf and returns it. */
const char *pc_report_dtype_name(char *buf, size_t size, pc_dtype dt, bool is_complex);

/** One dtype when both sides agree, else "a/b", with "-" for a side that has none. */
void pc_report_dtypes(char *buf, size_t size, const pc_tensor *t);

/** "[2,3]" ("[]" for a scalar), or "-" when rank < 0. Writes into buf and returns it. */
const char *pc_report_dims(char buf[PC_DIMS_TEXT_MAX], int rank, const uint64_t *dims);

/* One diagnosis line (pc_diagnosis_text): its longest is about 110 characters. */
enum { PC_DIAGNOSIS_MAX = 160 };

/** t's diagnosis as one line (pc_diagnosis_text), or empty when it has none. */
void pc_report_diagnosis(char *buf, size_t size, const pc_tensor *t);

/** The row-major multi-index of t's worst element. */
void pc_report_worst_index(const pc_tensor *t, uint64_t index[PC_MAX_RANK]);

/** "8 tensors: 1 pass, 5 fail (2 drift, 1 shape_mismatch, ...), 1 error, 1 skipped", the parts
 * that are zero left out (but for the pass count); indeterminate tensors that the run accepts
 * are no failure: ", 1 indeterminate accepted" after the failures. */
void pc_report_put_tally(FILE *out, const pc_run *run);

/* One row of the provenance block (docs/reports.md, "Provenance"): an attribute of A's files or
 * B's, A's in A's order then B's own, with each side's value or NULL. */
typedef struct pc_prov_row {
  const char *name;
  const pc_attr *a, *b;
  bool differs; /* on one side only, or with two values */
} pc_prov_row;

/** The provenance rows of run into *rows (malloc'd; free it), *n of them, 0 when neither side
 * has attributes. PC_ENOMEM. */
int pc_report_provenance(const pc_run *run, pc_prov_row **rows, size_t *n);

/** A row's value of side 0 (A) or 1 (B) as text, "-" where the side has none. */
const char *pc_report_prov_value(const pc_prov_row *r, int side);

/** Why a tensor that is not a pass has its verdict: for a drift or an indeterminate tensor the
 * criteria the judge recorded (pc_report_reasons at 3 digits) and "; diagnosis: TEXT" when it has
 * one, for the other verdicts "only in A", "only in B" (or the
 * message, e.g. "file only in A"; then "; did you mean X?" when there is a suggestion),
 * "shape [2,3] vs [3,2]" or the message. Empty for a pass. */
void pc_report_reason(char *buf, size_t size, const pc_tensor *t);

/** The criteria a drift broke, as the judge recorded them (t->reasons), in its order, joined by
 * "; ": "rel_rms 1.2e-05 > limit 8.9e-06", "mismatch_fraction 0.001 > limit 0 (1 of 1000
 * elements)", "nan_mismatch 1 > limit 0", "top1_agreement 0.98 < limit 0.99"; figures at 3
 * significant digits, or 17 with `full`. The verdict's name ("drift", "indeterminate") for a
 * judged tensor without a recorded reason; empty for every other verdict. */
void pc_report_reasons(char *buf, size_t size, const pc_tensor *t, bool full);

/** True when the judge recorded product metrics for t (docs/metrics.md, "Product metrics"). */
bool pc_report_has_metrics(const pc_tensor *t);

/** t's product metrics in pc_metric order, joined by ", ": "top1_agreement 0.998 (min 0.99),
 * topk_overlap@5 0.97 (min 0.9), kl_divergence 0.0021 (max 0.001, fails)"; figures at 3
 * significant digits, or 17 with `full`. Empty without metrics. */
void pc_report_metrics(char *buf, size_t size, const pc_tensor *t, bool full);

/** "worst [2,1,2]: a=1.5, b=1.5000001": each value with the fewest significant digits, from 3 up,
 * that tell a and b apart (both at 3 when they are equal), or with `full`, at 17 (integers are
 * exact either way). Empty when t has no worst element. */
void pc_report_worst_text(char *buf, size_t size, const pc_tensor *t, bool full);

/** One side (0: a, 1: b) of t's worst pair: an integer pair exactly, in decimal; otherwise with
 * digits[0] significant digits (digits[1] for the imaginary part), a complex value as
 * "(re, im)". */
void pc_report_worst_value(char *buf, size_t size, const pc_tensor *t, int side,
                           const int digits[2]);

/** "baseline" or "approvals": what the gate judges against. */
const char *pc_report_gate_noun(const pc_gate *gate);

/** " at factor 2" for a baseline, " (slack 0.25)" for approvals. */
void pc_report_gate_tail(char *buf, size_t size, const pc_gate *gate);

/** ", 1 only in the baseline" or ", 2 stale approvals"; empty when there are none. */
void pc_report_gate_extra(char *buf, size_t size, const pc_gate *gate);

/** The heading of the tables' gate column: "baseline" or "approval". */
const char *pc_report_gate_column(const pc_gate *gate);

/** How a gate judged tensor i of run, for tables: the change ("worse", "new", ...) against a
 * baseline; against approvals "approved" for a failure that its approval lets pass, "new" or
 * "worse" for one that fails the gate, "better" for an approved tensor now within the profile,
 * "-" for the rest (they pass without one). "" without a gate. */
const char *pc_report_change(const pc_gate *gate, const pc_run *run, size_t i);

/** The label of ULP histogram bucket k: "0", "1", "2-3", "4-7", ... */
void pc_report_bucket_label(char *buf, size_t size, int k);

/** The number of ULP histogram buckets up to the last nonempty one (0 when all are empty). */
int pc_report_hist_used(const pc_stats *s);

/* Index of the p99 level in pc_quantile_levels, the quantile the tables show. */
enum { PC_REPORT_P99 = 2 };

/** True when any compared tensor of the run has quantiles (so tables get a p99 column). */
bool pc_report_any_quantiles(const pc_run *run);

/** Three-way mode: which side is closer to the reference R, "a (rel_rms 1.1e-07 vs 0.00034)"
 * ("b ...", "tie ..."), both sides' rel_rms at 3 significant digits, and their max_ulp too when
 * the rel_rms are equal; empty when t has no figures against R. */
void pc_report_closer_text(char *buf, size_t size, const pc_tensor *t);

/** Three-way mode: "a closer on 20 tensors, b on 3, 1 tie; 2 not compared with R". */
void pc_report_closer_tally(char *buf, size_t size, const pc_run *run);

/* ---- report_common.c: around the rows ---- */

/* What a writer puts in its file: PC_OK, or PC_ENOMEM (then no file is left). */
typedef int (*pc_report_put_fn)(FILE *out, const pc_run *run, const pc_report_options *opts);

/** A writer's whole body: pc_report_check (as `who`), then the file opened, put, and closed
 * (pc_report_open/close: whole or not at all); a put out of memory is PC_ENOMEM naming `what`
 * ("the JUnit report"). */
int pc_report_write(const char *path, const pc_run *run, const pc_report_options *opts,
                    const char *who, const char *what, pc_report_put_fn put, pc_error *err);

/** The writers' common checks: a run, options of this version (or NULL), a gate made for this
 * run. PC_EUSAGE naming `who`. */
int pc_report_check(const pc_run *run, const pc_report_options *opts, const char *who,
                    pc_error *err);

/** The profile name for headers. */
const char *pc_report_profile(const pc_report_options *opts);

/** How many of opts->settings the writers show: 0 without options or before version 4. */
size_t pc_report_nsettings(const pc_report_options *opts);

/** The threads that format a report's rows: opts->threads, 0 (and NULL options, the
 * defaults) meaning one per core; 1 for options of version 1, which lack the field. */
unsigned pc_report_threads(const pc_report_options *opts);

/** opts->progress, when the options have one (version 3). */
void pc_report_beat(const pc_report_options *opts);

/* ---- trajectory.c ---- */

/* One step of a folder run's trajectory (docs/training-runs.md, "The trajectory view"). */
typedef struct pc_traj_step {
  size_t tensor; /* the step's loss: an index into run->tensors */
  double a, b;   /* its value on A and on B */
  double gap;    /* |b - a| / |a|; inf where a = 0 and b is not, 0 where both are */
  double band;   /* the envelope's pass bound on |b - a| (factor x floor), 0 without one */
} pc_traj_step;

/** The loss of each step of a folder run, in run order, which is step order: for each step's
 * file (pc_tree_is_step), its first compared scalar whose dataset path holds "loss" in any case.
 * *first: the index of the step whose file holds the run's first divergence, or -1. Fewer than
 * two steps give *n = 0 (no view). *steps is malloc'd (free it); PC_ENOMEM. */
int pc_report_trajectory(const pc_run *run, pc_traj_step **steps, size_t *n, long *first);

/* ---- ordered.c ---- */

/** Writes row k of a report to out (a memory stream of pc_report_put_ordered); PC_OK or an
 * error code, which ends the report. */
typedef int (*pc_report_row_fn)(FILE *out, size_t k, void *ctx);

/** Writes rows 0 to n - 1 to out in order, exactly the bytes that put(out, k, ctx) for k = 0,
 * 1, ... would write, formatted by up to pc_report_threads(opts) threads (this one among them;
 * 1: put writes straight to out), calling pc_report_beat(opts) as rows are written. put must only
 * read shared state. Memory: a chunk of rows' text per thread. Returns PC_OK, the error of the
 * first failing row in row order, or PC_ENOMEM; after an error out holds a prefix of the rows.
 * Write errors stay in out. */
int pc_report_put_ordered(FILE *out, size_t n, const pc_report_options *opts, pc_report_row_fn put,
                          void *ctx);

#endif
