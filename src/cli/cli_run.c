/* One command's run (cli_run.h). Each step returns PC_OK to go on, or a negative pc_status once
 * it has printed why it cannot; only this file turns that into an exit status. */
#include "cli_run.h"
#include "cli_diag.h"
#include "cli_gates.h"
#include "cli_preflight.h"
#include "cli_progress.h"
#include "cli_reports.h"
#include "isolate.h"
#include "mpi_run.h"

#ifdef PC_HAVE_MALLOPT
#include <malloc.h> /* mallopt, M_MMAP_THRESHOLD */
#endif
#include <stdio.h> /* fputs, snprintf */

/* Things the run found that fail nothing, on stderr (the JSON report lists them too). */
static void print_warnings(const pc_run *run) {
  for (size_t i = 0; i < run->nwarnings; i++)
    pc_cli_warn(run->warnings[i]);
}

/* Whether any report of this run shows quantiles: -v, JSON, Markdown (p99 ULP) and HTML do;
 * the plain text report, JUnit and the baseline do not, and a run without them is faster. */
static bool shows_quantiles(const pc_cli *c) {
  return c->out.verbose || c->json || c->out.markdown || c->out.html;
}

/* The exit code of a run's or a gate's verdict. */
static int exit_code(pc_run_verdict v) {
  switch (v) {
  case PC_RUN_PASS:
    return PC_CLI_EXIT_PASS;
  case PC_RUN_DRIFT:
    return PC_CLI_EXIT_DRIFT;
  case PC_RUN_ERROR:
    break;
  }
  return PC_CLI_EXIT_ERROR;
}

/* From here on, blocks of 128 KiB and more come from the system and go back to it when freed.
 * glibc raises that threshold to the largest such block freed so far (up to 32 MiB): after the
 * judge's sort of a large run (6 MB at 200,000 tensors), the reports' row orders and sort keys
 * stayed in the report threads' heaps once freed, 11 MiB of that run's peak memory
 * (docs/performance.md, "Names and shapes"). Not before the reports: the comparison reads
 * chunks through HDF5, whose buffers of a few hundred KiB the raised threshold keeps on the
 * heap; fixed from the start, each came from the system and went back (gzip case: 1.5 s of
 * system time against 0.1 s). */
