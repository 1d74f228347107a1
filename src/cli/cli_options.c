/* The command line (cli_options.h): the option table, each option's value, and the
 * combinations that cannot go together. */
#include "cli_options.h"
#include "cli_diag.h"
#include "cli_suggest.h"
#include "cli_usage.h"
#include "report_files.h"

#include <errno.h>  /* errno, ERANGE */
#include <float.h>  /* DBL_MAX */
#include <getopt.h> /* getopt_long */
#include <stdio.h>  /* printf, snprintf */
#include <stdlib.h> /* calloc, free, strtoull, strtod */
#include <string.h> /* strcmp, strchr, strspn, strcspn */

/* Options of the run that have no short letter. */
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

int pc_cli_init(pc_cli *c, int argc) {
  size_t n = (size_t)argc;
  *c = (pc_cli){.stall_s = PC_CLI_DEFAULT_STALL_S, /* every other field zero, NULL or false */
                .out = {.sign = PC_APPROVE_OPTIONS_INIT}};
  c->tol_files = calloc(n, sizeof *c->tol_files);
  c->names.include = calloc(n, sizeof(char *));
  c->names.exclude = calloc(n, sizeof(char *));
  c->names.strip_prefix = calloc(n, sizeof(char *));
  c->names.maps = calloc(n, sizeof *c->names.maps);
  return c->tol_files && c->names.include && c->names.exclude && c->names.strip_prefix &&
                 c->names.maps
             ? PC_OK
             : PC_ENOMEM;
}

void pc_cli_free(pc_cli *c) {
  pc_cli_tols_free(&c->tols);
  free(c->tol_files);
  free(c->names.include);
  free(c->names.exclude);
  free(c->names.strip_prefix);
  free(c->names.maps);
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
static bool parse_output_option(int opt, const char *arg, pc_cli_outputs *o) {
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
    pc_cli_usage_error("--sort wants worst or order", arg);
    return false;
  } else if (opt == OPT_MAX_ROWS && !parse_count(arg, &o->max_rows)) {
    pc_cli_usage_error("--max-rows wants a whole number from 1 to 2^32", arg);
    return false;
  } else if (opt == OPT_BASELINE_FACTOR) {
    o->baseline_factor = strtod(arg, &end);
    /* written so that NaN fails too */
    if (end == arg || *end || !(o->baseline_factor >= 1 && o->baseline_factor <= DBL_MAX)) {
      pc_cli_usage_error("--baseline-factor wants a finite number >= 1", arg);
      return false;
    }
  }
  return true;
}

/* False (after the message) for a --map without '='. The argument is split in place. */
static bool parse_name_option(int opt, char *arg, pc_cli_names *n) {
  if (opt == OPT_INCLUDE) {
    n->include[n->ninclude++] = arg;
  } else if (opt == OPT_EXCLUDE) {
    n->exclude[n->nexclude++] = arg;
  } else if (opt == OPT_STRIP_PREFIX) {
    n->strip_prefix[n->nstrip_prefix++] = arg;
  } else {
    char *eq = strchr(arg, '=');
    if (!eq) {
      pc_cli_usage_error("--map wants FROM=TO", arg);
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
    pc_cli_usage_error("option given twice (it takes one value)", name);
    return false;
  }
  *seen |= (uint64_t)1 << i;
  return true;
}

/* "unknown option" and the option of long_opts probably meant (pc_cli_closest_name): --proflie
 * gives --profile, -profile --profile, --jsno --json. The word is the argument that holds the
 * option: getopt has moved past it, unless an unknown short option is one of several letters of it
 * ("-profile"). */
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
  const char *meant = strlen(name) > 2 ? pc_cli_closest_name(name, names, n) : NULL; /* not -qz */
  fputs("paritycheck: unknown option: ", stderr);
  pc_cli_put_untrusted(optopt && word[1] != optopt ? (char[]){'-', (char)optopt, '\0'} : word);
  if (meant)
    fprintf(stderr, " (did you mean '--%s'?)", meant);
  fputs("\nTry 'paritycheck --help'.\n", stderr);
  return PC_EUSAGE;
}

/* A switch without a value: sets its flag; false for an option that is not one. */
static bool set_switch(int opt, pc_cli *c) {
  bool *flag = opt == OPT_NO_ENVELOPE            ? &c->no_envelope
               : opt == 'q'                      ? &c->quiet
               : opt == OPT_NO_COLOR             ? &c->no_color
               : opt == OPT_ALLOW_EMPTY          ? &c->allow_empty
               : opt == OPT_TRUST_B_METADATA     ? &c->trust_b_metadata
               : opt == OPT_ALLOW_SAME           ? &c->allow_same
               : opt == OPT_DEBUG                ? &c->debug
               : opt == OPT_ACCEPT_INDETERMINATE ? &c->accept_indeterminate
                                                 : NULL;
  if (flag)
    *flag = true;
  return flag != NULL;
}

