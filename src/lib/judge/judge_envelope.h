/* The judge against a measured envelope (docs/tolerance-model.md, "Envelope"): internal to the
 * judge room. */
#ifndef PC_JUDGE_ENVELOPE_H
#define PC_JUDGE_ENVELOPE_H

#include <paritycheck/result.h>

/** For a tensor with t->envelope.present, after its own criteria and structure were tested:
 * the envelope replaces the profile's magnitude criteria (NaN and inf mismatches stay), a
 * structure short of exact stands only where B is beyond the envelope, and the verdict is set
 * (pass, drift, indeterminate, or error when the envelope was measured on another A). Nothing
 * of the run takes part. */
void pc_judge_envelope(pc_tensor *t);

#endif
