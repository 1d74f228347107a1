/* JUnit XML report (docs/reports.md, "JUnit"): one testsuite for the run, one testcase per
 * tensor in run order. The classname is the tensor's group path with dots ("enc.1" for
 * /enc/1/attn, "(root)" at the top level), the name its last path component. A failing tensor has
 * a <failure> whose message says why (the judge's reasons, and the root cause that explains it)
 * and where it is worst, and whose body holds the reasons and figures at full precision; a
 * tensor that could not be read has an <error>, a skipped one <skipped>. With a
 * baseline only the tensors that fail the gate are failures; the failures it accepted say so in
 * <system-out>. The schema the tests validate against is tests/report/junit.xsd. */
#include "pc_internal.h"
#include "report_common.h"

#include <paritycheck/report.h>

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* fprintf, sprintf */
#include <stdlib.h>   /* malloc, calloc, free */
#include <string.h>   /* strchr, strrchr, strcat */

/* The classname of the top-level group, as Jenkins calls its default package. */
static const char ROOT_CLASS[] = "(root)";

static void put_attr(FILE *out, const char *name, const char *value) {
  fprintf(out, " %s=\"", name);
  pc_report_put_xml(out, value);
  fputc('"', out);
}

/* The group of /enc/1/attn is /enc/1, written "enc.1". */
static void put_classname(FILE *out, const char *path) {
  const char *last = strrchr(path, '/');
  const char *p = path[0] == '/' ? path + 1 : path;
  if (!last || last <= p) {
    put_attr(out, "classname", ROOT_CLASS);
    return;
  }
  fputs(" classname=\"", out);
  while (p < last) {
    const char *slash = strchr(p, '/');
    pc_escape_put(out, p, (size_t)(slash - p), PC_ESCAPE_XML);
    if (slash < last)
      fputc('.', out);
    p = slash + 1;
  }
  fputc('"', out);
}

static const char *last_component(const char *path) {
  const char *last = strrchr(path, '/');
  return last && last[1] ? last + 1 : path;
}

static void put_property(FILE *out, const char *name, const char *value) {
  fputs("      <property", out);
  put_attr(out, "name", name);
  put_attr(out, "value", value);
  fputs("/>\n", out);
}

static size_t failure_count(const pc_run *run, const pc_gate *gate) {
  size_t n = 0;
  for (size_t i = 0; i < run->ntensors; i++)
    n += pc_report_fails(run, gate, i);
  return n;
}

static void put_counts(FILE *out, const pc_run *run, const pc_gate *gate) {
  fprintf(out, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\"", run->ntensors,
          failure_count(run, gate), run->by_verdict[PC_VERDICT_ERROR],
          run->by_verdict[PC_VERDICT_SKIPPED]);
}

/* Each file attribute as properties "provenance.a.NAME" and "provenance.b.NAME", and
 * "provenance.differs" listing the names that differ (docs/reports.md, "Provenance"). */
static int put_provenance(FILE *out, const pc_run *run) {
  pc_prov_row *rows;
  size_t n, len = 1;
  if (pc_report_provenance(run, &rows, &n) < 0)
    return PC_ENOMEM;
  for (size_t i = 0; i < n; i++)
    len += strlen(rows[i].name) + 1;
  char *differs = calloc(len, 1);
  for (size_t i = 0; differs && i < n; i++) {
    for (int side = 0; side < 2; side++) {
      const pc_attr *a = side ? rows[i].b : rows[i].a;
      char *key = a ? malloc(strlen(a->name) + sizeof "provenance.a.") : NULL;
      if (key) {
        sprintf(key, "provenance.%c.%s", side ? 'b' : 'a', a->name);
        put_property(out, key, a->value);
      }
      free(key);
    }
    if (rows[i].differs)
      strcat(strcat(differs, *differs ? "," : ""), rows[i].name);
  }
  if (differs && n)
    put_property(out, "provenance.differs", differs);
  int rc = differs ? PC_OK : PC_ENOMEM;
  free(differs);
  free(rows);
  return rc;
}

static void put_properties(FILE *out, const pc_run *run, const pc_report_options *opts) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  const pc_tensor *first = pc_report_first_divergence(run);
  char factor[32];
  fputs("    <properties>\n", out);
  put_property(out, "a", run->path_a);
  put_property(out, "b", run->path_b);
  put_property(out, "profile", pc_report_profile(opts));
  for (size_t i = 0; i < pc_report_nsettings(opts); i++) {
    char key[128];
    snprintf(key, sizeof key, "setting.%s", opts->settings[i].name);
    put_property(out, key, opts->settings[i].value);
  }
  put_property(out, "verdict", pc_run_verdict_name(run->verdict));
  put_property(out, "first_divergence", first ? first->path : "");
  if (run->path_ref) {
    char tally[256];
    pc_report_closer_tally(tally, sizeof tally, run);
    put_property(out, "reference", run->path_ref);
    put_property(out, "closer_to_reference", tally);
  }
  if (gate) {
    snprintf(factor, sizeof factor, "%.17g", gate->factor);
    put_property(out, "baseline", gate->path);
    put_property(out, "baseline_factor", factor);
    put_property(out, "gate", pc_run_verdict_name(gate->verdict));
  }
  put_provenance(out, run); /* out of memory: no provenance rather than no report */
  fputs("    </properties>\n", out);
}

