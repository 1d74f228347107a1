/* The numerics behind the dtypes of <paritycheck/dtype.h>, internal to the library: recognising
 * a float layout, the compare dtype of a pair, exact decoding of stored bits, rounding to a
 * dtype, ordinals and ULP distances (docs/metrics.md). The library's unit tests and fuzz targets
 * include it; the public API does not need it. */
#ifndef PC_NUMERICS_H
#define PC_NUMERICS_H

#include <paritycheck/dtype.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* int64_t, uint16_t, uint32_t, uint64_t */
#include <string.h>  /* memcpy */

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

/** The float32 value of a float16 bit pattern, exact for every pattern; a NaN becomes the quiet
 * NaN of its sign, as pc_dtype_decode_float has it (which decodes float16 with this). A normal
 * magnitude's exponent is rebiased by adding (127 - 15) << 23 to its bits shifted into float32
 * position; a subnormal one, m 2^-24, is exact in float32; inf stays inf. Masks, not branches: a
 * run of values on both sides of the subnormal boundary (an envelope's bounds) mispredicts
 * branches, and the loops that call this vectorise. kernel_f32.c does the same on vectors. */
static inline float pc_f16_float(uint16_t h) {
  uint32_t mag = h & 0x7FFFu, normal = (mag << 13) + (112u << 23), sub;
  float small = (float)mag * 0x1p-24f, f;
  memcpy(&sub, &small, sizeof sub);
  uint32_t low = 0u - (uint32_t)(mag < 0x0400u), top = 0u - (uint32_t)(mag >= 0x7C00u);
  uint32_t special = mag == 0x7C00u ? 0x7F800000u : 0x7FC00000u;
  uint32_t o = (sub & low) | (normal & ~low);
  o = (special & top) | (o & ~top);
  o |= (uint32_t)(h & 0x8000u) << 16;
  memcpy(&f, &o, sizeof f);
  return f;
}

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

#endif
