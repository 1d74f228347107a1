/* Text report, top-down (docs/reports.md, "The text report"): the verdict and what a reader acts
 * on first (the summary line, the first divergence with its reasons and diagnosis, the other root
 * causes), then the provenance (the attributes that differ; -v all), then one aligned line per
 * tensor (failures in upper case, coloured on a terminal) with a detail line under each drift or
 * indeterminate tensor; with a baseline, a column of changes and a gate line at the top. Verbose
 * mode adds the error statistics under every compared tensor. Every figure is defined in
 * docs/metrics.md. Passing tensors print their figures, never "0 differences": a line always says
 * how close the tensor came, and why a pass whose max_rel looks alarming passes. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <errno.h>    /* errno */
#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* isinf */
#include <stdio.h>    /* fprintf, snprintf */
#include <stdlib.h>   /* free */
#include <string.h>   /* strlen, strerror */

/* Paths longer than this keep their tail (the most specific part) behind "...". */
enum { PATH_WIDTH_MAX = 60 };

static const char ELLIPSIS[] = "...";
static const char GAP[] = "  ";

#define ANSI_RESET "\033[0m"

/* Failures and errors: upper case, and kept by quiet mode. */
static bool stands_out(pc_verdict v) {
  return pc_verdict_is_failure(v) || v == PC_VERDICT_ERROR;
}

static bool is_shown(pc_verdict v, bool quiet) {
  return !quiet || stands_out(v);
}

/* An indeterminate tensor the run accepts is yellow, as a skipped one: to look at, not failing. */
static const char *verdict_color(pc_verdict v, bool accepted) {
  if (v == PC_VERDICT_PASS)
    return "\033[32m";
  if (v == PC_VERDICT_SKIPPED || accepted)
    return "\033[33m";
  if (v == PC_VERDICT_ERROR)
    return "\033[1;31m";
  return "\033[31m";
}

/* The cells of one tensor line, each already formatted. */
typedef struct cells {
  char verdict[32];
  char change[16];
  char dtype[80];
  char shape[PC_DIMS_TEXT_MAX];
  char mismatches[48];
  char max_abs[32];
  char max_rel[32];
  char max_ulp[24];
  char snr_db[32];
} cells;

typedef struct widths {
  size_t verdict, change, path, dtype, shape, mismatches, max_abs, max_rel, max_ulp;
} widths;

/* What every line is drawn from. */
typedef struct view {
  const pc_run *run;
  const pc_report_options *opts;
  const pc_cascades *cascades;
} view;

static void copy_case(char *buf, size_t size, const char *name, bool upper) {
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++)
    buf[i] = upper && name[i] >= 'a' && name[i] <= 'z' ? (char)(name[i] - 'a' + 'A') : name[i];
  buf[i] = '\0';
}

static void fill_cells(cells *c, const view *v, size_t i) {
  const pc_tensor *t = pc_run_at(v->run, i);
  const pc_gate *gate = v->opts->gate;
  char dims[PC_DIMS_TEXT_MAX];
  const pc_stats *s = &t->stats;
  /* upper case is a failure; an accepted indeterminate tensor is none */
  copy_case(c->verdict, sizeof c->verdict, pc_verdict_name(t->verdict),
            stands_out(t->verdict) && !pc_report_accepted(v->run, i));
  /* a change that fails the gate is upper case, as a failing verdict is */
  copy_case(c->change, sizeof c->change, pc_report_change(gate, v->run, i),
            gate && gate->tensors[i].fails);
  pc_report_dtypes(c->dtype, sizeof c->dtype, t);
  snprintf(c->shape, sizeof c->shape, "%s", pc_report_dims(dims, t->rank, t->dims));
  c->mismatches[0] = c->max_abs[0] = c->max_rel[0] = c->max_ulp[0] = c->snr_db[0] = '\0';
  if (!pc_report_has_stats(t->verdict))
    return;
  snprintf(c->mismatches, sizeof c->mismatches, "%" PRIu64 "/%" PRIu64, s->mismatches, s->count);
  snprintf(c->max_abs, sizeof c->max_abs, "%.3g", s->max_abs);
  snprintf(c->max_rel, sizeof c->max_rel, "%.3g", s->max_rel);
  snprintf(c->max_ulp, sizeof c->max_ulp, "%" PRIu64, s->max_ulp);
  snprintf(c->snr_db, sizeof c->snr_db, "%.3g", pc_stats_aggregates(s).snr_db);
}

