/* The tolerance layers of a command: the profile (--profile NAME, looked up in the profile
 * folder) and the -t files, loaded over the built-in defaults and recorded for the gates. */
#ifndef PC_CLI_PROFILES_H
#define PC_CLI_PROFILES_H

#include "tol_record.h"

#include <paritycheck/paritycheck.h>

#include <stddef.h> /* size_t */

/** Starts rec afresh (pc_cli_tols_init), then loads into tols the profile `profile` (NULL: none)
 * and then files[0..nfiles) in their order, so that a later layer wins; each layer is added to
 * rec. The profile's file is PROFILE.yaml in $PARITYCHECK_TOLERANCES when set, else in the
 * install's folder beside the binary, else in the source tree's. PC_OK, or a negative pc_status
 * after the message on stderr: PC_EUSAGE for a bad or unknown profile name (with the names on
 * offer and the one probably meant), the library's error for a file that does not load. */
int pc_cli_load_tolerances(const char *profile, const char *const *files, size_t nfiles,
                           pc_tolset *tols, pc_cli_tols *rec);

#endif
