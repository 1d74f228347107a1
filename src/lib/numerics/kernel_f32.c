/* The vector part of the float32 lane kernels (kernel_f32.h), in GCC vector extensions so that one
 * source serves every build: PC_F32_RUN names the function (CMakeLists.txt compiles this file as
 * pc_f32_run_base for baseline x86-64, pc_f32_run_avx2 with AVX2 and F16C, and pc_f32_run_avx512
 * with AVX-512). float16 values are converted to float32 by bit manipulation in the first, by
 * F16C in the others: all exact.
 *
 * Each element gets exactly the figures of the scalar fold (kernel.c, pc_acc_pair): the same
 * double operations, no contraction into FMA. What differs is bookkeeping: sums are kept in
 * PC_F32_LANES lanes (added lane-wise, then pairwise: kernel.c, pc_lanes_sum), histogram buckets
 * are counted by scalar increments one group behind the vector code (so that the two overlap),
 * and the worst pair is found by scanning one chunk of 256 pairs again at a run's end: the first
 * whose maxima show the run's worst. */
#include "kernel_f32.h"
#include "simd.h" /* PC_W, the vector types, pc_vmin, pc_vmax, pc_vwiden_f; immintrin.h */

#include <math.h>   /* INFINITY */
#include <string.h> /* memcpy */

#ifndef PC_F32_RUN
#error "define PC_F32_RUN (pc_f32_run_base, pc_f32_run_avx2 or pc_f32_run_avx512)"
#endif

/* A step folds PC_W pairs (simd.h); the PC_F32_LANES lanes of an accumulator are PC_H vectors,
 * and step s of a group goes to vector s % PC_H, so lane l folds the pairs whose index is l
 * modulo PC_F32_LANES in every build, and the sums do not depend on the build. */
typedef uint16_t vh2 __attribute__((vector_size(PC_W * 4))); /* 2 * PC_W patterns, a vu's bytes */

/* Vectors an accumulator; steps of a group that go to one of them (a group is 2 * PC_H steps);
 * pairs a chunk (the unit of the worst-pair check); steps of a pass whose histogram keys are
 * kept: the group being folded and the one being counted. */
enum {
  PC_H = PC_F32_LANES / PC_W,
  PC_SPV = PC_F32_GROUP / PC_F32_LANES,
  PC_F32_CHUNK = 256,
  PC_F32_KEY_STEPS = 2 * PC_SPV
};

/* The running vectors of a run. Kept as locals of PC_F32_RUN so that they live in registers;
 * loaded from and stored to the pc_f32_state at the run's ends. */
typedef struct pc_vacc {
  vd sabs[PC_H], srel[PC_H], ssa[PC_H], ssb[PC_H], sab[PC_H], ssd[PC_H], sad[PC_H];
  vd max_rel[PC_H], min_abs[PC_H], min_rel[PC_H];
  vu max_ulp[PC_H];
  vq ulp_sum[PC_H], mism[PC_H];
  vi inexact_a[PC_H], inexact_b[PC_H];
  vd cmax_abs[PC_H], cmax_mis[PC_H]; /* of the current chunk: max abs, max abs over mismatches */
} pc_vacc;

_Static_assert(sizeof(((pc_vacc *)0)->sabs) == sizeof(((pc_f32_state *)0)->sabs) &&
                   sizeof(((pc_vacc *)0)->max_ulp) == sizeof(((pc_f32_state *)0)->max_ulp),
               "an accumulator's vectors hold the state's lanes");

/* The settings as vectors. */
typedef struct pc_vset {
  vd atol, rtol;
  vl tol_ulp;
  vi count_a, count_b; /* 1 when that side's bfloat16 inexact values are counted, else 0 */
} pc_vset;

/* Histogram keys of the last PC_F32_KEY_STEPS steps of a pass: step q's are at
 * q % PC_F32_KEY_STEPS. */
