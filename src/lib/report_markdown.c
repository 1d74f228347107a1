/* Markdown report (docs/reports.md, "Markdown"): a short header and a GitHub-flavoured delta
 * table, one row per tensor, worst first or in run order, cut after max_rows rows with a count of
 * the rest. Figures have 3 significant digits, ULP distances are integers. Text that comes from
 * the data (paths, messages, values) sits in code spans, so no character of it can turn into
 * Markdown. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* free */
#include <string.h>   /* strlen */

/* Row markers: a failing row (with a gate: failing the gate), and a tensor that could not be
 * read. */
static const char MARK_FAIL[] = "\xE2\x9D\x8C";              /* U+274C cross mark */
static const char MARK_ERROR[] = "\xE2\x9A\xA0\xEF\xB8\x8F"; /* U+26A0 U+FE0F warning sign */
static const char TIMES[] = "\xC3\x97";                      /* U+00D7 multiplication sign */

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
 * inside the fence where s starts or ends with a backtick, '|' escaped (GFM splits cells before
 * it parses code spans), control characters and invalid UTF-8 as '?'. */
static void put_code(FILE *out, const char *s) {
  size_t fence = longest_backticks(s) + 1;
  size_t len = strlen(s);
  bool pad = len && (s[0] == '`' || s[len - 1] == '`');
  put_fence(out, fence);
  if (pad)
    fputc(' ', out);
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    size_t n = pc_report_utf8_len(p);
    if (n == 0 || *p < 0x20 || *p == 0x7F) {
      fputc('?', out);
      p++;
    } else {
      if (*p == '|')
        fputc('\\', out);
      fwrite(p, 1, n, out);
      p += n;
    }
  }
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
  bool quantiles; /* a p99 ULP column */
} table;

static void put_header_row(FILE *out, const table *tb) {
  fputs("| | tensor | verdict |", out);
  if (tb->gate)
    fputs(" baseline |", out);
  fputs(" dtype | shape | mismatches | max abs | max rel | max ULP |", out);
  if (tb->quantiles)
    fputs(" p99 ULP |", out);
  fputs(" SNR dB | details |\n|:-:|:--|:--|", out);
  if (tb->gate)
    fputs(":--|", out);
  fputs(":--|:--|--:|--:|--:|--:|", out);
  if (tb->quantiles)
    fputs("--:|", out);
  fputs("--:|:--|\n", out);
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

/* A drift shows where it is worst; a tensor that was not compared, why. */
static void put_details(FILE *out, const pc_tensor *t) {
  char text[PC_REASON_MAX];
  if (t->verdict == PC_VERDICT_DRIFT)
    pc_report_worst_text(text, sizeof text, t, false);
  else
    pc_report_reason(text, sizeof text, t);
  if (text[0]) {
    fputc(' ', out);
    put_code(out, text);
  }
  fputs(" |\n", out);
}

static void put_row(FILE *out, const table *tb, size_t i) {
  const pc_tensor *t = &tb->run->tensors[i];
  bool fails = pc_report_fails(tb->run, tb->gate, i);
  const char *mark = fails ? MARK_FAIL : t->verdict == PC_VERDICT_ERROR ? MARK_ERROR : "";
  fprintf(out, "| %s%s| ", mark, *mark ? " " : "");
  put_code(out, t->path);
  bool strong = pc_verdict_is_failure(t->verdict) || t->verdict == PC_VERDICT_ERROR;
  fprintf(out, strong ? " | **%s** |" : " | %s |", pc_verdict_name(t->verdict));
  if (tb->gate)
    fprintf(out, tb->gate->tensors[i].fails ? " **%s** |" : " %s |", pc_report_change(tb->gate, i));
  char dtypes[96];
  pc_report_dtypes(dtypes, sizeof dtypes, t);
  fprintf(out, " %s | ", dtypes);
  put_shape(out, t->rank, t->dims);
  fputs(" |", out);
  put_figures(out, t, tb->quantiles);
  put_details(out, t);
}

static void put_gate_line(FILE *out, const pc_gate *gate) {
  fputs("- **baseline**: ", out);
  put_code(out, gate->path);
  fprintf(out, " at factor %g: gate %s, %zu tensor%s fail%s it", gate->factor,
          pc_run_verdict_name(gate->verdict), gate->failures, gate->failures == 1 ? "" : "s",
          gate->failures == 1 ? "s" : "");
  for (int c = 0; c < PC_CHANGE_COUNT_; c++)
    fprintf(out, "%s%zu %s", c ? ", " : "; ", gate->by_change[c], pc_change_name((pc_change)c));
  if (gate->baseline_only)
    fprintf(out, ", %zu only in the baseline", gate->baseline_only);
  fputc('\n', out);
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
  fprintf(out, "\n- **verdict**: %s; ", pc_run_verdict_name(run->verdict));
  pc_report_put_tally(out, run);
  fputs("\n- **first divergence**: ", out);
  if (first)
    put_code(out, first->path);
  else
    fputs("none", out);
  fputc('\n', out);
  if (gate)
    put_gate_line(out, gate);
}

static void put_rest(FILE *out, const table *tb, const size_t *order, size_t from) {
  size_t rest = tb->run->ntensors - from, failing = 0;
  for (size_t k = from; k < tb->run->ntensors; k++)
    failing += pc_report_fails(tb->run, tb->gate, order[k]);
  fprintf(out, "\n%zu more tensor%s not shown (%zu of them failing).\n", rest, rest == 1 ? "" : "s",
          failing);
}

static void put_markdown(FILE *out, const pc_run *run, const pc_report_options *opts,
                         const size_t *order) {
  table tb = {run, opts ? opts->gate : NULL, pc_report_any_quantiles(run)};
  size_t max_rows = opts && opts->max_rows ? opts->max_rows : PC_REPORT_MAX_ROWS;
  size_t rows = run->ntensors < max_rows ? run->ntensors : max_rows;
  put_header(out, run, opts);
  if (!rows)
    return;
  fputc('\n', out);
  put_header_row(out, &tb);
  for (size_t k = 0; k < rows; k++)
    put_row(out, &tb, order[k]);
  if (rows < run->ntensors)
    put_rest(out, &tb, order, rows);
}

int pc_report_markdown(const char *path, const pc_run *run, const pc_report_options *opts,
                       pc_error *err) {
  int rc = pc_report_check(run, opts ? opts->gate : NULL, "pc_report_markdown", err);
  if (rc < 0 || !path)
    return rc < 0 ? rc : pc_error_set(err, PC_EUSAGE, "pc_report_markdown: a path is required");
  size_t *order =
      pc_report_row_order(run, opts ? opts->gate : NULL, opts ? opts->sort : PC_SORT_WORST);
  if (!order)
    return pc_error_set(err, PC_ENOMEM, "out of memory writing the Markdown report");
  FILE *f;
  rc = pc_report_open(&f, path, err);
  if (rc == PC_OK) {
    put_markdown(f, run, opts, order);
    rc = pc_report_close(f, path, "the Markdown report", err);
  }
  free(order);
  return rc;
}
