// The dot kernels of the "avx2vnni" level: dot_x86.inc compiled with
// -mavx2 -mfma -mf16c -mavxvnni (set per file in kernels/CMakeLists.txt, never for the whole library):
// avx2's kernels with the VEX vpdpbusd in place of the maddubs/madd sequences (the same integers).
#define STRATA_SIMD_NS avx2vnni
#include "kernels/cpu/dot_x86.inc"
