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

/** Judge the run as a whole (see above): fills run->order, every tensor's context, the
 * run-level allowances' effect on verdicts and reasons, caused_by, first_divergence,
 * by_verdict and the run verdict. Returns PC_ENOMEM when out of memory (the run is then
 * judged tensor by tensor only, in run order). */
int pc_judge_run(pc_run *run);

/** Three-way mode, after pc_judge_run and once every tensor's vs_reference is attached: a tensor
 * that fails only magnitude criteria passes when its conditioning, measured by A's distance to
 * the reference, explains B's distance to it (docs/tolerance-model.md); then the cascades and
 * tallies are made again. Returns PC_OK. */
int pc_judge_reference(pc_run *run);

#endif