typedef struct pc_keys {
  vq abs[PC_F32_KEY_STEPS], rel[PC_F32_KEY_STEPS], ulp[PC_F32_KEY_STEPS];
} pc_keys;

static inline vu pc_vmaxu(vu x, vu y) {
#if PC_W == 8
  return (vu)_mm256_max_epu32((__m256i)x, (__m256i)y);
#elif defined(__AVX__)
  return (vu)_mm_max_epu32((__m128i)x, (__m128i)y);
#else
  vu m = (vu)(x > y);
  return (x & m) | (y & ~m);
#endif
}

/* The largest lane of PC_H vectors. */
static inline double pc_hmax(const vd *x) {
  double m = x[0][0];
  for (int h = 0; h < PC_H; h++)
    for (int l = 0; l < PC_W; l++)
      m = x[h][l] > m ? x[h][l] : m;
  return m;
}

/* 1 when a lane of x is nonzero. */
static inline bool pc_vany(vu x) {
  vi nz = (vi)(x != 0);
#if PC_W == 8
  return _mm256_movemask_ps((__m256)nz) != 0;
#elif defined(__AVX__)
  return _mm_movemask_ps((__m128)nz) != 0;
#else
  uint64_t w[PC_W / 2], any = 0;
  memcpy(w, &nz, sizeof w);
  for (int l = 0; l < PC_W / 2; l++)
    any |= w[l];
  return any != 0;
#endif
}

/* The widening of uint32 lanes to uint64 (see pc_vwiden_f in simd.h). */
static inline vq pc_vwiden_u(vu x) {
#if PC_W == 8
  return (vq)_mm512_cvtepu32_epi64((__m256i)x);
#elif defined(__AVX2__)
  return (vq)_mm256_cvtepu32_epi64((__m128i)x);
#else
  return __builtin_convertvector(x, vq);
#endif
}

/* Ordinals (kernel_f32.h, pc_ord32_bits and pc_ord_bf16_bits) of PC_W finite patterns, as
 * int32: float32 ordinals fit, bfloat16 ones are 16-bit. */
static inline vi pc_vord(vu u, bool bf16) {
  vu mag = u & 0x7FFFFFFFu;
  if (bf16)
    mag = (mag + 0x7FFFu + ((mag >> 16) & 1u)) >> 16;
  vu m = (vu)((vi)u >> 31);
  return (vi)((mag ^ m) - m);
}

/* |oa - ob| for ordinals of finite values: below 2^32, so exact in uint32 arithmetic. */
static inline vu pc_vdist(vi oa, vi ob) {
  vu gt = (vu)(oa > ob), d1 = (vu)oa - (vu)ob, d2 = (vu)ob - (vu)oa;
  return (d1 & gt) | (d2 & ~gt);
}

/* The exact double of a distance below 2^52: its bits are 2^52's with the distance in the
 * mantissa; subtracting 2^52 is exact. */
static inline vd pc_vdouble(vq d) {
  const double two52 = 4503599627370496.0;
  return (vd)(d | 0x4330000000000000u) - two52;
}

#ifndef __F16C__
/* The float32 values of PC_W finite float16 patterns (zero-extended): pc_f16_float's steps, with
 * the subnormal ones chosen by a mask. The vector builds have F16C's conversion instead (a
 * quarter of the run time of a float16 fold is this function). */
static inline vf pc_vhalf(vu h) {
  vu o = (h & 0x7FFFu) << 13;
  vu sub = (vu)((o & 0x0F800000u) == 0); /* all ones where the exponent is 0 */
  o += (112u << 23) + (sub & (1u << 23));
  vf f = (vf)o - (vf)(sub & (113u << 23)); /* 2^-14, or +0 */
  return (vf)((vu)f | (h & 0x8000u) << 16);
}
#endif

