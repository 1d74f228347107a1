/* The vector part of the envelope's per-element test (envelope_lanes.h), in GCC vector
 * extensions so that one source serves every build. PC_ENV_RUN names the function
 * (CMakeLists.txt, pc_f32_variant). */
#include "envelope_lanes.h"
#include "evidence_vec.h" /* vd, vl, vq, pc_ev_load, pc_ev_finite, pc_ev_select; simd.h */

#include <math.h> /* INFINITY */

#ifndef PC_ENV_RUN
#error "define PC_ENV_RUN (pc_f32_run_base_envelope, ..._avx2_envelope or ..._avx512_envelope)"
#endif

size_t PC_ENV_RUN(pc_stats *part, pc_ev_layout layout, const unsigned char *a,
                  const unsigned char *b, const unsigned char *e, size_t n,
                  const pc_envelope_fig *fig) {
  const size_t end = n / PC_W * PC_W;
  const vl absmask = (vl){0} + INT64_MAX;
  const vd zero = {0}, inf = (vd){0} + INFINITY;
  const bool scaled = fig->scale > 0;
  const vd scale = (vd){0} + fig->scale, floor = (vd){0} + fig->elem_floor;
  const vd grid2 = (vd){0} + 2 * fig->grid_u; /* 2 * grid_u * |a|, left to right */
  const vd factor = (vd){0} + fig->elem_factor, median = (vd){0} + fig->median_bound;
  vd top = zero;
  vq beyond = {0}, above = {0};
  for (size_t i = 0; i < end; i += PC_W) {
    vd x, y, bound16;
    pc_ev_load(layout, a, i, &x, NULL);
    pc_ev_load(layout, b, i, &y, NULL);
    pc_ev_load(PC_EV_HALF, e, i, &bound16, NULL);
    vl ok = pc_ev_finite(x) & pc_ev_finite(y);
    vd ei = pc_ev_select(bound16 >= zero, bound16, zero); /* a NaN or negative bound: 0 */
    vd d = (vd)((vl)(y - x) & absmask);
    vd bound = ((scaled ? scale * ei : zero) + floor) + grid2 * (vd)((vl)x & absmask);
    vd ratio = pc_ev_select(d == zero, zero, pc_ev_select(bound > zero, d / bound, inf));
    ratio = (vd)((vl)ratio & ok); /* a pair skipped adds 0 to a maximum of ratios >= 0 */
    top = pc_vmax(ratio, top);
    beyond -= (vq)(ok & (ratio > factor)); /* a mask lane is -1 */
    above -= (vq)(ok & (d > median));
  }
  double m = part->env_max_ratio;
  uint64_t nb = 0, na = 0;
  for (int l = 0; l < PC_W; l++) {
    m = top[l] > m ? top[l] : m;
    nb += beyond[l];
    na += above[l];
  }
  part->env_max_ratio = m;
  part->env_beyond += nb;
  part->env_above_median += fig->has_median ? na : 0;
  return end;
}
