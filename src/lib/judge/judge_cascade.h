/* The cascade fold and the tally; internal to the judge room. docs/tolerance-model.md,
 * "Cascades". */
#ifndef PC_JUDGE_CASCADE_H
#define PC_JUDGE_CASCADE_H

#include <paritycheck/result.h>

/* In execution order (run->order): links each failing tensor to the root cause of the nearest
 * earlier failure that explains it (caused_by) and sets run->first_divergence. Reads verdicts,
 * never changes one. PC_OK or PC_ENOMEM. */
int pc_link_cascades(pc_run *run);

/* The run's counts by verdict and its verdict (accept_indeterminate honoured). */
void pc_tally(pc_run *run);

#endif