static void keep_large_blocks_apart(void) {
#ifdef PC_HAVE_MALLOPT /* glibc's; other allocators have no such threshold to pin */
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

/* --save-baseline exits as any run does (1: it drifts), so that a CI step that also saves one
 * still fails closed; a baseline is made from a drifting run, though, so the exit status is
 * explained with the idiom that accepts it (docs/reports.md, "Baseline gate"). */
static void say_saved_drift(const char *path) {
  fputs("paritycheck: baseline ", stderr);
  pc_cli_put_untrusted(path);
  fputs(" saved; exit 1 is this run's drift (to accept it in a set -e script: "
        "paritycheck ... || [ $? -eq 1 ])\n",
        stderr);
}

/* Writes every report; the exit code follows the gate when there is one. */
static int report(const pc_cli *c, const pc_baseline *base, const pc_approvals *ap,
                  const pc_run *run) {
  keep_large_blocks_apart();
  pc_gate *gate = NULL;
  int rc = pc_cli_gate(c, base, ap, run, &gate);
  if (rc == PC_OK)
    rc = pc_cli_write_reports(c, run, gate);
  int code = rc < 0 ? PC_CLI_EXIT_ERROR : exit_code(gate ? gate->verdict : run->verdict);
  if (code == PC_CLI_EXIT_DRIFT && !gate && c->out.save_baseline)
    say_saved_drift(c->out.save_baseline);
  pc_gate_free(gate);
  return code;
}

/* The library's options for c's comparison, its progress shown through prog. */
static pc_options compare_options(const pc_cli *c, const pc_tolset *tols, pc_cli_progress *prog) {
  pc_options opts = PC_OPTIONS_INIT;
  opts.tols = tols;
  opts.block_elems = c->block_elems;
  opts.threads = (unsigned)c->jobs;
  opts.max_memory = c->max_memory;
  opts.skip_quantiles = !shows_quantiles(c);
  opts.include = c->names.include;
  opts.ninclude = c->names.ninclude;
  opts.exclude = c->names.exclude;
  opts.nexclude = c->names.nexclude;
  opts.strip_prefix = c->names.strip_prefix;
  opts.nstrip_prefix = c->names.nstrip_prefix;
  opts.maps = c->names.maps;
  opts.nmaps = c->names.nmaps;
  opts.allow_empty = c->allow_empty;
  opts.envelope = c->envelope;
  opts.no_envelope = c->no_envelope;
  opts.trust_b_metadata = c->trust_b_metadata;
  opts.progress = pc_cli_progress_show;
  opts.progress_user = prog;
  return opts;
}

/* A and B compared, then R with both when --reference is given, and the run's warnings printed.
 * Under an MPI launcher, the ranks compare together and rank 0 reports (mpi_run.h): *run stays
 * NULL on the other ranks. PC_OK, or the library's error after the message. */
static int compare(const pc_cli *c, const pc_options *opts, pc_cli_progress *prog, pc_run **run) {
  pc_error err;
  int rank = pc_cli_mpi_start();
  prog->tty = prog->tty && rank <= 0;
  int rc = rank < 0 ? pc_compare_files(run, c->path_a, c->path_b, opts, &err)
                    : pc_cli_mpi_compare(run, c->path_a, c->path_b, opts, &err);
  if (rc == PC_OK && *run && c->reference)
    rc = pc_compare_reference(*run, c->reference, opts, &err);
  if (rc == PC_OK && *run)
    pc_run_accept_indeterminate(*run, c->accept_indeterminate);
  pc_cli_progress_end(prog); /* the report starts on a clean line */
  if (rc == PC_OK && *run)
    print_warnings(*run);
  if (rc < 0)
    pc_cli_fail(&err);
  return rc;
}

/* The checks, the gates' files, the comparison and the reports: the exit status. */
static int run_cli(const pc_cli *c, const pc_tolset *tols) {
  pc_cli_progress prog;
  pc_cli_progress_start(&prog);
  pc_options opts = compare_options(c, tols, &prog);
  pc_set_debug(c->debug);
  pc_baseline *base = NULL;
  pc_approvals *ap = NULL;
  pc_run *run = NULL;
  int rc = pc_cli_preflight(c);
  if (rc == PC_OK)
    rc = pc_cli_load_baseline(c, &base);
  if (rc == PC_OK)
    rc = pc_cli_load_approvals(c, &ap);
  if (rc < 0) {
    pc_baseline_free(base);
    return PC_CLI_EXIT_ERROR;
  }
  rc = compare(c, &opts, &prog, &run);
  int code = rc < 0 ? PC_CLI_EXIT_ERROR : run ? report(c, base, ap, run) : PC_CLI_EXIT_PASS;
  pc_run_free(run);
  pc_baseline_free(base);
  pc_approvals_free(ap);
  return pc_cli_mpi_end(code);
}

typedef struct run_args {
  const pc_cli *c;
  const pc_tolset *tols;
} run_args;

/* The comparison and the reports, in the child process of pc_cli_isolated. */
static int run_child(void *arg) {
  const run_args *r = arg;
  return run_cli(r->c, r->tols);
}

int pc_cli_run_isolated(const pc_cli *c, const pc_tolset *tols) {
  char what[1024], a[320], b[320], ref[320];
  pc_escape(a, sizeof a, c->path_a, PC_ESCAPE_TERMINAL); /* printed when the child fails */
  pc_escape(b, sizeof b, c->path_b, PC_ESCAPE_TERMINAL);
  pc_escape(ref, sizeof ref, c->reference ? c->reference : "", PC_ESCAPE_TERMINAL);
  snprintf(what, sizeof what, "%s, %s%s%s", a, b, c->reference ? ", " : "", ref);
  run_args r = {c, tols};
  return pc_cli_isolated(run_child, &r, (unsigned)c->stall_s, what);
}
