/* The vector part of the float32 lane kernels (kernel_f32.h), in GCC vector extensions so that one
 * source serves both builds: PC_F32_RUN names the function (CMakeLists.txt compiles this file
 * once as pc_f32_run_base and once with -mavx2 -mf16c as pc_f32_run_avx2). float16 values are
 * converted to float32 by bit manipulation in the first, by F16C in the second: both exact.
 *
 * Each element gets exactly the figures of the scalar fold (kernel.c, pc_acc_pair): the same
 * double operations, no contraction into FMA. What differs is bookkeeping: sums are kept in 4
 * lanes (added lane-wise, then (l0 + l1) + (l2 + l3)), histogram buckets are counted by
 * scalar increments one group of 8 behind the vector code (so that the two overlap), and the
 * worst pair is found by scanning a chunk of 256 pairs again only when the chunk's maxima show
 * that it holds a new worst. */
#include "kernel_f32.h"

#include <math.h>   /* INFINITY */
#include <string.h> /* memcpy */

#ifdef __AVX__
#include <immintrin.h> /* _mm256_max_pd and friends */
#endif

#ifndef PC_F32_RUN
#error "define PC_F32_RUN (pc_f32_run_base or pc_f32_run_avx2)"
#endif

typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef uint64_t v4q __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef uint16_t v4h __attribute__((vector_size(8)));
typedef uint16_t v8h __attribute__((vector_size(16)));

/* Pairs per chunk: the unit of the worst-pair check. Steps of 4 pairs whose histogram keys are
 * kept: the group being folded and the one being counted. */
enum { PC_F32_CHUNK = 256, PC_F32_KEY_STEPS = 4 };

/* The running vectors of a run. Kept as locals of PC_F32_RUN so that they live in registers;
 * loaded from and stored to the pc_f32_state at the run's ends. */
typedef struct pc_vacc {
  v4d sabs, srel, ssa, ssb, sab, ssd, sad;
  v4d max_rel, min_abs, min_rel;
  v4u max_ulp;
  v4q ulp_sum, mism;
  v4i inexact_a, inexact_b;
  v4d cmax_abs, cmax_mis; /* of the current chunk: max abs, max abs over mismatches */
} pc_vacc;

/* The settings as vectors. */
typedef struct pc_vset {
  v4d atol, rtol;
  v4l tol_ulp;
  v4i count_a, count_b; /* 1 when that side's bfloat16 inexact values are counted, else 0 */
} pc_vset;

/* Histogram keys of the last PC_F32_KEY_STEPS steps: step q's are at q % PC_F32_KEY_STEPS. */
typedef struct pc_keys {
  v4q abs[PC_F32_KEY_STEPS], rel[PC_F32_KEY_STEPS], ulp[PC_F32_KEY_STEPS];
} pc_keys;

/* Maxima and minima of values that are never NaN: AVX has one instruction for each, the
 * baseline build selects by a comparison; the results are the same. */
static inline v4d pc_vmax(v4d x, v4d y) {
#ifdef __AVX__
  return _mm256_max_pd(x, y);
#else
  v4l m = x > y;
  return (v4d)(((v4l)x & m) | ((v4l)y & ~m));
#endif
}

static inline v4d pc_vmin(v4d x, v4d y) {
#ifdef __AVX__
  return _mm256_min_pd(x, y);
#else
  v4l m = x < y;
  return (v4d)(((v4l)x & m) | ((v4l)y & ~m));
#endif
}

static inline v4u pc_vmaxu(v4u x, v4u y) {
#ifdef __AVX__
  return (v4u)_mm_max_epu32((__m128i)x, (__m128i)y);
#else
  v4u m = (v4u)(x > y);
  return (x & m) | (y & ~m);
#endif
}

static inline double pc_hmax(v4d x) {
  double a = x[0] > x[1] ? x[0] : x[1], b = x[2] > x[3] ? x[2] : x[3];
  return a > b ? a : b;
}

/* Widening conversions; GCC lowers __builtin_convertvector of these in halves through memory,
 * so the AVX2 build names the one instruction of each. */
static inline v4d pc_vwiden_f(v4f x) {
#ifdef __AVX2__
  return _mm256_cvtps_pd(x);
#else
  return __builtin_convertvector(x, v4d);
#endif
}