/* The limits of the run: -j, --block-elems, --max-memory, --stall-timeout (0: no limit). PC_OK,
 * or PC_EUSAGE after the message for a bad value. */
static int parse_limit(int opt, const char *arg, pc_cli *c) {
  if (opt == OPT_BLOCK && !parse_count(arg, &c->block_elems))
    return pc_cli_usage_error("--block-elems wants a whole number from 1 to 2^32", arg);
  if (opt == OPT_MAX_MEMORY && !parse_size(arg, &c->max_memory))
    return pc_cli_usage_error("--max-memory wants a byte count such as 512M or 2G", arg);
  if (opt == OPT_STALL && strcmp(arg, "0") == 0)
    c->stall_s = 0;
  else if (opt == OPT_STALL && !parse_count(arg, &c->stall_s))
    return pc_cli_usage_error("--stall-timeout wants a whole number of seconds", arg);
  if (opt == 'j' && (!parse_count(arg, &c->jobs) || c->jobs > PC_CLI_MAX_JOBS))
    return pc_cli_usage_error("-j wants a whole number from 1 to 256", arg);
  return PC_OK;
}

/* --version and --help: the answer on stdout, and c->done. */
static void answer(int opt, pc_cli *c) {
  if (opt == 'V')
    printf("paritycheck %s\n", PARITYCHECK_VERSION);
  else
    pc_cli_usage(stdout);
  c->done = true;
}

/* One option that getopt_long recognised, with its value arg (NULL for a switch). PC_OK, or
 * PC_EUSAGE after the message for a bad value. */
static int parse_option(int opt, char *arg, pc_cli *c) {
  if (is_output_option(opt))
    return parse_output_option(opt, arg, &c->out) ? PC_OK : PC_EUSAGE;
  if (opt >= OPT_INCLUDE && opt <= OPT_STRIP_PREFIX)
    return parse_name_option(opt, arg, &c->names) ? PC_OK : PC_EUSAGE;
  if (opt == OPT_BLOCK || opt == OPT_MAX_MEMORY || opt == OPT_STALL || opt == 'j')
    return parse_limit(opt, arg, c);
  if (opt == 'V' || opt == 'h')
    answer(opt, c);
  else if (set_switch(opt, c))
    return PC_OK;
  else if (opt == 't')
    c->tol_files[c->n_tol_files++] = arg;
  else if (opt == OPT_PROFILE)
    c->profile = arg;
  else if (opt == OPT_REFERENCE)
    c->reference = arg;
  else if (opt == OPT_ENVELOPE)
    c->envelope = arg;
  else if (opt == OPT_JSON)
    c->json = arg;
  return PC_OK;
}

int pc_cli_parse(int argc, char **argv, pc_cli *c) {
  int opt, rc = PC_OK;
  uint64_t seen = 0;
  opterr = 0;
  while (rc == PC_OK && !c->done &&
         (opt = getopt_long(argc, argv, ":t:j:qvVh", long_opts, NULL)) != -1) {
    if (!first_time(opt, &seen))
      rc = PC_EUSAGE;
    else if (opt == ':')
      rc = pc_cli_usage_error("option needs a value", argv[optind - 1]);
    else if (opt == '?')
      rc = unknown_option(argc, argv);
    else
      rc = parse_option(opt, optarg, c);
  }
  if (rc != PC_OK || c->done)
    return rc;
  if (argc - optind != 2)
    return pc_cli_usage_error("expected two files or two folders, A (reference) and B (candidate)",
                              NULL);
  c->path_a = argv[optind];
  c->path_b = argv[optind + 1];
  if (c->envelope && c->no_envelope)
    return pc_cli_usage_error("--envelope and --no-envelope exclude each other", NULL);
  return PC_OK;
}

int pc_cli_stdout_reports(const pc_cli *c) {
  const pc_cli_outputs *o = &c->out;
  return pc_cli_is_stdout(c->json) + pc_cli_is_stdout(o->markdown) + pc_cli_is_stdout(o->junit) +
         pc_cli_is_stdout(o->html);
}

int pc_cli_check_combinations(const pc_cli *c) {
  const pc_cli_outputs *o = &c->out;
  if (pc_cli_stdout_reports(c) > 1)
    return pc_cli_usage_error("only one report can go to standard output (\"-\")", NULL);
  if (o->github && pc_cli_stdout_reports(c))
    return pc_cli_usage_error("--github prints to standard output: no other report can go there",
                              NULL);
  if (o->baseline && (o->approved || o->approve))
    return pc_cli_usage_error(
        "--baseline and approvals (--approve, --approved) are two gates: use one", NULL);
  if (o->approve && (!o->sign.by || !*o->sign.by || !o->sign.reason || !*o->sign.reason))
    return pc_cli_usage_error("--approve needs --by NAME and --reason TEXT", NULL);
  if (!o->approve && (o->sign.by || o->sign.reason || o->sign.only))
    return pc_cli_usage_error("--by, --reason and --only go with --approve", NULL);
  return PC_OK;
}
