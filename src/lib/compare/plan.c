/* Plans, process 0's side (plan.h): the walk, the sharing of the reading, and the merge of every
 * process's results into one run. The other side, running a share, is plan_run.c. */
#include "comparator.h"
#include "fill.h"
#include "judge.h"
#include "kernel.h"
#include "pc_internal.h"
#include "plan_record.h"

#include <paritycheck/plan.h>

#include <stdlib.h> /* calloc, malloc, realloc, free, qsort */
#include <string.h> /* memcpy, memset */

/* What reading one tensor costs beyond its bytes, in bytes: opening its datasets and writing
 * its report rows. It spreads many small tensors evenly by count. */
#define PC_TENSOR_COST ((uint64_t)64 << 10)

/* A pair that needs data: one tensor of the run, read whole or in npieces parts. */
typedef struct pc_item {
  size_t tensor;
  uint64_t bytes; /* stored bytes of both sides */
  uint64_t count; /* elements */
  bool splittable;
  char *a_path, *b_path;
  unsigned npieces;
  unsigned merged;     /* parts merged so far */
  unsigned char **got; /* npieces > 1: each part's record, kept for pc_plan_finish */
  size_t *got_size;
} pc_item;

/* One part of one item for one process. */
typedef struct pc_work {
  size_t item;
  unsigned piece;
  unsigned proc;
  uint64_t cost;
} pc_work;

struct pc_plan {
  pc_run *run; /* walked, not yet judged */
  const pc_tolset *tols;
  bool allow_empty; /* pc_options.allow_empty, for pc_run_conclude */
  bool quantiles;
  size_t block;
  unsigned nprocs;
  pc_item *items;
  size_t nitems, cap;
  pc_wbuf wire;
};

/* --- the walk's sink ---------------------------------------------------------------------- */

static int pc_plan_add(void *user, const pc_pair *p, size_t index, pc_error *err) {
  pc_plan *plan = user;
  if (plan->nitems == plan->cap) {
    size_t cap = plan->cap ? 2 * plan->cap : 64;
    pc_item *v = realloc(plan->items, cap * sizeof *v);
    if (!v)
      return pc_error_set(err, PC_ENOMEM, "out of memory");
    plan->items = v;
    plan->cap = cap;
  }
  pc_item *it = &plan->items[plan->nitems];
  memset(it, 0, sizeof *it);
  it->tensor = index;
  it->count = p->a->count;
  it->bytes = pc_fill_pair(p->a, p->b) ? 0 : p->a->count * (p->a->elem_size + p->b->elem_size);
  it->splittable = pc_pair_splittable(p, plan->tols);
  it->a_path = pc_strdup(p->a->path);
  it->b_path = pc_strdup(p->b->path);
  plan->nitems++;
  if (!it->a_path || !it->b_path)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  return PC_OK;
}

/* --- sharing ----------------------------------------------------------------------------- */

/* How many parts item `it` is read in: one, unless it is larger than a process's share. */
static unsigned pc_plan_pieces(const pc_plan *p, const pc_item *it, uint64_t share) {
  if (p->nprocs < 2 || !it->splittable || it->bytes <= share)
    return 1;
  uint64_t k = it->bytes / share + (it->bytes % share != 0);
  uint64_t blocks = it->count / p->block + (it->count % p->block != 0);
  k = k < p->nprocs ? k : p->nprocs;
  k = k < blocks ? k : blocks;
  return k > 1 ? (unsigned)k : 1;
}

/* Largest first; equal costs in run order, so that the sharing is the same on every call. */
static int pc_cmp_cost(const void *x, const void *y) {
  const pc_work *a = x, *b = y;
  if (a->cost != b->cost)
    return a->cost < b->cost ? 1 : -1;
  if (a->item != b->item)
    return a->item < b->item ? -1 : 1;
  return a->piece < b->piece ? -1 : a->piece > b->piece;
}

static int pc_cmp_order(const void *x, const void *y) {
  const pc_work *a = x, *b = y;
  if (a->item != b->item)
    return a->item < b->item ? -1 : 1;
  return a->piece < b->piece ? -1 : a->piece > b->piece;
}

