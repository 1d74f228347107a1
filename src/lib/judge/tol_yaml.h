/* The YAML reader under the tolerance grammar (tol_parse.c): libyaml's events one at a time with
 * anchors, aliases and tags refused, mappings walked key by key against a list of names, plain
 * scalars read as numbers in the C locale. It knows nothing of the schema. Every failure is a
 * pc_error in the reader's record: PC_EPARSE with "name:line:column: why" (1-based), or
 * PC_ENOMEM with "name: out of memory". Internal to the tolerance files (tol_*.c). */
#ifndef PC_TOL_YAML_H
#define PC_TOL_YAML_H

#include <paritycheck/error.h> /* pc_error */

#include <locale.h>  /* locale_t */
#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */
#include <yaml.h>    /* yaml_parser_t, yaml_event_t, yaml_mark_t */

#define TOL_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* How much of an offending scalar is quoted back in a message. */
enum { TOL_QUOTE_MAX = 64 };

/* One input being read. `ev` is the current event, owned while have_ev; the other fields are
 * the reader's own (pc_tol_yaml_open sets them). */
typedef struct tol_reader {
  yaml_parser_t yaml;
  yaml_event_t ev;
  bool have_ev;
  const char *name; /* the input's name in messages */
  const char *text; /* the raw input, for the position of reader errors */
  size_t len;
  locale_t c_numeric;
  pc_error *err;
} tol_reader;

/** Sets r up to read len bytes of text (which outlive r), naming it `name` in messages that go
 * to err. PC_OK, else PC_ENOMEM; pc_tol_yaml_close must follow either way. No event is current
 * until the first pc_tol_yaml_next. */
int pc_tol_yaml_open(tol_reader *r, const char *name, const char *text, size_t len, pc_error *err);

/** Frees what r holds (its current event, locale and libyaml state). */
void pc_tol_yaml_close(tol_reader *r);

/** Makes the next event current: PC_OK, else the YAML error (with its position) or the refusal
 * of an anchor, alias or tag on it. */
int pc_tol_yaml_next(tol_reader *r);

/** PC_EPARSE with "name:line:column: why" at mark (libyaml's 0-based); returns PC_EPARSE. */
int pc_tol_yaml_fail(tol_reader *r, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** PC_ENOMEM with "name: out of memory"; returns PC_ENOMEM. */
int pc_tol_yaml_nomem(tol_reader *r);

/** The text of a scalar event (NUL-terminated; it may hold a NUL before its length). */
const char *pc_tol_yaml_text(const yaml_event_t *ev);

/** Whether a scalar event's text is exactly s. */
bool pc_tol_yaml_scalar_is(const yaml_event_t *ev, const char *s);

/** Index of a scalar event's text in names[0..n), or n. */
size_t pc_tol_yaml_scalar_index(const yaml_event_t *ev, const char *const *names, size_t n);

/** Whether the event is YAML's null: a plain scalar "", "~", "null", "Null" or "NULL". */
bool pc_tol_yaml_is_null(const yaml_event_t *ev);

/** The kind of node an event starts, for "expected X, got Y" messages: "null", "a plain
 * scalar", "a quoted string", "a sequence", "a mapping" or "no value". */
const char *pc_tol_yaml_node_kind(const yaml_event_t *ev);

/** PC_OK when the current event starts a mapping, else "WHAT must be a mapping, got KIND". */
int pc_tol_yaml_expect_mapping(tol_reader *r, const char *what);

/* Called with the first event of key `key`'s value current; leaves its last event current. */
typedef int (*tol_value_fn)(tol_reader *r, size_t key, void *arg);

/** Walks the mapping whose start is current: each key must be a string among names[0..n)
 * (n <= 32), each at most once, and on_value(r, index, arg) reads its value. `where` names the
 * mapping in messages; *seen gets bit i for each key names[i] found. Leaves the mapping's end
 * current. */
int pc_tol_yaml_walk_mapping(tol_reader *r, const char *const *names, size_t n, const char *where,
                             tol_value_fn on_value, void *arg, unsigned *seen);

/** The current event as a finite number in [0, hi] (a plain scalar, read whole by strtod in
 * the C locale; YAML's .inf and .nan are named non-finite); `what` names the key. */
int pc_tol_yaml_double(tol_reader *r, const char *what, double hi, double *out);

/** The current event as a decimal integer in [0, UINT64_MAX] (a plain scalar: an optional
 * '+', then digits only); `what` names the key. */
int pc_tol_yaml_u64(tol_reader *r, const char *what, uint64_t *out);

#endif
