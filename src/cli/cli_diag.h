/* The CLI's messages on stderr. Every text that comes from the data or the command line (a
 * dataset name, a path, a library message that quotes a file) goes through
 * pc_cli_put_untrusted, so that it cannot drive the terminal or forge a line of a CI log
 * (docs/reports.md, "Untrusted names"). */
#ifndef PC_CLI_DIAG_H
#define PC_CLI_DIAG_H

#include <paritycheck/paritycheck.h>

/** Writes s to stderr with control and bidi characters and invalid UTF-8 as visible escapes. */
void pc_cli_put_untrusted(const char *s);

/** Prints "paritycheck: MSG[: ARG]" and the pointer to --help; returns PC_EUSAGE. arg may be
 * NULL; it is printed escaped. */
int pc_cli_usage_error(const char *msg, const char *arg);

/** Prints the library's error (escaped) and, for PC_ENOMATCH and PC_EEMPTY, the hint of the
 * options that address it; returns err's negative code (PC_EIO when it has none). */
int pc_cli_fail(const pc_error *err);

/** Prints "paritycheck: warning: TEXT" with TEXT escaped: something that fails nothing. */
void pc_cli_warn(const char *text);

#endif
