/* The tolerance YAML parser (include/paritycheck/tolerance.h): profiles are read with libyaml's
 * event API into the flat arrays of layers of tol_internal.h, which tol_resolve.c walks.
 * Schema: docs/tolerances.md. */
#include "tol_internal.h"

#include "pc_internal.h"

#include <errno.h>   /* errno, ERANGE, EFBIG */
#include <fcntl.h>   /* open, fcntl, O_NONBLOCK */
#include <locale.h>  /* newlocale, uselocale: numbers are read in the C locale */
#include <math.h>    /* isfinite, isinf, INFINITY, ldexp */
#include <stdarg.h>  /* va_list */
#include <stdio.h>   /* FILE, fopen, fread, vsnprintf */
#include <stdlib.h>  /* calloc, realloc, free, strtod, strtoull */
#include <string.h>  /* memcmp, memcpy, memmove, strlen, strstr, strerror */
#include <strings.h> /* strcasecmp */
#include <unistd.h>  /* close */
#include <yaml.h>    /* yaml_parser_t, yaml_event_t */

/* tolerances/default.yaml as it was at build time (cmake/embed.cmake). */
extern const char pc_builtin_profile[];
extern const size_t pc_builtin_profile_len;

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Limits that keep a broken or hostile file from exhausting memory or time. */
enum { TOL_MAX_RULES = 100000 };
static const size_t TOL_MAX_FILE_BYTES = (size_t)16 << 20; /* 16 MiB */
static const size_t TOL_READ_CHUNK = 4096; /* first buffer size when reading a file */
static const size_t TOL_FIRST_RULES = 8;   /* first capacity of a file's rule array */
/* How much of an offending scalar is quoted back in a message. */
enum { TOL_QUOTE_MAX = 64 };

enum { TOL_SCHEMA_VERSION = 1 };
static const char TOL_BUILTIN_NAME[] = "<builtin>";
static const char TOL_STRING_NAME[] = "<string>";

/* Keys of a `defaults` mapping (the first KEY_COUNT) and of a rule (all of them). */
static const char *const layer_keys[] = {
    "float64", "float32", "float16", "bfloat16",    "float8_e4m3fn",     "float8_e5m2", "integer",
    "all",     "match",   "metrics", "elementwise", "match_module_type", "match_attr"};
enum {
  KEY_MATCH = KEY_COUNT,
  KEY_METRICS,
  KEY_ELEMENTWISE,
  KEY_MATCH_MODULE_TYPE,
  KEY_MATCH_ATTR,
  RULE_KEY_COUNT
};
/* The dataset attribute the dumper names a module's class in (python/paritycheck/dump.py). */
static const char MODULE_TYPE_ATTR[] = "module_type";
_Static_assert(COUNT_OF(layer_keys) == RULE_KEY_COUNT, "one name per layer key");

/* Keys of one metric's mapping: its limit (`min` for a floor metric, `max` for the others) and
 * topk_overlap's k. */
static const char *const metric_param_keys[] = {"min", "max", "k"};
enum { MPARAM_MIN, MPARAM_MAX, MPARAM_K, MPARAM_COUNT };

/* The spellings of a YAML 1.1/1.2 boolean that `elementwise` accepts. */
static const char *const true_spellings[] = {"true", "True", "TRUE"};
static const char *const false_spellings[] = {"false", "False", "FALSE"};

/* Keys of a criteria mapping, in the order of the CRIT_* indices (tol_internal.h). */
static const char *const criterion_keys[] = {"atol",
                                             "rtol",
                                             "max_ulp",
                                             "max_mismatch_fraction",
                                             "precision",
                                             "accumulation",
                                             "atol_rms",
                                             "rtol_u",
                                             "rtol_sqrt_k",
                                             "max_rel_rms_u",
                                             "max_scale_u",
                                             "max_scale_u_sqrt_n",
                                             "trend_growth",
                                             "trend_window",
                                             "trend_crest",
                                             "noise_floor_u",
                                             "trend_growth_backward",
                                             "scale_z"};
_Static_assert(COUNT_OF(criterion_keys) == CRIT_COUNT, "one name per criterion");

/* Names `precision` and `accumulation` accept besides the float dtypes of dtype.h: NVIDIA's
 * TensorFloat-32, an fp32 layout whose products keep 10 stored mantissa bits. */
static const char TF32_NAME[] = "tf32";
enum { TF32_PRECISION_BITS = 11 }; /* 10 stored mantissa bits and the implicit one */

static const char *const top_keys[] = {"version", "defaults", "rules"};
enum { TOP_VERSION, TOP_DEFAULTS, TOP_RULES, TOP_COUNT };

/* The spellings YAML gives null in a plain scalar. */
static const char *const null_spellings[] = {"", "~", "null", "Null", "NULL"};

/* The POSIX character classes fnmatch knows in every locale. */
static const char *const char_classes[] = {"alnum", "alpha", "blank", "cntrl", "digit", "graph",
                                           "lower", "print", "punct", "space", "upper", "xdigit"};

/* One file as parsed, before it joins a set. */
typedef struct tol_file {
  tol_layer defaults;
  tol_layer *rules;
  size_t n_rules;
  size_t cap_rules;
} tol_file;

typedef struct tol_parser {
  yaml_parser_t yaml;
  yaml_event_t ev; /* the current event, owned while have_ev */
  bool have_ev;
  const char *name; /* the file's name in messages */
  const char *text; /* the raw input, for the position of reader errors */
  size_t len;
  locale_t c_numeric;
  size_t max_rules; /* how many rules this file may still add to the set */
  tol_file *file;
  pc_error *err;
  yaml_mark_t elementwise_at; /* the last `elementwise` value read */
} tol_parser;

