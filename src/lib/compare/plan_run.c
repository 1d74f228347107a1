/* Plans, the side of any process (plan.h, pc_plan_run): read the process's share of the plan
 * and fold it as pc_compare_files would, file pair by file pair. A whole tensor is compared and
 * judged here and goes back as its figures; a part of a tensor goes back as its blocks' figures
 * in block order, for process 0 to merge with the other parts (plan.c). */
#include "comparator.h"
#include "folder.h"
#include "judge.h"
#include "kernel.h"
#include "pc_internal.h"
#include "plan_record.h"

#include <paritycheck/plan.h>

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc, realloc, free */
#include <string.h> /* strcmp, memset */

/* One work of the plan (plan_record.h). */
typedef struct pc_task {
  uint64_t tensor, proc, piece, npieces;
  char *path, *file, *a_path, *b_path;
} pc_task;

/* A process running its share. */
typedef struct pc_runner {
  const pc_options *o;
  const char *root[2];
  size_t block;
  bool quantiles;
  pc_pair p;
  pc_stream *whole, *part; /* the usual stream, and one in partial mode for parts */
  pc_file *f[2];           /* the file pair of the tasks being run */
  pc_envelope *env;        /* A's envelope (pc_pair_envelope_open), or NULL */
  char *file;              /* its relative path (folders), or NULL */
  bool open;               /* f[] is the pair of `file` (else: nothing opened yet) */
  pc_error why;            /* why the pair could not be opened, when f[] is NULL */
  pc_tensor *t;            /* the whole tensors of the current file pair */
  pc_task *tasks;          /* and their tasks */
  size_t nt;
  pc_stats *parts; /* a part's blocks' figures */
  size_t nparts, cap;
  pc_qhist *hist[PC_NHISTS]; /* and its histograms */
  bool nomem;
  pc_wbuf out;
} pc_runner;

static void pc_task_free(pc_task *k) {
  free(k->path);
  free(k->file);
  free(k->a_path);
  free(k->b_path);
}

/* --- the two streams --------------------------------------------------------------------- */

static void pc_runner_judge(void *user, pc_tensor *t) {
  (void)user;
  pc_judge_tensor(t);
}

static void pc_runner_partial(void *user, const pc_tensor *t, const pc_stats *part,
                              pc_qhist *const *hist) {
  pc_runner *r = user;
  (void)t;
  if (r->nparts == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 64;
    pc_stats *v = realloc(r->parts, cap * sizeof *v);
    if (!v) {
      r->nomem = true;
      return;
    }
    r->parts = v;
    r->cap = cap;
  }
  r->parts[r->nparts++] = *part;
  for (int h = 0; hist && h < PC_NHISTS; h++)
    pc_qhist_merge(r->hist[h], hist[h]);
}

static int pc_runner_streams(pc_runner *r, pc_error *err) {
  pc_stream_config cfg = {.threads = pc_threads_or_cores(r->o->threads),
                          .block_elems = r->block,
                          .done = pc_runner_judge,
                          .progress = r->o->progress,
                          .progress_user = r->o->progress_user,
                          .quantiles = r->quantiles};
  int rc = pc_stream_new(&r->whole, &cfg, err);
  cfg.partial = pc_runner_partial;
  cfg.partial_user = r;
  if (rc == PC_OK)
    rc = pc_stream_new(&r->part, &cfg, err);
  if (rc == PC_OK && pc_hists_new(r->hist) < 0)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  return rc;
}

/* --- results ----------------------------------------------------------------------------- */

static void pc_put_task(pc_wbuf *w, const pc_task *k, const pc_tensor *t) {
  pc_wbuf_u64(w, k->tensor);
  pc_wbuf_u64(w, k->piece);
  pc_wbuf_u64(w, k->npieces);
  pc_record_put_tensor(w, t);
}

/* Every whole tensor of the file pair is done: into the results, then freed. */
static int pc_flush_wholes(pc_runner *r, pc_error *err) {
  int rc = pc_stream_finish(r->whole, err);
  for (size_t i = 0; i < r->nt; i++) {
    pc_put_task(&r->out, &r->tasks[i], &r->t[i]);
    pc_tensor_clear(&r->t[i], NULL);
    pc_task_free(&r->tasks[i]);
  }
  r->nt = 0;
  return rc;
}

static void pc_put_part(pc_runner *r, const pc_task *k, const pc_tensor *t) {
  pc_put_task(&r->out, k, t);
  pc_wbuf_u64(&r->out, r->nparts);
  pc_wbuf_put(&r->out, r->parts, r->nparts * sizeof *r->parts);
  for (int h = 0; h < PC_NHISTS; h++)
    pc_record_put_hist(&r->out, r->hist[h]);
}

