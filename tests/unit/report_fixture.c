/* The report tests' shared fixture (report_fixture.h): a run built by hand (one tensor of each
 * kind), a gate over it, a run of diagnosed tensors, and the file helpers. Every expected value
 * is derived by hand in the comments. */
#include "report_fixture.h"

#include <paritycheck/compare.h> /* pc_run_accept_indeterminate */

#include <float.h>  /* DBL_TRUE_MIN */
#include <math.h>   /* INFINITY, NAN */
#include <stdint.h> /* uint64_t, UINT64_MAX */
#include <stdio.h>  /* fopen */
#include <stdlib.h> /* malloc, mkstemp */
#include <string.h> /* memcpy, memset, strstr */
#include <unistd.h> /* close */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

pc_tensor tensors[T_COUNT];
pc_run run;

/* The tensors' shapes (pc_tensor.dims points to rank entries), one room per tensor; B's shape
 * of the shape mismatch. */
static uint64_t shapes[T_COUNT][PC_MAX_RANK];
static uint64_t reshaped_b[] = {3, 2};

static void set_dims(pc_tensor *t, int rank, const uint64_t *dims) {
  uint64_t *room = shapes[t - tensors];
  t->rank = rank;
  t->dims = rank > 0 ? memcpy(room, dims, (size_t)rank * sizeof *dims) : NULL;
}

/* A pass whose figures exercise round-tripping: 0.1, 1/3, the smallest subnormal and -0. Its
 * distribution: ulps 0,0,1,1,2,2 (sum 6, buckets [0]=2, [1]=2, [2]=2), sum abs 0.3, sum rel 0.6;
 * sums a^2 = b^2 = 4, ab = 3.995, (b-a)^2 = 0.01; quantiles given as they come. */
static void make_pass(pc_tensor *t) {
  t->path = "/enc/0/out";
  t->verdict = PC_VERDICT_PASS;
  t->dtype_a = t->dtype_b = t->compare = PC_DTYPE_FLOAT32;
  set_dims(t, 2, (const uint64_t[]){2, 3});
  t->tol = (pc_tol){.set = PC_TOL_ATOL | PC_TOL_RTOL,
                    .atol = 1e-5,
                    .rtol = 1.3e-6,
                    .max_ulp = 99,
                    .max_mismatch_fraction = 0.5};
  t->stats = (pc_stats){.count = 6,
                        .max_abs = 0.1,
                        .max_rel = 1.0 / 3,
                        .max_ulp = 2,
                        .ulp_sum_lo = 6,
                        .ulp_terms = 6,
                        .has_worst = true,
                        .worst_index = 4,
                        .worst_a = {DBL_TRUE_MIN},
                        .worst_b = {-0.0},
                        .worst_abs = DBL_TRUE_MIN,
                        .worst_rel = 1,
                        .worst_ulp = 1,
                        .finite_terms = 6,
                        .sum_sq_a = 4,
                        .sum_sq_b = 4,
                        .sum_ab = 3.995,
                        .sum_sq_diff = 0.01,
                        .sum_a_diff = -0.005, /* sum_ab - sum_sq_a */
                        .sum_abs = 0.3,
                        .sum_rel = 0.6,
                        .ulp_hist = {2, 2, 2},
                        .has_quantiles = true,
                        .q_abs = {0, 0.05, 0.09, 0.1},
                        .q_rel = {0.1, 0.2, 0.3, 1.0 / 3},
                        .q_ulp = {1, 2, 2, 2}};
}

/* A drift with non-finite maxima and a max_ulp beyond INT64_MAX, worst at flat 47 of [3,4,5]:
 * 47 = 2*20 + 7, 7 = 1*5 + 2, so the index is [2,1,2]. mean_ulp = 2^64 / 4 = 2^62. */
static void make_drift(pc_tensor *t) {
  t->path = "/enc/1/attn";
  t->verdict = PC_VERDICT_DRIFT;
  t->note = "compared in bfloat16 ULPs";
  t->dtype_a = PC_DTYPE_FLOAT32;
  t->dtype_b = t->compare = PC_DTYPE_BFLOAT16;
  set_dims(t, 3, (const uint64_t[]){3, 4, 5});
  t->tol = (pc_tol){.set = PC_TOL_MAX_ULP | PC_TOL_MAX_MISMATCH_FRACTION,
                    .max_ulp = 4,
                    .max_mismatch_fraction = 0.01};
  t->stats = (pc_stats){.count = 60,
                        .mismatches = 7,
                        .nan_mismatches = 1,
                        .inf_mismatches = 2,
                        .not_representable_b = 3,
                        .max_abs = INFINITY,
                        .max_rel = NAN,
                        .max_ulp = UINT64_MAX,
                        .ulp_sum_hi = 1,
                        .ulp_terms = 4,
                        .has_worst = true,
                        .worst_index = 47,
                        .worst_a = {1.0},
                        .worst_b = {NAN},
                        .worst_abs = NAN,
                        .worst_rel = NAN,
                        .worst_ulp = 0};
  /* the judge's record: both non-finite mismatches, then 7 / 60 against the 1% allowed */
  t->nreasons = 3;
  t->reasons[0] = (pc_reason){PC_CRIT_NAN_MISMATCH, 1, 0};
  t->reasons[1] = (pc_reason){PC_CRIT_INF_MISMATCH, 2, 0};
  t->reasons[2] = (pc_reason){PC_CRIT_MISMATCH_FRACTION, 7.0 / 60, 0.01};
}