/* Each work to the process with the least cost so far (the lowest on a tie), largest first:
 * within 4/3 of the best sharing (Graham's bound), and one pass over the processes per work. */
static int pc_plan_assign(const pc_plan *p, pc_work *w, size_t n) {
  uint64_t *load = calloc(p->nprocs, sizeof *load);
  if (!load)
    return PC_ENOMEM;
  qsort(w, n, sizeof *w, pc_cmp_cost);
  for (size_t i = 0; i < n; i++) {
    unsigned best = 0;
    for (unsigned r = 1; r < p->nprocs; r++)
      best = load[r] < load[best] ? r : best;
    w[i].proc = best;
    load[best] += w[i].cost;
  }
  free(load);
  qsort(w, n, sizeof *w, pc_cmp_order);
  return PC_OK;
}

/* The works: every item cut into its parts, each with its cost. */
static int pc_plan_cut(pc_plan *p, pc_work **out, size_t *n) {
  uint64_t total = 0;
  *n = 0;
  for (size_t i = 0; i < p->nitems; i++)
    total += p->items[i].bytes + PC_TENSOR_COST;
  uint64_t share = total / p->nprocs ? total / p->nprocs : 1;
  for (size_t i = 0; i < p->nitems; i++)
    *n += p->items[i].npieces = pc_plan_pieces(p, &p->items[i], share);
  pc_work *w = *out = malloc((*n ? *n : 1) * sizeof *w);
  if (!w)
    return PC_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < p->nitems; i++)
    for (unsigned j = 0; j < p->items[i].npieces; j++)
      w[k++] = (pc_work){i, j, 0, p->items[i].bytes / p->items[i].npieces + PC_TENSOR_COST};
  return pc_plan_assign(p, w, *n);
}

static void pc_plan_write(pc_plan *p, const pc_work *w, size_t n) {
  pc_wbuf *o = &p->wire;
  pc_record_put_header(o, PC_PLAN_MAGIC);
  pc_wbuf_u64(o, p->nprocs);
  pc_wbuf_u64(o, p->block);
  pc_wbuf_u64(o, p->quantiles);
  pc_wbuf_u64(o, n);
  for (size_t i = 0; i < n; i++) {
    const pc_item *it = &p->items[w[i].item];
    const pc_tensor *t = pc_run_at(p->run, it->tensor);
    pc_wbuf_u64(o, it->tensor);
    pc_wbuf_u64(o, w[i].proc);
    pc_wbuf_u64(o, w[i].piece);
    pc_wbuf_u64(o, it->npieces);
    pc_wbuf_str(o, t->path);
    pc_wbuf_str(o, t->file);
    pc_wbuf_str(o, it->a_path);
    pc_wbuf_str(o, it->b_path);
  }
}

int pc_plan_make(pc_plan **out, const char *path_a, const char *path_b, const pc_options *opts,
                 unsigned nprocs, pc_error *err) {
  *out = NULL;
  if (!opts || opts->version != PC_OPTIONS_VERSION || !opts->tols || nprocs == 0)
    return pc_error_set(err, PC_EUSAGE, "pc_plan_make: bad arguments");
  pc_plan *p = calloc(1, sizeof *p);
  if (!p)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  p->tols = opts->tols;
  p->allow_empty = opts->allow_empty;
  p->quantiles = !opts->skip_quantiles;
  p->block = opts->block_elems ? opts->block_elems : PC_DEFAULT_BLOCK_ELEMS;
  p->nprocs = nprocs;
  pc_pair_sink sink = {pc_plan_add, p};
  pc_work *w = NULL;
  size_t n = 0;
  int rc = pc_compare_walk(&p->run, path_a, path_b, opts, &sink, err);
  if (rc == PC_OK && pc_plan_cut(p, &w, &n) < 0)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK)
    pc_plan_write(p, w, n);
  if (rc == PC_OK && p->wire.nomem)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory");
  free(w);
  if (rc < 0) {
    pc_plan_free(p);
    return rc;
  }
  *out = p;
  return PC_OK;
}

void pc_plan_bytes(const pc_plan *p, const void **bytes, size_t *size) {
  *bytes = p->wire.p;
  *size = p->wire.n;
}