/* --- files ------------------------------------------------------------------------------- */

static bool pc_same_file(const char *x, const char *y) {
  return x == y || (x && y && strcmp(x, y) == 0);
}

static int pc_open_side(pc_runner *r, int side, const char *file, pc_error *e) {
  char *path = file ? pc_tree_path(r->root[side], file) : NULL;
  if (file && !path)
    return pc_error_set(e, PC_ENOMEM, "out of memory");
  pc_open_limits lim = pc_options_limits(r->o);
  int rc = pc_file_open_limited(&r->f[side], path ? path : r->root[side], &lim, e);
  free(path);
  return rc;
}

/* The file pair of task k, opening it when it is not the current one (a failure to open is the
 * error of each tensor of it, in r->why). */
static int pc_runner_files(pc_runner *r, const pc_task *k, pc_error *err) {
  if (r->open && pc_same_file(r->file, k->file))
    return PC_OK;
  int rc = pc_flush_wholes(r, err);
  pc_file_close(r->f[0]);
  pc_file_close(r->f[1]);
  pc_envelope_close(r->env);
  r->f[0] = r->f[1] = NULL;
  r->env = NULL;
  free(r->file);
  r->file = NULL;
  r->open = true;
  if (rc < 0 || (k->file && !(r->file = pc_strdup(k->file))))
    return rc < 0 ? rc : pc_error_set(err, PC_ENOMEM, "out of memory");
  r->why = (pc_error){PC_OK, ""};
  int orc = pc_open_side(r, 0, k->file, &r->why);
  if (orc == PC_OK)
    orc = pc_open_side(r, 1, k->file, &r->why);
  if (orc == PC_OK)
    orc = pc_pair_envelope_open(r->o, pc_file_path(r->f[0]), k->file != NULL, &r->env, &r->why);
  if (orc == PC_ENOMEM)
    return pc_error_set(err, orc, "%s", r->why.message);
  if (orc < 0) {
    pc_file_close(r->f[0]);
    pc_file_close(r->f[1]);
    r->f[0] = r->f[1] = NULL;
  }
  return PC_OK;
}

/* --- one task ---------------------------------------------------------------------------- */

static int pc_fail(pc_tensor *t, const char *why) {
  t->verdict = PC_VERDICT_ERROR;
  free(t->message);
  return (t->message = pc_strdup(why)) ? PC_OK : PC_ENOMEM;
}

/* t as the walk left it: the task's path, nothing measured. */
static int pc_task_tensor(pc_tensor *t, const pc_task *k) {
  memset(t, 0, sizeof *t);
  t->caused_by = -1;
  t->context.exec_index = -1;
  t->rank = t->rank_b = -1;
  t->path = pc_strdup(k->path);
  t->file = k->file ? pc_strdup(k->file) : NULL;
  return t->path && (!k->file || t->file) ? PC_OK : PC_ENOMEM;
}

/* The datasets of task k, set up as the walk did; false (t an error) when they cannot be. */
static bool pc_task_pair(pc_runner *r, const pc_task *k, pc_tensor *t, pc_stream *s, int *rc,
                         pc_error *err) {
  char why[PC_ERROR_MESSAGE_MAX];
  bool data = false;
  *rc = PC_OK;
  if (!r->f[0]) {
    *rc = pc_fail(t, r->why.message);
    return false;
  }
  r->p = (pc_pair){
      .fa = r->f[0], .fb = r->f[1], .t = t, .block = r->block, .stream = s, .env = r->env};
  r->p.trust_b = r->o->trust_b_metadata;
  r->p.a = pc_file_find(r->f[0], k->a_path);
  r->p.b = pc_file_find(r->f[1], k->b_path);
  r->p.max_memory = r->o->max_memory ? r->o->max_memory : PC_DEFAULT_MAX_MEMORY;
  r->p.quantiles = r->quantiles;
  if (!r->p.a || !r->p.b) {
    snprintf(why, sizeof why, "%s: %s: not found: the file changed after it was walked",
             pc_file_path(r->f[r->p.a ? 1 : 0]), r->p.a ? k->b_path : k->a_path);
    *rc = pc_fail(t, why);
    return false;
  }
  *rc = pc_pair_setup(&r->p, &data, err);
  if (*rc == PC_OK && !data && t->verdict != PC_VERDICT_ERROR) {
    snprintf(why, sizeof why, "%s: changed after it was walked", pc_file_path(r->f[0]));
    *rc = pc_fail(t, why);
  }
  return *rc == PC_OK && data;
}

