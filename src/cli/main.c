/* paritycheck: the command-line tool. A thin layer over the public API: parse options, load
 * tolerances, compare, write reports, exit 0 (pass), 1 (drift) or 2 (error).
 *
 * One convention, the library's: every step returns PC_OK to go on, or a negative pc_status
 * once it has printed why it cannot; only main() and the run turn that into an exit code. */
#include "isolate.h"
#include "mpi_run.h"
#include "report_files.h"
#include "tol_record.h"
#include "trust_cli.h"

#include <paritycheck/paritycheck.h>

#include <dirent.h> /* opendir, readdir: the profiles on offer */
#include <errno.h>  /* errno, ENOENT */
#include <float.h>  /* DBL_MAX */
#include <getopt.h> /* getopt_long */
#ifdef PC_HAVE_MALLOPT
#include <malloc.h> /* mallopt, M_MMAP_THRESHOLD */
#endif
#ifdef __APPLE__
#include <mach-o/dyld.h> /* _NSGetExecutablePath */
#endif
#include <poll.h>     /* poll, POLLERR */
#include <signal.h>   /* signal, SIGPIPE */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* strtoull, strtod, getenv */
#include <string.h>   /* strcmp, strrchr, strerror */
#include <sys/stat.h> /* stat */
#include <time.h>     /* clock_gettime */
#include <unistd.h>   /* isatty, access, readlink */

enum { EXIT_PASS = 0, EXIT_DRIFT = 1, EXIT_ERROR = 2 };

enum { PC_MAX_JOBS = 256 }; /* more threads than this only adds contention */

enum {
  OPT_JSON = 256,
  OPT_NO_COLOR,
  OPT_BLOCK,
  OPT_DEBUG,
  OPT_JOBS,
  OPT_PROFILE,
  OPT_MAX_MEMORY,
  OPT_STALL,
  OPT_REFERENCE,
  OPT_ACCEPT_INDETERMINATE,
  OPT_ALLOW_EMPTY,
  OPT_ENVELOPE,
  OPT_NO_ENVELOPE,
  OPT_TRUST_B_METADATA,
  OPT_ALLOW_SAME
};

/* Options of the names: which tensors take part and how B's are renamed. */
enum { OPT_INCLUDE = 768, OPT_EXCLUDE, OPT_MAP, OPT_STRIP_PREFIX };

/* Seconds without progress after which the comparison is stopped (isolate.h): far beyond any
 * honest pause, since progress is reported after every block read. */
enum { DEFAULT_STALL_S = 600 };

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

/* Options of the report files, sorting and the baseline gate. */
enum {
  OPT_MARKDOWN = 512,
  OPT_JUNIT,
  OPT_HTML,
  OPT_SORT,
  OPT_SAVE_BASELINE,
  OPT_BASELINE,
  OPT_BASELINE_FACTOR,
  OPT_MAX_ROWS,
  OPT_APPROVE,
  OPT_BY,
  OPT_REASON,
  OPT_ONLY,
  OPT_APPROVED,
  OPT_GITHUB
};

typedef struct outputs {
  const char *markdown, *junit, *html; /* report files; "-" is stdout */
  const char *save_baseline, *baseline;
  const char *approve, *approved; /* --approve FILE (signs), --approved FILE (the gate) */
  pc_approve_options sign;        /* --by, --reason, --only */
  double baseline_factor;         /* 0 until given: PC_BASELINE_FACTOR_DEFAULT */
  size_t max_rows;                /* 0 until given: PC_REPORT_MAX_ROWS */
  pc_sort sort;
  bool verbose;
  bool github; /* --github: annotations on stdout after the text report */
} outputs;

/* The name options in command-line order (room for argc each). */
typedef struct name_opts {
  const char **include, **exclude, **strip_prefix;
  size_t ninclude, nexclude, nstrip_prefix;
  pc_name_map *maps;
  size_t nmaps;
} name_opts;

typedef struct cli {
  const char *path_a, *path_b;
  name_opts names;
  const char *reference;  /* --reference R, or NULL */
  const char *envelope;   /* --envelope FILE, or NULL: the sidecar beside A, if any */
  bool no_envelope;       /* --no-envelope */
  const char *profile;    /* --profile NAME, or NULL */
  const char **tol_files; /* the -t files in command-line order (room for argc) */
  size_t n_tol_files;
  const char *json;
  bool quiet, no_color, debug;
  bool accept_indeterminate; /* --accept-indeterminate */
  bool allow_empty;          /* --allow-empty: a run that compares nothing may pass */
  bool trust_b_metadata;     /* --trust-b-metadata: B's attributes may set its tolerance */
  bool allow_same;           /* --allow-same: A and B may be one file */
  bool done;                 /* --help or --version answered: exit 0 without a comparison */
  size_t block_elems;
  outputs out;
  size_t jobs;
  uint64_t max_memory; /* 0: the library's default */
  size_t stall_s;      /* --stall-timeout; 0: no limit */
  pc_cli_tols tols;    /* the tolerance layers loaded, for the gates' record */
} cli;

static void usage(FILE *out) {
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
          DEFAULT_STALL_S);
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

/* Text that comes from the data or the command line (a dataset name, a path, a message that
 * quotes a file) on stderr: control and bidi characters and invalid UTF-8 as visible escapes, so
 * that it cannot drive the terminal or forge a line of a CI log (docs/reports.md, "Untrusted
 * names"). */