static inline v4q pc_vwiden_u(v4u x) {
#ifdef __AVX2__
  return (v4q)_mm256_cvtepu32_epi64((__m128i)x);
#else
  return __builtin_convertvector(x, v4q);
#endif
}

/* Ordinals (kernel_f32.h, pc_ord32_bits and pc_ord_bf16_bits) of 4 finite patterns, as int32:
 * float32 ordinals fit, bfloat16 ones are 16-bit. */
static inline v4i pc_vord(v4u u, bool bf16) {
  v4u mag = u & 0x7FFFFFFFu;
  if (bf16)
    mag = (mag + 0x7FFFu + ((mag >> 16) & 1u)) >> 16;
  v4u m = (v4u)((v4i)u >> 31);
  return (v4i)((mag ^ m) - m);
}

/* |oa - ob| for ordinals of finite values: below 2^32, so exact in uint32 arithmetic. */
static inline v4u pc_vdist(v4i oa, v4i ob) {
  v4u gt = (v4u)(oa > ob), d1 = (v4u)oa - (v4u)ob, d2 = (v4u)ob - (v4u)oa;
  return (d1 & gt) | (d2 & ~gt);
}

/* The exact double of a distance below 2^52: its bits are 2^52's with the distance in the
 * mantissa; subtracting 2^52 is exact. */
static inline v4d pc_vdouble(v4q d) {
  const double two52 = 4503599627370496.0;
  return (v4d)(d | (v4q){0x4330000000000000u, 0x4330000000000000u, 0x4330000000000000u,
                         0x4330000000000000u}) -
         two52;
}

#ifndef __F16C__
/* The float32 values of 4 finite float16 patterns (zero-extended): pc_f16_float's steps, with
 * the subnormal ones chosen by a mask. The AVX2 build has F16C's conversion instead (a quarter
 * of the run time of a float16 fold is this function). */
static inline v4f pc_vhalf(v4u h) {
  v4u o = (h & 0x7FFFu) << 13;
  v4u sub = (v4u)((o & 0x0F800000u) == 0); /* all ones where the exponent is 0 */
  o += (112u << 23) + (sub & (1u << 23));
  v4f f = (v4f)o - (v4f)(sub & (113u << 23)); /* 2^-14, or +0 */
  return (v4f)((v4u)f | (h & 0x8000u) << 16);
}
#endif

/* Values and ordinal bits (kernel_f32.h, pc_pair_load) of the 4 elements at p. */
static inline __attribute__((always_inline)) void pc_vload(bool half, const unsigned char *p,
                                                           v4f *f, v4u *u) {
  if (!half) {
    memcpy(u, p, sizeof *u);
    memcpy(f, p, sizeof *f);
    return;
  }
#ifdef __F16C__
  __m128i h = _mm_loadl_epi64((const __m128i *)(const void *)p); /* any alignment */
  v4u w = (v4u)_mm_cvtepu16_epi32(h);
  *f = (v4f)_mm_cvtph_ps(h); /* exact, as pc_vhalf */
#else
  v4h h;
  memcpy(&h, p, sizeof h);
  v4u w = __builtin_convertvector(h, v4u);
  *f = pc_vhalf(w);
#endif
  *u = (w & 0x8000u) << 16 | (w & 0x7FFFu);
}

/* Four pairs at pa and pb, all finite: the figures of pc_acc_pair, folded lane-wise; their
 * histogram keys go to step q's place in keys (q: the step's index within the chunk). `half`:
 * float16 bytes, else float32; `bf16`: judged in bfloat16; `inexact`: count bfloat16-inexact
 * values (the sides' flags are in s). */
