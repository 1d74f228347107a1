/* The vector part of the structural evidence (evidence_lanes.h says how its sums stay those of
 * one scalar loop), in GCC vector extensions so that one source serves every build. PC_EV_RUN
 * names the function (CMakeLists.txt, pc_f32_variant). */
#include "evidence_lanes.h"
#include "evidence_vec.h" /* vd, vf, ...: this build's vectors, and their primitives */
#include "numerics.h"     /* pc_f16_float */

#include <float.h>  /* FLT_MIN */
#include <math.h>   /* INFINITY */
#include <stdint.h> /* int64_t, uint32_t, uint64_t */
#include <string.h> /* memcpy */

#ifndef PC_EV_RUN
#error "define PC_EV_RUN (pc_f32_run_base_evidence, ..._avx2_evidence or ..._avx512_evidence)"
#endif

/* Pairs whose terms are buffered before the sums take them (evidence_lanes.h): 8 terms of 8
 * bytes, 16 KiB, stay in the L1 cache. A multiple of every build's step. */
enum { PC_EV_CHUNK = 256 };

/* The terms of a pair that are summed in order, one row of the buffer each: a, b, |a|, |b|
 * (finite pairs), (b - a)^2 of a rest pair, the unshifted distance of each shift, and with
 * slices (b - a)^2 of the finite pairs. */
enum { T_A, T_B, T_AA, T_AB, T_REST, T_BF, T_BB, T_SL, PC_EV_NTERMS };

/* The lane sums (evidence_lanes.h) take PC_EV_LANES lanes in every build: a build of PC_W < 8
 * keeps them in 8 / PC_W vectors, its steps taking them in turn. */
enum { PC_EV_LANES = PC_EV_MAX_STEP, PC_EV_VECS = PC_EV_LANES / PC_W };

/* The lane-summed terms: the shifted distance of each shift, and with slices a^2. */
enum { L_SF, L_SB, L_SLA2, PC_EV_NLANE };

/* Counts and extremes of a run, in lanes. The signature's counts are int32 lanes (their masks
 * come from float32 compares), added into the state at each chunk's end so they cannot wrap.
 * For float32 and float16 values, what decides whether a chunk's sums may be taken from lanes
 * (pc_ev_lane_sums): gkey, the
 * least of (bits << 1) - 1 over the float32 patterns of a and b (its top byte is at most the
 * least biased exponent of a nonzero value; a zero gives 0xFFFFFFFF). Both restart at each
 * chunk. */
typedef struct pc_ev_vacc {
  vq pairs, zeros_a, rest, fwd, back;
  vi cand[3], hit[3];
  vd rest_max, min_a, max_a, min_b, max_b;
  vu gkey;
  vd lane[PC_EV_NLANE][PC_EV_VECS]; /* the lane sums of the run, not restarted per chunk */
} pc_ev_vacc;

/* The precision signature of a step (`in`: the finite pairs of the sample, as int32 lanes). */
static inline __attribute__((always_inline)) void pc_ev_signature(pc_ev_vacc *c, vf fa, vf fb,
                                                                  vi in) {
  vu ua = (vu)fa, ub = (vu)fb, r16 = pc_ev_round_bits(ua, 16), r13 = pc_ev_round_bits(ua, 13);
  vf h = pc_ev_fp16(fa);
  vi off[3] = {(vi)(r16 != ua), h != fa, (vi)(r13 != ua)};
  vi hit[3] = {(vi)(r16 == ub), h == fb, (vi)(r13 == ub)};
  for (int k = 0; k < 3; k++) {
    c->cand[k] -= off[k] & in;
    c->hit[k] -= off[k] & hit[k] & in;
  }
}

/* The rare classes of a step's pairs (masks zeroed, zsmall, flip), one pair at a time in order:
 * their sums are chains of their own. */