static void put_untrusted(const char *s) {
  pc_escape_put(stderr, s, strlen(s), PC_ESCAPE_TERMINAL);
}

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "paritycheck: %s", msg);
  if (arg) {
    fputs(": ", stderr);
    put_untrusted(arg);
  }
  fputs("\nTry 'paritycheck --help'.\n", stderr);
  return PC_EUSAGE;
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

/* A byte count: digits and an optional K, M, G or T (powers of 1024), at least 1. */
static bool parse_size(const char *s, uint64_t *out) {
  static const char units[] = "KMGT";
  char *end;
  if (!s || *s < '0' || *s > '9')
    return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  const char *unit = *end ? strchr(units, *end) : NULL;
  if (errno == ERANGE || v == 0 || (*end && (!unit || end[1])))
    return false;
  int shift = unit ? 10 * (int)(unit - units + 1) : 0;
  if (v > UINT64_MAX >> shift)
    return false;
  *out = (uint64_t)v << shift;
  return true;
}

static const struct option long_opts[] = {
    {"tolerances", required_argument, NULL, 't'},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"reference", required_argument, NULL, OPT_REFERENCE},
    {"envelope", required_argument, NULL, OPT_ENVELOPE},
    {"no-envelope", no_argument, NULL, OPT_NO_ENVELOPE},
    {"json", required_argument, NULL, OPT_JSON},
    {"markdown", required_argument, NULL, OPT_MARKDOWN},
    {"junit", required_argument, NULL, OPT_JUNIT},
    {"html", required_argument, NULL, OPT_HTML},
    {"sort", required_argument, NULL, OPT_SORT},
    {"verbose", no_argument, NULL, 'v'},
    {"save-baseline", required_argument, NULL, OPT_SAVE_BASELINE},
    {"baseline", required_argument, NULL, OPT_BASELINE},
    {"baseline-factor", required_argument, NULL, OPT_BASELINE_FACTOR},
    {"approve", required_argument, NULL, OPT_APPROVE},
    {"by", required_argument, NULL, OPT_BY},
    {"reason", required_argument, NULL, OPT_REASON},
    {"only", required_argument, NULL, OPT_ONLY},
    {"approved", required_argument, NULL, OPT_APPROVED},
    {"max-rows", required_argument, NULL, OPT_MAX_ROWS},
    {"github", no_argument, NULL, OPT_GITHUB},
    {"quiet", no_argument, NULL, 'q'},
    {"no-color", no_argument, NULL, OPT_NO_COLOR},
    {"block-elems", required_argument, NULL, OPT_BLOCK},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"stall-timeout", required_argument, NULL, OPT_STALL},
    {"jobs", required_argument, NULL, 'j'},
    {"debug", no_argument, NULL, OPT_DEBUG},
    {"accept-indeterminate", no_argument, NULL, OPT_ACCEPT_INDETERMINATE},
    {"include", required_argument, NULL, OPT_INCLUDE},
    {"exclude", required_argument, NULL, OPT_EXCLUDE},
    {"map", required_argument, NULL, OPT_MAP},
    {"strip-prefix", required_argument, NULL, OPT_STRIP_PREFIX},
    {"allow-empty", no_argument, NULL, OPT_ALLOW_EMPTY},
    {"trust-b-metadata", no_argument, NULL, OPT_TRUST_B_METADATA},
    {"allow-same", no_argument, NULL, OPT_ALLOW_SAME},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static bool is_output_option(int opt) {
  return opt == 'v' || (opt >= OPT_MARKDOWN && opt <= OPT_GITHUB);
}

/* False (after the message) for a bad value. */
static bool parse_output_option(int opt, const char *arg, outputs *o) {
  char *end;
  if (opt == 'v')
    o->verbose = true;
  else if (opt == OPT_GITHUB)
    o->github = true;
  else if (opt == OPT_MARKDOWN)
    o->markdown = arg;
  else if (opt == OPT_JUNIT)
    o->junit = arg;
  else if (opt == OPT_HTML)
    o->html = arg;
  else if (opt == OPT_SAVE_BASELINE)
    o->save_baseline = arg;
  else if (opt == OPT_BASELINE)
    o->baseline = arg;
  else if (opt == OPT_APPROVE)
    o->approve = arg;
  else if (opt == OPT_APPROVED)
    o->approved = arg;
  else if (opt == OPT_BY)
    o->sign.by = arg;
  else if (opt == OPT_REASON)
    o->sign.reason = arg;
  else if (opt == OPT_ONLY)
    o->sign.only = arg;
  else if (opt == OPT_SORT && (strcmp(arg, "worst") == 0 || strcmp(arg, "order") == 0))
    o->sort = strcmp(arg, "worst") == 0 ? PC_SORT_WORST : PC_SORT_ORDER;
  else if (opt == OPT_SORT) {
    usage_error("--sort wants worst or order", arg);
    return false;
  } else if (opt == OPT_MAX_ROWS && !parse_count(arg, &o->max_rows)) {
    usage_error("--max-rows wants a whole number from 1 to 2^32", arg);
    return false;
  } else if (opt == OPT_BASELINE_FACTOR) {
    o->baseline_factor = strtod(arg, &end);
    /* written so that NaN fails too */
    if (end == arg || *end || !(o->baseline_factor >= 1 && o->baseline_factor <= DBL_MAX)) {
      usage_error("--baseline-factor wants a finite number >= 1", arg);
      return false;
    }
  }
  return true;
}

