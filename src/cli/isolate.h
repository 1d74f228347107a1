/* Process isolation for the CLI. HDF5 1.10 can crash or loop forever inside the library on
 * crafted metadata, where no check of ours runs (docs/robustness.md, "Faults inside HDF5").
 * The comparison therefore runs in a child process: the parent turns a crash into exit 2 and
 * stops a child that makes no progress for a while. */
#ifndef PC_CLI_ISOLATE_H
#define PC_CLI_ISOLATE_H

#include <stdbool.h> /* bool */

/** Run fn(arg) in a child process and return its exit code; when the child dies of a signal, or
 * sends no heartbeat for stall_s seconds (0: no limit), print why on stderr, naming `what`
 * (the files), and return 2. A SIGINT, SIGTERM or SIGHUP that the parent receives is passed on
 * to the child (a second one kills it, but not while the child holds the stop signals:
 * pc_cli_hold_stop_signals), and the parent returns 128 + N. If the child cannot be
 * started, fn runs in this process. */
int pc_cli_isolated(int (*fn)(void *), void *arg, unsigned stall_s, const char *what);

/** Hold (true) or release (false) the stop signals (SIGINT, SIGTERM, SIGHUP) in this process:
 * the child holds them while it writes report files, so that a stop ends it before the first
 * temporary file is made or after the last is renamed into place. The parent is told, so that
 * a second stop signal does not SIGKILL the child during the hold. */
void pc_cli_hold_stop_signals(bool hold);

/** Tell the parent that the child is making progress (cheap: at most one write a second). */
void pc_cli_heartbeat(void);

#endif
