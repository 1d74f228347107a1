/* The report tests' shared fixture (report_fixture.c), linked into each test_report_*
 * executable: a run built by hand with one tensor of each kind, a gate over it, a run of
 * diagnosed tensors, and the file helpers that every writer's tests use. */
#ifndef PC_TEST_REPORT_FIXTURE_H
#define PC_TEST_REPORT_FIXTURE_H

#include <paritycheck/baseline.h> /* pc_gate */
#include <paritycheck/result.h>   /* pc_tensor, pc_run */

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */

/* The hand-made run's tensors, in run order: a pass, a drift, a complex drift the drift explains,
 * one tensor only in B, one only in A, a shape mismatch, a skipped one and one that could not be
 * read (report_fixture.c gives each one's figures). */
enum { T_PASS, T_DRIFT, T_COMPLEX, T_ONLY_B, T_ONLY_A, T_SHAPE, T_SKIP, T_ERROR, T_COUNT };

extern pc_tensor tensors[T_COUNT];
extern pc_run run;

/* cmocka setup: builds tensors and run afresh, so that a test may change them. */
int setup(void **state);

/* A new empty temporary file's path (one static buffer: the next call reuses it). */
char *temp_path(void);

/* The whole file, however long, as a string to free(). */
char *slurp(const char *path);

/* Fails, showing text, unless each of the n lines occurs in text. */
void assert_lines(const char *text, const char *const *wanted, size_t n);

/* A gate over the hand-made run (make_gate builds it): the drift worse than its baseline entry,
 * the tensor only in B and the unreadable one new, the rest unchanged; the drift and the tensor
 * only in B fail it. */
extern pc_gate gate;
void make_gate(void);

/* A run of five float32 tensors of [4] as the judge leaves them (docs/reports.md,
 * "Indeterminate tensors"): a pass, an indeterminate gradient (rel_rms 0.8 against 0.001, no
 * digit left), and three structural drifts, each with the structure criterion's statistic and
 * limit as the judge's tests set them: B = 2 A (the scale test's p-value 0 below 1e-6), B
 * shifted by one slice of axis 0 (shifted over unshifted distance 0.01 below 0.25), 12 % of A's
 * nonzero elements zeroed in B (their energy 60 above 3): a failing statistic on either side
 * of its limit reads "<" or ">".
 * The judge's first divergence is the indeterminate tensor. */
enum { D_PASS, D_INDET, D_SCALED, D_SHIFTED, D_ZEROED, D_COUNT };

/* n tensors of the run above, tallied by the library (pc_run_accept_indeterminate) with or
 * without accepting indeterminate tensors. */
pc_run diag_run(size_t n, bool accept);

/* The indeterminate tensor's reason as pc_report_reasons gives it, then its diagnosis as
 * pc_diagnosis_text words it. */
#define INDET_WHY                                                                                  \
  "rel_rms 0.8 > limit 0.001; diagnosis: no significant digit left: the honest allowance is 0.8 "  \
  "of the value's size, so a bug and honest drift look alike here"

#endif
