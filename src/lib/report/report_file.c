/* Report files written whole or not at all (report_file.h). */
#define _XOPEN_SOURCE 700 /* realpath, fchown */
#include "report_file.h"

#include "pc_internal.h"

#include <errno.h>     /* errno */
#include <fcntl.h>     /* open, O_EXCL */
#include <stdatomic.h> /* atomic_ulong, atomic_fetch_add */
#include <stdint.h>    /* uint64_t, uintptr_t */
#include <stdio.h>     /* snprintf, fdopen, fflush */
#include <stdlib.h>    /* malloc, free, realpath */
#include <string.h>    /* strcmp, strlen, strrchr, strerror */
#include <sys/stat.h>  /* stat, lstat, fchmod */
#include <time.h>      /* clock_gettime */
#include <unistd.h>    /* fsync, unlink, getpid, fchown */

/* A temporary name's six characters: different in each process, thread and call (O_EXCL makes
 * a clash harmless; it is only tried again). */
static void temp_suffix(char *out) {
  static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static atomic_ulong counter; /* report files may be written on several threads at once */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t x = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^
               (uint64_t)(uintptr_t)&now ^
               ((uint64_t)(atomic_fetch_add(&counter, 1) + 1) * 0x9E3779B97F4A7C15u);
  x ^= x >> 31; /* splitmix64's finaliser */
  x *= 0xBF58476D1CE4E5B9u;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBu;
  x ^= x >> 31;
  for (int k = 0; k < 6; k++, x /= sizeof chars - 1)
    out[k] = chars[x % (sizeof chars - 1)];
  out[6] = '\0';
}

/* Creates ".NAME.XXXXXX" beside dest with the mode a new file gets (0666 less the umask, applied
 * by open itself), or an existing file's mode and owner where it has one (as far as this
 * process may set them); -1 when none can be made. */
static int open_temp(char **tmp, const char *dest, const struct stat *old) {
  const char *slash = strrchr(dest, '/');
  size_t dir_len = slash ? (size_t)(slash - dest) + 1 : 0, len = strlen(dest);
  char *name = malloc(len + 9); /* ".", ".XXXXXX", NUL */
  if (!name)
    return -1;
  for (int attempt = 0; attempt < 100; attempt++) {
    char suffix[7];
    temp_suffix(suffix);
    snprintf(name, len + 9, "%.*s.%s.%s", (int)dir_len, dest, dest + dir_len, suffix);
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      if (old) {
        if (fchown(fd, old->st_uid, old->st_gid) != 0) { /* only root may give a file away */
        }
        (void)fchmod(fd, old->st_mode & 07777);
      }
      *tmp = name;
      return fd;
    }
    if (errno != EEXIST)
      break;
  }
  free(name);
  return -1;
}

/* The file that the report replaces: path itself, or the file a symlink points to (renaming
 * over the link would turn it into a file). NULL when it is written directly. */
static char *atomic_dest(const char *path, struct stat *st, bool *exists) {
  struct stat lst;
  *exists = stat(path, st) == 0;
  if (*exists && !S_ISREG(st->st_mode))
    return NULL; /* a device or a FIFO: it cannot be replaced, only written */
  if (!*exists && (errno != ENOENT || lstat(path, &lst) == 0))
    return NULL; /* a dangling symlink, a path through a file: fopen says what it makes of it */
  if (*exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
    return realpath(path, NULL);
  return pc_strdup(path);
}

int pc_report_open(pc_report_file *rf, const char *path, pc_error *err) {
  *rf = (pc_report_file){NULL, path, NULL, NULL, false, NULL};
  if (strcmp(path, "-") == 0) {
    rf->f = stdout;
    return PC_OK;
  }
  struct stat st;
  bool exists;
  errno = 0;
  rf->dest = atomic_dest(path, &st, &exists);
  int fd = rf->dest ? open_temp(&rf->tmp, rf->dest, exists ? &st : NULL) : -1;
  if (fd >= 0 && !(rf->f = fdopen(fd, "w"))) {
    int e = errno;
    close(fd);
    unlink(rf->tmp);
    errno = e;
  }
  /* Out of memory is an error, not a reason to give up writing atomically. */
  if (!rf->f && errno == ENOMEM) {
    free(rf->dest);
    free(rf->tmp);
    rf->dest = rf->tmp = NULL;
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", path);
  }
  if (!rf->f) { /* written directly: no temporary file could be made beside it */
    free(rf->dest);
    free(rf->tmp);
    rf->dest = rf->tmp = NULL;
    rf->f = fopen(path, "w");
  }
  if (!rf->f)
    return pc_error_set(err, PC_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
  return PC_OK;
}

int pc_report_close(pc_report_file *rf, const char *what, pc_error *err) {
  bool to_stdout = rf->f == stdout;
  /* A stream that failed earlier fails its flush again (what is buffered stays), with the
   * reason; the errno of the earlier failure otherwise. */
  int seen = errno;
  errno = 0;
  int e = fflush(rf->f) != 0 ? errno : 0;
  if (!e && (ferror(rf->f) || rf->failed))
    e = seen ? seen : EIO;
  /* A file system without fsync for regular files (EINVAL) has nothing to make durable. */
  if (!e && rf->tmp && fsync(fileno(rf->f)) != 0 && errno != EINVAL)
    e = errno;
  if (!to_stdout && fclose(rf->f) != 0 && !e)
    e = errno;
  pc_error why = {PC_OK, ""};
  bool refused = !e && rf->tmp && rf->verify && rf->verify(rf->tmp, &why) < 0;
  if (!e && !refused && rf->tmp && rename(rf->tmp, rf->dest) != 0)
    e = errno;
  if (refused)
    unlink(rf->tmp);
  if (e && rf->tmp)
    unlink(rf->tmp);
  free(rf->tmp);
  free(rf->dest);
  rf->f = NULL;
  rf->tmp = rf->dest = NULL;
  if (e)
    return pc_error_set(err, PC_EIO, "%s: cannot write %s: %s",
                        to_stdout ? "standard output" : rf->path, what, strerror(e));
  if (refused)
    return pc_error_set(err, PC_EIO, "%s: %s not written, it would not read back (%s)", rf->path,
                        what, why.message);
  return PC_OK;
}