static inline __attribute__((always_inline)) void
pc_vstep(pc_vacc *c, const pc_vset *s, bool half, bool bf16, bool inexact, const unsigned char *pa,
         const unsigned char *pb, pc_keys *keys, size_t q) {
  const v4l absmask = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  v4u ua, ub;
  v4f fx, fy;
  pc_vload(half, pa, &fx, &ua);
  pc_vload(half, pb, &fy, &ub);
  if (inexact) {
    c->inexact_a += (v4i)((ua & 0xFFFFu) != 0) & s->count_a; /* mask & 1: 1 where counted */
    c->inexact_b += (v4i)((ub & 0xFFFFu) != 0) & s->count_b;
  }
  v4u ulp32 = pc_vdist(pc_vord(ua, bf16), pc_vord(ub, bf16));
  c->max_ulp = pc_vmaxu(c->max_ulp, ulp32);
  v4q ulp = pc_vwiden_u(ulp32);
  v4d x = pc_vwiden_f(fx), y = pc_vwiden_f(fy);
  v4d d = y - x;
  v4d ab = (v4d)((v4l)d & absmask), aa = (v4d)((v4l)x & absmask);
  /* abs / |a|; 0 when abs is 0 (0 / 0 included); abs / 0 is +inf as pc_acc_pair has it. */
  v4l zero = ab == 0;
  v4d rel = (v4d)((v4l)(ab / aa) & ~zero);
  v4l pass = (x == y) | (ab <= s->atol) | (ab <= s->rtol * aa) | ((v4l)ulp <= s->tol_ulp);
  c->mism += (v4q)(pass + 1); /* 1 where it fails */
  c->cmax_abs = pc_vmax(c->cmax_abs, ab);
  c->cmax_mis = pc_vmax(c->cmax_mis, (v4d)((v4l)ab & ~pass));
  c->max_rel = pc_vmax(c->max_rel, rel);
  /* Minima of the nonzero values (rel is 0 only where abs is), for the bucket range. */
  const v4l inf = {0x7FF0000000000000, 0x7FF0000000000000, 0x7FF0000000000000, 0x7FF0000000000000};
  c->min_abs = pc_vmin(c->min_abs, (v4d)((v4l)ab | (zero & inf)));
  c->min_rel = pc_vmin(c->min_rel, (v4d)((v4l)rel | (zero & inf)));
  c->ulp_sum += ulp;
  c->sabs += ab;
  c->srel += rel;
  c->ssa += x * x;
  c->ssb += y * y;
  c->sab += x * y;
  c->ssd += d * d;
  c->sad += x * d;
  /* Local ULP key (kernel_f32.h): the double's top 16 bits less the key of 1, plus 1; 0 stays
   * 0. Quantile keys (qhist.h): top 16 bits; abs is finite, rel may be +inf (its key). */
  v4l uk = (v4l)((v4q)pc_vdouble(ulp) >> 48);
  keys->ulp[q % PC_F32_KEY_STEPS] = (v4q)((uk - (PC_F32_ULP_KEY_ONE - 1)) & (uk != 0));
  keys->abs[q % PC_F32_KEY_STEPS] = (v4q)ab >> 48;
  keys->rel[q % PC_F32_KEY_STEPS] = (v4q)rel >> 48;
}

/* 1 when any of the 8 pairs at a and b (float16 when `half`, else float32) has an inf or NaN:
 * all exponent bits set. */
static inline __attribute__((always_inline)) bool pc_vnonfinite(bool half, const unsigned char *a,
                                                                const unsigned char *b) {
  if (half) {
    v8h a0, b0;
    memcpy(&a0, a, sizeof a0);
    memcpy(&b0, b, sizeof b0);
    const uint16_t e = 0x7C00u;
    v8h bad = (v8h)(((a0 & e) == e) | ((b0 & e) == e));
    uint64_t w[2];
    memcpy(w, &bad, sizeof w);
    return (w[0] | w[1]) != 0;
  }
  v4u a0, a1, b0, b1;
  memcpy(&a0, a, sizeof a0);
  memcpy(&a1, a + 16, sizeof a1);
  memcpy(&b0, b, sizeof b0);
  memcpy(&b1, b + 16, sizeof b1);
  const uint32_t e = 0x7F800000u;
  v4i bad = ((a0 & e) == e) | ((a1 & e) == e) | ((b0 & e) == e) | ((b1 & e) == e);
#ifdef __AVX__
  return _mm_movemask_ps((__m128)bad) != 0;
#else
  return (bad[0] | bad[1] | bad[2] | bad[3]) != 0;
#endif
}

/* The figures of pair i as pc_vstep computes them, one pair at a time, for the worst-pair
 * scan. */
typedef struct pc_pair {
  double x, y, abs, abs_a;
  uint64_t ulp;
} pc_pair;

static pc_pair pc_pair_at(const pc_f32_state *st, const unsigned char *a, const unsigned char *b,
                          size_t i) {
  float fx, fy;
  uint32_t ux, uy;
  pc_pair_load(st->half, a, b, i, &fx, &fy, &ux, &uy);
  pc_pair p = {fx, fy, 0, 0, pc_f32_ulp(ux, uy, st->bf16)};
  p.abs = p.x < p.y ? p.y - p.x : p.x - p.y;
  p.abs_a = p.x < 0 ? -p.x : p.x;
  return p;
}

