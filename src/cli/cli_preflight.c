/* The checks of a command before anything is read (cli_preflight.h). */
#include "cli_preflight.h"
#include "cli_diag.h"
#include "report_files.h"
#include "trust_cli.h"

#include <errno.h>  /* errno */
#include <stdio.h>  /* fopen, fprintf, snprintf */
#include <string.h> /* strrchr, strerror */
#include <unistd.h> /* access */

/* An output file must be writable: an existing one itself, else its folder. Checked before the
 * data, so that a typo does not throw away a long comparison; the writers still report a file
 * that cannot be opened or written. */
static int check_output(const char *path) {
  if (!path || pc_cli_is_stdout(path))
    return PC_OK;
  const char *slash = strrchr(path, '/');
  char dir[4096];
  int n = slash && slash != path ? (int)(slash - path) : 1; /* the folder, "/" or "." */
  if ((size_t)n >= sizeof dir)
    return PC_OK; /* left to the writer, which names the path */
  snprintf(dir, sizeof dir, "%.*s", n, slash ? path : ".");
  bool exists = access(path, F_OK) == 0;
  if (exists ? access(path, W_OK) < 0 : access(dir, W_OK | X_OK) < 0) {
    int e = errno;
    fputs("paritycheck: ", stderr);
    pc_cli_put_untrusted(path);
    fprintf(stderr, ": cannot write %s: %s\n", exists ? "this file" : "a file there", strerror(e));
    return PC_EIO;
  }
  return PC_OK;
}

/* Every report file of c writable (check_output), --approve's first. */
static int check_writable(const pc_cli *c) {
  const pc_cli_outputs *o = &c->out;
  const char *files[] = {c->json, o->markdown, o->junit, o->html, o->save_baseline};
  int rc = check_output(o->approve);
  for (size_t i = 0; rc == PC_OK && i < sizeof files / sizeof files[0]; i++)
    rc = check_output(files[i]);
  return rc;
}

/* The paths before anything is read: A and B not one file, no report over an input or another
 * report, no FIFO where a file is read whole (trust_cli.h). */
static int check_io(const pc_cli *c) {
  const pc_cli_outputs *o = &c->out;
  const char *files[] = {c->json, o->markdown, o->junit, o->html, o->save_baseline, o->approve};
  pc_cli_io io = {.a = c->path_a,
                  .b = c->path_b,
                  .reference = c->reference,
                  .baseline = o->baseline,
                  .approved = o->approved,
                  .approve = o->approve,
                  .tol_files = c->tol_files,
                  .n_tol_files = c->n_tol_files,
                  .outputs = files,
                  .noutputs = sizeof files / sizeof *files,
                  .allow_same = c->allow_same};
  return pc_cli_check_io(&io);
}

/* The --reference file must be readable: checked before A and B are compared, since R is read
 * only after that comparison; the library still reports a file that is not HDF5. */
static int check_reference(const char *path) {
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!path)
    return PC_OK;
  if (!f) {
    int e = errno;
    fputs("paritycheck: ", stderr);
    pc_cli_put_untrusted(path);
    fprintf(stderr, ": cannot read the reference file: %s\n", strerror(e));
    return PC_EIO;
  }
  fclose(f);
  return PC_OK;
}

int pc_cli_preflight(const pc_cli *c) {
  int rc = check_io(c);
  if (rc == PC_OK)
    rc = pc_cli_check_combinations(c);
  if (rc == PC_OK)
    rc = check_writable(c);
  if (rc == PC_OK)
    rc = check_reference(c->reference);
  return rc;
}