/* False (after the message) for a --map without '='. The argument is split in place. */
static bool parse_name_option(int opt, char *arg, name_opts *n) {
  if (opt == OPT_INCLUDE) {
    n->include[n->ninclude++] = arg;
  } else if (opt == OPT_EXCLUDE) {
    n->exclude[n->nexclude++] = arg;
  } else if (opt == OPT_STRIP_PREFIX) {
    n->strip_prefix[n->nstrip_prefix++] = arg;
  } else {
    char *eq = strchr(arg, '=');
    if (!eq) {
      usage_error("--map wants FROM=TO", arg);
      return false;
    }
    *eq = '\0';
    n->maps[n->nmaps++] = (pc_name_map){arg, eq + 1};
  }
  return true;
}

/* An option that takes one value, given a second time, is a usage error: last-wins would
 * silently drop a report file or a baseline. -t and the name options are lists. False (after
 * the message) for a repeat. */
static bool first_time(int opt, uint64_t *seen) {
  size_t i = 0;
  while (long_opts[i].name && long_opts[i].val != opt)
    i++;
  if (!long_opts[i].name || long_opts[i].has_arg == no_argument || opt == 't' ||
      (opt >= OPT_INCLUDE && opt <= OPT_STRIP_PREFIX))
    return true;
  _Static_assert(sizeof long_opts / sizeof long_opts[0] <= 64, "one bit per option");
  if (*seen >> i & 1u) {
    char name[64];
    snprintf(name, sizeof name, "--%s", long_opts[i].name);
    usage_error("option given twice (it takes one value)", name);
    return false;
  }
  *seen |= (uint64_t)1 << i;
  return true;
}

static const char *closest_profile(const char *name, const char *const *names, size_t n);

/* "unknown option" and the option of long_opts probably meant, by the rule of profile names
 * (closest_profile): --proflie gives --profile, -profile --profile, --jsno --json. The word is
 * the argument that holds the option: getopt has moved past it, unless an unknown short option
 * is one of several letters of it ("-profile"). */
static int unknown_option(int argc, char **argv) {
  const char *word = optind < argc && optopt && argv[optind][0] == '-' && argv[optind][1] == optopt
                         ? argv[optind]
                         : argv[optind - 1];
  const char *names[sizeof long_opts / sizeof long_opts[0]];
  size_t n = 0, skip = strspn(word, "-");
  for (; long_opts[n].name; n++)
    names[n] = long_opts[n].name;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(word + skip, "="), word + skip);
  const char *meant = strlen(name) > 2 ? closest_profile(name, names, n) : NULL; /* not -qz */
  fputs("paritycheck: unknown option: ", stderr);
  put_untrusted(optopt && word[1] != optopt ? (char[]){'-', (char)optopt, '\0'} : word);
  if (meant)
    fprintf(stderr, " (did you mean '--%s'?)", meant);
  fputs("\nTry 'paritycheck --help'.\n", stderr);
  return PC_EUSAGE;
}

/* Tolerance files are only collected here: load_tolerances() loads them after the profile,
 * wherever --profile stands. --help and --version set c->done. */
static int parse_args(int argc, char **argv, cli *c) {
  int opt;
  uint64_t seen = 0;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":t:j:qvVh", long_opts, NULL)) != -1) {
    if (!first_time(opt, &seen)) {
      return PC_EUSAGE;
    } else if (opt == 't') {
      c->tol_files[c->n_tol_files++] = optarg;
    } else if (opt == OPT_PROFILE) {
      c->profile = optarg;
    } else if (opt == OPT_REFERENCE) {
      c->reference = optarg;
    } else if (opt == OPT_ENVELOPE) {
      c->envelope = optarg;
    } else if (opt == OPT_NO_ENVELOPE) {
      c->no_envelope = true;
    } else if (opt == OPT_JSON) {
      c->json = optarg;
    } else if (opt == 'q') {
      c->quiet = true;
    } else if (opt == OPT_NO_COLOR) {
      c->no_color = true;
    } else if (opt == OPT_ALLOW_EMPTY) {
      c->allow_empty = true;
    } else if (opt == OPT_TRUST_B_METADATA) {
      c->trust_b_metadata = true;
    } else if (opt == OPT_ALLOW_SAME) {
      c->allow_same = true;
    } else if (opt == OPT_BLOCK && !parse_count(optarg, &c->block_elems)) {
      return usage_error("--block-elems wants a whole number from 1 to 2^32", optarg);
    } else if (opt == OPT_MAX_MEMORY && !parse_size(optarg, &c->max_memory)) {
      return usage_error("--max-memory wants a byte count such as 512M or 2G", optarg);
    } else if (opt == OPT_STALL && strcmp(optarg, "0") != 0 && !parse_count(optarg, &c->stall_s)) {
      return usage_error("--stall-timeout wants a whole number of seconds", optarg);
    } else if (opt == OPT_STALL && strcmp(optarg, "0") == 0) {
      c->stall_s = 0;
    } else if (opt == 'j' && (!parse_count(optarg, &c->jobs) || c->jobs > PC_MAX_JOBS)) {
      return usage_error("-j wants a whole number from 1 to 256", optarg);
    } else if (is_output_option(opt) && !parse_output_option(opt, optarg, &c->out)) {
      return PC_EUSAGE;
    } else if (opt >= OPT_INCLUDE && opt <= OPT_STRIP_PREFIX &&
               !parse_name_option(opt, optarg, &c->names)) {
      return PC_EUSAGE;
    } else if (opt == OPT_DEBUG) {
      c->debug = true;
    } else if (opt == OPT_ACCEPT_INDETERMINATE) {
      c->accept_indeterminate = true;
    } else if (opt == 'V') {
      printf("paritycheck %s\n", PARITYCHECK_VERSION);
      c->done = true;
      return PC_OK;
    } else if (opt == 'h') {
      usage(stdout);
      c->done = true;
      return PC_OK;
    } else if (opt == ':') {
      return usage_error("option needs a value", argv[optind - 1]);
    } else if (opt == '?') {
      return unknown_option(argc, argv);
    }
  }
  if (argc - optind != 2)
    return usage_error("expected two files or two folders, A (reference) and B (candidate)", NULL);
  c->path_a = argv[optind];
  c->path_b = argv[optind + 1];
  if (c->envelope && c->no_envelope)
    return usage_error("--envelope and --no-envelope exclude each other", NULL);
  return PC_OK;
}

