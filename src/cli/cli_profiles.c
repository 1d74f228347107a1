/* The tolerance layers of a command (cli_profiles.h): finding and loading the profile, then the
 * -t files. */
#include "cli_profiles.h"
#include "cli_diag.h"
#include "cli_suggest.h"

#include <dirent.h>  /* opendir, readdir: the profiles on offer */
#include <errno.h>   /* errno, ENOENT */
#include <stdbool.h> /* bool */
#ifdef __APPLE__
#include <mach-o/dyld.h> /* _NSGetExecutablePath */
#endif
#include <stdio.h>    /* fprintf, snprintf */
#include <stdlib.h>   /* getenv, qsort */
#include <string.h>   /* strcmp, strrchr, strspn */
#include <sys/stat.h> /* stat */
#include <unistd.h>   /* readlink */

/* The running binary's path into exe ("" when the system does not say): Linux's /proc/self/exe,
 * macOS's _NSGetExecutablePath; elsewhere nothing, and --profile uses the source tree's. */
static void exe_path(char *exe, size_t size) {
  exe[0] = '\0';
#if defined(__linux__)
  ssize_t n = readlink("/proc/self/exe", exe, size - 1);
  exe[n > 0 ? n : 0] = '\0';
#elif defined(__APPLE__)
  uint32_t n = (uint32_t)size;
  if (_NSGetExecutablePath(exe, &n) != 0)
    exe[0] = '\0';
#else
  (void)size;
#endif
}

/* The folder of the profiles: $PARITYCHECK_TOLERANCES; else PC_TOLERANCES_REL beside the
 * binary, where an install puts them (PREFIX/bin/../share/paritycheck/tolerances), so that an
 * installed or moved prefix finds its own; else the source tree's (PC_TOLERANCES_DIR, compiled
 * in, for a binary run from its build folder). */
static const char *profile_dir(void) {
  static char installed[4096];
  const char *env = getenv("PARITYCHECK_TOLERANCES");
  if (env && *env)
    return env;
  char exe[4096];
  exe_path(exe, sizeof exe);
  const char *slash = strrchr(exe, '/');
  struct stat st;
  if (slash &&
      (size_t)snprintf(installed, sizeof installed, "%.*s/%s", (int)(slash - exe), exe,
                       PC_TOLERANCES_REL) < sizeof installed &&
      stat(installed, &st) == 0 && S_ISDIR(st.st_mode))
    return installed;
  return PC_TOLERANCES_DIR;
}

/* A profile name is a file name without its .yaml: no '/' and no leading '.'. */
static bool is_profile_name(const char *name) {
  return *name && *name != '.' &&
         strspn(name, "abcdefghijklmnopqrstuvwxyz"
                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == strlen(name);
}

static int compare_names(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* "unknown profile" with the names of dir's *.yaml files, sorted, and the one probably meant.
 * The PARITYCHECK_TOLERANCES hint only where it may help: no name is close, and the variable
 * is not set already (the message names the folder it gave). */
static int unknown_profile(const char *name, const char *dir) {
  enum { MAX_LISTED = 64 };
  static const char ext[] = ".yaml";
  char names[MAX_LISTED][256];
  const char *sorted[MAX_LISTED];
  size_t n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && n < MAX_LISTED && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len > sizeof ext - 1 && len - (sizeof ext - 1) < sizeof names[0] && e->d_name[0] != '.' &&
        strcmp(e->d_name + len - (sizeof ext - 1), ext) == 0) {
      snprintf(names[n], sizeof names[n], "%.*s", (int)(len - (sizeof ext - 1)), e->d_name);
      sorted[n] = names[n];
      n++;
    }
  }
  if (d)
    closedir(d);
  qsort(sorted, n, sizeof sorted[0], compare_names);
  fprintf(stderr, "paritycheck: unknown profile '%s' (in ", name); /* a name is [A-Za-z0-9._-] */
  pc_cli_put_untrusted(dir);
  fputc(':', stderr);
  for (size_t i = 0; i < n; i++) {
    fprintf(stderr, "%s ", i ? "," : "");
    pc_cli_put_untrusted(sorted[i]);
  }
  fputs(n ? ")\n" : " none)\n", stderr);
  const char *meant = pc_cli_closest_name(name, sorted, n);
  const char *env = getenv("PARITYCHECK_TOLERANCES");
  if (meant) {
    fputs("paritycheck: did you mean '", stderr);
    pc_cli_put_untrusted(meant);
    fputs("'?\n", stderr);
  } else if (!env || !*env) {
    fputs("paritycheck: hint: set PARITYCHECK_TOLERANCES to the folder of the profiles (an "
          "install keeps them in PREFIX/share/paritycheck/tolerances)\n",
          stderr);
  }
  return PC_EUSAGE;
}

/* The profile's file loaded into tols, and added to the record. */
static int load_profile(const char *name, pc_tolset *tols, pc_cli_tols *rec) {
  pc_error err;
  char path[4096];
  const char *dir = profile_dir();
  if (!is_profile_name(name))
    return pc_cli_usage_error("--profile wants a name from the profile folder, not a path", name);
  if ((size_t)snprintf(path, sizeof path, "%s/%s.yaml", dir, name) >= sizeof path)
    return pc_cli_usage_error("profile path too long", name);
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT)
    return unknown_profile(name, dir);
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return pc_cli_usage_error("--profile: not a regular file", path);
  char layer[300];
  snprintf(layer, sizeof layer, "profile %s", name);
  return pc_cli_tols_load(rec, tols, layer, path, &err) < 0 ? pc_cli_fail(&err) : PC_OK;
}

int pc_cli_load_tolerances(const char *profile, const char *const *files, size_t nfiles,
                           pc_tolset *tols, pc_cli_tols *rec) {
  pc_error err;
  pc_cli_tols_init(rec);
  int rc = profile ? load_profile(profile, tols, rec) : PC_OK;
  for (size_t i = 0; rc == PC_OK && i < nfiles; i++)
    if (pc_cli_tols_load(rec, tols, files[i], files[i], &err) < 0)
      rc = pc_cli_fail(&err);
  return rc;
}
