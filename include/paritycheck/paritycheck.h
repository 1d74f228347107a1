/* paritycheck: numeric parity between tensor dumps of two ML backends.
 * The umbrella header of the public API: load -> compare -> judge against tolerances -> report. */
#ifndef PARITYCHECK_H
#define PARITYCHECK_H

#include <paritycheck/approval.h>
#include <paritycheck/baseline.h>
#include <paritycheck/compare.h>
#include <paritycheck/dtype.h>
#include <paritycheck/error.h>
#include <paritycheck/plan.h>
#include <paritycheck/report.h>
#include <paritycheck/result.h>
#include <paritycheck/tolerance.h>

#define PARITYCHECK_VERSION "0.1.0"

#endif