/* Text from the data (paths, messages) goes through this: control and bidi characters and
 * invalid UTF-8 as visible escapes, so that a name can neither drive the terminal nor start a
 * line of its own (docs/reports.md, "Untrusted names"). */
static void put_untrusted(FILE *out, const char *s) {
  pc_report_put_escaped(out, s, PC_ESCAPE_TERMINAL);
}

/* Columns, not bytes: a CJK name takes two a character (docs/reports.md, "Display width"). */
static size_t rendered_len(const char *s) {
  return pc_report_columns(s, PC_ESCAPE_TERMINAL);
}

/* The tail of path whose rendering fits PATH_WIDTH_MAX together with the ellipsis, starting at a
 * character (never inside a UTF-8 sequence or an escape); *cut says whether the ellipsis is
 * needed. */
static const char *path_tail(const char *path, bool *cut) {
  *cut = rendered_len(path) > PATH_WIDTH_MAX;
  if (!*cut)
    return path;
  return path +
         pc_report_escape_tail(path, PATH_WIDTH_MAX - (sizeof ELLIPSIS - 1), PC_ESCAPE_TERMINAL);
}

static size_t path_width(const char *path) {
  bool cut;
  const char *tail = path_tail(path, &cut);
  return rendered_len(tail) + (cut ? sizeof ELLIPSIS - 1 : 0);
}

static size_t max_size(size_t a, size_t b) {
  return a > b ? a : b;
}

/* Column widths over the lines that will be shown (counted in *shown). */
static widths measure(const view *v, size_t *shown) {
  widths w = {strlen("verdict"), strlen("baseline"), strlen("tensor"),
              strlen("dtype"),   strlen("shape"),    strlen("mismatches"),
              strlen("max_abs"), strlen("max_rel"),  strlen("max_ulp")};
  for (size_t i = 0; i < v->run->ntensors; i++) {
    const pc_tensor *t = pc_run_at(v->run, i);
    if (!is_shown(t->verdict, v->opts->quiet))
      continue;
    ++*shown;
    cells c;
    fill_cells(&c, v, i);
    w.verdict = max_size(w.verdict, strlen(c.verdict));
    w.change = max_size(w.change, strlen(c.change));
    w.path = max_size(w.path, path_width(t->path));
    w.dtype = max_size(w.dtype, strlen(c.dtype));
    w.shape = max_size(w.shape, strlen(c.shape));
    w.mismatches = max_size(w.mismatches, strlen(c.mismatches));
    w.max_abs = max_size(w.max_abs, strlen(c.max_abs));
    w.max_rel = max_size(w.max_rel, strlen(c.max_rel));
    w.max_ulp = max_size(w.max_ulp, strlen(c.max_ulp));
  }
  return w;
}

static void put_padded(FILE *out, const char *text, size_t width) {
  fprintf(out, "%s%*s%s", text, (int)(width - strlen(text)), "", GAP);
}

static void put_verdict(FILE *out, const cells *c, pc_verdict v, bool accepted, size_t width,
                        bool color) {
  if (color)
    fprintf(out, "%s%s" ANSI_RESET, verdict_color(v, accepted), c->verdict);
  else
    fputs(c->verdict, out);
  fprintf(out, "%*s%s", (int)(width - strlen(c->verdict)), "", GAP);
}

static void put_path(FILE *out, const char *path, size_t width) {
  bool cut;
  const char *tail = path_tail(path, &cut);
  if (cut)
    fputs(ELLIPSIS, out);
  put_untrusted(out, tail);
  fprintf(out, "%*s%s", (int)(width - path_width(path)), "", GAP);
}

/* Missing and shape verdicts are stated from the structure (the two shapes say more than a
 * message can); every other verdict shows its message. */
static bool is_structural(pc_verdict v) {
  return v == PC_VERDICT_MISSING_IN_A || v == PC_VERDICT_MISSING_IN_B ||
         v == PC_VERDICT_SHAPE_MISMATCH;
}

