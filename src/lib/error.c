/* The error record shared by every module (include/paritycheck/error.h). */
#include "pc_internal.h"

#include <stdarg.h> /* va_list */
#include <stdio.h>  /* vsnprintf */

const char *pc_status_name(pc_status code) {
  switch (code) {
  case PC_OK:
    return "ok";
  case PC_EUSAGE:
    return "usage";
  case PC_EIO:
    return "io";
  case PC_EPARSE:
    return "parse";
  case PC_ENOMEM:
    return "nomem";
  case PC_EDATA:
    return "data";
  case PC_ENOMATCH:
    return "nomatch";
  case PC_EEMPTY:
    return "empty";
  }
  return "unknown";
}

int pc_error_set(pc_error *err, pc_status code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return (int)code;
}