size_t pc_plan_works(const pc_plan *p, size_t *split) {
  size_t n = 0;
  *split = 0;
  for (size_t i = 0; i < p->nitems; i++) {
    n += p->items[i].npieces;
    *split += p->items[i].npieces > 1;
  }
  return n;
}

/* --- merging ----------------------------------------------------------------------------- */

static pc_item *pc_plan_item(pc_plan *p, uint64_t tensor) {
  size_t lo = 0, hi = p->nitems; /* items are in run order */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->items[mid].tensor < tensor)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < p->nitems && p->items[lo].tensor == tensor ? &p->items[lo] : NULL;
}

/* Keeps a part's record (the bytes from `from` to the end of what r read) until every part of
 * its tensor is in. */
static int pc_keep_part(pc_item *it, unsigned piece, const unsigned char *from, size_t n) {
  if (!it->got && (!(it->got = calloc(it->npieces, sizeof *it->got)) ||
                   !(it->got_size = calloc(it->npieces, sizeof *it->got_size))))
    return PC_ENOMEM;
  if (!(it->got[piece] = malloc(n ? n : 1)))
    return PC_ENOMEM;
  memcpy(it->got[piece], from, n);
  it->got_size[piece] = n;
  return PC_OK;
}

/* Skips the rest of a part's record: its blocks' figures and histograms. */
static void pc_skip_part(pc_rbuf *r) {
  uint64_t nparts = pc_rbuf_u64(r);
  if (nparts > (r->n - r->at) / sizeof(pc_stats))
    r->bad = true;
  pc_rbuf_skip(r, (size_t)nparts * sizeof(pc_stats));
  for (int h = 0; h < PC_NHISTS; h++)
    pc_record_merge_hist(r, NULL);
}

/* One record: a whole tensor goes into the run at once, a part is kept. */
static int pc_merge_record(pc_plan *p, pc_rbuf *r) {
  size_t start = r->at;
  uint64_t tensor = pc_rbuf_u64(r), piece = pc_rbuf_u64(r), npieces = pc_rbuf_u64(r);
  pc_item *it = r->bad ? NULL : pc_plan_item(p, tensor);
  if (!it || npieces != it->npieces || piece >= npieces ||
      (it->got ? it->got[piece] != NULL : it->merged > 0))
    return PC_EUSAGE;
  pc_tensor scratch = {0};
  pc_tensor *t = npieces == 1 ? pc_run_at(p->run, tensor) : &scratch;
  bool ok = pc_record_get_tensor(r, t);
  free(scratch.message);
  free(scratch.note);
  if (!ok)
    return PC_ENOMEM;
  if (npieces > 1) /* every part carries the envelope the runner attached (the walk did not) */
    pc_run_at(p->run, tensor)->envelope = scratch.envelope;
  if (npieces > 1)
    pc_skip_part(r);
  if (r->bad)
    return PC_EUSAGE;
  it->merged++;
  return npieces > 1 ? pc_keep_part(it, (unsigned)piece, r->p + start, r->at - start) : PC_OK;
}

int pc_plan_merge(pc_plan *p, const void *results, size_t size, pc_error *err) {
  pc_rbuf r = {results, size, 0, false};
  if (!p || !results || !pc_record_check_header(&r, PC_RESULTS_MAGIC))
    return pc_error_set(err, PC_EUSAGE,
                        "results not from this build of paritycheck (another version or "
                        "architecture)");
  uint64_t proc = pc_rbuf_u64(&r);
  int rc = r.bad || proc >= p->nprocs ? PC_EUSAGE : PC_OK;
  while (rc == PC_OK && r.at < r.n)
    rc = pc_merge_record(p, &r);
  if (rc == PC_ENOMEM)
    return pc_error_set(err, rc, "out of memory");
  if (rc < 0)
    return pc_error_set(err, rc, "malformed results of process %llu at byte %zu",
                        (unsigned long long)proc, r.at);
  return PC_OK;
}

/* --- finishing --------------------------------------------------------------------------- */

