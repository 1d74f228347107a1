/* The envelope file (envelope.h, docs/envelope.md): opened through the loader like a dump, its
 * root and dataset attributes checked before anything in it is believed. */
#include "envelope.h"
#include "pc_internal.h"

#include <math.h>   /* isfinite, sqrt */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc, free, strtod */
#include <string.h> /* strcmp, strlen, strrchr, memcpy */

static const char pc_sidecar_suffix[] = ".envelope.h5";

struct pc_envelope {
  pc_file *f;
  uint32_t members;
  uint64_t tensors;
  double grid_u;    /* the unit roundoff of `emulate` */
  bool scale_test;  /* root `scale_test` 1: every tensor holds its members' scales on A */
  bool median_test; /* root `median_test` 1: every tensor holds its members' median errors */
  pc_law law;       /* what the law shares over the envelope's tensors */
};

/* The arithmetic an envelope emulates (root attribute `emulate`) and its unit roundoff. */
static const struct {
  const char *name;
  double u;
} pc_emulated[] = {{"bfloat16", 0x1p-8},
                   {"float16", 0x1p-11},
                   {"tf32", 0x1p-11},
                   {"float32", 0x1p-24},
                   {"float64", 0x1p-53}};

static bool pc_emulated_u(const pc_envelope *env, double *u) {
  for (size_t i = 0; i < pc_file_attr_count(env->f); i++) {
    const pc_attr *at = pc_file_attr(env->f, i);
    if (strcmp(at->name, "emulate") != 0)
      continue;
    for (size_t k = 0; k < sizeof pc_emulated / sizeof pc_emulated[0]; k++)
      if (strcmp(at->value, pc_emulated[k].name) == 0) {
        *u = pc_emulated[k].u;
        return true;
      }
  }
  return false;
}

static bool pc_root_present(const pc_envelope *env, const char *name) {
  for (size_t i = 0; i < pc_file_attr_count(env->f); i++)
    if (strcmp(pc_file_attr(env->f, i)->name, name) == 0)
      return true;
  return false;
}

/* A root attribute as a number, or false when it is absent or not a finite number. */
static bool pc_root_number(pc_envelope *env, const char *name, double *out) {
  char buf[64];
  const char *text = NULL;
  for (size_t i = 0; i < pc_file_attr_count(env->f); i++)
    if (strcmp(pc_file_attr(env->f, i)->name, name) == 0 &&
        pc_file_attr(env->f, i)->kind == PC_ATTR_NUMBER)
      text = pc_file_attr(env->f, i)->value;
  if (!text)
    return false;
  snprintf(buf, sizeof buf, "%s", text);
  char *end;
  *out = strtod(buf, &end);
  return end != buf && *end == '\0' && isfinite(*out);
}

/* An optional root attribute that must be 0 or 1 (absent: 0): false when it is anything else. */
static bool pc_root_flag(pc_envelope *env, const char *name, bool *on) {
  double v = 0;
  *on = false;
  if (pc_root_present(env, name) && (!pc_root_number(env, name, &v) || (v != 0 && v != 1)))
    return false;
  *on = v == 1;
  return true;
}

/* The root attributes the law needs: the version, K within its bounds, and how many tensors
 * share the false-alarm rate. */
static int pc_envelope_check_root(pc_envelope *env, const char *path, pc_error *err) {
  double version, members, tensors;
  if (!pc_root_number(env, "paritycheck_envelope", &version) || version != 1)
    return pc_error_set(err, PC_EIO,
                        "%s: not a paritycheck envelope of format 1 (root attribute "
                        "paritycheck_envelope; docs/envelope.md)",
                        path);
  if (!pc_root_number(env, "members", &members) || members != (uint32_t)members ||
      members < PC_ENVELOPE_MIN_MEMBERS || members > PC_ENVELOPE_MAX_MEMBERS)
    return pc_error_set(err, PC_EIO, "%s: root attribute members must be an integer in [%d, %d]",
                        path, PC_ENVELOPE_MIN_MEMBERS, PC_ENVELOPE_MAX_MEMBERS);
  if (!pc_root_number(env, "tensors", &tensors) || tensors < 1 || tensors != (uint64_t)tensors ||
      tensors < (double)pc_file_count(env->f))
    return pc_error_set(err, PC_EIO,
                        "%s: root attribute tensors must count the envelope's datasets (%zu)", path,
                        pc_file_count(env->f));
  if (!pc_emulated_u(env, &env->grid_u))
    return pc_error_set(err, PC_EIO,
                        "%s: root attribute emulate must name bfloat16, float16, tf32, float32 "
                        "or float64",
                        path);
  if (!pc_root_flag(env, "scale_test", &env->scale_test) ||
      !pc_root_flag(env, "median_test", &env->median_test))
    return pc_error_set(err, PC_EIO,
                        "%s: root attributes scale_test and median_test must be 0 or 1", path);
  env->members = (uint32_t)members;
  env->tensors = (uint64_t)tensors;
  return PC_OK;
}

/* How many tests each of the envelope's tensors takes, which split its false-alarm rate: the RMS
 * and the per-element one, and the scale and median tests where the envelope holds them. */
static int pc_tests(const pc_envelope *env) {
  return 2 + env->scale_test + env->median_test;
}

