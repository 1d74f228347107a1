/* Markdown report (docs/reports.md, "Markdown"): a short header and a GitHub-flavoured delta
 * table, one row per tensor (those a root cause explains folded into its row), worst first or in
 * run order, cut after max_rows rows with a count of the rest. Figures have 3 significant digits,
 * ULP distances are integers. Text that comes from the data (paths, messages, values) sits in code
 * spans, so no character of it can turn into Markdown. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* calloc, free */
#include <string.h>   /* strlen */

/* Row markers: a failing row (with a gate: failing the gate), and a tensor that could not be
 * read. */
static const char MARK_FAIL[] = "\xE2\x9D\x8C";              /* U+274C cross mark */
static const char MARK_ERROR[] = "\xE2\x9A\xA0\xEF\xB8\x8F"; /* U+26A0 U+FE0F warning sign */
static const char TIMES[] = "\xC3\x97";                      /* U+00D7 multiplication sign */
static const char ELLIPSIS[] = "\xE2\x80\xA6";               /* U+2026 horizontal ellipsis */

/* The longest run of backticks in s. */
static size_t longest_backticks(const char *s) {
  size_t best = 0, run = 0;
  for (; *s; s++) {
    run = *s == '`' ? run + 1 : 0;
    best = run > best ? run : best;
  }
  return best;
}

static void put_fence(FILE *out, size_t n) {
  for (size_t k = 0; k < n; k++)
    fputc('`', out);
}

/* s as a code span inside a table cell: a fence longer than any backtick run in s, a space
 * inside the fence where s starts or ends with a backtick, and s escaped for Markdown (control
 * and bidi characters and invalid UTF-8 as visible escapes, '|' as "\|", since GFM splits cells
 * before it parses code spans; docs/reports.md, "Untrusted names"). */
static void put_code(FILE *out, const char *s) {
  size_t fence = longest_backticks(s) + 1;
  size_t len = strlen(s);
  bool pad = len && (s[0] == '`' || s[len - 1] == '`');
  put_fence(out, fence);
  if (pad)
    fputc(' ', out);
  pc_escape_put(out, s, len, PC_ESCAPE_MARKDOWN);
  if (pad)
    fputc(' ', out);
  put_fence(out, fence);
}

/* "3×4×5"; "scalar" for rank 0; "-" when unknown. */
static void put_shape(FILE *out, int rank, const uint64_t *dims) {
  if (rank < 0)
    fputs("-", out);
  else if (rank == 0)
    fputs("scalar", out);
  for (int k = 0; k < rank; k++)
    fprintf(out, "%s%" PRIu64, k ? TIMES : "", dims[k]);
}

typedef struct table {
  const pc_run *run;
  const pc_gate *gate;
  bool quantiles;              /* a p99 ULP column */
  const pc_cascades *cascades; /* the tensors each root cause explains, folded into its row */
  size_t max_rows;
  bool *shown; /* by run index: its row is in the table (room for every tensor, all false) */
} table;

static void put_header_row(FILE *out, const table *tb) {
  fputs("| | tensor | verdict |", out);
  if (tb->gate)
    fprintf(out, " %s |", pc_report_gate_column(tb->gate));
  fputs(" dtype | shape | mismatches | max abs | max rel | max ULP |", out);
  if (tb->quantiles)
    fputs(" p99 ULP |", out);
  fputs(" SNR dB |", out);
  if (tb->run->path_ref)
    fputs(" closer to R |", out);
  fputs(" details |\n|:-:|:--|:--|", out);
  if (tb->gate)
    fputs(":--|", out);
  fputs(":--|:--|--:|--:|--:|--:|", out);
  if (tb->quantiles)
    fputs("--:|", out);
  fputs(tb->run->path_ref ? "--:|:--|:--|\n" : "--:|:--|\n", out);
}

static void put_figures(FILE *out, const pc_tensor *t, bool quantiles) {
  const pc_stats *s = &t->stats;
  if (!pc_report_has_stats(t->verdict)) {
    fputs(" | | | |", out);
    fputs(quantiles ? " | |" : " |", out);
    return;
  }
  fprintf(out, " %" PRIu64 "/%" PRIu64 " | %.3g | %.3g | %" PRIu64 " |", s->mismatches, s->count,
          s->max_abs, s->max_rel, s->max_ulp);
  if (quantiles && s->has_quantiles)
    fprintf(out, " %.0f |", s->q_ulp[PC_REPORT_P99]);
  else if (quantiles)
    fputs(" |", out);
  fprintf(out, " %.3g |", pc_stats_aggregates(s).snr_db);
}

