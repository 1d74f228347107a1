/* The YAML reader under the tolerance grammar (tol_yaml.h): events, mappings and numbers, each
 * failure reported at its position in the input. */
#include "tol_yaml.h"

#include "pc_internal.h"

#include <errno.h>   /* errno, ERANGE */
#include <math.h>    /* isfinite, isinf */
#include <stdarg.h>  /* va_list */
#include <stdio.h>   /* snprintf, vsnprintf */
#include <stdlib.h>  /* strtod, strtoull */
#include <string.h>  /* memcmp, strlen, strspn */
#include <strings.h> /* strcasecmp */

/* The spellings YAML gives null in a plain scalar. */
static const char *const null_spellings[] = {"", "~", "null", "Null", "NULL"};

/* ---- Messages ---------------------------------------------------------------------------- */

int pc_tol_yaml_fail(tol_reader *r, yaml_mark_t mark, const char *fmt, ...) {
  char why[PC_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return pc_error_set(r->err, PC_EPARSE, "%s:%zu:%zu: %s", r->name, mark.line + 1, mark.column + 1,
                      why);
}

int pc_tol_yaml_nomem(tol_reader *r) {
  return pc_error_set(r->err, PC_ENOMEM, "%s: out of memory", r->name);
}

const char *pc_tol_yaml_text(const yaml_event_t *ev) {
  return (const char *)ev->data.scalar.value;
}

bool pc_tol_yaml_scalar_is(const yaml_event_t *ev, const char *s) {
  size_t n = strlen(s);
  return ev->data.scalar.length == n && memcmp(ev->data.scalar.value, s, n) == 0;
}

size_t pc_tol_yaml_scalar_index(const yaml_event_t *ev, const char *const *names, size_t n) {
  size_t i = 0;
  while (i < n && !pc_tol_yaml_scalar_is(ev, names[i]))
    i++;
  return i;
}

bool pc_tol_yaml_is_null(const yaml_event_t *ev) {
  return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         pc_tol_yaml_scalar_index(ev, null_spellings, TOL_COUNT_OF(null_spellings)) <
             TOL_COUNT_OF(null_spellings);
}

const char *pc_tol_yaml_node_kind(const yaml_event_t *ev) {
  switch (ev->type) {
  case YAML_SCALAR_EVENT:
    if (pc_tol_yaml_is_null(ev))
      return "null";
    return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "a plain scalar" : "a quoted string";
  case YAML_SEQUENCE_START_EVENT:
    return "a sequence";
  case YAML_MAPPING_START_EVENT:
    return "a mapping";
  default:
    return "no value";
  }
}

/* ---- Events ------------------------------------------------------------------------------ */

int pc_tol_yaml_open(tol_reader *r, const char *name, const char *text, size_t len, pc_error *err) {
  *r = (tol_reader){.name = name, .text = text, .len = len, .err = err};
  if (!yaml_parser_initialize(&r->yaml))
    return pc_tol_yaml_nomem(r);
  r->c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (!r->c_numeric)
    return pc_tol_yaml_nomem(r);
  yaml_parser_set_input_string(&r->yaml, (const unsigned char *)text, len);
  return PC_OK;
}

void pc_tol_yaml_close(tol_reader *r) {
  if (r->have_ev)
    yaml_event_delete(&r->ev);
  r->have_ev = false;
  if (r->c_numeric)
    freelocale(r->c_numeric);
  r->c_numeric = (locale_t)0;
  yaml_parser_delete(&r->yaml);
}

/* libyaml reports reader errors (bad encoding) as a byte offset only; count lines and characters
 * (UTF-8 lead bytes) up to it. */
static yaml_mark_t mark_of_offset(const tol_reader *r, size_t offset) {
  enum { UTF8_CONT_MASK = 0xC0, UTF8_CONT_BITS = 0x80 };
  yaml_mark_t mark = {.index = offset, .line = 0, .column = 0};
  for (size_t i = 0; i < offset && i < r->len; i++) {
    unsigned char c = (unsigned char)r->text[i];
    if (c == '\n') {
      mark.line++;
      mark.column = 0;
    } else if ((c & UTF8_CONT_MASK) != UTF8_CONT_BITS) {
      mark.column++;
    }
  }
  return mark;
}

static int yaml_failure(tol_reader *r) {
  const yaml_parser_t *y = &r->yaml;
  if (y->error == YAML_MEMORY_ERROR)
    return pc_tol_yaml_nomem(r);
  yaml_mark_t mark =
      y->error == YAML_READER_ERROR ? mark_of_offset(r, y->problem_offset) : y->problem_mark;
  const char *problem = y->problem ? y->problem : "unknown error";
  if (y->context)
    return pc_tol_yaml_fail(r, mark, "invalid YAML: %s (%s)", problem, y->context);
  return pc_tol_yaml_fail(r, mark, "invalid YAML: %s", problem);
}

/* Anchors, aliases and tags are refused everywhere: an alias lets a few bytes expand into an
 * exponential tree (the "billion laughs"), and a tag would change how a value is typed. */
static int check_node_props(tol_reader *r) {
  const yaml_event_t *ev = &r->ev;
  const yaml_char_t *anchor = NULL, *tag = NULL;
  switch (ev->type) {
  case YAML_ALIAS_EVENT:
    return pc_tol_yaml_fail(r, ev->start_mark, "aliases are not supported");
  case YAML_SCALAR_EVENT:
    anchor = ev->data.scalar.anchor;
    tag = ev->data.scalar.tag;
    break;
  case YAML_SEQUENCE_START_EVENT:
    anchor = ev->data.sequence_start.anchor;
    tag = ev->data.sequence_start.tag;
    break;
  case YAML_MAPPING_START_EVENT:
    anchor = ev->data.mapping_start.anchor;
    tag = ev->data.mapping_start.tag;
    break;
  default:
    break;
  }
  if (anchor)
    return pc_tol_yaml_fail(r, ev->start_mark, "anchors are not supported");
  if (tag)
    return pc_tol_yaml_fail(r, ev->start_mark, "tags are not supported");
  return PC_OK;
}

int pc_tol_yaml_next(tol_reader *r) {
  if (r->have_ev)
    yaml_event_delete(&r->ev);
  r->have_ev = false;
  if (!yaml_parser_parse(&r->yaml, &r->ev))
    return yaml_failure(r);
  r->have_ev = true;
  return check_node_props(r);
}

/* ---- Mappings ---------------------------------------------------------------------------- */

int pc_tol_yaml_expect_mapping(tol_reader *r, const char *what) {
  if (r->ev.type != YAML_MAPPING_START_EVENT)
    return pc_tol_yaml_fail(r, r->ev.start_mark, "%s must be a mapping, got %s", what,
                            pc_tol_yaml_node_kind(&r->ev));
  return PC_OK;
}

static int unknown_key(tol_reader *r, const char *const *names, size_t n, const char *where) {
  char expected[PC_ERROR_MESSAGE_MAX / 2] = "";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof expected; i++)
    used +=
        (size_t)snprintf(expected + used, sizeof expected - used, "%s%s", i ? ", " : "", names[i]);
  return pc_tol_yaml_fail(r, r->ev.start_mark, "unknown key '%.*s' in %s (expected one of: %s)",
                          TOL_QUOTE_MAX, pc_tol_yaml_text(&r->ev), where, expected);
}