/* One side (0: a, 1: b) of the worst pair, at full precision. */
static void put_value(FILE *out, const pc_tensor *t, int side) {
  static const int digits[2] = {17, 17};
  char v[PC_WORST_VALUE_MAX];
  pc_report_worst_value(v, sizeof v, t, side, digits);
  fprintf(out, " %s=%s", side ? "b" : "a", v);
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
  char dims[PC_DIMS_TEXT_MAX];
  pc_report_worst_index(t, index);
  put_item(out, indent, first);
  fprintf(out, "worst %s:", pc_report_dims(dims, t->rank < 0 ? 0 : t->rank, index));
  put_value(out, t, 0);
  put_value(out, t, 1);
  fprintf(out, " (abs %.3g, rel %.3g, ulp %" PRIu64 ")", s->worst_abs, s->worst_rel, s->worst_ulp);
}

static void put_count(FILE *out, uint64_t n, const char *what, size_t indent, bool *first) {
  if (!n)
    return;
  put_item(out, indent, first);
  fprintf(out, "%s: %" PRIu64, what, n);
}

/* Why a drift or an indeterminate tensor fails, as the judge recorded it (docs/reports.md,
 * "Reasons and root causes"): the criteria it broke with their limits, what the difference looks
 * like (the diagnosis, what a reader acts on), whether the run accepts it, then the root cause
 * that explains it or, for a root, how many tensors it explains. */
static void put_reasons(FILE *out, const view *v, size_t i, size_t indent, bool *first) {
  char text[PC_REASON_MAX], diag[PC_DIAGNOSIS_MAX];
  long root = pc_report_root(v->run, i);
  size_t caused = pc_report_caused_count(v->cascades, i);
  pc_report_reasons(text, sizeof text, pc_run_at(v->run, i), false);
  put_item(out, indent, first);
  fputs(text, out);
  pc_report_diagnosis(diag, sizeof diag, pc_run_at(v->run, i));
  if (diag[0]) {
    put_item(out, indent, first);
    fprintf(out, "diagnosis: %s", diag);
  }
  if (pc_report_accepted(v->run, i)) {
    put_item(out, indent, first);
    fputs("accepted: the run accepts indeterminate tensors", out);
  }
  if (root >= 0) {
    put_item(out, indent, first);
    fputs("caused by ", out);
    put_untrusted(out, pc_run_at(v->run, root)->path);
  } else if (caused) {
    put_item(out, indent, first);
    fprintf(out, "root cause of %zu tensor%s", caused, caused == 1 ? "" : "s");
  }
}

/* Under a drift or an indeterminate tensor (and in verbose mode under a pass): why and where it
 * is worst. Under a pass: a dtype attribute the stored values contradict, which is a problem of
 * the data whatever the tolerance. */
static void put_details(FILE *out, const view *v, size_t i, size_t indent) {
  const pc_tensor *t = pc_run_at(v->run, i);
  const pc_stats *s = &t->stats;
  bool judged = pc_report_is_judged(t->verdict), verbose = v->opts->verbose;
  bool first = true;
  if (judged)
    put_reasons(out, v, i, indent, &first);
  if (v->opts->gate && v->opts->gate->tensors[i].approval) {
    put_item(out, indent, &first);
    put_untrusted(out, v->opts->gate->tensors[i].approval);
  }
  if (pc_report_has_metrics(t)) {
    char text[PC_REASON_MAX];
    pc_report_metrics(text, sizeof text, t, false);
    put_item(out, indent, &first);
    fprintf(out, "metrics %s", text);
  }
  if ((judged || verbose) && s->has_worst)
    put_worst(out, t, indent, &first);
  put_count(out, s->not_representable_a, "not representable in A's dtype", indent, &first);
  put_count(out, s->not_representable_b, "not representable in B's dtype", indent, &first);
  if ((judged || verbose) && t->note) {
    put_item(out, indent, &first);
    put_untrusted(out, t->note);
  }
  if (!first)
    fputc('\n', out);
}

/* "abs 0/1e-07/2e-07/2e-07": a figure at the quantile levels, in the order of the levels. */
static void put_quantiles(FILE *out, const char *what, const double q[PC_NQUANTILES], bool ulp) {
  fprintf(out, "%s ", what);
  for (int k = 0; k < PC_NQUANTILES; k++)
    fprintf(out, ulp ? "%s%.0f" : "%s%.3g", k ? "/" : "", q[k]);
}

