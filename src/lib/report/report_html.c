/* HTML report (docs/reports.md, "HTML"): one self-contained page, with no network access and no
 * external assets: the summary, the delta table (sortable by clicking a column header; the
 * script is inline), and each compared tensor's ULP histogram as an inline SVG in its row. Every
 * cell carries its sort key in data-v: full-precision numbers for figures, the worst-first rank
 * for the verdict. The tensors a root cause explains follow its row, folded by the script
 * until its button unfolds them. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <inttypes.h> /* PRIu64 */
#include <math.h>     /* isnan, isinf, isfinite, log2, lround, INFINITY */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* calloc, free */

/* Histogram geometry in CSS pixels: bar width, gap between bars, height of the tallest bar. */
enum { BAR_WIDTH = 4, BAR_GAP = 1, HIST_HEIGHT = 24 };

static const char STYLE[] =
    "body{font-family:system-ui,sans-serif;font-size:14px;margin:1.5em;color:#1f2328;"
    "background:#fff}\n"
    "h1{font-size:1.4em}\n"
    "table{border-collapse:collapse;margin-bottom:1em}\n"
    "th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:middle}\n"
    "#delta th{background:#f6f8fa;cursor:pointer;user-select:none;white-space:nowrap}\n"
    "#delta th[aria-sort=ascending]::after{content:\" \\25B2\"}\n"
    "#delta th[aria-sort=descending]::after{content:\" \\25BC\"}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.path,td.details{font-family:ui-monospace,monospace;font-size:.9em}\n"
    "td.details{min-width:24em}\n"
    "tr.fail{background:#ffebe9}tr.error{background:#fff8c5}tr.skipped{color:#656d76}"
    "tr.accepted{background:#f6f8fa}\n"
    ".v-pass{color:#1a7f37}.v-drift,.v-indeterminate,.v-fail{color:#cf222e;font-weight:bold}"
    ".v-error{color:#9a6700;font-weight:bold}\n"
    "svg.hist rect{fill:#0969da}\n"
    "strong.root{color:#cf222e}\n"
    "tr.cascade td.path{padding-left:2em}tr.cascade td.path::before{content:\"\\21B3\\a0\"}\n"
    "button.fold{font:inherit;font-size:.9em;margin-left:.5em;cursor:pointer}\n"
    "p.legend{color:#656d76;font-size:.9em}\n"
    "table.provenance td{font-family:ui-monospace,monospace;font-size:.9em}"
    "th.differs{color:#cf222e}\n";

/* Sorts the rows of #delta by the data-v keys of the clicked column: numbers as numbers, text
 * by locale; empty keys (no figure) last either way. The first click sorts a column the way
 * its data-first attribute says, later clicks reverse it. */
static const char SCRIPT[] =
    "(function () {\n"
    "  var table = document.getElementById('delta');\n"
    "  if (!table) return;\n"
    "  var body = table.tBodies[0], heads = table.tHead.rows[0].cells;\n"
    "  var folds = body.querySelectorAll('button.fold');\n"
    "  function fold(btn, open) {\n"
    "    btn.setAttribute('aria-expanded', open ? 'true' : 'false');\n"
    "    var rows = body.querySelectorAll('tr[data-root=\"' + btn.getAttribute('data-fold') + "
    "'\"]');\n"
    "    Array.prototype.forEach.call(rows, function (r) { r.hidden = !open; });\n"
    "  }\n"
    "  Array.prototype.forEach.call(folds, function (b) {\n"
    "    fold(b, false);\n"
    "    b.addEventListener('click', function () {\n"
    "      fold(b, b.getAttribute('aria-expanded') !== 'true');\n"
    "    });\n"
    "  });\n"
    "  function key(row, col, num) {\n"
    "    var v = row.cells[col].getAttribute('data-v');\n"
    "    if (v === null) v = row.cells[col].textContent;\n"
    "    if (v === '') return null;\n"
    "    return num ? Number(v) : v;\n"
    "  }\n"
    "  function sortBy(col, desc) {\n"
    "    Array.prototype.forEach.call(folds, function (b) { fold(b, true); });\n"
    "    var num = heads[col].getAttribute('data-type') === 'num';\n"
    "    var rows = Array.prototype.slice.call(body.rows);\n"
    "    rows.sort(function (a, b) {\n"
    "      var x = key(a, col, num), y = key(b, col, num);\n"
    "      if (x === null || y === null) return x === y ? 0 : (x === null ? 1 : -1);\n"
    "      var c = num ? (x < y ? -1 : (x > y ? 1 : 0)) : x.localeCompare(y);\n"
    "      return desc ? -c : c;\n"
    "    });\n"
    "    rows.forEach(function (r) { body.appendChild(r); });\n"
    "    for (var k = 0; k < heads.length; k++) heads[k].removeAttribute('aria-sort');\n"
    "    heads[col].setAttribute('aria-sort', desc ? 'descending' : 'ascending');\n"
    "  }\n"
    "  Array.prototype.forEach.call(heads, function (th, col) {\n"
    "    if (!th.hasAttribute('data-type')) return;\n"
    "    th.addEventListener('click', function () {\n"
    "      var now = th.getAttribute('aria-sort');\n"
    "      sortBy(col, now ? now === 'ascending' : th.getAttribute('data-first') === 'desc');\n"
    "    });\n"
    "  });\n"
    "})();\n";

