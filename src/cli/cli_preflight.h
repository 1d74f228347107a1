/* The checks of a command before anything is read, so that a typo does not throw away a long
 * comparison: the paths (trust_cli.h), the report options' combinations (cli_options.h), the
 * report files writable, the --reference file readable. */
#ifndef PC_CLI_PREFLIGHT_H
#define PC_CLI_PREFLIGHT_H

#include "cli_options.h"

/** Runs the checks in that order; the first that fails decides. PC_OK, or after the message on
 * stderr PC_EUSAGE (bad paths or combinations) or PC_EIO (a report file that cannot be written,
 * a reference that cannot be read). The writers and the library still report a file that
 * fails later. */
int pc_cli_preflight(const pc_cli *c);

#endif
