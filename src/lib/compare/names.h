/* Tensor names before pairing (pc_options; README, "Name mapping"): prefixes stripped from both
 * sides, B's paths mapped, tensors selected by include and exclude globs; and the "did you
 * mean" of a missing tensor: the closest unpaired name of the other side. Internal to the
 * library. */
#ifndef PC_NAMES_H
#define PC_NAMES_H

#include <paritycheck/compare.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/** PC_EUSAGE, naming the option, when a glob, prefix or map of o is malformed. */
int pc_names_check(const pc_options *o, pc_error *err);

/** The name dataset `path` of side B (`b`) or A is paired by: its prefixes stripped, then for
 * B the first map that applies. *out is malloc'd; PC_ENOMEM. */
int pc_names_map(const pc_options *o, bool b, const char *path, char **out);

/** Whether the tensor takes part: `name` is its (mapped) dataset path, `full` its path in
 * folder mode ("FILE:DATASET", or FILE alone) or NULL; a glob may match either. */
bool pc_names_selected(const pc_options *o, const char *name, const char *full);

/** "file:name", malloc'd, or NULL when out of memory: the path of a tensor in folder mode. The
 * first ':' separates the two, since folder mode skips files whose relative path holds one. */
char *pc_names_full(const char *file, const char *name);

/* Work allowed for suggestions in one run, in cells of the edit-distance table: enough for
 * thousands of unpaired names on each side, bounded whatever the files hold. */
enum { PC_SUGGEST_BUDGET = 1 << 26 };

/** The candidate closest to `name` in edits (insert, delete or replace one character), when
 * within max(1, strlen(name) / 4) edits; the first of the closest in candidate order; -1 when
 * none is that close or *budget (cells, see above) ran out. */
long pc_names_closest(const char *name, const char *const *cand, size_t n, uint64_t *budget);

#endif