typedef struct page {
  const pc_run *run;
  const pc_gate *gate;
  bool quantiles;       /* a p99 ULP column */
  int buckets;          /* histogram width: the most buckets any tensor uses, at least 1 */
  size_t *rank_of;      /* rank_of[i]: position of tensor i in worst-first order */
  pc_cascades cascades; /* the tensors each root cause explains, folded under its row */
} page;

/* Text from the data (paths, messages) in the page's body: escaped, and isolated in <bdi> so
 * that its direction cannot reorder what surrounds it (docs/reports.md, "Untrusted names"). */
static void put_text(FILE *out, const char *s) {
  pc_report_put_escaped(out, s, PC_ESCAPE_HTML);
}

/* Text the writer made (reasons, figures): escaped, not isolated. */
static void put_plain(FILE *out, const char *s) {
  pc_report_put_xml(out, s);
}

/* A sort key: NaN (a figure that could not be worse) sorts with +inf. */
static void put_num_key(FILE *out, double x) {
  if (isnan(x) || (isinf(x) && x > 0))
    fputs(" data-v=\"Infinity\"", out);
  else if (isinf(x))
    fputs(" data-v=\"-Infinity\"", out);
  else
    fprintf(out, " data-v=\"%.17g\"", x);
}

static void put_figure(FILE *out, double x) {
  fputs("<td class=\"n\"", out);
  put_num_key(out, x);
  fprintf(out, ">%.3g</td>", x);
}

static void put_count(FILE *out, uint64_t n) {
  fprintf(out, "<td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64 "</td>", n, n);
}

static void put_head(FILE *out, const pc_run *run, const pc_gate *gate) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
        "paritycheck: ",
        out);
  fprintf(out, "%s: ", pc_run_verdict_name(pc_report_verdict(run, gate)));
  pc_report_put_xml(out, run->path_a); /* a title holds text only */
  fputs(" vs ", out);
  pc_report_put_xml(out, run->path_b);
  fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", STYLE);
}

static void put_summary_row(FILE *out, const char *label, const char *value) {
  fprintf(out, "<tr><th>%s</th><td>", label);
  put_text(out, value);
  fputs("</td></tr>\n", out);
}

static void put_gate_row(FILE *out, const pc_gate *gate) {
  char tail[64];
  fprintf(out, "<tr><th>%s</th><td>", pc_report_gate_noun(gate));
  put_text(out, gate->path);
  pc_report_gate_tail(tail, sizeof tail, gate);
  fprintf(out, "%s: gate <span class=\"v-%s\">%s</span>, %zu tensor%s fail%s it", tail,
          pc_run_verdict_name(gate->verdict), pc_run_verdict_name(gate->verdict), gate->failures,
          gate->failures == 1 ? "" : "s", gate->failures == 1 ? "s" : "");
  for (int c = 0; c < PC_CHANGE_COUNT_; c++)
    fprintf(out, "%s%zu %s", c ? ", " : "; ", gate->by_change[c], pc_change_name((pc_change)c));
  pc_report_gate_extra(tail, sizeof tail, gate);
  fprintf(out, "%s</td></tr>\n", tail);
}