/* The worst pair at full precision, on a line of its own. */
static void put_worst(FILE *out, const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  char buf[PC_REASON_MAX];
  pc_report_worst_text(buf, sizeof buf, t, true);
  pc_report_put_xml(out, buf);
  fprintf(out, " (abs %.17g, rel %.17g, ulp %" PRIu64 ")\n", s->worst_abs, s->worst_rel,
          s->worst_ulp);
}

/* Three-way mode: each side's distance to R at full precision, and which is closer. */
static void put_vs_reference(FILE *out, const pc_tensor *t) {
  const pc_vs_reference *v = &t->vs_reference;
  const pc_ref_side *side[2] = {&v->a, &v->b};
  char closer[PC_REASON_MAX];
  if (!v->present)
    return;
  for (int k = 0; k < 2; k++)
    fprintf(out,
            "vs R, %s: max_abs %.17g, max_rel %.17g, rel_rms %.17g, max_ulp %" PRIu64
            ", mean_ulp %.17g\n",
            k ? "b" : "a", side[k]->max_abs, side[k]->max_rel, side[k]->rel_rms, side[k]->max_ulp,
            side[k]->mean_ulp);
  pc_report_closer_text(closer, sizeof closer, t);
  fprintf(out, "closer to R: %s\n", closer);
}

/* The figures of a compared tensor at full precision, one per line. */
static void put_figures(FILE *out, const pc_tensor *t) {
  const pc_stats *s = &t->stats;
  char buf[PC_REASON_MAX];
  pc_aggregates g = pc_stats_aggregates(s);
  snprintf(buf, sizeof buf,
           "mismatches %" PRIu64 " of %" PRIu64 " (nan %" PRIu64 ", inf %" PRIu64 ")\n"
           "max_abs %.17g, max_rel %.17g, max_ulp %" PRIu64 ", mean_ulp %.17g\n"
           "rms %.17g, rel_rms %.17g, cosine %.17g, snr_db %.17g\n",
           s->mismatches, s->count, s->nan_mismatches, s->inf_mismatches, s->max_abs, s->max_rel,
           s->max_ulp, pc_stats_mean_ulp(s), g.rms, g.rel_rms, g.cosine, g.snr_db);
  fputs(buf, out); /* figures only: its newlines are the body's lines */
  if (s->has_worst)
    put_worst(out, t);
  put_vs_reference(out, t);
}

/* "; caused by /root" for a tensor that an upstream failure explains (docs/reports.md, "Reasons
 * and root causes"), XML-escaped (for an attribute or for text). */
static void put_cause(FILE *out, const pc_run *run, size_t i) {
  long root = pc_report_root(run, i);
  if (root < 0)
    return;
  pc_report_put_xml(out, "; caused by ");
  pc_report_put_xml(out, pc_run_at(run, root)->path);
}

/* The message: the gate's word when there is a gate, the reasons the judge recorded, the root
 * cause that explains them, and where it is worst. */
static void put_message(FILE *out, const pc_run *run, size_t i, const pc_gate_tensor *g) {
  const pc_tensor *t = pc_run_at(run, i);
  char reason[PC_REASON_MAX], worst[PC_REASON_MAX];
  pc_report_reason(reason, sizeof reason, t);
  pc_report_worst_text(worst, sizeof worst, t, false);
  fputs(" message=\"", out);
  if (g && g->approval) {
    pc_report_put_xml(out, g->approval);
    pc_report_put_xml(out, ": ");
  } else if (g) {
    pc_report_put_xml(out,
                      g->change == PC_CHANGE_NEW ? "new failure: " : "worse than the baseline: ");
  }
  pc_report_put_xml(out, reason);
  put_cause(out, run, i);
  if (worst[0]) {
    pc_report_put_xml(out, "; ");
    pc_report_put_xml(out, worst);
  }
  fputc('"', out);
}

/* "metrics top1_agreement 0.99800000000000000 (min 0.98999999999999999), ...", then `end`;
 * nothing for a tensor without product metrics. */
static void put_metrics(FILE *out, const pc_tensor *t, const char *end) {
  char text[PC_REASON_MAX];
  if (!pc_report_has_metrics(t))
    return;
  pc_report_metrics(text, sizeof text, t, true);
  fputs("metrics ", out);
  pc_report_put_xml(out, text);
  fputs(end, out);
}