static bool pc_pair_passes(const pc_f32_state *st, const pc_pair *p) {
  return p->x == p->y || p->abs <= st->atol || p->abs <= st->rtol * p->abs_a ||
         (int64_t)p->ulp <= st->tol_ulp;
}

/* Make pair p at index i (a new worst of class cls) the vector part's worst. */
static void pc_take_worst(pc_f32_state *st, const pc_pair *p, size_t i, int cls) {
  st->wcls = cls;
  st->wabs = p->abs;
  st->wrel = p->abs_a != 0 ? p->abs / p->abs_a : p->abs == 0 ? 0 : INFINITY;
  st->wa = p->x;
  st->wb = p->y;
  st->widx = st->base + i;
  st->wulp = p->ulp;
}

/* The chunk [lo, hi) is folded: does it hold a new worst (pc_worse: mismatches before passing
 * pairs, then the largest abs, ties to the lower index)? If so, find the first such pair. */
static void pc_chunk_worst(pc_f32_state *st, const pc_vacc *c, const unsigned char *a,
                           const unsigned char *b, size_t lo, size_t hi) {
  /* A mismatch has abs > 0 (distinct finite values differ in double), so max_mis > 0 says the
   * chunk holds one, and then no passing pair can be the worst. */
  double max_mis = pc_hmax(c->cmax_mis), max_abs = pc_hmax(c->cmax_abs);
  int cls = max_mis > 0 ? 1 : 0;
  double top = cls ? max_mis : max_abs;
  if (cls < st->wcls || (cls == st->wcls && top <= st->wabs))
    return;
  for (size_t i = lo; i < hi; i++) {
    pc_pair p = pc_pair_at(st, a, b, i);
    if (p.abs == top && pc_pair_passes(st, &p) == !cls) {
      pc_take_worst(st, &p, i, cls);
      return;
    }
  }
}

/* Count the keys of steps lo..q-1. */
static inline __attribute__((always_inline)) void
pc_chunk_hist(pc_f32_state *st, const pc_keys *keys, size_t lo, size_t q) {
  for (size_t j = lo; j < q; j++)
    for (int l = 0; l < 4; l++)
      st->ulp_keys[l][keys->ulp[j % PC_F32_KEY_STEPS][l]]++;
  if (!st->h_abs)
    return;
  uint64_t *ha = st->h_abs->count, *hr = st->h_rel->count;
  for (size_t j = lo; j < q; j++)
    for (int l = 0; l < 4; l++) {
      ha[keys->abs[j % PC_F32_KEY_STEPS][l]]++;
      hr[keys->rel[j % PC_F32_KEY_STEPS][l]]++;
    }
}

static void pc_vacc_load(pc_vacc *c, const pc_f32_state *st) {
  memcpy(&c->sabs, st->sabs, sizeof c->sabs);
  memcpy(&c->srel, st->srel, sizeof c->srel);
  memcpy(&c->ssa, st->ssa, sizeof c->ssa);
  memcpy(&c->ssb, st->ssb, sizeof c->ssb);
  memcpy(&c->sab, st->sab, sizeof c->sab);
  memcpy(&c->ssd, st->ssd, sizeof c->ssd);
  memcpy(&c->sad, st->sad, sizeof c->sad);
  memcpy(&c->max_rel, st->max_rel, sizeof c->max_rel);
  memcpy(&c->max_ulp, st->max_ulp, sizeof c->max_ulp);
  memcpy(&c->min_abs, st->min_abs, sizeof c->min_abs);
  memcpy(&c->min_rel, st->min_rel, sizeof c->min_rel);
  memcpy(&c->ulp_sum, st->ulp_sum, sizeof c->ulp_sum);
  memcpy(&c->mism, st->mism, sizeof c->mism);
  memcpy(&c->max_ulp, st->max_ulp, sizeof c->max_ulp);
  c->inexact_a = c->inexact_b = (v4i){0, 0, 0, 0};
}

