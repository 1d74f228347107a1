/* paritycheck: the command-line tool. A thin layer over the public API: parse options, load
 * tolerances, compare, write reports, exit 0 (pass), 1 (drift) or 2 (error). */
#include <paritycheck/paritycheck.h>

#include <getopt.h> /* getopt_long */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* strtoull, getenv */
#include <string.h> /* strcmp */
#include <unistd.h> /* isatty */

enum { EXIT_PASS = 0, EXIT_DRIFT = 1, EXIT_ERROR = 2 };

enum { OPT_JSON = 256, OPT_NO_COLOR, OPT_BLOCK, OPT_DEBUG };

typedef struct cli {
  const char *path_a, *path_b;
  const char *json;
  bool quiet, no_color, debug;
  size_t block_elems;
} cli;

static void usage(FILE *out) {
  fputs("Usage: paritycheck [OPTIONS] A.h5 B.h5\n"
        "Compare every dataset of A (the reference) with the dataset of the same path in B\n"
        "(the candidate): exact abs/rel/ULP errors per tensor, judged against tolerances.\n"
        "\n"
        "Options:\n"
        "  -t, --tolerances FILE  tolerance file (YAML, docs/tolerances.md); repeatable, a later\n"
        "                         file wins; the built-in defaults (tolerances/default.yaml)\n"
        "                         always come first\n"
        "      --json FILE        also write the JSON report to FILE (\"-\": stdout, instead of\n"
        "                         the text report)\n"
        "  -q, --quiet            print only failing tensors and the summary\n"
        "      --no-color         no colours (they are used only when stdout is a terminal)\n"
        "      --block-elems N    elements per read block (default 262144)\n"
        "      --debug            show HDF5's own error stack on stderr\n"
        "  -V, --version          print the version and exit\n"
        "  -h, --help             print this help and exit\n"
        "\n"
        "Exit status: 0 every tensor within tolerance; 1 drift, a missing dataset, a shape or\n"
        "dtype mismatch; 2 an error (bad usage, an unreadable file or dataset).\n"
        "Figures are defined in docs/metrics.md.\n",
        out);
}

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "paritycheck: %s%s%s\nTry 'paritycheck --help'.\n", msg, arg ? ": " : "",
          arg ? arg : "");
  return EXIT_ERROR;
}

static bool parse_count(const char *s, size_t *out) {
  char *end;
  if (!s || *s < '0' || *s > '9')
    return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || v == 0 || v > (1ull << 32))
    return false;
  *out = (size_t)v;
  return true;
}

static const struct option long_opts[] = {{"tolerances", required_argument, NULL, 't'},
                                          {"json", required_argument, NULL, OPT_JSON},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"no-color", no_argument, NULL, OPT_NO_COLOR},
                                          {"block-elems", required_argument, NULL, OPT_BLOCK},
                                          {"debug", no_argument, NULL, OPT_DEBUG},
                                          {"version", no_argument, NULL, 'V'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};

/* Tolerance files are loaded as they come, so that their order is the command line's.
 * Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, cli *c, pc_tolset *tols) {
  pc_error err;
  int opt;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":t:qVh", long_opts, NULL)) != -1) {
    if (opt == 't' && pc_tolset_load_file(tols, optarg, &err) < 0) {
      fprintf(stderr, "paritycheck: %s\n", err.message);
      return EXIT_ERROR;
    } else if (opt == OPT_JSON) {
      c->json = optarg;
    } else if (opt == 'q') {
      c->quiet = true;
    } else if (opt == OPT_NO_COLOR) {
      c->no_color = true;
    } else if (opt == OPT_BLOCK && !parse_count(optarg, &c->block_elems)) {
      return usage_error("--block-elems wants a whole number from 1 to 2^32", optarg);
    } else if (opt == OPT_DEBUG) {
      c->debug = true;
    } else if (opt == 'V') {
      printf("paritycheck %s\n", PARITYCHECK_VERSION);
      return EXIT_PASS;
    } else if (opt == 'h') {
      usage(stdout);
      return EXIT_PASS;
    } else if (opt == ':') {
      return usage_error("option needs a value", argv[optind - 1]);
    } else if (opt == '?') {
      return usage_error("unknown option", argv[optind - 1]);
    }
  }
  if (argc - optind != 2)
    return usage_error("expected two files, A (reference) and B (candidate)", NULL);
  c->path_a = argv[optind];
  c->path_b = argv[optind + 1];
  return -1;
}

static int report(const cli *c, const pc_run *run) {
  pc_error err;
  bool json_to_stdout = c->json && strcmp(c->json, "-") == 0;
  if (!json_to_stdout) {
    pc_text_options o = {!c->no_color && !getenv("NO_COLOR") && isatty(fileno(stdout)), c->quiet};
    if (pc_report_text(stdout, run, &o, &err) < 0) {
      fprintf(stderr, "paritycheck: %s\n", err.message);
      return EXIT_ERROR;
    }
  }
  if (c->json && pc_report_json(c->json, run, &err) < 0) {
    fprintf(stderr, "paritycheck: %s\n", err.message);
    return EXIT_ERROR;
  }
  return (int)run->verdict;
}

static int run_cli(const cli *c, const pc_tolset *tols) {
  pc_error err;
  pc_options opts = PC_OPTIONS_INIT;
  opts.tols = tols;
  opts.block_elems = c->block_elems;
  pc_set_debug(c->debug);
  pc_run *run = NULL;
  if (pc_compare_files(&run, c->path_a, c->path_b, &opts, &err) < 0) {
    fprintf(stderr, "paritycheck: %s\n", err.message);
    return EXIT_ERROR;
  }
  int code = report(c, run);
  pc_run_free(run);
  return code;
}

int main(int argc, char **argv) {
  pc_error err;
  cli c = {NULL, NULL, NULL, false, false, false, 0};
  pc_tolset *tols = pc_tolset_new();
  if (!tols) {
    fputs("paritycheck: out of memory\n", stderr);
    return EXIT_ERROR;
  }
  int code;
  if (pc_tolset_load_builtin(tols, &err) < 0) {
    fprintf(stderr, "paritycheck: built-in tolerances: %s\n", err.message);
    code = EXIT_ERROR;
  } else if ((code = parse_args(argc, argv, &c, tols)) < 0) {
    code = run_cli(&c, tols);
  }
  pc_tolset_free(tols);
  return code;
}
