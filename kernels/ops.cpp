#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/ref/ops_ref.h"
#include "kernels/ref/router_scored.h"

namespace strata::kernels::ops {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) { active_kernels().rmsnorm(x, w, y, n, eps); }

void softmax(float* x, int64_t n) { active_kernels().softmax(x, n); }

void swiglu(const float* g, const float* u, float* y, int64_t n) { active_kernels().swiglu(g, u, y, n); }

void softmax_sink(float* x, int64_t n, float sink) {
    float m = sink;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    double sum = std::exp(double(sink) - m);
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - m);
        sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu_oai(const float* g, const float* u, float* y, int64_t n, float alpha, float limit) {
    ref::swiglu_oai(g, u, y, n, alpha, limit);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
          bool neox) {
    ref::rope(x, n_heads, head_dim, n_rot, pos, freq_base, freq_scale, neox);
}

void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    ref::rope_yarn_corr_dims(n_rot, n_ctx_orig, freq_base, beta_fast, beta_slow, dims);
}

void rope_table_yarn(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float ext_factor, const float corr[2],
                     float mscale, float* cs, const float* freq_factors) {
    ref::rope_table_yarn(n_rot, pos, freq_base, freq_scale, ext_factor, corr, mscale, cs, freq_factors);
}

void rope_table(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float* cs, const float* freq_factors) {
    ref::rope_table(n_rot, pos, freq_base, freq_scale, cs, freq_factors);
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, bool neox) {
    active_kernels().rope_apply(x, n_heads, head_dim, n_rot, cs, neox);
}

float dot_f32(const float* a, const float* b, int64_t n) { return active_kernels().dot_f32(a, b, n); }

void axpy(float a, const float* x, float* y, int64_t n) { active_kernels().axpy(a, x, y, n); }

void scale_i8(const int8_t* x, float s, float* y, int64_t n) { active_kernels().scale_i8(x, s, y, n); }

void attn_scores(const float* q, int64_t n_q, const float* k, int64_t m, int64_t hd, float scale, float* out,
                 int64_t out_stride, const void* ask, int64_t ask_bytes) {
    active_kernels().attn_scores(q, n_q, k, m, hd, scale, out, out_stride, ask, ask_bytes);
}

void attn_accumulate(const float* p, int64_t p_stride, int64_t n_q, const float* v, int64_t m, int64_t hd,
                     float* out, const void* ask, int64_t ask_bytes) {
    active_kernels().attn_accumulate(p, p_stride, n_q, v, m, hd, out, ask, ask_bytes);
}

void router_topk(float* logits, int64_t n_expert, int64_t k, const uint8_t* allowed, int32_t* ids, float* w) {
    active_kernels().router_topk(logits, n_expert, k, allowed, ids, w);
}

void router_scored(float* logits, int64_t n_expert, int64_t k, bool sigmoid, const float* select_bias, int64_t groups,
                   int64_t groups_used, const uint8_t* allowed, float* sel, int32_t* ids, float* w) {
    ref::router_scored_with([](float* x, int64_t n) { softmax(x, n); }, logits, n_expert, k, sigmoid, select_bias, groups,
                            groups_used, allowed, sel, ids, w);
}

}  // namespace strata::kernels::ops
