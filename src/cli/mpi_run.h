/* One comparison over the ranks of an MPI job (docs/scale-out.md), in the CLI built with PC_MPI:
 * `mpirun -n N paritycheck A B ...` runs the same command line in every rank. Rank 0 makes the
 * plan (paritycheck/plan.h) and sends it to every rank; each rank runs its share and sends its
 * results to rank 0, which merges them and writes every report; the exit code is rank 0's.
 *
 * MPI lives in the comparison's child process (isolate.h), so that a rank that crashes or
 * stalls is seen by its own supervisor, which exits 2 and makes the launcher end the job. Every
 * wait on another rank beats the heart, so a rank that waits is never taken for a stalled one.
 *
 * Without PC_MPI, or when not started by an MPI launcher, pc_cli_mpi_start returns -1 and the
 * binary is the single-process one. */
#ifndef PC_CLI_MPI_RUN_H
#define PC_CLI_MPI_RUN_H

#include <paritycheck/compare.h>
#include <paritycheck/result.h>

#include <stdbool.h> /* bool */

#ifdef PC_MPI

/** In the comparison's process: start MPI when an MPI launcher started us, and return this
 * rank; -1 without a launcher (nothing started). */
int pc_cli_mpi_start(void);

/** Whether pc_cli_mpi_start started MPI. The launcher then gives each rank a pseudo-terminal
 * for standard output, not the user's: reports are written without colour. */
bool pc_cli_mpi_launched(void);

/** After pc_cli_mpi_start returned a rank: the run, as pc_compare_files gives it, made by every
 * rank together. On rank 0, *run is the run; on the others *run stays NULL once their share is
 * sent. A failure in any rank is reported by that rank and ends the job with exit 2. */
int pc_cli_mpi_compare(pc_run **run, const char *path_a, const char *path_b, const pc_options *o,
                       pc_error *err);

/** The end of the command in every rank: rank 0 tells the others its exit code `code`; MPI is
 * finalized; returns the code this process exits with (rank 0's own, 0 for the others). */
int pc_cli_mpi_end(int code);

#else

static inline int pc_cli_mpi_start(void) {
  return -1;
}

static inline bool pc_cli_mpi_launched(void) {
  return false;
}

static inline int pc_cli_mpi_compare(pc_run **run, const char *path_a, const char *path_b,
                                     const pc_options *o, pc_error *err) {
  return pc_compare_files(run, path_a, path_b, o, err);
}

static inline int pc_cli_mpi_end(int code) {
  return code;
}

#endif
#endif