/* Where part `piece` of `npieces` starts: the block start at or before its share of the
 * elements, as a reader of A cuts them (the same in every process). */
static int pc_part_bounds(pc_runner *r, const pc_task *k, uint64_t *from, uint64_t *to,
                          pc_error *e) {
  pc_reader *rd = NULL;
  uint64_t n = r->p.a->count;
  int rc = pc_reader_open(&rd, r->f[0], r->p.a, r->block, NULL, e);
  if (rc < 0)
    return rc;
  uint64_t q = n / k->npieces, m = n % k->npieces;
  *from = pc_reader_seek(rd, q * k->piece + m * k->piece / k->npieces);
  *to = k->piece + 1 == k->npieces
            ? n
            : pc_reader_seek(rd, q * (k->piece + 1) + m * (k->piece + 1) / k->npieces);
  pc_reader_close(rd);
  return PC_OK;
}

static int pc_run_part(pc_runner *r, const pc_task *k, pc_error *err) {
  pc_tensor t;
  pc_error e = {PC_OK, ""};
  uint64_t from = 0, to = 0;
  int rc = pc_task_tensor(&t, k);
  r->nparts = 0;
  for (int h = 0; h < PC_NHISTS; h++)
    pc_qhist_reset(r->hist[h]);
  if (rc == PC_OK && pc_task_pair(r, k, &t, r->part, &rc, err)) {
    pc_stream_expect(r->part, r->p.a->count * (r->p.a->elem_size + r->p.b->elem_size) / k->npieces);
    if ((rc = pc_part_bounds(r, k, &from, &to, &e)) < 0 && rc != PC_ENOMEM)
      rc = pc_fail(&t, e.message);
    else if (rc == PC_OK && (rc = pc_pair_data(&r->p, r->o->tols, from, to, err)) == PC_OK)
      rc = pc_stream_finish(r->part, err);
  }
  if (rc == PC_OK && r->nomem)
    rc = pc_error_set(err, PC_ENOMEM, "%s: out of memory", t.path);
  if (rc == PC_OK)
    pc_put_part(r, k, &t);
  pc_tensor_clear(&t, NULL);
  return rc;
}

/* The whole tensor of the last task kept (r->tasks[r->nt - 1]). */
static int pc_run_whole(pc_runner *r, pc_error *err) {
  pc_tensor *t = &r->t[r->nt - 1];
  const pc_task *k = &r->tasks[r->nt - 1];
  int rc = pc_task_tensor(t, k);
  if (rc == PC_OK && pc_task_pair(r, k, t, r->whole, &rc, err)) {
    pc_stream_expect(r->whole, r->p.a->count * (r->p.a->elem_size + r->p.b->elem_size));
    rc = pc_pair_data(&r->p, r->o->tols, 0, r->p.a->count, err);
  }
  return rc;
}

/* Runs task k of this process; a whole tensor's task is kept (in r->tasks) until the tensor is
 * done, a part's is done on return. */
static int pc_run_task(pc_runner *r, pc_task *k, pc_error *err) {
  int rc = pc_runner_files(r, k, err);
  if (k->npieces > 1) {
    rc = rc == PC_OK ? pc_run_part(r, k, err) : rc;
  } else {
    r->tasks[r->nt] = *k;
    memset(&r->t[r->nt++], 0, sizeof *r->t);
    rc = rc == PC_OK ? pc_run_whole(r, err) : rc;
  }
  /* Some steps fail for want of memory without a message: every such failure names the tensor. */
  if (rc == PC_ENOMEM)
    pc_error_set(err, rc, "%s: out of memory", k->path);
  if (k->npieces > 1)
    pc_task_free(k);
  return rc;
}

/* --- the plan ---------------------------------------------------------------------------- */

static bool pc_get_task(pc_rbuf *b, pc_task *k) {
  memset(k, 0, sizeof *k);
  k->tensor = pc_rbuf_u64(b);
  k->proc = pc_rbuf_u64(b);
  k->piece = pc_rbuf_u64(b);
  k->npieces = pc_rbuf_u64(b);
  bool ok = pc_rbuf_str(b, &k->path) && pc_rbuf_str(b, &k->file) && pc_rbuf_str(b, &k->a_path) &&
            pc_rbuf_str(b, &k->b_path);
  b->bad |= !k->path || !k->a_path || !k->b_path || k->npieces == 0 || k->piece >= k->npieces;
  return ok;
}