/* Verbose mode: means and aggregates, quantiles when the run has them, the ULP histogram. */
static void put_statistics(FILE *out, const pc_stats *s, size_t indent) {
  pc_aggregates g = pc_stats_aggregates(s);
  fprintf(out,
          "%*smean abs %.3g, rel %.3g, ulp %.3g; rms %.3g, rel_rms %.3g, cosine %.9g, "
          "snr %.3g dB\n",
          (int)indent, "", g.mean_abs, g.mean_rel, pc_stats_mean_ulp(s), g.rms, g.rel_rms, g.cosine,
          g.snr_db);
  if (s->has_quantiles) {
    fprintf(out, "%*sp50/p90/p99/p99.9: ", (int)indent, "");
    put_quantiles(out, "abs", s->q_abs, false);
    put_quantiles(out, ", rel", s->q_rel, false);
    put_quantiles(out, ", ulp", s->q_ulp, true);
    fputc('\n', out);
  }
  fprintf(out, "%*sulp histogram:", (int)indent, "");
  int used = pc_report_hist_used(s);
  for (int k = 0; k < used; k++) {
    char label[48];
    if (!s->ulp_hist[k])
      continue;
    pc_report_bucket_label(label, sizeof label, k);
    fprintf(out, " %s: %" PRIu64 "%s", label, s->ulp_hist[k], k + 1 < used ? "," : "");
  }
  fputs(used ? "\n" : " empty\n", out);
}

/* A relative error from this up (B 100 % off at some element) reads as alarming on a passing
 * line, as does an infinite one; such a line says why it passes. */
static const double ALARMING_REL = 1.0;

/* Why the element test, or the judge's tensor criteria, let a pass's worst elements through. */
static void put_pass_cause(FILE *out, const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  const pc_vs_reference *r = &t->vs_reference;
  if (t->tol.metrics.elementwise_off)
    fputs("judged on its product metrics (elementwise: false)", out);
  else if (!s->mismatches && (t->tol.set & PC_TOL_ATOL) && s->max_abs <= t->tol.atol)
    fprintf(out, "within the absolute floor (max_abs %.3g <= atol %.3g)", s->max_abs, t->tol.atol);
  else if (!s->mismatches)
    fputs("every element within atol, rtol or max_ulp", out);
  else if (t->context.noise_level)
    fputs("both sides are rounding noise at their neighbours' scale (noise floor)", out);
  else if (r->present && r->b.rel_rms <= t->context.reference_limit)
    fprintf(out,
            "B's distance to R (rel_rms %.3g) is within what the tensor's conditioning explains",
            r->b.rel_rms);
  else
    fprintf(out, "%" PRIu64 " elements beyond atol/rtol, which the tensor criteria allow",
            s->mismatches);
}

/* Under a pass whose max_rel is inf or at least ALARMING_REL: why it passes (docs/reports.md,
 * "The text report"), and where such a relative error comes from. */
static void put_pass_why(FILE *out, const pc_tensor *t, size_t indent) {
  const pc_stats *s = &t->stats;
  if (t->verdict != PC_VERDICT_PASS || !(s->max_rel >= ALARMING_REL))
    return;
  fprintf(out, "%*spasses: ", (int)indent, "");
  put_pass_cause(out, t);
  if (isinf(s->max_rel))
    fprintf(out, "; max_rel inf where A = 0 (A has %" PRIu64 " zero%s)\n", s->ev.zeros_a,
            s->ev.zeros_a == 1 ? "" : "s");
  else
    fputs("; max_rel large where |A| is near 0\n", out);
}

/* Three-way mode: which side is closer to the reference R. */
static void put_closer(FILE *out, const pc_tensor *t, size_t indent) {
  char text[PC_REASON_MAX];
  pc_report_closer_text(text, sizeof text, t);
  if (text[0])
    fprintf(out, "%*scloser to R: %s\n", (int)indent, "", text);
}

