/* The judge (judge.h); the criteria and allowances are those of docs/tolerance-model.md. */
#include "judge.h"
#include "judge_envelope.h"
#include "reasons.h"
#include "structure.h"
#include "tol_resolve.h"

#include "pc_internal.h"

#include <ctype.h>  /* tolower, isdigit */
#include <math.h>   /* fabs, fmax, sqrt, INFINITY */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, free, qsort */
#include <string.h> /* strchr, strcmp, strncmp */

/* Neighbours on each side, in execution order, whose RMS(A) sets a tensor's noise scale: the
 * other parameters of its module (a conv's weight next to its bias) and the tensors that fed
 * it or took its output. */
enum { PC_NOISE_NEIGHBOURS = 2 };

/* Terms of the sum that a tensor of (near) zero exact value holds when its dump records no
 * reduction_length: a bias gradient sums over batch and positions, up to 4096 in dumps of
 * models at the size parity tests run. */
static const double PC_NOISE_TERMS = 4096;

static const char *const pc_criterion_names[PC_CRIT_METRIC_] = {
    "nan_mismatch", "inf_mismatch", "mismatch_fraction", "rel_rms",
    "scale_error",  "structure",    "envelope",          "envelope_elements"};

const char *pc_criterion_name(pc_criterion c) {
  if ((unsigned)c >= PC_CRIT_COUNT_)
    return "unknown";
  return c < PC_CRIT_METRIC_ ? pc_criterion_names[c]
                             : pc_metric_name((pc_metric)(c - PC_CRIT_METRIC_));
}

bool pc_criterion_is_floor(pc_criterion c) {
  return c >= PC_CRIT_METRIC_ && c < PC_CRIT_COUNT_ &&
         pc_metric_is_floor((pc_metric)(c - PC_CRIT_METRIC_));
}

/* --- one tensor -------------------------------------------------------------------------- */

/* Elements first (nan/inf mismatches, then the mismatch fraction), then the tensor-level
 * criteria on the aggregate figures; written as !(value <= limit) so that NaN breaks. */
static void pc_judge_elements(pc_tensor *t) {
  const pc_stats *s = &t->stats;
  const pc_tol *tol = &t->tol;
  double allowed = (tol->set & PC_TOL_MAX_MISMATCH_FRACTION) ? tol->max_mismatch_fraction : 0;
  if (s->nan_mismatches)
    pc_add_reason(t, PC_CRIT_NAN_MISMATCH, (double)s->nan_mismatches, 0);
  if (s->inf_mismatches)
    pc_add_reason(t, PC_CRIT_INF_MISMATCH, (double)s->inf_mismatches, 0);
  /* count > 0 when there are mismatches: a tensor without elements has none. */
  double fraction = s->count ? (double)s->mismatches / (double)s->count : 0;
  if (s->mismatches && fraction > allowed)
    pc_add_reason(t, PC_CRIT_MISMATCH_FRACTION, fraction, allowed);
  if (s->finite_terms) {
    pc_aggregates g = pc_stats_aggregates(s);
    if ((tol->set & PC_TOL_MAX_REL_RMS) && !(g.rel_rms <= tol->max_rel_rms))
      pc_add_reason(t, PC_CRIT_REL_RMS, g.rel_rms, tol->max_rel_rms);
    double limit = pc_tol_scale_limit(tol, s->finite_terms, isfinite(g.rel_rms) ? g.rel_rms : 0);
    if ((tol->set & PC_TOL_MAX_SCALE) && !(fabs(g.scale_error) <= limit))
      pc_add_reason(t, PC_CRIT_SCALE_ERROR, fabs(g.scale_error), limit);
  }
}

/* Drops every magnitude reason: the run-level allowances explain element and tensor errors,
 * never a structure rounding cannot produce, nor what the product sees. */
static void pc_drop_element_reasons(pc_tensor *t) {
  for (size_t i = t->nreasons; i-- > 0;)
    if (t->reasons[i].criterion < PC_CRIT_STRUCTURE)
      pc_drop_reason(t, i);
}

/* The unit roundoff a tensor is judged at: the profile's (the coarser of the compare dtype and
 * its precision), else the compare dtype's. */
static double pc_judged_u(const pc_tensor *t) {
  return t->tol.u > 0 ? t->tol.u : pc_dtype_unit_roundoff(t->compare);
}

/* A signature rounding cannot produce fails whatever the magnitudes (structure.h). NaN and inf
 * mismatches have their own reasons already. */
static void pc_judge_structure(pc_tensor *t) {
  memset(&t->diagnosis, 0, sizeof t->diagnosis);
  if (!pc_dtype_is_float(t->compare) || t->is_complex)
    return;
  if (!pc_structure_find(t, pc_judged_u(t), &t->diagnosis))
    return;
  if (t->diagnosis.kind != PC_DIAG_NAN_INJECTED && t->diagnosis.kind != PC_DIAG_INF_INJECTED)
    pc_add_reason(t, PC_CRIT_STRUCTURE, t->diagnosis.statistic, t->diagnosis.limit);
}

/* Each configured metric against its limit: a floor must be reached, a ceiling kept; written so
 * that NaN breaks either. */
static void pc_judge_metrics(pc_tensor *t) {
  const pc_metric_tol *mt = &t->tol.metrics;
  for (int m = 0; m < PC_METRIC_COUNT_; m++) {
    pc_metric_result *r = &t->metrics[m];
    if (!((mt->set >> m) & 1u) || !r->present)
      continue;
    r->limit = mt->limit[m];
    r->pass = pc_metric_is_floor((pc_metric)m) ? r->value >= r->limit : r->value <= r->limit;
    if (!r->pass)
      pc_add_reason(t, (pc_criterion)(PC_CRIT_METRIC_ + m), r->value, r->limit);
  }
}

