/* The tolerance set of a run as the CLI loaded it, for the record of its gates (pc_tol_record,
 * baseline.h): the layers' names and a hash of their content. */
#ifndef PC_CLI_TOL_RECORD_H
#define PC_CLI_TOL_RECORD_H

#include <paritycheck/paritycheck.h>

#include <stdint.h> /* uint64_t */

#include <stddef.h> /* size_t */

typedef struct pc_cli_tols {
  char source[1024]; /* "built-in defaults of paritycheck 0.1.0 + profile tf32 + strict.yaml" */
  char digest[32];   /* "fnv1a64:" and 16 hex digits of the hash */
  uint64_t hash;
  char **files; /* each file layer as "PATH sha256:HEX" (the reports' settings), malloc'd */
  size_t nfiles;
} pc_cli_tols;

/** Starts the record with the built-in defaults, which the version names. */
void pc_cli_tols_init(pc_cli_tols *t);

/** Frees what the record holds (t stays initialised, without files). */
void pc_cli_tols_free(pc_cli_tols *t);

/** Reads the tolerance file at `path` once (pc_tolset_read_file: a pipe too), loads those bytes
 * into tols and adds them to the record as the layer `name`: they go into the hash (FNV-1a, 64
 * bits: it tells sets apart, it does not resist forgery) and, with their SHA-256, into the
 * files. The library's error (PC_EIO, PC_EPARSE naming file:line:column, PC_ENOMEM). */
int pc_cli_tols_load(pc_cli_tols *t, pc_tolset *tols, const char *name, const char *path,
                     pc_error *err);

/** The record of the layers added so far (pointing into t). */
pc_tol_record pc_cli_tols_record(const pc_cli_tols *t);

#endif
