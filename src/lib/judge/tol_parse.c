/* The tolerance grammar (tol_parse.h): the keys of a tolerance file and the shape of their
 * values, read with the reader of tol_yaml.h into the layers of tol_internal.h, which
 * tol_resolve.c walks. What a value means (its range, a format's name, a rule as a whole) is
 * judged by tol_check.h. Schema: docs/tolerances.md. */
#include "tol_parse.h"

#include "tol_check.h"
#include "tol_yaml.h"

#include "pc_internal.h" /* pc_strdup */

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* free, realloc */
#include <string.h> /* memset, strcmp, strlen */

static const size_t TOL_FIRST_RULES = 8; /* first capacity of a file's rule array */

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
_Static_assert(TOL_COUNT_OF(layer_keys) == RULE_KEY_COUNT, "one name per layer key");

/* Keys of one metric's mapping, in the order of the MPARAM_* indices (tol_check.h). */
static const char *const metric_param_keys[] = {"min", "max", "k"};
_Static_assert(TOL_COUNT_OF(metric_param_keys) == MPARAM_COUNT, "one name per metric key");

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
_Static_assert(TOL_COUNT_OF(criterion_keys) == CRIT_COUNT, "one name per criterion");

static const char *const top_keys[] = {"version", "defaults", "rules"};
enum { TOP_VERSION, TOP_DEFAULTS, TOP_RULES, TOP_COUNT };

/* What the top level fills: the file, and how many rules it may still add to the set. */
typedef struct tol_doc {
  tol_file *file;
  size_t max_rules;
} tol_doc;

/* A layer being read, and where its `elementwise` value stood (for tol_check's rule check). */
typedef struct layer_ctx {
  tol_layer *layer;
  yaml_mark_t elementwise_at;
} layer_ctx;

/* ---- Selectors --------------------------------------------------------------------------- */

