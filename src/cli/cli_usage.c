/* The --help text (cli_usage.h). Defaults are printed from the constants that set them, so that
 * the text cannot drift from the code. */
#include "cli_usage.h"
#include "cli_options.h"

#include <paritycheck/paritycheck.h>

#include <stdint.h> /* uint64_t */

/* A byte count as the help shows it: 1G rather than 1073741824. */
static void put_size(FILE *out, uint64_t bytes) {
  static const char *const units[] = {"", "K", "M", "G", "T"};
  int k = 0;
  while (k < 4 && bytes && bytes % 1024 == 0) {
    bytes /= 1024;
    k++;
  }
  fprintf(out, "%llu%s", (unsigned long long)bytes, units[k]);
}

void pc_cli_usage(FILE *out) {
  fputs("Usage: paritycheck [OPTIONS] A.h5 B.h5\n"
        "       paritycheck [OPTIONS] DIR_A DIR_B\n"
        "Compare every dataset of A (the reference) with the dataset of the same path in B\n"
        "(the candidate): exact abs/rel/ULP errors per tensor, judged against tolerances.\n"
        "Two folders: their files are paired by relative path (recursively, e.g.\n"
        "step_100/rank_3.h5) into one report whose tensor paths read FILE:DATASET\n"
        "(step_100/rank_3.h5:/layer1/out); a file on one side only is a missing tensor, a\n"
        "file that is not a tensor dump a skipped one.\n"
        "\n"
        "Options (one that takes a value is given once; -t, --include, --exclude, --map and\n"
        "--strip-prefix repeat):\n"
        "  -t, --tolerances FILE  tolerance file (YAML, docs/tolerances.md); repeatable, a later\n"
        "                         file wins; the built-in defaults (tolerances/default.yaml)\n"
        "                         always come first\n"
        "      --profile NAME     the tolerance profile tolerances/NAME.yaml (docs/\n"
        "                         tolerance-model.md), from $PARITYCHECK_TOLERANCES when set;\n"
        "                         it loads after the built-in defaults, before any -t file\n"
        "      --json FILE        also write the JSON report to FILE (\"-\": stdout, instead of\n"
        "                         the text report)\n"
        "      --markdown FILE    also write a Markdown delta table (docs/reports.md)\n"
        "      --junit FILE       also write JUnit XML, one testcase per tensor\n"
        "      --html FILE        also write a self-contained HTML page\n"
        "                         (\"-\" for any one of these: stdout, instead of the text)\n"
        "      --github           also print GitHub Actions annotations on stdout: ::error per\n"
        "                         failing tensor with its reason, ::warning for the rest\n"
        "      --sort worst|order row order of the Markdown and HTML tables (default worst)\n",
        out);
  fprintf(out,
          "      --max-rows N       Markdown rows before the rest are only counted (default %d)\n",
          (int)PC_REPORT_MAX_ROWS);
  fputs("      --reference R      three-way mode: also compare R (e.g. a CPU float64 run)\n"
        "                         with A and with B, and report per tensor which of A and B\n"
        "                         is closer to R (docs/metrics.md, \"Three-way mode\")\n"
        "      --envelope FILE    judge A's tensors against the honest envelope FILE, measured by\n"
        "                         rerunning A with B's rounding (docs/envelope.md); by default\n"
        "                         A.envelope.h5 beside each file of A is used when it exists\n"
        "      --no-envelope      use no envelope, even one beside A\n"
        "  -v, --verbose          error statistics under every compared tensor\n",
        out);
  fputs("      --include GLOB     compare only tensors whose path matches GLOB (repeatable; globs\n"
        "                         as in tolerance rules, on DATASET or FILE:DATASET)\n"
        "      --exclude GLOB     leave out tensors whose path matches GLOB (repeatable)\n"
        "      --map FROM=TO      rename B's dataset paths before pairing (repeatable, first\n"
        "                         that applies wins): FROM without '*' is a prefix, replaced\n"
        "                         by TO; with '*' it must match the whole path, and each '*'\n"
        "                         of TO takes what the same '*' of FROM matched\n"
        "      --strip-prefix P   drop P at the start of any path component of A and B (after\n"
        "                         a call index such as 003_), before --map: e.g. module.\n"
        "                         (DDP) turns /module.fc/out into /fc/out\n"
        "      --allow-empty      let a run that compares nothing pass (no tensor in the\n"
        "                         dumps, none left by --include/--exclude, every one\n"
        "                         skipped), or nothing finite (all NaN, 0 elements);\n"
        "                         without it such a run is an error (exit 2)\n"
        "      --allow-same       let A and B be one file or folder (else exit 2)\n"
        "      --trust-b-metadata let B's attributes (reduction_length, accumulation_dtype,\n"
        "                         module_type, match_attr) set its tolerance where A has\n"
        "                         none; B is the file under test, so by default only A's\n"
        "                         count (docs/robustness.md, \"Trust model\"); recorded in\n"
        "                         every report\n"
        "      --save-baseline FILE\n"
        "                         write this run's per-tensor figures as a baseline (the\n"
        "                         exit status stays the run's: 1 when it drifts)\n"
        "      --baseline FILE    fail only for tensors that newly fail, or whose drift grew\n"
        "                         beyond the factor, since the baseline FILE\n"
        "      --baseline-factor X\n",
        out);
  fprintf(out, "                         growth factor of --baseline, >= 1 (default %g)\n",
          PC_BASELINE_FACTOR_DEFAULT);
  fputs("      --approve FILE --by NAME --reason TEXT [--only GLOB]\n"
        "                         sign off the drifting tensors (those matching GLOB): write\n"
        "                         their figures to the approval FILE (docs/review.md)\n"
        "      --approved FILE    pass a drifting tensor while it stays within the figures\n"
        "                         approved in FILE\n"
        "      --accept-indeterminate\n"
        "                         do not fail for tensors where B keeps no significant digit\n"
        "                         (verdict indeterminate: a bug and honest drift look alike\n"
        "                         there); they are still reported\n"
        "  -q, --quiet            print only failing tensors and the summary (no provenance)\n"
        "      --no-color         no colours (they are used only when stdout is a terminal)\n",
        out);
  fprintf(out, "      --block-elems N    elements per read block (default %zu)\n",
          (size_t)PC_DEFAULT_BLOCK_ELEMS);
  fputs("      --max-memory SIZE  a dataset that needs more than SIZE bytes at once (an\n"
        "                         uncompressed chunk), or a file whose metadata does, is\n"
        "                         an error; suffixes K, M, G, T (default ",
        out);
  put_size(out, PC_DEFAULT_MAX_MEMORY);
  fprintf(out,
          "; docs/robustness.md)\n"
          "      --stall-timeout S  stop (exit 2) when the comparison makes no progress for S\n"
          "                         seconds, as when a corrupt file makes HDF5 loop (default\n"
          "                         %d; 0: no limit); a crash inside HDF5 also exits 2\n",
          PC_CLI_DEFAULT_STALL_S);
  fputs("  -j, --jobs N           worker threads (default: one per core); results do not\n"
        "                         depend on N\n"
        "      --debug            show HDF5's own error stack on stderr\n"
        "  -V, --version          print the version and exit\n"
        "  -h, --help             print this help and exit\n"
        "\n"
        "Exit status: 0 every tensor within tolerance; 1 drift, an indeterminate tensor, a\n"
        "missing dataset, a shape or dtype mismatch; 2 an error (bad usage, an unreadable\n"
        "file or dataset, a report that cannot be written, A and B with no tensor name in\n"
        "common, nothing compared without --allow-empty); 128 + N stopped by signal N (130\n"
        "SIGINT, 143 SIGTERM). A reader of standard output that leaves (| head) ends that\n"
        "report quietly; the exit status is still the run's. Warnings (a tolerance rule\n"
        "that matches no\n"
        "tensor, a baseline of another profile) go to stderr and into the JSON report.\n"
        "Figures are defined in docs/metrics.md.\n",
        out);
}
