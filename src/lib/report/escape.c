/* Untrusted text (dataset names, file paths, messages built from file content) rendered for an
 * output context (docs/reports.md, "Untrusted names"): the one place that decides which
 * characters may reach a terminal, a CI log or a report as they are. */
#include "escape.h"
#include "pc_internal.h"

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

/* Overlong forms, surrogates and code points above U+10FFFF are not valid (RFC 3629). */
size_t pc_report_utf8_len(const unsigned char *p) {
  if (p[0] < 0x80)
    return 1;
  size_t len = p[0] >= 0xC2 && p[0] <= 0xDF   ? 2
               : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
               : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4
                                              : 0;
  for (size_t k = 1; k < len; k++)
    if ((p[k] & 0xC0) != 0x80)
      return 0;
  if ((len == 3 && p[0] == 0xE0 && p[1] < 0xA0) || (len == 3 && p[0] == 0xED && p[1] >= 0xA0) ||
      (len == 4 && p[0] == 0xF0 && p[1] < 0x90) || (len == 4 && p[0] == 0xF4 && p[1] >= 0x90))
    return 0;
  return len;
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

void pc_report_put_xml(FILE *out, const char *s) {
  pc_escape_put(out, s, strlen(s), PC_ESCAPE_XML);
}

void pc_report_put_escaped(FILE *out, const char *s, pc_escape_context ctx) {
  pc_escape_put(out, s, strlen(s), ctx);
}

/* The code point of a UTF-8 sequence of n bytes (1 to 4) at p. */
static unsigned long decode(const unsigned char *p, size_t n) {
  static const unsigned char lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  unsigned long cp = p[0] & lead_mask[n];
  for (size_t i = 1; i < n; i++)
    cp = cp << 6 | (p[i] & 0x3F);
  return cp;
}

/* Columns a terminal gives a printable character (docs/reports.md, "Display width"): 0 for
 * combining marks and zero-width characters, 2 for the East Asian wide and fullwidth blocks
 * (CJK, Hangul, kana, fullwidth forms, emoji), 1 otherwise; a compact form of Unicode's
 * EastAsianWidth W/F classes, as wcwidth() gives them in a UTF-8 locale. */
static size_t char_columns(unsigned long cp) {
  static const unsigned long zero[][2] = {{0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD},
                                          {0x0610, 0x061A}, {0x064B, 0x065F}, {0x1AB0, 0x1AFF},
                                          {0x1DC0, 0x1DFF}, {0x200B, 0x200D}, {0x20D0, 0x20FF},
                                          {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}};
  static const unsigned long wide[][2] = {
      {0x1100, 0x115F},   {0x231A, 0x231B},  {0x2E80, 0x303E},   {0x3041, 0x33FF},
      {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},  {0xA000, 0xA4CF},   {0xA960, 0xA97F},
      {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},  {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
      {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},  {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF},
      {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD}};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
    if (cp >= zero[i][0] && cp <= zero[i][1])
      return 0;
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (cp >= wide[i][0] && cp <= wide[i][1])
      return 2;
  return 1;
}

/* Columns of a rendered unit or run: escapes and plain runs are ASCII, one column a byte; a
 * character that stands for itself is valid UTF-8 (render_unit). */
static size_t unit_columns(const char *u, size_t len) {
  const unsigned char *p = (const unsigned char *)u;
  size_t cols = 0;
  for (size_t i = 0; i < len;) {
    size_t n = p[i] < 0x80 ? 1 : pc_report_utf8_len(p + i);
    n = n ? n : 1;
    cols += n == 1 ? 1 : char_columns(decode(p + i, n));
    i += n;
  }
  return cols;
}

size_t pc_report_columns(const char *s, pc_escape_context ctx) {
  const unsigned char *start = (const unsigned char *)s, *p = start, *end = p + strlen(s);
  char unit[UNIT_MAX];
  size_t cols = 0;
  while (p < end) {
    size_t k = plain_run(start, p, end, ctx);
    if (k) {
      cols += k;
      p += k;
    } else {
      p += render_unit(unit, start, p, end, ctx);
      cols += unit_columns(unit, strlen(unit));
    }
  }
  return cols;
}

size_t pc_report_escape_tail(const char *s, size_t width, pc_escape_context ctx) {
  const unsigned char *start = (const unsigned char *)s, *p = start, *end = p + strlen(s);
  char unit[UNIT_MAX];
  size_t total = 0;
  while (p < end) {
    p += render_unit(unit, start, p, end, ctx);
    total += unit_columns(unit, strlen(unit));
  }
  /* the first character from which the rest of the rendering fits */
  size_t before = 0;
  for (p = start; p < end && total - before > width;) {
    p += render_unit(unit, start, p, end, ctx);
    before += unit_columns(unit, strlen(unit));
  }
  return (size_t)(p - start);
}

size_t pc_report_escape_head(char *buf, size_t size, const char *s, size_t width,
                             pc_escape_context ctx) {
  const unsigned char *start = (const unsigned char *)s, *p = start, *end = p + strlen(s);
  char unit[UNIT_MAX];
  size_t used = 0, cols = 0;
  while (p < end) {
    p += render_unit(unit, start, p, end, ctx);
    size_t n = strlen(unit), c = unit_columns(unit, n);
    if (cols + c > width || used + n >= size)
      break;
    memcpy(buf + used, unit, n);
    used += n;
    cols += c;
  }
  if (size)
    buf[used] = '\0';
  return cols;
}