/* An error of the library: its message names files and datasets, and may quote them. */
static int fail(const pc_error *err) {
  fputs("paritycheck: ", stderr);
  put_untrusted(err->message);
  fputc('\n', stderr);
  if (err->code == PC_ENOMATCH)
    fputs("paritycheck: hint: if the names differ by a prefix (DDP's module.) or a pattern, pair "
          "them with --strip-prefix P or --map FROM=TO (paritycheck --help)\n",
          stderr);
  if (err->code == PC_EEMPTY)
    fputs("paritycheck: hint: check both dumps and the --include/--exclude globs; --allow-empty "
          "lets a run that compares nothing pass\n",
          stderr);
  return err->code < 0 ? (int)err->code : PC_EIO;
}

/* Things the run found that fail nothing, on stderr (the JSON report lists them too). */
static void print_warnings(const pc_run *run) {
  for (size_t i = 0; i < run->nwarnings; i++) {
    fputs("paritycheck: warning: ", stderr);
    put_untrusted(run->warnings[i]);
    fputc('\n', stderr);
  }
}

/* The folder of the profiles: $PARITYCHECK_TOLERANCES; else PC_TOLERANCES_REL beside the
 * binary, where an install puts them (PREFIX/bin/../share/paritycheck/tolerances), so that an
 * installed or moved prefix finds its own; else the source tree's (PC_TOLERANCES_DIR, compiled
 * in, for a binary run from its build folder). */
/* The running binary's path into exe ("" when the system does not say): Linux's /proc/self/exe,
 * macOS's _NSGetExecutablePath; elsewhere nothing, and --profile uses the source tree's. */
static void exe_path(char *exe, size_t size) {
  exe[0] = '\0';
#if defined(__linux__)
  ssize_t n = readlink("/proc/self/exe", exe, size - 1);
  exe[n > 0 ? n : 0] = '\0';
#elif defined(__APPLE__)
  uint32_t n = (uint32_t)size;
  if (_NSGetExecutablePath(exe, &n) != 0)
    exe[0] = '\0';
#else
  (void)size;
#endif
}

static const char *profile_dir(void) {
  static char installed[4096];
  const char *env = getenv("PARITYCHECK_TOLERANCES");
  if (env && *env)
    return env;
  char exe[4096];
  exe_path(exe, sizeof exe);
  const char *slash = strrchr(exe, '/');
  struct stat st;
  if (slash &&
      (size_t)snprintf(installed, sizeof installed, "%.*s/%s", (int)(slash - exe), exe,
                       PC_TOLERANCES_REL) < sizeof installed &&
      stat(installed, &st) == 0 && S_ISDIR(st.st_mode))
    return installed;
  return PC_TOLERANCES_DIR;
}

/* A profile name is a file name without its .yaml: no '/' and no leading '.'. */
static bool is_profile_name(const char *name) {
  return *name && *name != '.' &&
         strspn(name, "abcdefghijklmnopqrstuvwxyz"
                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == strlen(name);
}

static int compare_names(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Edits (insert, delete, substitute, swap two neighbours) from a to b, both profile names
 * (is_profile_name), or more than max when that is cheaper to tell. */
static size_t name_edits(const char *a, const char *b, size_t max) {
  enum { LONGEST = 256 }; /* a listed name is shorter (unknown_profile) */
  size_t la = strlen(a), lb = strlen(b), d[3][LONGEST + 1];
  if (la > LONGEST || lb > LONGEST || (la > lb ? la - lb : lb - la) > max)
    return max + 1;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t *row = d[i % 3], *up = d[(i - 1) % 3], *up2 = d[(i + 1) % 3];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t best = up[j - 1] + (a[i - 1] != b[j - 1]);
      best = up[j] + 1 < best ? up[j] + 1 : best;
      best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && up2[j - 2] + 1 < best)
        best = up2[j - 2] + 1;
      row[j] = best;
    }
  }
  return d[la % 3][lb];
}

/* The profile the user probably meant by name: one it starts (fp16 for fp16-autocast), else
 * the nearest within a third of name's length or two edits (tf23, bf16_autocast); NULL when
 * none is that close. */
static const char *closest_profile(const char *name, const char *const *names, size_t n) {
  size_t len = strlen(name), max = len / 3 > 2 ? len / 3 : 2, best_d = max + 1;
  const char *best = NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(names[i], name, len) == 0)
      return names[i];
  for (size_t i = 0; i < n; i++) {
    size_t d = name_edits(name, names[i], max);
    if (d < best_d) {
      best_d = d;
      best = names[i];
    }
  }
  return best;
}

