/* What the CLI checks and records of its inputs and outputs before it reads anything (docs/
 * robustness.md, "Trust model"): A and B are not one file, no report overwrites an input or
 * another report, a file read whole is a regular file; and the settings every report records
 * (the tolerance files with their SHA-256, $PARITYCHECK_TOLERANCES, the trust in B). */
#ifndef PC_CLI_TRUST_H
#define PC_CLI_TRUST_H

#include "tol_record.h"

#include <paritycheck/paritycheck.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */

/* A run's paths as the command line gave them; NULL where an option was not given. */
typedef struct pc_cli_io {
  const char *a, *b, *reference, *baseline, *approved;
  const char *approve; /* read and written: an input, and one of the outputs */
  const char *const *tol_files;
  size_t n_tol_files;
  const char *const *outputs; /* the report files ("-": standard output), NULLs allowed */
  size_t noutputs;
  bool allow_same; /* --allow-same: A and B may be one file */
} pc_cli_io;

/** PC_OK, or PC_EUSAGE after a message on stderr: A and B the same file or folder (same device
 * and inode once links are followed) without allow_same; a report path that is an input (A, B,
 * R, the baseline, the approvals, a tolerance file) or that another report names too; a
 * reference, baseline or approval file that is not a regular file (a FIFO would block). */
int pc_cli_check_io(const pc_cli_io *io);

/** The settings every report records, malloc'd (the caller frees the array; the strings point
 * into tols and the environment), *n of them: each tolerance file with its SHA-256,
 * $PARITYCHECK_TOLERANCES when set, whether B's metadata is trusted, --allow-same. NULL when out
 * of memory. */
pc_report_setting *pc_cli_settings(const pc_cli_tols *tols, bool trust_b, bool allow_same,
                                   size_t *n);

#endif
