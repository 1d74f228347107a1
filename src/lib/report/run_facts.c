/* What a run's verdicts mean for every report and gate (run_facts.h). */
#include "run_facts.h"

#include "pc_internal.h"

/* Only compared tensors carry figures; other verdicts are decided before any element is read.
 * An indeterminate tensor was compared: its figures are why it is indeterminate. */
bool pc_report_has_stats(pc_verdict v) {
  return v == PC_VERDICT_PASS || v == PC_VERDICT_DRIFT || v == PC_VERDICT_INDETERMINATE;
}

bool pc_report_is_judged(pc_verdict v) {
  return v == PC_VERDICT_DRIFT || v == PC_VERDICT_INDETERMINATE;
}

bool pc_report_accepted(const pc_run *run, size_t i) {
  return run->accept_indeterminate && pc_run_at(run, i)->verdict == PC_VERDICT_INDETERMINATE;
}

bool pc_report_counts(const pc_run *run, pc_verdict v) {
  return pc_verdict_is_failure(v) && !(v == PC_VERDICT_INDETERMINATE && run->accept_indeterminate);
}

size_t pc_report_failures(const pc_run *run) {
  size_t n = 0;
  for (int v = 0; v < PC_VERDICT_COUNT_; v++)
    if (pc_report_counts(run, (pc_verdict)v))
      n += run->by_verdict[v];
  return n;
}

size_t pc_report_accepted_count(const pc_run *run) {
  return run->accept_indeterminate ? run->by_verdict[PC_VERDICT_INDETERMINATE] : 0;
}

double pc_report_mismatch_fraction(const pc_stats *s) {
  return s->count ? (double)s->mismatches / (double)s->count : 0;
}

bool pc_report_fails(const pc_run *run, const pc_gate *gate, size_t i) {
  if (!pc_verdict_is_failure(pc_run_at(run, i)->verdict) || pc_report_accepted(run, i))
    return false;
  return !gate || gate->tensors[i].fails;
}

pc_run_verdict pc_report_verdict(const pc_run *run, const pc_gate *gate) {
  return gate ? gate->verdict : run->verdict;
}
