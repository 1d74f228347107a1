/* paritycheck report writers: a run (pc_run) rendered as text for people, JSON for machines,
 * Markdown for pull requests, JUnit XML for CI systems and a self-contained HTML page. Every
 * writer reads only the run (and the gate, when a baseline is in use), so one comparison feeds
 * them all; none judges: verdicts, reasons (pc_tensor.reasons), root causes (caused_by) and the
 * first divergence are the judge's record, rendered as it is. A run built by hand must fill
 * that record (caused_by -1 and first_divergence -1 where there is none; order may be NULL, for
 * execution order = run order). Formats: docs/report-json.md and docs/reports.md. */
#ifndef PARITYCHECK_REPORT_H
#define PARITYCHECK_REPORT_H

#include <paritycheck/baseline.h> /* pc_gate */
#include <paritycheck/compare.h>  /* pc_run */
#include <paritycheck/error.h>    /* pc_error */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdio.h>   /* FILE */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_text_options {
  bool color;          /* ANSI colours (the CLI sets it only on a TTY) */
  bool quiet;          /* only failing tensors and the summary */
  bool verbose;        /* a line of error statistics under every compared tensor */
  const pc_gate *gate; /* the run judged against a baseline, or NULL */
} pc_text_options;

/** Write the text report: one line per tensor (a drift's reasons under it), then a summary
 * line (and a gate line when opts->gate is set); quiet lists the root causes before the tensors
 * they explain. opts may be NULL (no colour, everything, no gate). */
int pc_report_text(FILE *out, const pc_run *run, const pc_text_options *opts, pc_error *err);

/* Row order of the Markdown and HTML tables (docs/reports.md, "Row order"). */
typedef enum pc_sort {
  PC_SORT_WORST = 0, /* failures first, then by mismatch fraction, max_ulp and max_rel */
  PC_SORT_ORDER      /* run order: execution order for dumps that track it */
} pc_sort;

/* Markdown rows shown when the caller does not say: enough for a review, short enough for a
 * pull-request comment. */
enum { PC_REPORT_MAX_ROWS = 50 };

/* Options of the file writers; a NULL pointer means every default. */
typedef struct pc_report_options {
  const char *profile; /* tolerance profile named in headers; NULL means "default" */
  pc_sort sort;        /* row order of the tables */
  size_t max_rows;     /* Markdown rows before the rest is counted; 0: PC_REPORT_MAX_ROWS */
  const pc_gate *gate; /* the run judged against a baseline, or NULL */
} pc_report_options;

/* Each writer below writes to `path`, or to standard output when path is "-", and returns
 * PC_EIO (naming the path) when it cannot write. */

/** The JSON report (docs/report-json.md). */
int pc_report_json(const char *path, const pc_run *run, const pc_report_options *opts,
                   pc_error *err);

/** A GitHub-flavoured Markdown delta table (docs/reports.md, "Markdown"). */
int pc_report_markdown(const char *path, const pc_run *run, const pc_report_options *opts,
                       pc_error *err);

/** JUnit XML: one testcase per tensor (docs/reports.md, "JUnit"). */
int pc_report_junit(const char *path, const pc_run *run, const pc_report_options *opts,
                    pc_error *err);

/** One self-contained HTML page: summary, sortable delta table, ULP histograms as inline SVG
 * (docs/reports.md, "HTML"). */
int pc_report_html(const char *path, const pc_run *run, const pc_report_options *opts,
                   pc_error *err);

#ifdef __cplusplus
}
#endif
#endif
