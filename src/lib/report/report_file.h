/* Report files written whole or not at all (report_file.c). The bottom of the report room: it
 * calls nothing above it. Internal. */
#ifndef PC_REPORT_FILE_H
#define PC_REPORT_FILE_H

#include <paritycheck/error.h> /* pc_error */

#include <stdbool.h> /* bool */
#include <stdio.h>   /* FILE */

/** A report file being written (pc_report_open, pc_report_close). A regular file, or a path that
 * does not exist yet, is written to a temporary file ".NAME.XXXXXX" in the same folder (a
 * symlink's target's folder) and renamed over NAME only once it is complete, so that a failed
 * or interrupted write leaves the old file, or none, never a partial one (docs/reports.md,
 * "Report files"). Standard output ("-"), a path that exists and is not a regular file
 * (/dev/null, a FIFO) and a file beside which no temporary file can be made (a folder that
 * cannot be written) are written directly. */
typedef struct pc_report_file {
  FILE *f;          /* the stream to write */
  const char *path; /* as given, for messages */
  char *dest;       /* the file that tmp replaces; NULL when written directly */
  char *tmp;        /* the temporary file; NULL when written directly */
  bool failed;      /* set by a writer whose output is incomplete for a reason stdio does not see */
  /* NULL, or set by the writer before pc_report_close: reads the complete temporary file back.
   * A file that does not read back never replaces the old one (docs/robustness.md). */
  int (*verify)(const char *tmp, pc_error *err);
} pc_report_file;

/** Open `path` for writing (see pc_report_file), or standard output for "-". */
int pc_report_open(pc_report_file *rf, const char *path, pc_error *err);

/** Finish what pc_report_open opened: flush (standard output), or flush, fsync, close and rename
 * the temporary file into place. Any error, including one seen earlier by stdio, is PC_EIO
 * naming the path and `what` ("the Markdown report"); the temporary file is then removed and an
 * existing file at the path is left as it was. So is it when rf->verify refuses the temporary
 * file: PC_EIO naming the path and verify's reason. */
int pc_report_close(pc_report_file *rf, const char *what, pc_error *err);

#endif
