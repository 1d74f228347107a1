/* Untrusted text (dataset names, file paths, messages built from file content) rendered for an
 * output context (docs/reports.md, "Untrusted names"): the one place that decides which
 * characters may reach a terminal, a CI log or a report as they are. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <stdio.h>  /* FILE, snprintf */
#include <string.h> /* memcpy, strlen */

/* The longest rendering of one character: "&quot;" or "\u202e" (6 bytes), 4 bytes of UTF-8. */
enum { UNIT_MAX = 8 };

static const char BDI_OPEN[] = "<bdi>";
static const char BDI_CLOSE[] = "</bdi>";

/* Characters that are shown as \uXXXX although they are valid UTF-8: C1 controls, the Unicode
 * bidi controls (ALM, LRM, RLM, LRE..RLO, LRI..PDI), the line and paragraph separators (line
 * breaks to some readers) and the noncharacters U+FFFE and U+FFFF (which XML cannot hold). */
static bool is_hidden(unsigned long cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFFFE ||
         cp == 0xFFFF;
}

static unsigned long code_point(const unsigned char *p, size_t n) {
  if (n == 2)
    return ((unsigned long)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  if (n == 3)
    return ((unsigned long)(p[0] & 0x0F) << 12) | ((unsigned long)(p[1] & 0x3F) << 6) |
           (p[2] & 0x3F);
  return 0x10000; /* four bytes: no character we escape */
}

/* An ASCII character's rendering, or NULL when it stands for itself. */
static const char *ascii_escape(unsigned char c, pc_escape_context ctx) {
  bool markup = ctx == PC_ESCAPE_XML || ctx == PC_ESCAPE_HTML;
  switch (c) {
  case '\\':
    return "\\\\";
  case '\t':
    return "\\t";
  case '\n':
    return "\\n";
  case '\r':
    return "\\r";
  case '|':
    return ctx == PC_ESCAPE_MARKDOWN ? "\\|" : NULL;
  case '&':
    return markup ? "&amp;" : NULL;
  case '<':
    return markup ? "&lt;" : NULL;
  case '>':
    return markup ? "&gt;" : NULL;
  case '"':
    return markup ? "&quot;" : NULL;
  case '\'':
    return markup ? "&apos;" : NULL;
  default:
    return NULL;
  }
}

/* Whether byte c stands for itself in ctx: printable ASCII that ascii_escape leaves alone. */
static bool is_plain(unsigned char c, pc_escape_context ctx) {
  return c >= 0x20 && c < 0x7F && !ascii_escape(c, ctx);
}

/* Whether the byte at p, of the text from start to end, could start a workflow command of the
 * GitHub Actions runner, which reads one in any line of a job's output: "##[" anywhere in a
 * line, and "::" at its start after whitespace. The text may stand at a line's start or beside
 * other text, so a '#' is escaped in "##[" and wherever the text's edge could complete one ("##"
 * at its end, "#[" at its start), and a ':' that follows only spaces when a ':' or the text's
 * end follows it (docs/reports.md, "Untrusted names"). */
static bool is_command_start(const unsigned char *start, const unsigned char *p,
                             const unsigned char *end) {
  if (*p == '#')
    return (p + 1 < end && p[1] == '#' && (p + 2 == end || p[2] == '[')) ||
           (p == start && p + 1 < end && p[1] == '[');
  if (*p != ':' || (p + 1 < end && p[1] != ':'))
    return false;
  for (const unsigned char *q = start; q < p; q++)
    if (*q != ' ')
      return false;
  return true;
}

/* The bytes from p (up to end; the text starts at start) that stand for themselves: most names
 * are all of them, and they are copied as one run rather than rendered one by one (a formatted
 * print a character was a tenth of the text report: docs/performance.md). */
static size_t plain_run(const unsigned char *start, const unsigned char *p,
                        const unsigned char *end, pc_escape_context ctx) {
  size_t k = 0;
  while (p + k < end && is_plain(p[k], ctx) && !is_command_start(start, p + k, end))
    k++;
  return k;
}

/* A '#' or ':' of is_command_start as the context writes a character by its code: a visible
 * escape where text is read as it is, a character reference in XML and HTML, which their
 * readers turn back into the character. */
static void command_escape(char unit[UNIT_MAX], unsigned char c, pc_escape_context ctx) {
  bool markup = ctx == PC_ESCAPE_XML || ctx == PC_ESCAPE_HTML;
  snprintf(unit, UNIT_MAX, markup ? "&#%d;" : "\\x%02x", c);
}

/* Renders the character at p (p < end; the text starts at start) into unit (NUL-terminated);
 * returns the bytes of s it stands for. */
static size_t render_unit(char unit[UNIT_MAX], const unsigned char *start, const unsigned char *p,
                          const unsigned char *end, pc_escape_context ctx) {
  /* pc_report_utf8_len reads up to 4 bytes: check that they are there, and copy them if not */
  unsigned char head[4] = {0, 0, 0, 0};
  size_t avail = (size_t)(end - p) < sizeof head ? (size_t)(end - p) : sizeof head;
  memcpy(head, p, avail);
  size_t n = pc_report_utf8_len(head);
  if (n == 0 || n > avail) {
    snprintf(unit, UNIT_MAX, "\\x%02x", head[0]); /* not UTF-8: the byte */
    return 1;
  }
  if (n == 1) {
    const char *e = ascii_escape(head[0], ctx);
    if (is_command_start(start, p, end))
      command_escape(unit, head[0], ctx);
    else if (e)
      snprintf(unit, UNIT_MAX, "%s", e);
    else if (head[0] < 0x20 || head[0] == 0x7F)
      snprintf(unit, UNIT_MAX, "\\x%02x", head[0]);
    else
      unit[0] = (char)head[0], unit[1] = '\0';
    return 1;
  }
  unsigned long cp = code_point(head, n);
  if (is_hidden(cp)) {
    snprintf(unit, UNIT_MAX, "\\u%04lx", cp);
  } else {
    memcpy(unit, head, n);
    unit[n] = '\0';
  }
  return n;
}

size_t pc_escape(char *buf, size_t size, const char *s, pc_escape_context ctx) {
  const unsigned char *start = (const unsigned char *)s, *p = start, *end = p + strlen(s);
  bool html = ctx == PC_ESCAPE_HTML;
  size_t close = html ? sizeof BDI_CLOSE - 1 : 0;
  size_t total = 0, used = 0; /* the whole rendering; what buf holds, without the NUL */
  bool full = size == 0;      /* a unit did not fit: nothing more goes into buf */
  char unit[UNIT_MAX];
  if (html) {
    full = full || sizeof BDI_OPEN - 1 + close >= size;
    if (!full) {
      memcpy(buf, BDI_OPEN, sizeof BDI_OPEN - 1);
      used = sizeof BDI_OPEN - 1;
    }
    total = sizeof BDI_OPEN - 1;
  }
  while (p < end) {
    /* A run of plain bytes is that many one-byte renderings: as many as fit are copied. */
    size_t k = plain_run(start, p, end, ctx);
    const char *from = (const char *)p;
    if (k) {
      p += k;
    } else {
      p += render_unit(unit, start, p, end, ctx);
      k = strlen(unit);
      from = unit;
    }
    size_t room = full || used + close + 1 >= size ? 0 : size - used - close - 1;
    size_t fit = from == unit && k > room ? 0 : k < room ? k : room; /* a unit: whole or none */
    if (fit) {
      memcpy(buf + used, from, fit);
      used += fit;
    }
    full = full || fit < k;
    total += k;
  }
  if (html && used) { /* the opening tag is there, and room was kept for this */
    memcpy(buf + used, BDI_CLOSE, close);
    used += close;
  }
  if (size)
    buf[used] = '\0';
  return total + close;
}

void pc_escape_put(FILE *out, const char *s, size_t len, pc_escape_context ctx) {
  const unsigned char *start = (const unsigned char *)s, *p = start, *end = p + len;
  char unit[UNIT_MAX];
  if (ctx == PC_ESCAPE_HTML)
    fputs(BDI_OPEN, out);
  while (p < end) {
    size_t k = plain_run(start, p, end, ctx);
    if (k) {
      fwrite(p, 1, k, out);
      p += k;
    } else {
      p += render_unit(unit, start, p, end, ctx);
      fputs(unit, out);
    }
  }
  if (ctx == PC_ESCAPE_HTML)
    fputs(BDI_CLOSE, out);
}

size_t pc_report_escape_tail(const char *s, size_t width, pc_escape_context ctx) {
  const unsigned char *start = (const unsigned char *)s, *p = start, *end = p + strlen(s);
  char unit[UNIT_MAX];
  size_t total = 0;
  while (p < end) {
    p += render_unit(unit, start, p, end, ctx);
    total += strlen(unit);
  }
  /* the first character from which the rest of the rendering fits */
  size_t before = 0;
  for (p = start; p < end && total - before > width;) {
    p += render_unit(unit, start, p, end, ctx);
    before += strlen(unit);
  }
  return (size_t)(p - start);
}
