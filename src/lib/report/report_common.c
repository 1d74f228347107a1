/* What every report writer does around its rows (report_common.h): the checks, the file, the
 * options it reads. */
#include "report_common.h"

#include "pc_internal.h"

#include <stdbool.h> /* bool */

int pc_report_check(const pc_run *run, const pc_report_options *opts, const char *who,
                    pc_error *err) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  if (!run)
    return pc_error_set(err, PC_EUSAGE, "%s: a run is required", who);
  if (opts && (opts->version < 1 || opts->version > PC_REPORT_OPTIONS_VERSION))
    return pc_error_set(err, PC_EUSAGE, "%s: options of version %d, not %d", who, opts->version,
                        PC_REPORT_OPTIONS_VERSION);
  if (gate && gate->ntensors != run->ntensors)
    return pc_error_set(err, PC_EUSAGE, "%s: the gate was made for another run", who);
  return PC_OK;
}

int pc_report_write(const char *path, const pc_run *run, const pc_report_options *opts,
                    const char *who, const char *what, pc_report_put_fn put, pc_error *err) {
  int rc = pc_report_check(run, opts, who, err);
  if (rc < 0 || !path)
    return rc < 0 ? rc : pc_error_set(err, PC_EUSAGE, "%s: a path is required", who);
  pc_report_file f;
  if ((rc = pc_report_open(&f, path, err)) < 0)
    return rc;
  bool oom = put(f.f, run, opts) < 0;
  f.failed = f.failed || oom; /* no partial report stays behind */
  rc = pc_report_close(&f, what, err);
  return oom ? pc_error_set(err, PC_ENOMEM, "out of memory writing %s", what) : rc;
}

unsigned pc_report_threads(const pc_report_options *opts) {
  if (opts && opts->version < 2) /* no such field */
    return 1;
  return pc_threads_or_cores(opts ? opts->threads : 0); /* NULL: PC_REPORT_OPTIONS_INIT's 0 */
}

void pc_report_beat(const pc_report_options *opts) {
  if (opts && opts->version >= 3 && opts->progress)
    opts->progress(opts->progress_user);
}

size_t pc_report_nsettings(const pc_report_options *opts) {
  return opts && opts->version >= 4 && opts->settings ? opts->nsettings : 0;
}

const char *pc_report_profile(const pc_report_options *opts) {
  return opts && opts->profile ? opts->profile : "default";
}
