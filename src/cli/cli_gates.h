/* The gates of a command: --baseline (fail only for what newly fails or grew) and the approvals
 * (--approved gates, --approve signs and then gates). Their files are read before the data, so
 * that a wrong one fails at once rather than after GiBs are compared. */
#ifndef PC_CLI_GATES_H
#define PC_CLI_GATES_H

#include "cli_options.h"

#include <paritycheck/paritycheck.h>

/** The --baseline file into *base (NULL without one). PC_OK, or the library's error after the
 * message on stderr. */
int pc_cli_load_baseline(const pc_cli *c, pc_baseline **base);

/** The approval file of --approved, or the one --approve adds to when it exists, into *ap (NULL
 * without one). PC_OK, or the library's error after the message on stderr. */
int pc_cli_load_approvals(const pc_cli *c, pc_approvals **ap);

/** The run judged against the baseline `base` or the approvals `ap` into *gate (NULL without
 * either; the caller frees it). With --approve, first signs the run's drifting tensors into the
 * approval file (stop signals held while it is written), then gates against what it wrote. A
 * baseline of another profile is a warning on stderr. PC_OK; PC_EUSAGE when the gate's file was
 * made under other tolerances than c's record; or the library's error, after the message. */
int pc_cli_gate(const pc_cli *c, const pc_baseline *base, const pc_approvals *ap, const pc_run *run,
                pc_gate **gate);

#endif
