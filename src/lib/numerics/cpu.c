/* The processor's vector features (cpu.h). */
#include "cpu.h"

#ifdef PC_HAVE_AVX2
#include <cpuid.h> /* __get_cpuid, bit_F16C */
#endif

#include <pthread.h> /* pthread_once */

/* The AVX2 build needs F16C too (every AVX2 processor has it, but a hypervisor may hide it;
 * clang's __builtin_cpu_supports does not know it, hence CPUID leaf 1). __builtin_cpu_supports
 * also checks that the operating system saves the vector registers. */
bool pc_f32_can_avx2(void) {
#ifdef PC_HAVE_AVX2
  unsigned eax, ebx, ecx = 0, edx;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
         (ecx & bit_F16C);
#else
  return false;
#endif
}

bool pc_f32_can_avx512(void) {
#ifdef PC_HAVE_AVX2
  return pc_f32_can_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

static pc_f32_build pc_widest_build;
static pthread_once_t pc_widest_once = PTHREAD_ONCE_INIT;

static void pc_pick_widest(void) {
  pc_widest_build = pc_f32_can_avx512() ? PC_F32_AVX512
                    : pc_f32_can_avx2() ? PC_F32_AVX2
                                        : PC_F32_BASE;
}

pc_f32_build pc_f32_widest(void) {
  pthread_once(&pc_widest_once, pc_pick_widest);
  return pc_widest_build;
}
