/* The vector part of the envelope's per-element test (envelope.h, pc_envelope_fold), on stored
 * bytes: A and B float32 or float16, the bound float16, all in the machine's byte order.
 * envelope_lanes.c is compiled three times, as kernel_f32.c is (CMakeLists.txt,
 * pc_f32_variant): pc_f32_run_base_envelope for baseline x86-64, pc_f32_run_avx2_envelope with
 * AVX2 and F16C, pc_f32_run_avx512_envelope with AVX-512; law.c picks the widest the processor
 * runs. Each lane applies pc_envelope_fold's double operations to its pair in the same order
 * (no contraction into FMA), and what the test keeps, two counts and a maximum, is exact in any
 * order: every build gives pc_envelope_fold's figures bit for bit. Internal to the library. */
#ifndef PC_ENVELOPE_LANES_H
#define PC_ENVELOPE_LANES_H

#include "evidence_lanes.h" /* pc_ev_layout */

#include <paritycheck/result.h>

#include <stddef.h> /* size_t */

/** The per-element test of pairs 0..end-1 of a and b (layout PC_EV_FLOAT or PC_EV_HALF) with
 * their float16 bounds e, into part as pc_envelope_fold adds them; end is the last multiple of
 * the build's step at most n, returned. */
size_t pc_f32_run_base_envelope(pc_stats *part, pc_ev_layout layout, const unsigned char *a,
                                const unsigned char *b, const unsigned char *e, size_t n,
                                const pc_envelope_fig *fig);
size_t pc_f32_run_avx2_envelope(pc_stats *part, pc_ev_layout layout, const unsigned char *a,
                                const unsigned char *b, const unsigned char *e, size_t n,
                                const pc_envelope_fig *fig);
size_t pc_f32_run_avx512_envelope(pc_stats *part, pc_ev_layout layout, const unsigned char *a,
                                  const unsigned char *b, const unsigned char *e, size_t n,
                                  const pc_envelope_fig *fig);

#endif