static int parse_glob(tol_reader *r, tol_layer *layer) {
  int rc = pc_tol_check_glob(r, "match");
  if (rc)
    return rc;
  layer->glob = pc_strdup(pc_tol_yaml_text(&r->ev));
  return layer->glob ? PC_OK : pc_tol_yaml_nomem(r);
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

static int add_cond_glob(tol_reader *r, tol_cond *c, const char *what) {
  int rc = pc_tol_check_glob(r, what);
  if (rc)
    return rc;
  char **globs = realloc(c->globs, (c->nglobs + 1) * sizeof *globs);
  if (!globs)
    return pc_tol_yaml_nomem(r);
  c->globs = globs;
  if (!(globs[c->nglobs] = pc_strdup(pc_tol_yaml_text(&r->ev))))
    return pc_tol_yaml_nomem(r);
  c->nglobs++;
  return PC_OK;
}

/* A glob, or a non-empty sequence of globs (any of them may match), for attribute `name`. */
static int parse_cond(tol_reader *r, tol_layer *rule, const char *name, const char *what) {
  tol_cond *c = add_cond(rule, name);
  if (!c)
    return pc_tol_yaml_nomem(r);
  if (r->ev.type != YAML_SEQUENCE_START_EVENT)
    return add_cond_glob(r, c, what);
  yaml_mark_t at = r->ev.start_mark;
  int rc;
  while ((rc = pc_tol_yaml_next(r)) == PC_OK && r->ev.type != YAML_SEQUENCE_END_EVENT)
    if ((rc = add_cond_glob(r, c, what)))
      return rc;
  if (rc == PC_OK && c->nglobs == 0)
    return pc_tol_yaml_fail(r, at, "'%s' must not be an empty list", what);
  return rc;
}

/* The current key of `match_attr` as an attribute name in name[TOL_QUOTE_MAX], not one of the
 * rule's conditions from `first` on. */
static int read_attr_name(tol_reader *r, const tol_layer *rule, size_t first, char *name) {
  const yaml_event_t *ev = &r->ev;
  if (ev->type != YAML_SCALAR_EVENT || pc_tol_yaml_is_null(ev))
    return pc_tol_yaml_fail(r, ev->start_mark, "a key in 'match_attr' must be a string, got %s",
                            pc_tol_yaml_node_kind(ev));
  if (ev->data.scalar.length == 0 || strlen(pc_tol_yaml_text(ev)) != ev->data.scalar.length ||
      ev->data.scalar.length >= TOL_QUOTE_MAX)
    return pc_tol_yaml_fail(r, ev->start_mark,
                            "an attribute name must have 1 to %d bytes and no NUL character",
                            TOL_QUOTE_MAX - 1);
  snprintf(name, TOL_QUOTE_MAX, "%s", pc_tol_yaml_text(ev));
  for (size_t i = first; i < rule->nconds; i++)
    if (strcmp(rule->conds[i].name, name) == 0)
      return pc_tol_yaml_fail(r, ev->start_mark, "duplicate key '%s' in 'match_attr'", name);
  return PC_OK;
}

/* `match_attr`: a non-empty mapping from attribute names to globs or lists of globs. */
static int parse_match_attr(tol_reader *r, tol_layer *rule) {
  yaml_mark_t at = r->ev.start_mark;
  int rc = pc_tol_yaml_expect_mapping(r, "'match_attr'");
  size_t first = rule->nconds;
  while (rc == PC_OK && (rc = pc_tol_yaml_next(r)) == PC_OK &&
         r->ev.type != YAML_MAPPING_END_EVENT) {
    char name[TOL_QUOTE_MAX];
    char what[2 * TOL_QUOTE_MAX];
    if ((rc = read_attr_name(r, rule, first, name)))
      return rc;
    snprintf(what, sizeof what, "match_attr.%s", name);
    if ((rc = pc_tol_yaml_next(r)) || (rc = parse_cond(r, rule, name, what)))
      return rc;
  }
  if (rc == PC_OK && rule->nconds == first)
    return pc_tol_yaml_fail(r, at, "'match_attr' must not be empty");
  return rc;
}

/* ---- Criteria ---------------------------------------------------------------------------- */

static int on_criterion(tol_reader *r, size_t key, void *arg) {
  tol_entry *entry = arg;
  unsigned bit = 1u << key;
  if (pc_tol_yaml_is_null(&r->ev)) {
    entry->unset |= bit;
    return PC_OK;
  }
  const char *what = criterion_keys[key];
  double *value = &entry->value[key];
  int rc;
  switch (key) {
  case CRIT_MAX_ULP:
    rc = pc_tol_yaml_u64(r, what, &entry->max_ulp);
    break;
  case CRIT_MAX_MISMATCH_FRACTION:
    rc = pc_tol_yaml_double(r, what, 1.0, value);
    break;
  case CRIT_PRECISION:
  case CRIT_ACCUMULATION:
    rc = pc_tol_check_format(r, what, key == CRIT_PRECISION, value);
    break;
  default: /* atol, rtol and the model's coefficients */
    rc = pc_tol_yaml_double(r, what, pc_tol_criterion_max(key), value);
    break;
  }
  if (rc == PC_OK)
    entry->set |= bit;
  return rc;
}

static int parse_entry(tol_reader *r, tol_entry *entry, const char *dtype_key) {
  char where[TOL_QUOTE_MAX];
  snprintf(where, sizeof where, "'%s'", dtype_key);
  unsigned seen;
  int rc = pc_tol_yaml_expect_mapping(r, where);
  return rc ? rc
            : pc_tol_yaml_walk_mapping(r, criterion_keys, CRIT_COUNT, where, on_criterion, entry,
                                       &seen);
}

/* ---- Product metrics -------------------------------------------------------------------- */

static int on_metric_param(tol_reader *r, size_t key, void *arg) {
  tol_metric_params *mp = arg;
  char what[TOL_QUOTE_MAX];
  snprintf(what, sizeof what, "%s.%s", pc_metric_name(mp->m), metric_param_keys[key]);
  if (key == MPARAM_K) {
    int rc = pc_tol_yaml_u64(r, what, &mp->k);
    return rc ? rc : pc_tol_check_topk(r, what, mp->k);
  }
  return pc_tol_yaml_double(r, what, pc_tol_metric_bound_max(mp->m), &mp->bound);
}

static int on_metric(tol_reader *r, size_t key, void *arg) {
  tol_metrics *tm = arg;
  tol_metric_params mp = {.m = (pc_metric)key};
  yaml_mark_t at = r->ev.start_mark;
  char where[TOL_QUOTE_MAX];
  snprintf(where, sizeof where, "'%s'", pc_metric_name(mp.m));
  if (pc_tol_yaml_is_null(&r->ev)) {
    tm->unset |= 1u << key;
    return PC_OK;
  }
  int rc = pc_tol_yaml_expect_mapping(r, where);
  if (rc ||
      (rc = pc_tol_yaml_walk_mapping(r, metric_param_keys, MPARAM_COUNT, where, on_metric_param,
                                     &mp, &mp.seen)) ||
      (rc = pc_tol_check_metric_params(r, at, &mp)))
    return rc;
  tm->set |= 1u << key;
  tm->limit[key] = mp.bound;
  if (mp.m == PC_METRIC_TOPK_OVERLAP)
    tm->topk = mp.k;
  return PC_OK;
}

/* `metrics: null` clears every metric that earlier rules set. */
static int parse_metrics(tol_reader *r, tol_metrics *tm) {
  const char *names[PC_METRIC_COUNT_];
  for (int m = 0; m < PC_METRIC_COUNT_; m++)
    names[m] = pc_metric_name((pc_metric)m);
  if (pc_tol_yaml_is_null(&r->ev)) {
    tm->unset = (1u << PC_METRIC_COUNT_) - 1;
    return PC_OK;
  }
  unsigned seen;
  int rc = pc_tol_yaml_expect_mapping(r, "'metrics'");
  return rc ? rc
            : pc_tol_yaml_walk_mapping(r, names, PC_METRIC_COUNT_, "'metrics'", on_metric, tm,
                                       &seen);
}

static int parse_elementwise(tol_reader *r, layer_ctx *ctx) {
  const yaml_event_t *ev = &r->ev;
  bool plain = ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
  bool t = plain && pc_tol_yaml_scalar_index(ev, true_spellings, TOL_COUNT_OF(true_spellings)) <
                        TOL_COUNT_OF(true_spellings);
  bool f = plain && pc_tol_yaml_scalar_index(ev, false_spellings, TOL_COUNT_OF(false_spellings)) <
                        TOL_COUNT_OF(false_spellings);
  if (!t && !f)
    return pc_tol_yaml_fail(r, ev->start_mark, "'elementwise' must be true or false, got %s",
                            pc_tol_yaml_node_kind(ev));
  ctx->layer->metrics.has_elementwise = true;
  ctx->layer->metrics.elementwise = t;
  ctx->elementwise_at = ev->start_mark;
  return PC_OK;
}

/* ---- Layers ------------------------------------------------------------------------------ */

static int on_layer_key(tol_reader *r, size_t key, void *arg) {
  layer_ctx *ctx = arg;
  tol_layer *layer = ctx->layer;
  switch (key) {
  case KEY_MATCH:
    return parse_glob(r, layer);
  case KEY_METRICS:
    return parse_metrics(r, &layer->metrics);
  case KEY_ELEMENTWISE:
    return parse_elementwise(r, ctx);
  case KEY_MATCH_MODULE_TYPE:
    return parse_cond(r, layer, MODULE_TYPE_ATTR, "match_module_type");
  case KEY_MATCH_ATTR:
    return parse_match_attr(r, layer);
  default:
    return parse_entry(r, &layer->entry[key], layer_keys[key]);
  }
}

static int parse_defaults(tol_reader *r, tol_doc *doc) {
  unsigned seen;
  layer_ctx ctx = {.layer = &doc->file->defaults};
  if (pc_tol_yaml_is_null(&r->ev))
    return PC_OK;
  int rc = pc_tol_yaml_expect_mapping(r, "'defaults'");
  return rc ? rc
            : pc_tol_yaml_walk_mapping(r, layer_keys, KEY_COUNT, "'defaults'", on_layer_key, &ctx,
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

static int parse_rule(tol_reader *r, tol_doc *doc) {
  yaml_mark_t at = r->ev.start_mark;
  if (doc->file->n_rules >= doc->max_rules)
    return pc_tol_yaml_fail(r, at, "too many rules (at most %d in all loaded files)",
                            TOL_MAX_RULES);
  int rc = pc_tol_yaml_expect_mapping(r, "a rule");
  if (rc)
    return rc;
  layer_ctx ctx = {.layer = add_rule(doc->file)};
  if (!ctx.layer)
    return pc_tol_yaml_nomem(r);
  unsigned seen;
  rc = pc_tol_yaml_walk_mapping(r, layer_keys, RULE_KEY_COUNT, "a rule", on_layer_key, &ctx, &seen);
  unsigned selectors = 1u << KEY_MATCH | 1u << KEY_MATCH_MODULE_TYPE | 1u << KEY_MATCH_ATTR;
  return rc ? rc
            : pc_tol_check_rule(r, at, seen & selectors, &ctx.layer->metrics, ctx.elementwise_at);
}

static int parse_rules(tol_reader *r, tol_doc *doc) {
  if (pc_tol_yaml_is_null(&r->ev))
    return PC_OK;
  if (r->ev.type != YAML_SEQUENCE_START_EVENT)
    return pc_tol_yaml_fail(r, r->ev.start_mark, "'rules' must be a sequence, got %s",
                            pc_tol_yaml_node_kind(&r->ev));
  int rc;
  while ((rc = pc_tol_yaml_next(r)) == PC_OK && r->ev.type != YAML_SEQUENCE_END_EVENT)
    if ((rc = parse_rule(r, doc)))
      return rc;
  return rc;
}

/* ---- The document ------------------------------------------------------------------------ */

static int parse_version(tol_reader *r) {
  uint64_t version;
  int rc = pc_tol_yaml_u64(r, "version", &version);
  return rc ? rc : pc_tol_check_version(r, version);
}

static int on_top_key(tol_reader *r, size_t key, void *arg) {
  switch (key) {
  case TOP_VERSION:
    return parse_version(r);
  case TOP_DEFAULTS:
    return parse_defaults(r, arg);
  default:
    return parse_rules(r, arg);
  }
}

static int parse_top(tol_reader *r, tol_doc *doc) {
  yaml_mark_t at = r->ev.start_mark;
  unsigned seen;
  int rc = pc_tol_yaml_expect_mapping(r, "the top level");
  if (rc || (rc = pc_tol_yaml_walk_mapping(r, top_keys, TOP_COUNT, "the top level", on_top_key, doc,
                                           &seen)))
    return rc;
  if (!(seen & (1u << TOP_VERSION)))
    return pc_tol_yaml_fail(r, at, "missing version");
  return PC_OK;
}

/* stream-start, then exactly one document whose root is the top-level mapping. An empty stream
 * or an empty document has no version. */
static int parse_stream(tol_reader *r, tol_doc *doc) {
  int rc;
  if ((rc = pc_tol_yaml_next(r)) || (rc = pc_tol_yaml_next(r)))
    return rc;
  if (r->ev.type == YAML_STREAM_END_EVENT)
    return pc_tol_yaml_fail(r, r->ev.start_mark, "missing version");
  if ((rc = pc_tol_yaml_next(r)))
    return rc;
  if (pc_tol_yaml_is_null(&r->ev))
    return pc_tol_yaml_fail(r, r->ev.start_mark, "missing version");
  if ((rc = parse_top(r, doc)) || (rc = pc_tol_yaml_next(r)) || (rc = pc_tol_yaml_next(r)))
    return rc;
  if (r->ev.type == YAML_DOCUMENT_START_EVENT)
    return pc_tol_yaml_fail(r, r->ev.start_mark, "only one YAML document is allowed");
  return PC_OK;
}

int pc_tol_parse(tol_file *file, const char *name, const char *text, size_t len, size_t max_rules,
                 pc_error *err) {
  tol_reader r;
  tol_doc doc = {.file = file, .max_rules = max_rules};
  int rc = pc_tol_yaml_open(&r, name, text, len, err);
  if (rc == PC_OK)
    rc = parse_stream(&r, &doc);
  pc_tol_yaml_close(&r);
  return rc;
}

void pc_tol_file_clear(tol_file *file) {
  pc_tol_layer_clear(&file->defaults);
  for (size_t i = 0; i < file->n_rules; i++)
    pc_tol_layer_clear(&file->rules[i]);
  free(file->rules);
}
