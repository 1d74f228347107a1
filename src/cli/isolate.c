/* Process isolation for the CLI (isolate.h). */
#include "isolate.h"

#include <errno.h>     /* errno, EINTR */
#include <fcntl.h>     /* fcntl, O_NONBLOCK */
#include <poll.h>      /* poll */
#include <signal.h>    /* kill, sigaction, sigprocmask, SIGKILL */
#include <stdatomic.h> /* atomic_llong */
#include <stdio.h>     /* fprintf */
#include <stdlib.h>    /* exit */
#include <string.h>    /* strsignal, memset */
#ifdef PC_HAVE_PRCTL
#include <sys/prctl.h> /* prctl, PR_SET_PDEATHSIG */
#endif
#include <sys/wait.h> /* waitpid */
#include <time.h>     /* time */
#include <unistd.h>   /* fork, pipe */

enum { EXIT_ERROR = 2, EXIT_SIGNAL_BASE = 128 };

static int heartbeat_fd = -1; /* the child's end of the pipe; -1 in the parent */

/* The signals that ask a run to stop: the parent passes them on to the child and exits 128 + N
 * once the child is gone (docs/robustness.md, "Faults"). */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { N_STOP = sizeof stop_signals / sizeof stop_signals[0] };

static volatile sig_atomic_t got_signal; /* the last stop signal the parent received */
static volatile sig_atomic_t n_signals;  /* how many it received */
static int wake_fd = -1;                 /* the write end of the parent's self-pipe */

static void on_stop_signal(int sig) {
  int saved = errno;
  got_signal = sig;
  n_signals++;
  char b = 1;
  if (write(wake_fd, &b, 1) < 0) { /* full: poll wakes up anyway */
  }
  errno = saved;
}

static void stop_signal_set(sigset_t *set) {
  sigemptyset(set);
  for (int i = 0; i < N_STOP; i++)
    sigaddset(set, stop_signals[i]);
}

/* What the child writes to the parent: a heartbeat, and the start and end of a hold, during
 * which the parent does not escalate to SIGKILL (supervise). */
enum { BEAT = 1, HOLD = 'H', RELEASE = 'R' };

static void tell_parent(char what) {
  if (heartbeat_fd >= 0 && write(heartbeat_fd, &what, 1) < 0) /* the parent is gone */
    heartbeat_fd = -1;
}

/* The parent hears of a hold only after it began, and of its end before it ends: it never
 * believes the child free to be killed while a temporary file may exist. */
void pc_cli_hold_stop_signals(bool hold) {
  sigset_t set;
  stop_signal_set(&set);
  if (hold) {
    sigprocmask(SIG_BLOCK, &set, NULL);
    tell_parent(HOLD);
  } else {
    tell_parent(RELEASE);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
  }
}

static bool is_stop_signal(int sig) {
  for (int i = 0; i < N_STOP; i++)
    if (stop_signals[i] == sig)
      return true;
  return false;
}

/* Any thread may beat: the report files are written side by side (report_files.h). A beat
 * lost to a race is harmless, since the next second sends another. */
void pc_cli_heartbeat(void) {
  static atomic_llong last;
  long long now = (long long)time(NULL);
  if (heartbeat_fd < 0 || atomic_exchange(&last, now) == now)
    return;
  tell_parent(BEAT);
}

/* The child's exit status as our exit code, or 2 with the reason when a signal ended it;
 * 128 + N when the run was stopped by signal N. */
static int child_result(int status, const char *what) {
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (got_signal || is_stop_signal(sig)) {
    int stop = got_signal ? got_signal : sig;
    fprintf(stderr, "paritycheck: interrupted by signal %d (%s)\n", stop, strsignal(stop));
    return EXIT_SIGNAL_BASE + stop;
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (sig == SIGKILL) { /* no crash: the kernel's out-of-memory killer, or someone's kill -9 */
    fprintf(stderr, "paritycheck: %s: the comparison was killed (signal %d, %s)\n", what, sig,
            strsignal(sig));
    return EXIT_ERROR;
  }
  fprintf(stderr,
          "paritycheck: %s: the comparison crashed (signal %d, %s), most likely inside the HDF5 "
          "library on a corrupt file (docs/robustness.md)\n",
          what, sig, strsignal(sig));
  return EXIT_ERROR;
}

/* The child as the parent sees it: how many stop signals it was sent, and whether it holds
 * them (it writes report files whose temporary files a SIGKILL would leave behind). */
typedef struct child {
  pid_t pid;
  sig_atomic_t passed_on;
  bool holding;
} child;

/* The first stop signal is passed on; a later one kills the child, but only while it does not
 * hold them: it then ends by the first one as soon as its files are in place (issue 30). */
static void pass_on(child *c) {
  if (c->passed_on == 0 && n_signals > 0) {
    kill(c->pid, got_signal);
    c->passed_on = 1;
  }
  if (c->passed_on > 0 && c->passed_on < n_signals && !c->holding) {
    kill(c->pid, SIGKILL);
    c->passed_on = n_signals;
  }
}

/* Reads what the child wrote, once poll says there is some (what is left wakes the next poll);
 * false once it closed its end. Called before pass_on, so that a hold already told is known. */
static bool hear(child *c, int fd) {
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == HOLD || buf[i] == RELEASE)
      c->holding = buf[i] == HOLD;
  return n > 0 || (n < 0 && errno == EINTR);
}