/* The element and tensor criteria, then the product metrics; with `elementwise: false` the
 * metrics alone. */
void pc_judge_tensor(pc_tensor *t) {
  const pc_tol *tol = &t->tol;
  t->nreasons = 0;
  t->caused_by = -1;
  if (t->verdict == PC_VERDICT_ERROR)
    return;
  if (!(tol->metrics.set && tol->metrics.elementwise_off)) {
    pc_judge_elements(t);
    pc_judge_structure(t);
  }
  pc_judge_metrics(t);
  t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
  if (t->envelope.present && !(tol->metrics.set && tol->metrics.elementwise_off))
    pc_judge_envelope(t);
}

/* --- execution order ---------------------------------------------------------------------- */

/* Without `execution_index` attributes the order is inferred from the paths (docs/
 * tolerance-model.md, "Execution order"): inputs, then the forward tensors in file order, then
 * losses and outputs, then gradients in backward order, that is by their module's forward
 * position, last first. */
enum { PC_CLASS_INDEXED, PC_CLASS_INPUT, PC_CLASS_FORWARD, PC_CLASS_LOSS, PC_CLASS_GRAD };

typedef struct pc_order_key {
  int cls;
  long long major; /* execution_index, or minus the module's forward position for gradients */
  size_t index;    /* position in the run: ties keep file order (gradients: reversed) */
  long long minor;
} pc_order_key;

static bool pc_contains_ci(const char *s, size_t n, const char *word) {
  size_t w = strlen(word);
  for (size_t i = 0; i + w <= n; i++) {
    size_t k = 0;
    while (k < w && tolower((unsigned char)s[i + k]) == word[k])
      k++;
    if (k == w)
      return true;
  }
  return false;
}

/* The first path component (without the leading '/') and its length. */
static const char *pc_first_component(const char *path, size_t *len) {
  const char *p = path[0] == '/' ? path + 1 : path;
  const char *slash = strchr(p, '/');
  *len = slash ? (size_t)(slash - p) : strlen(p);
  return p;
}

/* True when s[0, n) holds the word "grad", "grads", "gradient" or "gradients" (any case)
 * between separators ('/', '.', '_', '-' or the ends): "gradients", "param_grads",
 * "w.grad", but not "upgrade". */
static bool pc_has_grad_word(const char *s, size_t n) {
  static const char *const words[] = {"gradients", "gradient", "grads", "grad"};
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && !strchr("/._-", s[i - 1]))
      continue;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
      size_t k = 0, len = strlen(words[w]);
      while (k < len && i + k < n && tolower((unsigned char)s[i + k]) == words[w][k])
        k++;
      if (k == len && (i + k == n || strchr("/._-", s[i + k])))
        return true;
    }
  }
  return false;
}

/* A gradient: its path names itself one ("/gradients/fc.weight", "/grads/fc/weight",
 * "/fc.weight.grad"). */
static bool pc_is_gradient(const char *path) {
  return pc_has_grad_word(path, strlen(path));
}

static int pc_path_class(const char *path) {
  size_t n;
  const char *first = pc_first_component(path, &n);
  const char *last = strrchr(path, '/');
  last = last ? last + 1 : path;
  if (pc_is_gradient(path))
    return PC_CLASS_GRAD;
  if (strchr(first, '/') && pc_contains_ci(first, n, "input"))
    return PC_CLASS_INPUT;
  if ((strchr(first, '/') && pc_contains_ci(first, n, "output")) ||
      pc_contains_ci(last, strlen(last), "loss"))
    return PC_CLASS_LOSS;
  return PC_CLASS_FORWARD;
}

/* A name inside a path: no copy, since a run may hold 200,000 tensors. */
typedef struct pc_name {
  const char *s;
  size_t len;
} pc_name;

/* A forward tensor's component below its top group, call index included
 * ("/activations/012_layer1.0.conv1/0" -> "012_layer1.0.conv1"); the path's only component
 * when it has one. */
static pc_name pc_forward_component(const char *path) {
  size_t n;
  const char *p = pc_first_component(path, &n);
  if (p[n] == '/')
    p += n + 1;
  const char *end = strchr(p, '/');
  return (pc_name){p, end ? (size_t)(end - p) : strlen(p)};
}

/* The digits of a component's call index (the leading digits when '_' follows them: "012" of
 * "012_layer1"); none (len 0) when it has none. */
static pc_name pc_call_index(pc_name c) {
  size_t k = 0;
  while (k < c.len && isdigit((unsigned char)c.s[k]))
    k++;
  return (pc_name){c.s, k < c.len && c.s[k] == '_' ? k : 0};
}

/* The module a forward tensor belongs to: the component below its top group, without a
 * leading call index ("/activations/012_layer1.0.conv1/0" -> "layer1.0.conv1"), and a DDP
 * "module." prefix dropped. */
static pc_name pc_forward_module(const char *path) {
  pc_name m = pc_forward_component(path);
  size_t skip = pc_call_index(m).len;
  skip += skip ? 1 : 0; /* the '_' */
  if (m.len - skip >= 7 && strncmp(m.s + skip, "module.", 7) == 0)
    skip += 7;
  return (pc_name){m.s + skip, m.len - skip};
}

/* A gradient's parameter as a dotted name below the gradient group ("/grads/l1/conv/weight"
 * and "/gradients/l1.conv.weight" -> "l1.conv.weight"), DDP prefix dropped. */
