/* Text report: a header, one aligned line per tensor (failures in upper case, coloured on a
 * terminal), a detail line under each drift, and a one-line summary. Every figure is defined in
 * docs/metrics.md. Passing tensors print their figures, never "0 differences": a line always says
 * how close the tensor came. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <errno.h>    /* errno */
#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* fprintf, snprintf */
#include <string.h>   /* strlen, strerror */

/* Paths longer than this keep their tail (the most specific part) behind "...". */
enum { PATH_WIDTH_MAX = 60 };
/* "[" and "]", up to 20 digits and a comma per dimension, NUL. */
enum { DIMS_TEXT_MAX = 2 + PC_MAX_RANK * 21 + 1 };

static const char ELLIPSIS[] = "...";
static const char GAP[] = "  ";

#define ANSI_RESET "\033[0m"

static const char *format_dims(char buf[DIMS_TEXT_MAX], int rank, const uint64_t *dims) {
  if (rank < 0)
    return "-";
  size_t n = (size_t)snprintf(buf, DIMS_TEXT_MAX, "[");
  for (int k = 0; k < rank; k++)
    n += (size_t)snprintf(buf + n, DIMS_TEXT_MAX - n, "%s%" PRIu64, k ? "," : "", dims[k]);
  snprintf(buf + n, DIMS_TEXT_MAX - n, "]");
  return buf;
}

/* Failures and errors: upper case, and kept by quiet mode. */
static bool stands_out(pc_verdict v) {
  return pc_verdict_is_failure(v) || v == PC_VERDICT_ERROR;
}

static bool is_shown(pc_verdict v, bool quiet) {
  return !quiet || stands_out(v);
}

static const char *verdict_color(pc_verdict v) {
  if (v == PC_VERDICT_PASS)
    return "\033[32m";
  if (v == PC_VERDICT_SKIPPED)
    return "\033[33m";
  if (v == PC_VERDICT_ERROR)
    return "\033[1;31m";
  return "\033[31m";
}

/* The cells of one tensor line, each already formatted. */
typedef struct cells {
  char verdict[32];
  char dtype[80];
  char shape[DIMS_TEXT_MAX];
  char mismatches[48];
  char max_abs[32];
  char max_rel[32];
  char max_ulp[24];
} cells;

typedef struct widths {
  size_t verdict, path, dtype, shape, mismatches, max_abs, max_rel;
} widths;

static void format_verdict(char *buf, size_t size, pc_verdict v) {
  const char *name = pc_verdict_name(v);
  bool upper = stands_out(v);
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++)
    buf[i] = upper && name[i] >= 'a' && name[i] <= 'z' ? (char)(name[i] - 'a' + 'A') : name[i];
  buf[i] = '\0';
}

/* One dtype when both sides agree, else "a/b", with "-" for a side that has none. */
static void format_dtypes(char *buf, size_t size, const pc_tensor *t) {
  char a[40], b[40];
  const char *na = t->dtype_a == PC_DTYPE_NONE
                       ? "-"
                       : pc_report_dtype_name(a, sizeof a, t->dtype_a, t->is_complex);
  const char *nb = t->dtype_b == PC_DTYPE_NONE
                       ? "-"
                       : pc_report_dtype_name(b, sizeof b, t->dtype_b, t->is_complex);
  if (strcmp(na, nb) == 0)
    snprintf(buf, size, "%s", na);
  else
    snprintf(buf, size, "%s/%s", na, nb);
}

static void fill_cells(cells *c, const pc_tensor *t) {
  char dims[DIMS_TEXT_MAX];
  const pc_stats *s = &t->stats;
  format_verdict(c->verdict, sizeof c->verdict, t->verdict);
  format_dtypes(c->dtype, sizeof c->dtype, t);
  snprintf(c->shape, sizeof c->shape, "%s", format_dims(dims, t->rank, t->dims));
  c->mismatches[0] = c->max_abs[0] = c->max_rel[0] = c->max_ulp[0] = '\0';
  if (!pc_report_has_stats(t->verdict))
    return;
  snprintf(c->mismatches, sizeof c->mismatches, "%" PRIu64 "/%" PRIu64, s->mismatches, s->count);
  snprintf(c->max_abs, sizeof c->max_abs, "%.3g", s->max_abs);
  snprintf(c->max_rel, sizeof c->max_rel, "%.3g", s->max_rel);
  snprintf(c->max_ulp, sizeof c->max_ulp, "%" PRIu64, s->max_ulp);
}

