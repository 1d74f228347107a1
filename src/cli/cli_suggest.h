/* "Did you mean": the name the user probably meant, for an unknown option or profile. */
#ifndef PC_CLI_SUGGEST_H
#define PC_CLI_SUGGEST_H

#include <stddef.h> /* size_t */

/** Of names[0..n), the one the user probably meant by `name`: one that `name` starts (fp16 for
 * fp16-autocast), else the nearest by edits (insert, delete, substitute, swap two neighbours)
 * within a third of name's length or two edits (tf23, bf16_autocast); NULL when none is that
 * close. The result points into names. */
const char *pc_cli_closest_name(const char *name, const char *const *names, size_t n);

#endif
