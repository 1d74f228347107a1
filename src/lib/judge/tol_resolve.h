/* Rule resolution (tol_resolve.c): the tolerance a tensor gets from a loaded pc_tolset, given
 * its path, compare dtype and what is known of it. Internal to the library: the comparator and
 * the judge use it; the unit tests and the tolerance fuzz target include it. */
#ifndef PC_TOL_RESOLVE_H
#define PC_TOL_RESOLVE_H

#include <paritycheck/tolerance.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/* The text of attribute `name` of side 0 (A) or 1 (B) of the tensor: its dataset's attribute,
 * else its file's; into buf (size bytes) or a string that outlives the call. NULL when that side
 * has neither. Rules that match on attributes (docs/tolerances.md, `match_module_type`,
 * `match_attr`) call it while resolving. */
typedef const char *(*pc_tol_attr_fn)(void *user, int side, const char *name, char *buf,
                                      size_t size);

/* Room a pc_tol_attr_fn is given for an attribute's text. */
enum { PC_TOL_ATTR_TEXT_MAX = 1024 };

/* What the tolerance model may know of a tensor besides its path and dtype
 * (docs/tolerance-model.md): the dumper's reduction hints, the magnitude of A, and its
 * attributes for rules that match on them (attr NULL: none known, and such rules never apply). */
typedef struct pc_tol_context {
  uint64_t reduction_length; /* K, from the dataset attribute `reduction_length`; 0 = unknown */
  pc_dtype accumulation;     /* attribute `accumulation_dtype`; PC_DTYPE_NONE = unknown */
  bool has_magnitude;        /* max_abs_a and rms_a below were measured */
  double max_abs_a;          /* max |a| over A's finite elements; 0 when there are none */
  double rms_a;              /* sqrt(mean(a^2)) over the same elements */
  pc_tol_attr_fn attr;
  void *attr_user;
} pc_tol_context;

/** True when the tolerance for this path and dtype (given what ctx, which may be NULL, knows)
 * depends on the magnitude of A, so that the caller must measure it (one more pass over A)
 * before pc_tolset_resolve_ctx. */
bool pc_tolset_needs_magnitude(const pc_tolset *set, const char *path, pc_dtype compare,
                               const pc_tol_context *ctx);

/** The tolerance for dataset `path` compared in `compare`, given what is known of the tensor
 * (ctx may be NULL: nothing is known). Model coefficients that need what ctx does not give (K,
 * a measured magnitude) contribute nothing; for a compare dtype that is not a float the model
 * takes no part at all. A rule applies when its glob (if it has one) matches the path and each
 * of its attribute conditions holds; with `path` NULL no rule applies. */
pc_tol pc_tolset_resolve_ctx(const pc_tolset *set, const char *path, pc_dtype compare,
                             const pc_tol_context *ctx);

/** The unit roundoff of the `precision` key that applies to this tensor (its layers resolved as
 * pc_tolset_resolve_ctx does), or 0 when none sets it or compare is not a float: the precision
 * the profile claims, which a B stored coarser cannot be judged at (docs/robustness.md, "Trust
 * model"). */
double pc_tolset_precision_u(const pc_tolset *set, const char *path, pc_dtype compare,
                             const pc_tol_context *ctx);

/** The tolerance for dataset `path` (e.g. "/enc/layer0/out") compared in dtype `compare`
 * (the component dtype for complex data); pc_tolset_resolve_ctx with nothing known. */
pc_tol pc_tolset_resolve(const pc_tolset *set, const char *path, pc_dtype compare);

/** Calls fn(user, glob) for each rule, in load order, whose glob matches none of the n paths
 * (it then changes no tolerance of a run over those paths); stops at and returns the first
 * nonzero return of fn, else PC_OK. Rules without a glob, which select tensors by attributes
 * alone (a profile may name module types a model does not have), are never reported. */
int pc_tolset_unused_rules(const pc_tolset *set, const char *const *paths, size_t n,
                           int (*fn)(void *user, const char *glob), void *user);

/** The bound on |scale_error| over n > 0 finite pairs of relative RMS error rel_rms:
 * max_scale + (max_scale_sqrt_n + scale_z rel_rms) / sqrt(n). */
double pc_tol_scale_limit(const pc_tol *tol, uint64_t n, double rel_rms);

#endif
