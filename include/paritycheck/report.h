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
#include <paritycheck/error.h>    /* pc_error */
#include <paritycheck/result.h>   /* pc_run */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdio.h>   /* FILE */

#ifdef __cplusplus
extern "C" {
#endif

/* Row order of the Markdown and HTML tables (docs/reports.md, "Row order"). */
typedef enum pc_sort {
  PC_SORT_WORST = 0, /* failures first, then by mismatch fraction, max_ulp and max_rel */
  PC_SORT_ORDER      /* run order: execution order for dumps that track it */
} pc_sort;

/* Markdown rows shown when the caller does not say: enough for a review, short enough for a
 * pull-request comment. */
enum { PC_REPORT_MAX_ROWS = 50 };

/* One setting of the run that every report records, as the caller words it: the CLI gives the
 * tolerance files with their SHA-256, $PARITYCHECK_TOLERANCES when set and whether B's metadata
 * was trusted (docs/reports.md, "Settings"). */
typedef struct pc_report_setting {
  const char *name;
  const char *value;
} pc_report_setting;

/* Options of every writer; a NULL pointer means every default (PC_REPORT_OPTIONS_INIT). A
 * writer refuses (PC_EUSAGE) options of another version; version 1 (without `threads`) is still
 * read, as one thread, and versions 2 (without `progress`) and 3 (without `settings`). */
#define PC_REPORT_OPTIONS_VERSION 4
typedef struct pc_report_options {
  int version;         /* PC_REPORT_OPTIONS_VERSION */
  const char *profile; /* tolerance profile named in headers; NULL means "default" */
  pc_sort sort;        /* row order of the tables */
  size_t max_rows;     /* Markdown rows before the rest is counted; 0: PC_REPORT_MAX_ROWS */
  const pc_gate *gate; /* the run judged against a baseline or approvals, or NULL */
  bool color;          /* text: ANSI colours (the CLI sets it only on a TTY) */
  bool quiet;          /* text: only failing tensors and the summary */
  bool verbose;        /* text: a line of error statistics under every compared tensor */
  /* Threads that format the rows of the text, JSON and HTML reports, the calling thread among
   * them (0: one per core, as pc_options.threads; 1: the calling thread alone). The bytes do
   * not depend on it. */
  unsigned threads;
  /* Called every few rows while a report is written (version 3; NULL: not called), from the
   * thread that writes them, so that a caller watching a run can tell a long report (a million
   * tensors) from a stalled one. Several reports written side by side call it side by side. */
  void (*progress)(void *user);
  void *progress_user;
  /* Settings every report records, in this order (version 4; may be NULL when n is 0). */
  const pc_report_setting *settings;
  size_t nsettings;
} pc_report_options;
#define PC_REPORT_OPTIONS_INIT                                                                     \
  {                                                                                                \
    PC_REPORT_OPTIONS_VERSION, NULL, PC_SORT_WORST, 0, NULL, false, false, false, 0, NULL, NULL,   \
        NULL, 0                                                                                    \
  }

/* Each writer below has this signature: it writes to `path`, or to standard output when path
 * is "-", and returns PC_EIO (naming the path) when it cannot write. A report file is written
 * whole or not at all (docs/robustness.md, "Faults"). */

/** The text report: one line per tensor (a drift's reasons under it), then a summary line (and
 * a gate line when opts->gate is set); quiet lists the root causes before the tensors they
 * explain. */
int pc_report_text(const char *path, const pc_run *run, const pc_report_options *opts,
                   pc_error *err);

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

/** GitHub Actions annotations: "::error" a failing tensor with its reason, "::warning" for one
 * the gate accepts and for the run's warnings (docs/reports.md, "GitHub"). */
int pc_report_github(const char *path, const pc_run *run, const pc_report_options *opts,
                     pc_error *err);

/* Where untrusted text (a dataset name, a file path, a message built from file content) is
 * going (docs/reports.md, "Untrusted names"). */
typedef enum pc_escape_context {
  PC_ESCAPE_TERMINAL = 0, /* the text report, stderr, CI logs */
  PC_ESCAPE_MARKDOWN,     /* inside a Markdown code span in a table cell: also '|' as "\|" */
  PC_ESCAPE_XML,          /* XML (and HTML) text and attribute values: also & < > " ' as entities */
  PC_ESCAPE_HTML          /* HTML text: as XML, inside <bdi>...</bdi> */
} pc_escape_context;

/** s rendered for ctx so that no control character reaches the output raw: a backslash is
 * written "\\"; tab, newline and CR "\t", "\n", "\r"; the other C0 controls and DEL "\x1b";
 * C1 controls, the bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), U+2028,
 * U+2029, U+FFFE and U+FFFF "\u202e"; a byte that is not part of valid UTF-8 "\xff"; the '#'
 * and ':' that could start a GitHub Actions runner command ("##[" anywhere, "::" at a line's
 * start: docs/reports.md) "\x23", "\x3a" ("&#35;", "&#58;" in XML and HTML); every other
 * character stands for itself, but for the context's own specials. Like snprintf, writes at most
 * size bytes with the NUL (never part of a character's rendering) and returns the length of the
 * whole rendering; buf may be NULL when size is 0. */
size_t pc_escape(char *buf, size_t size, const char *s, pc_escape_context ctx);

/** pc_escape of the first len bytes of s, written to out. */
void pc_escape_put(FILE *out, const char *s, size_t len, pc_escape_context ctx);

#ifdef __cplusplus
}
#endif
#endif
