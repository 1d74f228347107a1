/* Progress of a comparison on a terminal: bytes read of both files, and the rate, a few times a
 * second; on any stderr, a heartbeat for the supervisor (isolate.h). */
#ifndef PC_CLI_PROGRESS_H
#define PC_CLI_PROGRESS_H

#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */
#include <time.h>    /* struct timespec */

typedef struct pc_cli_progress {
  struct timespec start, last;
  bool tty; /* stderr is a terminal: show it, else only beat the heart */
  bool shown;
} pc_cli_progress;

/** Starts the clock; the line is shown only when stderr is a terminal (p->tty, which the
 * caller may clear, as MPI does for every rank but 0). */
void pc_cli_progress_start(pc_cli_progress *p);

/** The library's progress callback (pc_options.progress), with user a pc_cli_progress: beats the
 * heart, and after half a second updates the line at most five times a second. */
void pc_cli_progress_show(void *user, uint64_t done, uint64_t total);

/** Clears the line when one was shown, so that what follows starts on a clean line. */
void pc_cli_progress_end(const pc_cli_progress *p);

#endif
