/* Helpers that every report writer shares (report_common.h). */
#include "report_common.h"

#include <stdio.h> /* snprintf */

const char *pc_report_dtype_name(char *buf, size_t size, pc_dtype dt, bool is_complex) {
  const char *name = pc_dtype_name(dt);
  /* numpy's names count the bits of both components; bfloat16 and float8 have none. */
  if (is_complex && dt == PC_DTYPE_FLOAT64)
    name = "complex128";
  else if (is_complex && dt == PC_DTYPE_FLOAT32)
    name = "complex64";
  else if (is_complex && dt == PC_DTYPE_FLOAT16)
    name = "complex32";
  else if (is_complex && dt != PC_DTYPE_NONE) {
    snprintf(buf, size, "complex_%s", name);
    return buf;
  }
  snprintf(buf, size, "%s", name);
  return buf;
}

/* Only compared tensors carry figures; other verdicts are decided before any element is read. */
bool pc_report_has_stats(pc_verdict v) {
  return v == PC_VERDICT_PASS || v == PC_VERDICT_DRIFT;
}

/* Row-major: the last dimension varies fastest. A zero dimension means no element, hence no worst;
 * the guard only keeps a malformed run from dividing by zero. */
void pc_report_worst_index(const pc_tensor *t, uint64_t index[PC_MAX_RANK]) {
  uint64_t flat = t->stats.worst_index;
  for (int k = t->rank - 1; k >= 0; k--) {
    uint64_t d = t->dims[k];
    index[k] = d ? flat % d : 0;
    flat = d ? flat / d : 0;
  }
}

const pc_tensor *pc_report_first_divergence(const pc_run *run) {
  for (size_t i = 0; i < run->ntensors; i++)
    if (pc_verdict_is_failure(run->tensors[i].verdict))
      return &run->tensors[i];
  return NULL;
}
