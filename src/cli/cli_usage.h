/* The --help text. */
#ifndef PC_CLI_USAGE_H
#define PC_CLI_USAGE_H

#include <stdio.h> /* FILE */

/** Writes the --help text to out: usage, every option with its default, the exit statuses. */
void pc_cli_usage(FILE *out);

#endif
