/* JSON values as paritycheck writes them (json_util.h). */
#include "json_util.h"
#include "escape.h"
#include "pc_internal.h"
#include "report_file.h"

#include <math.h>    /* isnan, isinf */
#include <stdbool.h> /* bool */
#include <stdio.h>   /* fputc, fputs, fwrite */
#include <stdlib.h>  /* free, malloc, realloc, strtoul */
#include <string.h>  /* strchr, strstr, strspn, memcpy */

/* jansson 2.8 and later dump keys in insertion order anyway; the flag asks for it on older ones. */
enum { PC_JSON_FLAGS = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) };

json_t *pc_json_real(double x) {
  if (isnan(x))
    return json_string("nan");
  if (isinf(x))
    return json_string(x > 0 ? "inf" : "-inf");
  return json_real(x);
}

json_t *pc_json_count(uint64_t n) {
  return n <= INT64_MAX ? json_integer((json_int_t)n) : json_real((double)n);
}

bool pc_json_valid_utf8(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t n = pc_report_utf8_len(p);
    if (n == 0)
      return false;
    p += n;
  }
  return true;
}

json_t *pc_json_hex(const char *s) {
  static const char digits[] = "0123456789abcdef";
  size_t n = strlen(s);
  char *hex = malloc(2 * n + 1);
  if (!hex)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    hex[2 * i] = digits[(unsigned char)s[i] >> 4];
    hex[2 * i + 1] = digits[(unsigned char)s[i] & 15];
  }
  hex[2 * n] = '\0';
  json_t *j = json_string(hex);
  free(hex);
  return j;
}

int pc_hex_decode(const char *hex, char **out) {
  size_t n = strlen(hex);
  *out = NULL;
  if (n == 0 || n % 2 || strspn(hex, "0123456789abcdefABCDEF") != n)
    return PC_EPARSE;
  if (!(*out = malloc(n / 2 + 1)))
    return PC_ENOMEM;
  for (size_t i = 0; i < n / 2; i++) {
    char byte[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
    (*out)[i] = (char)strtoul(byte, NULL, 16);
  }
  (*out)[n / 2] = '\0';
  if (strlen(*out) == n / 2)
    return PC_OK;
  free(*out);
  *out = NULL;
  return PC_EPARSE;
}

json_t *pc_json_string(const char *s) {
  json_t *j = json_string(s);
  if (j || !s || pc_json_valid_utf8(s)) /* a valid string refused: out of memory */
    return j;
  /* Each byte outside a valid sequence as the four characters \xNN, never one replacement
   * character for all: b"/x\xff" and b"/x\xfe" stay two names (docs/report-json.md). */
  static const char digits[] = "0123456789abcdef";
  char *copy = malloc(4 * strlen(s) + 1), *q = copy;
  if (!copy)
    return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t n = pc_report_utf8_len(p);
    if (n) {
      memcpy(q, p, n);
      q += n;
      p += n;
      continue;
    }
    *q++ = '\\';
    *q++ = 'x';
    *q++ = digits[*p >> 4];
    *q++ = digits[*p++ & 15];
  }
  *q = '\0';
  j = json_string(copy);
  free(copy);
  return j;
}

json_t *pc_json_finish(json_t *o, int rc) {
  if (rc == 0)
    return o;
  json_decref(o);
  return NULL;
}

/* The text of pc_json_dumps as it grows; `failed` is sticky. */
typedef struct dump_buffer {
  char *text;
  size_t len, cap;
  bool failed;
} dump_buffer;

static int dump_append(const char *bytes, size_t n, void *data) {
  dump_buffer *b = data;
  if (!b->failed && n >= b->cap - b->len) {
    size_t cap = b->cap ? b->cap : 256;
    while (n >= cap - b->len)
      cap *= 2;
    char *grown = realloc(b->text, cap);
    b->failed = !grown;
    if (grown) {
      b->text = grown;
      b->cap = cap;
    }
  }
  if (b->failed)
    return -1;
  memcpy(b->text + b->len, bytes, n);
  b->len += n;
  b->text[b->len] = '\0';
  return 0;
}

/* text with every "##[" written "#\u0023[": the GitHub Actions runner reads "##[" anywhere in a
 * line of a job's output as a command, and a JSON report on standard output must hold none
 * (docs/reports.md, "Untrusted names"). '#' occurs only inside JSON strings, where a reader
 * turns the escape back into the character. Frees text; NULL when out of memory. */
static char *no_runner_commands(char *text) {
  static const char cmd[] = "##[", esc[] = "#\\u0023[";
  size_t n = 0;
  for (const char *p = strstr(text, cmd); p; p = strstr(p + 1, cmd))
    n++;
  if (!n)
    return text;
  size_t len = strlen(text);
  char *out = malloc(len + n * (sizeof esc - sizeof cmd) + 1), *w = out;
  for (const char *p = text, *hit; out; p = hit + sizeof cmd - 1) {
    if (!(hit = strstr(p, cmd))) {
      memcpy(w, p, strlen(p) + 1);
      break;
    }
    memcpy(w, p, (size_t)(hit - p));
    w += hit - p;
    memcpy(w, esc, sizeof esc - 1);
    w += sizeof esc - 1;
  }
  free(text);
  return out;
}

/* Not json_dumps: jansson (2.14) ignores a failed write of an object's key, so that when its
 * buffer cannot grow there, json_dumps returns text without that key. This buffer remembers. */
char *pc_json_dumps(const json_t *j) {
  dump_buffer b = {NULL, 0, 0, false};
  if (json_dump_callback(j, dump_append, &b, PC_JSON_FLAGS) != 0 || b.failed || !b.text) {
    free(b.text);
    return NULL;
  }
  return no_runner_commands(b.text);
}

/* Writes n spaces. */
static void put_spaces(FILE *f, int n) {
  static const char spaces[] = "                                ";
  for (; n > 0; n -= (int)sizeof spaces - 1)
    fwrite(spaces, 1, n < (int)sizeof spaces - 1 ? (size_t)n : sizeof spaces - 1, f);
}

/* fwrite, not fprintf, per line: a format parsed for each of the report's lines was a tenth of
 * a full run over 2,000 small tensors (docs/performance.md). */
int pc_json_put_nested(FILE *f, const json_t *j, int indent) {
  char *text = pc_json_dumps(j);
  if (!text)
    return PC_ENOMEM;
  for (const char *p = text, *nl; *p; p = nl + 1) {
    nl = strchr(p, '\n');
    if (!nl) {
      fputs(p, f);
      break;
    }
    fwrite(p, 1, (size_t)(nl - p) + 1, f);
    put_spaces(f, indent);
  }
  free(text);
  return PC_OK;
}

int pc_json_write(const json_t *root, const char *path, const char *what, pc_error *err) {
  return pc_json_write_checked(root, path, what, NULL, err);
}

int pc_json_write_checked(const json_t *root, const char *path, const char *what,
                          int (*verify)(const char *tmp, pc_error *err), pc_error *err) {
  pc_report_file f;
  int rc = pc_report_open(&f, path, err);
  if (rc < 0)
    return rc;
  f.verify = verify;
  f.failed = json_dumpf(root, f.f, PC_JSON_FLAGS) != 0;
  bool oom = f.failed && !ferror(f.f); /* jansson could not allocate: nothing failed to write */
  fputc('\n', f.f);                    /* an error stays in the stream, for pc_report_close */
  rc = pc_report_close(&f, what, err);
  return oom ? pc_error_set(err, PC_ENOMEM, "%s: out of memory writing %s", path, what) : rc;
}