static void put_tensor(FILE *out, const view *v, size_t i, const widths *w) {
  const pc_tensor *t = pc_run_at(v->run, i);
  cells c;
  fill_cells(&c, v, i);
  put_verdict(out, &c, t->verdict, pc_report_accepted(v->run, i), w->verdict, v->opts->color);
  if (v->opts->gate)
    put_padded(out, c.change, w->change);
  put_path(out, t->path, w->path);
  put_padded(out, c.dtype, w->dtype);
  if (pc_report_has_stats(t->verdict)) {
    put_padded(out, c.shape, w->shape);
    put_padded(out, c.mismatches, w->mismatches);
    put_padded(out, c.max_abs, w->max_abs);
    put_padded(out, c.max_rel, w->max_rel);
    put_padded(out, c.max_ulp, w->max_ulp);
    fprintf(out, "%s\n", c.snr_db);
  } else if (t->message || is_structural(t->verdict)) {
    char reason[PC_REASON_MAX];
    pc_report_reason(reason, sizeof reason, t);
    put_padded(out, c.shape, w->shape);
    put_untrusted(out, reason); /* a message names the dataset */
    fputc('\n', out);
  } else {
    fprintf(out, "%s\n", c.shape);
  }
  if (!pc_report_has_stats(t->verdict))
    return;
  size_t indent = w->verdict + strlen(GAP);
  put_details(out, v, i, indent);
  put_pass_why(out, t, indent);
  put_closer(out, t, indent);
  if (v->opts->verbose)
    put_statistics(out, &t->stats, indent);
}

/* Row k of the tensor lines (pc_report_row_fn): tensor k mod n in pass k / n, where quiet mode's
 * first pass shows the root causes (and errors) and its second the tensors they explain. */
typedef struct text_rows {
  const view *v;
  const widths *w;
} text_rows;

static int put_row(FILE *out, size_t k, void *ctx) {
  const text_rows *r = ctx;
  const pc_run *run = r->v->run;
  bool quiet = r->v->opts->quiet;
  size_t i = k % run->ntensors, pass = k / run->ntensors;
  if (is_shown(pc_run_at(run, i)->verdict, quiet) &&
      (!quiet || (pc_report_root(run, i) >= 0) == (pass == 1)))
    put_tensor(out, r->v, i, r->w);
  return PC_OK;
}

/* A value of A wider than this does not widen A's column: its own line runs on instead of
 * every line (a dump's model_repr is a thousand characters). */
enum { PROV_WIDTH_MAX = 40 };

/* The caller's settings, one "name: value" a line (docs/reports.md, "Settings"). */
static void put_settings(FILE *out, const pc_report_options *opts) {
  for (size_t i = 0; i < pc_report_nsettings(opts); i++) {
    put_untrusted(out, opts->settings[i].name);
    fputs(": ", out);
    put_untrusted(out, opts->settings[i].value);
    fputc('\n', out);
  }
}

/* Without -v a value is cut to this many columns, followed by its whole length: the report is
 * read top-down, and the full text is in JSON and under -v. */
enum { PROV_CUT = 60 };

/* One value of a provenance line: whole under -v or when short, else its head and length. */
static void put_prov_value(FILE *out, const char *value, bool verbose) {
  size_t len = rendered_len(value);
  if (verbose || len <= PROV_CUT) {
    put_untrusted(out, value);
    return;
  }
  char head[PROV_CUT * 8 + 1]; /* a rendered character is at most 8 bytes */
  pc_report_escape_head(head, sizeof head, value, PROV_CUT, PC_ESCAPE_TERMINAL);
  fprintf(out, "%s... (%zu characters; -v or JSON for all)", head, len);
}

/* The width a value takes in A's column. */
static size_t prov_width(const char *value, bool verbose) {
  size_t len = rendered_len(value);
  return verbose || len <= PROV_CUT ? len : PROV_CUT + 3;
}

/* The files' attributes side by side, a differing one marked '*' (docs/reports.md,
 * "Provenance"): only those that differ unless verbose; nothing when neither side has any. */
static int put_provenance(FILE *out, const pc_run *run, bool verbose) {
  pc_prov_row *rows;
  size_t n, wn = 0, wa = 1, ndiff = 0;
  if (pc_report_provenance(run, &rows, &n) < 0)
    return PC_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    ndiff += rows[i].differs;
    if (!verbose && !rows[i].differs)
      continue;
    size_t la = prov_width(pc_report_prov_value(&rows[i], 0), verbose);
    wn = max_size(wn, rendered_len(rows[i].name));
    wa = la <= PROV_WIDTH_MAX ? max_size(wa, la) : wa;
  }
  if (n)
    fputc('\n', out); /* after the verdict lines */
  if (n && verbose)
    fprintf(out, "provenance (A | B; * differs: %zu of %zu)\n", ndiff, n);
  else if (n && ndiff)
    fprintf(out, "provenance: %zu of %zu attributes differ (A | B; -v shows all)\n", ndiff, n);
  else if (n)
    fprintf(out, "provenance: A and B agree on all %zu attributes (-v shows them)\n", n);
  for (size_t i = 0; i < n; i++) {
    if (!verbose && !rows[i].differs)
      continue;
    size_t la = prov_width(pc_report_prov_value(&rows[i], 0), verbose);
    fputs(rows[i].differs ? "* " : "  ", out);
    put_untrusted(out, rows[i].name);
    fprintf(out, "%*s", (int)(wn - rendered_len(rows[i].name) + 2), "");
    put_prov_value(out, pc_report_prov_value(&rows[i], 0), verbose);
    fprintf(out, "%*s| ", (int)(la < wa ? wa - la + 1 : 1), "");
    put_prov_value(out, pc_report_prov_value(&rows[i], 1), verbose);
    fputc('\n', out);
  }
  free(rows);
  return PC_OK;
}

