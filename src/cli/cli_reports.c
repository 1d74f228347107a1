/* Every report of one run (cli_reports.h). */
#include "cli_reports.h"
#include "cli_diag.h"
#include "isolate.h"
#include "mpi_run.h"
#include "report_files.h"
#include "trust_cli.h"

#include <poll.h>   /* poll, POLLERR */
#include <stdio.h>  /* fputs, fileno */
#include <stdlib.h> /* getenv, free */
#include <unistd.h> /* isatty, STDOUT_FILENO */

/* Whether standard output is a pipe whose reader has left (paritycheck ... | head): Linux marks
 * its write end with POLLERR. */
static bool stdout_gone(void) {
  struct pollfd p = {STDOUT_FILENO, 0, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* A report to standard output that a reader who left cut short ends quietly, as in other Unix
 * tools: no message, the report files are still written and the exit code is still the run's
 * (docs/robustness.md, "Faults"). Any other write error is the run's error. */
static int report_rc(int rc, const char *path) {
  return rc < 0 && pc_cli_is_stdout(path) && stdout_gone() ? PC_OK : rc;
}

/* A report of a million tensors takes a while: its progress is a heartbeat (isolate.h). */
static void report_progress(void *user) {
  (void)user;
  pc_cli_heartbeat();
}

/* Every report from the one run, with options ro. */
static int write_all(const pc_cli *c, const pc_run *run, const pc_report_options *ro) {
  pc_error err;
  const pc_cli_outputs *o = &c->out;
  if (!pc_cli_stdout_reports(c) && report_rc(pc_report_text("-", run, ro, &err), "-") < 0)
    return pc_cli_fail(&err);
  if (o->github && report_rc(pc_report_github("-", run, ro, &err), "-") < 0)
    return pc_cli_fail(&err);
  /* A stop signal waits while the report files are written: each is then in place or was never
   * made, and no temporary file stays behind (docs/robustness.md, "Faults"). */
  const char *files[PC_CLI_FILES_] = {c->json, o->markdown, o->junit, o->html, o->save_baseline};
  int rcs[PC_CLI_FILES_];
  pc_error errs[PC_CLI_FILES_];
  pc_tol_record tols = pc_cli_tols_record(&c->tols);
  pc_cli_write_files(files, run, ro, &tols, rcs, errs);
  int rc = PC_OK;
  for (int k = 0; k < PC_CLI_FILES_; k++) /* every file that failed, in this order */
    if (report_rc(rcs[k], files[k]) < 0) {
      int code = pc_cli_fail(&errs[k]);
      rc = rc == PC_OK ? code : rc;
    }
  return rc;
}

int pc_cli_write_reports(const pc_cli *c, const pc_run *run, const pc_gate *gate) {
  const pc_cli_outputs *o = &c->out;
  pc_report_options ro = PC_REPORT_OPTIONS_INIT;
  ro.profile = c->profile;
  ro.sort = o->sort;
  ro.max_rows = o->max_rows;
  ro.gate = gate;
  ro.color =
      !c->no_color && !getenv("NO_COLOR") && isatty(fileno(stdout)) && !pc_cli_mpi_launched();
  ro.quiet = c->quiet;
  ro.verbose = o->verbose;
  ro.threads = (unsigned)c->jobs; /* -j formats the reports' rows too */
  ro.progress = report_progress;
  pc_report_setting *settings =
      pc_cli_settings(&c->tols, c->trust_b_metadata, c->allow_same, &ro.nsettings);
  if (!settings) {
    fputs("paritycheck: out of memory\n", stderr);
    return PC_ENOMEM;
  }
  ro.settings = settings;
  int rc = write_all(c, run, &ro);
  free(settings);
  return rc;
}
