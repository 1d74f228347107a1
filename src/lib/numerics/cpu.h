/* Which vector builds of the lane code (kernel_f32.c, evidence_lanes.c, envelope_lanes.c;
 * CMakeLists.txt, pc_f32_variant) this processor runs. Below the kernel, the evidence and the
 * envelope, which each take their widest build from it, so that none calls another for it.
 * Internal to the library. */
#ifndef PC_CPU_H
#define PC_CPU_H

#include <stdbool.h> /* bool */

/** Whether this processor (and its operating system) can run the AVX2 + F16C builds, and the
 * AVX-512 builds; false where the library was built without them. */
bool pc_f32_can_avx2(void);
bool pc_f32_can_avx512(void);

/* The builds of the lane code, narrowest first: an index into a table of a lane file's three
 * entry points. */
typedef enum { PC_F32_BASE, PC_F32_AVX2, PC_F32_AVX512 } pc_f32_build;

/** The widest build this processor runs, decided once for the kernel, the evidence and the
 * envelope alike (CPUID is a VM exit under a hypervisor, and workers ask for every block). */
pc_f32_build pc_f32_widest(void);

#endif