static void pc_ev_rare(pc_ev_run *r, vd x, vd y, vl zeroed, vl zsmall, vl flip) {
  pc_evidence *e = r->e;
  int g = r->group;
  for (int l = 0; l < PC_W; l++) {
    double a = x[l], b = y[l];
    if (zeroed[l]) {
      e->zeroed++;
      e->zeroed_sq += a * a;
      if (g >= 0) {
        e->slice_zeroed[g]++;
        e->slice_zeroed_sq[g] += a * a;
      }
    } else if (zsmall[l]) {
      e->zeroed_small++;
      e->zeroed_small_sq += a * a;
    } else if (flip[l]) {
      e->flipped++;
      e->flipped_sq += a * a;
      e->flipped_neg_sq += (a + b) * (a + b);
    }
  }
}

/* The first zero of a side among the lanes of mask z, if none was met before. */
static inline void pc_ev_first_zero(bool *seen, double *zero, vd v, vl z) {
  if (*seen || !pc_ev_any(z))
    return;
  for (int l = 0; l < PC_W; l++)
    if (z[l]) {
      *zero = v[l];
      *seen = true;
      return;
    }
}

/* Stores term row k of the step at column j: v where mask m, else +0. */
static inline void pc_ev_put(double (*t)[PC_EV_CHUNK], int k, size_t j, vd v, vl m) {
  vd put = (vd)((vl)v & m);
  memcpy(&t[k][j], &put, sizeof put);
}

/* gkey of a step (pc_ev_vacc): fa and fb the float32 values. */
static inline void pc_ev_grain(pc_ev_vacc *c, vf fa, vf fb) {
  vu ka = ((vu)fa << 1) - 1u, kb = ((vu)fb << 1) - 1u;
  c->gkey = pc_ev_minu(pc_ev_minu(ka, kb), c->gkey);
}

/* One step: pairs i..i+PC_W-1, whose terms go to column j of the buffer and to the lane sums'
 * vectors h (0 where PC_W is 8, else the step's turn). sig_left: how many
 * pairs from i on are in the signature's sample (used when `sig`). `fin`: the step's pairs and
 * their neighbours are known to be finite (pc_ev_all_finite), so every mask of finiteness is all
 * ones and drops out, and the caller counts the pairs and shifted pairs for the whole chunk. */