/* Reads the current event as a key among names[0..n), each allowed once. */
static int read_key(tol_reader *r, const char *const *names, size_t n, const char *where,
                    unsigned *seen, size_t *key) {
  const yaml_event_t *ev = &r->ev;
  if (ev->type != YAML_SCALAR_EVENT)
    return pc_tol_yaml_fail(r, ev->start_mark, "a key in %s must be a string, got %s", where,
                            pc_tol_yaml_node_kind(ev));
  size_t i = pc_tol_yaml_scalar_index(ev, names, n);
  if (i == n)
    return unknown_key(r, names, n, where);
  if (*seen & (1u << i))
    return pc_tol_yaml_fail(r, ev->start_mark, "duplicate key '%s' in %s", names[i], where);
  *seen |= 1u << i;
  *key = i;
  return PC_OK;
}

int pc_tol_yaml_walk_mapping(tol_reader *r, const char *const *names, size_t n, const char *where,
                             tol_value_fn on_value, void *arg, unsigned *seen) {
  int rc;
  *seen = 0;
  while ((rc = pc_tol_yaml_next(r)) == PC_OK && r->ev.type != YAML_MAPPING_END_EVENT) {
    size_t key = 0;
    if ((rc = read_key(r, names, n, where, seen, &key)) || (rc = pc_tol_yaml_next(r)) ||
        (rc = on_value(r, key, arg)))
      return rc;
  }
  return rc;
}