/* ---- Messages ---------------------------------------------------------------------------- */

static int fail_at(tol_parser *p, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* PC_EPARSE with "name:line:column: why"; libyaml's marks are 0-based. */
static int fail_at(tol_parser *p, yaml_mark_t mark, const char *fmt, ...) {
  char why[PC_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return pc_error_set(p->err, PC_EPARSE, "%s:%zu:%zu: %s", p->name, mark.line + 1, mark.column + 1,
                      why);
}

static int fail_nomem(tol_parser *p) {
  return pc_error_set(p->err, PC_ENOMEM, "%s: out of memory", p->name);
}

static const char *scalar_text(const yaml_event_t *ev) {
  return (const char *)ev->data.scalar.value;
}

static bool scalar_is(const yaml_event_t *ev, const char *s) {
  size_t n = strlen(s);
  return ev->data.scalar.length == n && memcmp(ev->data.scalar.value, s, n) == 0;
}

/* Index of the scalar in names[0..n), or n. */
static size_t scalar_index(const yaml_event_t *ev, const char *const *names, size_t n) {
  size_t i = 0;
  while (i < n && !scalar_is(ev, names[i]))
    i++;
  return i;
}

static bool is_null(const yaml_event_t *ev) {
  return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         scalar_index(ev, null_spellings, COUNT_OF(null_spellings)) < COUNT_OF(null_spellings);
}

/* The kind of node an event starts, for "expected X, got Y" messages. */
static const char *node_kind(const yaml_event_t *ev) {
  switch (ev->type) {
  case YAML_SCALAR_EVENT:
    if (is_null(ev))
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

/* libyaml reports reader errors (bad encoding) as a byte offset only; count lines and characters
 * (UTF-8 lead bytes) up to it. */
static yaml_mark_t mark_of_offset(const tol_parser *p, size_t offset) {
  enum { UTF8_CONT_MASK = 0xC0, UTF8_CONT_BITS = 0x80 };
  yaml_mark_t mark = {.index = offset, .line = 0, .column = 0};
  for (size_t i = 0; i < offset && i < p->len; i++) {
    unsigned char c = (unsigned char)p->text[i];
    if (c == '\n') {
      mark.line++;
      mark.column = 0;
    } else if ((c & UTF8_CONT_MASK) != UTF8_CONT_BITS) {
      mark.column++;
    }
  }
  return mark;
}

static int yaml_failure(tol_parser *p) {
  const yaml_parser_t *y = &p->yaml;
  if (y->error == YAML_MEMORY_ERROR)
    return fail_nomem(p);
  yaml_mark_t mark =
      y->error == YAML_READER_ERROR ? mark_of_offset(p, y->problem_offset) : y->problem_mark;
  const char *problem = y->problem ? y->problem : "unknown error";
  if (y->context)
    return fail_at(p, mark, "invalid YAML: %s (%s)", problem, y->context);
  return fail_at(p, mark, "invalid YAML: %s", problem);
}

/* Anchors, aliases and tags are refused everywhere: an alias lets a few bytes expand into an
 * exponential tree (the "billion laughs"), and a tag would change how a value is typed. */
static int check_node_props(tol_parser *p) {
  const yaml_event_t *ev = &p->ev;
  const yaml_char_t *anchor = NULL, *tag = NULL;
  switch (ev->type) {
  case YAML_ALIAS_EVENT:
    return fail_at(p, ev->start_mark, "aliases are not supported");
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
    return fail_at(p, ev->start_mark, "anchors are not supported");
  if (tag)
    return fail_at(p, ev->start_mark, "tags are not supported");
  return PC_OK;
}

/* Makes the next event current. */
static int next_event(tol_parser *p) {
  if (p->have_ev)
    yaml_event_delete(&p->ev);
  p->have_ev = false;
  if (!yaml_parser_parse(&p->yaml, &p->ev))
    return yaml_failure(p);
  p->have_ev = true;
  return check_node_props(p);
}

/* ---- Mappings ---------------------------------------------------------------------------- */

/* Called with the first event of a value current; leaves its last event current. */
typedef int (*value_fn)(tol_parser *p, size_t key, void *arg);

static int expect_mapping(tol_parser *p, const char *what) {
  if (p->ev.type != YAML_MAPPING_START_EVENT)
    return fail_at(p, p->ev.start_mark, "%s must be a mapping, got %s", what, node_kind(&p->ev));
  return PC_OK;
}

static int unknown_key(tol_parser *p, const char *const *names, size_t n, const char *where) {
  char expected[PC_ERROR_MESSAGE_MAX / 2] = "";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof expected; i++)
    used +=
        (size_t)snprintf(expected + used, sizeof expected - used, "%s%s", i ? ", " : "", names[i]);
  return fail_at(p, p->ev.start_mark, "unknown key '%.*s' in %s (expected one of: %s)",
                 TOL_QUOTE_MAX, scalar_text(&p->ev), where, expected);
}

/* Reads the current event as a key among names[0..n), each allowed once. */
static int read_key(tol_parser *p, const char *const *names, size_t n, const char *where,
                    unsigned *seen, size_t *key) {
  const yaml_event_t *ev = &p->ev;
  if (ev->type != YAML_SCALAR_EVENT)
    return fail_at(p, ev->start_mark, "a key in %s must be a string, got %s", where, node_kind(ev));
  size_t i = scalar_index(ev, names, n);
  if (i == n)
    return unknown_key(p, names, n, where);
  if (*seen & (1u << i))
    return fail_at(p, ev->start_mark, "duplicate key '%s' in %s", names[i], where);
  *seen |= 1u << i;
  *key = i;
  return PC_OK;
}

/* Walks the mapping whose start is current, handing each value to on_value; *seen gets a bit
 * per key found. Leaves the mapping's end current. */
static int walk_mapping(tol_parser *p, const char *const *names, size_t n, const char *where,
                        value_fn on_value, void *arg, unsigned *seen) {
  int rc;
  *seen = 0;
  while ((rc = next_event(p)) == PC_OK && p->ev.type != YAML_MAPPING_END_EVENT) {
    size_t key = 0;
    if ((rc = read_key(p, names, n, where, seen, &key)) || (rc = next_event(p)) ||
        (rc = on_value(p, key, arg)))
      return rc;
  }
  return rc;
}

/* ---- Scalars ----------------------------------------------------------------------------- */

/* A number must be a plain scalar: a quoted one is a string, whatever it contains. */
static int expect_number_node(tol_parser *p, const char *what) {
  const yaml_event_t *ev = &p->ev;
  if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
      is_null(ev))
    return fail_at(p, ev->start_mark, "'%s' must be a number, got %s", what, node_kind(ev));
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
static double strtod_c(const tol_parser *p, const char *s, char **end, int *err_no) {
  locale_t old = uselocale(p->c_numeric);
  errno = 0;
  double v = strtod(s, end);
  *err_no = errno;
  uselocale(old);
  return v;
}

/* A finite number in [0, hi], consuming the whole scalar. */
static int parse_double(tol_parser *p, const char *what, double hi, double *out) {
  int rc = expect_number_node(p, what);
  if (rc)
    return rc;
  const char *s = scalar_text(&p->ev);
  yaml_mark_t at = p->ev.start_mark;
  char *end;
  int err_no;
  double v = strtod_c(p, s, &end, &err_no);
  if (*end != '\0' && is_yaml_nonfinite(s))
    return fail_at(p, at, "'%s' must be finite, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (*end != '\0' || end == s)
    return fail_at(p, at, "'%s' must be a number, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (err_no == ERANGE && isinf(v))
    return fail_at(p, at, "'%s' is out of range: '%.*s'", what, TOL_QUOTE_MAX, s);
  if (!isfinite(v))
    return fail_at(p, at, "'%s' must be finite, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (v < 0)
    return fail_at(p, at, "'%s' must be >= 0, got '%.*s'", what, TOL_QUOTE_MAX, s);
  if (v > hi)
    return fail_at(p, at, "'%s' must be <= %g, got '%.*s'", what, hi, TOL_QUOTE_MAX, s);
  *out = v;
  return PC_OK;
}

/* A decimal integer in [0, UINT64_MAX] (an optional '+', then digits only). */
static int parse_u64(tol_parser *p, const char *what, uint64_t *out) {
  int rc = expect_number_node(p, what);
  if (rc)
    return rc;
  const char *s = scalar_text(&p->ev);
  yaml_mark_t at = p->ev.start_mark;
  const char *digits = *s == '+' ? s + 1 : s;
  if (*digits == '\0' || strspn(digits, "0123456789") != strlen(digits))
    return fail_at(p, at, "'%s' must be a non-negative integer, got '%.*s'", what, TOL_QUOTE_MAX,
                   s);
  errno = 0;
  unsigned long long v = strtoull(digits, NULL, 10);
  if (errno == ERANGE || v > UINT64_MAX)
    return fail_at(p, at, "'%s' is out of range (at most %llu): '%.*s'", what,
                   (unsigned long long)UINT64_MAX, TOL_QUOTE_MAX, s);
  *out = (uint64_t)v;
  return PC_OK;
}

/* ---- Globs ------------------------------------------------------------------------------- */

/* At "[:" inside a bracket expression: moves *pos to the ']' of the closing ":]". */
static const char *skip_char_class(const char *g, size_t *pos) {
  const char *name = g + *pos + 2;
  const char *end = strstr(name, ":]");
  if (!end)
    return "unterminated character class";
  size_t i = 0;
  while (i < COUNT_OF(char_classes) && !(strlen(char_classes[i]) == (size_t)(end - name) &&
                                         memcmp(char_classes[i], name, (size_t)(end - name)) == 0))
    i++;
  if (i == COUNT_OF(char_classes))
    return "unknown character class";
  *pos = (size_t)(end - g) + 1;
  return NULL;
}

/* At '[': moves *pos to the closing ']', following fnmatch's bracket syntax (a leading '!' or
 * '^' negates, a ']' right after the opening is a member, '\' escapes). */
static const char *skip_bracket(const char *g, size_t *pos) {
  size_t i = *pos + 1;
  if (g[i] == '!' || g[i] == '^')
    i++;
  if (g[i] == ']')
    i++;
  for (; g[i] != ']'; i++) {
    const char *why = NULL;
    if (g[i] == '\0')
      return "unbalanced '['";
    if (g[i] == '\\') {
      if (g[++i] == '\0')
        return "unbalanced '['";
    } else if (g[i] == '[' && (g[i + 1] == '.' || g[i + 1] == '=')) {
      return "collating symbols and equivalence classes are not supported";
    } else if (g[i] == '[' && g[i + 1] == ':') {
      why = skip_char_class(g, &i);
    }
    if (why)
      return why;
  }
  *pos = i;
  return NULL;
}

/* fnmatch does not validate its pattern (an unbalanced '[' silently matches a literal '['), so
 * every glob is checked here (pc_internal.h); NULL when it is well formed. */
const char *pc_glob_problem(const char *g) {
  for (size_t i = 0; g[i] != '\0'; i++) {
    const char *why = NULL;
    if (g[i] == '\\') {
      if (g[++i] == '\0')
        return "trailing backslash";
    } else if (g[i] == '[') {
      why = skip_bracket(g, &i);
    }
    if (why)
      return why;
  }
  return NULL;
}

/* The current scalar as a well-formed glob; `what` names the key in messages. */
static int check_glob(tol_parser *p, const char *what) {
  const yaml_event_t *ev = &p->ev;
  if (ev->type != YAML_SCALAR_EVENT || is_null(ev))
    return fail_at(p, ev->start_mark, "'%s' must be a string, got %s", what, node_kind(ev));
  const char *glob = scalar_text(ev);
  if (strlen(glob) != ev->data.scalar.length)
    return fail_at(p, ev->start_mark, "'%s' must not contain NUL characters", what);
  if (*glob == '\0')
    return fail_at(p, ev->start_mark, "'%s' must not be empty", what);
  const char *why = pc_glob_problem(glob);
  if (why)
    return fail_at(p, ev->start_mark, "bad glob '%.*s': %s", TOL_QUOTE_MAX, glob, why);
  return PC_OK;
}

static int parse_glob(tol_parser *p, tol_layer *layer) {
  int rc = check_glob(p, "match");
  if (rc)
    return rc;
  layer->glob = pc_strdup(scalar_text(&p->ev));
  return layer->glob ? PC_OK : fail_nomem(p);
}

void pc_tol_layer_clear(tol_layer *layer) {
  free(layer->glob);
  for (size_t i = 0; i < layer->nconds; i++) {
    for (size_t k = 0; k < layer->conds[i].nglobs; k++)
      free(layer->conds[i].globs[k]);
    free(layer->conds[i].globs);
    free(layer->conds[i].name);
  }
  free(layer->conds);
  layer->glob = NULL;
  layer->conds = NULL;
  layer->nconds = 0;
}

/* Appends a condition on attribute `name` (no globs yet) to the rule; NULL when out of memory. */
static tol_cond *add_cond(tol_layer *rule, const char *name) {
  tol_cond *conds = realloc(rule->conds, (rule->nconds + 1) * sizeof *conds);
  if (!conds)
    return NULL;
  rule->conds = conds;
  tol_cond *c = &conds[rule->nconds];
  *c = (tol_cond){pc_strdup(name), NULL, 0};
  if (!c->name)
    return NULL;
  rule->nconds++;
  return c;
}

static int add_cond_glob(tol_parser *p, tol_cond *c, const char *what) {
  int rc = check_glob(p, what);
  if (rc)
    return rc;
  char **globs = realloc(c->globs, (c->nglobs + 1) * sizeof *globs);
  if (!globs)
    return fail_nomem(p);
  c->globs = globs;
  if (!(globs[c->nglobs] = pc_strdup(scalar_text(&p->ev))))
    return fail_nomem(p);
  c->nglobs++;
  return PC_OK;
}

/* A glob, or a non-empty sequence of globs (any of them may match), for attribute `name`. */
static int parse_cond(tol_parser *p, tol_layer *rule, const char *name, const char *what) {
  tol_cond *c = add_cond(rule, name);
  if (!c)
    return fail_nomem(p);
  if (p->ev.type != YAML_SEQUENCE_START_EVENT)
    return add_cond_glob(p, c, what);
  yaml_mark_t at = p->ev.start_mark;
  int rc;
  while ((rc = next_event(p)) == PC_OK && p->ev.type != YAML_SEQUENCE_END_EVENT)
    if ((rc = add_cond_glob(p, c, what)))
      return rc;
  if (rc == PC_OK && c->nglobs == 0)
    return fail_at(p, at, "'%s' must not be an empty list", what);
  return rc;
}

/* `match_attr`: a non-empty mapping from attribute names to globs or lists of globs. */
static int parse_match_attr(tol_parser *p, tol_layer *rule) {
  yaml_mark_t at = p->ev.start_mark;
  int rc = expect_mapping(p, "'match_attr'");
  size_t first = rule->nconds;
  while (rc == PC_OK && (rc = next_event(p)) == PC_OK && p->ev.type != YAML_MAPPING_END_EVENT) {
    char name[TOL_QUOTE_MAX];
    const yaml_event_t *ev = &p->ev;
    if (ev->type != YAML_SCALAR_EVENT || is_null(ev))
      return fail_at(p, ev->start_mark, "a key in 'match_attr' must be a string, got %s",
                     node_kind(ev));
    if (ev->data.scalar.length == 0 || strlen(scalar_text(ev)) != ev->data.scalar.length ||
        ev->data.scalar.length >= sizeof name)
      return fail_at(p, ev->start_mark,
                     "an attribute name must have 1 to %d bytes and no NUL character",
                     TOL_QUOTE_MAX - 1);
    snprintf(name, sizeof name, "%s", scalar_text(ev));
    for (size_t i = first; i < rule->nconds; i++)
      if (strcmp(rule->conds[i].name, name) == 0)
        return fail_at(p, p->ev.start_mark, "duplicate key '%s' in 'match_attr'", name);
    char what[2 * TOL_QUOTE_MAX];
    snprintf(what, sizeof what, "match_attr.%s", name);
    if ((rc = next_event(p)) || (rc = parse_cond(p, rule, name, what)))
      return rc;
  }
  if (rc == PC_OK && rule->nconds == first)
    return fail_at(p, at, "'match_attr' must not be empty");
  return rc;
}

/* ---- Schema ------------------------------------------------------------------------------ */

/* The float formats `precision` (with tf32) and `accumulation` (without) may name. */
static const pc_dtype format_dtypes[] = {PC_DTYPE_FLOAT64,       PC_DTYPE_FLOAT32,
                                         PC_DTYPE_FLOAT16,       PC_DTYPE_BFLOAT16,
                                         PC_DTYPE_FLOAT8_E4M3FN, PC_DTYPE_FLOAT8_E5M2};

/* A float format's name, as its unit roundoff. */
static int parse_format(tol_parser *p, const char *what, bool tf32_ok, double *u) {
  const yaml_event_t *ev = &p->ev;
  if (ev->type != YAML_SCALAR_EVENT)
    return fail_at(p, ev->start_mark, "'%s' must be a format name, got %s", what, node_kind(ev));
  if (tf32_ok && scalar_is(ev, TF32_NAME)) {
    *u = ldexp(1.0, -TF32_PRECISION_BITS);
    return PC_OK;
  }
  for (size_t i = 0; i < COUNT_OF(format_dtypes); i++)
    if (scalar_is(ev, pc_dtype_name(format_dtypes[i]))) {
      *u = pc_dtype_unit_roundoff(format_dtypes[i]);
      return PC_OK;
    }
  return fail_at(p, ev->start_mark,
                 "'%s' must be one of float64, float32, %sfloat16, bfloat16, float8_e4m3fn, "
                 "float8_e5m2, got '%.*s'",
                 what, tf32_ok ? "tf32, " : "", TOL_QUOTE_MAX, scalar_text(ev));
}

/* The largest value of each of the model's widening coefficients (docs/tolerances.md,
 * "Maxima"): about a hundred times the loosest shipped profile's, so that a calibrated profile
 * fits and a file cannot open a gate wide (noise_floor_u: 1e300 passed unrelated tensors).
 * atol and rtol are the user's own plain figures: unbounded. */
static double criterion_max(size_t key) {
  switch (key) {
  case CRIT_ATOL_RMS:
  case CRIT_MAX_REL_RMS_U:
  case CRIT_MAX_SCALE_U:
  case CRIT_MAX_SCALE_U_SQRT_N:
    return 1e6;
  case CRIT_RTOL_U:
  case CRIT_NOISE_FLOOR_U:
  case CRIT_TREND_CREST:
    return 1e4;
  case CRIT_RTOL_SQRT_K:
    return 1e3;
  case CRIT_TREND_GROWTH:
  case CRIT_TREND_GROWTH_BACKWARD:
    /* G multiplies the run's own trend, which against a float64 reference is ~2^-53: calibrate
     * fits G of 10^14 there; 10^16 * 2^-53 ~ 1 keeps G trend within the value's size */
    return 1e16;
  case CRIT_SCALE_Z:
    return 100;
  default: /* trend_window is clamped to PC_TREND_WINDOW_MAX where it is applied */
    return INFINITY;
  }
}

static int on_criterion(tol_parser *p, size_t key, void *arg) {
  tol_entry *entry = arg;
  unsigned bit = 1u << key;
  if (is_null(&p->ev)) {
    entry->unset |= bit;
    return PC_OK;
  }
  const char *what = criterion_keys[key];
  double *value = &entry->value[key];
  int rc;
  switch (key) {
  case CRIT_MAX_ULP:
    rc = parse_u64(p, what, &entry->max_ulp);
    break;
  case CRIT_MAX_MISMATCH_FRACTION:
    rc = parse_double(p, what, 1.0, value);
    break;
  case CRIT_PRECISION:
  case CRIT_ACCUMULATION:
    rc = parse_format(p, what, key == CRIT_PRECISION, value);
    break;
  default: /* atol, rtol and the model's coefficients */
    rc = parse_double(p, what, criterion_max(key), value);
    break;
  }
  if (rc == PC_OK)
    entry->set |= bit;
  return rc;
}

static int parse_entry(tol_parser *p, tol_entry *entry, const char *dtype_key) {
  char where[TOL_QUOTE_MAX];
  snprintf(where, sizeof where, "'%s'", dtype_key);
  unsigned seen;
  int rc = expect_mapping(p, where);
  return rc ? rc : walk_mapping(p, criterion_keys, CRIT_COUNT, where, on_criterion, entry, &seen);
}

/* ---- Product metrics -------------------------------------------------------------------- */

/* One metric's parameters as read, before they are checked against the metric. */
typedef struct metric_params {
  unsigned seen; /* bit per MPARAM_* */
  double bound;  /* min or max */
  uint64_t k;
  pc_metric m;
} metric_params;

/* A probability or fraction lies in [0, 1]; a divergence or a scalar's error is unbounded. */
static double metric_bound_max(pc_metric m) {
  return m == PC_METRIC_TOP1_AGREEMENT || m == PC_METRIC_TOPK_OVERLAP ||
                 m == PC_METRIC_MAX_PROB_DIFF
             ? 1.0
             : INFINITY;
}

static int on_metric_param(tol_parser *p, size_t key, void *arg) {
  metric_params *mp = arg;
  char what[TOL_QUOTE_MAX];
  snprintf(what, sizeof what, "%s.%s", pc_metric_name(mp->m), metric_param_keys[key]);
  if (key == MPARAM_K) {
    int rc = parse_u64(p, what, &mp->k);
    if (rc == PC_OK && mp->k == 0)
      return fail_at(p, p->ev.start_mark, "'%s' must be >= 1", what);
    return rc;
  }
  return parse_double(p, what, metric_bound_max(mp->m), &mp->bound);
}

/* The limit key a metric needs (min or max) and k exactly for topk_overlap. */
static int check_metric_params(tol_parser *p, yaml_mark_t at, const metric_params *mp) {
  const char *name = pc_metric_name(mp->m);
  bool floor = pc_metric_is_floor(mp->m);
  unsigned want = 1u << (floor ? MPARAM_MIN : MPARAM_MAX);
  if (mp->seen & (1u << (floor ? MPARAM_MAX : MPARAM_MIN)))
    return fail_at(p, at, "'%s' takes '%s', not '%s'", name, floor ? "min" : "max",
                   floor ? "max" : "min");
  if (!(mp->seen & want))
    return fail_at(p, at, "'%s' needs '%s'", name, floor ? "min" : "max");
  bool topk = mp->m == PC_METRIC_TOPK_OVERLAP;
  if (topk != !!(mp->seen & (1u << MPARAM_K)))
    return fail_at(p, at, topk ? "'%s' needs 'k'" : "'%s' takes no 'k'", name);
  return PC_OK;
}

static int on_metric(tol_parser *p, size_t key, void *arg) {
  tol_metrics *tm = arg;
  metric_params mp = {.m = (pc_metric)key};
  yaml_mark_t at = p->ev.start_mark;
  char where[TOL_QUOTE_MAX];
  snprintf(where, sizeof where, "'%s'", pc_metric_name(mp.m));
  if (is_null(&p->ev)) {
    tm->unset |= 1u << key;
    return PC_OK;
  }
  int rc = expect_mapping(p, where);
  if (rc ||
      (rc = walk_mapping(p, metric_param_keys, MPARAM_COUNT, where, on_metric_param, &mp,
                         &mp.seen)) ||
      (rc = check_metric_params(p, at, &mp)))
    return rc;
  tm->set |= 1u << key;
  tm->limit[key] = mp.bound;
  if (mp.m == PC_METRIC_TOPK_OVERLAP)
    tm->topk = mp.k;
  return PC_OK;
}

/* `metrics: null` clears every metric that earlier rules set. */
static int parse_metrics(tol_parser *p, tol_metrics *tm) {
  const char *names[PC_METRIC_COUNT_];
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    names[m] = pc_metric_name((pc_metric)m);
  if (is_null(&p->ev)) {
    tm->unset = (1u << PC_METRIC_COUNT_) - 1;
    return PC_OK;
  }
  unsigned seen;
  int rc = expect_mapping(p, "'metrics'");
  return rc ? rc : walk_mapping(p, names, PC_METRIC_COUNT_, "'metrics'", on_metric, tm, &seen);
}

static int parse_elementwise(tol_parser *p, tol_metrics *tm) {
  const yaml_event_t *ev = &p->ev;
  bool plain = ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
  bool t = plain &&
           scalar_index(ev, true_spellings, COUNT_OF(true_spellings)) < COUNT_OF(true_spellings);
  bool f = plain &&
           scalar_index(ev, false_spellings, COUNT_OF(false_spellings)) < COUNT_OF(false_spellings);
  if (!t && !f)
    return fail_at(p, ev->start_mark, "'elementwise' must be true or false, got %s", node_kind(ev));
  tm->has_elementwise = true;
  tm->elementwise = t;
  p->elementwise_at = ev->start_mark;
  return PC_OK;
}

/* A metric whose limit every value meets: a floor of 0 or less, max_prob_diff up to 1 (a
 * difference of probabilities never exceeds it). */
static bool metric_cannot_fail(pc_metric m, double limit) {
  return pc_metric_is_floor(m) ? limit <= 0 : m == PC_METRIC_MAX_PROB_DIFF && limit >= 1;
}

/* `elementwise: false` judges a tensor on the rule's metrics alone: one of them that cannot
 * fail would pass whatever B holds (docs/tolerances.md, "Product metrics"). */
static int check_elementwise_off(tol_parser *p, const tol_metrics *tm) {
  if (!tm->has_elementwise || tm->elementwise)
    return PC_OK;
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    if ((tm->set >> m & 1u) && metric_cannot_fail((pc_metric)m, tm->limit[m]))
      return fail_at(p, p->elementwise_at,
                     "'elementwise: false' with metric '%s' %s %g, which cannot fail: the "
                     "tensor would pass whatever B holds",
                     pc_metric_name((pc_metric)m), pc_metric_is_floor((pc_metric)m) ? "min" : "max",
                     tm->limit[m]);
  return PC_OK;
}

static int on_layer_key(tol_parser *p, size_t key, void *arg) {
  tol_layer *layer = arg;
  switch (key) {
  case KEY_MATCH:
    return parse_glob(p, layer);
  case KEY_METRICS:
    return parse_metrics(p, &layer->metrics);
  case KEY_ELEMENTWISE:
    return parse_elementwise(p, &layer->metrics);
  case KEY_MATCH_MODULE_TYPE:
    return parse_cond(p, layer, MODULE_TYPE_ATTR, "match_module_type");
  case KEY_MATCH_ATTR:
    return parse_match_attr(p, layer);
  default:
    return parse_entry(p, &layer->entry[key], layer_keys[key]);
  }
}

static int parse_defaults(tol_parser *p) {
  unsigned seen;
  if (is_null(&p->ev))
    return PC_OK;
  int rc = expect_mapping(p, "'defaults'");
  return rc ? rc
            : walk_mapping(p, layer_keys, KEY_COUNT, "'defaults'", on_layer_key, &p->file->defaults,
                           &seen);
}

/* Appends a zeroed rule to the file (so that cleanup frees its glob whatever happens next). */
static tol_layer *add_rule(tol_file *file) {
  if (file->n_rules == file->cap_rules) {
    size_t cap = file->cap_rules ? 2 * file->cap_rules : TOL_FIRST_RULES;
    tol_layer *rules = realloc(file->rules, cap * sizeof *rules);
    if (!rules)
      return NULL;
    file->rules = rules;
    file->cap_rules = cap;
  }
  tol_layer *rule = &file->rules[file->n_rules++];
  memset(rule, 0, sizeof *rule);
  return rule;
}

static int parse_rule(tol_parser *p) {
  yaml_mark_t at = p->ev.start_mark;
  if (p->file->n_rules >= p->max_rules)
    return fail_at(p, at, "too many rules (at most %d in all loaded files)", TOL_MAX_RULES);
  int rc = expect_mapping(p, "a rule");
  if (rc)
    return rc;
  tol_layer *rule = add_rule(p->file);
  if (!rule)
    return fail_nomem(p);
  unsigned seen;
  rc = walk_mapping(p, layer_keys, RULE_KEY_COUNT, "a rule", on_layer_key, rule, &seen);
  unsigned selectors = 1u << KEY_MATCH | 1u << KEY_MATCH_MODULE_TYPE | 1u << KEY_MATCH_ATTR;
  if (rc == PC_OK && !(seen & selectors))
    return fail_at(p, at, "a rule must have 'match', 'match_module_type' or 'match_attr'");
  return rc == PC_OK ? check_elementwise_off(p, &rule->metrics) : rc;
}

static int parse_rules(tol_parser *p) {
  if (is_null(&p->ev))
    return PC_OK;
  if (p->ev.type != YAML_SEQUENCE_START_EVENT)
    return fail_at(p, p->ev.start_mark, "'rules' must be a sequence, got %s", node_kind(&p->ev));
  int rc;
  while ((rc = next_event(p)) == PC_OK && p->ev.type != YAML_SEQUENCE_END_EVENT)
    if ((rc = parse_rule(p)))
      return rc;
  return rc;
}

static int parse_version(tol_parser *p) {
  uint64_t version;
  int rc = parse_u64(p, "version", &version);
  if (rc == PC_OK && version != TOL_SCHEMA_VERSION)
    return fail_at(p, p->ev.start_mark, "unsupported version %.*s (this build reads version %d)",
                   TOL_QUOTE_MAX, scalar_text(&p->ev), TOL_SCHEMA_VERSION);
  return rc;
}

static int on_top_key(tol_parser *p, size_t key, void *arg) {
  (void)arg;
  switch (key) {
  case TOP_VERSION:
    return parse_version(p);
  case TOP_DEFAULTS:
    return parse_defaults(p);
  default:
    return parse_rules(p);
  }
}

static int parse_top(tol_parser *p) {
  yaml_mark_t at = p->ev.start_mark;
  unsigned seen;
  int rc = expect_mapping(p, "the top level");
  if (rc || (rc = walk_mapping(p, top_keys, TOP_COUNT, "the top level", on_top_key, NULL, &seen)))
    return rc;
  if (!(seen & (1u << TOP_VERSION)))
    return fail_at(p, at, "missing version");
  return PC_OK;
}

/* stream-start, then exactly one document whose root is the top-level mapping. An empty stream
 * or an empty document has no version. */
static int parse_stream(tol_parser *p) {
  int rc;
  if ((rc = next_event(p)) || (rc = next_event(p)))
    return rc;
  if (p->ev.type == YAML_STREAM_END_EVENT)
    return fail_at(p, p->ev.start_mark, "missing version");
  if ((rc = next_event(p)))
    return rc;
  if (is_null(&p->ev))
    return fail_at(p, p->ev.start_mark, "missing version");
  if ((rc = parse_top(p)) || (rc = next_event(p)) || (rc = next_event(p)))
    return rc;
  if (p->ev.type == YAML_DOCUMENT_START_EVENT)
    return fail_at(p, p->ev.start_mark, "only one YAML document is allowed");
  return PC_OK;
}

/* ---- Sets -------------------------------------------------------------------------------- */

static void file_free(tol_file *file) {
  pc_tol_layer_clear(&file->defaults);
  for (size_t i = 0; i < file->n_rules; i++)
    pc_tol_layer_clear(&file->rules[i]);
  free(file->rules);
}

/* Puts k layers into dst (which has room), at the front or after its n layers. */
static void insert_layers(tol_layer *dst, size_t *n, const tol_layer *src, size_t k, bool front) {
  if (k == 0)
    return;
  if (front)
    memmove(dst + k, dst, *n * sizeof *dst);
  memcpy(front ? dst : dst + *n, src, k * sizeof *dst);
  *n += k;
}

/* Moves the parsed file into the set; on failure the set's contents are unchanged (only its
 * capacity may have grown). */
static int commit(pc_tolset *set, tol_file *file, bool front, pc_error *err) {
  tol_layer *defaults = realloc(set->defaults, (set->n_defaults + 1) * sizeof *defaults);
  if (!defaults)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  set->defaults = defaults;
  if (file->n_rules) {
    tol_layer *rules = realloc(set->rules, (set->n_rules + file->n_rules) * sizeof *rules);
    if (!rules)
      return pc_error_set(err, PC_ENOMEM, "out of memory");
    set->rules = rules;
  }
  insert_layers(set->defaults, &set->n_defaults, &file->defaults, 1, front);
  insert_layers(set->rules, &set->n_rules, file->rules, file->n_rules, front);
  free(file->rules);
  memset(file, 0, sizeof *file);
  return PC_OK;
}

static int parse_text(tol_parser *p) {
  if (!yaml_parser_initialize(&p->yaml))
    return fail_nomem(p);
  p->c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  int rc = p->c_numeric ? PC_OK : fail_nomem(p);
  if (rc == PC_OK) {
    yaml_parser_set_input_string(&p->yaml, (const unsigned char *)p->text, p->len);
    rc = parse_stream(p);
  }
  if (p->have_ev)
    yaml_event_delete(&p->ev);
  if (p->c_numeric)
    freelocale(p->c_numeric);
  yaml_parser_delete(&p->yaml);
  return rc;
}

static int load_text(pc_tolset *set, const char *name, const char *text, size_t len, bool front,
                     pc_error *err) {
  if (!set || (!text && len))
    return pc_error_set(err, PC_EUSAGE, "pc_tolset_load: no set or no text");
  tol_file file = {0};
  tol_parser p = {.name = name ? name : TOL_STRING_NAME,
                  .text = text ? text : "",
                  .len = len,
                  .max_rules = TOL_MAX_RULES - set->n_rules,
                  .file = &file,
                  .err = err};
  int rc = parse_text(&p);
  if (rc == PC_OK)
    rc = commit(set, &file, front, err);
  file_free(&file);
  return rc;
}

pc_tolset *pc_tolset_new(void) {
  return calloc(1, sizeof(pc_tolset));
}

void pc_tolset_free(pc_tolset *set) {
  if (!set)
    return;
  for (size_t i = 0; i < set->n_rules; i++)
    pc_tol_layer_clear(&set->rules[i]);
  free(set->rules);
  free(set->defaults);
  free(set);
}

/* The builtin always comes first, whenever it is loaded; loading it again changes nothing. */
int pc_tolset_load_builtin(pc_tolset *set, pc_error *err) {
  if (set && set->has_builtin)
    return PC_OK;
  int rc = load_text(set, TOL_BUILTIN_NAME, pc_builtin_profile, pc_builtin_profile_len, true, err);
  if (rc == PC_OK)
    set->has_builtin = true;
  return rc;
}

int pc_tolset_load_string(pc_tolset *set, const char *name, const char *text, size_t len,
                          pc_error *err) {
  return load_text(set, name, text, len, false, err);
}

/* Grows buf toward the size limit; refuses once the limit is passed. */
static int grow_buffer(char **buf, size_t *cap, const char *path, pc_error *err) {
  if (*cap > TOL_MAX_FILE_BYTES)
    return pc_error_set(err, PC_EIO, "%s: %s (at most %zu bytes)", path, strerror(EFBIG),
                        TOL_MAX_FILE_BYTES);
  size_t want = *cap ? 2 * *cap : TOL_READ_CHUNK;
  if (want > TOL_MAX_FILE_BYTES + 1)
    want = TOL_MAX_FILE_BYTES + 1; /* one byte past the limit tells a too-large file */
  char *grown = realloc(*buf, want);
  if (!grown)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", path);
  *buf = grown;
  *cap = want;
  return PC_OK;
}

static int read_stream(FILE *f, const char *path, char **buf, size_t *len, pc_error *err) {
  size_t cap = 0;
  int rc = PC_OK;
  for (;;) {
    if (*len == cap && (rc = grow_buffer(buf, &cap, path, err)))
      return rc;
    size_t want = cap - *len;
    size_t got = fread(*buf + *len, 1, want, f);
    *len += got;
    if (got < want)
      break;
  }
  if (ferror(f))
    return pc_error_set(err, PC_EIO, "%s: %s", path, strerror(errno));
  return PC_OK;
}

/* Opens for reading without waiting for a writer: a FIFO that nobody writes to reads as empty
 * instead of blocking forever, while a pipe with a writer (a shell's <(...)) is read as usual. */
static FILE *open_no_wait(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  int flags = fcntl(fd, F_GETFL);
  FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    int saved = errno;
    close(fd);
    errno = saved;
  }
  return f;
}

int pc_tolset_read_file(const char *path, char **text, size_t *len, pc_error *err) {
  *text = NULL;
  *len = 0;
  if (!path)
    return pc_error_set(err, PC_EUSAGE, "pc_tolset_read_file: no path");
  FILE *f = open_no_wait(path);
  if (!f)
    return pc_error_set(err, PC_EIO, "%s: %s", path, strerror(errno));
  int rc = read_stream(f, path, text, len, err);
  fclose(f);
  if (rc < 0) {
    free(*text);
    *text = NULL;
    *len = 0;
  }
  return rc;
}

int pc_tolset_load_file(pc_tolset *set, const char *path, pc_error *err) {
  if (!set || !path)
    return pc_error_set(err, PC_EUSAGE, "pc_tolset_load_file: no set or no path");
  char *buf = NULL;
  size_t len = 0;
  int rc = pc_tolset_read_file(path, &buf, &len, err);
  if (rc == PC_OK)
    rc = load_text(set, path, buf, len, false, err);
  free(buf);
  return rc;
}
