/* libFuzzer target: the HDF5 loader and the comparison, from file bytes to a run. The bytes are
 * written to a temporary file (HDF5 reads files) that is compared with itself. Besides "no
 * crash, no leak, no undefined behaviour" (the sanitizers' part; HDF5 itself is not
 * instrumented, but its crashes and its misuse of our buffers are caught), two properties of
 * docs/robustness.md:
 *   - an input that cannot be opened fails with PC_EIO (or PC_ENOMEM) and a message naming it,
 *     and one that holds no tensor with PC_EEMPTY (docs/robustness.md, "Fail closed");
 *   - a file compared with itself never drifts: no tensor differs in values, shape or dtype, and
 *     the run is an error whenever a tensor does not pass (a corrupt object can be readable in
 *     one walk and not in the other: HDF5 shares one open file between A and B, so a tensor
 *     may be missing on one side, but then the object that hid it is an error).
 * A violation aborts, which libFuzzer reports as a crash with its input. */
#include <paritycheck/paritycheck.h>

#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* abort, getenv, mkstemp, atexit */
#include <string.h> /* strstr */
#include <unistd.h> /* close, unlink */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Small blocks, so that block boundaries are crossed; one thread, so that a run is repeatable;
 * a small memory limit, so that a declared giant chunk is refused rather than allocated. */
enum { FUZZ_BLOCK_ELEMS = 64, FUZZ_MAX_MEMORY = 1 << 20 };

static char tmp_path[4096];
static pc_tolset *tols;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_loader: %s: %s\n", what, detail);
  abort();
}

static void cleanup(void) {
  unlink(tmp_path);
  pc_tolset_free(tols);
}

static void setup(void) {
  pc_error err;
  const char *dir = getenv("TMPDIR");
  snprintf(tmp_path, sizeof tmp_path, "%s/pc_fuzz_loader_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(tmp_path);
  tols = pc_tolset_new();
  if (fd < 0 || !tols || pc_tolset_load_builtin(tols, &err) != PC_OK)
    fail("set-up failed", tmp_path);
  close(fd);
  atexit(cleanup);
}

static void write_input(const unsigned char *data, size_t size) {
  FILE *f = fopen(tmp_path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    fail("cannot write the input file", tmp_path);
}

static void check_run(const pc_run *run) {
  bool error = false, failed = false;
  for (size_t i = 0; i < run->ntensors; i++) {
    pc_verdict v = run->tensors[i].verdict;
    if (v == PC_VERDICT_DRIFT || v == PC_VERDICT_SHAPE_MISMATCH || v == PC_VERDICT_DTYPE_MISMATCH)
      fail("a tensor differs from itself", run->tensors[i].path);
    error = error || v == PC_VERDICT_ERROR;
    failed = failed || pc_verdict_is_failure(v);
  }
  if (failed && !error)
    fail("a file compared with itself fails without an error", pc_run_verdict_name(run->verdict));
  if (run->verdict != (error ? PC_RUN_ERROR : PC_RUN_PASS))
    fail("run verdict disagrees with its tensors", pc_run_verdict_name(run->verdict));
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (!tols)
    setup();
  write_input(data, size);
  pc_options opts = PC_OPTIONS_INIT;
  opts.tols = tols;
  opts.block_elems = FUZZ_BLOCK_ELEMS;
  opts.threads = 1;
  opts.max_memory = FUZZ_MAX_MEMORY;
  pc_error err;
  pc_run *run = NULL;
  int rc = pc_compare_files(&run, tmp_path, tmp_path, &opts, &err);
  if (rc == PC_OK)
    check_run(run);
  else if ((rc != PC_EIO && rc != PC_ENOMEM && rc != PC_EEMPTY) || !strstr(err.message, tmp_path))
    fail("a failed open must name the file", err.message);
  pc_run_free(run);
  return 0;
}