/* ---- Numbers ----------------------------------------------------------------------------- */

/* A number must be a plain scalar: a quoted one is a string, whatever it contains. */
static int expect_number_node(tol_reader *r, const char *what) {
  const yaml_event_t *ev = &r->ev;
  if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
      pc_tol_yaml_is_null(ev))
    return pc_tol_yaml_fail(r, ev->start_mark, "'%s' must be a number, got %s", what,
                            pc_tol_yaml_node_kind(ev));
  return PC_OK;
}

/* YAML's own spellings of infinity and NaN (".inf", "-.Inf", ".nan"), which strtod does not
 * read, so that they are reported as non-finite rather than as not numbers. */
static bool is_yaml_nonfinite(const char *s) {
  if (*s == '+' || *s == '-')
    s++;
  return s[0] == '.' && (strcasecmp(s + 1, "inf") == 0 || strcasecmp(s + 1, "nan") == 0);
}

/* strtod in the C locale, so that a decimal comma locale does not change what a file means. */
static double strtod_c(const tol_reader *r, const char *s, char **end, int *err_no) {
  locale_t old = uselocale(r->c_numeric);
  errno = 0;
  double v = strtod(s, end);
  *err_no = errno;
  uselocale(old);
  return v;
}

int pc_tol_yaml_double(tol_reader *r, const char *what, double hi, double *out) {
  int rc = expect_number_node(r, what);
  if (rc)
    return rc;
  const char *s = pc_tol_yaml_text(&r->ev);
  yaml_mark_t at = r->ev.start_mark;
  char *end;
  int err_no;
  double v = strtod_c(r, s, &end, &err_no);
  if (*end != '\0' && is_yaml_nonfinite(s))
    return pc_tol_yaml_fail(r, at, "'%s' must be finite, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (*end != '\0' || end == s)
    return pc_tol_yaml_fail(r, at, "'%s' must be a number, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (err_no == ERANGE && isinf(v))
    return pc_tol_yaml_fail(r, at, "'%s' is out of range: '%.*s'", what, TOL_QUOTE_MAX, s);
  if (!isfinite(v))
    return pc_tol_yaml_fail(r, at, "'%s' must be finite, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (v < 0)
    return pc_tol_yaml_fail(r, at, "'%s' must be >= 0, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (v > hi)
    return pc_tol_yaml_fail(r, at, "'%s' must be <= %g, got '%.*s'", what, hi, TOL_QUOTE_MAX, s);
  *out = v;
  return PC_OK;
}

int pc_tol_yaml_u64(tol_reader *r, const char *what, uint64_t *out) {
  int rc = expect_number_node(r, what);
  if (rc)
    return rc;
  const char *s = pc_tol_yaml_text(&r->ev);
  yaml_mark_t at = r->ev.start_mark;
  const char *digits = *s == '+' ? s + 1 : s;
  if (*digits == '\0' || strspn(digits, "0123456789") != strlen(digits))
    return pc_tol_yaml_fail(r, at, "'%s' must be a non-negative integer, got '%.*s'", what,
                            TOL_QUOTE_MAX, s);
  errno = 0;
  unsigned long long v = strtoull(digits, NULL, 10);
  if (errno == ERANGE || v > UINT64_MAX)
    return pc_tol_yaml_fail(r, at, "'%s' is out of range (at most %llu): '%.*s'", what,
                            (unsigned long long)UINT64_MAX, TOL_QUOTE_MAX, s);
  *out = (uint64_t)v;
  return PC_OK;
}
