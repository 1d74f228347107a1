/* paritycheck: the one error model of the library.
 *
 * Every fallible function returns an int: PC_OK (0) on success or a negative pc_status, and fills
 * the caller's pc_error record (which may be NULL) with a message that names the file and, where
 * there is one, the dataset. Nothing in the library prints to stderr or aborts. */
#ifndef PARITYCHECK_ERROR_H
#define PARITYCHECK_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pc_status {
  PC_OK = 0,
  PC_EUSAGE = -1,   /* a bad argument from the caller */
  PC_EIO = -2,      /* an input cannot be read: missing, not HDF5, truncated, corrupt */
  PC_EPARSE = -3,   /* a tolerance file is malformed; the message is "file:line:column: why" */
  PC_ENOMEM = -4,   /* out of memory */
  PC_EDATA = -5,    /* one dataset cannot be read (e.g. its filter is not available) */
  PC_ENOMATCH = -6, /* A and B hold tensors, but none of the same name: nothing to compare */
  PC_EEMPTY = -7    /* nothing was compared: no tensor took part, or every one was skipped */
} pc_status;

enum { PC_ERROR_MESSAGE_MAX = 1024 };

typedef struct pc_error {
  pc_status code;
  char message[PC_ERROR_MESSAGE_MAX];
} pc_error;

/** A short stable name for a status ("ok", "usage", "io", "parse", "nomem", "data",
 * "nomatch", "empty"). */
const char *pc_status_name(pc_status code);

#ifdef __cplusplus
}
#endif
#endif
