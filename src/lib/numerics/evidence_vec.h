/* The vector types and primitives of the lane files evidence_lanes.c (evidence_lanes.h) and
 * envelope_lanes.c (envelope_lanes.h), which alone include this header: once in each of their
 * builds, so that PC_W and every helper take that build's width (CMakeLists.txt,
 * pc_f32_variant). Private to those files. */
#ifndef PC_EVIDENCE_VEC_H
#define PC_EVIDENCE_VEC_H

#include "evidence_lanes.h" /* pc_ev_layout */
#include "simd.h"           /* PC_W, the vector types, pc_vmin, pc_vmax, pc_vwiden_f */

#include <stdbool.h> /* bool */
#include <stdint.h>  /* int32_t, int64_t, uint16_t, uint32_t, uint64_t */
#include <string.h>  /* memcpy */

#ifdef __AVX__
#include <immintrin.h> /* F16C conversions, movemasks, min and max */
#endif

/* double to float32, nearest even: C's (float) conversion. */
static inline vf pc_ev_narrow(vd x) {
#if PC_W == 8
  return _mm512_cvtpd_ps(x);
#elif defined(__AVX2__)
  return _mm256_cvtpd_ps(x);
#else
  return __builtin_convertvector(x, vf);
#endif
}

/* Lanes -1 of a 64-bit mask as int32 lanes -1. */
static inline vi pc_ev_mask32(vl m) {
#if PC_W == 8
  return (vi)_mm512_cvtepi64_epi32((__m512i)m);
#elif defined(__AVX2__)
  __m256i low = _mm256_permutevar8x32_epi32((__m256i)m, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  return (vi)_mm256_castsi256_si128(low);
#else
  return __builtin_convertvector(m, vi);
#endif
}

static inline bool pc_ev_any(vl m) {
#if PC_W == 8
  return _mm512_movepi64_mask((__m512i)m) != 0;
#elif defined(__AVX__)
  return _mm256_movemask_pd((__m256d)m) != 0;
#else
  int64_t any = 0;
  for (int l = 0; l < PC_W; l++)
    any |= m[l];
  return any != 0;
#endif
}

static inline vl pc_ev_finite(vd x) {
  const vl e = (vl){0} + 0x7FF0000000000000;
  return ((vl)x & e) != e;
}

static inline vd pc_ev_select(vl m, vd x, vd y) {
  return (vd)(((vl)x & m) | ((vl)y & ~m));
}

/* The unsigned minimum of int32 lanes. */
static inline vu pc_ev_minu(vu x, vu y) {
#if PC_W == 8
  return (vu)_mm256_min_epu32((__m256i)x, (__m256i)y);
#elif defined(__AVX2__)
  return (vu)_mm_min_epu32((__m128i)x, (__m128i)y);
#else
  vu lt = (vu)(x < y);
  return (lt & x) | (~lt & y);
#endif
}

#ifndef __F16C__
/* The float32 values of PC_W float16 patterns, every pattern (kernel_f32.h, pc_f16_float): inf
 * stays inf and a NaN stays a NaN. */
static inline vf pc_ev_half(vu h) {
  vu mag = h & 0x7FFFu, o = mag << 13;
  vu sub = (vu)(mag < 0x0400u), special = (vu)(mag >= 0x7C00u);
  o += (112u << 23) + (sub & (1u << 23));
  vu f = (vu)((vf)o - (vf)(sub & (113u << 23)));
  f = (special & (0x7F800000u | o)) | (~special & f);
  return (vf)(f | (h & 0x8000u) << 16);
}

/* x rounded to float16 (nearest even, beyond the largest finite to inf) and back: what
 * pc_dtype_round gives for float32 values. Normal results keep the top 10 mantissa bits; below
 * float16's normal range, adding 0.5 (whose ulp is 2^-24, float16's smallest step) rounds to
 * a multiple of 2^-24 exactly as float16 does, and subtracting it is exact. */
static inline vf pc_ev_fp16(vf x) {
  vu u = (vu)x, mag = u & 0x7FFFFFFFu;
  vu big = (vu)(mag >= 0x477FF000u), normal = (vu)(mag >= 0x38800000u); /* 65520, 2^-14 */
  vu rn = (mag + 0xFFFu + ((mag >> 13) & 1u)) & ~0x1FFFu;
  vu rs = (vu)(((vf)mag + 0.5f) - 0.5f);
  vu r = (normal & rn) | (~normal & rs);
  r = (big & 0x7F800000u) | (~big & r);
  return (vf)(r | (u & 0x80000000u));
}
#else
static inline vf pc_ev_fp16(vf x) {
#if PC_W == 8
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return _mm_cvtph_ps(_mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
}
#endif

/* PC_W float16 patterns at p as float32. */
static inline vf pc_ev_load_half(const unsigned char *p) {
#if defined(__F16C__) && PC_W == 8
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#elif defined(__F16C__)
  return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)p));
#else
  vh h;
  memcpy(&h, p, sizeof h);
  return pc_ev_half(__builtin_convertvector(h, vu));
#endif
}

/* Values i..i+PC_W-1 of p as doubles, and as float32 into f unless NULL. */
static inline __attribute__((always_inline)) void
pc_ev_load(pc_ev_layout layout, const unsigned char *p, size_t i, vd *x, vf *f) {
  if (layout == PC_EV_DOUBLE) {
    memcpy(x, p + 8 * i, sizeof *x);
    if (f)
      *f = pc_ev_narrow(*x);
    return;
  }
  vf v;
  if (layout == PC_EV_FLOAT)
    memcpy(&v, p + 4 * i, sizeof v);
  else
    v = pc_ev_load_half(p + 2 * i);
  if (f)
    *f = v;
  *x = pc_vwiden_f(v);
}

/* pc_round_bits of evidence.c's first version: float32 bits to nearest even, `drop` low bits
 * cleared (16: bfloat16, 13: tf32). */
static inline vu pc_ev_round_bits(vu u, int drop) {
  vu half = (vu){0} + ((1u << (drop - 1)) - 1), odd = (u >> drop) & 1u;
  return (u + half + odd) & ~((1u << drop) - 1);
}

#endif
