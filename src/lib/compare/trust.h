/* The trust model's checks on a pair and a run (docs/robustness.md, "Trust model"): B is the
 * file under test, so nothing it carries may widen its own allowance. Its tolerance-affecting
 * attributes are ignored (or overruled by A's) unless pc_options.trust_b_metadata, a dtype
 * attribute that the data contradicts is an error, a B stored coarser than the tolerance
 * model's precision fails, and a run that compared nothing finite does not pass. Internal to
 * the library. */
#ifndef PC_TRUST_H
#define PC_TRUST_H

#include "comparator.h"

#include <paritycheck/error.h>
#include <paritycheck/result.h>

#include <stdbool.h> /* bool */

/** Appends `text` to t's note ("; " between notes). PC_ENOMEM. */
int pc_trust_add_note(pc_tensor *t, const char *text);

/** The attributes that change a tensor's tolerance, into p->t: reduction_length,
 * accumulation_dtype and module_type are A's; B's only where A has none and p->trust_b. A
 * reduction_length beyond the largest tensor of its side's file is capped there. Each value of
 * B's that is ignored or overruled, and each cap, is a note on the tensor; p->ignored_b counts
 * the tensors where B's were ignored. PC_ENOMEM. */
int pc_trust_metadata(pc_pair *p);

/** A float B whose logical dtype is coarser than the precision its tolerance claims
 * (precision_u, the `precision` key's unit roundoff; 0: none) and than A's cannot be judged at
 * that precision, and its coarseness must not widen the model's terms: the tensor is a
 * dtype_mismatch saying so. False (verdict set, *rc PC_OK or PC_ENOMEM) when it is one. */
bool pc_trust_precision(pc_pair *p, double precision_u, int *rc);

/** Before the run is judged: every compared tensor whose values contradict a side's dtype
 * attribute (pc_stats.not_representable_a/b: a "bfloat16" float32 whose low 16 bits are not
 * zero) becomes an error naming the side, its file and the count. PC_ENOMEM. */
int pc_trust_claims(pc_run *run);

/** A run that would pass although no tensor held a pair of finite values (every value NaN on
 * both sides, every tensor empty): PC_EEMPTY saying so; PC_OK otherwise. */
int pc_trust_check_finite(const pc_run *run, pc_error *err);

#endif