/* The files' attributes side by side, a differing one marked (docs/reports.md, "Provenance");
 * nothing when neither side has any, or when out of memory. */
static void put_provenance(FILE *out, const pc_run *run) {
  pc_prov_row *rows;
  size_t n;
  if (pc_report_provenance(run, &rows, &n) < 0)
    return;
  if (n)
    fputs("<h2>Provenance</h2>\n<table class=\"provenance\">\n"
          "<tr><th>attribute</th><th>A</th><th>B</th></tr>\n",
          out);
  for (size_t i = 0; i < n; i++) {
    fputs(rows[i].differs ? "<tr><th class=\"differs\">" : "<tr><th>", out);
    put_text(out, rows[i].name);
    fputs(rows[i].differs ? " (differs)</th><td>" : "</th><td>", out);
    put_text(out, pc_report_prov_value(&rows[i], 0));
    fputs("</td><td>", out);
    put_text(out, pc_report_prov_value(&rows[i], 1));
    fputs("</td></tr>\n", out);
  }
  if (n)
    fputs("</table>\n", out);
  free(rows);
}

/* The trajectory plot's frame, in pixels: the plot area is inside the margins. */
enum { PLOT_W = 640, PLOT_H = 240, PLOT_L = 80, PLOT_R = 20, PLOT_T = 20, PLOT_B = 40 };

typedef struct plot {
  const pc_traj_step *steps;
  size_t n;
  double lo, hi; /* the finite losses' range, widened when flat */
} plot;

static double plot_x(const plot *p, size_t k) {
  return PLOT_L + (double)k * (PLOT_W - PLOT_L - PLOT_R) / (double)(p->n - 1);
}

static double plot_y(const plot *p, double v) {
  return PLOT_H - PLOT_B - (v - p->lo) / (p->hi - p->lo) * (PLOT_H - PLOT_T - PLOT_B);
}

/* The envelope's band around A's curve, A +- its pass bound (docs/envelope.md), over the
 * steps that carry one; nothing when none does. */
static void put_band(FILE *out, const plot *p) {
  size_t with = 0;
  for (size_t k = 0; k < p->n; k++)
    with += p->steps[k].band > 0 && isfinite(p->steps[k].a);
  if (!with)
    return;
  fputs("<polygon class=\"envelope\" fill=\"#0969da\" fill-opacity=\"0.15\" points=\"", out);
  for (size_t k = 0, i = 0; k < p->n; k++)
    if (p->steps[k].band > 0 && isfinite(p->steps[k].a))
      fprintf(out, "%s%.2f,%.2f", i++ ? " " : "", plot_x(p, k),
              plot_y(p, p->steps[k].a + p->steps[k].band));
  for (size_t k = p->n; k-- > 0;)
    if (p->steps[k].band > 0 && isfinite(p->steps[k].a))
      fprintf(out, " %.2f,%.2f", plot_x(p, k), plot_y(p, p->steps[k].a - p->steps[k].band));
  fputs("\"/>\n", out);
}

/* One side's curve (0: A, 1: B) through its finite losses. */
static void put_curve(FILE *out, const plot *p, int side) {
  fprintf(out,
          "<polyline class=\"loss-%c\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s "
          "points=\"",
          side ? 'b' : 'a', side ? "#cf222e" : "#0969da", side ? " stroke-dasharray=\"5 3\"" : "");
  for (size_t k = 0; k < p->n; k++) {
    double v = side ? p->steps[k].b : p->steps[k].a;
    if (isfinite(v))
      fprintf(out, "%s%.2f,%.2f", k ? " " : "", plot_x(p, k), plot_y(p, v));
  }
  fputs("\"/>\n", out);
}

/* An SVG plot of A's and B's loss per step, the first divergent step marked (docs/
 * training-runs.md, "The trajectory view"), with the envelope's band around A where the steps
 * carry one; nothing for a run without two steps. Out of memory: no plot. */
