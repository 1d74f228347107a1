/* Read-error injection (docs/robustness.md, "Faults"): an LD_PRELOAD library that makes the Kth
 * read of an input file fail with EIO. It stands in front of libc's read, pread and pread64, so
 * it catches paritycheck's own direct reads (src/lib/compare/stream.c) and HDF5's (its sec2
 * driver reads with pread) alike; reads that libc makes inside itself (fread of a tolerance file)
 * do not pass through it.
 *
 *   PC_FAIL_READ_MATCH=TEXT  only reads of files whose path contains TEXT are counted
 *   PC_FAIL_READ=K           the Kth counted read (1-based) fails with EIO; later ones succeed
 *   PC_STALL_READ=K          the Kth counted read never returns (a rank that hangs: the MPI
 *                            tests stop or kill it there)
 *   PC_READ_LOG=FILE         at exit, append "PID COUNT" to FILE, and at the failed read
 *                            "fail PATH OFFSET SIZE" (OFFSET -1 for read: the file position)
 *
 * The count is inherited across fork(), so the comparison's child (src/cli/isolate.c) goes on
 * from the parent's reads. */
#define _GNU_SOURCE    /* RTLD_NEXT */
#include <dlfcn.h>     /* dlsym */
#include <errno.h>     /* errno, EIO */
#include <fcntl.h>     /* open */
#include <stdatomic.h> /* atomic_fetch_add */
#include <stdbool.h>   /* bool */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* getenv, strtoull, atexit */
#include <string.h>    /* strstr, strlen, memcpy */
#include <sys/stat.h>  /* fstat */
#include <unistd.h>    /* readlink, write */

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);

static atomic_ullong count;
static unsigned long long fail_at;  /* 0: never */
static unsigned long long stall_at; /* 0: never */
static const char *match;

static void log_line(const char *line) {
  const char *log = getenv("PC_READ_LOG");
  int fd = log && *log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
  if (fd < 0)
    return;
  if (write(fd, line, strlen(line)) < 0) { /* a test aid: nothing to do */
  }
  close(fd);
}

static void report_count(void) {
  char line[64];
  snprintf(line, sizeof line, "%ld %llu\n", (long)getpid(), (unsigned long long)count);
  log_line(line);
}

__attribute__((constructor)) static void read_fail_init(void) {
  const char *at = getenv("PC_FAIL_READ");
  const char *stall = getenv("PC_STALL_READ");
  fail_at = at ? strtoull(at, NULL, 10) : 0;
  stall_at = stall ? strtoull(stall, NULL, 10) : 0;
  match = getenv("PC_FAIL_READ_MATCH");
  atexit(report_count);
}

/* The path of fd when it is a regular file whose path contains PC_FAIL_READ_MATCH. */
static bool counted(int fd, char *path, size_t size) {
  struct stat st;
  char link[64];
  if (!match || !*match || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, size - 1);
  if (n < 0)
    return false;
  path[n] = '\0';
  return strstr(path, match) != NULL;
}

/* libc's own function of that name (the POSIX way: dlsym returns an object pointer). */
static void next_symbol(const char *name, void *fn, size_t size) {
  void *p = dlsym(RTLD_NEXT, name);
  memcpy(fn, &p, size);
}

/* True when this read is the one to fail (errno is then EIO). */
static bool should_fail(int fd, long long offset, size_t size) {
  char path[4096], line[4200];
  int saved = errno;
  unsigned long long k = counted(fd, path, sizeof path) ? atomic_fetch_add(&count, 1) + 1 : 0;
  while (k && k == stall_at)
    pause();
  if (!k || k != fail_at) {
    errno = saved;
    return false;
  }
  snprintf(line, sizeof line, "fail %s %lld %zu\n", path, offset, size);
  log_line(line);
  errno = EIO;
  return true;
}

ssize_t read(int fd, void *buf, size_t size) {
  static read_fn real;
  if (!real)
    next_symbol("read", &real, sizeof real);
  return should_fail(fd, -1, size) ? -1 : real(fd, buf, size);
}

ssize_t pread(int fd, void *buf, size_t size, off_t offset) {
  static pread_fn real;
  if (!real)
    next_symbol("pread", &real, sizeof real);
  return should_fail(fd, (long long)offset, size) ? -1 : real(fd, buf, size, offset);
}

ssize_t pread64(int fd, void *buf, size_t size, off_t offset) {
  static pread_fn real;
  if (!real)
    next_symbol("pread64", &real, sizeof real);
  return should_fail(fd, (long long)offset, size) ? -1 : real(fd, buf, size, offset);
}