static inline __attribute__((always_inline)) void
pc_ev_step(pc_ev_run *r, pc_ev_vacc *c, pc_ev_layout layout, bool slice, bool sig, bool fin,
           const unsigned char *a, const unsigned char *b, size_t i, double (*t)[PC_EV_CHUNK],
           size_t j, size_t h, int64_t sig_left, const vd *given, vf given_fa) {
  const vl absmask = (vl){0} + INT64_MAX, inf = (vl){0} + 0x7FF0000000000000;
  const bool lanes = layout != PC_EV_DOUBLE;
  vd x, y, xp, xn;
  vf fa = given_fa, fb;
  if (given) { /* a's values and neighbours, from pc_ev_steps */
    x = given[0];
    xp = given[1];
    xn = given[2];
  } else {
    pc_ev_load(layout, a, i, &x, sig || lanes ? &fa : NULL);
    pc_ev_load(layout, a, i - 1, &xp, NULL);
    pc_ev_load(layout, a, i + 1, &xn, NULL);
  }
  pc_ev_load(layout, b, i, &y, sig || lanes ? &fb : NULL);
  const vl all = (vl){0} - 1;
  vl ok = fin ? all : pc_ev_finite(x) & pc_ev_finite(y);
  vd d = y - x, d2 = d * d, ax = (vd)((vl)x & absmask);
  vl zb = y == 0, big = ax >= PC_ZERO_EVIDENCE_MIN, small = ax >= FLT_MIN;
  vl zeroed = ok & zb & big, zsmall = ok & zb & ~big & small;
  vl flip = ok & (((x < 0) & (y > 0)) | ((x > 0) & (y < 0)));
  vl rare = zeroed | zsmall | flip, rest = ok & ~rare;
  vl fwd = fin ? all : ok & pc_ev_finite(xp), back = fin ? all : ok & pc_ev_finite(xn);
  vd sf = y - xp, sb = y - xn;
  pc_ev_put(t, T_A, j, x, ok);
  pc_ev_put(t, T_B, j, y, ok);
  pc_ev_put(t, T_AA, j, ax, ok);
  pc_ev_put(t, T_AB, j, (vd)((vl)y & absmask), ok);
  pc_ev_put(t, T_REST, j, d2, rest);
  pc_ev_put(t, T_BF, j, d2, fwd);
  if (!fin) /* else row T_BF holds them (pc_ev_row) */
    pc_ev_put(t, T_BB, j, d2, back);
  if (slice && !fin)
    pc_ev_put(t, T_SL, j, d2, ok);
  c->lane[L_SF][h] += (vd)((vl)(sf * sf) & fwd);
  c->lane[L_SB][h] += (vd)((vl)(sb * sb) & back);
  if (slice)
    c->lane[L_SLA2][h] += (vd)((vl)(x * x) & ok);
  if (lanes)
    pc_ev_grain(c, fa, fb);
  vl za = ok & (x == 0), zbo = ok & zb;
  if (!fin) {
    c->pairs -= (vq)ok; /* a mask lane is -1 */
    c->fwd -= (vq)fwd;
    c->back -= (vq)back;
  }
  c->zeros_a -= (vq)za;
  c->rest -= (vq)rest;
  c->rest_max = pc_vmax(c->rest_max, (vd)((vl)d & absmask & rest));
  /* Extremes with -0 as +0 (x + 0); a pair that is not finite is +inf for the minima, -inf for
   * the maxima. */
  vd xz = pc_ev_select(ok, x + 0.0, (vd)inf), yz = pc_ev_select(ok, y + 0.0, (vd)inf);
  c->min_a = pc_vmin(xz, c->min_a);
  c->min_b = pc_vmin(yz, c->min_b);
  xz = pc_ev_select(ok, xz, -(vd)inf);
  yz = pc_ev_select(ok, yz, -(vd)inf);
  c->max_a = pc_vmax(xz, c->max_a);
  c->max_b = pc_vmax(yz, c->max_b);
  pc_ev_first_zero(&r->zero_a_seen, &r->zero_a, x, za);
  pc_ev_first_zero(&r->zero_b_seen, &r->zero_b, y, zbo);
  if (pc_ev_any(rare))
    pc_ev_rare(r, x, y, zeroed, zsmall, flip);
  if (sig && sig_left > 0) {
    vl lane;
    for (int l = 0; l < PC_W; l++)
      lane[l] = l;
    pc_ev_signature(c, fa, fb, pc_ev_mask32(ok & (lane < sig_left)));
  }
}

/* Where row k's terms are: in a chunk whose pairs are all finite (`fin`), the unmasked
 * (b - a)^2 of rows T_BB and T_SL are those of row T_BF, which alone is written. */
static inline int pc_ev_row(int k, bool fin) {
  return fin && (k == T_BB || k == T_SL) ? T_BF : k;
}

/* Adds columns 0..m-1 of the buffer to the sums, in order: one chain per sum, all interleaved.
 * The values' rows (a, b, |a|, |b|) where `vals`, the (b - a)^2 rows where `sq`: those that the
 * exact lane sums did not take. */
static inline __attribute__((always_inline)) void pc_ev_chains_rows(pc_ev_run *r,
                                                                    double (*t)[PC_EV_CHUNK],
                                                                    size_t m, bool slice, bool fin,
                                                                    bool vals, bool sq) {
  pc_evidence *e = r->e;
  const double *tbb = t[pc_ev_row(T_BB, fin)], *tsl = t[pc_ev_row(T_SL, fin)];
  int g = slice ? r->group : 0;
  double sa = e->sum_a, sb = e->sum_b, saa = e->sum_abs_a, sab = e->sum_abs_b, rs = e->rest_sq;
  double f1 = e->shift_base_sq[PC_SHIFT_FWD], b1 = e->shift_base_sq[PC_SHIFT_BACK];
  double l0 = e->slice_sq[g], l2 = e->slice_rest_sq[g];
  for (size_t j = 0; j < m; j++) {
    if (vals) {
      sa += t[T_A][j];
      sb += t[T_B][j];
      saa += t[T_AA][j];
      sab += t[T_AB][j];
    }
    if (sq) {
      rs += t[T_REST][j];
      f1 += t[T_BF][j];
      b1 += tbb[j];
    }
    if (slice && sq) {
      l0 += tsl[j];
      l2 += t[T_REST][j];
    }
  }
  if (vals) {
    e->sum_a = sa;
    e->sum_b = sb;
    e->sum_abs_a = saa;
    e->sum_abs_b = sab;
  }
  if (sq) {
    e->rest_sq = rs;
    e->shift_base_sq[PC_SHIFT_FWD] = f1;
    e->shift_base_sq[PC_SHIFT_BACK] = b1;
  }
  if (slice && sq) {
    e->slice_sq[g] = l0;
    e->slice_rest_sq[g] = l2;
  }
}

