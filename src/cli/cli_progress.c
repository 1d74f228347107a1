/* Progress of a comparison on a terminal (cli_progress.h). */
#include "cli_progress.h"
#include "isolate.h"

#include <stdio.h>  /* fprintf, fputs, fileno */
#include <unistd.h> /* isatty */

#define PROGRESS_AFTER_S 0.5 /* quick runs stay silent */

static double seconds_since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) + 1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

void pc_cli_progress_start(pc_cli_progress *p) {
  *p = (pc_cli_progress){{0, 0}, {0, 0}, isatty(fileno(stderr)) != 0, false};
  clock_gettime(CLOCK_MONOTONIC, &p->start);
}

void pc_cli_progress_show(void *user, uint64_t done, uint64_t total) {
  pc_cli_progress *p = user;
  pc_cli_heartbeat();
  if (!p->tty || total == 0) /* no figure: a file's metadata is being read */
    return;
  /* Quick runs stay silent; long ones update a few times a second. */
  if (seconds_since(&p->start) < PROGRESS_AFTER_S || (p->shown && seconds_since(&p->last) < 0.2))
    return;
  clock_gettime(CLOCK_MONOTONIC, &p->last);
  double mib = 1024.0 * 1024.0, secs = seconds_since(&p->start);
  fprintf(stderr, "\rparitycheck: %.1f of %.1f MiB (%.0f MiB/s)\033[K", (double)done / mib,
          (double)total / mib, secs > 0 ? (double)done / mib / secs : 0.0);
  p->shown = true;
}

void pc_cli_progress_end(const pc_cli_progress *p) {
  if (p->shown)
    fputs("\r\033[K", stderr);
}