/* The tail of path that fits PATH_WIDTH_MAX together with the ellipsis, never starting inside a
 * UTF-8 sequence; *cut says whether the ellipsis is needed. */
static const char *path_tail(const char *path, bool *cut) {
  size_t len = strlen(path);
  *cut = len > PATH_WIDTH_MAX;
  if (!*cut)
    return path;
  const char *p = path + len - (PATH_WIDTH_MAX - (sizeof ELLIPSIS - 1));
  while (((unsigned char)*p & 0xC0) == 0x80)
    p++;
  return p;
}

static size_t path_width(const char *path) {
  bool cut;
  const char *tail = path_tail(path, &cut);
  return strlen(tail) + (cut ? sizeof ELLIPSIS - 1 : 0);
}

static size_t max_size(size_t a, size_t b) {
  return a > b ? a : b;
}

/* Column widths over the lines that will be shown (counted in *shown). */
static widths measure(const pc_run *run, bool quiet, size_t *shown) {
  widths w = {strlen("verdict"),    strlen("tensor"),  strlen("dtype"),  strlen("shape"),
              strlen("mismatches"), strlen("max_abs"), strlen("max_rel")};
  for (size_t i = 0; i < run->ntensors; i++) {
    const pc_tensor *t = &run->tensors[i];
    if (!is_shown(t->verdict, quiet))
      continue;
    ++*shown;
    cells c;
    fill_cells(&c, t);
    w.verdict = max_size(w.verdict, strlen(c.verdict));
    w.path = max_size(w.path, path_width(t->path));
    w.dtype = max_size(w.dtype, strlen(c.dtype));
    w.shape = max_size(w.shape, strlen(c.shape));
    w.mismatches = max_size(w.mismatches, strlen(c.mismatches));
    w.max_abs = max_size(w.max_abs, strlen(c.max_abs));
    w.max_rel = max_size(w.max_rel, strlen(c.max_rel));
  }
  return w;
}

static void put_padded(FILE *out, const char *text, size_t width) {
  fprintf(out, "%s%*s%s", text, (int)(width - strlen(text)), "", GAP);
}

static void put_verdict(FILE *out, const cells *c, pc_verdict v, size_t width, bool color) {
  if (color)
    fprintf(out, "%s%s" ANSI_RESET, verdict_color(v), c->verdict);
  else
    fputs(c->verdict, out);
  fprintf(out, "%*s%s", (int)(width - strlen(c->verdict)), "", GAP);
}

static void put_path(FILE *out, const char *path, size_t width) {
  bool cut;
  const char *tail = path_tail(path, &cut);
  if (cut)
    fputs(ELLIPSIS, out);
  put_padded(out, tail, width - (cut ? sizeof ELLIPSIS - 1 : 0));
}

/* Missing and shape verdicts are stated from the structure (the two shapes say more than a
 * message can); every other verdict shows its message. */
static bool is_structural(pc_verdict v) {
  return v == PC_VERDICT_MISSING_IN_A || v == PC_VERDICT_MISSING_IN_B ||
         v == PC_VERDICT_SHAPE_MISMATCH;
}

static void put_reason(FILE *out, const pc_tensor *t) {
  char a[DIMS_TEXT_MAX], b[DIMS_TEXT_MAX];
  if (t->verdict == PC_VERDICT_MISSING_IN_A)
    fputs("only in B", out);
  else if (t->verdict == PC_VERDICT_MISSING_IN_B)
    fputs("only in A", out);
  else if (t->verdict == PC_VERDICT_SHAPE_MISMATCH)
    fprintf(out, "shape %s vs %s", format_dims(a, t->rank, t->dims),
            format_dims(b, t->rank_b, t->dims_b));
  else
    fputs(t->message, out);
}