/* The same for the values' and the squares' rows, with every flag a constant in each copy. */
static inline __attribute__((always_inline)) void pc_ev_chains_some(pc_ev_run *r,
                                                                    double (*t)[PC_EV_CHUNK],
                                                                    size_t m, bool slice, bool fin,
                                                                    bool vals, bool sq) {
  if (vals && sq)
    pc_ev_chains_rows(r, t, m, slice, fin, true, true);
  else if (vals)
    pc_ev_chains_rows(r, t, m, slice, fin, true, false);
  else if (sq)
    pc_ev_chains_rows(r, t, m, slice, fin, false, true);
}

/* 2^k for the biased exponent field k + 1023 in 1..2046. */
static inline double pc_ev_pow2(int64_t field) {
  uint64_t u = (uint64_t)field << 52;
  double p;
  memcpy(&p, &u, sizeof p);
  return p;
}

/* The largest power of two that divides the double s (its lowest set bit); INFINITY for 0
 * (every grain divides it), and 0 (no grain will do) where s is not a normal number. */
static inline double pc_ev_grain_of(double s) {
  uint64_t u;
  memcpy(&u, &s, sizeof u);
  int64_t field = (int64_t)((u >> 52) & 0x7FF);
  if (field == 0)
    return s == 0 ? (double)INFINITY : 0;
  if (field == 0x7FF)
    return 0;
  uint64_t mant = (u & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
  field += __builtin_ctzll(mant) - 52; /* the lowest set bit's exponent field */
  return field >= 1 ? pc_ev_pow2(field) : 0;
}

/* Whether a chain s + t_0 + t_1 + ... (in order, each addition rounded) equals s + T, T the sum
 * of the same terms in any other order, where every term is a multiple of the power of two
 * `grain` and `mags` is the (lane-wise) sum of their magnitudes. With gamma the smaller of
 * grain and pc_ev_grain_of(s), every partial sum of the chain, and of any other order, is a
 * multiple of gamma no larger in magnitude than |s| + mags: below 2^53 gamma it is a double, so no
 * addition rounds and both orders give the exact sum. The test is on the computed mags: a sum of
 * nonnegative multiples of gamma is exact below 2^53 gamma, and once its exact value reaches
 * that power of two its rounded value does too (rounding is monotone), so a computed mags (and
 * |s| + mags) below the limit means an exact one below it. No NaN passes. */
static inline bool pc_ev_exact(double s, double mags, double grain) {
  double gs = pc_ev_grain_of(s), gamma = grain < gs ? grain : gs, lim = gamma * 0x1p53;
  return mags < lim && fabs(s) + mags < lim;
}

static inline double pc_ev_hsum_d(vd v) {
  double s = 0;
  for (int l = 0; l < PC_W; l++)
    s += v[l];
  return s;
}

/* The sums, in lanes, of the buffer's rows that pc_ev_lane_sums may take (in any order: they
 * are used only where exact), one accumulator per row so that the additions overlap. */
static inline __attribute__((always_inline)) void
pc_ev_row_sums(double (*t)[PC_EV_CHUNK], size_t m, bool slice, bool fin, double *sum) {
  static const int rows[] = {T_A, T_B, T_AA, T_AB, T_REST, T_BF, T_BB, T_SL};
  enum { NR = sizeof rows / sizeof rows[0] };
  /* T_SL is written only with slices, and neither it nor T_BB where `fin` (pc_ev_row) */
  int nr = fin ? NR - 2 : slice ? NR : NR - 1;
  vd acc[NR] = {{0}};
  for (size_t j = 0; j < m; j += PC_W)
    for (int k = 0; k < NR; k++)
      if (k < nr) {
        vd x;
        memcpy(&x, &t[rows[k]][j], sizeof x);
        acc[k] += x;
      }
  for (int k = 0; k < nr; k++)
    sum[rows[k]] = pc_ev_hsum_d(acc[k]);
  if (fin)
    sum[T_BB] = sum[T_SL] = sum[T_BF];
}

/* Float32 and float16 values (lanes): a chunk's sums of a, b, |a|, |b| (the values) and of the
 * (b - a)^2 rows (the squares) in one go, each group where pc_ev_exact shows every one of its
 * sums to be its chain's exact sum. Returns which groups it took (bit 0 the values, bit 1 the
 * squares); a group not taken is left as it was. The grains: every value of a and b is a
 * multiple of g = 2^(e - 150), e the top byte of gkey (a float32 of biased exponent e >= 1 is a
 * multiple of 2^(e - 150), a subnormal one of 2^-149). So is b - a, and its rounded value too
 * (below 2^53 g it is exact, above its ulp is a multiple of g); likewise (b - a)^2, rounded or
 * not, is a multiple of g^2 (which stays a normal double: g >= 2^-150). */
static inline __attribute__((always_inline)) unsigned
pc_ev_lane_sums(pc_ev_run *r, const pc_ev_vacc *c, double (*t)[PC_EV_CHUNK], size_t m, bool slice,
                bool fin) {
  pc_evidence *e = r->e;
  int g = slice ? r->group : 0;
  uint32_t key = UINT32_MAX;
  for (int l = 0; l < PC_W; l++)
    key = c->gkey[l] < key ? c->gkey[l] : key;
  int64_t ex = key >> 24;
  double grain = pc_ev_pow2(ex + 873), grain2 = pc_ev_pow2(2 * ex + 723); /* g, g^2 */
  double sum[PC_EV_NTERMS];
  for (int k = 0; k < PC_EV_NTERMS; k++)
    sum[k] = 0;
  pc_ev_row_sums(t, m, slice, fin, sum);
  bool vals = pc_ev_exact(e->sum_a, sum[T_AA], grain) && pc_ev_exact(e->sum_b, sum[T_AB], grain) &&
              pc_ev_exact(e->sum_abs_a, sum[T_AA], grain) &&
              pc_ev_exact(e->sum_abs_b, sum[T_AB], grain);
  bool sq = pc_ev_exact(e->rest_sq, sum[T_REST], grain2) &&
            pc_ev_exact(e->shift_base_sq[PC_SHIFT_FWD], sum[T_BF], grain2) &&
            pc_ev_exact(e->shift_base_sq[PC_SHIFT_BACK], sum[T_BB], grain2);
  if (slice)
    sq = sq && pc_ev_exact(e->slice_sq[g], sum[T_SL], grain2) &&
         pc_ev_exact(e->slice_rest_sq[g], sum[T_REST], grain2);
  if (vals) {
    e->sum_a += sum[T_A];
    e->sum_b += sum[T_B];
    e->sum_abs_a += sum[T_AA];
    e->sum_abs_b += sum[T_AB];
  }
  if (sq) {
    e->rest_sq += sum[T_REST];
    e->shift_base_sq[PC_SHIFT_FWD] += sum[T_BF];
    e->shift_base_sq[PC_SHIFT_BACK] += sum[T_BB];
    if (slice) {
      e->slice_sq[g] += sum[T_SL];
      e->slice_rest_sq[g] += sum[T_REST];
    }
  }
  return (vals ? 1u : 0u) | (sq ? 2u : 0u);
}

/* A chunk's in-order terms into the sums, each exactly as its chain in element order: the exact
 * lane sums where they are exact, chains for the rest. The grain restarts. */
static inline __attribute__((always_inline)) void pc_ev_chains(pc_ev_run *r, pc_ev_vacc *c,
                                                               double (*t)[PC_EV_CHUNK], size_t m,
                                                               bool slice, bool lanes, bool fin) {
  if (!lanes) {
    pc_ev_chains_rows(r, t, m, slice, fin, true, true);
    return;
  }
  unsigned took = pc_ev_lane_sums(r, c, t, m, slice, fin);
  pc_ev_chains_some(r, t, m, slice, fin, !(took & 1u), !(took & 2u));
  c->gkey = (vu){0} + UINT32_MAX;
}

static void pc_ev_vacc_init(pc_ev_vacc *c) {
  memset(c, 0, sizeof *c);
  c->min_a = c->min_b = (vd){0} + (double)INFINITY;
  c->max_a = c->max_b = (vd){0} - (double)INFINITY;
  c->gkey = (vu){0} + UINT32_MAX;
}

/* The signature's int32 lanes into the state's counts, and cleared. */
static void pc_ev_flush_signature(pc_evidence *e, pc_ev_vacc *c) {
  for (int k = 0; k < 3; k++) {
    for (int l = 0; l < PC_W; l++) {
      e->round_cand[k] += (uint32_t)c->cand[k][l];
      e->round_hit[k] += (uint32_t)c->hit[k][l];
    }
    c->cand[k] = c->hit[k] = (vi){0};
  }
}

static uint64_t pc_ev_hsum(vq v) {
  uint64_t s = 0;
  for (int l = 0; l < PC_W; l++)
    s += v[l];
  return s;
}

/* The PC_EV_LANES lane sums of v added pairwise, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
 * (l6 + l7)), in every build. */
static double pc_ev_fold_lanes(const vd *v) {
  double l[PC_EV_LANES];
  memcpy(l, v, sizeof l);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* The run's counts, extremes and lane sums, from the lanes into r and its evidence. */
static void pc_ev_finish(pc_ev_run *r, const pc_ev_vacc *c) {
  pc_evidence *e = r->e;
  e->shift_sq[PC_SHIFT_FWD] += pc_ev_fold_lanes(c->lane[L_SF]);
  e->shift_sq[PC_SHIFT_BACK] += pc_ev_fold_lanes(c->lane[L_SB]);
  if (r->group >= 0)
    e->slice_a2[r->group] += pc_ev_fold_lanes(c->lane[L_SLA2]);
  uint64_t rest = pc_ev_hsum(c->rest);
  double rest_max = 0;
  e->pairs += pc_ev_hsum(c->pairs);
  e->zeros_a += pc_ev_hsum(c->zeros_a);
  e->rest += rest;
  e->shift_pairs[PC_SHIFT_FWD] += pc_ev_hsum(c->fwd);
  e->shift_pairs[PC_SHIFT_BACK] += pc_ev_hsum(c->back);
  for (int l = 0; l < PC_W; l++) {
    rest_max = c->rest_max[l] > rest_max ? c->rest_max[l] : rest_max;
    r->min_a = c->min_a[l] < r->min_a ? c->min_a[l] : r->min_a;
    r->max_a = c->max_a[l] > r->max_a ? c->max_a[l] : r->max_a;
    r->min_b = c->min_b[l] < r->min_b ? c->min_b[l] : r->min_b;
    r->max_b = c->max_b[l] > r->max_b ? c->max_b[l] : r->max_b;
  }
  e->rest_max = rest_max > e->rest_max ? rest_max : e->rest_max;
  if (r->group >= 0) {
    e->slice_rest[r->group] += rest;
    double *m = &e->slice_rest_max[r->group];
    *m = rest_max > *m ? rest_max : *m;
  }
}

/* Whether values lo-1..hi of a and lo..hi-1 of b (float32 or float16; hi - lo a multiple of
 * PC_W) are all finite: then so are the pairs of the steps from lo to hi and both their
 * neighbours. A value is finite where its exponent bits are not all ones, that is where adding
 * one to its exponent field alone does not carry into the sign bit; an inf or NaN keeps them
 * when widened, so this is the steps' test of the doubles. */
static inline __attribute__((always_inline)) bool pc_ev_all_finite(pc_ev_layout layout,
                                                                   const unsigned char *a,
                                                                   const unsigned char *b,
                                                                   size_t lo, size_t hi) {
  if (layout == PC_EV_HALF) {
    const uint16_t e = 0x7C00u, one = 0x0400u;
    uint16_t end[2];
    memcpy(&end[0], a + 2 * (lo - 1), 2);
    memcpy(&end[1], a + 2 * hi, 2);
    vh carry = {0};
    for (size_t i = lo; i < hi; i += PC_W) {
      vh x, y;
      memcpy(&x, a + 2 * i, sizeof x);
      memcpy(&y, b + 2 * i, sizeof y);
      carry |= ((x & e) + one) | ((y & e) + one);
    }
    unsigned any = ((end[0] & e) + one) | ((end[1] & e) + one);
    for (int l = 0; l < PC_W; l++)
      any |= carry[l];
    return !(any & 0x8000u);
  }
  const uint32_t e = 0x7F800000u, one = 0x00800000u;
  uint32_t end[2];
  memcpy(&end[0], a + 4 * (lo - 1), 4);
  memcpy(&end[1], a + 4 * hi, 4);
  vu carry = {0};
  for (size_t i = lo; i < hi; i += PC_W) {
    vu x, y;
    memcpy(&x, a + 4 * i, sizeof x);
    memcpy(&y, b + 4 * i, sizeof y);
    carry |= ((x & e) + one) | ((y & e) + one);
  }
  uint32_t any = ((end[0] & e) + one) | ((end[1] & e) + one);
  for (int l = 0; l < PC_W; l++)
    any |= carry[l];
  return !(any & 0x80000000u);
}

/* Value j of a (float32 or float16) as a double, exactly as the vector loads give it. */
static inline double pc_ev_scalar(pc_ev_layout layout, const unsigned char *a, size_t j) {
  if (layout == PC_EV_HALF) {
    uint16_t h;
    memcpy(&h, a + 2 * j, sizeof h);
    return pc_f16_float(h);
  }
  float f;
  memcpy(&f, a + 4 * j, sizeof f);
  return f;
}

/* The lanes of x moved up by one with p's last lane in front (the elements before x's), and
 * down by one with n's first lane behind (the elements after); __builtin_shufflevector, which
 * GCC and clang both have, with the lane indices of the two vectors side by side. */
#if PC_W == 8
#define PC_EV_BEFORE(p, x) __builtin_shufflevector(p, x, 7, 8, 9, 10, 11, 12, 13, 14)
#define PC_EV_AFTER(x, n) __builtin_shufflevector(x, n, 1, 2, 3, 4, 5, 6, 7, 8)
#else
#define PC_EV_BEFORE(p, x) __builtin_shufflevector(p, x, 3, 4, 5, 6)
#define PC_EV_AFTER(x, n) __builtin_shufflevector(x, n, 1, 2, 3, 4)
#endif

/* The steps of a chunk [lo, hi), with its terms from column 0 of the buffer. In a chunk of
 * float32 or float16 values that are all finite (`fin`), a's values are loaded once: a step's
 * neighbours are its values shifted by a lane, with the last lane of the step before (for the
 * first step, value lo - 1) or the first of the step after (for the last, value hi) moved in. */
static inline __attribute__((always_inline)) void
pc_ev_steps(pc_ev_run *r, pc_ev_vacc *c, pc_ev_layout layout, bool slice, bool sig, bool fin,
            const unsigned char *a, const unsigned char *b, size_t lo, size_t hi, size_t from,
            double (*t)[PC_EV_CHUNK], size_t sig_n) {
  if (!fin) {
    for (size_t i = lo; i < hi; i += PC_W)
      pc_ev_step(r, c, layout, slice, sig, false, a, b, i, t, i - lo, (i - lo) / PC_W % PC_EV_VECS,
                 (int64_t)sig_n - (int64_t)(i - from), NULL, (vf){0});
    return;
  }
  vd x[3], prev = (vd){0} + pc_ev_scalar(layout, a, lo - 1), next;
  vf fa, fnext = {0};
  pc_ev_load(layout, a, lo, &x[0], &fa);
  for (size_t i = lo; i < hi; i += PC_W) {
    if (i + PC_W < hi)
      pc_ev_load(layout, a, i + PC_W, &next, &fnext);
    else
      next = (vd){0} + pc_ev_scalar(layout, a, hi);
    x[1] = PC_EV_BEFORE(prev, x[0]);
    x[2] = PC_EV_AFTER(x[0], next);
    pc_ev_step(r, c, layout, slice, sig, true, a, b, i, t, i - lo, (i - lo) / PC_W % PC_EV_VECS,
               (int64_t)sig_n - (int64_t)(i - from), x, fa);
    prev = x[0];
    x[0] = next;
    fa = fnext;
  }
}

/* The run for one setting (each a copy of the loop, so that none is tested per pair). A chunk
 * of float32 or float16 values whose pairs and neighbours are all finite (the common case) runs
 * the steps without their finiteness masks, its pairs counted at once. */
static inline __attribute__((always_inline)) void
pc_ev_range(pc_ev_run *r, pc_ev_layout layout, bool slice, bool sig, const unsigned char *a,
            const unsigned char *b, size_t from, size_t end, size_t sig_n) {
  double t[PC_EV_NTERMS][PC_EV_CHUNK] __attribute__((aligned(64)));
  pc_ev_vacc c;
  pc_ev_vacc_init(&c);
  for (size_t lo = from; lo < end; lo += PC_EV_CHUNK) {
    size_t hi = end - lo < PC_EV_CHUNK ? end : lo + PC_EV_CHUNK;
    if (layout != PC_EV_DOUBLE && pc_ev_all_finite(layout, a, b, lo, hi)) {
      pc_ev_steps(r, &c, layout, slice, sig, true, a, b, lo, hi, from, t, sig_n);
      vq steps = (vq){0} + (hi - lo) / PC_W; /* each lane counts one pair a step */
      c.pairs += steps;
      c.fwd += steps;
      c.back += steps;
      pc_ev_chains(r, &c, t, hi - lo, slice, true, true);
    } else {
      pc_ev_steps(r, &c, layout, slice, sig, false, a, b, lo, hi, from, t, sig_n);
      pc_ev_chains(r, &c, t, hi - lo, slice, layout != PC_EV_DOUBLE, false);
    }
    if (sig)
      pc_ev_flush_signature(r->e, &c);
  }
  pc_ev_finish(r, &c);
}

size_t PC_EV_RUN(pc_ev_run *r, pc_ev_layout layout, const unsigned char *a, const unsigned char *b,
                 size_t from, size_t to, size_t sig_n) {
  size_t end = from + (to - from) / PC_EV_LANES * PC_EV_LANES; /* the same cut in every build */
  bool slice = r->group >= 0, sig = sig_n > 0;
  if (end == from)
    return end;
  if (layout == PC_EV_HALF)
    slice ? pc_ev_range(r, PC_EV_HALF, true, false, a, b, from, end, 0)
          : pc_ev_range(r, PC_EV_HALF, false, false, a, b, from, end, 0);
  else if (layout == PC_EV_FLOAT && sig)
    slice ? pc_ev_range(r, PC_EV_FLOAT, true, true, a, b, from, end, sig_n)
          : pc_ev_range(r, PC_EV_FLOAT, false, true, a, b, from, end, sig_n);
  else if (layout == PC_EV_FLOAT)
    slice ? pc_ev_range(r, PC_EV_FLOAT, true, false, a, b, from, end, 0)
          : pc_ev_range(r, PC_EV_FLOAT, false, false, a, b, from, end, 0);
  else if (sig)
    slice ? pc_ev_range(r, PC_EV_DOUBLE, true, true, a, b, from, end, sig_n)
          : pc_ev_range(r, PC_EV_DOUBLE, false, true, a, b, from, end, sig_n);
  else
    slice ? pc_ev_range(r, PC_EV_DOUBLE, true, false, a, b, from, end, 0)
          : pc_ev_range(r, PC_EV_DOUBLE, false, false, a, b, from, end, 0);
  return end;
}
