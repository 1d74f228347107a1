/* JSON values as paritycheck writes them (docs/report-json.md, "Conventions"), shared by the
 * JSON report and the baseline file so that the two spell every value the same. Internal. */
#ifndef PC_JSON_UTIL_H
#define PC_JSON_UTIL_H

#include <jansson.h>

#include <paritycheck/error.h>

#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */
#include <stdio.h>   /* FILE */

/** A double; +inf, -inf and NaN, which JSON lacks, as the strings "inf", "-inf", "nan". */
json_t *pc_json_real(double x);

/** A count; above INT64_MAX (json_int_t's range; only ULP figures get there) a double. */
json_t *pc_json_count(uint64_t n);

/** A string; one that is not valid UTF-8 (paths are bytes) with each non-ASCII byte as '?'. */
json_t *pc_json_string(const char *s);

/** o when rc is 0, else NULL after freeing o. jansson frees a value it could not store and
 * accepts a NULL container, so building goes on after a failure and only the accumulated
 * status is checked, here. */
json_t *pc_json_finish(json_t *o, int rc);

/** Write root to `path` ("-": standard output) indented, keys in insertion order, doubles at 17
 * significant digits (they round-trip), and a final newline. PC_EIO names the file and `what`
 * ("the JSON report", "the baseline"). */
int pc_json_write(const json_t *root, const char *path, const char *what, pc_error *err);

/** pc_json_write that reads the complete file back with `verify` (may be NULL) before it
 * replaces the old one; a file that does not read back is PC_EIO and the old file stays. */
int pc_json_write_checked(const json_t *root, const char *path, const char *what,
                          int (*verify)(const char *tmp, pc_error *err), pc_error *err);

/** s's bytes as a JSON string of lowercase hex digits: the exact spelling of a path that is not
 * UTF-8 (baseline "path_bytes", approvals "tensor_bytes"). NULL when out of memory. */
json_t *pc_json_hex(const char *s);

/** pc_json_hex's digits back into the string *out (malloc'd): PC_EPARSE unless hex is a
 * non-empty, even number of hex digits, none of them a NUL byte; PC_ENOMEM. */
int pc_hex_decode(const char *hex, char **out);

/** Whether s is valid UTF-8 by jansson's rule, which is RFC 3629's (pc_report_utf8_len). */
bool pc_json_valid_utf8(const char *s);

/** j as pc_json_write writes it (a string to free()), or NULL when out of memory. */
char *pc_json_dumps(const json_t *j);

/** Write j to f as pc_json_write would write it nested `indent` spaces deep: every line after
 * the first indented by that much more. PC_ENOMEM; write errors stay in f. */
int pc_json_put_nested(FILE *f, const json_t *j, int indent);

#endif
