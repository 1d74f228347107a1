/* The report files of one run, written side by side (report_files.h). Over 2,000 small tensors,
 * writing JSON, Markdown, JUnit and HTML one after the other was 40 % of a full run's
 * instructions, on one core while the others idled (docs/performance.md, "Many small
 * tensors"); side by side, the run waits only for the longest, the JSON report. */
#include "report_files.h"
#include "isolate.h"

#include <pthread.h> /* pthread_create, pthread_join */
#include <stdbool.h> /* bool */
#include <string.h>  /* strcmp */

typedef struct job {
  pc_cli_file kind;
  const char *path;
  const pc_run *run;
  const pc_report_options *opts;
  const pc_tol_record *tols;
  int *rc;
  pc_error *err;
  pthread_t tid;
  bool threaded;
} job;

bool pc_cli_is_stdout(const char *path) {
  return path && strcmp(path, "-") == 0;
}

static int write_one(const job *j) {
  switch (j->kind) {
  case PC_CLI_JSON:
    return pc_report_json(j->path, j->run, j->opts, j->err);
  case PC_CLI_MARKDOWN:
    return pc_report_markdown(j->path, j->run, j->opts, j->err);
  case PC_CLI_JUNIT:
    return pc_report_junit(j->path, j->run, j->opts, j->err);
  case PC_CLI_HTML:
    return pc_report_html(j->path, j->run, j->opts, j->err);
  default:
    return pc_baseline_save_tols(j->path, j->run, j->opts->profile, j->tols, j->err);
  }
}

static void *run_job(void *arg) {
  job *j = arg;
  *j->rc = write_one(j);
  return NULL;
}

void pc_cli_write_files(const char *const paths[PC_CLI_FILES_], const pc_run *run,
                        const pc_report_options *opts, const pc_tol_record *tols,
                        int rc[PC_CLI_FILES_], pc_error err[PC_CLI_FILES_]) {
  job jobs[PC_CLI_FILES_];
  size_t n = 0;
  for (int k = 0; k < PC_CLI_FILES_; k++) {
    rc[k] = PC_OK;
    if (!paths[k])
      continue;
    job j = {.kind = (pc_cli_file)k,
             .path = paths[k],
             .run = run,
             .opts = opts,
             .tols = tols,
             .rc = &rc[k],
             .err = &err[k]};
    if (pc_cli_is_stdout(paths[k])) /* standard output may block on a reader: not held */
      run_job(&j);
    else
      jobs[n++] = j;
  }
  if (n == 0)
    return;
  /* Held before the threads start, so that they inherit the mask: a stop signal then waits
   * until every file is in place or was never made. */
  pc_cli_hold_stop_signals(true);
  for (size_t i = 0; i < n; i++) {
    jobs[i].threaded = n > 1 && pthread_create(&jobs[i].tid, NULL, run_job, &jobs[i]) == 0;
    if (!jobs[i].threaded) /* one file, or no thread to be had: this thread writes it */
      run_job(&jobs[i]);
  }
  for (size_t i = 0; i < n; i++)
    if (jobs[i].threaded)
      pthread_join(jobs[i].tid, NULL);
  pc_cli_hold_stop_signals(false);
}