static void put_trajectory(FILE *out, const pc_run *run) {
  pc_traj_step *steps;
  plot p = {NULL, 0, INFINITY, -INFINITY};
  long first;
  if (pc_report_trajectory(run, &steps, &p.n, &first) < 0)
    return;
  p.steps = steps;
  for (size_t k = 0; k < p.n; k++)
    for (int side = 0; side < 4; side++) { /* B, A, and A's band's edges */
      double v = side == 1 ? steps[k].b
                           : steps[k].a + (side == 2   ? 1
                                           : side == 3 ? -1
                                                       : 0) *
                                              steps[k].band;
      p.lo = isfinite(v) && v < p.lo ? v : p.lo;
      p.hi = isfinite(v) && v > p.hi ? v : p.hi;
    }
  if (p.n && !(p.hi > p.lo)) { /* flat, or no finite value: a band around it */
    p.lo = isfinite(p.lo) ? p.lo - 1 : -1;
    p.hi = p.lo + 2;
  }
  if (p.n) {
    fprintf(out,
            "<h2>Trajectory</h2>\n<svg class=\"trajectory\" xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "aria-label=\"loss per step of A and B\">\n"
            "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n"
            "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>\n"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>\n"
            "<text x=\"%d\" y=\"%d\">step 1 of %zu</text>\n"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">step %zu</text>\n",
            PLOT_W, PLOT_H, PLOT_W, PLOT_H, PLOT_L, PLOT_H - PLOT_B, PLOT_W - PLOT_R,
            PLOT_H - PLOT_B, PLOT_L, PLOT_T, PLOT_L, PLOT_H - PLOT_B, PLOT_L - 6, PLOT_T + 4, p.hi,
            PLOT_L - 6, PLOT_H - PLOT_B, p.lo, PLOT_L, PLOT_H - PLOT_B + 16, p.n, PLOT_W - PLOT_R,
            PLOT_H - PLOT_B + 16, p.n);
    put_band(out, &p);
    put_curve(out, &p, 0);
    put_curve(out, &p, 1);
  }
  if (first >= 0) {
    double x = plot_x(&p, (size_t)first);
    fprintf(out,
            "<line class=\"first-divergence\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
            "stroke=\"#cf222e\" stroke-dasharray=\"2 2\"/>\n<text x=\"%.2f\" y=\"%d\">"
            "first divergence: ",
            x, PLOT_T, x, PLOT_H - PLOT_B, x + 4, PLOT_T + 12);
    pc_report_put_xml(out, pc_run_at(run, steps[first].tensor)->file);
    fputs("</text>\n", out);
  }
  if (p.n)
    fprintf(out,
            "<text x=\"%d\" y=\"%d\" fill=\"#0969da\">A (reference)</text>\n"
            "<text x=\"%d\" y=\"%d\" fill=\"#cf222e\">B (candidate, dashed)</text>\n</svg>\n",
            PLOT_L + 120, PLOT_H - 6, PLOT_L + 240, PLOT_H - 6);
  free(steps);
}

static void put_summary(FILE *out, const page *pg, const pc_report_options *opts) {
  const pc_run *run = pg->run;
  const pc_tensor *first = pc_report_first_divergence(run);
  const char *verdict = pc_run_verdict_name(pc_report_verdict(run, pg->gate));
  fprintf(out, "<h1>paritycheck: <span class=\"v-%s\">%s</span></h1>\n<table class=\"summary\">\n",
          verdict, verdict);
  put_summary_row(out, "A (reference)", run->path_a);
  put_summary_row(out, "B (candidate)", run->path_b);
  put_summary_row(out, "profile", pc_report_profile(opts));
  for (size_t i = 0; i < pc_report_nsettings(opts); i++) {
    fputs("<tr><th>", out);
    put_text(out, opts->settings[i].name);
    fputs("</th><td>", out);
    put_text(out, opts->settings[i].value);
    fputs("</td></tr>\n", out);
  }
  fprintf(out, "<tr><th>verdict</th><td><span class=\"v-%s\">%s</span>; ",
          pc_run_verdict_name(run->verdict), pc_run_verdict_name(run->verdict));
  pc_report_put_tally(out, run);
  fputs("</td></tr>\n", out);
  put_summary_row(out, "first divergence", first ? first->path : "none");
  if (run->path_ref) {
    char tally[256];
    fputs("<tr><th>R (reference)</th><td>", out);
    put_text(out, run->path_ref);
    pc_report_closer_tally(tally, sizeof tally, run);
    fprintf(out, "; %s</td></tr>\n", tally);
  }
  if (pg->gate)
    put_gate_row(out, pg->gate);
  fputs("</table>\n", out);
  put_trajectory(out, run);
  put_provenance(out, run);
}

