/* The CLI's checks of its paths and the settings it records (trust_cli.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "trust_cli.h"

#include <errno.h>    /* errno */
#include <limits.h>   /* PATH_MAX */
#include <stdio.h>    /* fprintf, snprintf */
#include <stdlib.h>   /* realpath, malloc, getenv */
#include <string.h>   /* strcmp, strrchr, strerror */
#include <sys/stat.h> /* stat, S_ISREG, S_ISDIR */

/* A path on stderr as every message of the CLI writes it: escaped (docs/reports.md). */
static void put_path(const char *path) {
  pc_escape_put(stderr, path, strlen(path), PC_ESCAPE_TERMINAL);
}

static int refuse(const char *path, const char *why, const char *other) {
  fputs("paritycheck: ", stderr);
  put_path(path);
  fputs(": ", stderr);
  fputs(why, stderr);
  if (other) {
    fputs(" ", stderr);
    put_path(other);
  }
  fputs("\nTry 'paritycheck --help'.\n", stderr);
  return PC_EUSAGE;
}

static bool same_inode(const struct stat *x, const struct stat *y) {
  return x->st_dev == y->st_dev && x->st_ino == y->st_ino;
}

static int check_same(const pc_cli_io *io) {
  struct stat sa, sb;
  if (io->allow_same || stat(io->a, &sa) != 0 || stat(io->b, &sb) != 0 || !same_inode(&sa, &sb))
    return PC_OK;
  fputs("paritycheck: A and B are the same ", stderr);
  fputs(S_ISDIR(sa.st_mode) ? "folder" : "file", stderr);
  fputs(" (", stderr);
  put_path(io->a);
  fputs(" and ", stderr);
  put_path(io->b);
  fputs("): B would be compared with itself; --allow-same if that is meant\n", stderr);
  return PC_EUSAGE;
}

/* A file read whole that exists must be a regular file: opening a FIFO would wait for a
 * writer. A missing one is left to its reader, which names it. `folder_ok`: a folder is
 * accepted too (a reference for a folder run: its files are opened one by one, each checked as
 * the run's own are). */
static int check_regular_or(const char *path, const char *what, bool folder_ok) {
  struct stat st;
  char why[128];
  if (!path || stat(path, &st) != 0 || S_ISREG(st.st_mode) || (folder_ok && S_ISDIR(st.st_mode)))
    return PC_OK;
  snprintf(why, sizeof why, "not a regular file (%s is read whole)", what);
  return refuse(path, why, NULL);
}

static int check_regular(const char *path, const char *what) {
  return check_regular_or(path, what, false);
}

enum { WHERE_MAX = 2 * PATH_MAX };

/* Where path would be written, spelt one way: its resolved path when it exists, else its
 * resolved folder and its name; "" when neither resolves (left to the writer). */
static void where(const char *path, char out[WHERE_MAX]) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  out[0] = '\0';
  if (realpath(path, out))
    return;
  out[0] = '\0';
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (n >= sizeof dir)
    return;
  snprintf(dir, sizeof dir, "%.*s", (int)n, slash ? (n ? path : "/") : ".");
  char resolved[PATH_MAX];
  if (realpath(dir, resolved))
    snprintf(out, WHERE_MAX, "%s/%s", resolved, slash ? slash + 1 : path);
}

/* Whether output `out` names the same file as `other` (an input or another output). A device
 * (/dev/null, /dev/full) takes any number of reports and holds no input. */
static bool aliases(const char *out, const char *other) {
  struct stat so, sx;
  char wo[WHERE_MAX], wx[WHERE_MAX];
  if (!other || strcmp(other, "-") == 0)
    return false;
  if (stat(out, &so) == 0 && !S_ISREG(so.st_mode))
    return false;
  if (stat(out, &so) == 0 && stat(other, &sx) == 0)
    return same_inode(&so, &sx);
  where(out, wo);
  where(other, wx);
  return *wo && strcmp(wo, wx) == 0;
}

static int check_output(const pc_cli_io *io, size_t k) {
  const char *out = io->outputs[k];
  const char *inputs[] = {io->a, io->b, io->reference, io->baseline, io->approved};
  const char *names[] = {"A", "B", "the reference", "the baseline", "the approval file"};
  char why[96];
  for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++)
    if (aliases(out, inputs[i])) {
      snprintf(why, sizeof why, "a report path that is an input (%s):", names[i]);
      return refuse(out, why, inputs[i]);
    }
  for (size_t i = 0; i < io->n_tol_files; i++)
    if (aliases(out, io->tol_files[i]))
      return refuse(out, "a report path that is an input (a tolerance file):", io->tol_files[i]);
  for (size_t i = 0; i < k; i++)
    if (io->outputs[i] && aliases(out, io->outputs[i]))
      return refuse(out, "two reports would be written to one file:", io->outputs[i]);
  return PC_OK;
}

int pc_cli_check_io(const pc_cli_io *io) {
  int rc = check_same(io);
  if (rc == PC_OK)
    rc = check_regular_or(io->reference, "--reference", true);
  if (rc == PC_OK)
    rc = check_regular(io->baseline, "--baseline");
  if (rc == PC_OK)
    rc = check_regular(io->approved, "--approved");
  if (rc == PC_OK)
    rc = check_regular(io->approve, "--approve");
  for (size_t k = 0; rc == PC_OK && k < io->noutputs; k++)
    if (io->outputs[k] && strcmp(io->outputs[k], "-") != 0)
      rc = check_output(io, k);
  return rc;
}

pc_report_setting *pc_cli_settings(const pc_cli_tols *tols, bool trust_b, bool allow_same,
                                   size_t *n) {
  pc_report_setting *s = malloc((tols->nfiles + 3) * sizeof *s);
  const char *env = getenv("PARITYCHECK_TOLERANCES");
  *n = 0;
  if (!s)
    return NULL;
  for (size_t i = 0; i < tols->nfiles; i++)
    s[(*n)++] = (pc_report_setting){"tolerance file", tols->files[i]};
  if (env && *env)
    s[(*n)++] = (pc_report_setting){"PARITYCHECK_TOLERANCES", env};
  s[(*n)++] = (pc_report_setting){
      "trust", trust_b ? "--trust-b-metadata: B's tolerance-affecting attributes are used where "
                         "A has none"
                       : "A's metadata only: B's tolerance-affecting attributes are ignored"};
  if (allow_same)
    s[(*n)++] = (pc_report_setting){"allow same", "--allow-same: A and B may be one file"};
  return s;
}