/* Why a tensor fails (the judge's reasons and diagnosis, or the structural reason), for a drift
 * or an indeterminate tensor where it is worst, and the product metrics: "rel_rms 0.005 > limit
 * 0.00103; diagnosis: scaled by 2.000; worst [3]: a=1, b=1.01; top1_agreement 1 (min 0.99)". */
static void details_text(char *buf, size_t size, const pc_tensor *t) {
  pc_report_reason(buf, size, t);
  size_t n = strlen(buf);
  if (pc_report_is_judged(t->verdict) && n + 2 < size) {
    pc_report_worst_text(buf + n + 2, size - n - 2, t, false);
    if (buf[n + 2])
      memcpy(buf + n, "; ", 2);
  }
  n = strlen(buf);
  if (pc_report_has_metrics(t) && n + 2 < size) {
    memcpy(buf + n, n ? "; " : "", n ? 3 : 1);
    n = strlen(buf);
    pc_report_metrics(buf + n, size - n, t, false);
  }
}

/* The cascade of root i, folded: "<details><summary>2 tensors caused by this</summary>" and a
 * line per member (at most max_rows, then how many more), each its path, reasons and worst
 * element: inline HTML that GitHub renders inside a table cell; the data stay in code spans. */
static void put_fold(FILE *out, const table *tb, size_t i) {
  const pc_cascades *c = tb->cascades;
  size_t n = pc_report_caused_count(c, i);
  if (!n)
    return;
  fprintf(out, " <details><summary>%zu tensor%s caused by this</summary>", n, n == 1 ? "" : "s");
  for (size_t k = 0; k < n && k < tb->max_rows; k++) {
    size_t m = c->members[c->first[i] + k];
    char text[PC_REASON_MAX];
    details_text(text, sizeof text, pc_run_at(tb->run, m));
    bool fails = pc_report_fails(tb->run, tb->gate, m);
    fprintf(out, "%s%s%s", k ? "<br>" : "", fails ? MARK_FAIL : "", fails ? " " : "");
    put_code(out, pc_run_at(tb->run, m)->path);
    fputc(' ', out);
    put_code(out, text);
  }
  if (n > tb->max_rows)
    fprintf(out, "<br>%s %zu more", ELLIPSIS, n - tb->max_rows);
  fputs("</details>", out);
}

/* A failing tensor says why, a root cause in bold with its cascade folded under it; a tensor
 * that was not compared says why. */
static void put_details(FILE *out, const table *tb, size_t i) {
  const pc_tensor *t = pc_run_at(tb->run, i);
  char text[PC_REASON_MAX];
  details_text(text, sizeof text, t);
  if (pc_report_is_root(tb->run, i))
    fputs(" **root cause**", out);
  if (text[0]) {
    fputc(' ', out);
    put_code(out, text);
  }
  if (tb->gate && tb->gate->tensors[i].approval) {
    fputc(' ', out);
    put_code(out, tb->gate->tensors[i].approval);
  }
  put_fold(out, tb, i);
  fputs(" |\n", out);
}

static void put_row(FILE *out, const table *tb, size_t i) {
  const pc_tensor *t = pc_run_at(tb->run, i);
  bool fails = pc_report_fails(tb->run, tb->gate, i);
  const char *mark = fails ? MARK_FAIL : t->verdict == PC_VERDICT_ERROR ? MARK_ERROR : "";
  fprintf(out, "| %s%s| ", mark, *mark ? " " : "");
  put_code(out, t->path);
  /* bold for what fails the run; an indeterminate tensor the run accepts says so instead */
  bool accepted = pc_report_accepted(tb->run, i);
  bool strong = (pc_verdict_is_failure(t->verdict) && !accepted) || t->verdict == PC_VERDICT_ERROR;
  fprintf(out, strong ? " | **%s** |" : " | %s%s |", pc_verdict_name(t->verdict),
          accepted ? " (accepted)" : "");
  if (tb->gate)
    fprintf(out, tb->gate->tensors[i].fails ? " **%s** |" : " %s |",
            pc_report_change(tb->gate, tb->run, i));
  char dtypes[96];
  pc_report_dtypes(dtypes, sizeof dtypes, t);
  fprintf(out, " %s | ", dtypes);
  put_shape(out, t->rank, t->dims);
  fputs(" |", out);
  put_figures(out, t, tb->quantiles);
  if (tb->run->path_ref) {
    char closer[PC_REASON_MAX];
    pc_report_closer_text(closer, sizeof closer, t);
    fprintf(out, " %s |", closer);
  }
  put_details(out, tb, i);
}

