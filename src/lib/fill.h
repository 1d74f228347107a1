/* Datasets that were never written (docs/robustness.md): HDF5 reads every element of one as its
 * fill value, so when both sides of a pair are such datasets every element pair is the same and
 * the figures of all `count` elements follow from one element's, without reading anything. A
 * dataset declaring 2^40 elements is judged in microseconds. Internal to the library. */
#ifndef PC_FILL_H
#define PC_FILL_H

#include "kernel.h" /* pc_magnitude */
#include "loader.h" /* pc_dataset */

#include <paritycheck/compare.h> /* pc_tensor */

#include <stdbool.h> /* bool */

/** True when both datasets were never written (pc_dataset.all_fill). */
bool pc_fill_pair(const pc_dataset *a, const pc_dataset *b);

/** t->stats of the pair a, b (numeric, one shape, both all_fill) with t->compare and t->tol set,
 * quantiles included: the figures of docs/metrics.md for `count` copies of the fill values'
 * element pair. Counts, maxima, the ulp sum, the histogram and the worst element (index 0) are
 * exact; each double sum is count times the element's term, rounded once, where streaming would
 * add count terms one by one. PC_ENOMEM when the quantile histograms cannot be allocated. */
int pc_fill_compare(pc_tensor *t, const pc_dataset *a, const pc_dataset *b);

/** The magnitude of a dataset that was never written (all_fill), as pc_kernel_magnitude would
 * measure it over all its elements. */
void pc_fill_magnitude(const pc_dataset *d, pc_magnitude *m);

#endif
