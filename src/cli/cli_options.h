/* The command line: what the options say, parsed and checked for combinations that cannot go
 * together, before anything is read. Behaviour belongs to the run (cli_run.h) and the library;
 * this file only records what was asked. */
#ifndef PC_CLI_OPTIONS_H
#define PC_CLI_OPTIONS_H

#include "tol_record.h"

#include <paritycheck/paritycheck.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

enum { PC_CLI_MAX_JOBS = 256 }; /* more threads than this only adds contention */

/* Seconds without progress after which the comparison is stopped (isolate.h): far beyond any
 * honest pause, since progress is reported after every block read. */
enum { PC_CLI_DEFAULT_STALL_S = 600 };

/* The options of the report files, sorting and the gates. */
typedef struct pc_cli_outputs {
  const char *markdown, *junit, *html; /* report files; "-" is stdout */
  const char *save_baseline, *baseline;
  const char *approve, *approved; /* --approve FILE (signs), --approved FILE (the gate) */
  pc_approve_options sign;        /* --by, --reason, --only */
  double baseline_factor;         /* 0 until given: PC_BASELINE_FACTOR_DEFAULT */
  size_t max_rows;                /* 0 until given: PC_REPORT_MAX_ROWS */
  pc_sort sort;
  bool verbose;
  bool github; /* --github: annotations on stdout after the text report */
} pc_cli_outputs;

/* The name options in command-line order (room for argc each). */
typedef struct pc_cli_names {
  const char **include, **exclude, **strip_prefix;
  size_t ninclude, nexclude, nstrip_prefix;
  pc_name_map *maps;
  size_t nmaps;
} pc_cli_names;

/* One command: its options, and the record of the tolerance layers they loaded. */
typedef struct pc_cli {
  const char *path_a, *path_b;
  pc_cli_names names;
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
  pc_cli_outputs out;
  size_t jobs;
  uint64_t max_memory; /* 0: the library's default */
  size_t stall_s;      /* --stall-timeout; 0: no limit */
  pc_cli_tols tols;    /* the tolerance layers loaded (cli_profiles.h), for the gates' record */
} pc_cli;

/** Sets c to the defaults and gives each list room for argc entries. PC_ENOMEM, with nothing
 * printed, when out of memory; pc_cli_free(c) is right either way. */
int pc_cli_init(pc_cli *c, int argc);

/** Frees what c holds: its lists and its tolerance record. */
void pc_cli_free(pc_cli *c);

/** Parses argv into c. PC_OK, or PC_EUSAGE after the message on stderr. --help and --version
 * print their answer on stdout and set c->done. The -t files are only collected here (the
 * profile loads before them wherever --profile stands); --map's argument is split in place. */
int pc_cli_parse(int argc, char **argv, pc_cli *c);

/** The report options that cannot go together: two reports on standard output, --github with
 * one there, --baseline with an approval, --approve without --by and --reason, or --by,
 * --reason, --only without --approve. PC_OK, or PC_EUSAGE after the message. */
int pc_cli_check_combinations(const pc_cli *c);

/** How many reports go to standard output ("-"); when one does, the text report stays away. */
int pc_cli_stdout_reports(const pc_cli *c);

#endif
