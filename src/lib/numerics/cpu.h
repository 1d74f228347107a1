/* Which vector builds of the lane code (kernel_f32.c, evidence_lanes.c; CMakeLists.txt,
 * pc_f32_variant) this processor runs. Below both the kernel and the evidence, which each pick
 * their widest build from it, so that neither calls the other for it. Internal to the library. */
#ifndef PC_CPU_H
#define PC_CPU_H

#include <stdbool.h> /* bool */

/** Whether this processor (and its operating system) can run the AVX2 + F16C builds, and the
 * AVX-512 builds; false where the library was built without them. */
bool pc_f32_can_avx2(void);
bool pc_f32_can_avx512(void);

#endif