static void put_column(FILE *out, const char *name, const char *type, const char *first) {
  fprintf(out, "<th data-type=\"%s\" data-first=\"%s\">%s</th>", type, first, name);
}

static void put_table_head(FILE *out, const page *pg) {
  fputs("<table id=\"delta\">\n<thead><tr>", out);
  put_column(out, "#", "num", "asc");
  put_column(out, "verdict", "num", "asc");
  if (pg->gate)
    put_column(out, pc_report_gate_column(pg->gate), "text", "asc");
  put_column(out, "tensor", "text", "asc");
  put_column(out, "dtype", "text", "asc");
  put_column(out, "shape", "text", "asc");
  put_column(out, "mismatches", "num", "desc");
  put_column(out, "max abs", "num", "desc");
  put_column(out, "max rel", "num", "desc");
  put_column(out, "max ULP", "num", "desc");
  if (pg->quantiles)
    put_column(out, "p99 ULP", "num", "desc");
  put_column(out, "SNR dB", "num", "asc");
  fputs("<th>ULP histogram</th>", out);
  if (pg->run->path_ref)
    put_column(out, "closer to R", "text", "asc");
  fputs("<th>details</th></tr></thead>\n<tbody>\n", out);
}

/* Bars of log-scaled height, so that a bucket of 1 stays visible beside one of a million; each
 * bar's <title> gives its bucket and exact count. */
static void put_histogram(FILE *out, const pc_stats *s, int buckets) {
  uint64_t top = 0;
  for (int k = 0; k < PC_ULP_BUCKETS; k++)
    top = s->ulp_hist[k] > top ? s->ulp_hist[k] : top;
  int width = buckets * (BAR_WIDTH + BAR_GAP);
  fprintf(out,
          "<svg class=\"hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"ULP histogram\">",
          width, HIST_HEIGHT, width, HIST_HEIGHT);
  for (int k = 0; k < buckets && top; k++) {
    char label[48];
    if (!s->ulp_hist[k])
      continue;
    long h = lround(HIST_HEIGHT * log2(1 + (double)s->ulp_hist[k]) / log2(1 + (double)top));
    h = h < 1 ? 1 : h;
    pc_report_bucket_label(label, sizeof label, k);
    fprintf(out,
            "<rect x=\"%d\" y=\"%ld\" width=\"%d\" height=\"%ld\"><title>%s ULP: %" PRIu64
            "</title></rect>",
            k * (BAR_WIDTH + BAR_GAP), HIST_HEIGHT - h, BAR_WIDTH, h, label, s->ulp_hist[k]);
  }
  fputs("</svg>", out);
}

static void put_figures(FILE *out, const page *pg, const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  if (!pc_report_has_stats(t->verdict)) {
    fputs("<td data-v=\"\"></td><td data-v=\"\"></td><td data-v=\"\"></td><td data-v=\"\"></td>",
          out);
    fputs(pg->quantiles ? "<td data-v=\"\"></td><td data-v=\"\"></td><td></td>"
                        : "<td data-v=\"\"></td><td></td>",
          out);
    return;
  }
  fputs("<td class=\"n\"", out);
  put_num_key(out, pc_report_mismatch_fraction(s));
  fprintf(out, ">%" PRIu64 "/%" PRIu64 "</td>", s->mismatches, s->count);
  put_figure(out, s->max_abs);
  put_figure(out, s->max_rel);
  put_count(out, s->max_ulp);
  if (pg->quantiles && s->has_quantiles) {
    fputs("<td class=\"n\"", out);
    put_num_key(out, s->q_ulp[PC_REPORT_P99]);
    fprintf(out, ">%.0f</td>", s->q_ulp[PC_REPORT_P99]);
  } else if (pg->quantiles) {
    fputs("<td data-v=\"\"></td>", out);
  }
  put_figure(out, pc_stats_aggregates(s).snr_db);
  fputs("<td>", out);
  put_histogram(out, s, pg->buckets);
  fputs("</td>", out);
}