/* "unknown profile" with the names of dir's *.yaml files, sorted, and the one probably meant.
 * The PARITYCHECK_TOLERANCES hint only where it may help: no name is close, and the variable
 * is not set already (the message names the folder it gave). */
static int unknown_profile(const char *name, const char *dir) {
  enum { MAX_LISTED = 64 };
  static const char ext[] = ".yaml";
  char names[MAX_LISTED][256];
  const char *sorted[MAX_LISTED];
  size_t n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && n < MAX_LISTED && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len > sizeof ext - 1 && len - (sizeof ext - 1) < sizeof names[0] && e->d_name[0] != '.' &&
        strcmp(e->d_name + len - (sizeof ext - 1), ext) == 0) {
      snprintf(names[n], sizeof names[n], "%.*s", (int)(len - (sizeof ext - 1)), e->d_name);
      sorted[n] = names[n];
      n++;
    }
  }
  if (d)
    closedir(d);
  qsort(sorted, n, sizeof sorted[0], compare_names);
  fprintf(stderr, "paritycheck: unknown profile '%s' (in ", name); /* a name is [A-Za-z0-9._-] */
  put_untrusted(dir);
  fputc(':', stderr);
  for (size_t i = 0; i < n; i++) {
    fprintf(stderr, "%s ", i ? "," : "");
    put_untrusted(sorted[i]);
  }
  fputs(n ? ")\n" : " none)\n", stderr);
  const char *meant = closest_profile(name, sorted, n);
  const char *env = getenv("PARITYCHECK_TOLERANCES");
  if (meant) {
    fputs("paritycheck: did you mean '", stderr);
    put_untrusted(meant);
    fputs("'?\n", stderr);
  } else if (!env || !*env) {
    fputs("paritycheck: hint: set PARITYCHECK_TOLERANCES to the folder of the profiles (an "
          "install keeps them in PREFIX/share/paritycheck/tolerances)\n",
          stderr);
  }
  return PC_EUSAGE;
}

/* The profile's file loaded into tols, and added to the record. */
static int load_profile(const char *name, pc_tolset *tols, pc_cli_tols *rec) {
  pc_error err;
  char path[4096];
  const char *dir = profile_dir();
  if (!is_profile_name(name))
    return usage_error("--profile wants a name from the profile folder, not a path", name);
  if ((size_t)snprintf(path, sizeof path, "%s/%s.yaml", dir, name) >= sizeof path)
    return usage_error("profile path too long", name);
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT)
    return unknown_profile(name, dir);
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return usage_error("--profile: not a regular file", path);
  char layer[300];
  snprintf(layer, sizeof layer, "profile %s", name);
  return pc_cli_tols_load(rec, tols, layer, path, &err) < 0 ? fail(&err) : PC_OK;
}

/* The profile first, then the -t files in their order: a later layer wins. Each is added to
 * the record of the tolerance set that gates keep (tol_record.h). */
static int load_tolerances(cli *c, pc_tolset *tols) {
  pc_error err;
  pc_cli_tols_init(&c->tols);
  int rc = c->profile ? load_profile(c->profile, tols, &c->tols) : PC_OK;
  for (size_t i = 0; rc == PC_OK && i < c->n_tol_files; i++)
    if (pc_cli_tols_load(&c->tols, tols, c->tol_files[i], c->tol_files[i], &err) < 0)
      rc = fail(&err);
  return rc;
}

/* Whether any report of this run shows quantiles: -v, JSON, Markdown (p99 ULP) and HTML do;
 * the plain text report, JUnit and the baseline do not, and a run without them is faster. */
static bool shows_quantiles(const cli *c) {
  return c->out.verbose || c->json || c->out.markdown || c->out.html;
}

/* How many reports go to stdout; when one does, the text report stays away from it. */
static int stdout_users(const cli *c) {
  const outputs *o = &c->out;
  return pc_cli_is_stdout(c->json) + pc_cli_is_stdout(o->markdown) + pc_cli_is_stdout(o->junit) +
         pc_cli_is_stdout(o->html);
}

/* An output file must be writable: an existing one itself, else its folder. Checked before the
 * data, so that a typo does not throw away a long comparison; the writers still report a file
 * that cannot be opened or written. */
static int check_output(const char *path) {
  if (!path || pc_cli_is_stdout(path))
    return PC_OK;
  const char *slash = strrchr(path, '/');
  char dir[4096];
  int n = slash && slash != path ? (int)(slash - path) : 1; /* the folder, "/" or "." */
  if ((size_t)n >= sizeof dir)
    return PC_OK; /* left to the writer, which names the path */
  snprintf(dir, sizeof dir, "%.*s", n, slash ? path : ".");
  bool exists = access(path, F_OK) == 0;
  if (exists ? access(path, W_OK) < 0 : access(dir, W_OK | X_OK) < 0) {
    int e = errno;
    fputs("paritycheck: ", stderr);
    put_untrusted(path);
    fprintf(stderr, ": cannot write %s: %s\n", exists ? "this file" : "a file there", strerror(e));
    return PC_EIO;
  }
  return PC_OK;
}

