/* The report files of one run, written side by side. */
#ifndef PC_CLI_REPORT_FILES_H
#define PC_CLI_REPORT_FILES_H

#include <paritycheck/paritycheck.h>

#include <stdbool.h> /* bool */

/* The report files the CLI writes, in the order their errors are printed. */
typedef enum pc_cli_file {
  PC_CLI_JSON,
  PC_CLI_MARKDOWN,
  PC_CLI_JUNIT,
  PC_CLI_HTML,
  PC_CLI_BASELINE,
  PC_CLI_FILES_ /* number of kinds; not a kind */
} pc_cli_file;

/** Whether a report path names standard output ("-"). */
bool pc_cli_is_stdout(const char *path);

/** Writes report k to paths[k] for every k whose path is not NULL; rc[k] and err[k] receive each
 * writer's result (PC_OK where paths[k] is NULL). A path "-" (standard output) is written
 * first, on this thread. The files are written each on its own thread where one can be started
 * (else on this one), with the stop signals held until all are in place (isolate.h). Every
 * writer only reads `run`, `opts` and `tols` (the baseline's record of the tolerance set), so the
 * files are the same as if written one by one. */
void pc_cli_write_files(const char *const paths[PC_CLI_FILES_], const pc_run *run,
                        const pc_report_options *opts, const pc_tol_record *tols,
                        int rc[PC_CLI_FILES_], pc_error err[PC_CLI_FILES_]);

#endif
