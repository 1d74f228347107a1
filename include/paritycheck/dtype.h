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

/** The unit roundoff u = 2^-p of float dtype `dt` (p = mantissa bits + 1). */
double pc_dtype_unit_roundoff(pc_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
