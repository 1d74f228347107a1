/* What a run's verdicts mean for every report and for the gates: which tensors carry figures,
 * which failures the run accepts, which tensors fail it. The bottom of the report room with
 * escape.h and report_file.h: it calls nothing above it. Internal. */
#ifndef PC_RUN_FACTS_H
#define PC_RUN_FACTS_H

#include <paritycheck/baseline.h> /* pc_gate */
#include <paritycheck/result.h>   /* pc_run, pc_tensor, pc_verdict, pc_stats */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */

/* Room for one line of figures or reasons: a worst element with two complex values at full
 * precision and its index, or a verdict's reason with a message (a writer's line, a gate's
 * note). */
enum { PC_REASON_MAX = 2048 };

/** True for the verdicts whose tensors were compared and so carry figures (pass, drift,
 * indeterminate). */
bool pc_report_has_stats(pc_verdict v);

/** True for the verdicts the judge reached from the figures, with reasons and a diagnosis
 * (drift, indeterminate). */
bool pc_report_is_judged(pc_verdict v);

/** Whether run tensor i is indeterminate and the run accepts that (pc_run.accept_indeterminate):
 * reported, but no failure. */
bool pc_report_accepted(const pc_run *run, size_t i);

/** Whether tensors of verdict v fail this run: a failure the run does not accept. */
bool pc_report_counts(const pc_run *run, pc_verdict v);

/** The run's tensors that fail it (pc_report_counts), from run->by_verdict. */
size_t pc_report_failures(const pc_run *run);

/** The indeterminate tensors the run accepts (0 when it accepts none). */
size_t pc_report_accepted_count(const pc_run *run);

/** mismatches / count; 0 for an empty tensor. */
double pc_report_mismatch_fraction(const pc_stats *s);

/** Whether run tensor i fails: its verdict is a failure and, when a gate is given, it fails
 * the gate too (a failure the baseline accepted does not). */
bool pc_report_fails(const pc_run *run, const pc_gate *gate, size_t i);

/** The verdict that decides the exit code: the gate's when there is one, else the run's. */
pc_run_verdict pc_report_verdict(const pc_run *run, const pc_gate *gate);

#endif
