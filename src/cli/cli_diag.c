/* The CLI's messages on stderr (cli_diag.h). */
#include "cli_diag.h"

#include <stdio.h>  /* fputs, fprintf */
#include <string.h> /* strlen */

void pc_cli_put_untrusted(const char *s) {
  pc_escape_put(stderr, s, strlen(s), PC_ESCAPE_TERMINAL);
}

int pc_cli_usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "paritycheck: %s", msg);
  if (arg) {
    fputs(": ", stderr);
    pc_cli_put_untrusted(arg);
  }
  fputs("\nTry 'paritycheck --help'.\n", stderr);
  return PC_EUSAGE;
}

int pc_cli_fail(const pc_error *err) {
  fputs("paritycheck: ", stderr);
  pc_cli_put_untrusted(err->message);
  fputc('\n', stderr);
  if (err->code == PC_ENOMATCH)
    fputs("paritycheck: hint: if the names differ by a prefix (DDP's module.) or a pattern, pair "
          "them with --strip-prefix P or --map FROM=TO (paritycheck --help)\n",
          stderr);
  if (err->code == PC_EEMPTY)
    fputs("paritycheck: hint: check both dumps and the --include/--exclude globs; --allow-empty "
          "lets a run that compares nothing pass\n",
          stderr);
  return err->code < 0 ? (int)err->code : PC_EIO;
}

void pc_cli_warn(const char *text) {
  fputs("paritycheck: warning: ", stderr);
  pc_cli_put_untrusted(text);
  fputc('\n', stderr);
}
