/* GitHub Actions annotations (docs/reports.md, "GitHub"): one workflow command a failing tensor,
 * "::error title=paritycheck DRIFT::PATH: REASON; diagnosis: TEXT", and "::warning" for a failure
 * the gate accepts, an indeterminate tensor the run accepts, and the run's warnings. Names and
 * messages come from the files, so they are escaped twice: control characters as visible escapes
 * (pc_escape), then GitHub's own: '%', CR and LF as %25, %0D, %0A, so that nothing can end the
 * command early or forge another. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <ctype.h>  /* toupper */
#include <stdio.h>  /* fputs, fputc */
#include <stdlib.h> /* malloc, free */

/* s, terminal-escaped, then with GitHub's message escapes. PC_ENOMEM. */
static int put_message(FILE *out, const char *s) {
  size_t len = pc_escape(NULL, 0, s, PC_ESCAPE_TERMINAL) + 1;
  char *text = malloc(len);
  if (!text)
    return PC_ENOMEM;
  pc_escape(text, len, s, PC_ESCAPE_TERMINAL);
  for (const char *p = text; *p; p++)
    if (*p == '%')
      fputs("%25", out);
    else
      fputc(*p, out); /* no CR or LF is left after pc_escape */
  free(text);
  return PC_OK;
}

/* accepted: NULL for a failure, else the words that say who accepted it. */
static int put_tensor(FILE *out, const pc_tensor *t, const char *accepted) {
  char why[PC_REASON_MAX];
  const char *verdict = pc_verdict_name(t->verdict);
  fprintf(out, "::%s title=paritycheck ", accepted ? "warning" : "error");
  for (const char *p = verdict; *p; p++)
    fputc(toupper((unsigned char)*p), out);
  fputs("::", out);
  int rc = put_message(out, t->path);
  pc_report_reason(why, sizeof why, t);
  if (rc == PC_OK && why[0]) {
    fputs(": ", out);
    rc = put_message(out, why);
  }
  if (accepted)
    fputs(accepted, out);
  fputc('\n', out);
  return rc;
}

static int put_annotations(FILE *out, const pc_run *run, const pc_report_options *opts) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  int rc = PC_OK;
  for (size_t i = 0; rc == PC_OK && i < run->ntensors; i++) {
    const pc_tensor *t = pc_run_at(run, i);
    pc_report_beat(opts);
    if (!pc_verdict_is_failure(t->verdict))
      continue;
    rc = put_tensor(out, t,
                    pc_report_accepted(run, i)      ? " (accepted by the run: indeterminate)"
                    : pc_report_fails(run, gate, i) ? NULL
                                                    : " (accepted by the gate)");
  }
  for (size_t i = 0; rc == PC_OK && i < run->nwarnings; i++) {
    fputs("::warning title=paritycheck::", out);
    rc = put_message(out, run->warnings[i]);
    fputc('\n', out);
  }
  return rc;
}

int pc_report_github(const char *path, const pc_run *run, const pc_report_options *opts,
                     pc_error *err) {
  return pc_report_write(path, run, opts, "pc_report_github", "the GitHub annotations",
                         put_annotations, err);
}
