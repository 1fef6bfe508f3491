// Internal to kernels/: the per-level fill functions the dispatcher calls to
// build its tables. Each SIMD translation unit (kernels/cpu/*_avx2.cpp,
// *_avx2vnni.cpp, *_avx512.cpp) is compiled with its own -m flags and overrides the entries it
// has fast kernels for; a level missing from the build (not x86, or a compiler
// without the flags) returns false and leaves the table alone.
#pragma once

#include "kernels/dispatch.h"

namespace strata::kernels::cpu {

namespace avx2 {
bool fill_dot(KernelTable& t);
bool fill_quantize(KernelTable& t);
bool fill_ops(KernelTable& t);
}  // namespace avx2

namespace avx2vnni {  // dot kernels only: quantize and ops are avx2's
bool fill_dot(KernelTable& t);
}  // namespace avx2vnni

namespace avx512 {
bool fill_dot(KernelTable& t);
bool fill_quantize(KernelTable& t);
bool fill_ops(KernelTable& t);
}  // namespace avx512

}  // namespace strata::kernels::cpu
