// The dot kernels of the "avx2" level: dot_x86.inc compiled with
// -mavx2 -mfma -mf16c (set per file in kernels/CMakeLists.txt, never for the whole library).
#define STRATA_SIMD_NS avx2
#include "kernels/cpu/dot_x86.inc"
