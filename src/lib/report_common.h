/* Helpers shared by the report writers; internal to the library. */
#ifndef PC_REPORT_COMMON_H
#define PC_REPORT_COMMON_H

#include <paritycheck/compare.h> /* pc_tensor, pc_verdict */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/** The name of a tensor's dtype for reports: the dtype's own name, or for complex data numpy's
 * name ("complex64" for float32 components), "complex_<name>" where numpy has none. Writes into
 * buf and returns it. */
const char *pc_report_dtype_name(char *buf, size_t size, pc_dtype dt, bool is_complex);

/** True for the verdicts whose tensors were compared and so carry figures (pass, drift). */
bool pc_report_has_stats(pc_verdict v);

/** The row-major multi-index of t's worst element. */
void pc_report_worst_index(const pc_tensor *t, uint64_t index[PC_MAX_RANK]);

/** The first divergence of a run: its first tensor, in run order (execution order for dumps
 * that track it), whose verdict is a failure; NULL when none fails. Downstream tensors that a
 * bug spoiled come after it, so this is where to look first. */
const pc_tensor *pc_report_first_divergence(const pc_run *run);

#endif
