/* paritycheck: the command-line tool. A thin layer over the public API: parse the options
 * (cli_options.h), load the tolerances (cli_profiles.h), run the comparison, its gate and its
 * reports (cli_run.h), exit 0 (pass), 1 (drift) or 2 (error).
 *
 * One convention, the library's: every step returns PC_OK to go on, or a negative pc_status
 * once it has printed why it cannot; only main() and the run turn that into an exit status. */
#include "cli_diag.h"
#include "cli_options.h"
#include "cli_profiles.h"
#include "cli_run.h"

#include <paritycheck/paritycheck.h>

#include <signal.h> /* signal, SIGPIPE */
#include <stdio.h>  /* fputs */

int main(int argc, char **argv) {
  pc_error err;
  pc_cli c;
  pc_tolset *tols = pc_tolset_new();
  if (pc_cli_init(&c, argc) < 0 || !tols) {
    fputs("paritycheck: out of memory\n", stderr);
    pc_tolset_free(tols);
    pc_cli_free(&c);
    return PC_CLI_EXIT_ERROR;
  }
  /* A reader that goes away (paritycheck ... | head) is a write error on standard output, which
   * ends that report quietly (cli_reports.h), not a death by SIGPIPE that would read as a
   * crash. */
  signal(SIGPIPE, SIG_IGN);
  int code = PC_CLI_EXIT_ERROR;
  if (pc_tolset_load_builtin(tols, &err) < 0) {
    fputs("paritycheck: built-in tolerances: ", stderr);
    pc_cli_put_untrusted(err.message);
    fputc('\n', stderr);
  } else if (pc_cli_parse(argc, argv, &c) == PC_OK) {
    code = c.done ? PC_CLI_EXIT_PASS
           : pc_cli_load_tolerances(c.profile, c.tol_files, c.n_tol_files, tols, &c.tols) == PC_OK
               ? pc_cli_run_isolated(&c, tols)
               : PC_CLI_EXIT_ERROR;
  }
  pc_tolset_free(tols);
  pc_cli_free(&c);
  return code;
}