static void put_gate_line(FILE *out, const pc_gate *gate) {
  char tail[64];
  fprintf(out, "- **%s**: ", pc_report_gate_noun(gate));
  put_code(out, gate->path);
  pc_report_gate_tail(tail, sizeof tail, gate);
  fprintf(out, "%s: gate %s, %zu tensor%s fail%s it", tail, pc_run_verdict_name(gate->verdict),
          gate->failures, gate->failures == 1 ? "" : "s", gate->failures == 1 ? "s" : "");
  for (int c = 0; c < PC_CHANGE_COUNT_; c++)
    fprintf(out, "%s%zu %s", c ? ", " : "; ", gate->by_change[c], pc_change_name((pc_change)c));
  pc_report_gate_extra(tail, sizeof tail, gate);
  fprintf(out, "%s\n", tail);
}

/* The files' attributes side by side in a folded table, a differing one marked (docs/
 * reports.md, "Provenance"); nothing when neither side has any. */
static int put_provenance(FILE *out, const pc_run *run) {
  pc_prov_row *rows;
  size_t n, differ = 0;
  if (pc_report_provenance(run, &rows, &n) < 0)
    return PC_ENOMEM;
  for (size_t i = 0; i < n; i++)
    differ += rows[i].differs;
  if (n)
    fprintf(out,
            "\n<details><summary>provenance: %zu file attribute%s, %zu differ%s</summary>\n\n"
            "| attribute | A | B |\n|---|---|---|\n",
            n, n == 1 ? "" : "s", differ, differ == 1 ? "s" : "");
  for (size_t i = 0; i < n; i++) {
    fputs(rows[i].differs ? "| **" : "| ", out);
    put_code(out, rows[i].name);
    fputs(rows[i].differs ? "** (differs) | " : " | ", out);
    put_code(out, pc_report_prov_value(&rows[i], 0));
    fputs(" | ", out);
    put_code(out, pc_report_prov_value(&rows[i], 1));
    fputs(" |\n", out);
  }
  if (n)
    fputs("\n</details>\n", out);
  free(rows);
  return PC_OK;
}

static void put_header(FILE *out, const pc_run *run, const pc_report_options *opts) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  const pc_tensor *first = pc_report_first_divergence(run);
  fprintf(out, "## paritycheck: %s\n\n- **A** (reference): ",
          pc_run_verdict_name(pc_report_verdict(run, gate)));
  put_code(out, run->path_a);
  fputs("\n- **B** (candidate): ", out);
  put_code(out, run->path_b);
  fputs("\n- **profile**: ", out);
  put_code(out, pc_report_profile(opts));
  for (size_t i = 0; i < pc_report_nsettings(opts); i++) {
    fputs("\n- **", out);
    pc_escape_put(out, opts->settings[i].name, strlen(opts->settings[i].name), PC_ESCAPE_MARKDOWN);
    fputs("**: ", out);
    put_code(out, opts->settings[i].value);
  }
  fprintf(out, "\n- **verdict**: %s; ", pc_run_verdict_name(run->verdict));
  pc_report_put_tally(out, run);
  fputs("\n- **first divergence**: ", out);
  if (first)
    put_code(out, first->path);
  else
    fputs("none", out);
  fputc('\n', out);
  if (run->path_ref) {
    char tally[256];
    fputs("- **R** (reference of the three-way mode): ", out);
    put_code(out, run->path_ref);
    pc_report_closer_tally(tally, sizeof tally, run);
    fprintf(out, "; %s\n", tally);
  }
  if (gate)
    put_gate_line(out, gate);
}

/* The rows that were cut, with the tensors folded into them: counted in run order, not in the
 * table's, since a count has no order and a pass in run order reads the records in the order
 * they lie (worst first, a spilled run faulted a page in for nearly every row). */
