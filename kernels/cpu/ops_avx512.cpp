// The ops kernels of the "avx512" level: ops_x86.inc compiled with
// -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni (set per file in kernels/CMakeLists.txt, never for the whole library).
#define STRATA_SIMD_NS avx512
#include "kernels/cpu/ops_x86.inc"