static void put_header(FILE *out, const widths *w, const pc_gate *gate) {
  put_padded(out, "verdict", w->verdict);
  if (gate)
    put_padded(out, pc_report_gate_column(gate), w->change);
  put_padded(out, "tensor", w->path);
  put_padded(out, "dtype", w->dtype);
  put_padded(out, "shape", w->shape);
  put_padded(out, "mismatches", w->mismatches);
  put_padded(out, "max_abs", w->max_abs);
  put_padded(out, "max_rel", w->max_rel);
  put_padded(out, "max_ulp", w->max_ulp);
  fputs("snr_db\n", out);
}

static const char *plural(size_t n) {
  return n == 1 ? "" : "s";
}

static const pc_tensor *first_where(const pc_run *run, bool (*pred)(pc_verdict)) {
  for (size_t i = 0; i < run->ntensors; i++)
    if (pred(pc_run_at(run, i)->verdict))
      return pc_run_at(run, i);
  return NULL;
}

static bool is_error(pc_verdict v) {
  return v == PC_VERDICT_ERROR;
}

static bool is_indeterminate(pc_verdict v) {
  return v == PC_VERDICT_INDETERMINATE;
}

/* " (2 drift, 1 missing_in_b)": the failing verdicts that occur, in enum order (indeterminate
 * among them unless the run accepts it). */
static void put_failure_breakdown(FILE *out, const pc_run *run) {
  const char *sep = " (";
  for (int v = 0; v < PC_VERDICT_COUNT_; v++) {
    if (!pc_report_counts(run, (pc_verdict)v) || !run->by_verdict[v])
      continue;
    fprintf(out, "%s%zu %s", sep, run->by_verdict[v], pc_verdict_name((pc_verdict)v));
    sep = ", ";
  }
  if (*sep == ',')
    fputc(')', out);
}

/* "; 1 indeterminate accepted (first: /x)": tensors the run accepts are still named, since a
 * bug may hide in them (docs/reports.md, "Diagnosis and indeterminate tensors"). */
static void put_accepted_tail(FILE *out, const pc_run *run) {
  size_t n = pc_report_accepted_count(run);
  const pc_tensor *first = first_where(run, is_indeterminate);
  if (!n || !first)
    return;
  fprintf(out, "; %zu indeterminate accepted (first: ", n);
  put_untrusted(out, first->path);
  fputc(')', out);
}

/* With a gate, the run's own line carries no verdict word: the gate's line is the one verdict. */
static void put_summary_word(FILE *out, const char *word, pc_verdict v, bool color,
                             const pc_gate *gate) {
  if (gate)
    fprintf(out, "without the %s: ", pc_report_gate_noun(gate));
  else if (color)
    fprintf(out, "%s%s" ANSI_RESET ": ", verdict_color(v, false), word);
  else
    fprintf(out, "%s: ", word);
}

static void put_pass_summary(FILE *out, const pc_run *run, bool color, const pc_gate *gate) {
  size_t pass = run->by_verdict[PC_VERDICT_PASS];
  size_t skipped = run->by_verdict[PC_VERDICT_SKIPPED];
  put_summary_word(out, "PASS", PC_VERDICT_PASS, color, gate);
  fprintf(out, "%zu tensor%s within tolerance", pass, plural(pass));
  if (skipped)
    fprintf(out, " (%zu skipped)", skipped);
  put_accepted_tail(out, run);
  fputc('\n', out);
}

