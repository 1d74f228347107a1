/* What the kernel's two test files share (test_kernel.c, test_kernel_f32.c). */
#ifndef PC_KERNEL_FIXTURE_H
#define PC_KERNEL_FIXTURE_H

#include "kernel.h"

/* A tolerance with no criterion set: every difference is a mismatch. */
pc_tol tol_none(void);

/* Every figure but the double sums is exact whatever the blocks; the double sums add per block,
 * so they may differ in the last bits only. Fails the running cmocka test otherwise. */
void assert_same_stats(const pc_stats *x, const pc_stats *y);

/* PC_NHISTS fresh quantile histograms, and their release. */
pc_qhist **hists_new(void);
void hists_free(pc_qhist **h);

#endif
