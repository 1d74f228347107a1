/* The vector types and the primitives that the float32 kernel's vector part (kernel_f32.c) and the
 * evidence's (evidence_lanes.c, through evidence_vec.h) both use. Each of those files is compiled
 * once per build (baseline x86-64, AVX2, AVX-512: CMakeLists.txt, pc_f32_variant), so PC_W and
 * every helper take that build's width. Private to those two files. */
#ifndef PC_SIMD_H
#define PC_SIMD_H

#include <stdint.h> /* int32_t, int64_t, uint16_t, uint32_t, uint64_t */

#ifdef __AVX__
#include <immintrin.h> /* the conversions, minima and maxima of the AVX builds */
#endif

/* Doubles in one native vector: 8 in the AVX-512 build (one zmm register), else 4 (one ymm
 * register in the AVX2 build, two xmm in the baseline one). */
#ifdef __AVX512F__
#define PC_W 8
#else
#define PC_W 4
#endif

typedef double vd __attribute__((vector_size(PC_W * 8)));
typedef int64_t vl __attribute__((vector_size(PC_W * 8)));
typedef uint64_t vq __attribute__((vector_size(PC_W * 8)));
typedef float vf __attribute__((vector_size(PC_W * 4)));
typedef int32_t vi __attribute__((vector_size(PC_W * 4)));
typedef uint32_t vu __attribute__((vector_size(PC_W * 4)));
typedef uint16_t vh __attribute__((vector_size(PC_W * 2)));

/* x > y ? x : y and x < y ? x : y lane by lane, for any x and y (NaN and zeros included): what
 * the AVX instructions compute, one each, where the baseline build selects by a comparison. */
static inline vd pc_vmax(vd x, vd y) {
#if PC_W == 8
  return _mm512_max_pd(x, y);
#elif defined(__AVX__)
  return _mm256_max_pd(x, y);
#else
  vl m = x > y;
  return (vd)(((vl)x & m) | ((vl)y & ~m));
#endif
}

static inline vd pc_vmin(vd x, vd y) {
#if PC_W == 8
  return _mm512_min_pd(x, y);
#elif defined(__AVX__)
  return _mm256_min_pd(x, y);
#else
  vl m = x < y;
  return (vd)(((vl)x & m) | ((vl)y & ~m));
#endif
}

/* float32 lanes widened to double, exactly. GCC lowers __builtin_convertvector of these in
 * halves through memory, so the AVX2 and AVX-512 builds name the one instruction. */
static inline vd pc_vwiden_f(vf x) {
#if PC_W == 8
  return _mm512_cvtps_pd(x);
#elif defined(__AVX2__)
  return _mm256_cvtps_pd(x);
#else
  return __builtin_convertvector(x, vd);
#endif
}

#endif