/* "FAIL: 3 of 120 tensors fail (2 drift, 1 missing_in_b), 1 skipped; first divergence: /enc/3/out",
 * or for a run with unreadable tensors "ERROR: 1 of 120 tensors could not be read (first: /x);
 * 3 fail (...), ...". */
static void put_fail_summary(FILE *out, const pc_run *run, bool color, const pc_gate *gate) {
  size_t fails = pc_report_failures(run);
  size_t skipped = run->by_verdict[PC_VERDICT_SKIPPED];
  const pc_tensor *first_fail = pc_report_first_divergence(run);
  if (run->verdict == PC_RUN_ERROR) {
    const pc_tensor *first_error = first_where(run, is_error);
    put_summary_word(out, "ERROR", PC_VERDICT_ERROR, color, gate);
    fprintf(out, "%zu of %zu tensor%s could not be read", run->by_verdict[PC_VERDICT_ERROR],
            run->ntensors, plural(run->ntensors));
    if (first_error) {
      fputs(" (first: ", out);
      put_untrusted(out, first_error->path);
      fputc(')', out);
    }
    if (fails)
      fprintf(out, "; %zu fail%s", fails, fails == 1 ? "s" : "");
  } else if (fails == 0) { /* indeterminate accepted, but nothing passed (judge.c, pc_tally) */
    put_summary_word(out, "FAIL", PC_VERDICT_DRIFT, color, gate);
    fprintf(out, "no tensor within tolerance of %zu", run->ntensors);
  } else {
    put_summary_word(out, "FAIL", PC_VERDICT_DRIFT, color, gate);
    fprintf(out, "%zu of %zu tensor%s fail%s", fails, run->ntensors, plural(run->ntensors),
            fails == 1 ? "s" : "");
  }
  put_failure_breakdown(out, run);
  if (skipped)
    fprintf(out, ", %zu skipped", skipped);
  put_accepted_tail(out, run);
  if (first_fail) {
    fputs("; first divergence: ", out);
    put_untrusted(out, first_fail->path);
  }
  fputc('\n', out);
}

/* "; 9 approved, 1 new, 0 worse, 0 better": the rows' words of the approval column. */
static void put_approval_tally(FILE *out, const pc_run *run, const pc_gate *gate) {
  static const char *const words[] = {"approved", "new", "worse", "better"};
  size_t n[4] = {0};
  for (size_t i = 0; i < run->ntensors; i++)
    for (int k = 0; k < 4; k++)
      n[k] += strcmp(pc_report_change(gate, run, i), words[k]) == 0;
  for (int k = 0; k < 4; k++)
    fprintf(out, "%s%zu %s", k ? ", " : "; ", n[k], words[k]);
}

/* "GATE FAIL: 2 tensors fail the baseline base.json at factor 2 (first: /x); 1 new, 1 worse,
 * 0 better, 5 unchanged, 1 only in the baseline". */
static void put_gate_summary(FILE *out, const pc_run *run, const pc_gate *gate, bool color) {
  static const char *const words[] = {"GATE PASS", "GATE FAIL", "GATE ERROR"};
  static const pc_verdict colors[] = {PC_VERDICT_PASS, PC_VERDICT_DRIFT, PC_VERDICT_ERROR};
  put_summary_word(out, words[gate->verdict], colors[gate->verdict], color, NULL);
  char tail[64];
  fprintf(out, "%zu tensor%s fail%s the %s ", gate->failures, plural(gate->failures),
          gate->failures == 1 ? "s" : "", pc_report_gate_noun(gate));
  put_untrusted(out, gate->path);
  pc_report_gate_tail(tail, sizeof tail, gate);
  fputs(tail, out);
  for (size_t i = 0; i < run->ntensors; i++)
    if (gate->tensors[i].fails) {
      fputs(" (first: ", out);
      put_untrusted(out, pc_run_at(run, i)->path);
      fputc(')', out);
      break;
    }
  if (gate->kind == PC_GATE_APPROVALS)
    put_approval_tally(out, run, gate);
  else
    for (int c = 0; c < PC_CHANGE_COUNT_; c++)
      fprintf(out, "%s%zu %s", c ? ", " : "; ", gate->by_change[c], pc_change_name((pc_change)c));
  pc_report_gate_extra(tail, sizeof tail, gate);
  fputs(tail, out);
  fputc('\n', out);
}

/* Root causes the headline names besides the first divergence; the table has the rest. */
enum { HEADLINE_ROOTS = 5 };