/* Merges part `piece` of item `it` into t: its blocks' figures in block order, its histograms;
 * the first part that failed makes t an error (with that part's message), as the first block
 * that fails does in one process. */
static int pc_replay_part(const pc_item *it, unsigned piece, pc_tensor *t, pc_qhist **hist) {
  pc_rbuf r = {it->got[piece], it->got_size[piece], 0, false};
  pc_tensor part = {0};
  pc_rbuf_skip(&r, 3 * sizeof(uint64_t)); /* tensor, piece, npieces */
  if (!pc_record_get_tensor(&r, &part))
    return PC_ENOMEM;
  if (piece == 0) {
    t->tol = part.tol;
    free(t->note);
    t->note = part.note;
    part.note = NULL;
  }
  if (part.verdict == PC_VERDICT_ERROR && t->verdict != PC_VERDICT_ERROR) {
    t->verdict = PC_VERDICT_ERROR;
    free(t->message);
    t->message = part.message;
    part.message = NULL;
  }
  uint64_t nparts = pc_rbuf_u64(&r);
  for (uint64_t i = 0; i < nparts; i++) {
    pc_stats s;
    pc_record_get_stats(&r, &s);
    if (t->verdict != PC_VERDICT_ERROR)
      pc_stats_merge(&t->stats, &s);
  }
  for (int h = 0; h < PC_NHISTS; h++)
    pc_record_merge_hist(&r, hist ? hist[h] : NULL);
  free(part.message);
  free(part.note);
  return PC_OK;
}

/* A tensor read in parts: its figures, quantiles and verdict, as one process's stream gives. */
static int pc_replay(const pc_plan *p, const pc_item *it, pc_qhist **hist) {
  pc_tensor *t = pc_run_at(p->run, it->tensor);
  memset(&t->stats, 0, sizeof t->stats);
  for (int h = 0; h < PC_NHISTS; h++)
    pc_qhist_reset(hist[h]);
  for (unsigned k = 0; k < it->npieces; k++)
    if (pc_replay_part(it, k, t, p->quantiles ? hist : NULL) < 0)
      return PC_ENOMEM;
  if (t->verdict == PC_VERDICT_ERROR) {
    memset(&t->stats, 0, sizeof t->stats);
  } else if (p->quantiles) {
    pc_stats_quantiles(&t->stats, hist);
    if (!t->stats.has_quantiles)
      return PC_ENOMEM;
  }
  pc_judge_tensor(t);
  return PC_OK;
}

static int pc_replay_all(const pc_plan *p, pc_error *err) {
  pc_qhist *hist[PC_NHISTS];
  int rc = pc_hists_new(hist);
  for (size_t i = 0; rc == PC_OK && i < p->nitems; i++) {
    const pc_item *it = &p->items[i];
    if (it->merged != it->npieces)
      rc = pc_error_set(err, PC_EUSAGE, "%s: results missing for %u of its %u parts",
                        pc_run_at(p->run, it->tensor)->path, it->npieces - it->merged, it->npieces);
    else if (it->npieces > 1 && pc_replay(p, it, hist) < 0)
      rc = PC_ENOMEM;
  }
  pc_hists_free(hist);
  return rc == PC_ENOMEM ? pc_error_set(err, rc, "out of memory") : rc;
}

int pc_plan_finish(pc_plan *p, pc_run **out, pc_error *err) {
  *out = NULL;
  if (!p || !p->run)
    return pc_error_set(err, PC_EUSAGE, "pc_plan_finish: bad arguments");
  int rc = pc_replay_all(p, err);
  if (rc == PC_OK)
    rc = pc_run_conclude(p->run, p->tols, p->allow_empty, err);
  if (rc < 0)
    return rc;
  *out = p->run;
  p->run = NULL;
  return PC_OK;
}

void pc_plan_free(pc_plan *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->nitems; i++) {
    pc_item *it = &p->items[i];
    for (unsigned k = 0; it->got && k < it->npieces; k++)
      free(it->got[k]);
    free(it->got);
    free(it->got_size);
    free(it->a_path);
    free(it->b_path);
  }
  free(p->items);
  free(p->wire.p);
  pc_run_free(p->run);
  free(p);
}
