/* The run (compare.h): checks the arguments, walks the files or folders of A and B (walk.h),
 * streams each pair through the tensor pipeline (pair.c) and concludes the run (conclude.c);
 * and frees a run. */
#include "arena.h"
#include "comparator.h"
#include "loader.h"
#include "names.h"
#include "pc_internal.h"
#include "spill.h"
#include "stream.h"
#include "walk.h"

#include <paritycheck/compare.h>

#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc, free */
#include <sys/stat.h> /* stat, S_ISDIR */

void pc_set_debug(bool on) {
  pc_loader_set_debug(on);
}

static int pc_check_args(const char *path_a, const char *path_b, const pc_options *o, bool *dirs,
                         pc_error *err) {
  struct stat sa, sb;
  if (!o || o->version != PC_OPTIONS_VERSION || !o->tols || !path_a || !path_b)
    return pc_error_set(err, PC_EUSAGE, "pc_compare_files: bad arguments");
  int rc = pc_names_check(o, err);
  if (rc < 0)
    return rc;
  bool da = stat(path_a, &sa) == 0 && S_ISDIR(sa.st_mode);
  bool db = stat(path_b, &sb) == 0 && S_ISDIR(sb.st_mode);
  *dirs = da && db;
  if (*dirs && o->envelope)
    return pc_error_set(err, PC_EUSAGE,
                        "an envelope file is for one file of A; in folder mode each file's "
                        "sidecar (x.envelope.h5 beside x.h5) is used");
  if (da != db)
    return pc_error_set(err, PC_EUSAGE,
                        "%s: is a directory and %s is not: compare two files or two directories",
                        da ? path_a : path_b, da ? path_b : path_a);
  return PC_OK;
}

/* Both sides hold tensors, but none is on both: nothing was compared, which a report of
 * "everything missing" would hide behind a drift. */
static int pc_check_common(const pc_cmp *c, pc_error *err) {
  if (c->both || !c->a_count || !c->b_count)
    return PC_OK;
  return pc_error_set(err, PC_ENOMATCH,
                      "A and B have no tensor in common: A has %zu, e.g. %s; B has %zu, e.g. %s",
                      c->a_count, c->example[0], c->b_count, c->example[1]);
}

/* Once a run: B's tolerance-affecting attributes were ignored somewhere (trust.h). */
static int pc_warn_ignored_b(pc_run *run, size_t n, pc_error *err) {
  char text[PC_ERROR_MESSAGE_MAX];
  snprintf(text, sizeof text,
           "B's tolerance-affecting attributes (reduction_length, accumulation_dtype, "
           "module_type) were ignored on %zu tensors where A has none (each tensor's note names "
           "them): B may not set its own tolerance; --trust-b-metadata uses them",
           n);
  return pc_run_warn(run, text) < 0 ? pc_error_set(err, PC_ENOMEM, "out of memory") : PC_OK;
}

static int pc_run_all(pc_cmp *c, const char *path_a, const char *path_b, bool dirs, pc_error *err) {
  const pc_options *o = c->o;
  size_t block = o->block_elems ? o->block_elems : PC_DEFAULT_BLOCK_ELEMS;
  pc_stream_config cfg = {.threads = pc_threads_or_cores(o->threads),
                          .block_elems = block,
                          .done = pc_pair_done,
                          .progress = o->progress,
                          .progress_user = o->progress_user,
                          .total_bytes = 0,
                          .quantiles = !o->skip_quantiles};
  c->p = (pc_pair){.names = c->run->names,
                   .block = block,
                   .max_memory = o->max_memory ? o->max_memory : PC_DEFAULT_MAX_MEMORY,
                   .quantiles = !o->skip_quantiles,
                   .trust_b = o->trust_b_metadata};
  int rc = c->sink ? PC_OK : pc_stream_new(&c->p.stream, &cfg, err); /* a sink reads nothing */
  if (rc == PC_OK)
    rc = dirs ? pc_walk_folders(c, path_a, path_b, err) : pc_walk_files(c, path_a, path_b, err);
  pc_stream_free(c->p.stream);
  if (rc == PC_OK)
    rc = pc_check_common(c, err);
  if (rc == PC_OK && c->p.ignored_b)
    rc = pc_warn_ignored_b(c->run, c->p.ignored_b, err);
  if (rc == PC_OK && !c->sink)
    rc = pc_run_conclude(c->run, o->tols, o->allow_empty, err);
  return rc;
}

int pc_compare_walk(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                    const pc_pair_sink *sink, pc_error *err) {
  bool dirs = false;
  *out = NULL;
  int rc = pc_check_args(path_a, path_b, opts, &dirs, err);
  if (rc < 0)
    return rc;
  pc_cmp c = {.o = opts, .sink = sink, .budget = PC_SUGGEST_BUDGET};
  if (!(c.run = calloc(1, sizeof *c.run)) || !(c.run->names = calloc(1, sizeof *c.run->names)) ||
      !(c.run->path_a = pc_strdup(path_a)) || !(c.run->path_b = pc_strdup(path_b)))
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK)
    rc = pc_run_all(&c, path_a, path_b, dirs, err);
  free(c.example[0]);
  free(c.example[1]);
  if (rc < 0) {
    pc_run_free(c.run);
    return rc;
  }
  *out = c.run;
  return PC_OK;
}

int pc_compare_files(pc_run **out, const char *path_a, const char *path_b, const pc_options *opts,
                     pc_error *err) {
  return pc_compare_walk(out, path_a, path_b, opts, NULL, err);
}

/* Frees x unless it lies in `names`. */
static void pc_free_unless_in(const pc_arena *names, void *x) {
  if (!pc_arena_owns(names, x))
    free(x);
}

void pc_tensor_clear(pc_tensor *t, const pc_arena *names) {
  pc_free_unless_in(names, t->dims);
  pc_free_unless_in(names, t->dims_b);
  pc_free_unless_in(names, t->path);
  pc_free_unless_in(names, t->file);
  pc_free_unless_in(names, t->module_type);
  free(t->message);
  free(t->note);
  free(t->did_you_mean);
}

void pc_run_free(pc_run *run) {
  if (!run)
    return;
  for (size_t i = 0; i < run->ntensors; i++)
    pc_tensor_clear(pc_run_at(run, i), run->names);
  for (int side = 0; side < 2; side++) {
    for (size_t i = 0; i < run->provenance[side].n; i++) {
      free(run->provenance[side].attrs[i].name);
      free(run->provenance[side].attrs[i].value);
    }
    free(run->provenance[side].attrs);
  }
  for (size_t i = 0; i < run->nwarnings; i++)
    free(run->warnings[i]);
  free(run->warnings);
  pc_spill_free(run->tensors, run->tensors_mapped);
  free(run->order);
  free(run->path_a);
  free(run->path_b);
  free(run->path_ref);
  pc_arena_free(run->names);
  free(run->names);
  free(run);
}