/* complex64 drift: worst at flat 5 of [8]; |(0.1-2.25i) - (0.1-2i)| = 0.25, rel 0.25/|a|. The
 * judge found 1 of 8 elements against none allowed, and (set in setup) that /enc/1/attn, the
 * drift before it with nan mismatches, explains it: a cascade of one. */
static void make_complex(pc_tensor *t) {
  t->path = "/enc/2/cplx";
  t->verdict = PC_VERDICT_DRIFT;
  t->dtype_a = t->dtype_b = t->compare = PC_DTYPE_FLOAT32;
  t->is_complex = true;
  set_dims(t, 1, (const uint64_t[]){8});
  t->tol = (pc_tol){.set = PC_TOL_ATOL, .atol = 1e-5};
  t->stats = (pc_stats){.count = 8,
                        .mismatches = 1,
                        .max_abs = 0.25,
                        .max_rel = 0.125,
                        .max_ulp = 262144,
                        .has_worst = true,
                        .worst_index = 5,
                        .worst_a = {0.1, -2.0},
                        .worst_b = {0.1, -2.25},
                        .worst_abs = 0.25,
                        .worst_rel = 0.125,
                        .worst_ulp = 262144};
  t->nreasons = 1;
  t->reasons[0] = (pc_reason){PC_CRIT_MISMATCH_FRACTION, 0.125, 0};
}

static void make_uncompared(void) {
  tensors[T_ONLY_B] = (pc_tensor){.path = "/dec/only_b",
                                  .verdict = PC_VERDICT_MISSING_IN_A,
                                  .message = "only in B",
                                  .dtype_b = PC_DTYPE_FLOAT16,
                                  .rank_b = -1};
  set_dims(&tensors[T_ONLY_B], 1, (const uint64_t[]){4});
  tensors[T_ONLY_A] = (pc_tensor){.path = "/dec/only_a",
                                  .verdict = PC_VERDICT_MISSING_IN_B,
                                  .message = "only in A",
                                  .dtype_a = PC_DTYPE_BFLOAT16,
                                  .rank = 0,
                                  .rank_b = -1};
  tensors[T_SHAPE] = (pc_tensor){.path = "/dec/reshaped",
                                 .verdict = PC_VERDICT_SHAPE_MISMATCH,
                                 .message = "shapes differ",
                                 .dtype_a = PC_DTYPE_FLOAT64,
                                 .dtype_b = PC_DTYPE_FLOAT64,
                                 .rank_b = 2,
                                 .dims_b = reshaped_b};
  set_dims(&tensors[T_SHAPE], 2, (const uint64_t[]){2, 3});
  tensors[T_SKIP] = (pc_tensor){.path = "/meta/names",
                                .verdict = PC_VERDICT_SKIPPED,
                                .message = "both sides are strings",
                                .rank = -1,
                                .rank_b = -1};
  tensors[T_ERROR] = (pc_tensor){.path = "/enc/3/broken",
                                 .verdict = PC_VERDICT_ERROR,
                                 .message = "filter 32001 not available",
                                 .dtype_a = PC_DTYPE_FLOAT32,
                                 .dtype_b = PC_DTYPE_FLOAT32,
                                 .rank_b = -1};
  set_dims(&tensors[T_ERROR], 1, (const uint64_t[]){10});
}

int setup(void **state) {
  (void)state;
  memset(tensors, 0, sizeof tensors);
  make_pass(&tensors[T_PASS]);
  make_drift(&tensors[T_DRIFT]);
  make_complex(&tensors[T_COMPLEX]);
  make_uncompared();
  for (int i = 0; i < T_COUNT; i++)
    tensors[i].caused_by = -1;
  tensors[T_COMPLEX].caused_by = T_DRIFT;
  /* no order: execution order is run order, so the first failure, /enc/1/attn, is the first
   * divergence */
  run = (pc_run){.path_a = "ref.h5",
                 .path_b = "cand.h5",
                 .tensors = tensors,
                 .ntensors = T_COUNT,
                 .verdict = PC_RUN_ERROR,
                 .first_divergence = T_DRIFT};
  for (int i = 0; i < T_COUNT; i++)
    run.by_verdict[tensors[i].verdict]++;
  return 0;
}