int pc_envelope_open(pc_envelope **out, const char *path, const pc_open_limits *lim,
                     pc_error *err) {
  *out = NULL;
  pc_envelope *env = calloc(1, sizeof *env);
  if (!env)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  int rc = pc_file_open_limited(&env->f, path, lim, err);
  if (rc == PC_OK)
    rc = pc_envelope_check_root(env, path, err);
  if (rc == PC_OK && pc_law_init(&env->law, env->members, env->tensors, pc_tests(env)) < 0)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc < 0) {
    pc_envelope_close(env);
    return rc;
  }
  *out = env;
  return PC_OK;
}

void pc_envelope_close(pc_envelope *env) {
  if (!env)
    return;
  pc_file_close(env->f);
  pc_law_free(&env->law);
  free(env);
}

pc_file *pc_envelope_file(const pc_envelope *env) {
  return env->f;
}

bool pc_envelope_sidecar(const char *a_path, char *buf, size_t size) {
  const char *slash = strrchr(a_path, '/');
  const char *dot = strrchr(slash ? slash + 1 : a_path, '.');
  size_t stem =
      dot && dot != (slash ? slash + 1 : a_path) ? (size_t)(dot - a_path) : strlen(a_path);
  if (stem + sizeof pc_sidecar_suffix > size)
    return false;
  memcpy(buf, a_path, stem);
  memcpy(buf + stem, pc_sidecar_suffix, sizeof pc_sidecar_suffix);
  return true;
}

bool pc_envelope_is_sidecar(const char *path) {
  size_t n = strlen(path), k = sizeof pc_sidecar_suffix - 1;
  return n > k && strcmp(path + n - k, pc_sidecar_suffix) == 0;
}

static bool pc_same_dims(const pc_dataset *x, const pc_dataset *y) {
  if (x->rank != y->rank || x->count != y->count)
    return false;
  for (int i = 0; i < x->rank; i++)
    if (x->dims[i] != y->dims[i])
      return false;
  return true;
}

/* The attributes of the bound's dataset (docs/envelope.md), read in one call. */
enum { PC_ATTR_RMS, PC_ATTR_SCALE, PC_ATTR_A_RMS, PC_ATTR_C, PC_ATTR_Q, PC_ATTR_N_ };

/* req[i] read and its `want` values finite (and >= 0 unless `signed_ok`). */
static bool pc_values_ok(const pc_numbers_req *req, long want, bool signed_ok) {
  if (req->got != want)
    return false;
  for (long k = 0; k < want; k++)
    if (!isfinite(req->out[k]) || (req->out[k] < 0 && !signed_ok))
      return false;
  return true;
}

/* The law's figures from the attributes of d, into fig; false when one is missing or bad.
 * v has room for 3 K + 2 values. */
static bool pc_envelope_read(pc_envelope *env, const pc_dataset *d, uint64_t n, double *v,
                             pc_envelope_fig *fig) {
  size_t k = env->members;
  pc_numbers_req req[PC_ATTR_N_] = {
      {"member_rms_err", v, k, -1},
      {"scale", v + k, 1, -1},
      {"a_rms", v + k + 1, 1, -1},
      {"member_scale_err", v + k + 2, env->scale_test ? k : 0, -1},
      {"member_median_err", v + 2 * k + 2, env->median_test ? k : 0, -1}};
  pc_dataset_numbers(env->f, d, req, PC_ATTR_N_);
  if (!pc_values_ok(&req[PC_ATTR_RMS], (long)k, false) ||
      !pc_values_ok(&req[PC_ATTR_SCALE], 1, false) ||
      !pc_values_ok(&req[PC_ATTR_A_RMS], 1, false) ||
      (env->scale_test && !pc_values_ok(&req[PC_ATTR_C], (long)k, true)) ||
      (env->median_test && !pc_values_ok(&req[PC_ATTR_Q], (long)k, false)))
    return false;
  pc_envelope_law(&env->law, fig, v, n);
  if (env->scale_test)
    pc_envelope_scale_law(&env->law, fig, req[PC_ATTR_C].out);
  if (env->median_test)
    pc_envelope_median_law(&env->law, fig, req[PC_ATTR_Q].out, n);
  fig->scale = v[k];
  fig->rms_a = v[k + 1];
  fig->grid_u = env->grid_u;
  return true;
}

int pc_envelope_find(pc_envelope *env, const pc_dataset *a, pc_envelope_fig *fig,
                     const pc_dataset **bound, pc_error *err) {
  *fig = (pc_envelope_fig){0};
  *bound = NULL;
  const pc_dataset *d = pc_file_find(env->f, a->path);
  if (!d)
    return 0;
  const char *file = pc_file_path(env->f);
  if (d->kind != PC_KIND_FLOAT || !pc_same_dims(d, a))
    return pc_error_set(err, PC_EDATA,
                        "%s: %s: the envelope's bound is not a float dataset of A's shape", file,
                        a->path);
  double *v = calloc(3 * (size_t)env->members + 2, sizeof *v);
  if (!v)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  bool ok = pc_envelope_read(env, d, a->count, v, fig);
  free(v);
  if (!ok)
    return pc_error_set(err, PC_EDATA,
                        "%s: %s: the envelope's attributes member_rms_err (%u values), scale and "
                        "a_rms must be finite numbers >= 0, member_scale_err %u finite numbers "
                        "where the root's scale_test is 1, and member_median_err %u finite "
                        "numbers >= 0 where its median_test is 1 (docs/envelope.md)",
                        file, a->path, env->members, env->members, env->members);
  *bound = d;
  return 1;
}
