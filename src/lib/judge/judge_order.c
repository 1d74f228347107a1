/* The execution order of a run's tensors (judge_order.h; docs/tolerance-model.md, "Execution
 * order"), and what the run's passes ask of a tensor's place: its file, its module, whether it
 * lies in a backward group. */
#include "judge_order.h"

#include "pc_internal.h"

#include <ctype.h>  /* tolower, isdigit */
#include <stdlib.h> /* malloc, free, qsort */
#include <string.h> /* strchr, strcmp, strlen, strncmp, strrchr, memcpy */

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

bool pc_share_file(const pc_tensor *x, const pc_tensor *y) {
  return x->file && y->file ? strcmp(x->file, y->file) == 0 : x->file == y->file;
}

/* The end of the run of tensors from lo that share lo's file (folder mode; all of them
 * otherwise): the comparator adds a file's tensors together, files in path order. */
static size_t pc_file_end(const pc_run *run, size_t lo) {
  size_t hi = lo + 1;
  while (hi < run->ntensors && pc_share_file(pc_run_at(run, hi), pc_run_at(run, lo)))
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

int pc_compute_order(pc_run *run, pc_order_doubt *doubt) {
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

/* True when the tensor lies in a backward group of the dumper's layout (docs/python.md): its
 * dataset's top-level group is exactly "gradients" or "activation_grads". A schema, not a word
 * search: a forward tensor named "grad_norm" or "w.grad" is no gradient here, since the name
 * would widen its allowance (issue 36, item 5). Other layouts set the growth of their gradient
 * paths by a tolerance rule (docs/tolerances.md). */
bool pc_in_backward_group(const pc_tensor *t) {
  size_t n;
  const char *p = pc_first_component(pc_tensor_dataset(t), &n);
  return (n == 9 && strncmp(p, "gradients", 9) == 0) ||
         (n == 16 && strncmp(p, "activation_grads", 16) == 0);
}

/* The module a tensor belongs to, for the cascade's link: a forward tensor's module, a
 * gradient's parameter without its last component ("l1.conv.weight" -> "l1.conv"). */
void pc_module_of(const pc_tensor *t, char *buf, size_t cap) {
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
