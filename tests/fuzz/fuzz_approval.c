/* libFuzzer target: the approval file loader (src/lib/report/approval.c, YAML through libyaml)
 * on arbitrary bytes, and its writer on what it accepted. The bytes are written to a temporary
 * file (pc_approvals_load reads files). Besides "no crash, no leak, no undefined behaviour"
 * (the sanitizers' part), the properties of docs/review.md, "The approval file":
 *   - a refused file gives PC_EPARSE (or PC_ENOMEM) and a message that starts with its path;
 *   - an accepted one is written again (pc_approvals_save keeps every approval of a run that
 *     signs nothing new) into a file that loads: a file that would not read back is never
 *     written (issue 30);
 *   - its tolerance record compares equal to itself only: no mismatch for its own digest.
 * A violation aborts, which libFuzzer reports as a crash with its input. */
#include <paritycheck/paritycheck.h>

#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* abort, getenv, mkstemp, atexit */
#include <string.h> /* strncmp, strlen */
#include <unistd.h> /* close, unlink */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static char in_path[4096], out_path[4096];

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_approval: %s: %s\n", what, detail);
  abort();
}

static void cleanup(void) {
  unlink(in_path);
  unlink(out_path);
}

static void temp_file(char *path, size_t size, const char *name) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, size, "%s/pc_fuzz_%s_XXXXXX", dir && *dir ? dir : "/tmp", name);
  int fd = mkstemp(path);
  if (fd < 0)
    fail("set-up failed", path);
  close(fd);
}

static void setup(void) {
  temp_file(in_path, sizeof in_path, "approval_in");
  temp_file(out_path, sizeof out_path, "approval_out");
  atexit(cleanup);
}

static void write_input(const unsigned char *data, size_t size) {
  FILE *f = fopen(in_path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    fail("cannot write the input file", in_path);
}

/* A run without a drifting tensor: saving it keeps the previous approvals and signs none, so
 * neither input is read. */
static pc_tensor tensors[] = {{.path = "/x", .verdict = PC_VERDICT_PASS}};

static void round_trip(const pc_approvals *ap) {
  pc_run run = {.path_a = "a.h5", .path_b = "b.h5", .tensors = tensors, .ntensors = 1};
  pc_tol_record rec = {"fuzz", "fnv1a64:0000000000000000"};
  pc_approve_options o = PC_APPROVE_OPTIONS_INIT;
  o.by = "fuzz";
  o.reason = "round trip";
  o.date = "2026-01-01";
  o.tolerances = &rec;
  pc_error err;
  pc_approvals *again = NULL;
  if (pc_approvals_save(out_path, &run, ap, &o, &err) != PC_OK)
    fail("accepted approvals cannot be written again", err.message);
  if (pc_approvals_load(&again, out_path, &err) != PC_OK)
    fail("approvals written do not read back", err.message);
  char buf[PC_ERROR_MESSAGE_MAX];
  if (pc_approvals_tolerance_mismatch(again, out_path, &rec, buf, sizeof buf))
    fail("a tolerance record differs from itself", buf);
  pc_approvals_free(again);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (!in_path[0])
    setup();
  write_input(data, size);
  pc_error err;
  pc_approvals *ap = NULL;
  int rc = pc_approvals_load(&ap, in_path, &err);
  if (rc != PC_OK) {
    if ((rc != PC_EPARSE && rc != PC_ENOMEM) || ap)
      fail("unexpected status", err.message);
    if (strncmp(err.message, in_path, strlen(in_path)) != 0)
      fail("the message does not start with the file's path", err.message);
    return 0;
  }
  round_trip(ap);
  pc_approvals_free(ap);
  return 0;
}
