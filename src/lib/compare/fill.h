/* Elements that were never written (docs/robustness.md): HDF5 reads each as its dataset's fill
 * value, so a run of n element pairs that neither side wrote is n copies of one pair, and its
 * figures follow from that pair's without reading anything. A pair of datasets never written
 * at all (all_fill) is one such run; so is every gap between the written chunks of two partly
 * written (sparse) datasets. Internal to the library. */
#ifndef PC_FILL_H
#define PC_FILL_H

#include "kernel.h" /* pc_kernel_args, pc_magnitude */
#include "loader.h" /* pc_dataset */

#include <paritycheck/result.h> /* pc_tensor */

#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */

/** True when both datasets were never written (pc_dataset.all_fill). */
bool pc_fill_pair(const pc_dataset *a, const pc_dataset *b);

/** Fold n pairs of the fill values of a and b (numeric, comparable kinds), the elements
 * k->base .. k->base + n - 1, into k->stats and, when k->hist is set, the quantile histograms,
 * as the kernels would fold them one by one: counts, maxima, the ulp sum and histogram and the
 * worst element (k->base, the run's first) are exact; each double sum adds n times the pair's
 * term, rounded once. n replaces k->n: a run is as long as the gap between written chunks. */
void pc_fill_run(const pc_kernel_args *k, const pc_dataset *a, const pc_dataset *b, uint64_t n);

/** t->stats of the pair a, b (both all_fill) with t->compare and t->tol set, quantiles
 * included when `quantiles`: one run of all `count` elements (pc_fill_run). PC_ENOMEM when the
 * quantile histograms cannot be allocated. */
int pc_fill_compare(pc_tensor *t, const pc_dataset *a, const pc_dataset *b, bool quantiles);

/** Add n elements of d's fill value to m, as pc_kernel_magnitude would measure them (the sum
 * of squares adds n times the element's, rounded once). */
void pc_fill_magnitude(const pc_dataset *d, uint64_t n, pc_magnitude *m);

#endif
