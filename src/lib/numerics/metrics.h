/* Product metrics (docs/metrics.md, "Product metrics"): figures of what a model's user sees,
 * computed over the last axis of a whole tensor held in memory. Internal to the library. */
#ifndef PC_METRICS_H
#define PC_METRICS_H

#include <paritycheck/error.h>
#include <paritycheck/result.h>

#include <stdint.h> /* uint64_t */

/** The metrics that mt names, of A's values a and B's values b, each `rows` rows of `cols`
 * values in row-major order: out[m].present and out[m].value for every m in mt->set (limit and
 * pass are the judge's). PC_EDATA when a scalar metric is asked of a tensor that does not have
 * one element (err says so), PC_ENOMEM. */
int pc_metrics_compute(pc_metric_result out[PC_METRIC_COUNT_], const pc_metric_tol *mt,
                       const double *a, const double *b, uint64_t rows, uint64_t cols,
                       pc_error *err);

#endif
