/* One comparison over the ranks of an MPI job (mpi_run.h). Messages: the plan, broadcast from
 * rank 0 (its size, then its bytes); each other rank's results, sent to rank 0 (TAG_SIZE, then
 * TAG_DATA); rank 0's exit code, broadcast at the end. Bytes go in pieces of at most 1 GiB,
 * since MPI counts are ints. */
#include "mpi_run.h"
#include "isolate.h"

#include <paritycheck/plan.h>

#include <mpi.h>

#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */
#include <stdio.h>   /* fprintf */
#include <stdlib.h>  /* getenv, malloc, free */
#include <string.h>  /* memcpy, strnlen */
#include <time.h>    /* nanosleep */

enum { TAG_SIZE = 1, TAG_DATA = 2 };
#define PIECE ((uint64_t)1 << 30)

static int rank = -1, nranks = 1;
static bool failed; /* this rank could not do its part: it exits 2 without waiting for others */

/* Sets err (the library's error record, as its functions do) and returns rc. */
static int set_error(pc_error *err, int rc, const char *text) {
  size_t n = strnlen(text, sizeof err->message - 1); /* a long message is cut */
  err->code = (pc_status)rc;
  memcpy(err->message, text, n);
  err->message[n] = '\0';
  return rc;
}

/* err's message with "WHAT WHO: " in front. */
static int prefix(pc_error *err, int rc, const char *what, int who) {
  char text[PC_ERROR_MESSAGE_MAX + 64];
  snprintf(text, sizeof text, "%s %d: %s", what, who, err->message);
  return set_error(err, rc, text);
}

int pc_cli_mpi_start(void) {
  if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK"))
    return -1;
  int provided;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  return rank;
}

bool pc_cli_mpi_launched(void) {
  return rank >= 0;
}

/* Waits for req, beating the heart (isolate.h) every few milliseconds: waiting on another rank
 * is not a stall of ours. */
static void wait_for(MPI_Request *req) {
  struct timespec nap = {0, 2000000};
  int done = 0;
  for (MPI_Test(req, &done, MPI_STATUS_IGNORE); !done; MPI_Test(req, &done, MPI_STATUS_IGNORE)) {
    pc_cli_heartbeat();
    nanosleep(&nap, NULL);
  }
}

/* Rank 0's bytes to every rank: *bytes is malloc'd on the others (NULL when empty). */
static int broadcast(void **bytes, uint64_t *size) {
  MPI_Request req;
  MPI_Ibcast(size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req);
  wait_for(&req);
  if (rank != 0 && !(*bytes = malloc(*size ? *size : 1)))
    return PC_ENOMEM;
  for (uint64_t at = 0; at < *size; at += PIECE) {
    uint64_t n = *size - at < PIECE ? *size - at : PIECE;
    MPI_Ibcast((char *)*bytes + at, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_for(&req);
  }
  return PC_OK;
}

static void send_results(const void *bytes, uint64_t size) {
  MPI_Request req;
  MPI_Isend(&size, 1, MPI_UINT64_T, 0, TAG_SIZE, MPI_COMM_WORLD, &req);
  wait_for(&req);
  for (uint64_t at = 0; at < size; at += PIECE) {
    uint64_t n = size - at < PIECE ? size - at : PIECE;
    MPI_Isend((const char *)bytes + at, (int)n, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &req);
    wait_for(&req);
  }
}

/* The next rank's results to arrive, whichever it is (malloc'd into *bytes). */
static int receive_results(void **bytes, uint64_t *size, int *from) {
  MPI_Status st;
  MPI_Request req;
  int ready = 0;
  struct timespec nap = {0, 2000000};
  for (MPI_Iprobe(MPI_ANY_SOURCE, TAG_SIZE, MPI_COMM_WORLD, &ready, &st); !ready;
       MPI_Iprobe(MPI_ANY_SOURCE, TAG_SIZE, MPI_COMM_WORLD, &ready, &st)) {
    pc_cli_heartbeat();
    nanosleep(&nap, NULL);
  }
  *from = st.MPI_SOURCE;
  MPI_Recv(size, 1, MPI_UINT64_T, *from, TAG_SIZE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (!(*bytes = malloc(*size ? *size : 1)))
    return PC_ENOMEM;
  for (uint64_t at = 0; at < *size; at += PIECE) {
    uint64_t n = *size - at < PIECE ? *size - at : PIECE;
    MPI_Irecv((char *)*bytes + at, (int)n, MPI_BYTE, *from, TAG_DATA, MPI_COMM_WORLD, &req);
    wait_for(&req);
  }
  return PC_OK;
}

/* This rank's share of the plan; on rank 0 merged at once, elsewhere sent to rank 0. */
static int run_share(pc_plan *plan, const void *bytes, uint64_t size, const char *path_a,
                     const char *path_b, const pc_options *o, pc_error *err) {
  void *results = NULL;
  size_t rsize = 0;
  int rc =
      pc_plan_run(&results, &rsize, bytes, (size_t)size, (unsigned)rank, path_a, path_b, o, err);
  if (rc == PC_OK && rank == 0)
    rc = pc_plan_merge(plan, results, rsize, err);
  else if (rc == PC_OK)
    send_results(results, rsize);
  free(results);
  return rc;
}

/* Rank 0, after its own share: every other rank's results, as they come. */
static int gather(pc_plan *plan, pc_error *err) {
  int rc = PC_OK;
  for (int k = 1; rc == PC_OK && k < nranks; k++) {
    void *bytes = NULL;
    uint64_t size = 0;
    int from = 0;
    if (receive_results(&bytes, &size, &from) < 0)
      rc = set_error(err, PC_ENOMEM, "out of memory");
    else if ((rc = pc_plan_merge(plan, bytes, (size_t)size, err)) < 0)
      prefix(err, rc, "results of rank", from);
    free(bytes);
  }
  return rc;
}

int pc_cli_mpi_compare(pc_run **run, const char *path_a, const char *path_b, const pc_options *o,
                       pc_error *err) {
  pc_plan *plan = NULL;
  const void *mine = NULL;
  void *bytes = NULL;
  size_t plan_size = 0;
  *run = NULL;
  if (nranks == 1)
    return pc_compare_files(run, path_a, path_b, o, err);
  /* A plan that cannot be made ends rank 0 with exit 2, and the launcher the job. */
  int rc = rank == 0 ? pc_plan_make(&plan, path_a, path_b, o, (unsigned)nranks, err) : PC_OK;
  if (rc < 0)
    return rc;
  if (rank == 0)
    pc_plan_bytes(plan, &mine, &plan_size);
  uint64_t size = plan_size;
  bytes = (void *)mine;
  if (broadcast(&bytes, &size) < 0)
    rc = set_error(err, PC_ENOMEM, "out of memory");
  if (rc == PC_OK)
    rc = run_share(plan, bytes, size, path_a, path_b, o, err);
  if (rank != 0)
    free(bytes);
  if (rc == PC_OK && rank == 0 && (rc = gather(plan, err)) == PC_OK)
    rc = pc_plan_finish(plan, run, err);
  pc_plan_free(plan);
  failed = rc < 0;
  if (rc < 0 && rank != 0)
    prefix(err, rc, "rank", rank);
  return rc;
}

int pc_cli_mpi_end(int code) {
  if (rank < 0 || failed) /* exit 2 at once: the launcher then ends every rank */
    return code;
  if (nranks > 1) {
    MPI_Request req;
    MPI_Ibcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    wait_for(&req);
  }
  MPI_Finalize();
  return rank == 0 ? code : 0;
}