char *temp_path(void) {
  static char path[] = "/tmp/test_report_XXXXXX";
  memcpy(path + sizeof path - 7, "XXXXXX", 6);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  return path;
}

char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size >= 0);
  rewind(f);
  char *buf = malloc((size_t)size + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  buf[size] = '\0';
  return buf;
}

void assert_lines(const char *text, const char *const *wanted, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strstr(text, wanted[i]))
      fail_msg("missing line:\n%s\nin:\n%s", wanted[i], text);
}

/* A gate made by hand (the baseline module has its own tests): which tensor is what. */
static pc_gate_tensor gate_tensors[T_COUNT];
pc_gate gate;

void make_gate(void) {
  static const pc_change changes[T_COUNT] = {
      PC_CHANGE_UNCHANGED, PC_CHANGE_WORSE,     PC_CHANGE_UNCHANGED, PC_CHANGE_NEW,
      PC_CHANGE_UNCHANGED, PC_CHANGE_UNCHANGED, PC_CHANGE_UNCHANGED, PC_CHANGE_NEW};
  memset(gate_tensors, 0, sizeof gate_tensors);
  for (int i = 0; i < T_COUNT; i++) {
    gate_tensors[i].change = changes[i];
    gate_tensors[i].in_baseline = changes[i] != PC_CHANGE_NEW;
    gate_tensors[i].base.verdict = tensors[i].verdict;
  }
  gate_tensors[T_DRIFT].fails = gate_tensors[T_ONLY_B].fails = true;
  gate_tensors[T_DRIFT].base = (pc_baseline_entry){.verdict = PC_VERDICT_DRIFT,
                                                   .compare = PC_DTYPE_BFLOAT16,
                                                   .count = 60,
                                                   .mismatches = 2,
                                                   .nonfinite = 1,
                                                   .max_ulp = 7};
  gate = (pc_gate){.path = "base.json",
                   .factor = 2,
                   .tensors = gate_tensors,
                   .ntensors = T_COUNT,
                   .by_change = {2, 1, 0, 5},
                   .failures = 2,
                   .baseline_only = 1,
                   .verdict = PC_RUN_ERROR};
}

/* The diagnosed run of report_fixture.h: one float32 tensor of [4] each. */
static pc_tensor diag_tensors[D_COUNT];
static uint64_t four[] = {4};

static pc_tensor diag_tensor(const char *path, pc_verdict v, pc_reason why, pc_diagnosis d) {
  pc_tensor t = {.path = (char *)path, .verdict = v, .rank = 1, .dims = four, .caused_by = -1};
  t.dtype_a = t.dtype_b = t.compare = PC_DTYPE_FLOAT32;
  t.stats = (pc_stats){.count = 4,
                       .mismatches = v == PC_VERDICT_PASS ? 0 : 4,
                       .max_abs = 1,
                       .max_rel = 0.5,
                       .max_ulp = 8,
                       .finite_terms = 4};
  t.nreasons = v == PC_VERDICT_PASS ? 0 : 1;
  t.reasons[0] = why;
  t.diagnosis = d;
  return t;
}

pc_run diag_run(size_t n, bool accept) {
  diag_tensors[D_PASS] = diag_tensor("/l0/out", PC_VERDICT_PASS, (pc_reason){0}, (pc_diagnosis){0});
  diag_tensors[D_INDET] =
      diag_tensor("/l1/grad", PC_VERDICT_INDETERMINATE, (pc_reason){PC_CRIT_REL_RMS, 0.8, 0.001},
                  (pc_diagnosis){PC_DIAG_NO_DIGITS, false, 0, 0.8, 0.8, 0.5});
  diag_tensors[D_SCALED] =
      diag_tensor("/l2/scaled", PC_VERDICT_DRIFT, (pc_reason){PC_CRIT_STRUCTURE, 0, 1e-6},
                  (pc_diagnosis){PC_DIAG_SCALED, true, 0, 2.0, 0, 1e-6});
  diag_tensors[D_SHIFTED] =
      diag_tensor("/l3/shifted", PC_VERDICT_DRIFT, (pc_reason){PC_CRIT_STRUCTURE, 0.01, 0.25},
                  (pc_diagnosis){PC_DIAG_SHIFTED, true, 0, 1, 0.01, 0.25});
  diag_tensors[D_ZEROED] =
      diag_tensor("/l4/zeroed", PC_VERDICT_DRIFT, (pc_reason){PC_CRIT_STRUCTURE, 60, 3},
                  (pc_diagnosis){PC_DIAG_PARTLY_ZEROED, true, 0, 0.12, 60, 3});
  pc_run r = {.path_a = "a.h5",
              .path_b = "b.h5",
              .tensors = diag_tensors,
              .ntensors = n,
              .first_divergence = D_INDET};
  pc_run_accept_indeterminate(&r, accept);
  return r;
}
