/* The tolerance grammar (tol_parse.c): one file's YAML, read event by event (tol_yaml.h) and
 * held against the semantic checks (tol_check.h), into the layers of tol_internal.h. Schema:
 * docs/tolerances.md. Internal to the tolerance files (tol_*.c); tol_set.c joins the result to
 * a set. */
#ifndef PC_TOL_PARSE_H
#define PC_TOL_PARSE_H

#include "tol_internal.h"

#include <paritycheck/error.h> /* pc_error */

#include <stddef.h> /* size_t */

/* The most rules all the files of one set may hold: a limit that keeps a broken or hostile file
 * from exhausting memory or time. */
enum { TOL_MAX_RULES = 100000 };

/* One file as parsed, before it joins a set. */
typedef struct tol_file {
  tol_layer defaults;
  tol_layer *rules;
  size_t n_rules;
  size_t cap_rules;
} tol_file;

/** Parses len bytes of text (`name` in messages) into *file, which the caller zeroed; at most
 * max_rules rules. PC_OK, else PC_EPARSE ("name:line:column: why") or PC_ENOMEM in err. The
 * file may hold layers either way: pc_tol_file_clear frees them. */
int pc_tol_parse(tol_file *file, const char *name, const char *text, size_t len, size_t max_rules,
                 pc_error *err);

/** Frees what a file owns (its layers' globs and conditions, its rule array); the file itself
 * is the caller's. */
void pc_tol_file_clear(tol_file *file);

#endif