static void put_values(FILE *out, const char *label, const double v[2], bool is_complex) {
  if (is_complex)
    fprintf(out, " %s=(%.17g, %.17g)", label, v[0], v[1]);
  else
    fprintf(out, " %s=%.17g", label, v[0]);
}

/* Starts an item of the detail line: the indent before the first, "; " before the others. */
static void put_item(FILE *out, size_t indent, bool *first) {
  if (*first)
    fprintf(out, "%*s", (int)indent, "");
  else
    fputs("; ", out);
  *first = false;
}

static void put_worst(FILE *out, const pc_tensor *t, size_t indent, bool *first) {
  const pc_stats *s = &t->stats;
  uint64_t index[PC_MAX_RANK];
  char dims[DIMS_TEXT_MAX];
  pc_report_worst_index(t, index);
  put_item(out, indent, first);
  fprintf(out, "worst %s:", format_dims(dims, t->rank < 0 ? 0 : t->rank, index));
  put_values(out, "a", s->worst_a, t->is_complex);
  put_values(out, "b", s->worst_b, t->is_complex);
  fprintf(out, " (abs %.3g, rel %.3g, ulp %" PRIu64 ")", s->worst_abs, s->worst_rel, s->worst_ulp);
}

static void put_count(FILE *out, uint64_t n, const char *what, size_t indent, bool *first) {
  if (!n)
    return;
  put_item(out, indent, first);
  fprintf(out, "%s: %" PRIu64, what, n);
}

/* Under a drift: where it is worst and why. Under a pass: only a dtype attribute the stored values
 * contradict, which is a problem of the data whatever the tolerance. */
static void put_details(FILE *out, const pc_tensor *t, size_t indent) {
  const pc_stats *s = &t->stats;
  bool drift = t->verdict == PC_VERDICT_DRIFT;
  bool first = true;
  if (!pc_report_has_stats(t->verdict))
    return;
  if (drift && s->has_worst)
    put_worst(out, t, indent, &first);
  put_count(out, s->nan_mismatches, "nan mismatches", indent, &first);
  put_count(out, s->inf_mismatches, "inf mismatches", indent, &first);
  put_count(out, s->not_representable_a, "not representable in A's dtype", indent, &first);
  put_count(out, s->not_representable_b, "not representable in B's dtype", indent, &first);
  if (drift && t->note) {
    put_item(out, indent, &first);
    fputs(t->note, out);
  }
  if (!first)
    fputc('\n', out);
}

static void put_tensor(FILE *out, const pc_tensor *t, const widths *w, bool color) {
  cells c;
  fill_cells(&c, t);
  put_verdict(out, &c, t->verdict, w->verdict, color);
  put_path(out, t->path, w->path);
  put_padded(out, c.dtype, w->dtype);
  if (pc_report_has_stats(t->verdict)) {
    put_padded(out, c.shape, w->shape);
    put_padded(out, c.mismatches, w->mismatches);
    put_padded(out, c.max_abs, w->max_abs);
    put_padded(out, c.max_rel, w->max_rel);
    fprintf(out, "%s\n", c.max_ulp);
  } else if (t->message || is_structural(t->verdict)) {
    put_padded(out, c.shape, w->shape);
    put_reason(out, t);
    fputc('\n', out);
  } else {
    fprintf(out, "%s\n", c.shape);
  }
  put_details(out, t, w->verdict + strlen(GAP));
}

static void put_header(FILE *out, const widths *w) {
  put_padded(out, "verdict", w->verdict);
  put_padded(out, "tensor", w->path);
  put_padded(out, "dtype", w->dtype);
  put_padded(out, "shape", w->shape);
  put_padded(out, "mismatches", w->mismatches);
  put_padded(out, "max_abs", w->max_abs);
  put_padded(out, "max_rel", w->max_rel);
  fputs("max_ulp\n", out);
}

static const char *plural(size_t n) {
  return n == 1 ? "" : "s";
}

static const pc_tensor *first_where(const pc_run *run, bool (*pred)(pc_verdict)) {
  for (size_t i = 0; i < run->ntensors; i++)
    if (pred(run->tensors[i].verdict))
      return &run->tensors[i];
  return NULL;
}

static bool is_error(pc_verdict v) {
  return v == PC_VERDICT_ERROR;
}