/* The plan's header; false when it is malformed or made for another block size or quantiles. */
static bool pc_plan_header(pc_rbuf *b, const pc_runner *r, uint64_t *nprocs, uint64_t *n) {
  if (!pc_record_check_header(b, PC_PLAN_MAGIC))
    return false;
  *nprocs = pc_rbuf_u64(b);
  uint64_t block = pc_rbuf_u64(b), quantiles = pc_rbuf_u64(b);
  *n = pc_rbuf_u64(b);
  return !b->bad && block == r->block && quantiles == r->quantiles;
}

/* Runs the tasks of process `proc`, in plan order (file pair by file pair). */
static int pc_runner_plan(pc_runner *r, pc_rbuf *b, unsigned proc, uint64_t n, pc_error *err) {
  int rc = PC_OK;
  for (uint64_t i = 0; rc == PC_OK && i < n; i++) {
    pc_task k;
    bool mine = false; /* pc_run_task takes k */
    if (!pc_get_task(b, &k))
      rc = pc_error_set(err, PC_ENOMEM, "out of memory");
    else if (b->bad)
      rc = pc_error_set(err, PC_EUSAGE, "malformed plan at byte %zu", b->at);
    else if ((mine = k.proc == proc))
      rc = pc_run_task(r, &k, err);
    if (!mine)
      pc_task_free(&k);
  }
  if (rc == PC_OK)
    rc = pc_flush_wholes(r, err);
  if (rc == PC_OK && r->out.nomem)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  return rc;
}

static void pc_runner_free(pc_runner *r) {
  pc_stream_free(r->whole);
  pc_stream_free(r->part);
  for (size_t i = 0; i < r->nt; i++) {
    pc_tensor_clear(&r->t[i], NULL);
    pc_task_free(&r->tasks[i]);
  }
  free(r->t);
  free(r->tasks);
  free(r->parts);
  pc_hists_free(r->hist);
  pc_file_close(r->f[0]);
  pc_file_close(r->f[1]);
  pc_envelope_close(r->env);
  free(r->file);
}

/* How many tasks of the plan (from b's position, n of them) are process proc's; *bad when the
 * plan is malformed, so that nothing of it is run. */
static uint64_t pc_count_tasks(pc_rbuf b, unsigned proc, uint64_t n, bool *nomem, bool *bad) {
  uint64_t mine = 0;
  for (uint64_t i = 0; i < n && !b.bad && !*nomem; i++) {
    pc_task k;
    *nomem = !pc_get_task(&b, &k);
    mine += k.proc == proc;
    pc_task_free(&k);
  }
  *bad = b.bad || b.at != b.n;
  return mine;
}

static int pc_runner_start(pc_runner *r, pc_rbuf *b, unsigned proc, uint64_t *n, pc_error *err) {
  uint64_t nprocs = 0;
  bool nomem = false, bad = true;
  uint64_t mine = pc_plan_header(b, r, &nprocs, n) && proc < nprocs
                      ? pc_count_tasks(*b, proc, *n, &nomem, &bad)
                      : 0;
  if (bad && !nomem)
    return pc_error_set(err, PC_EUSAGE,
                        "the plan is malformed, or made for other options (block size, "
                        "quantiles) or fewer processes");
  r->t = calloc(mine ? mine : 1, sizeof *r->t);
  r->tasks = calloc(mine ? mine : 1, sizeof *r->tasks);
  if (nomem || !r->t || !r->tasks)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  pc_record_put_header(&r->out, PC_RESULTS_MAGIC);
  pc_wbuf_u64(&r->out, proc);
  return pc_runner_streams(r, err);
}

int pc_plan_run(void **out, size_t *size, const void *plan, size_t plan_size, unsigned proc,
                const char *path_a, const char *path_b, const pc_options *opts, pc_error *err) {
  *out = NULL;
  *size = 0;
  if (!plan || !path_a || !path_b || !opts || opts->version != PC_OPTIONS_VERSION || !opts->tols)
    return pc_error_set(err, PC_EUSAGE, "pc_plan_run: bad arguments");
  pc_runner r = {.o = opts,
                 .root = {path_a, path_b},
                 .block = opts->block_elems ? opts->block_elems : PC_DEFAULT_BLOCK_ELEMS,
                 .quantiles = !opts->skip_quantiles};
  pc_rbuf b = {plan, plan_size, 0, false};
  uint64_t n = 0;
  int rc = pc_runner_start(&r, &b, proc, &n, err);
  if (rc == PC_OK)
    rc = pc_runner_plan(&r, &b, proc, n, err);
  pc_runner_free(&r);
  if (rc < 0) {
    free(r.out.p);
    return rc;
  }
  *out = r.out.p;
  *size = r.out.n;
  return PC_OK;
}