static const char *row_class(const page *pg, size_t i) {
  pc_verdict v = pc_run_at(pg->run, i)->verdict;
  if (pc_report_fails(pg->run, pg->gate, i))
    return "fail";
  if (pc_report_accepted(pg->run, i)) /* reported, no failure: its own look */
    return "accepted";
  return v == PC_VERDICT_ERROR ? "error" : v == PC_VERDICT_SKIPPED ? "skipped" : "ok";
}

/* Why a tensor fails and, for a drift, where it is worst; a root cause in bold with a button
 * that folds its cascade, a member with its root cause (docs/reports.md, "HTML"). */
static void put_details(FILE *out, const page *pg, size_t i) {
  const pc_tensor *t = pc_run_at(pg->run, i);
  char text[PC_REASON_MAX];
  long root = pc_report_root(pg->run, i);
  size_t caused = pc_report_caused_count(&pg->cascades, i);
  fputs("<td class=\"details\">", out);
  if (pc_report_is_root(pg->run, i))
    fputs("<strong class=\"root\">root cause</strong> ", out);
  pc_report_reason(text, sizeof text, t);
  /* pc_report_reason quotes the message of a tensor that was not compared for a reason of its
   * data; the others it words itself */
  if (t->verdict >= PC_VERDICT_DTYPE_MISMATCH && !pc_report_is_judged(t->verdict) && t->message)
    put_text(out, text);
  else
    put_plain(out, text);
  if (root >= 0) {
    fputs("; caused by ", out);
    put_text(out, pc_run_at(pg->run, root)->path);
  }
  if (pc_report_accepted(pg->run, i))
    fputs("; accepted by the run (indeterminate)", out);
  if (pc_report_is_judged(t->verdict)) {
    pc_report_worst_text(text, sizeof text, t, false);
    if (text[0])
      fputs("; ", out);
    put_plain(out, text);
  }
  if (pg->gate && pg->gate->tensors[i].approval) {
    fputs("; ", out);
    put_text(out, pg->gate->tensors[i].approval);
  }
  if (pc_report_has_metrics(t)) {
    pc_report_metrics(text, sizeof text, t, false);
    fputs(t->verdict == PC_VERDICT_PASS ? "metrics " : "; metrics ", out);
    put_plain(out, text);
  }
  if (caused)
    fprintf(out,
            " <button type=\"button\" class=\"fold\" data-fold=\"%zu\" aria-expanded=\"true\">"
            "%zu tensor%s caused by this</button>",
            i, caused, caused == 1 ? "" : "s");
  fputs("</td>", out);
}

static void put_row(FILE *out, const page *pg, size_t i) {
  const pc_tensor *t = pc_run_at(pg->run, i);
  char text[PC_REASON_MAX];
  long root = pc_report_root(pg->run, i);
  fprintf(out, "<tr class=\"%s%s\"", row_class(pg, i), root >= 0 ? " cascade" : "");
  if (root >= 0)
    fprintf(out, " data-root=\"%ld\"", root);
  fprintf(out, "><td class=\"n\" data-v=\"%zu\">%zu</td>", i, i + 1);
  fprintf(out, "<td data-v=\"%zu\" class=\"v-%s\">%s</td>", pg->rank_of[i],
          pc_verdict_name(t->verdict), pc_verdict_name(t->verdict));
  if (pg->gate)
    fprintf(out, "<td class=\"%s\">%s</td>", pg->gate->tensors[i].fails ? "v-fail" : "",
            pc_report_change(pg->gate, pg->run, i));
  fputs("<td class=\"path\">", out);
  put_text(out, t->path);
  pc_report_dtypes(text, sizeof text, t);
  fprintf(out, "</td><td>%s</td><td>", text);
  char dims[PC_DIMS_TEXT_MAX];
  fputs(pc_report_dims(dims, t->rank, t->dims), out);
  fputs("</td>", out);
  put_figures(out, pg, t);
  if (pg->run->path_ref) {
    pc_report_closer_text(text, sizeof text, t);
    fputs("<td class=\"closer\">", out);
    put_plain(out, text);
    fputs("</td>", out);
  }
  put_details(out, pg, i);
  fputs("</tr>\n", out);
}

