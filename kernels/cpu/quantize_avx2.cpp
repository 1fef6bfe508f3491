// The quantize kernels of the "avx2" level: quantize_x86.inc compiled with
// -mavx2 -mfma -mf16c (set per file in kernels/CMakeLists.txt, never for the whole library).
#define STRATA_SIMD_NS avx2
#include "kernels/cpu/quantize_x86.inc"
