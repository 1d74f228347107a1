/* The result model's vocabulary (paritycheck/result.h): verdict names, which verdicts fail a
 * run, and a tensor's dataset path. Below every room, so that the judge and the writers read a
 * result without calling into the comparator that makes it. */
#include <paritycheck/result.h>

#include <string.h> /* strlen, strncmp */

static const char *const pc_verdict_names[PC_VERDICT_COUNT_] = {
    "pass",           "drift",   "missing_in_a", "missing_in_b", "shape_mismatch",
    "dtype_mismatch", "skipped", "error",        "indeterminate"};

const char *pc_verdict_name(pc_verdict v) {
  return (unsigned)v < PC_VERDICT_COUNT_ ? pc_verdict_names[v] : "unknown";
}

bool pc_verdict_is_failure(pc_verdict v) {
  return v != PC_VERDICT_PASS && v != PC_VERDICT_SKIPPED && v != PC_VERDICT_ERROR;
}

const char *pc_run_verdict_name(pc_run_verdict v) {
  switch (v) {
  case PC_RUN_PASS:
    return "pass";
  case PC_RUN_DRIFT:
    return "drift";
  case PC_RUN_ERROR:
    return "error";
  }
  return "unknown";
}

const char *pc_tensor_dataset(const pc_tensor *t) {
  if (!t->file)
    return t->path;
  size_t n = strlen(t->file);
  return strncmp(t->path, t->file, n) == 0 && t->path[n] == ':' ? t->path + n + 1 : "";
}