static void put_rest(FILE *out, const table *tb) {
  const pc_cascades *c = tb->cascades;
  size_t rest = 0, failing = 0;
  for (size_t i = 0; i < tb->run->ntensors; i++) {
    if (tb->shown[i] || pc_report_root(tb->run, i) >= 0)
      continue; /* counted with its root */
    rest += 1 + pc_report_caused_count(c, i);
    failing += pc_report_fails(tb->run, tb->gate, i);
    for (size_t m = c->first[i]; m < c->first[i + 1]; m++)
      failing += pc_report_fails(tb->run, tb->gate, c->members[m]);
  }
  if (rest)
    fprintf(out, "\n%zu more tensor%s not shown (%zu of them failing).\n", rest,
            rest == 1 ? "" : "s", failing);
}

/* The per-step loss table of a training run compared as folders (docs/training-runs.md, "The
 * trajectory view"); nothing for a run without two steps. The envelope column: the honest
 * bound on |b - a| its envelope measured (docs/envelope.md), "—" without one. Out of memory:
 * no table. */
static void put_trajectory(FILE *out, const pc_run *run) {
  pc_traj_step *steps;
  size_t n;
  long first;
  if (pc_report_trajectory(run, &steps, &n, &first) < 0)
    return;
  if (n)
    fputs("\n### Trajectory: the loss per step\n\n"
          "| step | loss A | loss B | relative gap | verdict | envelope |\n"
          "|---|---:|---:|---:|---|---|\n",
          out);
  for (size_t k = 0; k < n; k++) {
    const pc_tensor *t = pc_run_at(run, steps[k].tensor);
    const char *bold = pc_verdict_is_failure(t->verdict) ? "**" : "";
    fputs("| ", out);
    put_code(out, t->path);
    fprintf(out, "%s | %.9g | %.9g | %.3g | %s%s%s | ",
            (long)k == first ? " (first divergence)" : "", steps[k].a, steps[k].b, steps[k].gap,
            bold, pc_verdict_name(t->verdict), bold);
    if (t->envelope.present)
      fprintf(out, "\xC2\xB1%.3g |\n", steps[k].band);
    else
      fputs("\xE2\x80\x94 |\n", out);
  }
  free(steps);
}

/* One row per tensor but the cascade members, which are folded into their root's row. */
static void put_markdown(FILE *out, const pc_run *run, const pc_report_options *opts,
                         const size_t *order, const pc_cascades *cascades, bool *shown) {
  table tb = {run,
              opts ? opts->gate : NULL,
              pc_report_any_quantiles(run),
              cascades,
              opts && opts->max_rows ? opts->max_rows : PC_REPORT_MAX_ROWS,
              shown};
  put_header(out, run, opts);
  put_provenance(out, run); /* out of memory: no provenance rather than no report */
  put_trajectory(out, run);
  if (!run->ntensors)
    return;
  fputc('\n', out);
  put_header_row(out, &tb);
  size_t k = 0;
  for (size_t rows = 0; k < run->ntensors && rows < tb.max_rows; k++)
    if (pc_report_root(run, order[k]) < 0) {
      put_row(out, &tb, order[k]);
      shown[order[k]] = true;
      rows++;
    }
  put_rest(out, &tb);
}

int pc_report_markdown(const char *path, const pc_run *run, const pc_report_options *opts,
                       pc_error *err) {
  int rc = pc_report_check(run, opts, "pc_report_markdown", err);
  if (rc < 0 || !path)
    return rc < 0 ? rc : pc_error_set(err, PC_EUSAGE, "pc_report_markdown: a path is required");
  size_t *order =
      pc_report_row_order(run, opts ? opts->gate : NULL, opts ? opts->sort : PC_SORT_WORST);
  bool *shown = calloc(run->ntensors + 1, sizeof *shown);
  pc_cascades cascades;
  if (!order || !shown || pc_report_cascades(&cascades, run) < 0) {
    free(order);
    free(shown);
    return pc_error_set(err, PC_ENOMEM, "out of memory writing the Markdown report");
  }
  pc_report_file f;
  rc = pc_report_open(&f, path, err);
  if (rc == PC_OK) {
    put_markdown(f.f, run, opts, order, &cascades, shown);
    rc = pc_report_close(&f, "the Markdown report", err);
  }
  pc_report_cascades_free(&cascades);
  free(shown);
  free(order);
  return rc;
}