/* Whether standard output or standard error cannot take a write now (a pipe that is full, a
 * terminal stopped with ^S): the child then waits for their reader, `| less` that nobody pages
 * on, and no heartbeat comes; that is not a stall of the comparison (issue 30). A file or a
 * pipe with room is writable, so a child that loops elsewhere is still stopped. */
static bool output_blocked(void) {
  struct pollfd out[2] = {{STDOUT_FILENO, POLLOUT, 0}, {STDERR_FILENO, POLLOUT, 0}};
  if (poll(out, 2, 0) < 0)
    return false;
  for (int i = 0; i < 2; i++)
    if (!(out[i].revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)))
      return true;
  return false;
}

/* Wait for the child, reading heartbeats; stop it when none comes for stall_s seconds. A stop
 * signal is passed on to the child, which ends (after the report files it may be writing); a
 * second one kills it unless it is writing them. */
static int supervise(pid_t pid, int fd, int wake, unsigned stall_s, const char *what) {
  struct pollfd p[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
  int timeout_ms = stall_s ? (int)(stall_s > 2000000 ? 2000000000 : stall_s * 1000) : -1;
  char buf[64];
  child c = {pid, 0, false};
  for (;;) {
    int n = poll(p, wake >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR)
      break;
    if (n > 0 && p[0].revents && !hear(&c, fd))
      break; /* the child closed its end: it is exiting */
    pass_on(&c);
    if (n < 0)
      continue; /* EINTR */
    if (n == 0 && output_blocked())
      continue; /* the reader is slow: wait for it as long as it takes */
    if (n == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      fprintf(stderr,
              "paritycheck: %s: no progress for %u s, stopped (a file that makes HDF5 loop? "
              "--stall-timeout sets the limit; docs/robustness.md)\n",
              what, stall_s);
      return EXIT_ERROR;
    }
    if (wake >= 0 && p[1].revents)
      while (read(wake, buf, sizeof buf) > 0) /* non-blocking */
        ;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    pass_on(&c);
  return child_result(status, what);
}

/* The parent catches the stop signals that are not ignored (a run started with nohup, or in the
 * background of a shell without job control, keeps ignoring them) and wakes its poll through a
 * non-blocking self-pipe. */
static void catch_stop_signals(struct sigaction old[N_STOP], int wake[2]) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  wake[0] = wake[1] = -1;
  if (pipe(wake) != 0 || fcntl(wake[0], F_SETFL, O_NONBLOCK) != 0 ||
      fcntl(wake[1], F_SETFL, O_NONBLOCK) != 0 || fcntl(wake[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(wake[1], F_SETFD, FD_CLOEXEC) != 0) {
    if (wake[0] >= 0) {
      close(wake[0]);
      close(wake[1]);
    }
    wake[0] = wake[1] = -1;
  }
  wake_fd = wake[1];
  for (int i = 0; i < N_STOP; i++) {
    sigaction(stop_signals[i], NULL, &old[i]);
    if (wake_fd >= 0 && old[i].sa_handler != SIG_IGN)
      sigaction(stop_signals[i], &sa, NULL);
  }
}

static void restore_stop_signals(const struct sigaction old[N_STOP]) {
  for (int i = 0; i < N_STOP; i++)
    sigaction(stop_signals[i], &old[i], NULL);
}

int pc_cli_isolated(int (*fn)(void *), void *arg, unsigned stall_s, const char *what) {
  int fds[2], wake[2];
  if (pipe(fds) != 0)
    return fn(arg);
  fflush(NULL); /* nothing buffered may be written twice */
  /* Stop signals wait until the child has its own handling back (a child does not inherit the
   * parent's pending signals), and reach the parent right after the fork. */
  sigset_t stop, prev;
  struct sigaction old[N_STOP];
  stop_signal_set(&stop);
  sigprocmask(SIG_BLOCK, &stop, &prev);
  catch_stop_signals(old, wake);
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    restore_stop_signals(old);
    sigprocmask(SIG_SETMASK, &prev, NULL);
    if (wake[0] >= 0) {
      close(wake[0]);
      close(wake[1]);
    }
    return fn(arg);
  }
  if (pid == 0) {
    close(fds[0]);
    if (wake[0] >= 0) {
      close(wake[0]);
      close(wake[1]);
    }
    restore_stop_signals(old); /* the default: a stop signal ends the child */
    sigprocmask(SIG_SETMASK, &prev, NULL);
#ifdef PC_HAVE_PRCTL
    /* A supervisor killed outright (a CI timeout's SIGKILL) cannot stop us: the kernel does. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* it died before the line above */
      _exit(EXIT_ERROR);
#else /* no such request: a child whose supervisor was killed outright runs to its end */
    (void)parent;
#endif
    heartbeat_fd = fds[1];
    exit(fn(arg)); /* exit, not _exit: stdout and the report files must be flushed */
  }
  close(fds[1]);
  sigprocmask(SIG_SETMASK, &prev, NULL);
  int code = supervise(pid, fds[0], wake[0], stall_s, what);
  close(fds[0]);
  restore_stop_signals(old);
  if (wake[0] >= 0) {
    close(wake[0]);
    close(wake[1]);
  }
  wake_fd = -1;
  return code;
}
