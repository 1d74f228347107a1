/* The execution order of a run's tensors and a tensor's place in it; internal to the judge room.
 * docs/tolerance-model.md, "Execution order". */
#ifndef PC_JUDGE_ORDER_H
#define PC_JUDGE_ORDER_H

#include "judge.h"

#include <paritycheck/result.h>

#include <stdbool.h>
#include <stddef.h> /* size_t */

/* Sets run->order (the tensors in execution order: files in path order, each file's tensors by
 * execution_index, else as inferred from their paths) and each tensor's context.exec_index;
 * `doubt` says where an inferred order may be wrong. PC_OK or PC_ENOMEM. */
int pc_compute_order(pc_run *run, pc_order_doubt *doubt);

/* Two tensors of one file: both of the same file in folder mode, or both outside folder mode. */
bool pc_share_file(const pc_tensor *x, const pc_tensor *y);

/* The tensor lies in a backward group of the dumper's layout: its dataset's top-level group is
 * exactly "gradients" or "activation_grads" (never a word search: that group widens). */
bool pc_in_backward_group(const pc_tensor *t);

/* The module a tensor belongs to, for the cascade's link, into buf (cap bytes, cut to fit). */
void pc_module_of(const pc_tensor *t, char *buf, size_t cap);

#endif
