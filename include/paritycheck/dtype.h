/* paritycheck numerics: dtypes, decoding of stored bits, rounding to a compare dtype and ULP
 * distance. Every definition here follows docs/metrics.md. All functions are pure and
 * thread-safe. */
#ifndef PARITYCHECK_DTYPE_H
#define PARITYCHECK_DTYPE_H

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* int64_t, uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pc_dtype {
  PC_DTYPE_NONE = 0,
  PC_DTYPE_FLOAT64,
  PC_DTYPE_FLOAT32,
  PC_DTYPE_FLOAT16,
  PC_DTYPE_BFLOAT16,
  PC_DTYPE_FLOAT8_E4M3FN,
  PC_DTYPE_FLOAT8_E5M2,
  PC_DTYPE_INT8,
  PC_DTYPE_INT16,
  PC_DTYPE_INT32,
  PC_DTYPE_INT64,
  PC_DTYPE_UINT8,
  PC_DTYPE_UINT16,
  PC_DTYPE_UINT32,
  PC_DTYPE_UINT64,
  PC_DTYPE_BOOL,
  PC_DTYPE_COUNT_ /* number of enumerators; not a dtype */
} pc_dtype;

/** The dtype's name as in docs/metrics.md ("float32", "bfloat16", "float8_e4m3fn", "uint16",
 * "bool"); "none" for PC_DTYPE_NONE. Never NULL. */
const char *pc_dtype_name(pc_dtype dt);

/** The dtype named `name` (exact, lower case), or PC_DTYPE_NONE if there is none. */
pc_dtype pc_dtype_from_name(const char *name);

/** True for the six float dtypes. */
bool pc_dtype_is_float(pc_dtype dt);

/** True for the integer dtypes and bool. */
bool pc_dtype_is_integer(pc_dtype dt);

/** Size of one stored element in bytes (0 for PC_DTYPE_NONE). */
size_t pc_dtype_size(pc_dtype dt);

/** The float dtype with exactly this IEEE-style bit layout (HDF5's H5Tget_fields positions and
 * sizes, total size in bytes, exponent bias), or PC_DTYPE_NONE when none matches. An 8-bit float
 * with 4 exponent bits and bias 7 is float8_e4m3fn (the only e4m3 in use); bias 15 with 5 exponent
 * bits is float8_e5m2. */
pc_dtype pc_dtype_from_layout(size_t size, size_t sign_pos, size_t exp_pos, size_t exp_bits,
                              size_t mant_pos, size_t mant_bits, unsigned long bias);

/** The compare dtype of a pair of logical dtypes (docs/metrics.md): the coarser float; float32
 * when the two have no common grid (float16 vs bfloat16, e4m3fn vs e5m2), in which case
 * *cross_grid is set true (else false; cross_grid may be NULL). For two integer dtypes the wider
 * one (exact comparison); for an integer and a float, the float. */
pc_dtype pc_dtype_compare(pc_dtype a, pc_dtype b, bool *cross_grid);

/** Decode n stored elements of float dtype `dt` from `raw` (native byte order unless `swap`,
 * which reverses the bytes of each element) into doubles, exactly. */
void pc_dtype_decode_float(pc_dtype dt, const void *raw, size_t n, bool swap, double *out);

/** Decode n stored elements of integer dtype `dt` (bool included) into int64_t. uint64 values
 * are stored bit for bit (so values above INT64_MAX read as negative: the caller knows the dtype).
 */
void pc_dtype_decode_int(pc_dtype dt, const void *raw, size_t n, bool swap, int64_t *out);

/** Round x (not NaN) to float dtype `dt`, ties to even, directly from the double. Values beyond
 * the dtype's range give ±inf (for float8_e4m3fn, which has no inf, ±inf too: the caller treats
 * it as "out of range"). */
double pc_dtype_round(double x, pc_dtype dt);

/** True when x is exactly representable in float dtype `dt` (NaN always is; ±inf is except for
 * float8_e4m3fn). */
bool pc_dtype_representable(double x, pc_dtype dt);

/** Position of round(x, dt) on the ordered integer line of docs/metrics.md: ±0 -> 0, positive
 * values count up from the smallest subnormal (1), negative values mirror them, ±inf and values
 * beyond the range sit at ±(ordinal of the largest finite value + 1). x must not be NaN. */
int64_t pc_dtype_ordinal(double x, pc_dtype dt);

/** |ordinal(a) - ordinal(b)| without overflow, for a float dtype. a and b must not be NaN. */
uint64_t pc_ulp_distance(double a, double b, pc_dtype dt);

/** The unit roundoff u = 2^-p of float dtype `dt` (p = mantissa bits + 1). */
double pc_dtype_unit_roundoff(pc_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