/* "  PATH (VERDICT): why; root cause of N tensors": a root cause as the headline states it. */
static void put_root_line(FILE *out, const view *v, size_t i, const char *lead) {
  const pc_tensor *t = pc_run_at(v->run, i);
  char reason[PC_REASON_MAX];
  size_t caused = pc_report_caused_count(v->cascades, i);
  pc_report_reason(reason, sizeof reason, t);
  fputs(lead, out);
  put_untrusted(out, t->path);
  fprintf(out, " (%s)", pc_verdict_name(t->verdict));
  if (reason[0]) {
    fputs(": ", out);
    put_untrusted(out, reason); /* a message may name the dataset */
  }
  if (caused)
    fprintf(out, "; root cause of %zu tensor%s", caused, plural(caused));
  fputc('\n', out);
}

/* Under the summary line of a failing run: the first divergence and why, then the other root
 * causes in execution order (HEADLINE_ROOTS at most), each with what it explains. */
static void put_roots(FILE *out, const view *v) {
  const pc_run *run = v->run;
  const pc_tensor *first = pc_report_first_divergence(run);
  size_t first_i = first ? (size_t)(first - run->tensors) : run->ntensors, shown = 0, more = 0;
  if (first)
    put_root_line(out, v, first_i, "first divergence: ");
  for (size_t k = 0; k < run->ntensors; k++) {
    size_t i = pc_report_exec_at(run, k);
    if (i == first_i || !pc_report_is_root(run, i) || !pc_report_fails(run, NULL, i))
      continue;
    if (shown == HEADLINE_ROOTS) {
      more++;
      continue;
    }
    if (!shown++)
      fputs("other root causes, in execution order:\n", out);
    put_root_line(out, v, i, "  ");
  }
  if (more)
    fprintf(out, "  and %zu more root cause%s (the table below)\n", more, plural(more));
}

/* The run's verdict lines: the summary, the three-way tally, the gate's line. */
static void put_verdict_lines(FILE *out, const pc_run *run, const pc_report_options *opts) {
  if (run->verdict == PC_RUN_PASS)
    put_pass_summary(out, run, opts->color, opts->gate);
  else
    put_fail_summary(out, run, opts->color, opts->gate);
  if (run->path_ref) {
    char tally[256];
    pc_report_closer_tally(tally, sizeof tally, run);
    fputs("REFERENCE ", out);
    put_untrusted(out, run->path_ref);
    fprintf(out, ": %s\n", tally);
  }
  if (opts->gate)
    put_gate_summary(out, run, opts->gate, opts->color);
}

/* The whole report to out, top-down: the verdict lines and root causes, the provenance (not in
 * quiet mode), then the table. Each verdict line is printed once (a CI reads one). PC_ENOMEM. */
static int put_report(FILE *out, const pc_run *run, const pc_report_options *opts) {
  pc_cascades cascades;
  if (pc_report_cascades(&cascades, run) < 0)
    return PC_ENOMEM;
  view v = {run, opts, &cascades};
  size_t shown = 0;
  widths w = measure(&v, &shown);
  put_verdict_lines(out, run, opts);
  if (run->verdict != PC_RUN_PASS)
    put_roots(out, &v);
  if (!opts->quiet)
    put_settings(out, opts);
  if (!opts->quiet && put_provenance(out, run, opts->verbose) < 0) {
    pc_report_cascades_free(&cascades);
    return PC_ENOMEM;
  }
  if (shown) {
    fputc('\n', out);
    put_header(out, &w, opts->gate);
  }
  /* run order; quiet: the root causes (and errors) first, then the tensors they explain */
  text_rows rows = {&v, &w};
  size_t n = run->ntensors * (opts->quiet ? 2 : 1);
  int rc = pc_report_put_ordered(out, n, opts, put_row, &rows);
  pc_report_cascades_free(&cascades);
  return rc < 0 ? rc : PC_OK;
}

static int put_text(FILE *out, const pc_run *run, const pc_report_options *opts) {
  static const pc_report_options defaults = PC_REPORT_OPTIONS_INIT;
  return put_report(out, run, opts ? opts : &defaults);
}

int pc_report_text(const char *path, const pc_run *run, const pc_report_options *opts,
                   pc_error *err) {
  return pc_report_write(path, run, opts, "pc_report_text", "the text report", put_text, err);
}