static size_t failure_count(const pc_run *run) {
  size_t n = 0;
  for (int v = 0; v < PC_VERDICT_COUNT_; v++)
    if (pc_verdict_is_failure((pc_verdict)v))
      n += run->by_verdict[v];
  return n;
}

/* " (2 drift, 1 missing_in_b)": the failing verdicts that occur, in enum order. */
static void put_failure_breakdown(FILE *out, const pc_run *run) {
  const char *sep = " (";
  for (int v = 0; v < PC_VERDICT_COUNT_; v++) {
    if (!pc_verdict_is_failure((pc_verdict)v) || !run->by_verdict[v])
      continue;
    fprintf(out, "%s%zu %s", sep, run->by_verdict[v], pc_verdict_name((pc_verdict)v));
    sep = ", ";
  }
  if (*sep == ',')
    fputc(')', out);
}

static void put_summary_word(FILE *out, const char *word, pc_verdict v, bool color) {
  if (color)
    fprintf(out, "%s%s" ANSI_RESET ": ", verdict_color(v), word);
  else
    fprintf(out, "%s: ", word);
}

static void put_pass_summary(FILE *out, const pc_run *run, bool color) {
  size_t pass = run->by_verdict[PC_VERDICT_PASS];
  size_t skipped = run->by_verdict[PC_VERDICT_SKIPPED];
  put_summary_word(out, "PASS", PC_VERDICT_PASS, color);
  fprintf(out, "%zu tensor%s within tolerance", pass, plural(pass));
  if (skipped)
    fprintf(out, " (%zu skipped)", skipped);
  fputc('\n', out);
}

/* "FAIL: 3 of 120 tensors fail (2 drift, 1 missing_in_b), 1 skipped; first divergence: /enc/3/out",
 * or for a run with unreadable tensors "ERROR: 1 of 120 tensors could not be read (first: /x);
 * 3 fail (...), ...". */
static void put_fail_summary(FILE *out, const pc_run *run, bool color) {
  size_t fails = failure_count(run);
  size_t skipped = run->by_verdict[PC_VERDICT_SKIPPED];
  const pc_tensor *first_fail = pc_report_first_divergence(run);
  if (run->verdict == PC_RUN_ERROR) {
    const pc_tensor *first_error = first_where(run, is_error);
    put_summary_word(out, "ERROR", PC_VERDICT_ERROR, color);
    fprintf(out, "%zu of %zu tensor%s could not be read", run->by_verdict[PC_VERDICT_ERROR],
            run->ntensors, plural(run->ntensors));
    if (first_error)
      fprintf(out, " (first: %s)", first_error->path);
    if (fails)
      fprintf(out, "; %zu fail%s", fails, fails == 1 ? "s" : "");
  } else {
    put_summary_word(out, "FAIL", PC_VERDICT_DRIFT, color);
    fprintf(out, "%zu of %zu tensor%s fail%s", fails, run->ntensors, plural(run->ntensors),
            fails == 1 ? "s" : "");
  }
  put_failure_breakdown(out, run);
  if (skipped)
    fprintf(out, ", %zu skipped", skipped);
  if (first_fail)
    fprintf(out, "; first divergence: %s", first_fail->path);
  fputc('\n', out);
}

int pc_report_text(FILE *out, const pc_run *run, const pc_text_options *opts, pc_error *err) {
  static const pc_text_options defaults = {false, false};
  if (!out || !run)
    return pc_error_set(err, PC_EUSAGE, "pc_report_text: out and run are required");
  if (!opts)
    opts = &defaults;
  size_t shown = 0;
  widths w = measure(run, opts->quiet, &shown);
  if (shown)
    put_header(out, &w);
  for (size_t i = 0; i < run->ntensors; i++)
    if (is_shown(run->tensors[i].verdict, opts->quiet))
      put_tensor(out, &run->tensors[i], &w, opts->color);
  if (run->verdict == PC_RUN_PASS)
    put_pass_summary(out, run, opts->color);
  else
    put_fail_summary(out, run, opts->color);
  if (fflush(out) != 0 || ferror(out))
    return pc_error_set(err, PC_EIO, "cannot write the text report: %s", strerror(errno));
  return PC_OK;
}