static void pc_gradient_param(const char *path, char *buf, size_t cap) {
  const char *p = path[0] == '/' ? path + 1 : path;
  const char *after = p, *component = p;
  for (const char *s = p; *s; s++)
    if (*s == '/') {
      if (pc_has_grad_word(component, (size_t)(s - component)))
        after = s + 1; /* below the deepest group naming gradients */
      component = s + 1;
    }
  if (strncmp(after, "module.", 7) == 0)
    after += 7;
  size_t k = 0;
  for (; after[k] && k + 1 < cap; k++)
    buf[k] = after[k] == '/' ? '.' : after[k];
  buf[k] = '\0';
}

typedef struct pc_module_pos {
  pc_name name;
  size_t pos;
} pc_module_pos;

static int pc_cmp_name(pc_name a, pc_name b) {
  int c = memcmp(a.s, b.s, a.len < b.len ? a.len : b.len);
  return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int pc_cmp_module(const void *x, const void *y) {
  const pc_module_pos *a = x, *b = y;
  int c = pc_cmp_name(a->name, b->name);
  return c ? c : (a->pos < b->pos) - (a->pos > b->pos); /* the last call first */
}

/* The forward position of a parameter's module: its dotted name shortened from the right until
 * a forward module of that name is found ("lstm.weight_ih_l0" -> "lstm"); -1 when none is. */
static long long pc_module_position(const pc_module_pos *mods, size_t n, const char *param) {
  pc_name key = {param, strlen(param)};
  while (key.len) {
    while (key.len && key.s[key.len - 1] != '.')
      key.len--;
    if (!key.len)
      break;
    key.len--; /* drop the dot */
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first entry whose name is not below key */
      size_t mid = lo + (hi - lo) / 2;
      if (pc_cmp_name(mods[mid].name, key) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < n && pc_cmp_name(mods[lo].name, key) == 0)
      return (long long)mods[lo].pos;
  }
  return -1;
}

static int pc_cmp_key(const void *x, const void *y) {
  const pc_order_key *a = x, *b = y;
  if (a->cls != b->cls)
    return a->cls < b->cls ? -1 : 1;
  if (a->major != b->major)
    return a->major < b->major ? -1 : 1;
  if (a->minor != b->minor)
    return a->minor < b->minor ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* The forward modules of tensors lo .. hi - 1. */
static int pc_forward_modules(const pc_run *run, size_t lo, size_t hi, pc_module_pos **out,
                              size_t *n) {
  *n = 0;
  *out = malloc((hi > lo ? hi - lo : 1) * sizeof **out);
  if (!*out)
    return PC_ENOMEM;
  for (size_t i = lo; i < hi; i++)
    if (pc_path_class(pc_tensor_dataset(pc_run_at(run, i))) == PC_CLASS_FORWARD) {
      (*out)[*n].name = pc_forward_module(pc_tensor_dataset(pc_run_at(run, i)));
      (*out)[(*n)++].pos = i;
    }
  qsort(*out, *n, sizeof **out, pc_cmp_module);
  return PC_OK;
}

static pc_order_key pc_key(const pc_run *run, size_t i, const pc_module_pos *mods, size_t n) {
  const pc_tensor *t = pc_run_at(run, i);
  const char *path = pc_tensor_dataset(t);
  pc_order_key k = {PC_CLASS_INDEXED, 0, i, 0};
  if (t->context.exec_index >= 0) {
    k.major = t->context.exec_index;
    return k;
  }
  k.cls = pc_path_class(path);
  if (k.cls == PC_CLASS_GRAD) {
    char param[256];
    pc_gradient_param(path, param, sizeof param);
    long long pos = pc_module_position(mods, n, param);
    k.major = pos >= 0 ? -pos : 1; /* unmatched parameters: at the end of backward */
    k.minor = -(long long)i;       /* a module's own parameters: last stored first */
  }
  return k;
}

/* The end of the run of tensors from lo that share lo's file (folder mode; all of them
 * otherwise): the comparator adds a file's tensors together, files in path order. */
/* Two tensors of one file: both of the same file in folder mode, or both outside folder mode. */
static bool pc_same_file(const pc_tensor *x, const pc_tensor *y) {
  return x->file && y->file ? strcmp(x->file, y->file) == 0 : x->file == y->file;
}

static size_t pc_file_end(const pc_run *run, size_t lo) {
  size_t hi = lo + 1;
  while (hi < run->ntensors && pc_same_file(pc_run_at(run, hi), pc_run_at(run, lo)))
    hi++;
  return hi;
}

/* The order of an HDF5 group's name index, which is a file's order when it does not track
 * creation order: component by component, each by its bytes ("/a/x" before "/a.b/y"). */
static int pc_cmp_names_as_walked(const char *x, const char *y) {
  while (*x && *x == *y)
    x++, y++;
  int cx = *x == '/' ? 1 : *x ? (unsigned char)*x + 1 : 0;
  int cy = *y == '/' ? 1 : *y ? (unsigned char)*y + 1 : 0;
  return (cx > cy) - (cx < cy);
}

/* Call indices as numbers, whatever their width ("9" before "010"). */
static int pc_cmp_call_index(pc_name a, pc_name b) {
  while (a.len && a.s[0] == '0')
    a.s++, a.len--;
  while (b.len && b.s[0] == '0')
    b.s++, b.len--;
  return a.len != b.len ? (a.len > b.len) - (a.len < b.len) : pc_cmp_name(a, b);
}

/* A tensor whose place the names decide: a forward tensor of A (one of B only comes after A's)
 * without execution_index, that takes part (a skipped one is never judged). */
static bool pc_order_by_name(const pc_tensor *t) {
  return t->context.exec_index < 0 && t->verdict != PC_VERDICT_MISSING_IN_A &&
         t->verdict != PC_VERDICT_SKIPPED &&
         pc_path_class(pc_tensor_dataset(t)) == PC_CLASS_FORWARD;
}

/* Whether the forward tensors of file [lo, hi) whose order names decide may not be in call
 * order (judge.h, pc_order_doubt): at least two, in the order of their names, and one without a
 * call index, or two in a row whose call indices do not increase (an equal index is in order
 * only within one component: the elements of one call's tuple output). A file whose order is
 * not its names' tracks creation order, which a dumper writes in call order. */
static pc_order_doubt pc_file_doubt(const pc_run *run, size_t lo, size_t hi) {
  const pc_order_doubt sure = {PC_ORDER_SURE, -1, -1};
  pc_order_doubt found = sure;
  const char *prev_path = NULL; /* the previous such tensor's, with its component and index */
  pc_name pc = {NULL, 0}, pcall = {NULL, 0};
  long prev_index = -1;
  size_t n = 0;
  for (size_t i = lo; i < hi; i++) {
    const pc_tensor *t = pc_run_at(run, i);
    if (!pc_order_by_name(t))
      continue;
    n++;
    const char *path = pc_tensor_dataset(t);
    pc_name c = pc_forward_component(path), call = pc_call_index(c);
    if (prev_path) {
      if (pc_cmp_names_as_walked(prev_path, path) > 0)
        return sure;
      int cmp = call.len && pcall.len ? pc_cmp_call_index(pcall, call) : -1;
      if (found.kind == PC_ORDER_SURE && (cmp > 0 || (cmp == 0 && pc_cmp_name(pc, c) != 0)))
        found = (pc_order_doubt){PC_ORDER_CALL_INDEX, (long)i, prev_index};
    }
    if (found.kind == PC_ORDER_SURE && !call.len)
      found = (pc_order_doubt){PC_ORDER_NO_CALL_INDEX, (long)i, -1};
    prev_path = path;
    pc = c;
    pcall = call;
    prev_index = (long)i;
  }
  return n >= 2 ? found : sure;
}

/* Execution order within each file, files in run order (docs/tolerance-model.md); the first
 * file whose inferred order may not be call order fills *doubt. */
static int pc_order_files(pc_run *run, pc_order_key *keys, pc_order_doubt *doubt) {
  for (size_t lo = 0, hi; lo < run->ntensors; lo = hi) {
    pc_module_pos *mods = NULL;
    size_t nmods = 0;
    hi = pc_file_end(run, lo);
    if (doubt->kind == PC_ORDER_SURE)
      *doubt = pc_file_doubt(run, lo, hi);
    if (pc_forward_modules(run, lo, hi, &mods, &nmods) < 0)
      return PC_ENOMEM;
    for (size_t i = lo; i < hi; i++)
      keys[i] = pc_key(run, i, mods, nmods);
    qsort(keys + lo, hi - lo, sizeof *keys, pc_cmp_key);
    free(mods);
  }
  return PC_OK;
}

/* A tensor no cause links yet. The write is skipped when it would leave the record as it was
 * (the comparator makes every tensor so): a large run's records live in a file (spill.h),
 * where a write to a page read since it was given back costs a page fault more. */
static void pc_uncaused(pc_tensor *t) {
  if (t->caused_by != -1)
    t->caused_by = -1;
}

static int pc_compute_order(pc_run *run, pc_order_doubt *doubt) {
  pc_order_key *keys = malloc((run->ntensors ? run->ntensors : 1) * sizeof *keys);
  free(run->order);
  run->order = malloc((run->ntensors ? run->ntensors : 1) * sizeof *run->order);
  int rc = keys && run->order ? pc_order_files(run, keys, doubt) : PC_ENOMEM;
  if (rc == PC_OK)
    for (size_t k = 0; k < run->ntensors; k++) {
      run->order[k] = keys[k].index;
      pc_run_at(run, keys[k].index)->context.exec_index = (int64_t)k;
    }
  free(keys);
  return rc;
}

/* --- run-level allowances ------------------------------------------------------------------ */

/* A float tensor whose figures the run-level allowances may reinterpret. */
static bool pc_judgeable(const pc_tensor *t) {
  return pc_dtype_is_float(t->compare) && t->stats.finite_terms > 0 &&
         (t->verdict == PC_VERDICT_PASS || t->verdict == PC_VERDICT_DRIFT);
}

static double pc_rms(double sum_sq, uint64_t n) {
  return n ? sqrt(sum_sq / (double)n) : 0;
}

static int pc_cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The noise scale at position k: the median RMS(A) of the PC_NOISE_NEIGHBOURS nearest judgeable
 * tensors of nonzero RMS(A) on each side within the tensor's own file (the lower middle one of
 * an even count), 0 when there are none. A median, not the largest: neighbours may hold other
 * quantities of another scale (a sum of 4096 terms next to a softmax), and one such must not make
 * a small tensor pass for noise. Its own file only: a verdict depends on the file it is in, never
 * on which other files a run holds, their order or how processes share them (issue 36, item 5). */
static double pc_noise_scale(const pc_run *run, size_t k) {
  double rms[2 * PC_NOISE_NEIGHBOURS];
  size_t n = 0;
  const pc_tensor *self = pc_run_at(run, run->order[k]);
  for (int dir = -1; dir <= 1; dir += 2) {
    int found = 0;
    for (size_t j = k; found < PC_NOISE_NEIGHBOURS;) {
      if ((dir < 0 && j == 0) || (dir > 0 && j + 1 >= run->ntensors))
        break;
      j = dir < 0 ? j - 1 : j + 1;
      const pc_tensor *t = pc_run_at(run, run->order[j]);
      if (!pc_same_file(t, self))
        break;
      double r = pc_rms(t->stats.sum_sq_a, t->stats.finite_terms);
      if (!pc_judgeable(t) || !(r > 0))
        continue;
      found++;
      rms[n++] = r;
    }
  }
  qsort(rms, n, sizeof rms[0], pc_cmp_double);
  return n ? rms[(n - 1) / 2] : 0;
}

/* The trend: the largest rel_rms among the last `window` tensors that passed the profile on
 * their own (no run-level allowance), since `start`: the trend restarts at each file and where
 * the gradients begin, so that it never carries one part of a run into another. Fed only by
 * tensors within the profile, it is at most the profile's rel_rms limit: it cannot feed
 * itself. */
typedef struct pc_trend {
  double *rel_rms, *scale; /* scale: their |scale_error|, for the scale they pass on */
  size_t n, start;
} pc_trend;

/* The largest of v over the trend's window. */
static double pc_trend_max(const pc_trend *tr, const double *v, unsigned window) {
  double m = 0;
  size_t from = tr->n - tr->start > window ? tr->n - window : tr->start;
  for (size_t i = from; i < tr->n; i++)
    m = fmax(m, v[i]);
  return m;
}

/* True when the tensor lies in a backward group of the dumper's layout (docs/python.md): its
 * dataset's top-level group is exactly "gradients" or "activation_grads". A schema, not a word
 * search: a forward tensor named "grad_norm" or "w.grad" is no gradient here, since the name
 * would widen its allowance (issue 36, item 5). Other layouts set the growth of their gradient
 * paths by a tolerance rule (docs/tolerances.md). */
static bool pc_in_backward_group(const pc_tensor *t) {
  const char *p = t->path;
  if (t->file && strncmp(p, t->file, strlen(t->file)) == 0 && p[strlen(t->file)] == ':')
    p += strlen(t->file) + 1;
  size_t n;
  p = pc_first_component(p, &n);
  return (n == 9 && strncmp(p, "gradients", 9) == 0) ||
         (n == 16 && strncmp(p, "activation_grads", 16) == 0);
}

/* G for this tensor: gradients may grow more (docs/tolerance-model.md, "Backward"); 1 without a
 * trend. */
static double pc_growth(const pc_tensor *t) {
  if (!(t->tol.set & PC_TOL_TREND))
    return 1;
  return fmax(pc_in_backward_group(t) ? t->tol.trend_growth_backward : t->tol.trend_growth, 1);
}

/* Relaxes the magnitude criteria by what the run explains: a noise-level tensor is judged
 * against its noise floor (they are waived), any other's rel_rms against G times the trend (the
 * backward G for gradients), and its element mismatches are forgiven when that allowance is above
 * the profile's rel_rms limit and the error is spread like noise: its largest element at most P
 * (trend_crest) times its RMS, where a zeroed channel or a stray write stands out; its scale error
 * against the forward G times the largest scale error upstream (trend_scale): a scale is
 * inherited from a scale upstream, not from noise, and does not grow the way a backward chain's
 * noise does (the backward G would hide a 1% scale in every gradient). nan and inf mismatches
 * are never explained. */
static void pc_relax(pc_tensor *t, double trend_scale) {
  const pc_tol *tol = &t->tol;
  pc_context *c = &t->context;
  if (pc_find_reason(t, PC_CRIT_NAN_MISMATCH) || pc_find_reason(t, PC_CRIT_INF_MISMATCH))
    return;
  if (c->noise_level) {
    pc_drop_element_reasons(t);
    return;
  }
  if (!(tol->set & PC_TOL_TREND) || c->trend <= 0)
    return;
  double allowed = pc_growth(t) * c->trend;
  double scale_allowed = tol->trend_growth * trend_scale;
  double rms_err = pc_rms(t->stats.sum_sq_diff, t->stats.finite_terms);
  for (size_t i = t->nreasons; i-- > 0;) {
    pc_reason *r = &t->reasons[i];
    if (r->criterion == PC_CRIT_MISMATCH_FRACTION) {
      if (tol->trend_crest > 0 && t->stats.max_abs <= tol->trend_crest * rms_err &&
          !((tol->set & PC_TOL_MAX_REL_RMS) && allowed <= tol->max_rel_rms))
        pc_drop_reason(t, i);
    } else if (r->criterion == PC_CRIT_REL_RMS || r->criterion == PC_CRIT_SCALE_ERROR) {
      r->limit = fmax(r->limit, r->criterion == PC_CRIT_REL_RMS ? allowed : scale_allowed);
      if (r->value <= r->limit)
        pc_drop_reason(t, i);
    }
  }
}

/* The tensor is rounding noise of a computation of scale S (the noise scale): its exact value
 * is (near) zero, so both sides hold only the rounding of a sum of K terms of scale S, within
 * nu u S, nu = max(noise_floor_u, sqrt(K)) in each side's own unit roundoff (K: the dataset's
 * reduction_length, at least PC_NOISE_TERMS: the noise may come from a reduction upstream, as a
 * BatchNorm's backward, rather than from the tensor's own). Such a tensor (a bias gradient that a
 * following normalisation makes exactly 0) has a rel_rms of order 1 between any two honest runs; it
 * is judged against S, not against its own RMS. A tensor whose A is above A's own rounding bound
 * holds a real value, however small beside its neighbours (a softmax over 1024 positions), and
 * is judged as any other. */
static bool pc_noise_level(const pc_tensor *t, double scale) {
  const pc_tol *tol = &t->tol;
  if (!(tol->set & PC_TOL_NOISE) || !(scale > 0))
    return false;
  double k = fmax((double)t->reduction_length, PC_NOISE_TERMS);
  double nu = fmax(tol->noise_floor_u, sqrt(k));
  double u_a = pc_dtype_unit_roundoff(t->dtype_a != PC_DTYPE_NONE ? t->dtype_a : t->compare);
  double u_a_judged = fmin(u_a > 0 ? u_a : tol->u, tol->u); /* A rounds at most at u */
  return pc_rms(t->stats.sum_sq_a, t->stats.finite_terms) <= nu * u_a_judged * scale &&
         pc_rms(t->stats.sum_sq_diff, t->stats.finite_terms) <= nu * tol->u * scale;
}

/* A noise-level tensor's exact value is (near) zero: both sides hold unrelated noise, so a factor,
 * shift or crossing between them is no evidence. B zero or constant, a NaN or an inf still is:
 * rounding noise is neither. */
static void pc_noise_structure(pc_tensor *t) {
  pc_diagnosis_kind k = t->diagnosis.kind;
  if (!t->diagnosis.structural || k == PC_DIAG_ZEROED || k == PC_DIAG_CONSTANT ||
      k == PC_DIAG_NAN_INJECTED || k == PC_DIAG_INF_INJECTED)
    return;
  memset(&t->diagnosis, 0, sizeof t->diagnosis);
  for (size_t i = t->nreasons; i-- > 0;)
    if (t->reasons[i].criterion == PC_CRIT_STRUCTURE)
      pc_drop_reason(t, i);
}

static void pc_judge_context(pc_run *run, size_t k, pc_trend *tr) {
  pc_tensor *t = pc_run_at(run, run->order[k]);
  pc_context *c = &t->context;
  if (!pc_judgeable(t))
    return;
  pc_aggregates g = pc_stats_aggregates(&t->stats);
  c->judged = true;
  if (t->envelope.present) /* measured on its own: nothing of the run takes part */
    return;
  bool trend = (t->tol.set & PC_TOL_TREND) != 0;
  c->trend = trend ? pc_trend_max(tr, tr->rel_rms, t->tol.trend_window) : 0;
  double trend_scale = trend ? pc_trend_max(tr, tr->scale, t->tol.trend_window) : 0;
  c->noise_scale = pc_noise_scale(run, k);
  c->noise_level = pc_noise_level(t, c->noise_scale);
  if (c->noise_level)
    pc_noise_structure(t);
  bool own_pass = t->nreasons == 0;
  pc_relax(t, trend_scale);
  t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
  if (own_pass && !c->noise_level && isfinite(g.rel_rms) && isfinite(g.scale_error)) {
    tr->scale[tr->n] = fabs(g.scale_error);
    tr->rel_rms[tr->n++] = g.rel_rms;
  }
}

/* Where the trend restarts (pc_trend): a tensor of another file than the previous one, or the
 * first gradient after forward tensors. */
static bool pc_trend_restarts(const pc_run *run, size_t k) {
  if (k == 0)
    return true;
  const pc_tensor *t = pc_run_at(run, run->order[k]), *p = pc_run_at(run, run->order[k - 1]);
  return !pc_same_file(t, p) || (pc_in_backward_group(t) && !pc_in_backward_group(p));
}

/* A failing float tensor without a structure: indeterminate when B keeps no significant digit
 * (its rel_rms `allowance` reaches half the value's size), else drift with what the evidence
 * shows: a slice, a rounding grid, a small factor, else how many times the allowance the error
 * is (never "consistent with rounding": it is beyond what rounding was allowed).
 * `plain`: no reference measured the conditioning, which the diagnosis then suggests. */
static void pc_classify_failure(pc_tensor *t, double allowance, bool plain) {
  if (t->verdict != PC_VERDICT_DRIFT && t->verdict != PC_VERDICT_INDETERMINATE)
    return;
  if (!pc_dtype_is_float(t->compare) || t->is_complex || t->diagnosis.structural ||
      !t->stats.finite_terms)
    return;
  bool magnitude = false, product = false; /* a product metric's failure is the product's */
  for (size_t i = 0; i < t->nreasons; i++) {
    magnitude |= t->reasons[i].criterion < PC_CRIT_STRUCTURE;
    product |= t->reasons[i].criterion >= PC_CRIT_METRIC_;
  }
  double rel_rms = pc_stats_aggregates(&t->stats).rel_rms;
  if (magnitude && !product && allowance >= PC_INDETERMINATE_REL) {
    t->verdict = PC_VERDICT_INDETERMINATE;
    t->diagnosis =
        (pc_diagnosis){PC_DIAG_NO_DIGITS, false, 0, allowance, rel_rms, PC_INDETERMINATE_REL};
    return;
  }
  t->verdict = PC_VERDICT_DRIFT;
  t->diagnosis = pc_structure_noise(t);
  if (t->diagnosis.kind != PC_DIAG_NOISE)
    return;
  t->diagnosis.axis = plain;
  if (allowance > 0 && rel_rms > allowance)
    t->diagnosis =
        (pc_diagnosis){PC_DIAG_BEYOND, false, plain, rel_rms / allowance, rel_rms, allowance};
}

/* The rel_rms the profile allowed the tensor after the run's allowances: its rel_rms reason's
 * limit, else the profile's limit widened by the trend as pc_relax would; 0 without one. */
static double pc_plain_allowance(const pc_tensor *t) {
  for (size_t i = 0; i < t->nreasons; i++)
    if (t->reasons[i].criterion == PC_CRIT_REL_RMS)
      return t->reasons[i].limit;
  if (!(t->tol.set & PC_TOL_MAX_REL_RMS))
    return 0;
  return fmax(t->tol.max_rel_rms, pc_growth(t) * t->context.trend);
}

/* Plain mode: B keeps no significant digit only where the tensor's own allowance reaches half
 * the value's size: honest drift may then have taken every digit. Never because the observed
 * error is large: an error far beyond a small allowance is drift, however large. */
static void pc_classify_plain(pc_tensor *t) {
  if (!t->stats.finite_terms || t->envelope.present)
    return;
  pc_classify_failure(t, pc_plain_allowance(t), true);
}

/* --- cascades ------------------------------------------------------------------------------ */

/* How far a failing tensor is off, for the cascade test: its rel_rms, infinite with nan/inf
 * mismatches; -1 (neither explains nor is explained) for a structural failure (missing, shape,
 * dtype) and for integers, whose differences do not propagate as rounding does. */
static double pc_severity(const pc_tensor *t) {
  if ((t->verdict != PC_VERDICT_DRIFT && t->verdict != PC_VERDICT_INDETERMINATE) ||
      !pc_dtype_is_float(t->compare))
    return -1;
  if (t->stats.nan_mismatches || t->stats.inf_mismatches)
    return INFINITY;
  return t->stats.finite_terms ? pc_stats_aggregates(&t->stats).rel_rms : -1;
}

/* The module a tensor belongs to, for the cascade's link: a forward tensor's module, a
 * gradient's parameter without its last component ("l1.conv.weight" -> "l1.conv"). */
static void pc_module_of(const pc_tensor *t, char *buf, size_t cap) {
  const char *path = pc_tensor_dataset(t);
  if (pc_is_gradient(path)) {
    pc_gradient_param(path, buf, cap);
    char *dot = strrchr(buf, '.');
    if (dot)
      *dot = '\0';
    return;
  }
  pc_name m = pc_forward_module(path);
  size_t n = m.len < cap - 1 ? m.len : cap - 1;
  memcpy(buf, m.s, n);
  buf[n] = '\0';
}

/* Failures a cascade may link, kept in execution order: position and index in the run. */
typedef struct pc_failure {
  size_t pos, index;
} pc_failure;

/* Earlier failures of the same file a later one is compared with for a shared module; the
 * room for a module's name, as pc_key gives a gradient's parameter. */
enum { PC_LINK_LOOKBACK = 64, PC_MODULE_MAX = 256 };

/* Whether failure f (earlier) explains t: linked by dataflow (at most W tensors before it in
 * execution order, in the same file, or of the same module), of its kind (a NaN or inf by a NaN
 * or inf; a finite error by a finite one at least 1/G as far off; a structure rounding cannot
 * produce only by another such, which carries it: a shifted input shifts what follows), and
 * never from another file. */
static bool pc_explains(const pc_run *run, const pc_failure *f, size_t pos, const pc_tensor *t,
                        double sev, const char *module) {
  const pc_tensor *w = pc_run_at(run, f->index);
  double wsev = pc_severity(w);
  if (wsev < 0 || sev < 0 || !pc_same_file(t, w))
    return false;
  if (isinf(sev) != isinf(wsev) || (!isinf(sev) && wsev * pc_growth(t) < sev))
    return false;
  if (t->diagnosis.structural && !isinf(sev) && !w->diagnosis.structural)
    return false;
  unsigned window = t->tol.trend_window ? t->tol.trend_window : 8;
  if (pos - f->pos <= window)
    return true;
  char mw[PC_MODULE_MAX];
  pc_module_of(w, mw, sizeof mw);
  return module[0] && strcmp(module, mw) == 0;
}

/* In execution order: a failing tensor is caused by the root of the nearest earlier failure
 * that explains it (pc_explains); every other failure is a root cause, the first one always.
 * A NaN upstream does not explain a finite error downstream: NaN propagates as NaN. */
static int pc_link_cascades(pc_run *run) {
  pc_failure *fails = malloc((run->ntensors ? run->ntensors : 1) * sizeof *fails);
  size_t nfails = 0;
  run->first_divergence = -1;
  if (!fails)
    return PC_ENOMEM;
  for (size_t k = 0; k < run->ntensors; k++) {
    size_t i = run->order[k];
    pc_tensor *t = pc_run_at(run, i);
    if (!pc_verdict_is_failure(t->verdict))
      continue;
    if (run->first_divergence < 0)
      run->first_divergence = (long)i;
    double sev = pc_severity(t);
    char module[PC_MODULE_MAX];
    pc_module_of(t, module, sizeof module);
    for (size_t j = nfails; j-- > 0 && nfails - j <= PC_LINK_LOOKBACK;)
      if (pc_explains(run, &fails[j], k, t, sev, module)) {
        const pc_tensor *w = pc_run_at(run, fails[j].index);
        t->caused_by = w->caused_by >= 0 ? w->caused_by : (long)fails[j].index;
        break;
      }
    fails[nfails++] = (pc_failure){k, i};
  }
  free(fails);
  return PC_OK;
}

static void pc_tally(pc_run *run) {
  memset(run->by_verdict, 0, sizeof run->by_verdict);
  for (size_t i = 0; i < run->ntensors; i++)
    run->by_verdict[pc_run_at(run, i)->verdict]++;
  run->verdict = PC_RUN_PASS;
  for (size_t v = 0; v < PC_VERDICT_COUNT_; v++)
    if (run->by_verdict[v] && pc_verdict_is_failure((pc_verdict)v) &&
        !(v == PC_VERDICT_INDETERMINATE && run->accept_indeterminate))
      run->verdict = PC_RUN_DRIFT;
  /* Accepting indeterminate tensors never makes a pass of a run with none within tolerance:
   * a B of random values is indeterminate everywhere (docs/robustness.md, "Trust model"). */
  if (run->by_verdict[PC_VERDICT_INDETERMINATE] && !run->by_verdict[PC_VERDICT_PASS])
    run->verdict = PC_RUN_DRIFT;
  if (run->by_verdict[PC_VERDICT_ERROR])
    run->verdict = PC_RUN_ERROR;
}

/* A scale reason the profile kept (after the run's allowances) whose error is a clean factor
 * (pc_structure_noise reads "scaled by c"): then the tensor stays drift, so diagnosed. */
static bool pc_scale_stands(pc_tensor *t) {
  if (!pc_find_reason(t, PC_CRIT_SCALE_ERROR))
    return false;
  pc_diagnosis d = pc_structure_noise(t);
  if (d.kind != PC_DIAG_SCALED)
    return false;
  t->verdict = PC_VERDICT_DRIFT;
  t->diagnosis = d;
  return true;
}

/* Three-way mode (docs/tolerance-model.md, "With a reference"): A's distance to R measures the
 * tensor's conditioning, kappa = rel_rms(R, A) / u_A; B's precision u then explains a distance
 * to R of m kappa u. m is the tensor's growth G when B's precision is coarser than A's (B's
 * rounding then dominates, and kappa u measures it). At A's precision, m also allows B an
 * algorithm of other accuracy than A's: a sum of K terms added one by one errs by about
 * sqrt(K) u, added pairwise by sqrt(log2 K) u, so m = sqrt(K / log2 K) G (K:
 * reduction_length, else PC_NOISE_TERMS): every step may amplify that difference as the
 * profile's growth allows (a recurrence compounds it over its time steps). A tensor that
 * fails only magnitude criteria, and whose B is within that of R, passes; one where kappa u or B's
 * distance to R reaches half the value's size is indeterminate: no digit of B is significant there.
 */
static void pc_relax_by_reference(pc_tensor *t) {
  const pc_vs_reference *v = &t->vs_reference;
  if ((t->verdict != PC_VERDICT_DRIFT && t->verdict != PC_VERDICT_INDETERMINATE) || !v->present ||
      !pc_dtype_is_float(t->compare) || pc_diagnosis_exact(t->diagnosis.kind) ||
      t->envelope.present) /* a measured envelope decides before a modelled allowance */
    return;
  double u_a = pc_dtype_unit_roundoff(t->dtype_a != PC_DTYPE_NONE ? t->dtype_a : t->compare);
  double u = pc_judged_u(t);
  if (!(u_a > 0) || !isfinite(v->a.rel_rms))
    return;
  double k = t->reduction_length > 2 ? (double)t->reduction_length : PC_NOISE_TERMS;
  double m = sqrt(k / log2(k)), g = pc_growth(t);
  m = u > u_a ? g : m * g;
  double kappa_u = (v->a.rel_rms / u_a) * u;
  /* kappa is measured on A's N elements, B's distance on B's: two RMS of N terms each, which
   * honest noise puts up to pc_rms_ratio_bound(N) apart (5x at N = 12, 1.2x at 1024). */
  t->context.reference_limit = m * kappa_u * pc_rms_ratio_bound(t->stats.ev.pairs);
  /* A structure stands as in plain mode: three-way never passes what plain catches. So does a
   * scale the profile caught where the evidence proves a clean factor (most of the error along
   * A, beyond the beta tail: a BatchNorm eps, a missing correction): the reference measures how
   * far B may honestly be, not that a factor is honest. */
  if (t->diagnosis.structural || pc_scale_stands(t))
    return;
  /* B within the allowance and keeping a digit passes. Beyond it, B is indeterminate only where
   * the allowance itself reaches half the value's size (honest drift may have taken every
   * digit); B's own distance to R never makes it so: an error far beyond a small allowance is
   * drift, however large. A B within a large allowance but without a digit is indeterminate:
   * the reference then says the tensor cannot be judged, never that it passes (a B doubled is
   * within a large allowance, not within half the value). */
  if (v->b.rel_rms <= t->context.reference_limit && v->b.rel_rms < PC_INDETERMINATE_REL) {
    pc_drop_element_reasons(t);
    t->verdict = t->nreasons ? PC_VERDICT_DRIFT : PC_VERDICT_PASS;
    if (t->verdict == PC_VERDICT_PASS)
      memset(&t->diagnosis, 0, sizeof t->diagnosis);
    return;
  }
  t->verdict = PC_VERDICT_DRIFT;
  pc_classify_failure(t, t->context.reference_limit, false);
}

void pc_run_accept_indeterminate(pc_run *run, bool accept) {
  run->accept_indeterminate = accept;
  pc_tally(run);
}

int pc_judge_reference(pc_run *run) {
  for (size_t i = 0; i < run->ntensors; i++) {
    pc_relax_by_reference(pc_run_at(run, i));
    pc_uncaused(pc_run_at(run, i));
  }
  int rc = pc_link_cascades(run);
  pc_tally(run);
  return rc;
}

int pc_judge_run(pc_run *run, pc_order_doubt *doubt) {
  pc_order_doubt ignored;
  if (!doubt)
    doubt = &ignored;
  *doubt = (pc_order_doubt){PC_ORDER_SURE, -1, -1};
  for (size_t i = 0; i < run->ntensors; i++)
    pc_uncaused(pc_run_at(run, i));
  size_t cap = run->ntensors ? run->ntensors : 1;
  pc_trend tr = {malloc(cap * sizeof *tr.rel_rms), malloc(cap * sizeof *tr.scale), 0, 0};
  int rc = tr.rel_rms && tr.scale ? pc_compute_order(run, doubt) : PC_ENOMEM;
  for (size_t k = 0; rc == PC_OK && k < run->ntensors; k++) {
    if (pc_trend_restarts(run, k))
      tr.start = tr.n;
    pc_judge_context(run, k, &tr);
    pc_classify_plain(pc_run_at(run, run->order[k]));
  }
  if (rc == PC_OK)
    rc = pc_link_cascades(run);
  free(tr.rel_rms);
  free(tr.scale);
  pc_tally(run);
  return rc;
}