/* The k-th tensor in `order` (pc_report_row_fn): a member of a cascade follows its root, so
 * it has no row of its own here; a root brings its members. */
typedef struct html_rows {
  const page *pg;
  const size_t *order;
} html_rows;

static int put_rows(FILE *out, size_t k, void *ctx) {
  const html_rows *r = ctx;
  const page *pg = r->pg;
  size_t i = r->order[k];
  if (pc_report_root(pg->run, i) >= 0)
    return PC_OK;
  put_row(out, pg, i);
  for (size_t m = pg->cascades.first[i]; m < pg->cascades.first[i + 1]; m++)
    put_row(out, pg, pg->cascades.members[m]);
  return PC_OK;
}

static int put_page(FILE *out, const page *pg, const pc_report_options *opts, const size_t *order) {
  put_head(out, pg->run, pg->gate);
  put_summary(out, pg, opts);
  put_table_head(out, pg);
  html_rows rows = {pg, order};
  int rc = pc_report_put_ordered(out, pg->run->ntensors, opts, put_rows, &rows);
  fputs("</tbody>\n</table>\n<p class=\"legend\">Click a column header to sort; "
        "<b>verdict</b> sorts worst first, <b>#</b> in run order. ULP histogram: buckets 0, 1, "
        "2-3, 4-7, &hellip; from left to right, bar heights log-scaled; hover a bar for its "
        "count. A <b>root cause</b>'s button shows the tensors it explains (sorting shows them "
        "all).</p>\n<script>\n",
        out);
  fputs(SCRIPT, out);
  fputs("</script>\n</body>\n</html>\n", out);
  return rc;
}

static int widest_histogram(const pc_run *run) {
  int most = 1;
  for (size_t i = 0; i < run->ntensors; i++) {
    int used = pc_report_has_stats(pc_run_at(run, i)->verdict)
                   ? pc_report_hist_used(&pc_run_at(run, i)->stats)
                   : 0;
    most = used > most ? used : most;
  }
  return most;
}

int pc_report_html(const char *path, const pc_run *run, const pc_report_options *opts,
                   pc_error *err) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  int rc = pc_report_check(run, opts, "pc_report_html", err);
  if (rc < 0 || !path)
    return rc < 0 ? rc : pc_error_set(err, PC_EUSAGE, "pc_report_html: a path is required");
  pc_sort sort = opts ? opts->sort : PC_SORT_WORST;
  size_t *worst = pc_report_row_order(run, gate, PC_SORT_WORST);
  size_t *order = sort == PC_SORT_WORST ? worst : pc_report_row_order(run, gate, sort);
  page pg = {run,
             gate,
             pc_report_any_quantiles(run),
             widest_histogram(run),
             calloc(run->ntensors + 1, sizeof(size_t)),
             {NULL, NULL}};
  if (!worst || !order || !pg.rank_of || pc_report_cascades(&pg.cascades, run) < 0)
    rc = pc_error_set(err, PC_ENOMEM, "out of memory writing the HTML report");
  pc_report_file f;
  if (rc == PC_OK)
    rc = pc_report_open(&f, path, err);
  if (rc == PC_OK) {
    for (size_t k = 0; k < run->ntensors; k++)
      pg.rank_of[worst[k]] = k;
    bool oom = put_page(f.f, &pg, opts, order) < 0;
    f.failed = f.failed || oom; /* no partial report stays behind */
    rc = pc_report_close(&f, "the HTML report", err);
    if (oom)
      rc = pc_error_set(err, PC_ENOMEM, "out of memory writing the HTML report");
  }
  if (order != worst)
    free(order);
  free(worst);
  free(pg.rank_of);
  pc_report_cascades_free(&pg.cascades);
  return rc;
}
