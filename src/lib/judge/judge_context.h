/* Each file's plain-mode allowances (the trend, the noise floor) and the growth G; internal to the
 * judge room. docs/tolerance-model.md, "The run's trend" and "Noise-level tensors". */
#ifndef PC_JUDGE_CONTEXT_H
#define PC_JUDGE_CONTEXT_H

#include <paritycheck/result.h>

#include <stddef.h> /* size_t */

/* Terms of the sum that a tensor of (near) zero exact value holds when its dump records no
 * reduction_length: a bias gradient sums over batch and positions, up to 4096 in dumps of
 * models at the size parity tests run. */
#define PC_NOISE_TERMS 4096.0

/* The trend: the largest rel_rms among the last `window` tensors that passed the profile on
 * their own (no run-level allowance), since `start`: the trend restarts at each file and where
 * the gradients begin, so that it never carries one part of a run into another. Fed only by
 * tensors within the profile, it is at most the profile's rel_rms limit: it cannot feed
 * itself. The caller gives both arrays room for every tensor of the run, n = start = 0. */
typedef struct pc_trend {
  double *rel_rms, *scale; /* scale: their |scale_error|, for the scale they pass on */
  size_t n, start;
} pc_trend;

/* Judges the tensor at execution position k (run->order[k]) against its file's allowances, in
 * execution order (k = 0, 1, ...): sets its context (trend, noise scale, noise level), relaxes
 * the magnitude criteria they explain, and feeds the trend. A tensor with an envelope is only
 * marked judged. */
void pc_judge_context(pc_run *run, size_t k, pc_trend *tr);

/* G for this tensor: gradients (pc_in_backward_group) may grow more (docs/tolerance-model.md,
 * "Backward"); 1 without a trend. */
double pc_growth(const pc_tensor *t);

#endif
