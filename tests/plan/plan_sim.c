/* Runs a plan (paritycheck/plan.h) for N processes inside one process, as the MPI build does
 * across processes: process 0 makes the plan, each process k runs its share from the plan's
 * bytes, and the results are merged in reverse process order (any order must do). Writes the
 * run's text, JSON, Markdown, JUnit and HTML reports and its baseline into OUTDIR, for
 * test_plan.py to compare with pc_compare_files' (the CLI's) byte for byte.
 *
 *   plan_sim N A B OUTDIR BLOCK_ELEMS THREADS [QUIET_QUANTILES] [TOLERANCE_FILE...]
 *
 * BLOCK_ELEMS and THREADS as --block-elems and -j (0: the default); QUIET_QUANTILES 1 runs
 * without quantiles, as the CLI does when no report shows them. */
#include "tol_record.h" /* the CLI's record of the tolerance files, for the same settings */
#include "trust_cli.h"

#include <paritycheck/paritycheck.h>

#include <stdio.h>  /* fprintf, snprintf */
#include <stdlib.h> /* strtoul, free, malloc */
#include <string.h> /* memcpy */

static int fail(const char *what, const pc_error *err) {
  fprintf(stderr, "plan_sim: %s: %s\n", what, err->message);
  return 2;
}

static size_t results_bytes; /* of every process, for the stdout line */

/* Process k's share, its results carried over as bytes would be. */
static int run_share(pc_plan *plan, unsigned k, const char *a, const char *b, const pc_options *o) {
  pc_error err;
  const void *bytes;
  size_t size, rsize;
  void *results = NULL;
  pc_plan_bytes(plan, &bytes, &size);
  void *copy = malloc(size ? size : 1);
  if (!copy) {
    fputs("plan_sim: out of memory\n", stderr);
    return 2;
  }
  memcpy(copy, bytes, size);
  int rc = pc_plan_run(&results, &rsize, copy, size, k, a, b, o, &err);
  free(copy);
  if (rc < 0)
    return fail("pc_plan_run", &err);
  results_bytes += rsize;
  rc = pc_plan_merge(plan, results, rsize, &err);
  free(results);
  return rc < 0 ? fail("pc_plan_merge", &err) : 0;
}

/* Every report as the CLI writes it, with the settings the CLI records (trust_cli.h). */
static int write_reports(const pc_run *run, const char *dir, const pc_cli_tols *rec) {
  pc_error err;
  char path[4096];
  pc_report_options ro = PC_REPORT_OPTIONS_INIT;
  pc_report_setting *settings = pc_cli_settings(rec, false, false, &ro.nsettings);
  if (!settings)
    return fail("settings", &(pc_error){PC_ENOMEM, "out of memory"});
  ro.settings = settings;
  static const char *const names[] = {"report.txt", "report.json", "report.md",
                                      "report.xml", "report.html", "baseline.json"};
  for (int i = 0; i < 6; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    int rc = i == 0   ? pc_report_text(path, run, &ro, &err)
             : i == 1 ? pc_report_json(path, run, &ro, &err)
             : i == 2 ? pc_report_markdown(path, run, &ro, &err)
             : i == 3 ? pc_report_junit(path, run, &ro, &err)
             : i == 4 ? pc_report_html(path, run, &ro, &err)
                      : pc_baseline_save(path, run, NULL, &err);
    if (rc < 0) {
      free(settings);
      return fail(path, &err);
    }
  }
  free(settings);
  return 0;
}

int main(int argc, char **argv) {
  pc_error err, oom = {PC_ENOMEM, "out of memory"};
  if (argc < 7) {
    fputs("usage: plan_sim N A B OUTDIR BLOCK_ELEMS THREADS [NO_QUANTILES] [TOLERANCES...]\n",
          stderr);
    return 2;
  }
  unsigned n = (unsigned)strtoul(argv[1], NULL, 10);
  pc_tolset *tols = pc_tolset_new();
  pc_options o = PC_OPTIONS_INIT;
  o.tols = tols;
  o.block_elems = strtoul(argv[5], NULL, 10);
  o.threads = (unsigned)strtoul(argv[6], NULL, 10);
  o.skip_quantiles = argc > 7 && strcmp(argv[7], "1") == 0;
  int rc = !tols                                         ? fail("tolerances", &oom)
           : pc_tolset_load_builtin(tols, &err) != PC_OK ? fail("built-in tolerances", &err)
                                                         : 0;
  pc_cli_tols rec;
  pc_cli_tols_init(&rec);
  for (int i = 8; rc == 0 && i < argc; i++)
    rc = pc_cli_tols_load(&rec, tols, argv[i], argv[i], &err) == PC_OK ? 0 : fail(argv[i], &err);
  pc_plan *plan = NULL;
  pc_run *run = NULL;
  if (rc == 0 && pc_plan_make(&plan, argv[2], argv[3], &o, n, &err) < 0)
    rc = fail("pc_plan_make", &err);
  if (rc == 0) {
    size_t split, works = pc_plan_works(plan, &split);
    printf("works %zu split %zu\n", works, split);
  }
  for (unsigned k = n; rc == 0 && k-- > 0;)
    rc = run_share(plan, k, argv[2], argv[3], &o);
  if (rc == 0 && pc_plan_finish(plan, &run, &err) < 0)
    rc = fail("pc_plan_finish", &err);
  if (rc == 0) {
    const void *bytes;
    size_t size;
    pc_plan_bytes(plan, &bytes, &size);
    printf("tensors %zu plan bytes %zu results bytes %zu\n", run->ntensors, size, results_bytes);
  }
  if (rc == 0)
    rc = write_reports(run, argv[4], &rec);
  pc_cli_tols_free(&rec);
  pc_run_free(run);
  pc_plan_free(plan);
  pc_tolset_free(tols);
  return rc;
}
