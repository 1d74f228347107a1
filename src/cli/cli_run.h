/* One command's run: the checks before anything is read, the comparison (under MPI, by every
 * rank), the gate, the reports, and the exit status, all in a child process isolated from
 * crashes and endless loops inside HDF5 (isolate.h). */
#ifndef PC_CLI_RUN_H
#define PC_CLI_RUN_H

#include "cli_options.h"

#include <paritycheck/paritycheck.h>

/* The exit statuses, a contract (paritycheck --help, docs/reports.md); a run stopped by signal N
 * exits 128 + N (isolate.h). */
enum { PC_CLI_EXIT_PASS = 0, PC_CLI_EXIT_DRIFT = 1, PC_CLI_EXIT_ERROR = 2 };

/** Runs the command c with the tolerances `tols` (loaded: cli_profiles.h) and returns its exit
 * status: PASS when every tensor (or the gate) passes, DRIFT when one fails, ERROR after the
 * message for anything that keeps the run from a verdict, 128 + N when stopped by signal N.
 * Under an MPI launcher, the status of rank 0 (mpi_run.h). */
int pc_cli_run_isolated(const pc_cli *c, const pc_tolset *tols);

#endif
