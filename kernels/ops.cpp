#include "kernels/ops.h"

#include "kernels/dispatch.h"
#include "kernels/ref/ops_ref.h"

namespace strata::kernels::ops {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) { active_kernels().rmsnorm(x, w, y, n, eps); }

void softmax(float* x, int64_t n) { active_kernels().softmax(x, n); }

void swiglu(const float* g, const float* u, float* y, int64_t n) { active_kernels().swiglu(g, u, y, n); }

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
          bool neox) {
    ref::rope(x, n_heads, head_dim, n_rot, pos, freq_base, freq_scale, neox);
}

float dot_f32(const float* a, const float* b, int64_t n) { return active_kernels().dot_f32(a, b, n); }

void axpy(float a, const float* x, float* y, int64_t n) { active_kernels().axpy(a, x, y, n); }

}  // namespace strata::kernels::ops