static void pc_vacc_store(pc_f32_state *st, const pc_vacc *c) {
  memcpy(st->sabs, &c->sabs, sizeof c->sabs);
  memcpy(st->srel, &c->srel, sizeof c->srel);
  memcpy(st->ssa, &c->ssa, sizeof c->ssa);
  memcpy(st->ssb, &c->ssb, sizeof c->ssb);
  memcpy(st->sab, &c->sab, sizeof c->sab);
  memcpy(st->ssd, &c->ssd, sizeof c->ssd);
  memcpy(st->sad, &c->sad, sizeof c->sad);
  memcpy(st->max_rel, &c->max_rel, sizeof c->max_rel);
  memcpy(st->max_ulp, &c->max_ulp, sizeof c->max_ulp);
  memcpy(st->min_abs, &c->min_abs, sizeof c->min_abs);
  memcpy(st->min_rel, &c->min_rel, sizeof c->min_rel);
  memcpy(st->ulp_sum, &c->ulp_sum, sizeof c->ulp_sum);
  memcpy(st->mism, &c->mism, sizeof c->mism);
  memcpy(st->max_ulp, &c->max_ulp, sizeof c->max_ulp);
  for (int l = 0; l < 4; l++) {
    st->inexact_a += (uint32_t)c->inexact_a[l];
    st->inexact_b += (uint32_t)c->inexact_b[l];
  }
}

static pc_vset pc_vset_make(const pc_f32_state *st) {
  pc_vset s;
  s.atol = (v4d){st->atol, st->atol, st->atol, st->atol};
  s.rtol = (v4d){st->rtol, st->rtol, st->rtol, st->rtol};
  s.tol_ulp = (v4l){st->tol_ulp, st->tol_ulp, st->tol_ulp, st->tol_ulp};
  int32_t ca = st->a_bf16, cb = st->b_bf16;
  s.count_a = (v4i){ca, ca, ca, ca};
  s.count_b = (v4i){cb, cb, cb, cb};
  return s;
}

/* One chunk of whole groups from `from`; returns where it stopped (before a group with a
 * non-finite pair, or at `to`). */
static inline __attribute__((always_inline)) size_t
pc_chunk(pc_f32_state *st, pc_vacc *c, const pc_vset *s, bool half, bool bf16, bool inexact,
         const unsigned char *a, const unsigned char *b, size_t from, size_t to) {
  const size_t es = half ? 2 : 4; /* bytes an element */
  pc_keys keys;
  size_t i = from, q = 0;
  c->cmax_abs = c->cmax_mis = (v4d){0, 0, 0, 0};
  for (; i < to; i += PC_F32_GROUP, q += 2) {
    const unsigned char *pa = a + es * i, *pb = b + es * i;
    if (pc_vnonfinite(half, pa, pb))
      break;
    pc_vstep(c, s, half, bf16, inexact, pa, pb, &keys, q);
    pc_vstep(c, s, half, bf16, inexact, pa + 4 * es, pb + 4 * es, &keys, q + 1);
    if (q >= 2)
      pc_chunk_hist(st, &keys, q - 2, q); /* the previous group */
  }
  st->count += i - from;
  pc_chunk_hist(st, &keys, q >= 2 ? q - 2 : 0, q);
  if (i > from)
    pc_chunk_worst(st, c, a, b, from, i);
  double m = pc_hmax(c->cmax_abs);
  st->max_abs = m > st->max_abs ? m : st->max_abs;
  return i;
}

size_t PC_F32_RUN(pc_f32_state *st, const unsigned char *a, const unsigned char *b, size_t from,
                  size_t n) {
  pc_vacc c;
  pc_vset s = pc_vset_make(st);
  pc_vacc_load(&c, st);
  size_t end = from + (n - from) / PC_F32_GROUP * PC_F32_GROUP, i = from;
  bool inexact = st->a_bf16 || st->b_bf16;
  while (i < end) {
    size_t to = end - i < PC_F32_CHUNK ? end : i + PC_F32_CHUNK, at;
    /* One copy of the loop for each setting, so that none is tested per element. */
    if (st->half)
      at = pc_chunk(st, &c, &s, true, false, false, a, b, i, to);
    else if (st->bf16)
      at = inexact ? pc_chunk(st, &c, &s, false, true, true, a, b, i, to)
                   : pc_chunk(st, &c, &s, false, true, false, a, b, i, to);
    else
      at = inexact ? pc_chunk(st, &c, &s, false, false, true, a, b, i, to)
                   : pc_chunk(st, &c, &s, false, false, false, a, b, i, to);
    bool stopped = at < to;
    i = at;
    if (stopped)
      break;
  }
  pc_vacc_store(st, &c);
  return i;
}
