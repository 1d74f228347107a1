/* The kernel tests' shared helpers (kernel_fixture.h). */
#include "kernel_fixture.h"

#include <math.h>   /* fabs */
#include <stdlib.h> /* calloc, free */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

pc_tol tol_none(void) {
  pc_tol t = {0};
  return t;
}

/* Every figure but the double sums is exact whatever the blocks; the double sums add per block,
 * so they may differ in the last bits only. */
void assert_same_stats(const pc_stats *x, const pc_stats *y) {
  const double *dx[] = {&x->sum_sq_a, &x->sum_sq_b, &x->sum_ab,    &x->sum_sq_diff,
                        &x->sum_abs,  &x->sum_rel,  &x->sum_a_diff};
  const double *dy[] = {&y->sum_sq_a, &y->sum_sq_b, &y->sum_ab,    &y->sum_sq_diff,
                        &y->sum_abs,  &y->sum_rel,  &y->sum_a_diff};
  for (size_t i = 0; i < 7; i++)
    assert_true(*dx[i] == *dy[i] || fabs(*dx[i] - *dy[i]) <= 1e-12 * fabs(*dx[i]));
  pc_stats cx = *x, cy = *y;
  cx.sum_sq_a = cx.sum_sq_b = cx.sum_ab = cx.sum_sq_diff = cx.sum_abs = cx.sum_rel = 0;
  cy.sum_sq_a = cy.sum_sq_b = cy.sum_ab = cy.sum_sq_diff = cy.sum_abs = cy.sum_rel = 0;
  cx.sum_a_diff = cy.sum_a_diff = 0;
  assert_memory_equal(&cx, &cy, sizeof cx);
}

pc_qhist **hists_new(void) {
  pc_qhist **h = calloc(PC_NHISTS, sizeof *h);
  for (int w = 0; w < PC_NHISTS; w++) {
    h[w] = calloc(1, sizeof *h[w]);
    pc_qhist_reset(h[w]);
  }
  return h;
}

void hists_free(pc_qhist **h) {
  for (int w = 0; w < PC_NHISTS; w++)
    free(h[w]);
  free(h);
}