/* The report options that can be judged before the data are read. */
static int check_outputs(const cli *c) {
  const outputs *o = &c->out;
  const char *files[] = {c->json, o->markdown, o->junit, o->html, o->save_baseline};
  if (stdout_users(c) > 1)
    return usage_error("only one report can go to standard output (\"-\")", NULL);
  if (o->github && stdout_users(c))
    return usage_error("--github prints to standard output: no other report can go there", NULL);
  if (o->baseline && (o->approved || o->approve))
    return usage_error("--baseline and approvals (--approve, --approved) are two gates: use one",
                       NULL);
  if (o->approve && (!o->sign.by || !*o->sign.by || !o->sign.reason || !*o->sign.reason))
    return usage_error("--approve needs --by NAME and --reason TEXT", NULL);
  if (!o->approve && (o->sign.by || o->sign.reason || o->sign.only))
    return usage_error("--by, --reason and --only go with --approve", NULL);
  int rc = check_output(o->approve);
  for (size_t i = 0; rc == PC_OK && i < sizeof files / sizeof files[0]; i++)
    rc = check_output(files[i]);
  return rc;
}

/* The paths before anything is read: A and B not one file, no report over an input or another
 * report, no FIFO where a file is read whole (trust_cli.h). */
static int check_io(const cli *c) {
  const outputs *o = &c->out;
  const char *files[] = {c->json, o->markdown, o->junit, o->html, o->save_baseline, o->approve};
  pc_cli_io io = {.a = c->path_a,
                  .b = c->path_b,
                  .reference = c->reference,
                  .baseline = o->baseline,
                  .approved = o->approved,
                  .approve = o->approve,
                  .tol_files = c->tol_files,
                  .n_tol_files = c->n_tol_files,
                  .outputs = files,
                  .noutputs = sizeof files / sizeof *files,
                  .allow_same = c->allow_same};
  return pc_cli_check_io(&io);
}

/* The --reference file must be readable: checked before A and B are compared, since R is read
 * only after that comparison; the library still reports a file that is not HDF5. */
static int check_reference(const char *path) {
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!path)
    return PC_OK;
  if (!f) {
    int e = errno;
    fputs("paritycheck: ", stderr);
    put_untrusted(path);
    fprintf(stderr, ": cannot read the reference file: %s\n", strerror(e));
    return PC_EIO;
  }
  fclose(f);
  return PC_OK;
}

/* The --baseline file, read before the data so that a wrong one fails at once rather than
 * after GiBs are compared; *base stays NULL without one. */
static int load_baseline(const cli *c, pc_baseline **base) {
  pc_error err;
  *base = NULL;
  return c->out.baseline && pc_baseline_load(base, c->out.baseline, &err) < 0 ? fail(&err) : PC_OK;
}

/* The approval file of --approved, or the one --approve adds to when it exists; read before the
 * data, as the baseline. *ap stays NULL without one. */
static int load_approvals(const cli *c, pc_approvals **ap) {
  pc_error err;
  const char *path = c->out.approved ? c->out.approved : c->out.approve;
  *ap = NULL;
  if (!path || (!c->out.approved && access(path, F_OK) != 0))
    return PC_OK;
  return pc_approvals_load(ap, path, &err) < 0 ? fail(&err) : PC_OK;
}

/* A gate's file made under other tolerances than this run's (pc_gate_tolerance_mismatch). */
static int tolerance_mismatch(const char *why) {
  fputs("paritycheck: ", stderr);
  put_untrusted(why);
  fputs("\nparitycheck: hint: gate with the tolerances (--profile, -t) the file was made with, or "
        "make it again under these\n",
        stderr);
  return PC_EUSAGE;
}

/* --approve: signs the run's drifting tensors into the file, then judges the run against what
 * it wrote, so that the exit code says whether everything that drifts is now approved. */
static int approve(const cli *c, const pc_approvals *prev, const pc_run *run, pc_gate **gate) {
  pc_error err;
  pc_approvals *ap = NULL;
  pc_tol_record now = pc_cli_tols_record(&c->tols);
  pc_approve_options sign = c->out.sign;
  sign.tolerances = &now;
  if (prev &&
      pc_approvals_tolerance_mismatch(prev, c->out.approve, &now, err.message, sizeof err.message))
    return tolerance_mismatch(err.message);
  pc_cli_hold_stop_signals(true);
  int rc = pc_approvals_save(c->out.approve, run, prev, &sign, &err);
  pc_cli_hold_stop_signals(false);
  if (rc == PC_OK && (rc = pc_approvals_load(&ap, c->out.approve, &err)) == PC_OK)
    rc = pc_gate_approvals(gate, ap, c->out.approve, run, &err);
  pc_approvals_free(ap);
  return rc < 0 ? fail(&err) : PC_OK;
}

/* The run judged against the baseline or the approvals; *gate stays NULL without either. */
static int judge(const cli *c, const pc_baseline *base, const pc_approvals *ap, const pc_run *run,
                 pc_gate **gate) {
  pc_error err;
  double factor = c->out.baseline_factor ? c->out.baseline_factor : PC_BASELINE_FACTOR_DEFAULT;
  char text[1024];
  *gate = NULL;
  if (c->out.approve)
    return approve(c, ap, run, gate);
  if (base && pc_gate_new(gate, base, c->out.baseline, run, factor, &err) < 0)
    return fail(&err);
  if (ap && pc_gate_approvals(gate, ap, c->out.approved, run, &err) < 0)
    return fail(&err);
  pc_tol_record now = pc_cli_tols_record(&c->tols);
  if (pc_gate_tolerance_mismatch(*gate, &now, err.message, sizeof err.message))
    return tolerance_mismatch(err.message);
  const char *warning = base ? pc_gate_profile_warning(*gate, c->profile, text, sizeof text) : NULL;
  if (warning) {
    fputs("paritycheck: warning: ", stderr);
    put_untrusted(warning);
    fputc('\n', stderr);
  }
  return PC_OK;
}