/* Values and ordinal bits (kernel_f32.h, pc_pair_load) of the PC_W elements at p. */
static inline __attribute__((always_inline)) void pc_vload(bool half, const unsigned char *p, vf *f,
                                                           vu *u) {
  if (!half) {
    memcpy(u, p, sizeof *u);
    memcpy(f, p, sizeof *f);
    return;
  }
#if defined(__F16C__) && PC_W == 8
  __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
  vu w = (vu)_mm256_cvtepu16_epi32(h);
  *f = (vf)_mm256_cvtph_ps(h); /* exact, as pc_vhalf */
#elif defined(__F16C__)
  __m128i h = _mm_loadl_epi64((const __m128i *)(const void *)p); /* any alignment */
  vu w = (vu)_mm_cvtepu16_epi32(h);
  *f = (vf)_mm_cvtph_ps(h);
#else
  vh h;
  memcpy(&h, p, sizeof h);
  vu w = __builtin_convertvector(h, vu);
  *f = pc_vhalf(w);
#endif
  *u = (w & 0x8000u) << 16 | (w & 0x7FFFu);
}

/* PC_W pairs at pa and pb, all finite: the figures of pc_acc_pair, folded into the accumulators'
 * vector h; their histogram keys go to step q's place in keys (q: the step's index within the
 * chunk). `half`: float16 bytes, else float32; `bf16`: judged in bfloat16; `inexact`: count
 * bfloat16-inexact values (the sides' flags are in s). */
static inline __attribute__((always_inline)) void
pc_vstep(pc_vacc *c, const pc_vset *s, bool half, bool bf16, bool inexact, const unsigned char *pa,
         const unsigned char *pb, pc_keys *keys, size_t q, int h) {
  const vl absmask = (vl){0} + INT64_MAX, inf = (vl){0} + 0x7FF0000000000000;
  vu ua, ub;
  vf fx, fy;
  pc_vload(half, pa, &fx, &ua);
  pc_vload(half, pb, &fy, &ub);
  if (inexact) {
    c->inexact_a[h] += (vi)((ua & 0xFFFFu) != 0) & s->count_a; /* mask & 1: 1 where counted */
    c->inexact_b[h] += (vi)((ub & 0xFFFFu) != 0) & s->count_b;
  }
  vu ulp32 = pc_vdist(pc_vord(ua, bf16), pc_vord(ub, bf16));
  c->max_ulp[h] = pc_vmaxu(c->max_ulp[h], ulp32);
  vq ulp = pc_vwiden_u(ulp32);
  vd x = pc_vwiden_f(fx), y = pc_vwiden_f(fy);
  vd d = y - x;
  vd ab = (vd)((vl)d & absmask), aa = (vd)((vl)x & absmask);
  /* abs / |a|; 0 when abs is 0 (0 / 0 included); abs / 0 is +inf as pc_acc_pair has it. */
  vl zero = ab == 0;
  vd rel = (vd)((vl)(ab / aa) & ~zero);
  vl pass = PC_ELEMENT_PASSES(x == y, ab, aa, s->atol, s->rtol, (vl)ulp <= s->tol_ulp);
  c->mism[h] += (vq)(pass + 1); /* 1 where it fails */
  c->cmax_abs[h] = pc_vmax(c->cmax_abs[h], ab);
  c->cmax_mis[h] = pc_vmax(c->cmax_mis[h], (vd)((vl)ab & ~pass));
  c->max_rel[h] = pc_vmax(c->max_rel[h], rel);
  /* Minima of the nonzero values (rel is 0 only where abs is), for the bucket range. */
  c->min_abs[h] = pc_vmin(c->min_abs[h], (vd)((vl)ab | (zero & inf)));
  c->min_rel[h] = pc_vmin(c->min_rel[h], (vd)((vl)rel | (zero & inf)));
  c->ulp_sum[h] += ulp;
  c->sabs[h] += ab;
  c->srel[h] += rel;
  c->ssa[h] += x * x;
  c->ssb[h] += y * y;
  c->sab[h] += x * y;
  c->ssd[h] += d * d;
  c->sad[h] += x * d;
  /* Local ULP key (kernel_f32.h): the double's top 16 bits less the key of 1, plus 1; 0 stays
   * 0. Quantile keys (qhist.h): top 16 bits; abs is finite, rel may be +inf (its key). */
  vl uk = (vl)((vq)pc_vdouble(ulp) >> 48);
  keys->ulp[q % PC_F32_KEY_STEPS] = (vq)((uk - (PC_F32_ULP_KEY_ONE - 1)) & (uk != 0));
  keys->abs[q % PC_F32_KEY_STEPS] = (vq)ab >> 48;
  keys->rel[q % PC_F32_KEY_STEPS] = (vq)rel >> 48;
}

