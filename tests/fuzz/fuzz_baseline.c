/* libFuzzer target: the baseline loader (src/lib/report/baseline.c, JSON through jansson) on
 * arbitrary bytes, then the gate over a fixed run. The bytes are written to a temporary file
 * (pc_baseline_load reads files). Besides "no crash, no leak, no undefined behaviour" (the
 * sanitizers' part), the properties of docs/reports.md, "Baseline gate":
 *   - a refused file gives PC_EPARSE (or PC_ENOMEM) and a message that starts with its path;
 *   - an accepted one judges every tensor of a run exactly once: the changes add up to the
 *     run's tensors, a tensor not in the baseline is new, a tensor fails the gate only when it
 *     fails and is new or worse, and the gate's verdict follows from its failures (and is an error
 * where the run is one). A violation aborts, which libFuzzer reports as a crash with its input. */
#include <paritycheck/paritycheck.h>

#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* abort, getenv, mkstemp, atexit */
#include <string.h> /* strncmp, strlen */
#include <unistd.h> /* close, unlink */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static char tmp_path[4096];

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_baseline: %s: %s\n", what, detail);
  abort();
}

static void cleanup(void) {
  unlink(tmp_path);
}

static void setup(void) {
  const char *dir = getenv("TMPDIR");
  snprintf(tmp_path, sizeof tmp_path, "%s/pc_fuzz_baseline_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(tmp_path);
  if (fd < 0)
    fail("set-up failed", tmp_path);
  close(fd);
  atexit(cleanup);
}

static void write_input(const unsigned char *data, size_t size) {
  FILE *f = fopen(tmp_path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    fail("cannot write the input file", tmp_path);
}

/* A run with a tensor of every kind the gate tells apart, under paths that the seeds use. */
static pc_tensor tensors[] = {
    {.path = "/x",
     .verdict = PC_VERDICT_DRIFT,
     .compare = PC_DTYPE_FLOAT32,
     .stats = {.count = 10, .mismatches = 3, .max_ulp = 40}},
    {.path = "/y",
     .verdict = PC_VERDICT_PASS,
     .compare = PC_DTYPE_FLOAT32,
     .stats = {.count = 10, .max_ulp = 1}},
    {.path = "/v1",
     .verdict = PC_VERDICT_DRIFT,
     .compare = PC_DTYPE_BFLOAT16,
     .stats = {.count = 1u << 20, .mismatches = 7, .nan_mismatches = 1, .max_ulp = 1u << 30}},
    {.path = "/v2", .verdict = PC_VERDICT_MISSING_IN_A},
    {.path = "/v7", .verdict = PC_VERDICT_ERROR},
    {.path = "/caf\xc3\xa9", .verdict = PC_VERDICT_SHAPE_MISMATCH},
    {.path = "/t00000",
     .verdict = PC_VERDICT_DRIFT,
     .compare = PC_DTYPE_FLOAT32,
     .stats = {.count = 10, .mismatches = 1, .max_ulp = 5}},
};

/* The whole run (an error, for its tensor /v7), or its first four tensors (a drift). */
static pc_run fixed_run(bool whole) {
  pc_run run = {.path_a = "a.h5",
                .path_b = "b.h5",
                .tensors = tensors,
                .ntensors = whole ? sizeof tensors / sizeof tensors[0] : 4,
                .verdict = whole ? PC_RUN_ERROR : PC_RUN_DRIFT,
                .first_divergence = -1};
  return run;
}

static void check_gate(const pc_gate *g, const pc_run *run) {
  size_t changes = 0, failures = 0;
  for (int c = 0; c < PC_CHANGE_COUNT_; c++)
    changes += g->by_change[c];
  if (g->ntensors != run->ntensors || changes != run->ntensors)
    fail("the gate does not judge every tensor once", g->path);
  for (size_t i = 0; i < run->ntensors; i++) {
    const pc_gate_tensor *t = &g->tensors[i];
    bool new_or_worse = t->change == PC_CHANGE_NEW || t->change == PC_CHANGE_WORSE;
    if (!t->in_baseline && t->change != PC_CHANGE_NEW)
      fail("a tensor missing from the baseline is not new", run->tensors[i].path);
    if (t->fails != (pc_verdict_is_failure(run->tensors[i].verdict) && new_or_worse))
      fail("a tensor fails the gate against the rule", run->tensors[i].path);
    failures += t->fails;
  }
  if (failures != g->failures)
    fail("the gate's failures do not add up", g->path);
  pc_run_verdict want = run->verdict == PC_RUN_ERROR ? PC_RUN_ERROR
                        : failures                   ? PC_RUN_DRIFT
                                                     : PC_RUN_PASS;
  if (g->verdict != want)
    fail("the gate's verdict does not follow from its failures", pc_run_verdict_name(g->verdict));
}

static void judge(const pc_baseline *base, const pc_run *run) {
  pc_error err;
  pc_gate *gate = NULL;
  if (pc_gate_new(&gate, base, tmp_path, run, PC_BASELINE_FACTOR_DEFAULT, &err) != PC_OK)
    fail("an accepted baseline cannot judge a run", err.message);
  check_gate(gate, run);
  pc_gate_free(gate);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (!tmp_path[0])
    setup();
  write_input(data, size);
  pc_error err;
  pc_baseline *base = NULL;
  int rc = pc_baseline_load(&base, tmp_path, &err);
  if (rc != PC_OK) {
    if ((rc != PC_EPARSE && rc != PC_ENOMEM) || base)
      fail("unexpected status", err.message);
    if (strncmp(err.message, tmp_path, strlen(tmp_path)) != 0)
      fail("the message does not start with the file's path", err.message);
    return 0;
  }
  pc_run whole = fixed_run(true), part = fixed_run(false);
  judge(base, &whole);
  judge(base, &part);
  pc_baseline_free(base);
  return 0;
}
