/* Process isolation for the CLI (isolate.h). */
#include "isolate.h"

#include <errno.h>  /* errno, EINTR */
#include <poll.h>   /* poll */
#include <signal.h> /* kill, SIGKILL */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* exit */
#include <string.h> /* strsignal */
#ifdef __linux__
#include <sys/prctl.h> /* prctl, PR_SET_PDEATHSIG */
#endif
#include <sys/wait.h> /* waitpid */
#include <time.h>     /* time */
#include <unistd.h>   /* fork, pipe */

enum { EXIT_ERROR = 2 };

static int heartbeat_fd = -1; /* the child's end of the pipe; -1 in the parent */

void pc_cli_heartbeat(void) {
  static time_t last;
  time_t now = time(NULL);
  if (heartbeat_fd < 0 || now == last)
    return;
  last = now;
  char beat = 1;
  if (write(heartbeat_fd, &beat, 1) < 0) /* the parent is gone: nobody to tell */
    heartbeat_fd = -1;
}

/* The child's exit status as our exit code, or 2 with the reason when a signal ended it. */
static int child_result(int status, const char *what) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  fprintf(stderr,
          "paritycheck: %s: the comparison crashed (signal %d, %s), most likely inside the HDF5 "
          "library on a corrupt file (docs/robustness.md)\n",
          what, sig, strsignal(sig));
  return EXIT_ERROR;
}

/* Wait for the child, reading heartbeats; stop it when none comes for stall_s seconds. */
static int supervise(pid_t pid, int fd, unsigned stall_s, const char *what) {
  struct pollfd p = {fd, POLLIN, 0};
  int timeout_ms = stall_s ? (int)(stall_s > 2000000 ? 2000000000 : stall_s * 1000) : -1;
  char buf[64];
  for (;;) {
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      fprintf(stderr,
              "paritycheck: %s: no progress for %u s, stopped (a file that makes HDF5 loop? "
              "--stall-timeout sets the limit; docs/robustness.md)\n",
              what, stall_s);
      return EXIT_ERROR;
    }
    if (n < 0 || read(fd, buf, sizeof buf) <= 0)
      break; /* the child closed its end: it is exiting */
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  return child_result(status, what);
}

int pc_cli_isolated(int (*fn)(void *), void *arg, unsigned stall_s, const char *what) {
  int fds[2];
  if (pipe(fds) != 0)
    return fn(arg);
  fflush(NULL); /* nothing buffered may be written twice */
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return fn(arg);
  }
  if (pid == 0) {
    close(fds[0]);
#ifdef __linux__
    /* A supervisor killed outright (a CI timeout's SIGKILL) cannot stop us: the kernel does. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* it died before the line above */
      _exit(EXIT_ERROR);
#else
    (void)parent;
#endif
    heartbeat_fd = fds[1];
    exit(fn(arg)); /* exit, not _exit: stdout and the report files must be flushed */
  }
  close(fds[1]);
  int code = supervise(pid, fds[0], stall_s, what);
  close(fds[0]);
  return code;
}