/* 1 when any of the PC_F32_GROUP pairs at a and b (float16 when `half`, else float32) has an
 * inf or NaN: all exponent bits set. */
static inline __attribute__((always_inline)) bool pc_vnonfinite(bool half, const unsigned char *a,
                                                                const unsigned char *b) {
  const size_t bytes = half ? 2 * PC_F32_GROUP : 4 * PC_F32_GROUP;
  vu bad = {0};
  for (size_t o = 0; o < bytes; o += sizeof(vu)) {
    vu x, y;
    memcpy(&x, a + o, sizeof x);
    memcpy(&y, b + o, sizeof y);
    if (half) {
      const uint16_t e = 0x7C00u;
      bad |= (vu)(((vh2)x & e) == e) | (vu)(((vh2)y & e) == e);
    } else {
      const uint32_t e = 0x7F800000u;
      bad |= (vu)((x & e) == e) | (vu)((y & e) == e);
    }
  }
  return pc_vany(bad);
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
  return PC_ELEMENT_PASSES(p->x == p->y, p->abs, p->abs_a, st->atol, st->rtol,
                           (int64_t)p->ulp <= st->tol_ulp);
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

/* The chunk of a run that holds its worst pair so far (pc_worse: mismatches before passing
 * pairs, then the largest abs, ties to the lower index): its class and abs, and where it is
 * (lo == hi: no chunk of the run beats the state's worst). Only that chunk is scanned for the
 * pair, once, at the run's end: a run of a small tensor's few chunks used to scan each chunk
 * that beat the ones before it. */
typedef struct pc_best {
  int cls;
  double top;
  size_t lo, hi;
} pc_best;

/* The chunk [lo, hi) is folded: does it hold a new worst? */
static void pc_chunk_best(pc_best *w, const pc_vacc *c, size_t lo, size_t hi) {
  /* A mismatch has abs > 0 (distinct finite values differ in double), so max_mis > 0 says the
   * chunk holds one, and then no passing pair can be the worst. */
  double max_mis = pc_hmax(c->cmax_mis), max_abs = pc_hmax(c->cmax_abs);
  int cls = max_mis > 0 ? 1 : 0;
  double top = cls ? max_mis : max_abs;
  if (cls < w->cls || (cls == w->cls && top <= w->top))
    return;
  *w = (pc_best){cls, top, lo, hi};
}

/* The first pair of the run's worst chunk that has its class and abs, as the state's worst. */
static void pc_take_best(pc_f32_state *st, const pc_best *w, const unsigned char *a,
                         const unsigned char *b) {
  for (size_t i = w->lo; i < w->hi; i++) {
    pc_pair p = pc_pair_at(st, a, b, i);
    if (p.abs == w->top && pc_pair_passes(st, &p) == !w->cls) {
      pc_take_worst(st, &p, i, w->cls);
      return;
    }
  }
}

/* Count the keys of steps lo..q-1 of a pass over accumulator vector h. Their lanes go to the
 * ULP copies of their accumulator lanes, and bucket 0 of the quantile histograms (exact
 * matches, which come in runs) to those lanes' zero counts, so that consecutive increments hit
 * different counts. */
static inline __attribute__((always_inline)) void
pc_chunk_hist(pc_f32_state *st, const pc_keys *keys, size_t lo, size_t q, int h) {
  for (size_t j = lo; j < q; j++)
    for (int l = 0; l < PC_W; l++)
      st->ulp_keys[h * PC_W + l][keys->ulp[j % PC_F32_KEY_STEPS][l]]++;
  if (!st->h_abs)
    return;
  uint64_t *ha = st->h_abs->count, *hr = st->h_rel->count;
  for (size_t j = lo; j < q; j++)
    for (int l = 0; l < PC_W; l++) {
      uint64_t ka = keys->abs[j % PC_F32_KEY_STEPS][l], kr = keys->rel[j % PC_F32_KEY_STEPS][l];
      ++*(ka ? &ha[ka] : &st->zero_abs[h * PC_W + l]);
      ++*(kr ? &hr[kr] : &st->zero_rel[h * PC_W + l]);
    }
}

static void pc_vacc_load(pc_vacc *c, const pc_f32_state *st) {
  memcpy(c->sabs, st->sabs, sizeof c->sabs);
  memcpy(c->srel, st->srel, sizeof c->srel);
  memcpy(c->ssa, st->ssa, sizeof c->ssa);
  memcpy(c->ssb, st->ssb, sizeof c->ssb);
  memcpy(c->sab, st->sab, sizeof c->sab);
  memcpy(c->ssd, st->ssd, sizeof c->ssd);
  memcpy(c->sad, st->sad, sizeof c->sad);
  memcpy(c->max_rel, st->max_rel, sizeof c->max_rel);
  memcpy(c->max_ulp, st->max_ulp, sizeof c->max_ulp);
  memcpy(c->min_abs, st->min_abs, sizeof c->min_abs);
  memcpy(c->min_rel, st->min_rel, sizeof c->min_rel);
  memcpy(c->ulp_sum, st->ulp_sum, sizeof c->ulp_sum);
  memcpy(c->mism, st->mism, sizeof c->mism);
  memset(c->inexact_a, 0, sizeof c->inexact_a);
  memset(c->inexact_b, 0, sizeof c->inexact_b);
}

static void pc_vacc_store(pc_f32_state *st, const pc_vacc *c) {
  memcpy(st->sabs, c->sabs, sizeof c->sabs);
  memcpy(st->srel, c->srel, sizeof c->srel);
  memcpy(st->ssa, c->ssa, sizeof c->ssa);
  memcpy(st->ssb, c->ssb, sizeof c->ssb);
  memcpy(st->sab, c->sab, sizeof c->sab);
  memcpy(st->ssd, c->ssd, sizeof c->ssd);
  memcpy(st->sad, c->sad, sizeof c->sad);
  memcpy(st->max_rel, c->max_rel, sizeof c->max_rel);
  memcpy(st->max_ulp, c->max_ulp, sizeof c->max_ulp);
  memcpy(st->min_abs, c->min_abs, sizeof c->min_abs);
  memcpy(st->min_rel, c->min_rel, sizeof c->min_rel);
  memcpy(st->ulp_sum, c->ulp_sum, sizeof c->ulp_sum);
  memcpy(st->mism, c->mism, sizeof c->mism);
  for (int h = 0; h < PC_H; h++)
    for (int l = 0; l < PC_W; l++) {
      st->inexact_a += (uint32_t)c->inexact_a[h][l];
      st->inexact_b += (uint32_t)c->inexact_b[h][l];
    }
}

static pc_vset pc_vset_make(const pc_f32_state *st) {
  pc_vset s;
  s.atol = (vd){0} + st->atol;
  s.rtol = (vd){0} + st->rtol;
  s.tol_ulp = (vl){0} + st->tol_ulp;
  s.count_a = (vi){0} + (int32_t)st->a_bf16;
  s.count_b = (vi){0} + (int32_t)st->b_bf16;
  return s;
}

/* One pass over the whole groups [from, to): the steps that go to accumulator vector h (step k
 * of a group goes to vector k % PC_H). Each group's keys are counted while the next one is
 * folded. With PC_H > 1, one pass per vector keeps only that vector's accumulators live. */
static inline __attribute__((always_inline)) void
pc_pass(pc_f32_state *st, pc_vacc *c, const pc_vset *s, bool half, bool bf16, bool inexact,
        const unsigned char *a, const unsigned char *b, size_t from, size_t to, int h) {
  const size_t es = half ? 2 : 4; /* bytes an element */
  pc_keys keys;
  size_t q = 0;
  for (size_t i = from; i < to; i += PC_F32_GROUP, q += PC_SPV) {
    const unsigned char *pa = a + es * i, *pb = b + es * i;
    for (int k = 0; k < PC_SPV; k++) {
      size_t at = es * PC_W * (size_t)(k * PC_H + h);
      pc_vstep(c, s, half, bf16, inexact, pa + at, pb + at, &keys, q + k, h);
    }
    if (q >= PC_SPV)
      pc_chunk_hist(st, &keys, q - PC_SPV, q, h); /* the previous group */
  }
  pc_chunk_hist(st, &keys, q >= PC_SPV ? q - PC_SPV : 0, q, h);
}

/* One chunk of whole groups from `from`, w updated; returns where it stopped (before a group
 * with a non-finite pair, or at `to`). */
static inline __attribute__((always_inline)) size_t
pc_chunk(pc_f32_state *st, pc_vacc *c, pc_best *w, const pc_vset *s, bool half, bool bf16,
         bool inexact, const unsigned char *a, const unsigned char *b, size_t from, size_t to) {
  const size_t es = half ? 2 : 4; /* bytes an element */
  size_t stop = from;
  while (stop < to && !pc_vnonfinite(half, a + es * stop, b + es * stop))
    stop += PC_F32_GROUP;
  memset(c->cmax_abs, 0, sizeof c->cmax_abs);
  memset(c->cmax_mis, 0, sizeof c->cmax_mis);
  for (int h = 0; h < PC_H; h++)
    pc_pass(st, c, s, half, bf16, inexact, a, b, from, stop, h);
  st->count += stop - from;
  if (stop > from)
    pc_chunk_best(w, c, from, stop);
  double m = pc_hmax(c->cmax_abs);
  st->max_abs = m > st->max_abs ? m : st->max_abs;
  return stop;
}

size_t PC_F32_RUN(pc_f32_state *st, const unsigned char *a, const unsigned char *b, size_t from,
                  size_t n) {
  pc_vacc c;
  pc_vset s = pc_vset_make(st);
  pc_best w = {st->wcls, st->wabs, 0, 0};
  pc_vacc_load(&c, st);
  size_t end = from + (n - from) / PC_F32_GROUP * PC_F32_GROUP, i = from;
  bool inexact = st->a_bf16 || st->b_bf16;
  while (i < end) {
    size_t to = end - i < PC_F32_CHUNK ? end : i + PC_F32_CHUNK, at;
    /* One copy of the loop for each setting, so that none is tested per element. */
    if (st->half)
      at = pc_chunk(st, &c, &w, &s, true, false, false, a, b, i, to);
    else if (st->bf16)
      at = inexact ? pc_chunk(st, &c, &w, &s, false, true, true, a, b, i, to)
                   : pc_chunk(st, &c, &w, &s, false, true, false, a, b, i, to);
    else
      at = inexact ? pc_chunk(st, &c, &w, &s, false, false, true, a, b, i, to)
                   : pc_chunk(st, &c, &w, &s, false, false, false, a, b, i, to);
    bool stopped = at < to;
    i = at;
    if (stopped)
      break;
  }
  pc_vacc_store(st, &c);
  pc_take_best(st, &w, a, b);
  return i;
}
