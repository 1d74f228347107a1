/* The judge (docs/tolerance-model.md): the one place where verdicts are decided. It runs in two
 * steps. pc_judge_tensor, as soon as a tensor's figures are complete, tests the criteria that
 * need only the tensor itself and records each broken one as a pc_reason. pc_judge_run, once the
 * whole run is compared, puts the tensors in execution order, applies the run-level allowances
 * (the run's own error trend, the noise floor), links each failing tensor that its upstream
 * explains to its root cause, and tallies the verdicts. The report writers only render what
 * these two recorded. */
#ifndef PC_JUDGE_H
#define PC_JUDGE_H

#include <paritycheck/result.h>

/** Judge one compared tensor on its own: sets t->verdict (pass or drift; an error stays an
 * error) and t->reasons. */
void pc_judge_tensor(pc_tensor *t);

/* Why an execution order inferred from names may not be call order (docs/tolerance-model.md,
 * "Execution order"): a file's forward tensors without execution_index, at least two, are in
 * the order of their names (a file that does not track creation order), and their names do not
 * sort into call order. */
typedef enum pc_order_doubt_kind {
  PC_ORDER_SURE = 0,      /* no such doubt */
  PC_ORDER_NO_CALL_INDEX, /* `example` has no call index (NNN_) */
  PC_ORDER_CALL_INDEX     /* `before` comes first in file order, and its call index is not
                             below `example`'s (unequal widths, or several numberings) */
} pc_order_doubt_kind;

typedef struct pc_order_doubt {
  pc_order_doubt_kind kind;
  long example, before; /* indices in the run's tensors; -1 when none */
} pc_order_doubt;

/** Judge the run as a whole (see above): fills run->order, every tensor's context, the
 * run-level allowances' effect on verdicts and reasons, caused_by, first_divergence,
 * by_verdict and the run verdict, and *doubt (unless NULL) with the first file, in run order,
 * whose inferred order may not be call order. Returns PC_ENOMEM when out of memory (the run is
 * then judged tensor by tensor only, in run order). */
int pc_judge_run(pc_run *run, pc_order_doubt *doubt);

/** Three-way mode, after pc_judge_run and once every tensor's vs_reference is attached: a tensor
 * that fails only magnitude criteria passes when its conditioning, measured by A's distance to
 * the reference, explains B's distance to it (docs/tolerance-model.md); then the cascades and
 * tallies are made again. Returns PC_OK. */
int pc_judge_reference(pc_run *run);

#endif