static void put_failure(FILE *out, const pc_run *run, size_t i, const pc_gate_tensor *g) {
  const pc_tensor *t = pc_run_at(run, i);
  char dtypes[96], reasons[PC_REASON_MAX];
  long root = pc_report_root(run, i);
  fputs("      <failure", out);
  put_attr(out, "type", pc_verdict_name(t->verdict));
  put_message(out, run, i, g);
  fputs(">", out);
  pc_report_dtypes(dtypes, sizeof dtypes, t);
  fputs("path ", out);
  pc_report_put_xml(out, t->path);
  fprintf(out, "\ndtype %s\nexecution index %zu\n", dtypes, pc_report_exec_index(run, i));
  pc_report_reasons(reasons, sizeof reasons, t, true);
  if (reasons[0]) {
    fputs("reasons ", out);
    pc_report_put_xml(out, reasons);
    fputc('\n', out);
  }
  pc_report_diagnosis(reasons, sizeof reasons, t);
  if (reasons[0]) {
    fputs("diagnosis ", out);
    pc_report_put_xml(out, reasons);
    fputc('\n', out);
  }
  if (root >= 0) {
    fputs("caused by ", out);
    pc_report_put_xml(out, pc_run_at(run, root)->path);
    fputc('\n', out);
  }
  put_metrics(out, t, "\n");
  if (pc_report_has_stats(t->verdict))
    put_figures(out, t);
  fputs("</failure>\n", out);
}

/* A failure that the baseline accepted, or an indeterminate tensor that the run accepts: a pass
 * for CI, with the reason (and diagnosis) kept for people. */
static void put_accepted(FILE *out, const pc_run *run, size_t i, const pc_gate_tensor *g) {
  const pc_tensor *t = pc_run_at(run, i);
  char reason[PC_REASON_MAX];
  pc_report_reason(reason, sizeof reason, t);
  if (pc_report_accepted(run, i)) { /* before the gate's words: no gate fails it either */
    fputs("      <system-out>accepted by the run (indeterminate): ", out);
  } else if (g->approval) {
    fputs("      <system-out>", out);
    pc_report_put_xml(out, g->approval);
    fprintf(out, ": %s: ", pc_verdict_name(t->verdict));
  } else {
    fprintf(out, "      <system-out>accepted by the baseline (%s): %s: ", pc_change_name(g->change),
            pc_verdict_name(t->verdict));
  }
  pc_report_put_xml(out, reason);
  put_cause(out, run, i);
  fputs("</system-out>\n", out);
}

static void put_outcome(FILE *out, const pc_run *run, const pc_gate *gate, size_t i) {
  const pc_tensor *t = pc_run_at(run, i);
  const pc_gate_tensor *g = gate ? &gate->tensors[i] : NULL;
  if (pc_report_fails(run, gate, i)) {
    put_failure(out, run, i, g);
  } else if (pc_verdict_is_failure(t->verdict)) {
    put_accepted(out, run, i, g);
  } else if (t->verdict == PC_VERDICT_PASS) {
    fputs("      <system-out>", out);
    put_metrics(out, t, "");
    fputs("</system-out>\n", out);
  } else if (t->verdict == PC_VERDICT_ERROR || t->verdict == PC_VERDICT_SKIPPED) {
    fprintf(out, "      <%s", t->verdict == PC_VERDICT_ERROR ? "error" : "skipped");
    if (t->verdict == PC_VERDICT_ERROR)
      put_attr(out, "type", "error");
    put_attr(out, "message", t->message ? t->message : pc_verdict_name(t->verdict));
    fputs("/>\n", out);
  }
}

static bool has_body(const pc_run *run, size_t i) {
  pc_verdict v = pc_run_at(run, i)->verdict;
  return v != PC_VERDICT_PASS || pc_report_has_metrics(pc_run_at(run, i));
}

static void put_testcase(FILE *out, const pc_run *run, const pc_gate *gate, size_t i) {
  const pc_tensor *t = pc_run_at(run, i);
  fputs("    <testcase", out);
  put_attr(out, "name", last_component(t->path));
  put_classname(out, t->path);
  if (!has_body(run, i)) {
    fputs("/>\n", out);
    return;
  }
  fputs(">\n", out);
  put_outcome(out, run, gate, i);
  fputs("    </testcase>\n", out);
}

static int put_junit(FILE *out, const pc_run *run, const pc_report_options *opts) {
  const pc_gate *gate = opts ? opts->gate : NULL;
  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"paritycheck\"", out);
  put_counts(out, run, gate);
  fputs(">\n  <testsuite name=\"", out);
  pc_report_put_xml(out, run->path_a);
  fputs(" vs ", out);
  pc_report_put_xml(out, run->path_b);
  fputc('"', out);
  put_counts(out, run, gate);
  fputs(">\n", out);
  put_properties(out, run, opts);
  for (size_t i = 0; i < run->ntensors; i++) {
    put_testcase(out, run, gate, i);
    pc_report_beat(opts);
  }
  fputs("  </testsuite>\n</testsuites>\n", out);
  return PC_OK;
}

int pc_report_junit(const char *path, const pc_run *run, const pc_report_options *opts,
                    pc_error *err) {
  return pc_report_write(path, run, opts, "pc_report_junit", "the JUnit report", put_junit, err);
}
