/* Every report of one run: the text report (unless another report takes standard output), the
 * GitHub annotations, then the report files side by side (report_files.h). */
#ifndef PC_CLI_REPORTS_H
#define PC_CLI_REPORTS_H

#include "cli_options.h"

#include <paritycheck/paritycheck.h>

/** Writes every report c asks for of `run`, judged by `gate` (NULL: none), each recording the
 * run's settings (trust_cli.h). A report to standard output that a reader who left cut short
 * (| head) ends quietly and counts as written. PC_OK, or the first failing report's error after
 * a message for every report that failed; PC_ENOMEM when the settings cannot be made. */
int pc_cli_write_reports(const pc_cli *c, const pc_run *run, const pc_gate *gate);

#endif
