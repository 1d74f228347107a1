/* paritycheck report writers: a run (pc_run) rendered as text for people or JSON for machines. */
#ifndef PARITYCHECK_REPORT_H
#define PARITYCHECK_REPORT_H

#include <paritycheck/compare.h> /* pc_run */
#include <paritycheck/error.h>   /* pc_error */

#include <stdbool.h> /* bool */
#include <stdio.h>   /* FILE */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_text_options {
  bool color; /* ANSI colours (the CLI sets it only on a TTY) */
  bool quiet; /* only failing tensors and the summary */
} pc_text_options;

/** Write the text report: one line per tensor, then a summary line. */
int pc_report_text(FILE *out, const pc_run *run, const pc_text_options *opts, pc_error *err);

/** Write the JSON report (docs/report-json.md) to `path`, or to stdout when path is "-". */
int pc_report_json(const char *path, const pc_run *run, pc_error *err);

#ifdef __cplusplus
}
#endif
#endif