/* Whether standard output is a pipe whose reader has left (paritycheck ... | head): Linux marks
 * its write end with POLLERR. */
static bool stdout_gone(void) {
  struct pollfd p = {STDOUT_FILENO, 0, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* A report to standard output that a reader who left cut short ends quietly, as in other Unix
 * tools: no message, the report files are still written and the exit code is still the run's
 * (docs/robustness.md, "Faults"). Any other write error is the run's error. */
static int report_rc(int rc, const char *path) {
  return rc < 0 && pc_cli_is_stdout(path) && stdout_gone() ? PC_OK : rc;
}

/* A report of a million tensors takes a while: its progress is a heartbeat (isolate.h). */
static void report_progress(void *user) {
  (void)user;
  pc_cli_heartbeat();
}

/* Every report from the one run, with options ro. */
static int write_all(const cli *c, const pc_run *run, const pc_report_options *ro) {
  pc_error err;
  const outputs *o = &c->out;
  if (!stdout_users(c) && report_rc(pc_report_text("-", run, ro, &err), "-") < 0)
    return fail(&err);
  if (o->github && report_rc(pc_report_github("-", run, ro, &err), "-") < 0)
    return fail(&err);
  /* A stop signal waits while the report files are written: each is then in place or was never
   * made, and no temporary file stays behind (docs/robustness.md, "Faults"). */
  const char *files[PC_CLI_FILES_] = {c->json, o->markdown, o->junit, o->html, o->save_baseline};
  int rcs[PC_CLI_FILES_];
  pc_error errs[PC_CLI_FILES_];
  pc_tol_record tols = pc_cli_tols_record(&c->tols);
  pc_cli_write_files(files, run, ro, &tols, rcs, errs);
  int rc = PC_OK;
  for (int k = 0; k < PC_CLI_FILES_; k++) /* every file that failed, in this order */
    if (report_rc(rcs[k], files[k]) < 0) {
      int code = fail(&errs[k]);
      rc = rc == PC_OK ? code : rc;
    }
  return rc;
}

/* Every report from the one run, each recording the run's settings (trust_cli.h). */
static int write_reports(const cli *c, const pc_run *run, const pc_gate *gate) {
  const outputs *o = &c->out;
  pc_report_options ro = PC_REPORT_OPTIONS_INIT;
  ro.profile = c->profile;
  ro.sort = o->sort;
  ro.max_rows = o->max_rows;
  ro.gate = gate;
  ro.color =
      !c->no_color && !getenv("NO_COLOR") && isatty(fileno(stdout)) && !pc_cli_mpi_launched();
  ro.quiet = c->quiet;
  ro.verbose = o->verbose;
  ro.threads = (unsigned)c->jobs; /* -j formats the reports' rows too */
  ro.progress = report_progress;
  pc_report_setting *settings =
      pc_cli_settings(&c->tols, c->trust_b_metadata, c->allow_same, &ro.nsettings);
  if (!settings) {
    fputs("paritycheck: out of memory\n", stderr);
    return PC_ENOMEM;
  }
  ro.settings = settings;
  int rc = write_all(c, run, &ro);
  free(settings);
  return rc;
}

/* The exit code of a run's or a gate's verdict. */
static int exit_code(pc_run_verdict v) {
  switch (v) {
  case PC_RUN_PASS:
    return EXIT_PASS;
  case PC_RUN_DRIFT:
    return EXIT_DRIFT;
  case PC_RUN_ERROR:
    break;
  }
  return EXIT_ERROR;
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
  put_untrusted(path);
  fputs(" saved; exit 1 is this run's drift (to accept it in a set -e script: "
        "paritycheck ... || [ $? -eq 1 ])\n",
        stderr);
}

/* Writes every report; the exit code follows the gate when there is one. */
static int report(const cli *c, const pc_baseline *base, const pc_approvals *ap,
                  const pc_run *run) {
  keep_large_blocks_apart();
  pc_gate *gate = NULL;
  int rc = judge(c, base, ap, run, &gate);
  if (rc == PC_OK)
    rc = write_reports(c, run, gate);
  int code = rc < 0 ? EXIT_ERROR : exit_code(gate ? gate->verdict : run->verdict);
  if (code == EXIT_DRIFT && !gate && c->out.save_baseline)
    say_saved_drift(c->out.save_baseline);
  pc_gate_free(gate);
  return code;
}

/* Progress on a terminal: bytes read of both files, and the rate, a few times a second. */
#define PROGRESS_AFTER_S 0.5
typedef struct progress {
  struct timespec start, last;
  bool tty; /* stderr is a terminal: show it, else only beat the heart */
  bool shown;
} progress;

static double seconds_since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) + 1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

static void show_progress(void *user, uint64_t done, uint64_t total) {
  progress *p = user;
  pc_cli_heartbeat();
  if (!p->tty || total == 0) /* no figure: a file's metadata is being read */
    return;
  /* Quick runs stay silent; long ones update a few times a second. */
  if (seconds_since(&p->start) < PROGRESS_AFTER_S || (p->shown && seconds_since(&p->last) < 0.2))
    return;
  clock_gettime(CLOCK_MONOTONIC, &p->last);
  double mib = 1024.0 * 1024.0, secs = seconds_since(&p->start);
  fprintf(stderr, "\rparitycheck: %.1f of %.1f MiB (%.0f MiB/s)\033[K", (double)done / mib,
          (double)total / mib, secs > 0 ? (double)done / mib / secs : 0.0);
  p->shown = true;
}

typedef struct run_args {
  const cli *c;
  const pc_tolset *tols;
} run_args;

static int run_cli(const cli *c, const pc_tolset *tols);

/* The comparison and the reports, in the child process of pc_cli_isolated. */
static int run_child(void *arg) {
  const run_args *r = arg;
  return run_cli(r->c, r->tols);
}

/* Runs the comparison isolated from crashes and endless loops inside HDF5 (isolate.h). */
static int run_isolated(const cli *c, const pc_tolset *tols) {
  char what[1024], a[320], b[320], ref[320];
  pc_escape(a, sizeof a, c->path_a, PC_ESCAPE_TERMINAL); /* printed when the child fails */
  pc_escape(b, sizeof b, c->path_b, PC_ESCAPE_TERMINAL);
  pc_escape(ref, sizeof ref, c->reference ? c->reference : "", PC_ESCAPE_TERMINAL);
  snprintf(what, sizeof what, "%s, %s%s%s", a, b, c->reference ? ", " : "", ref);
  run_args r = {c, tols};
  return pc_cli_isolated(run_child, &r, (unsigned)c->stall_s, what);
}

static int run_cli(const cli *c, const pc_tolset *tols) {
  pc_error err;
  pc_options opts = PC_OPTIONS_INIT;
  progress prog = {{0, 0}, {0, 0}, isatty(fileno(stderr)) != 0, false};
  clock_gettime(CLOCK_MONOTONIC, &prog.start);
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
  opts.progress = show_progress;
  opts.progress_user = &prog;
  pc_set_debug(c->debug);
  pc_baseline *base = NULL;
  pc_approvals *ap = NULL;
  pc_run *run = NULL;
  int rc = check_io(c);
  if (rc == PC_OK)
    rc = check_outputs(c);
  if (rc == PC_OK)
    rc = check_reference(c->reference);
  if (rc == PC_OK)
    rc = load_baseline(c, &base);
  if (rc == PC_OK)
    rc = load_approvals(c, &ap);
  if (rc < 0) {
    pc_baseline_free(base);
    return EXIT_ERROR;
  }
  /* Under an MPI launcher, the ranks compare together and rank 0 reports (mpi_run.h). */
  int rank = pc_cli_mpi_start();
  prog.tty = prog.tty && rank <= 0;
  rc = rank < 0 ? pc_compare_files(&run, c->path_a, c->path_b, &opts, &err)
                : pc_cli_mpi_compare(&run, c->path_a, c->path_b, &opts, &err);
  if (rc == PC_OK && run && c->reference)
    rc = pc_compare_reference(run, c->reference, &opts, &err);
  if (rc == PC_OK && run)
    pc_run_accept_indeterminate(run, c->accept_indeterminate);
  if (prog.shown)
    fputs("\r\033[K", stderr); /* the report starts on a clean line */
  if (rc == PC_OK && run)
    print_warnings(run);
  if (rc < 0)
    fail(&err);
  int code = rc < 0 ? EXIT_ERROR : run ? report(c, base, ap, run) : EXIT_PASS;
  pc_run_free(run);
  pc_baseline_free(base);
  pc_approvals_free(ap);
  return pc_cli_mpi_end(code);
}

static void free_cli(cli *c) {
  pc_cli_tols_free(&c->tols);
  free(c->tol_files);
  free(c->names.include);
  free(c->names.exclude);
  free(c->names.strip_prefix);
  free(c->names.maps);
}

int main(int argc, char **argv) {
  pc_error err;
  cli c = {.stall_s = DEFAULT_STALL_S, /* every other field zero, NULL or false */
           .out = {.sign = PC_APPROVE_OPTIONS_INIT}};
  pc_tolset *tols = pc_tolset_new();
  size_t n = (size_t)argc;
  c.tol_files = calloc(n, sizeof *c.tol_files);
  c.names.include = calloc(n, sizeof(char *));
  c.names.exclude = calloc(n, sizeof(char *));
  c.names.strip_prefix = calloc(n, sizeof(char *));
  c.names.maps = calloc(n, sizeof *c.names.maps);
  if (!tols || !c.tol_files || !c.names.include || !c.names.exclude || !c.names.strip_prefix ||
      !c.names.maps) {
    fputs("paritycheck: out of memory\n", stderr);
    pc_tolset_free(tols);
    free_cli(&c);
    return EXIT_ERROR;
  }
  /* A reader that goes away (paritycheck ... | head) is a write error on standard output, which
   * ends that report quietly (report_rc), not a death by SIGPIPE that would read as a crash. */
  signal(SIGPIPE, SIG_IGN);
  int code = EXIT_ERROR;
  if (pc_tolset_load_builtin(tols, &err) < 0) {
    fputs("paritycheck: built-in tolerances: ", stderr);
    put_untrusted(err.message);
    fputc('\n', stderr);
  } else if (parse_args(argc, argv, &c) == PC_OK) {
    code = c.done                               ? EXIT_PASS
           : load_tolerances(&c, tols) == PC_OK ? run_isolated(&c, tols)
                                                : EXIT_ERROR;
  }
  pc_tolset_free(tols);
  free_cli(&c);
  return code;
}
